//! Cluster: state, discovery, plan explanation and event subscriptions
//! (the "Cluster" and "Plans" sections of include/genie.h). The JSON the
//! library returns is handed over as text (docs/cluster.md and
//! docs/scheduler.md describe it): this crate has no JSON dependency.

use std::fmt;
use std::marker::PhantomData;
use std::ops::BitOr;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};
use std::ptr;

use crate::error::check;
use crate::{cstring, ffi, opt_cstring, opt_ptr, take_cstring, Config, Context, Graph, Result, Tensor};

c_enum! {
    /// A cluster event type (one bit of an [`EventMask`]).
    #[non_exhaustive]
    EventKind: ffi::genie_event_type_t {
        /// A node appeared in the view.
        NodeJoined = ffi::genie_event_type_GENIE_EVENT_NODE_JOINED,
        /// A node (the master included) was silent past the heartbeat timeout.
        NodeLost = ffi::genie_event_type_GENIE_EVENT_NODE_LOST,
        /// A lost node answers again.
        NodeRecovered = ffi::genie_event_type_GENIE_EVENT_NODE_RECOVERED,
        /// A GPU's utilisation is at most 90 %.
        GpuAvailable = ffi::genie_event_type_GENIE_EVENT_GPU_AVAILABLE,
        /// A GPU's utilisation is above 90 %.
        GpuUnavailable = ffi::genie_event_type_GENIE_EVENT_GPU_UNAVAILABLE,
        /// A GPU's temperature crossed above 85 C.
        GpuOverheated = ffi::genie_event_type_GENIE_EVENT_GPU_OVERHEATED,
        /// This node's health level changed.
        HealthChanged = ffi::genie_event_type_GENIE_EVENT_HEALTH_CHANGED,
        /// The data-plane backend selected, and why.
        BackendSelected = ffi::genie_event_type_GENIE_EVENT_BACKEND_SELECTED,
    }
}

/// A set of event types for [`Context::subscribe`]: `EventKind::NodeLost |
/// EventKind::HealthChanged`, or [`EventMask::ALL`]. The library rejects an
/// empty mask and bits it does not know (InvalidArgument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventMask(u32);

impl EventMask {
    /// Every event type.
    pub const ALL: EventMask = EventMask(ffi::genie_event_type_GENIE_EVENT_ALL);

    /// A mask of raw genie_event_type_t bits (checked by the library).
    pub const fn from_bits(bits: u32) -> EventMask {
        EventMask(bits)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether `kind` is in the mask.
    pub fn contains(self, kind: EventKind) -> bool {
        self.0 & kind.raw() != 0
    }
}

impl From<EventKind> for EventMask {
    fn from(k: EventKind) -> EventMask {
        EventMask(k.raw())
    }
}

impl<T: Into<EventMask>> BitOr<T> for EventMask {
    type Output = EventMask;
    fn bitor(self, rhs: T) -> EventMask {
        EventMask(self.0 | rhs.into().0)
    }
}

impl<T: Into<EventMask>> BitOr<T> for EventKind {
    type Output = EventMask;
    fn bitor(self, rhs: T) -> EventMask {
        EventMask(self.raw() | rhs.into().0)
    }
}

/// One cluster event: its type and its JSON text (docs/cluster.md, Events:
/// every event has "type" and "time_ms"; NODE_* events "node" and "reason",
/// BACKEND_SELECTED "backend" and "reason", HEALTH_CHANGED "from", "to" and
/// "reasons" ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event type (None for a type this crate does not know yet).
    pub kind: Option<EventKind>,
    /// The raw genie_event_type_t bit.
    pub raw_kind: u32,
    /// The event as JSON text.
    pub json: String,
}

type Callback = Box<dyn FnMut(Event) + Send + 'static>;

