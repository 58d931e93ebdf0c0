//! Rust binding of Genie, semantic GPU disaggregation.
//!
//! Build a [`Graph`] of tensor operations with semantic annotations, keep
//! weights resident as [`Tensor`]s, and submit the graph on a [`Context`]:
//! in-process ("embedded"), or on a `genie serve` process ("remote") when a
//! master address is configured or `GENIE_MASTER_ADDR` is set. Submission
//! returns a [`Future`] holding the outputs.
//!
//! Every fallible call returns [`Result<T, genie::Error>`](Error); an
//! [`Error`] carries its [`ErrorKind`], the numeric status code and the
//! library's detail message. Handles are released on `Drop`.
//!
//! Threads, as include/genie.h promises: [`Context`], [`Tensor`] and
//! [`Future`] are `Send + Sync`; a [`Graph`] is `Send` but not `Sync`
//! (build it on one thread, then submit it from any), and so is a
//! [`Server`]:
//!
//! ```no_run
//! fn shared<T: Sync>() {}
//! shared::<genie::Context>(); // compiles: the two below must not
//! ```
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<genie::Graph>();
//! ```
//!
//! ```compile_fail
//! fn shared<T: Sync>() {}
//! shared::<genie::Server>();
//! ```
//!
//! [`ffi`] holds the raw declarations, generated from the header by
//! `bindings/rust/regen-ffi.sh`.

#[rustfmt::skip]
pub mod ffi;

mod error;
mod graph;
mod onnx;
mod settings;
mod tensor;

pub use cluster::{cluster_members, discover, Event, EventKind, EventMask, Subscription};
pub use error::{Error, ErrorKind, Result};
pub use graph::{Graph, Node};
pub use onnx::{load_op_library, op_registered, OnnxModel};
pub use settings::{ServerConfig, SettingValue};
pub use tensor::{Element, Tensor, TensorInfo};

use std::ffi::{CStr, CString};
use std::ptr::{self, NonNull};
use std::time::Duration;

use error::check;

/// Runtime library version string, e.g. "0.1.0".
pub fn version() -> String {
    // SAFETY: a static string, never NULL.
    unsafe { CStr::from_ptr(ffi::genie_version_string()) }.to_string_lossy().into_owned()
}

/// ABI version of the library loaded at run time.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments, never fails.
    unsafe { ffi::genie_abi_version() }
}

/// Records every graph this process executes, the scheduler's decisions and
/// the transfers, and writes them to `path` as Chrome / Perfetto trace-event
/// JSON when [`trace_stop`] is called (genie_trace_start). One trace per
/// process: the same path again does nothing, another is InvalidArgument.
pub fn trace_start(path: &str) -> Result<()> {
    let p = cstring("trace path", path)?;
    // SAFETY: `p` is a NUL-terminated string that outlives the call.
    check(unsafe { ffi::genie_trace_start(p.as_ptr()) })
}

/// Writes the trace [`trace_start`] began and stops recording; nothing when
/// none is recorded (genie_trace_stop).
pub fn trace_stop() -> Result<()> {
    // SAFETY: no arguments.
    check(unsafe { ffi::genie_trace_stop() })
}

/// Converts a Rust string for C; a NUL byte is an InvalidArgument error.
pub(crate) fn cstring(what: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(ErrorKind::InvalidArgument, format!("{} {:?} contains a NUL byte", what, s)))
}

/// An optional string for C: None is NULL.
pub(crate) fn opt_cstring(what: &str, s: Option<&str>) -> Result<Option<CString>> {
    s.map(|s| cstring(what, s)).transpose()
}

pub(crate) fn opt_ptr(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(ptr::null(), |c| c.as_ptr())
}

