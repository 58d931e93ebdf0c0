// Package genie is the Go binding of Genie, semantic GPU disaggregation:
// build a graph of tensor operations with semantic annotations, keep
// weights resident on a device, and submit the graph in-process
// ("embedded") or to a `genie serve` process ("remote", when a master
// address is configured or GENIE_MASTER_ADDR is set).
//
// It sits on the C API (include/genie.h) through a SWIG layer
// (internal/capi). Every handle type (Context, Tensor, Graph, Future,
// Server) has an explicit Close; a finalizer releases a handle that was
// never closed, but only as a backstop against leaks — close what you
// open. A closed handle answers ErrInvalidHandle, never a crash.
//
// Errors are *Error values carrying the status code and the library's
// detail message; use errors.Is(err, genie.ErrUnknownOp) and errors.As.
//
// Threads: a Context, Tensor, Future and Server may be used from several
// goroutines at once; a Graph serializes its own calls (the C graph is not
// thread-safe, so this package locks it).
package genie

import (
	"runtime"
	"strings"
	"sync"
	"time"

	"genie.dev/genie/internal/capi"
)

// Version is the library's version string ("0.2.0").
func Version() string { return capi.Genie_version_string() }

// ABIVersion is the ABI version of the library loaded at run time.
func ABIVersion() int { return int(capi.Genie_abi_version()) }

// TraceStart records every graph this process executes, the scheduler's
// decisions and the transfers, and writes them to path as Chrome / Perfetto
// trace-event JSON when TraceStop is called (genie_trace_start). One trace
// per process: the same path again does nothing, another one is
// ErrInvalidArgument.
func TraceStart(path string) error {
	if path == "" {
		return errorf(StatusInvalidArgument, "genie_trace_start", "the trace path is empty")
	}
	return call("genie_trace_start", func() int { return capi.Genie_trace_start(path) })
}

// TraceStop writes the trace TraceStart began and stops recording; nothing
// when none is recorded (genie_trace_stop).
func TraceStop() error {
	return call("genie_trace_stop", func() int { return capi.Genie_trace_stop() })
}

// DType is an element type. The values are genie_dtype_t's, frozen by the
// header.
type DType int32

const (
	F32  DType = 1
	F16  DType = 2 // storage type; arithmetic runs in f32
	BF16 DType = 3 // storage type; arithmetic runs in f32
	I32  DType = 4
	I64  DType = 5
	Bool DType = 6 // one byte per element, 0 or 1
)

// Size is the size in bytes of one element (0 for an invalid dtype).
func (d DType) Size() int { return int(capi.Genie_dtype_size(capi.Enum_SS_genie_dtype(d))) }

// String is the short name ("f32", "bf16" ...), or "invalid".
func (d DType) String() string { return capi.Genie_dtype_name(capi.Enum_SS_genie_dtype(d)) }

// Phase is the execution phase of a node (semantic annotation).
type Phase int32

const (
	PhaseUnknown  Phase = 0
	PhasePrefill  Phase = 1
	PhaseDecode   Phase = 2
	PhaseForward  Phase = 3
	PhaseBackward Phase = 4
)

// Modality is the input modality a node works on (semantic annotation).
type Modality int32

const (
	ModalityUnknown Modality = 0
	ModalityText    Modality = 1
	ModalityVision  Modality = 2
	ModalityAudio   Modality = 3
)

// Role says what a value in a graph is (semantic annotation).
type Role int32

const (
	RoleUnspecified Role = 0
	RoleWeight      Role = 1
	RoleActivation  Role = 2
	RoleKVCache     Role = 3
	RoleInput       Role = 4
	RoleOutput      Role = 5
)

// MaxDims is the most dimensions a tensor or graph value may have.
const MaxDims = 8