/// The C trampoline: runs on the context's loop thread, one event at a
/// time. A panic in the callback is caught here (unwinding into C is
/// undefined behaviour), reported on stderr, and delivery goes on.
unsafe extern "C" fn trampoline(kind: ffi::genie_event_type_t, json: *const c_char, user: *mut c_void) {
    // SAFETY: `user` is the Box<Callback> of a live subscription (freed only
    // after genie_unsubscribe returned); the library runs one callback at a
    // time, so this &mut is unique.
    let cb = &mut *(user as *mut Callback);
    let text =
        if json.is_null() { String::from("{}") } else { std::ffi::CStr::from_ptr(json).to_string_lossy().into_owned() };
    let ev = Event { kind: EventKind::from_raw(kind), raw_kind: kind, json: text };
    if let Err(p) = panic::catch_unwind(AssertUnwindSafe(|| cb(ev))) {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| String::from("(non-string panic)"));
        eprintln!("genie: event callback panicked (caught): {}", msg);
    }
}

/// A subscription to cluster events ([`Context::subscribe`]). Dropping it
/// (or [`Subscription::unsubscribe`]) ends it: afterwards the callback
/// never runs again. It borrows its context, so it cannot outlive it.
pub struct Subscription<'ctx> {
    ctx: *mut ffi::genie_context_t,
    id: u64,
    callback: *mut Callback,
    _ctx: PhantomData<&'ctx Context>,
}

// SAFETY: genie_unsubscribe may be called from any thread; the callback is
// Send.
unsafe impl Send for Subscription<'_> {}

impl fmt::Debug for Subscription<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription").field("id", &self.id).finish()
    }
}

impl Subscription<'_> {
    /// The library's id of this subscription.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Ends the subscription, reporting the library's answer (Drop does the
    /// same and ignores it). Waits for a delivery in progress.
    pub fn unsubscribe(self) -> Result<()> {
        let mut me = std::mem::ManuallyDrop::new(self);
        me.end()
    }

    fn end(&mut self) -> Result<()> {
        // SAFETY: the context outlives 'ctx; once genie_unsubscribe has
        // returned the callback never runs again, so the box can go.
        let r = check(unsafe { ffi::genie_unsubscribe(self.ctx, self.id) });
        if r.is_ok() {
            unsafe { drop(Box::from_raw(self.callback)) };
        }
        // On failure (it cannot fail for a live subscription) the box is
        // leaked rather than freed under a callback that might still run.
        self.callback = ptr::null_mut();
        r
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        if !self.callback.is_null() {
            let _ = self.end();
        }
    }
}

impl Context {
    /// The cluster as this context sees it, as JSON text (docs/cluster.md):
    /// "mode", "node", "nodes", "master" (null embedded), "backend"
    /// ("selected" and "reason"), "discovery", "init_phases", "health",
    /// "intervals", "counters".
    pub fn cluster_state(&self) -> Result<String> {
        let mut s = ptr::null_mut();
        // SAFETY: live context; `s` receives a string freed by take_cstring.
        check(unsafe { ffi::genie_cluster_state(self.raw_ptr(), &mut s) })?;
        Ok(unsafe { take_cstring(s) })
    }

    /// Plans `graph` as a submission would, without running it, and returns
    /// the plan as JSON text (docs/scheduler.md): every node in execution
    /// order with its "device", the "rule" that decided and "why"; devices,
    /// transfers, the analysis and the predicted time. Inputs are planned as
    /// not yet resident (static shapes needed); the graph is not changed.
    pub fn plan_explain(&self, graph: &Graph) -> Result<String> {
        let mut s = ptr::null_mut();
        // SAFETY: live context and graph (borrowed for the call).
        check(unsafe { ffi::genie_plan_explain(self.raw_ptr(), graph.raw(), &mut s) })?;
        Ok(unsafe { take_cstring(s) })
    }

    /// As [`Context::plan_explain`], with `graph` bound to `inputs` exactly
    /// as [`Context::submit`] binds them: the plan that submission gets, each
    /// input where its tensor lives and dynamic dimensions at the bound
    /// sizes. Nothing runs and no tensor bytes move.
    pub fn plan_explain_bound(&self, graph: &Graph, inputs: &[(&str, &Tensor)]) -> Result<String> {
        let names = inputs.iter().map(|(n, _)| cstring("input name", n)).collect::<Result<Vec<_>>>()?;
        let name_ptrs: Vec<_> = names.iter().map(|c| c.as_ptr()).collect();
        let tensors: Vec<_> = inputs.iter().map(|(_, t)| t.raw()).collect();
        let mut s = ptr::null_mut();
        // SAFETY: live context, graph and tensors (borrowed for the call);
        // the arrays hold inputs.len() entries.
        check(unsafe {
            ffi::genie_plan_explain_bound(
                self.raw_ptr(),
                graph.raw(),
                name_ptrs.as_ptr(),
                tensors.as_ptr(),
                inputs.len(),
                &mut s,
            )
        })?;
        Ok(unsafe { take_cstring(s) })
    }