macro_rules! c_enum {
    ($(#[$m:meta])* $name:ident : $raw:ty { $($(#[$vm:meta])* $variant:ident = $value:path),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name { $($(#[$vm])* $variant),+ }
        impl $name {
            /// The C enumeration value.
            pub fn raw(self) -> $raw { match self { $($name::$variant => $value),+ } }
            /// The variant of a C enumeration value, if this crate knows it.
            pub fn from_raw(v: $raw) -> Option<$name> {
                $(if v == $value { return Some($name::$variant); })+
                None
            }
        }
    };
}

mod cluster;

c_enum! {
    /// Element types. F16 and BF16 are storage types (arithmetic in f32);
    /// Bool is one byte per element.
    #[non_exhaustive]
    DType: ffi::genie_dtype_t {
        F32 = ffi::genie_dtype_GENIE_DTYPE_F32,
        F16 = ffi::genie_dtype_GENIE_DTYPE_F16,
        BF16 = ffi::genie_dtype_GENIE_DTYPE_BF16,
        I32 = ffi::genie_dtype_GENIE_DTYPE_I32,
        I64 = ffi::genie_dtype_GENIE_DTYPE_I64,
        Bool = ffi::genie_dtype_GENIE_DTYPE_BOOL,
    }
}

impl DType {
    /// Size in bytes of one element.
    pub fn size(self) -> usize {
        // SAFETY: a plain lookup.
        unsafe { ffi::genie_dtype_size(self.raw()) }
    }

    /// Short name: "f32", "bf16" ...
    pub fn name(self) -> &'static str {
        // SAFETY: a static string, never NULL.
        unsafe { CStr::from_ptr(ffi::genie_dtype_name(self.raw())) }.to_str().unwrap_or("invalid")
    }
}

c_enum! {
    /// Execution phase of a node (semantic annotation).
    #[non_exhaustive]
    Phase: ffi::genie_phase_t {
        Unknown = ffi::genie_phase_GENIE_PHASE_UNKNOWN,
        Prefill = ffi::genie_phase_GENIE_PHASE_PREFILL,
        Decode = ffi::genie_phase_GENIE_PHASE_DECODE,
        Forward = ffi::genie_phase_GENIE_PHASE_FORWARD,
        Backward = ffi::genie_phase_GENIE_PHASE_BACKWARD,
    }
}

c_enum! {
    /// Input modality a node works on (semantic annotation).
    #[non_exhaustive]
    Modality: ffi::genie_modality_t {
        Unknown = ffi::genie_modality_GENIE_MODALITY_UNKNOWN,
        Text = ffi::genie_modality_GENIE_MODALITY_TEXT,
        Vision = ffi::genie_modality_GENIE_MODALITY_VISION,
        Audio = ffi::genie_modality_GENIE_MODALITY_AUDIO,
    }
}

c_enum! {
    /// What a value in a graph is (semantic annotation).
    #[non_exhaustive]
    Role: ffi::genie_tensor_role_t {
        Unspecified = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_UNSPECIFIED,
        Weight = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_WEIGHT,
        Activation = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_ACTIVATION,
        KvCache = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_KV_CACHE,
        Input = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_INPUT,
        Output = ffi::genie_tensor_role_GENIE_TENSOR_ROLE_OUTPUT,
    }
}

/// Settings for a [`Context`] or [`Server`] (a `genie_config_t` builder).
/// Every setter is validated by the library. Unless `use_env(false)`, the
/// `GENIE_*` environment variables override what is set here.
#[derive(Debug)]
pub struct Config {
    raw: NonNull<ffi::genie_config_t>,
}

// SAFETY: a config is plain data owned by this value; setters take &mut.
unsafe impl Send for Config {}

impl Config {
    /// Defaults: embedded mode, port 5555, timeout 30 s, worker threads =
    /// hardware concurrency, environment overrides on.
    pub fn new() -> Result<Config> {
        let mut raw = ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer.
        check(unsafe { ffi::genie_config_create(&mut raw) })?;
        Ok(Config { raw: NonNull::new(raw).expect("genie_config_create gave NULL") })
    }