// Options configure a Context (or a Server). The zero value means the
// library's defaults, which the GENIE_* environment variables override
// unless IgnoreEnv is set.
type Options struct {
	MasterAddr string        // "" (default): embedded mode
	MasterPort int           // 0: default (5555)
	NodeID     string        // "": generated
	Timeout    time.Duration // 0: default (30 s)
	NumThreads int           // 0: hardware concurrency
	AuthToken  string        // "": none
	IgnoreEnv  bool          // do not let GENIE_* variables override these

	// TLS 1.3 (docs/security.md), PEM file paths. A context speaks TLS when
	// TLSCA is set (the server's certificate must chain to it and carry
	// TLSServerName, default the host dialled); TLSCert and TLSKey are its
	// client certificate. A Server speaks only TLS with TLSCert and TLSKey,
	// and with TLSCA requires client certificates chained to it.
	TLSCA         string
	TLSCert       string
	TLSKey        string
	TLSServerName string

	// Cluster timers (docs/cluster.md), each 10 ms .. 24 h; 0: default.
	// A cluster on etcd (docs/cluster.md): its client URLs (a server
	// registers there; a context without MasterAddr enters through a server
	// registered there), the cluster's namespace ("": "default") and the
	// TTL of a server's lease (0: 10 s).
	EtcdEndpoints []string
	Cluster       string
	EtcdLeaseTTL  time.Duration

	HeartbeatInterval time.Duration // heartbeats to the master (10 s)
	HeartbeatTimeout  time.Duration // silent this long: lost (60 s)
	GPUPollInterval   time.Duration // NVML polls (5 s)
	HealthInterval    time.Duration // health checks (30 s)
	// DisableGraphDeltas sends every graph in full (remote mode; by default
	// a graph submitted again is sent as its changes only).
	DisableGraphDeltas bool
	// DisableSemantics runs in blind mode (remote mode): semantics-blind
	// disaggregation, one remote call per operation, weights and KV caches
	// sent with every submission; for comparison (genie_config_set_semantics).
	DisableSemantics bool

	// Settings sets any other setting clients read (docs/configuration.md)
	// by name, after the fields above: {"max_message_bytes": 1 << 20}.
	// A server's own settings go to NewServerWith.
	Settings Settings
}

// newConfig builds a genie_config_t from opts; the library validates each
// value. The caller destroys it.
func newConfig(opts *Options) (uintptr, error) {
	var cfg uintptr
	if err := call("genie_config_create", func() int { return capi.Genie_config_create(&cfg) }); err != nil {
		return 0, err
	}
	if err := checkNames("genie_config", opts.MasterAddr, opts.NodeID, opts.Cluster, strings.Join(opts.EtcdEndpoints, ","), opts.AuthToken, opts.TLSCA, opts.TLSCert,
		opts.TLSKey, opts.TLSServerName); err != nil {
		capi.Genie_config_destroy(cfg)
		return 0, err
	}
	type setter struct {
		op  string
		set func() int
	}
	var setters []setter
	if opts.MasterAddr != "" {
		setters = append(setters, setter{"genie_config_set_master_addr", func() int { return capi.Genie_config_set_master_addr(cfg, opts.MasterAddr) }})
	}
	if opts.MasterPort != 0 {
		setters = append(setters, setter{"genie_config_set_master_port", func() int { return capi.Genie_config_set_master_port(cfg, opts.MasterPort) }})
	}
	if opts.NodeID != "" {
		setters = append(setters, setter{"genie_config_set_node_id", func() int { return capi.Genie_config_set_node_id(cfg, opts.NodeID) }})
	}
	if opts.Timeout != 0 {
		setters = append(setters, setter{"genie_config_set_timeout_ms", func() int { return capi.Genie_config_set_timeout_ms(cfg, opts.Timeout.Milliseconds()) }})
	}
	if opts.NumThreads != 0 {
		setters = append(setters, setter{"genie_config_set_num_threads", func() int { return capi.Genie_config_set_num_threads(cfg, opts.NumThreads) }})
	}
	if opts.AuthToken != "" {
		setters = append(setters, setter{"genie_config_set_auth_token", func() int { return capi.Genie_config_set_auth_token(cfg, opts.AuthToken) }})
	}
	if opts.TLSCA != "" {
		setters = append(setters, setter{"genie_config_set_tls_ca", func() int { return capi.Genie_config_set_tls_ca(cfg, opts.TLSCA) }})
	}
	if opts.TLSCert != "" || opts.TLSKey != "" {
		setters = append(setters, setter{"genie_config_set_tls_cert", func() int { return capi.Genie_config_set_tls_cert(cfg, opts.TLSCert, opts.TLSKey) }})
	}
	if len(opts.EtcdEndpoints) > 0 {
		list := strings.Join(opts.EtcdEndpoints, ",")
		setters = append(setters, setter{"genie_config_set_etcd_endpoints", func() int { return capi.Genie_config_set_etcd_endpoints(cfg, list) }})
	}
	if opts.Cluster != "" {
		setters = append(setters, setter{"genie_config_set_cluster", func() int { return capi.Genie_config_set_cluster(cfg, opts.Cluster) }})
	}
	if opts.EtcdLeaseTTL != 0 {
		setters = append(setters, setter{"genie_config_set_etcd_lease_ttl_ms", func() int { return capi.Genie_config_set_etcd_lease_ttl_ms(cfg, opts.EtcdLeaseTTL.Milliseconds()) }})
	}
	if opts.TLSServerName != "" {
		setters = append(setters, setter{"genie_config_set_tls_server_name", func() int { return capi.Genie_config_set_tls_server_name(cfg, opts.TLSServerName) }})
	}
	for _, d := range []struct {
		op  string
		v   time.Duration
		set func(uintptr, int64) int
	}{
		{"genie_config_set_heartbeat_interval_ms", opts.HeartbeatInterval, capi.Genie_config_set_heartbeat_interval_ms},
		{"genie_config_set_heartbeat_timeout_ms", opts.HeartbeatTimeout, capi.Genie_config_set_heartbeat_timeout_ms},
		{"genie_config_set_gpu_poll_interval_ms", opts.GPUPollInterval, capi.Genie_config_set_gpu_poll_interval_ms},
		{"genie_config_set_health_interval_ms", opts.HealthInterval, capi.Genie_config_set_health_interval_ms},
	} {
		if d.v != 0 {
			d := d
			setters = append(setters, setter{d.op, func() int { return d.set(cfg, d.v.Milliseconds()) }})
		}
	}
	if opts.DisableGraphDeltas {
		setters = append(setters, setter{"genie_config_set_graph_deltas", func() int { return capi.Genie_config_set_graph_deltas(cfg, 0) }})
	}
	if opts.DisableSemantics {
		setters = append(setters, setter{"genie_config_set_semantics", func() int { return capi.Genie_config_set_semantics(cfg, 0) }})
	}
	if opts.IgnoreEnv {
		setters = append(setters, setter{"genie_config_set_use_env", func() int { return capi.Genie_config_set_use_env(cfg, 0) }})
	}
	for _, s := range setters {
		if err := call(s.op, s.set); err != nil {
			capi.Genie_config_destroy(cfg)
			return 0, err
		}
	}
	if err := applySettings("genie_config", cfg, opts.Settings,
		capi.Genie_config_set_int, capi.Genie_config_set_string); err != nil {
		capi.Genie_config_destroy(cfg)
		return 0, err
	}
	return cfg, nil
}