    /// Calls `callback` for each cluster event whose type is in `mask`, on
    /// the context's loop thread, one event at a time and in order (keep it
    /// short: heartbeats wait while it runs). With
    /// [`EventKind::BackendSelected`] in the mask the backend selected at
    /// init is delivered once right after subscribing. A panic in the
    /// callback is caught and reported on stderr. The subscription ends
    /// when the returned value is dropped.
    /// Errors: InvalidArgument (mask empty or with unknown bits), Shutdown.
    pub fn subscribe<F>(&self, mask: impl Into<EventMask>, callback: F) -> Result<Subscription<'_>>
    where
        F: FnMut(Event) + Send + 'static,
    {
        let cb: *mut Callback = Box::into_raw(Box::new(Box::new(callback) as Callback));
        let mut id = 0u64;
        // SAFETY: live context; `cb` stays valid until the subscription has
        // ended (Subscription::end) and is freed here if it never started.
        let r = check(unsafe {
            ffi::genie_subscribe(self.raw_ptr(), mask.into().bits(), Some(trampoline), cb as *mut c_void, &mut id)
        });
        if let Err(e) = r {
            unsafe { drop(Box::from_raw(cb)) };
            return Err(e);
        }
        Ok(Subscription { ctx: self.raw_ptr(), id, callback: cb, _ctx: PhantomData })
    }
}

/// Network discovery without a context (genie_discover), as JSON text
/// (docs/cluster.md): "rdma", "dpdk", "dpdk_gpudev", "gpus", "tcp" (null
/// without a host; else whether the Genie server at host:port answers, its
/// round-trip time and backends), "backends" and the "selection" the
/// configuration would make, every probe with "available" and a "reason".
/// `config` None: defaults plus environment, without the DPDK EAL probe
/// (pass a config with [`Config::dpdk_probe`]`(true)` for it: about half a
/// second, in a forked child). An unreachable host is reported, not an
/// error; a port of 0 with a host is InvalidArgument.
pub fn discover(config: Option<&Config>, host: Option<&str>, port: u16) -> Result<String> {
    let own;
    let cfg = match config {
        Some(c) => c,
        None => {
            let mut c = Config::new()?;
            c.dpdk_probe(false)?;
            own = c;
            &own
        }
    };
    let h = opt_cstring("host", host)?;
    let mut s = ptr::null_mut();
    // SAFETY: live config; the host string is read during the call.
    check(unsafe { ffi::genie_discover(cfg.raw_ptr(), opt_ptr(&h), i32::from(port), &mut s) })?;
    Ok(unsafe { take_cstring(s) })
}

/// The live members of a cluster on etcd (genie_cluster_members), as JSON
/// text (docs/cluster.md, "A cluster on etcd"): "store", "cluster",
/// "revision" and "members", each the status it registered (id, role,
/// listen, devices, gpus, health, backends). `config` gives the endpoints
/// ([`Config::etcd_endpoints`]) and [`Config::cluster`]; None: defaults plus
/// environment (GENIE_ETCD_ENDPOINTS, GENIE_CLUSTER). Connection names the
/// endpoints when no etcd answers; Unsupported without the etcd store plugin.
pub fn cluster_members(config: Option<&Config>) -> Result<String> {
    let mut s = ptr::null_mut();
    let cfg = config.map_or(ptr::null(), |c| c.raw_ptr());
    // SAFETY: a live config or null; the text is ours to free.
    check(unsafe { ffi::genie_cluster_members(cfg, &mut s) })?;
    Ok(unsafe { take_cstring(s) })
}