    /// Master (server) address; None or "" means embedded mode.
    pub fn master_addr(&mut self, addr: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("address", addr)?;
        // SAFETY: live config; the string is copied by the call.
        check(unsafe { ffi::genie_config_set_master_addr(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// Master TCP port, 1..65535.
    pub fn master_port(&mut self, port: i32) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_master_port(self.raw.as_ptr(), port) })?;
        Ok(self)
    }

    /// Node id of this process (None: generated).
    pub fn node_id(&mut self, id: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("node id", id)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_node_id(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// etcd client URLs, comma-separated (None: none): a server registers
    /// there; a context without a master address enters the cluster through
    /// a server registered there (docs/cluster.md, "A cluster on etcd").
    pub fn etcd_endpoints(&mut self, endpoints: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("etcd endpoints", endpoints)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_etcd_endpoints(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// The cluster's namespace in etcd (None: "default").
    pub fn cluster(&mut self, name: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("cluster", name)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_cluster(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// The TTL of a server's lease in etcd (1 s .. 1 h; default 10 s).
    pub fn etcd_lease_ttl(&mut self, ttl: Duration) -> Result<&mut Self> {
        let ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_etcd_lease_ttl_ms(self.raw.as_ptr(), ms) })?;
        Ok(self)
    }

    /// Timeout for connecting and remote requests.
    pub fn timeout(&mut self, timeout: Duration) -> Result<&mut Self> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_timeout_ms(self.raw.as_ptr(), ms) })?;
        Ok(self)
    }

    /// Worker threads (0: hardware concurrency).
    pub fn num_threads(&mut self, n: i32) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_num_threads(self.raw.as_ptr(), n) })?;
        Ok(self)
    }

    /// Shared secret for authentication (None disables it).
    pub fn auth_token(&mut self, token: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("token", token)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_auth_token(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// TLS 1.3 (docs/security.md): the CA certificate (PEM file; None clears
    /// it). A context with a CA speaks TLS and accepts only a server
    /// certificate chained to it; a server with a certificate and a CA
    /// requires client certificates chained to it.
    pub fn tls_ca(&mut self, ca_file: Option<&str>) -> Result<&mut Self> {
        let a = opt_cstring("tls_ca", ca_file)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_tls_ca(self.raw.as_ptr(), opt_ptr(&a)) })?;
        Ok(self)
    }

    /// TLS 1.3: this node's certificate and private key (PEM files; both None
    /// clears them): a server's own, or a context's client certificate.
    pub fn tls_cert(&mut self, cert_file: Option<&str>, key_file: Option<&str>) -> Result<&mut Self> {
        let c = opt_cstring("tls_cert", cert_file)?;
        let k = opt_cstring("tls_key", key_file)?;
        // SAFETY: live config; the strings are copied.
        check(unsafe { ffi::genie_config_set_tls_cert(self.raw.as_ptr(), opt_ptr(&c), opt_ptr(&k)) })?;
        Ok(self)
    }

    /// TLS 1.3, contexts: the name the server's certificate must carry (None:
    /// the host connected to).
    pub fn tls_server_name(&mut self, name: Option<&str>) -> Result<&mut Self> {
        let n = opt_cstring("tls_server_name", name)?;
        // SAFETY: live config; the string is copied.
        check(unsafe { ffi::genie_config_set_tls_server_name(self.raw.as_ptr(), opt_ptr(&n)) })?;
        Ok(self)
    }

    /// Interval between heartbeats (default 10 s; 10 ms .. 24 h): a remote
    /// context reports to its master this often; a master sweeps for silent
    /// nodes this often.
    pub fn heartbeat_interval(&mut self, interval: Duration) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_heartbeat_interval_ms(self.raw.as_ptr(), millis(interval)) })?;
        Ok(self)
    }

    /// How long a node may stay silent before it is marked lost (default
    /// 60 s; 10 ms .. 24 h; not below the interval, checked at init).
    pub fn heartbeat_timeout(&mut self, timeout: Duration) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_heartbeat_timeout_ms(self.raw.as_ptr(), millis(timeout)) })?;
        Ok(self)
    }

    /// Interval between polls of the local GPUs (default 5 s).
    pub fn gpu_poll_interval(&mut self, interval: Duration) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_gpu_poll_interval_ms(self.raw.as_ptr(), millis(interval)) })?;
        Ok(self)
    }

    /// Interval between health checks (default 30 s).
    pub fn health_interval(&mut self, interval: Duration) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_health_interval_ms(self.raw.as_ptr(), millis(interval)) })?;
        Ok(self)
    }

    /// Remote mode: send a graph submitted again as its changes only
    /// (default true).
    pub fn graph_deltas(&mut self, on: bool) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_graph_deltas(self.raw.as_ptr(), on as i32) })?;
        Ok(self)
    }

    /// Remote mode: use what the graph means (default true); false runs in
    /// blind mode, semantics-blind disaggregation for comparison: one
    /// remote call per operation, weights and KV caches sent with every
    /// submission (genie_config_set_semantics).
    pub fn semantics(&mut self, on: bool) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_semantics(self.raw.as_ptr(), on as i32) })?;
        Ok(self)
    }

    /// Whether [`discover`] runs the full DPDK probe (default true).
    pub fn dpdk_probe(&mut self, on: bool) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_dpdk_probe(self.raw.as_ptr(), on as i32) })?;
        Ok(self)
    }

    pub(crate) fn raw_ptr(&self) -> *const ffi::genie_config_t {
        self.raw.as_ptr()
    }

    /// Whether GENIE_* environment variables override these settings.
    pub fn use_env(&mut self, on: bool) -> Result<&mut Self> {
        // SAFETY: live config.
        check(unsafe { ffi::genie_config_set_use_env(self.raw.as_ptr(), on as i32) })?;
        Ok(self)
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once.
        unsafe { ffi::genie_config_destroy(self.raw.as_ptr()) }
    }
}

