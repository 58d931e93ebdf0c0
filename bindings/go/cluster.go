package genie

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/cgo"
	"strings"
	"sync"

	"genie.dev/genie/internal/capi"
)

// EventType is a cluster event (genie_event_type_t), one bit each, so that
// a subscription mask combines them with |.
type EventType uint32

const (
	EventNodeJoined      EventType = 1 << 0 // a node appeared in the view
	EventNodeLost        EventType = 1 << 1 // silent past the heartbeat timeout
	EventNodeRecovered   EventType = 1 << 2 // a lost node answers again
	EventGPUAvailable    EventType = 1 << 3 // utilisation <= 90 %
	EventGPUUnavailable  EventType = 1 << 4 // utilisation > 90 %
	EventGPUOverheated   EventType = 1 << 5 // temperature crossed above 85 C
	EventHealthChanged   EventType = 1 << 6 // this node's health level changed
	EventBackendSelected EventType = 1 << 7 // the data-plane backend, and why
	EventAll             EventType = 0xff
)

var eventNames = []string{"NODE_JOINED", "NODE_LOST", "NODE_RECOVERED", "GPU_AVAILABLE",
	"GPU_UNAVAILABLE", "GPU_OVERHEATED", "HEALTH_CHANGED", "BACKEND_SELECTED"}

// String names the bits set ("NODE_LOST", "NODE_LOST|HEALTH_CHANGED").
func (t EventType) String() string {
	var parts []string
	for i, n := range eventNames {
		if t&(1<<uint(i)) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := t &^ EventAll; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, "|")
}

// Event is one cluster event (docs/cluster.md, Events): its type, its JSON
// text, and that JSON decoded (every event has "type" and "time_ms"; NODE_*
// events have "node" and "reason", BACKEND_SELECTED "backend" and "reason",
// HEALTH_CHANGED "from", "to" and "reasons" ...).
type Event struct {
	Type   EventType
	TimeMs int64
	Fields map[string]interface{}
	JSON   string
}

// NodeInfo is a node of the cluster state (docs/cluster.md, NODE).
type NodeInfo struct {
	ID              string                   `json:"id"`
	Host            string                   `json:"host"`
	Address         string                   `json:"address"`
	Role            string                   `json:"role"`
	Backend         string                   `json:"backend"`
	Status          string                   `json:"status"`
	LastHeartbeatMs int64                    `json:"last_heartbeat_ms"`
	GPUs            []map[string]interface{} `json:"gpus"`
	GPUReason       string                   `json:"gpu_reason"`
	Health          string                   `json:"health"`
	HealthReasons   []string                 `json:"health_reasons"`
}

// MasterInfo is the master as a remote context sees it.
type MasterInfo struct {
	Address         string  `json:"address"`
	NodeID          string  `json:"node_id"`
	Status          string  `json:"status"`
	Session         string  `json:"session"`
	RTTMicros       float64 `json:"rtt_us"`
	LastAnswerMsAgo int64   `json:"last_answer_ms_ago"`
}

// BackendSelection is the data-plane backend selected, and why.
type BackendSelection struct {
	Requested string `json:"requested"`
	Selected  string `json:"selected"`
	Reason    string `json:"reason"`
	Error     string `json:"error"`
}

// InitPhase is one timed phase of genie_init.
type InitPhase struct {
	Name       string  `json:"name"`
	DurationMs float64 `json:"duration_ms"`
	Detail     string  `json:"detail"`
}

// Health is a node's health level ("HEALTHY", "DEGRADED", "UNHEALTHY",
// "CRITICAL") and its reasons.
type Health struct {
	Level   string   `json:"level"`
	Reasons []string `json:"reasons"`
}

// ClusterState is genie_cluster_state decoded (docs/cluster.md): JSON keeps
// the whole text, Discovery the discovery part as decoded JSON.
type ClusterState struct {
	Mode       string                 `json:"mode"` // "embedded" or "remote"
	Node       NodeInfo               `json:"node"`
	Nodes      []NodeInfo             `json:"nodes"`
	Master     *MasterInfo            `json:"master"` // nil embedded
	Backend    BackendSelection       `json:"backend"`
	Discovery  map[string]interface{} `json:"discovery"`
	InitPhases []InitPhase            `json:"init_phases"`
	InitMs     float64                `json:"init_ms"`
	Health     Health                 `json:"health"`
	Intervals  map[string]int64       `json:"intervals"`
	Counters   map[string]int64       `json:"counters"`
	JSON       string                 `json:"-"`
}