// Context is a running Genie instance: embedded, or connected to a server.
type Context struct {
	h      handle
	subsMu sync.Mutex
	subs   map[*Subscription]struct{} // live subscriptions (Close releases them)
}

// Init creates a context. opts may be nil (defaults plus environment).
// Without a master address graphs run in this process.
func Init(opts *Options) (*Context, error) {
	var cfg uintptr
	if opts != nil {
		var err error
		if cfg, err = newConfig(opts); err != nil {
			return nil, err
		}
		defer capi.Genie_config_destroy(cfg)
	}
	var p uintptr
	err := call("genie_init", func() int {
		return capi.Genie_init_abi(uint(capi.GENIE_ABI_VERSION), cfg, &p)
	})
	if err != nil {
		return nil, err
	}
	c := &Context{h: handle{p: p, kind: "context"}}
	runtime.SetFinalizer(c, (*Context).Close)
	return c, nil
}

// Close shuts the context down: waits for graphs still running, then
// releases it. Tensors and futures of the context must still be closed;
// their other calls fail with ErrShutdown. Closing twice does nothing.
func (c *Context) Close() error {
	runtime.SetFinalizer(c, nil)
	c.h.close(func(p uintptr) { capi.Genie_shutdown(p) })
	// Subscriptions end with the context: their callbacks no longer run.
	c.subsMu.Lock()
	subs := c.subs
	c.subs = nil
	c.subsMu.Unlock()
	for s := range subs {
		s.release()
	}
	return nil
}

// IsEmbedded reports whether graphs run in this process (false: on a
// server). False for a closed context.
func (c *Context) IsEmbedded() bool {
	p, err := c.h.acquire("genie_context_is_embedded")
	if err != nil {
		return false
	}
	defer c.h.mu.RUnlock()
	return capi.Genie_context_is_embedded(p) == 1
}