/// A running Genie instance, embedded or connected to a server. Dropping it
/// shuts it down (waiting for graphs still running); tensors and futures
/// obtained from it stay safe to use afterwards (their calls fail with
/// [`ErrorKind::Shutdown`]) and to drop.
#[derive(Debug)]
pub struct Context {
    raw: NonNull<ffi::genie_context_t>,
}

// SAFETY: include/genie.h: contexts are thread-safe.
unsafe impl Send for Context {}
unsafe impl Sync for Context {}

impl Context {
    /// A context with the defaults plus the environment (GENIE_MASTER_ADDR
    /// selects remote mode).
    pub fn new() -> Result<Context> {
        Context::init(ptr::null())
    }

    /// A context from `config` (copied; the config may be dropped after).
    pub fn with_config(config: &Config) -> Result<Context> {
        Context::init(config.raw.as_ptr())
    }

    pub(crate) fn raw_ptr(&self) -> *mut ffi::genie_context_t {
        self.raw.as_ptr()
    }

    fn init(config: *const ffi::genie_config_t) -> Result<Context> {
        let mut raw = ptr::null_mut();
        // SAFETY: config is NULL or live; raw is a valid out-pointer. The
        // ABI version is the one of the header ffi.rs was generated from.
        check(unsafe { ffi::genie_init_abi(ffi::GENIE_ABI_VERSION, config, &mut raw) })?;
        Ok(Context { raw: NonNull::new(raw).expect("genie_init gave NULL") })
    }

    /// Whether graphs run in this process (false: on a server).
    pub fn is_embedded(&self) -> bool {
        // SAFETY: live context.
        unsafe { ffi::genie_context_is_embedded(self.raw.as_ptr()) == 1 }
    }