// takeJSON runs a C call that returns JSON text through *out, copies the
// text and frees it.
func takeJSON(op string, f func(out *uintptr) int) (string, error) {
	var s uintptr
	if err := call(op, func() int { return f(&s) }); err != nil {
		return "", err
	}
	return takeCString(s, int(capi.Genie_go_strlen(s))), nil
}

func decode(op, text string, v interface{}) error {
	if err := json.Unmarshal([]byte(text), v); err != nil {
		return errorf(StatusInternal, op, "cannot decode the library's JSON: %v", err)
	}
	return nil
}

// ClusterState returns the cluster as this context sees it: this node, the
// nodes known, the master (remote mode), the backend selected and why,
// discovery, init phases, health, intervals and counters.
func (c *Context) ClusterState() (*ClusterState, error) {
	const op = "genie_cluster_state"
	p, err := c.h.acquire(op)
	if err != nil {
		return nil, err
	}
	text, err := takeJSON(op, func(out *uintptr) int { return capi.Genie_cluster_state(p, out) })
	c.h.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	st := &ClusterState{JSON: text}
	if err := decode(op, text, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Probe is the result of one discovery probe.
type Probe struct {
	Available bool   `json:"available"`
	Reason    string `json:"reason"`
}

// TCPProbe is the reachability of a Genie server (Discover with a host).
type TCPProbe struct {
	Host         string  `json:"host"`
	Port         int     `json:"port"`
	Reachable    bool    `json:"reachable"`
	Reason       string  `json:"reason"`
	ConnectUs    float64 `json:"connect_us"`
	ServerNodeID string  `json:"server_node_id"`
}

// Discovery is genie_discover decoded (docs/cluster.md); JSON keeps the
// whole text (devices, ports, round-trip times, backend lists).
type Discovery struct {
	RDMA       Probe            `json:"rdma"`
	DPDK       Probe            `json:"dpdk"`
	DPDKGPUDev Probe            `json:"dpdk_gpudev"`
	GPUs       Probe            `json:"gpus"`
	TCP        *TCPProbe        `json:"tcp"` // nil without a host
	Selection  BackendSelection `json:"selection"`
	DurationMs float64          `json:"duration_ms"`
	JSON       string           `json:"-"`
}

// DiscoverOptions configure Discover. The zero value probes this machine
// only, without the DPDK EAL probe.
type DiscoverOptions struct {
	Options   *Options // timeout, IgnoreEnv ...; nil: defaults plus environment
	Host      string   // a Genie server to probe ("" : none)
	Port      int      // its port (0: 5555)
	DPDKProbe bool     // run the full DPDK probe (EAL in a forked child, ~0.5 s)
}

// Discover probes the network without a context: RDMA devices, DPDK,
// local GPUs (NVML) and, with a host, the TCP reachability of the Genie
// server there, then the backend the configuration would select and why.
// A missing library or device, or an unreachable host, is reported in the
// result, not as an error.
func Discover(d *DiscoverOptions) (*Discovery, error) {
	const op = "genie_discover"
	if d == nil {
		d = &DiscoverOptions{}
	}
	opts := Options{}
	if d.Options != nil {
		opts = *d.Options
	}
	if err := checkNames(op, d.Host); err != nil {
		return nil, err
	}
	cfg, err := newConfig(&opts)
	if err != nil {
		return nil, err
	}
	defer capi.Genie_config_destroy(cfg)
	probe := 0
	if d.DPDKProbe {
		probe = 1
	}
	if err := call("genie_config_set_dpdk_probe", func() int { return capi.Genie_config_set_dpdk_probe(cfg, probe) }); err != nil {
		return nil, err
	}
	port := d.Port
	if d.Host != "" && port == 0 {
		port = 5555
	}
	text, err := takeJSON(op, func(out *uintptr) int { return capi.Genie_discover(cfg, d.Host, int(port), out) })
	if err != nil {
		return nil, err
	}
	res := &Discovery{JSON: text}
	if err := decode(op, text, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Members is genie_cluster_members decoded: the live members of a cluster
// on etcd (docs/cluster.md, "A cluster on etcd"). Each member is the status
// it registered (id, role, listen, devices, gpus, health, backends) as a
// JSON object; JSON keeps the whole text.
type Members struct {
	Store    string                   `json:"store"`
	Cluster  string                   `json:"cluster"`
	Revision int64                    `json:"revision"`
	Members  []map[string]interface{} `json:"members"`
	JSON     string                   `json:"-"`
}

// ClusterMembers lists the live members registered in the etcd cluster of
// opts (EtcdEndpoints and Cluster; nil: GENIE_ETCD_ENDPOINTS and
// GENIE_CLUSTER). A ConnectionError names the endpoints when no etcd
// answers; Unsupported when the etcd store plugin is not installed.
func ClusterMembers(opts *Options) (*Members, error) {
	const op = "genie_cluster_members"
	o := Options{}
	if opts != nil {
		o = *opts
	}
	cfg, err := newConfig(&o)
	if err != nil {
		return nil, err
	}
	defer capi.Genie_config_destroy(cfg)
	text, err := takeJSON(op, func(out *uintptr) int { return capi.Genie_cluster_members(cfg, out) })
	if err != nil {
		return nil, err
	}
	res := &Members{JSON: text}
	if err := decode(op, text, res); err != nil {
		return nil, err
	}
	return res, nil
}

// PlanNode is one node of a plan, in execution order.
type PlanNode struct {
	Name       string  `json:"name"`
	Op         string  `json:"op"`
	Device     string  `json:"device"`
	Rule       string  `json:"rule"` // kv_cache_colocation, resident_weight, only_device, min_finish_time, stage_merge
	Why        string  `json:"why"`
	Flops      float64 `json:"flops"`
	Bytes      float64 `json:"bytes"`
	PredictedS float64 `json:"predicted_s"`
	StartS     float64 `json:"start_s"`
	FinishS    float64 `json:"finish_s"`
	Pattern    string  `json:"pattern"`
}

// PlanDevice is a device of a plan with its predicted peak memory.
type PlanDevice struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	PeakBytes   int64  `json:"peak_bytes"`
	BudgetBytes int64  `json:"budget_bytes"`
}

// Plan is genie_plan_explain decoded (docs/scheduler.md); Analysis and
// Transfers are the decoded JSON, JSON the whole text.
type Plan struct {
	Graph           string                   `json:"graph"`
	PredictedTotalS float64                  `json:"predicted_total_s"`
	Analysis        map[string]interface{}   `json:"analysis"`
	Devices         []PlanDevice             `json:"devices"`
	Nodes           []PlanNode               `json:"nodes"`
	Transfers       []map[string]interface{} `json:"transfers"`
	JSON            string                   `json:"-"`
}

// PlanExplain plans g as a submission on c would, without running it: where
// each node would run and why. Inputs are planned as not yet resident, so
// they need static shapes; g is not changed.
func (c *Context) PlanExplain(g *Graph) (*Plan, error) {
	const op = "genie_plan_explain"
	p, err := c.h.acquire(op)
	if err != nil {
		return nil, err
	}
	defer c.h.mu.RUnlock()
	gp, err := g.h.acquireExclusive(op)
	if err != nil {
		return nil, err
	}
	text, err := takeJSON(op, func(out *uintptr) int { return capi.Genie_plan_explain(p, gp, out) })
	g.h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	plan := &Plan{JSON: text}
	if err := decode(op, text, plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// PlanExplainBound plans g bound to inputs exactly as Submit would bind
// them, without running it: each input where its tensor lives (a tensor on
// a worker pins the nodes kept with it), dynamic dimensions at the bound
// sizes. No tensor bytes move; g is not changed.
func (c *Context) PlanExplainBound(g *Graph, inputs map[string]*Tensor) (*Plan, error) {
	const op = "genie_plan_explain_bound"
	names := make([]string, 0, len(inputs))
	tensors := make([]*Tensor, 0, len(inputs))
	for name, t := range inputs {
		names = append(names, name)
		tensors = append(tensors, t)
	}
	var s uintptr
	err := c.withBindings(op, g, names, tensors, func(cp, gp uintptr, joined string, ptrs []uintptr) int {
		return capi.Genie_plan_explain_bound(cp, gp, joined, ptrs, int64(len(ptrs)), &s)
	})
	if err != nil {
		return nil, err
	}
	plan := &Plan{JSON: takeCString(s, int(capi.Genie_go_strlen(s)))}
	if err := decode(op, plan.JSON, plan); err != nil {
		return nil, err
	}
	return plan, nil
}

// Subscription is a subscription to cluster events (Context.Subscribe).
type Subscription struct {
	ctx    *Context
	id     uint64
	handle cgo.Handle
	mask   EventType

	mu    sync.Mutex
	ended bool
	panic interface{}
}

// Mask is the subscribed event types.
func (s *Subscription) Mask() EventType { return s.mask }

// Panic is the first value a panicking callback raised (nil if none): a
// panic in the callback is recovered (and reported on stderr) so that it
// never unwinds into the library's thread; delivery goes on.
func (s *Subscription) Panic() interface{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.panic
}

// Subscribe calls fn for each cluster event whose bit is in mask
// (EventAll for all). fn runs on the context's loop thread (not a
// goroutine of yours), one event at a time, in order; keep it short:
// heartbeats wait while it runs. It may call Close on its own subscription
// and ClusterState; it must not Close the context. With
// EventBackendSelected in the mask the backend selected at init is
// delivered once, right after subscribing. The subscription lasts until
// Close, or until the context is closed.
// Errors: ErrInvalidArgument (fn nil, mask 0 or with bits outside
// EventAll), ErrInvalidHandle (closed context), ErrShutdown.
func (c *Context) Subscribe(mask EventType, fn func(Event)) (*Subscription, error) {
	const op = "genie_subscribe"
	if fn == nil {
		return nil, errorf(StatusInvalidArgument, op, "the callback is nil")
	}
	s := &Subscription{ctx: c, mask: mask}
	deliver := capi.EventFunc(func(typ uint32, text string) {
		defer func() {
			if r := recover(); r != nil {
				s.mu.Lock()
				if s.panic == nil {
					s.panic = r
				}
				s.mu.Unlock()
				fmt.Fprintf(os.Stderr, "genie: event callback panicked (recovered): %v\n", r)
			}
		}()
		ev := Event{Type: EventType(typ), JSON: text}
		if err := json.Unmarshal([]byte(text), &ev.Fields); err == nil {
			if t, ok := ev.Fields["time_ms"].(float64); ok {
				ev.TimeMs = int64(t)
			}
		}
		fn(ev)
	})
	s.handle = cgo.NewHandle(deliver)
	p, err := c.h.acquire(op)
	if err != nil {
		s.handle.Delete()
		return nil, err
	}
	// The id lands in a variable of its own: a pointer into s (which holds Go
	// pointers) may not be passed to C.
	var id uint64
	err = call(op, func() int { return capi.Genie_go_subscribe(p, uint(mask), uintptr(s.handle), &id) })
	if err == nil {
		s.id = id
		c.subsMu.Lock()
		if c.subs == nil {
			c.subs = make(map[*Subscription]struct{})
		}
		c.subs[s] = struct{}{}
		c.subsMu.Unlock()
	}
	c.h.mu.RUnlock()
	if err != nil {
		s.handle.Delete()
		return nil, err
	}
	return s, nil
}

// Close ends the subscription: once it returns the callback never runs
// again (it waits for a delivery in progress, unless called from the
// callback itself). Closing twice, or after the context was closed, does
// nothing.
func (s *Subscription) Close() error {
	c := s.ctx
	const op = "genie_unsubscribe"
	p, err := c.h.acquire(op)
	if err != nil {
		return nil // the context is closed (or closing): it ends the subscription
	}
	defer c.h.mu.RUnlock()
	c.subsMu.Lock()
	_, live := c.subs[s]
	delete(c.subs, s)
	c.subsMu.Unlock()
	if !live {
		return nil
	}
	err = call(op, func() int { return capi.Genie_unsubscribe(p, s.id) })
	s.release()
	return err
}

// release deletes the handle once the library no longer calls it.
func (s *Subscription) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		s.handle.Delete()
	}
}