// NodeID is the node id of this context ("" for a closed context).
func (c *Context) NodeID() string {
	p, err := c.h.acquire("genie_context_node_id")
	if err != nil {
		return ""
	}
	defer c.h.mu.RUnlock()
	return capi.Genie_context_node_id(p)
}

// IsConnected reports whether calls reach where graphs run: always true
// in embedded mode; in remote mode true while the connection to the server
// is up, false while it is lost (the context reconnects in the background)
// or after reconnecting gave up. It never waits for the server.
func (c *Context) IsConnected() (bool, error) {
	const op = "genie_context_is_connected"
	p, err := c.h.acquire(op)
	if err != nil {
		return false, err
	}
	defer c.h.mu.RUnlock()
	var v int32
	err = call(op, func() int { return capi.Genie_context_is_connected(p, &v) })
	return v == 1, err
}

// ServerInfo returns the server's statistics as JSON (remote mode only:
// ErrUnsupported embedded).
func (c *Context) ServerInfo() (string, error) {
	return c.jsonOf("genie_context_server_info", capi.Genie_context_server_info)
}

// LostTensors returns, as JSON, the tensors lost with the context's server
// (genie_context_lost_tensors): {"server", "address", "session", "tensors":
// [{"name", "id", "server", "device", "dtype", "shape", "nbytes"}]}. A lost
// tensor's next use fails with ErrConnection naming it; Init again reaches
// another server.
func (c *Context) LostTensors() (string, error) {
	return c.jsonOf("genie_context_lost_tensors", capi.Genie_context_lost_tensors)
}

// jsonOf returns the JSON text that the context function fn (named op)
// writes, freed after copying.
func (c *Context) jsonOf(op string, fn func(uintptr, *uintptr) int) (string, error) {
	p, err := c.h.acquire(op)
	if err != nil {
		return "", err
	}
	defer c.h.mu.RUnlock()
	var s uintptr
	if err := call(op, func() int { return fn(p, &s) }); err != nil {
		return "", err
	}
	return takeCString(s, int(capi.Genie_go_strlen(s))), nil
}

// takeCString copies n bytes of a string Genie allocated and frees it.
func takeCString(s uintptr, n int) string {
	b := make([]byte, n)
	capi.Genie_go_copy(b, s)
	capi.Genie_free(s)
	return string(b)
}

// Server executes the graphs of remote clients in this process (what
// `genie serve` runs).
type Server struct{ h handle }

// NewServer listens on host ("" means 127.0.0.1) and port (0 picks a free
// one: see Port) and serves at once on its own thread. opts may be nil; of
// it the node id, worker threads, auth token, heartbeat interval and
// timeout (its sweep of silent nodes) and IgnoreEnv apply.
func NewServer(opts *Options, host string, port int) (*Server, error) {
	return newServer(opts, host, "genie_server_create", func(cfg uintptr, p *uintptr) int {
		return capi.Genie_server_create(cfg, host, port, p)
	})
}

// newServer creates a server with create(config, out) on the
// genie_config_t made from opts (0 when opts is nil).
func newServer(opts *Options, host, op string, create func(uintptr, *uintptr) int) (*Server, error) {
	var cfg uintptr
	if opts != nil {
		var err error
		if cfg, err = newConfig(opts); err != nil {
			return nil, err
		}
		defer capi.Genie_config_destroy(cfg)
	}
	if err := checkNames(op, host); err != nil {
		return nil, err
	}
	var p uintptr
	if err := call(op, func() int { return create(cfg, &p) }); err != nil {
		return nil, err
	}
	s := &Server{h: handle{p: p, kind: "server"}}
	runtime.SetFinalizer(s, (*Server).Close)
	return s, nil
}

// Port is the TCP port the server listens on.
func (s *Server) Port() (int, error) {
	const op = "genie_server_port"
	p, err := s.h.acquire(op)
	if err != nil {
		return 0, err
	}
	defer s.h.mu.RUnlock()
	var port int32
	if err := call(op, func() int { return capi.Genie_server_port(p, &port) }); err != nil {
		return 0, err
	}
	return int(port), nil
}

// Close stops the server (graphs in flight finish, connections close) and
// releases it. Closing twice does nothing.
func (s *Server) Close() error {
	runtime.SetFinalizer(s, nil)
	s.h.close(func(p uintptr) { capi.Genie_server_destroy(p) })
	return nil
}