    /// The node id of this context.
    pub fn node_id(&self) -> String {
        // SAFETY: live context: the string lives until shutdown.
        let p = unsafe { ffi::genie_context_node_id(self.raw.as_ptr()) };
        if p.is_null() {
            return String::new();
        }
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Whether calls reach where graphs run: always true in embedded mode;
    /// in remote mode true while the connection to the server is up, false
    /// while it is lost (the context reconnects in the background) or after
    /// reconnecting gave up. Never waits for the server.
    pub fn is_connected(&self) -> Result<bool> {
        let mut v = 0;
        // SAFETY: live context; valid out-pointer.
        check(unsafe { ffi::genie_context_is_connected(self.raw.as_ptr(), &mut v) })?;
        Ok(v == 1)
    }

    /// The server's statistics as JSON (remote mode; Unsupported embedded).
    pub fn server_info(&self) -> Result<String> {
        let mut s = ptr::null_mut();
        // SAFETY: live context; `s` receives a string we free below.
        check(unsafe { ffi::genie_context_server_info(self.raw.as_ptr(), &mut s) })?;
        Ok(unsafe { take_cstring(s) })
    }

    /// The tensors lost with the context's server, as JSON
    /// (genie_context_lost_tensors): "server", "address", "session",
    /// "tensors" (each "name", "id", "server", "device", "dtype", "shape",
    /// "nbytes"). A lost tensor's next use fails with a Connection error
    /// naming it; `Context::new` again reaches another server.
    pub fn lost_tensors(&self) -> Result<String> {
        let mut s = ptr::null_mut();
        // SAFETY: live context; `s` receives a string we free below.
        check(unsafe { ffi::genie_context_lost_tensors(self.raw.as_ptr(), &mut s) })?;
        Ok(unsafe { take_cstring(s) })
    }

    /// Allocates a zero-filled tensor resident on `device` ("cpu", "gpu:N",
    /// "remote:N" ...; None: the context's default device).
    pub fn alloc(&self, dtype: DType, shape: &[i64], device: Option<&str>) -> Result<Tensor> {
        let dev = opt_cstring("device", device)?;
        let mut raw = ptr::null_mut();
        // SAFETY: live context; shape is read for ndim entries; the device
        // string is copied.
        check(unsafe {
            ffi::genie_tensor_alloc(
                self.raw.as_ptr(),
                dtype.raw(),
                shape.as_ptr(),
                shape.len(),
                opt_ptr(&dev),
                &mut raw,
            )
        })?;
        Ok(unsafe { Tensor::from_raw(raw) })
    }

    /// Allocates a tensor of `T`'s dtype holding `data` (exactly the element
    /// count of `shape`, else SizeMismatch).
    pub fn tensor_from_slice<T: Element>(&self, shape: &[i64], data: &[T], device: Option<&str>) -> Result<Tensor> {
        let t = self.alloc(T::DTYPE, shape, device)?;
        t.copy_from_slice(data)?;
        Ok(t)
    }

    /// Submits `graph`, binding each graph input named `inputs[i].0` to the
    /// tensor `inputs[i].1` (every input bound once; dtypes and shapes must
    /// match). The graph is snapshotted; execution is asynchronous: wait on
    /// the future. Do not write the input tensors until it completes.
    pub fn submit(&self, graph: &Graph, inputs: &[(&str, &Tensor)]) -> Result<Future> {
        let names = inputs.iter().map(|(n, _)| cstring("input name", n)).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<_> = names.iter().map(|c| c.as_ptr()).collect();
        let tensors: Vec<_> = inputs.iter().map(|(_, t)| t.raw()).collect();
        let mut raw = ptr::null_mut();
        // SAFETY: live context, graph and tensors (borrowed for the call);
        // the arrays hold inputs.len() entries.
        check(unsafe {
            ffi::genie_graph_submit(
                self.raw.as_ptr(),
                graph.raw(),
                name_ptrs.as_ptr(),
                tensors.as_ptr(),
                inputs.len(),
                &mut raw,
            )
        })?;
        Ok(Future { raw: NonNull::new(raw).expect("genie_graph_submit gave NULL") })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: owned, shut down once; every Subscription (which runs
        // Rust code on the loop thread) borrowed this context and has ended.
        unsafe { ffi::genie_shutdown(self.raw.as_ptr()) }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Copies a string Genie allocated and frees it.
pub(crate) unsafe fn take_cstring(s: *mut std::os::raw::c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    let out = CStr::from_ptr(s).to_string_lossy().into_owned();
    ffi::genie_free(s as *mut std::os::raw::c_void);
    out
}

/// The result of a graph submission. Dropping it before completion lets
/// the graph finish in the background and releases its outputs.
#[derive(Debug)]
pub struct Future {
    raw: NonNull<ffi::genie_future_t>,
}

// SAFETY: include/genie.h: futures are thread-safe.
unsafe impl Send for Future {}
unsafe impl Sync for Future {}

impl Future {
    /// Waits for completion; the execution error if the graph failed.
    pub fn wait(&self) -> Result<()> {
        // SAFETY: live future.
        check(unsafe { ffi::genie_future_wait(self.raw.as_ptr(), -1) })
    }

    /// Waits at most `timeout`: a Timeout error if still running (the future
    /// stays valid).
    pub fn wait_timeout(&self, timeout: Duration) -> Result<()> {
        let ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        // SAFETY: live future.
        check(unsafe { ffi::genie_future_wait(self.raw.as_ptr(), ms) })
    }

    /// Ok(false) while running, Ok(true) once completed successfully, or the
    /// execution error. Never blocks.
    pub fn poll(&self) -> Result<bool> {
        // SAFETY: live future.
        let st = unsafe { ffi::genie_future_poll(self.raw.as_ptr()) };
        check(st)?;
        Ok(st != ffi::GENIE_IN_PROGRESS as i32)
    }

    /// Number of outputs (in the order they were marked).
    pub fn num_outputs(&self) -> Result<usize> {
        let mut n = 0;
        // SAFETY: live future; valid out-pointer.
        check(unsafe { ffi::genie_future_num_outputs(self.raw.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// A new handle to output `index` of the completed future (wait first).
    pub fn output(&self, index: usize) -> Result<Tensor> {
        let mut raw = ptr::null_mut();
        // SAFETY: live future; valid out-pointer.
        check(unsafe { ffi::genie_future_output(self.raw.as_ptr(), index, &mut raw) })?;
        Ok(unsafe { Tensor::from_raw(raw) })
    }

    /// As [`Future::output`], by the output's value name.
    pub fn output_by_name(&self, name: &str) -> Result<Tensor> {
        let n = cstring("output name", name)?;
        let mut raw = ptr::null_mut();
        // SAFETY: live future; the name is read during the call.
        check(unsafe { ffi::genie_future_output_by_name(self.raw.as_ptr(), n.as_ptr(), &mut raw) })?;
        Ok(unsafe { Tensor::from_raw(raw) })
    }

    /// Wall-clock execution time of the completed graph.
    pub fn exec_time(&self) -> Result<Duration> {
        let mut ns = 0u64;
        // SAFETY: live future; valid out-pointer.
        check(unsafe { ffi::genie_future_exec_ns(self.raw.as_ptr(), &mut ns) })?;
        Ok(Duration::from_nanos(ns))
    }
}

impl Drop for Future {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once; no callback is set.
        unsafe { ffi::genie_future_destroy(self.raw.as_ptr()) }
    }
}

/// A server executing the graphs of remote clients in this process (what
/// `genie serve` runs). Dropping it stops it.
#[derive(Debug)]
pub struct Server {
    raw: NonNull<ffi::genie_server_t>,
}

// SAFETY: include/genie.h: functions may be called from any thread. Not
// Sync: the header promises concurrent use only for genie_server_stop.
unsafe impl Send for Server {}

impl Server {
    /// Listens on `host` (None: 127.0.0.1) and `port` (0: a free port, see
    /// [`Server::port`]) and serves at once on its own thread.
    pub fn new(config: Option<&Config>, host: Option<&str>, port: u16) -> Result<Server> {
        let h = opt_cstring("host", host)?;
        let cfg = config.map_or(ptr::null(), |c| c.raw.as_ptr() as *const _);
        let mut raw = ptr::null_mut();
        // SAFETY: config NULL or live; the host string is copied.
        check(unsafe { ffi::genie_server_create(cfg, opt_ptr(&h), i32::from(port), &mut raw) })?;
        Ok(Server { raw: NonNull::new(raw).expect("genie_server_create gave NULL") })
    }

    /// The TCP port the server listens on.
    pub fn port(&self) -> Result<u16> {
        let mut p = 0i32;
        // SAFETY: live server; valid out-pointer.
        check(unsafe { ffi::genie_server_port(self.raw.as_ptr(), &mut p) })?;
        Ok(p as u16)
    }

    /// Asks the server to stop (returns at once; Drop waits).
    pub fn stop(&self) -> Result<()> {
        // SAFETY: live server; safe from any thread.
        check(unsafe { ffi::genie_server_stop(self.raw.as_ptr()) })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: owned, destroyed once.
        unsafe { ffi::genie_server_destroy(self.raw.as_ptr()) }
    }
}
