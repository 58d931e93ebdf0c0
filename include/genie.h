/*
 * genie.h — the public C API of Genie, semantic GPU disaggregation.
 *
 * Pure C99; compiles as C and as C++. This header is the whole contract:
 * everything a program, binding or tool may rely on is stated here.
 *
 * ---------------------------------------------------------------------------
 * Conventions that hold for every function unless its comment says otherwise
 * ---------------------------------------------------------------------------
 *
 * Status.  Every fallible call returns genie_status_t: GENIE_OK (0) on
 *   success, a negative GENIE_ERR_* code on failure, or a positive non-error
 *   state (GENIE_IN_PROGRESS). The numeric values are frozen. After a failure,
 *   genie_last_error() returns a message on the calling thread naming what was
 *   wrong (the node, the attribute, the dimension ...).
 *
 * Outputs.  Results are returned through the last parameters. On failure the
 *   out-parameters are left untouched and nothing observable has changed: a
 *   graph, tensor or context that was valid before the failing call is still
 *   valid and unchanged after it.
 *
 * Ownership.  Input buffers and strings are copied (or fully consumed) before
 *   the call returns; the caller may free or reuse them at once. Handles
 *   returned through `out` parameters are owned by the caller and released with
 *   the matching *_destroy function (genie_shutdown for a context); every
 *   destroy function accepts NULL. Strings returned as `char **` are allocated
 *   by Genie and released with genie_free(). Strings returned as
 *   `const char *` are borrowed; each function says how long they live.
 *
 * Handles.  Handles are opaque values, not addresses: never dereference one.
 *   No value is handed out twice, so a handle of the wrong kind, or one
 *   already destroyed, is answered with GENIE_ERR_INVALID_HANDLE (functions
 *   that return no status answer it as their comment says), even after
 *   a new object of the same kind took the destroyed one's memory; the new
 *   object is not affected. Destroying a handle that is already destroyed
 *   does nothing. Destroying a handle while another thread is still inside a
 *   call with it is a race the caller must avoid, as with free().
 *
 * Shapes.  A shape is passed as `ndim` dimensions at `shape`, ndim 0 to
 *   GENIE_MAX_DIMS. ndim 0 is a scalar (a 0-d tensor or value): one element,
 *   genie_dtype_size(dtype) bytes, and `shape` may then be NULL. Every
 *   dimension is >= 0; a 0 dimension gives an empty tensor (no elements, no
 *   bytes); only genie_graph_add_input also accepts -1 (dynamic). Shapes
 *   are returned into a caller's array with room for GENIE_MAX_DIMS
 *   entries, with the rank in `*ndim`; for a scalar `*ndim` is 0 and the
 *   array is not written. The JSON forms write a scalar's shape as [].
 *
 * Documentation.  Each function's comment ends with the same two lines:
 *   "Errors:" lists every status it returns besides GENIE_OK, by the name
 *   after GENIE_ERR_ (INVALID_HANDLE for GENIE_ERR_INVALID_HANDLE), with
 *   the cause in parentheses where the name alone does not say it; a
 *   function that returns no status says "Errors: none" and what it
 *   returns instead for a bad handle or argument. "Threads:" says which
 *   threads may call it and what may run beside it. tests/capi checks the
 *   Errors lines against what the library returns for bad handles and
 *   arguments.
 *
 * Canonical forms.  New functions follow these; the older forms named here
 *   stay for the ABI and are not going away within ABI version 1.
 *   - A question is answered as a status with the answer in an `int *out`
 *     (1 or 0), as genie_context_is_connected does; a bad handle is then
 *     INVALID_HANDLE. genie_is_initialized (0 for anything not a live
 *     context), genie_context_is_embedded (-1 for a bad handle),
 *     genie_metrics_supported and genie_op_is_registered return the answer
 *     directly; they cannot fail otherwise.
 *   - A bad handle is answered with GENIE_ERR_INVALID_HANDLE. Functions
 *     that return no status (destroy functions, the borrowed-string
 *     getters genie_context_node_id and genie_tensor_device) answer it as
 *     their Errors line says: destroy functions ignore it, getters return
 *     NULL. genie_op_ctx_t is not a handle but a pointer valid during a
 *     callback: NULL is INVALID_ARGUMENT there.
 *   - Callback types are named genie_<what>_fn (genie_event_fn,
 *     genie_op_infer_fn ...); genie_future_callback_t is the one older name.
 *   - A setting that only a server reads says "Server:" (or "Servers:")
 *     first in its comment; the others are read by contexts, and by
 *     servers where genie_server_create says so.
 *
 * Versions.  Every function and type declared here without "@since" is part
 *   of 0.1.0, the first version of this header; one added later says
 *   "@since" with the version that added it (0.2: GENIE_VERSION 200).
 *   Functions marked "Deprecated" keep working until the next ABI
 *   (GENIE_ABI_VERSION); their comment names what replaces them.
 *
 * Threads.  Unless stated otherwise, functions may be called from any thread.
 *   One handle may be used from several threads at once only where its
 *   functions say so: contexts and tensors are thread-safe; a graph under
 *   construction is not (build it on one thread, then submit it from any);
 *   futures are thread-safe.
 *
 * Modes.  A context created without a master address runs graphs in-process
 *   ("embedded mode"). With a master address (GENIE_MASTER_ADDR) the same calls
 *   reach a `genie serve` process ("remote mode"); nothing else changes for
 *   the caller. In remote mode, calls that need an answer from the server
 *   wait for it at most the configured timeout (GENIE_ERR_TIMEOUT). If the
 *   connection is lost, calls in flight and graphs still running fail with
 *   GENIE_ERR_CONNECTION and the context reconnects in the background for up
 *   to the timeout; the server keeps the context's tensors for its grace
 *   period, so after a reconnect within it every tensor is still there. Calls
 *   made meanwhile wait for the reconnect (up to the timeout). If it fails,
 *   or the server no longer holds the session, every later call fails with
 *   GENIE_ERR_CONNECTION: shut the context down and create a new one. A
 *   server that sends nothing for 1.25 times the timeout while anything waits
 *   on it (it answers pings while a long graph runs) counts as lost, so no
 *   wait, genie_future_wait(f, -1) included, outlives a stopped or cut-off
 *   server by more than that.
 */
#ifndef GENIE_H
#define GENIE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------- */
/* Export macro and versions                                                 */
/* ------------------------------------------------------------------------- */

#if defined(GENIE_BUILDING_LIBRARY) && defined(__GNUC__)
#define GENIE_API __attribute__((visibility("default")))
#else
#define GENIE_API
#endif

/** Library version of this header (semantic versioning). */
#define GENIE_VERSION_MAJOR 0
#define GENIE_VERSION_MINOR 2
#define GENIE_VERSION_PATCH 0
/** Encoded as MAJOR*10000 + MINOR*100 + PATCH. */
#define GENIE_VERSION \
  (GENIE_VERSION_MAJOR * 10000 + GENIE_VERSION_MINOR * 100 + GENIE_VERSION_PATCH)
/** ABI version: bumped on every incompatible change to this header. It is the
 *  shared library's SONAME major (libgenie.so.1). */
#define GENIE_ABI_VERSION 1

/** Run-time library version, encoded like GENIE_VERSION. Never fails.
 *  Errors: none. Threads: any. */
GENIE_API uint32_t genie_version(void);

/** Run-time library version as a static string, e.g. "0.1.0". Never fails.
 *  Errors: none. Threads: any. */
GENIE_API const char *genie_version_string(void);

/** ABI version the library was built with. Never fails.
 *  Errors: none. Threads: any. */
GENIE_API uint32_t genie_abi_version(void);

/* ------------------------------------------------------------------------- */
/* Status                                                                    */
/* ------------------------------------------------------------------------- */

/** Result of a call: 0 success, negative error, positive non-error state. */
typedef int32_t genie_status_t;

/* Values are frozen: new codes are only ever appended. */
#define GENIE_OK 0
/** The operation has not finished yet (genie_future_poll). */
#define GENIE_IN_PROGRESS 1

/** An argument is NULL where it must not be, or out of its allowed range. */
#define GENIE_ERR_INVALID_ARGUMENT (-1)
/** A handle is NULL, of the wrong kind, or already destroyed. */
#define GENIE_ERR_INVALID_HANDLE (-2)
/** Memory could not be allocated (host or device). */
#define GENIE_ERR_OUT_OF_MEMORY (-3)
/** Element types of tensors or values do not agree. */
#define GENIE_ERR_DTYPE_MISMATCH (-4)
/** Shapes do not agree (graph validation, tensor binding). */
#define GENIE_ERR_SHAPE_MISMATCH (-5)
/** A buffer's byte size does not match what the tensor needs. */
#define GENIE_ERR_SIZE_MISMATCH (-6)
/** An operator name is not known. */
#define GENIE_ERR_UNKNOWN_OP (-7)
/** An attribute is unknown, missing, of the wrong type, or out of range. */
#define GENIE_ERR_INVALID_ATTRIBUTE (-8)
/** The graph is malformed: a cycle, a dangling input, a duplicate name, no
 *  outputs, an unbound input. */
#define GENIE_ERR_INVALID_GRAPH (-9)
/** Text (JSON, a device string, a number) could not be parsed. */
#define GENIE_ERR_PARSE (-10)
/** A size computation overflowed (huge dimensions) or exceeds a limit. */
#define GENIE_ERR_TOO_LARGE (-11)
/** A named thing (value, output, file) does not exist. */
#define GENIE_ERR_NOT_FOUND (-12)
/** The feature or device is not available here (the detail says why). */
#define GENIE_ERR_UNSUPPORTED (-13)
/** A wait ran past its timeout. The object waited on stays valid. */
#define GENIE_ERR_TIMEOUT (-14)
/** A network connection failed or was lost. */
#define GENIE_ERR_CONNECTION (-15)
/** Authentication with the server failed. */
#define GENIE_ERR_AUTH (-16)
/** A peer sent something that breaks the wire protocol. */
#define GENIE_ERR_PROTOCOL (-17)
/** Incompatible versions (header vs library, client vs server). */
#define GENIE_ERR_VERSION_MISMATCH (-18)
/** The context was shut down. */
#define GENIE_ERR_SHUTDOWN (-19)
/** A file or operating-system call failed. */
#define GENIE_ERR_IO (-20)
/** The operation was cancelled before it completed. */
#define GENIE_ERR_CANCELLED (-21)
/** A bug in Genie: please report it with the detail message. */
#define GENIE_ERR_INTERNAL (-22)

/** The static name of a status code, e.g. "GENIE_ERR_PARSE". Unknown codes
 *  give "unknown status". Never returns NULL.
 *  Errors: none. Threads: any. */
GENIE_API const char *genie_status_str(genie_status_t status);

/** The detail message of the last failed call on the calling thread (what
 *  was wrong, without the status name), or "" if none failed yet. Borrowed:
 *  valid until the next Genie call on this thread.
 *  A successful call does not clear it. Never returns NULL.
 *  Errors: none. Threads: any; answers for the calling thread. */
GENIE_API const char *genie_last_error(void);

/** Releases memory that Genie returned through a `char **` (or `void **`)
 *  out-parameter. Accepts NULL.
 *  Errors: none. Threads: any. */
GENIE_API void genie_free(void *ptr);

/* ------------------------------------------------------------------------- */
/* Enumerations                                                              */
/* ------------------------------------------------------------------------- */
/* Each enumeration ends with a *_MAX_ENUM sentinel that is not a valid value:
 * it makes the type 32 bits wide in C and C++, so that any int a binding
 * passes is representable and answered with GENIE_ERR_INVALID_ARGUMENT. */

/** Element types. f16 and bf16 are storage types: arithmetic runs in f32. */
typedef enum genie_dtype {
  GENIE_DTYPE_INVALID = 0,
  GENIE_DTYPE_F32 = 1,
  GENIE_DTYPE_F16 = 2,
  GENIE_DTYPE_BF16 = 3,
  GENIE_DTYPE_I32 = 4,
  GENIE_DTYPE_I64 = 5,
  GENIE_DTYPE_BOOL = 6, /* one byte per element, 0 or 1 */
  GENIE_DTYPE_MAX_ENUM = 0x7fffffff
} genie_dtype_t;

/** Size in bytes of one element of `dtype`, or 0 for an invalid dtype.
 *  Errors: none (0 for an invalid dtype). Threads: any. */
GENIE_API size_t genie_dtype_size(genie_dtype_t dtype);

/** Short static name of `dtype` ("f32", "f16", "bf16", "i32", "i64", "bool"),
 *  or "invalid". Never returns NULL.
 *  Errors: none ("invalid" for an invalid dtype). Threads: any. */
GENIE_API const char *genie_dtype_name(genie_dtype_t dtype);

/** Role of this process in a cluster (genie_config_set_role). The values
 *  start at 0x100 so that none is also a genie_tensor_role_t: passing a
 *  value of one role enumeration where the other is expected is answered
 *  with GENIE_ERR_INVALID_ARGUMENT. @since 0.2 */
typedef enum genie_node_role {
  GENIE_NODE_ROLE_CLIENT = 0x100,
  GENIE_NODE_ROLE_SERVER = 0x101,
  GENIE_NODE_ROLE_WORKER = 0x102,
  GENIE_NODE_ROLE_MAX_ENUM = 0x7fffffff
} genie_node_role_t;

/** Data-plane backend: what a user selects to move tensor bytes. AUTO picks
 *  the best available on both ends: dpdk_gpudev > rdma > dpdk > tcp. Each
 *  backend is carried by one transport, the plugin of that name
 *  (libgenie_transport_<name>.so; tcp is built in): rdma and ucx by ucx,
 *  dpdk and dpdk_gpudev by their own. Transport names appear only where a
 *  server lists what it offers (the serve_transports setting), where the
 *  environment demands one for a client's data connections
 *  (GENIE_TRANSPORT: init fails when it cannot be had) and in
 *  genie_discover's report. */
typedef enum genie_backend {
  GENIE_BACKEND_AUTO = 0,
  GENIE_BACKEND_TCP = 1,
  GENIE_BACKEND_RDMA = 2,
  GENIE_BACKEND_DPDK = 3,
  GENIE_BACKEND_DPDK_GPUDEV = 4,
  /* The ucx transport over whatever UCX finds (InfiniBand/RoCE where
   * present, else TCP or shared memory); never picked by AUTO. */
  GENIE_BACKEND_UCX = 5,
  GENIE_BACKEND_MAX_ENUM = 0x7fffffff
} genie_backend_t;

/** Log verbosity; messages at or above the level are written to stderr. */
typedef enum genie_log_level {
  GENIE_LOG_OFF = 0,
  GENIE_LOG_ERROR = 1,
  GENIE_LOG_WARN = 2,
  GENIE_LOG_INFO = 3,
  GENIE_LOG_DEBUG = 4,
  GENIE_LOG_TRACE = 5,
  GENIE_LOG_MAX_ENUM = 0x7fffffff
} genie_log_level_t;

/** Execution phase of a node (semantic annotation). */
typedef enum genie_phase {
  GENIE_PHASE_UNKNOWN = 0,
  GENIE_PHASE_PREFILL = 1,
  GENIE_PHASE_DECODE = 2,
  GENIE_PHASE_FORWARD = 3,
  GENIE_PHASE_BACKWARD = 4,
  GENIE_PHASE_MAX_ENUM = 0x7fffffff
} genie_phase_t;

/** Input modality a node works on (semantic annotation). */
typedef enum genie_modality {
  GENIE_MODALITY_UNKNOWN = 0,
  GENIE_MODALITY_TEXT = 1,
  GENIE_MODALITY_VISION = 2,
  GENIE_MODALITY_AUDIO = 3,
  GENIE_MODALITY_MAX_ENUM = 0x7fffffff
} genie_modality_t;

/** What a value in a graph is (semantic annotation, genie_graph_set_role).
 *  No value is also a genie_node_role_t (those start at 0x100). */
typedef enum genie_tensor_role {
  GENIE_TENSOR_ROLE_UNSPECIFIED = 0,
  GENIE_TENSOR_ROLE_WEIGHT = 1,
  GENIE_TENSOR_ROLE_ACTIVATION = 2,
  GENIE_TENSOR_ROLE_KV_CACHE = 3,
  GENIE_TENSOR_ROLE_INPUT = 4,
  /** A result the caller reads: in remote mode a small one comes back
   *  inside its graph's completion (genie_graph_submit). */
  GENIE_TENSOR_ROLE_OUTPUT = 5,
  GENIE_TENSOR_ROLE_MAX_ENUM = 0x7fffffff
} genie_tensor_role_t;

/** Most dimensions a tensor or graph value may have. */
#define GENIE_MAX_DIMS 8

/* ------------------------------------------------------------------------- */
/* Opaque handles                                                            */
/* ------------------------------------------------------------------------- */

typedef struct genie_config genie_config_t;   /* settings for genie_init */
typedef struct genie_context genie_context_t; /* a running Genie instance */
typedef struct genie_tensor genie_tensor_t;   /* a tensor resident on a device */
typedef struct genie_graph genie_graph_t;     /* a graph of tensor operations */
typedef struct genie_future genie_future_t;   /* result of a graph submission */
typedef struct genie_server genie_server_t;   /* a server run in this process; @since 0.2 */
typedef struct genie_server_config genie_server_config_t; /* a server's own settings; @since 0.2 */

/* ------------------------------------------------------------------------- */
/* Configuration builder                                                     */
/* ------------------------------------------------------------------------- */

/** Creates a configuration with defaults: no master (embedded mode), master
 *  port 5555, generated node id, role client, backend auto, log level warn,
 *  timeout 30000 ms, worker threads = hardware concurrency, environment
 *  overrides enabled.
 *  Errors: INVALID_ARGUMENT (out is NULL), OUT_OF_MEMORY.
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_create(genie_config_t **out);

/** Destroys a configuration. Accepts NULL. Contexts created from it are not
 *  affected (genie_init copies the configuration).
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API void genie_config_destroy(genie_config_t *config);

/** Master (server) address, host name or IP. NULL or "" means embedded mode.
 *  Environment: GENIE_MASTER_ADDR.  Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_master_addr(genie_config_t *config,
                                                      const char *addr);

/** Master TCP port, 1..65535 (default 5555). Environment: GENIE_MASTER_PORT.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out of range).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_master_port(genie_config_t *config,
                                                      int32_t port);

/** Node id of this process; NULL or "" generates one at init. At most 255
 *  bytes of [A-Za-z0-9._-]. Environment: GENIE_NODE_ID.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad characters or length).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_node_id(genie_config_t *config,
                                                  const char *node_id);

/** Role of this process (default GENIE_NODE_ROLE_CLIENT). Environment:
 *  GENIE_NODE_ROLE (client|server|worker).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not a genie_node_role_t, e.g.
 *  a genie_tensor_role_t).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_role(genie_config_t *config,
                                               genie_node_role_t role);

/** Data-plane backend. Environment: GENIE_BACKEND
 *  (auto|tcp|rdma|dpdk|dpdk_gpudev|ucx). rdma needs an InfiniBand or RoCE
 *  device that UCX drives; ucx runs the same UCX transport over whatever
 *  UCX finds (docs/ucx.md).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not a genie_backend_t).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_backend(genie_config_t *config,
                                                  genie_backend_t backend);

/** Log level. Environment: GENIE_LOG_LEVEL (off|error|warn|info|debug|trace).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_log_level(genie_config_t *config,
                                                    genie_log_level_t level);

/** Timeout in milliseconds for connecting and for remote requests, > 0
 *  (default 30000). Environment: GENIE_TIMEOUT (milliseconds).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (<= 0).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_timeout_ms(genie_config_t *config,
                                                     int64_t timeout_ms);

/** Worker threads that execute independent graph nodes in parallel; 0 means
 *  the hardware concurrency (default). Matrix products inside one node use
 *  the BLAS library's own threads besides (OPENBLAS_NUM_THREADS).
 *  Environment: GENIE_NUM_THREADS.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (negative or above 1024).
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_num_threads(genie_config_t *config,
                                                      int32_t num_threads);

/** Whether GENIE_* environment variables override the values set here
 *  (default 1: an operator can redirect a program without rebuilding it).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. */
GENIE_API genie_status_t genie_config_set_use_env(genie_config_t *config,
                                                  int use_env);

/** Remote mode: whether a graph submitted again, or one shaped like a graph
 *  submitted shortly before (same ops and edges; other input shapes, scalar
 *  attributes or constant bytes), is sent as its changes only against the
 *  earlier graph, which the server rebuilds (default 1; docs/protocol.md,
 *  Graph deltas). Results never differ; genie_context_server_info counts
 *  the bytes sent with and without. Environment: GENIE_GRAPH_DELTAS (0|1).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_graph_deltas(genie_config_t *config,
                                                       int enabled);

/** Remote mode: whether Genie uses what the graph means (default 1). With 0,
 *  the context behaves like semantics-blind disaggregation (API remoting),
 *  so that the same workload can be measured both ways
 *  (docs/benchmarks.md, "Semantic vs blind disaggregation"):
 *  - a tensor allocated on a server's device is kept in this process's
 *    memory instead (genie_tensor_device still names the device asked for),
 *    so weights and KV caches travel to the server with every submission
 *    that binds them, as ordinary inputs;
 *  - genie_graph_submit runs the graph one operation at a time, one remote
 *    call each (the values between operations stay on the server until the
 *    submission ends), with no graph deltas and no plan, and returns once
 *    the whole graph has run: its future is already complete;
 *  - every output comes back to this process (genie_tensor_device reports
 *    "cpu:0"), ready to be bound as an input of the next submission.
 *  Results are the same as with semantics on. Embedded mode ignores the
 *  setting. genie_context_server_info's "client" object counts the tensor
 *  bytes written and read ("tensor_bytes_written", "tensor_bytes_read")
 *  and the graph bytes sent, in both modes.
 *  Environment: GENIE_SEMANTICS (on|off|1|0).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_semantics(genie_config_t *config,
                                                    int enabled);

/** Shared secret for authentication (copied; NULL or "" disables it). A
 *  server with a token admits only clients that prove they hold it
 *  (HMAC-SHA256 challenge-response; the token never crosses the network);
 *  a client sends it when the server asks. Environment: GENIE_AUTH_TOKEN.
 *  genie_server_create also refuses a token that looks guessable (about 64
 *  bits or less by its characters, e.g. one letter repeated or a run like
 *  "abcd..."): make one with `openssl rand -hex 32`.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (shorter than 16 bytes, or
 *  longer than 4096).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_auth_token(genie_config_t *config,
                                                     const char *token);

/** TLS 1.3 (docs/security.md, "TLS"): the CA certificate (PEM file, path
 *  copied; NULL or "" clears it). A client with a CA speaks TLS to its
 *  server and accepts only a certificate chained to this CA that names the
 *  server (see genie_config_set_tls_server_name). A server with a
 *  certificate and a CA requires every client to present a certificate
 *  chained to this CA (mutual TLS) and refuses the others. Files are read
 *  when a connection or server is created: an unreadable file fails
 *  genie_init or genie_server_create with INVALID_ARGUMENT naming it.
 *  Environment: GENIE_TLS_CA. Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_tls_ca(genie_config_t *config,
                                                 const char *ca_file);

/** TLS 1.3: this node's certificate (chain) and private key, PEM files
 *  (paths copied; both NULL or "" clear them). A server with them speaks
 *  only TLS (plaintext clients are refused); a client presents them when
 *  the server asks for a client certificate. Environment: GENIE_TLS_CERT,
 *  GENIE_TLS_KEY. Errors: INVALID_HANDLE, INVALID_ARGUMENT (one of the two
 *  missing).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_tls_cert(genie_config_t *config,
                                                   const char *cert_file,
                                                   const char *key_file);

/** TLS 1.3, clients: the name (DNS name or IP address) that the server's
 *  certificate must carry (copied; NULL or "" means the host connected
 *  to, the default). Environment: GENIE_TLS_SERVER_NAME.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (longer than 255 bytes).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_tls_server_name(
    genie_config_t *config, const char *name);

/** Servers: whether genie_server_create may listen on an address other
 *  than loopback (127.0.0.0/8, ::1, localhost) without an auth token (default
 *  0: it refuses with INVALID_ARGUMENT, since anyone who reaches the port
 *  could then use the server). Set it only on a network you trust; the
 *  server logs a warning when it does. Environment: GENIE_ALLOW_INSECURE
 *  (0|1). Errors: INVALID_HANDLE.
 *  Deprecated (0.2): a server's own setting; set "allow_insecure" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_allow_insecure(genie_config_t *config,
                                                         int allow);

/** Server: how long a session's tensors are kept after its connection is
 *  lost, waiting for the client to reconnect, in milliseconds, >= 0
 *  (default 30000). Environment: GENIE_SESSION_GRACE (milliseconds).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "session_grace_ms" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_session_grace_ms(
    genie_config_t *config, int64_t grace_ms);

/** Server: a session that receives nothing for this long ends, in
 *  milliseconds, >= 0; 0 never ends one (default 600000, ten minutes). Its
 *  tensors are freed and its connections closed, so abandoned sessions hold
 *  no memory or file descriptors. A live client heartbeats to its server
 *  (genie_config_set_heartbeat_interval_ms) and pings it while it waits, so
 *  only a client that stopped does. Sessions of peer servers (a master's on
 *  its workers) are exempt: they end with their connection.
 *  Environment: GENIE_SESSION_IDLE (milliseconds).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (negative).
 *  Deprecated (0.2): a server's own setting; set "session_idle_ms" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_session_idle_ms(
    genie_config_t *config, int64_t idle_ms);

/** Server: a connection that has not completed its handshake (and
 *  authentication) within this many milliseconds, 10..86400000, is closed
 *  (default 10000). Environment: GENIE_HANDSHAKE_TIMEOUT.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "handshake_timeout_ms" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_handshake_timeout_ms(
    genie_config_t *config, int64_t timeout_ms);

/** Server: connections open at once, 0..1000000 (0: no limit; default
 *  1024); one past the limit is answered with an error and closed.
 *  Environment: GENIE_MAX_CONNECTIONS.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "max_connections" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_connections(
    genie_config_t *config, int32_t max_connections);

/** Server: connections open at once from one source address, 0..1000000
 *  (0: no limit; default 128). Environment: GENIE_MAX_CONNECTIONS_PER_SOURCE.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "max_connections_per_source" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_connections_per_source(
    genie_config_t *config, int32_t max_connections);

/** Server: sessions held at once (connected or in their grace period),
 *  0..1000000 (0: no limit; default 1024); a new session past the limit is
 *  refused with GENIE_ERR_CONNECTION. Environment: GENIE_MAX_SESSIONS.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "max_sessions" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_sessions(genie_config_t *config,
                                                       int32_t max_sessions);

/** Server: the largest graph a submission may carry, in bytes of its JSON,
 *  0..2^40 (0: no limit; default 33554432, 32 MiB). A larger one is
 *  refused with GENIE_ERR_TOO_LARGE naming the limit before it is parsed.
 *  Graphs of 64 KiB of JSON or more are parsed off the server's event
 *  loop, charged first to the session's byte quota and the memory budget
 *  at 16 bytes per byte of JSON (docs/security.md).
 *  Environment: GENIE_MAX_GRAPH_BYTES.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "max_graph_bytes" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_graph_bytes(genie_config_t *config,
                                                          int64_t max_bytes);

/** Server: the most nodes a submitted graph may have, 0..2^40 (0: no
 *  limit; default 65536). A graph with more is refused with
 *  GENIE_ERR_TOO_LARGE naming the limit, before it is parsed where its
 *  text shows it (its nodes' "op" keys counted), else once parsed.
 *  Environment: GENIE_MAX_GRAPH_NODES.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "max_graph_nodes" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_graph_nodes(genie_config_t *config,
                                                          int64_t max_nodes);

/** Server acting as a master (docs/multinode.md): how long one stage of a
 *  graph sent to a worker may take, in milliseconds, 10..86400000 (default
 *  600000, ten minutes). Past it the graph fails with GENIE_ERR_TIMEOUT
 *  naming the worker and the stage, and the wait ends, whatever the worker
 *  does. Environment: GENIE_STAGE_TIMEOUT.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Deprecated (0.2): a server's own setting; set "stage_timeout_ms" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_stage_timeout_ms(
    genie_config_t *config, int64_t timeout_ms);

/** Prometheus metrics (docs/observability.md): serve this process's
 *  metrics over HTTP at http://ADDR:PORT/metrics, where ADDR is set by
 *  genie_config_set_metrics_addr. A server (genie_server_create) serves
 *  them, and so does a context (genie_init) whose config asks: one process
 *  serves one endpoint, shared by every server and context in it that asks
 *  for the same port, or for port 0. `port`: -1, the default, serves none;
 *  0 a free port (genie_server_metrics_port reads it back); else 1..65535.
 *  Recording starts with the first endpoint and costs a branch per event
 *  until then. Environment: GENIE_METRICS_PORT. The server or context
 *  creation then fails with UNSUPPORTED when this library was built without
 *  prometheus-cpp, and with IO when the address cannot be bound.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (outside -1..65535).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_metrics_port(genie_config_t *config,
                                                       int32_t port);

/** The address the metrics endpoint listens on (copied; NULL or "": the
 *  default, 127.0.0.1). An address other than loopback follows the
 *  control port's rule: it needs an auth token or client certificates, or
 *  genie_config_set_allow_insecure (the endpoint itself does not
 *  authenticate; it shows counts, never tensor data).
 *  Environment: GENIE_METRICS_ADDR.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (longer than 255 bytes).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_metrics_addr(genie_config_t *config,
                                                       const char *addr);

/** A cluster on etcd (docs/cluster.md, "A cluster on etcd"): the client
 *  URLs of an etcd v3 cluster, comma-separated (copied; e.g.
 *  "http://10.0.0.1:2379,http://10.0.0.2:2379"; a bare host:port means
 *  http), tried in turn; NULL or "" clears them. A server
 *  (genie_server_create) given them registers itself under
 *  /genie/<cluster>/nodes/<node-id> with a lease of
 *  genie_config_set_etcd_lease_ttl_ms, renewed at a third of it, and
 *  follows the servers registered there (genie_server_create then fails
 *  with UNSUPPORTED where the etcd store plugin, libgenie_store_etcd.so,
 *  is not installed; with CONNECTION naming the endpoints when no etcd
 *  answers; with INVALID_ARGUMENT when a live server already holds the
 *  node id). Environment: GENIE_ETCD_ENDPOINTS.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (an empty endpoint, one longer
 *  than 255 bytes or holding blanks, more than 16).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_etcd_endpoints(genie_config_t *config,
                                                         const char *endpoints);

/** The cluster's name, its namespace in etcd (/genie/<name>/...): one etcd
 *  can hold several Genie clusters (copied; NULL or "": "default").
 *  Environment: GENIE_CLUSTER.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not 1..64 of [A-Za-z0-9._-]).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_cluster(genie_config_t *config,
                                                  const char *name);

/** The TTL of a server's lease in etcd, in ms (default 10000): a server
 *  that stops renewing it (it died, or is cut off from etcd) leaves the
 *  cluster this long after; it renews at a third of it. etcd counts whole
 *  seconds: rounded up. Environment: GENIE_ETCD_LEASE_TTL (ms).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (outside 1000..3600000).
 *  Deprecated (0.2): a server's own setting; set "etcd_lease_ttl_ms" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_etcd_lease_ttl_ms(genie_config_t *config,
                                                            int64_t ms);

/** Whether this library was built with Prometheus metrics support
 *  (prometheus-cpp): 1 or 0. Any thread.
 *  Errors: none. Threads: any. @since 0.2 */
GENIE_API int genie_metrics_supported(void);

/** Execution traces (docs/observability.md, "Traces"): records every graph
 *  this process executes (embedded contexts, servers) and writes them to
 *  `path` as Chrome / Perfetto trace-event JSON when genie_trace_stop is
 *  called: a span per graph (name, phase, node count) and per node on its
 *  worker thread (op, node name, layer, phase, module path); on a master,
 *  a span per scheduling decision (placement, plan cache hit or miss,
 *  predicted time) and per tensor moved between nodes (bytes, transport,
 *  semantic role and phase, from, to). The file is
 *  created at once. Setting GENIE_TRACE=path does the same from genie_init
 *  or genie_server_create, and the trace is then written at exit. One trace
 *  per process: starting again with the same path does nothing. Any thread.
 *  Errors: INVALID_ARGUMENT (path NULL or "", or a trace already recorded
 *  into another path), IO (the file cannot be created).
 *  Threads: any. @since 0.2 */
GENIE_API genie_status_t genie_trace_start(const char *path);

/** Writes the trace started by genie_trace_start (or GENIE_TRACE) and stops
 *  recording; does nothing when none is recorded. Any thread.
 *  Errors: IO (the file cannot be written).
 *  Threads: any. @since 0.2 */
GENIE_API genie_status_t genie_trace_stop(void);

/** Largest encoded control message accepted, in bytes, 4096..2^30 (default
 *  64 MiB); larger frames are refused before anything is allocated. Tensor
 *  bytes are not counted (they travel beside the message).
 *  Environment: GENIE_MAX_MESSAGE.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_max_message_bytes(
    genie_config_t *config, int64_t max_bytes);

/** Server: the memory its tensors and the graphs in flight may hold, in
 * bytes (GENIE_MEMORY_BUDGET; `genie serve --memory-budget`). 0, the
 * default: 80% of what this process may still take when the server starts
 * (the smaller of the kernel's available memory and the memory cgroup's
 * limit less its usage). An allocation or a graph whose outputs and
 * intermediates would pass it fails with GENIE_ERR_OUT_OF_MEMORY naming
 * the tensor or graph, the server, its use and the budget.
 * Errors: INVALID_HANDLE, INVALID_ARGUMENT (negative).
 *  Deprecated (0.2): a server's own setting; set "memory_budget_bytes" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_memory_budget(genie_config_t *config,
                                                        int64_t bytes);

/** Server: what one session may hold (GENIE_SESSION_MAX_BYTES,
 * GENIE_SESSION_MAX_TENSORS, GENIE_SESSION_MAX_GRAPHS; `genie serve
 * --session-max-bytes/-tensors/-graphs`): tensor bytes (outputs and
 * intermediates of its graphs in flight included), tensors, and graphs in
 * flight at once. 0 keeps a default: the whole memory budget, 65536
 * tensors, 256 graphs. Past one, the request fails with
 * GENIE_ERR_OUT_OF_MEMORY naming the quota, the session's use and the
 * limit. Errors: INVALID_HANDLE, INVALID_ARGUMENT (a negative value).
 *  Deprecated (0.2): a server's own settings; set "session_max_bytes",
 *  "session_max_tensors" and "session_max_graphs" with
 *  genie_server_config_set_int and genie_server_create_with.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_session_quota(genie_config_t *config,
                                                        int64_t max_bytes,
                                                        int64_t max_tensors,
                                                        int64_t max_graphs);

/** Interval between heartbeats in milliseconds, 10..86400000 (default
 *  10000). A context in remote mode sends the master its node status this
 *  often (and, once the master is lost, probes it this often); the master
 *  checks for silent nodes this often. Environment: GENIE_HEARTBEAT_INTERVAL.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out of range).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_heartbeat_interval_ms(
    genie_config_t *config, int64_t interval_ms);

/** How long a node may stay silent before it is marked lost, in
 *  milliseconds, 10..86400000 (default 60000): a master marks a node lost
 *  that sent no heartbeat for this long; a context marks its master lost
 *  when no heartbeat reply came for this long (NODE_LOST arrives within
 *  timeout + one interval). Must not be below the heartbeat interval
 *  (checked at genie_init / genie_server_create).
 *  Environment: GENIE_HEARTBEAT_TIMEOUT.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out of range).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_heartbeat_timeout_ms(
    genie_config_t *config, int64_t timeout_ms);

/** Interval between polls of the local GPUs (NVML) in milliseconds,
 *  10..86400000 (default 5000). Environment: GENIE_GPU_POLL_INTERVAL.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out of range).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_gpu_poll_interval_ms(
    genie_config_t *config, int64_t interval_ms);

/** Interval between health checks in milliseconds, 10..86400000 (default
 *  30000). Environment: GENIE_HEALTH_INTERVAL.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out of range).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_health_interval_ms(
    genie_config_t *config, int64_t interval_ms);

/** Whether genie_discover runs the full DPDK probe (default 1): EAL
 *  initialisation in a forked child process (this process is never touched
 *  by EAL), ports found, gpudev devices. It takes about half a second; with
 *  0, genie_discover only reports whether the DPDK libraries load.
 *  genie_init never runs it unless the backend asked for is dpdk or
 *  dpdk_gpudev. Environment: GENIE_DPDK_PROBE (0|1).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_dpdk_probe(genie_config_t *config,
                                                     int enabled);

/** Sets the integer or boolean setting `name` (a field of the reference in
 *  docs/configuration.md, e.g. "timeout_ms", "graph_deltas") to `value`,
 *  checked against its bounds there. Settings a server alone reads are
 *  refused here: set them on a genie_server_config_t. The environment still
 *  overrides the value (genie_config_set_use_env).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (name NULL or not an integer or
 *  boolean setting of a client, or value outside its bounds; the detail
 *  names the setting and its bounds).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_int(genie_config_t *config,
                                              const char *name, int64_t value);

/** Sets the text setting `name` (docs/configuration.md, e.g. "cluster",
 *  "etcd_endpoints") to `value` (copied; NULL or "" restores its default),
 *  checked as its setter checks it. Server-only settings are refused here.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (name NULL or not a text
 *  setting of a client, or a bad value).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_config_set_string(genie_config_t *config,
                                                 const char *name,
                                                 const char *value);

/* ------------------------------------------------------------------------- */
/* Server configuration builder                                              */
/* ------------------------------------------------------------------------- */

/** Creates the settings only a server reads (docs/configuration.md, side
 *  "server": session grace and idle time, handshake timeout, connection,
 *  session and graph limits, the stage timeout, the memory budget and
 *  session quotas, the transports it serves, insecure listening, the etcd
 *  lease), at their defaults. Pass it to genie_server_create_with beside a
 *  genie_config_t, which keeps the settings clients and servers share. The
 *  genie_config_set_* setters of these settings still work with
 *  genie_server_create and are deprecated.
 *  Errors: INVALID_ARGUMENT (out is NULL), OUT_OF_MEMORY.
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_server_config_create(genie_server_config_t **out);

/** Destroys server settings. Accepts NULL. Servers created from them are not
 *  affected (genie_server_create_with copies them).
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API void genie_server_config_destroy(genie_server_config_t *config);

/** Sets the server's integer or boolean setting `name` (docs/configuration.md,
 *  e.g. "max_sessions", "session_idle_ms", "allow_insecure") to `value`,
 *  checked against its bounds. Environment variables still override it.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (name NULL or not an integer or
 *  boolean server setting, or value outside its bounds).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_server_config_set_int(
    genie_server_config_t *config, const char *name, int64_t value);

/** Sets the server's text setting `name` (docs/configuration.md, e.g.
 *  "serve_transports": "ucx,loopback") to `value` (copied; NULL or ""
 *  restores its default).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (name NULL or not a text server
 *  setting, or a bad value).
 *  Threads: any; one thread at a time per configuration. @since 0.2 */
GENIE_API genie_status_t genie_server_config_set_string(
    genie_server_config_t *config, const char *name, const char *value);

/* ------------------------------------------------------------------------- */
/* Context                                                                   */
/* ------------------------------------------------------------------------- */

/** Library entry point behind genie_init; call genie_init instead, which
 *  passes the ABI version of the header the caller was compiled against.
 *  Bindings that do not use the C preprocessor call this directly with
 *  GENIE_ABI_VERSION.
 *  Errors: as genie_init.
 *  Threads: any; contexts are independent of each other. */
GENIE_API genie_status_t genie_init_abi(uint32_t abi_version,
                                        const genie_config_t *config,
                                        genie_context_t **out);

/** Creates a context. `config` may be NULL (defaults plus environment).
 *  The configuration is copied and validated (environment values included);
 *  without a master address the context executes graphs in-process.
 *  Errors: INVALID_ARGUMENT (out NULL, or a bad environment value: the detail
 *  names the variable), INVALID_HANDLE (config is not a configuration),
 *  VERSION_MISMATCH (the header's ABI version differs from the library's, or
 *  the server speaks another protocol: the detail names both versions),
 *  CONNECTION / TIMEOUT (remote mode: the master could not be reached, or did
 *  not answer within the timeout; the detail names its address), AUTH (the
 *  server requires a token and none or the wrong one is configured),
 *  PROTOCOL (the peer is not a Genie server), UNSUPPORTED (a requested
 *  backend is not available, or metrics were asked for and this library
 *  has no Prometheus support), IO (the metrics address cannot be bound),
 *  OUT_OF_MEMORY.
 *  Threads: any; contexts are independent of each other. */
#define genie_init(config, out) \
  genie_init_abi(GENIE_ABI_VERSION, (config), (out))

/** Shuts a context down and releases it. Waits for graphs still executing to
 *  finish (their futures complete normally); afterwards, calls on tensors and
 *  futures that belonged to the context fail with GENIE_ERR_SHUTDOWN, except
 *  their destroy functions, which must still be called. Accepts NULL. Must
 *  not be called from a completion callback of the same context.
 *  Remote mode: waits at most the timeout for graphs still running on the
 *  server (futures still pending then complete with GENIE_ERR_SHUTDOWN), then
 *  tells the server goodbye, which frees every tensor of the context there at
 *  once. Returns within about the timeout even if the server is gone.
 *  Errors: none (a bad handle is ignored).
 *  Threads: any but a callback of this context; no other call with ctx may
 *  still be running. */
GENIE_API void genie_shutdown(genie_context_t *ctx);

/** 1 if `ctx` is a live context (returned by genie_init and not yet shut
 *  down), else 0. Safe to call with NULL or with a context already shut
 *  down.
 *  Errors: none (0 for NULL or a bad handle).
 *  Threads: any; thread-safe on one context. */
GENIE_API int genie_is_initialized(const genie_context_t *ctx);

/** Whether the context executes in-process (1) or on a server (0); -1 if
 *  ctx is not a live context.
 *  Errors: none (-1 for a bad handle).
 *  Threads: any; thread-safe on one context. */
GENIE_API int genie_context_is_embedded(const genie_context_t *ctx);

/** Whether calls on `ctx` reach where its graphs run, in `*out`: in remote
 *  mode 1 while the connection to the server is up, 0 while it is lost
 *  (the context is reconnecting in the background, see Modes at the top,
 *  or has given up: then every later call fails with CONNECTION); an
 *  embedded context has no connection to lose and always answers 1. A
 *  snapshot: the connection may be lost right after the call.
 *  Errors: INVALID_HANDLE (not a live context), INVALID_ARGUMENT (out
 *  NULL). Never waits for the server.
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_context_is_connected(const genie_context_t *ctx,
                                                    int *out);

/** The node id of this context (given or generated). Borrowed: valid until
 *  genie_shutdown(ctx). NULL if ctx is not a live context.
 *  Errors: none (NULL for a bad handle).
 *  Threads: any; thread-safe on one context. */
GENIE_API const char *genie_context_node_id(const genie_context_t *ctx);

/** Statistics of the server this context is connected to, as JSON text
 *  ({"node_id", "sessions", "tensors", "tensor_bytes", "uptime_ms",
 *  "graphs_executed", "connections_refused", "graph_submits_full",
 *  "graph_submits_delta", "graph_submit_bytes", "graph_delta_unknown_base",
 *  multi-node: "workers" (registered and not marked lost by the cluster
 *  layer: the workers work may be placed on), "multinode_graphs",
 *  "server_transfer_bytes" and
 *  "server_transfer_bytes_by_role" (bytes moved between the server and its
 *  workers for graphs, by the role of the value moved: "kv_cache",
 *  "weight", "input", "activation", "constant"), "plan_cache_hits",
 *  "plan_cache_misses", "last_plan_predicted_ns" and
 *  "last_plan_measured_ns" (the last multi-node graph: its plan's predicted
 *  completion time, and the measured time of its parts and transfers);
 *  "transport_bytes" (bytes the server process's transports moved, by
 *  "transport direction", e.g. "tcp sent", "tcp received");
 *  and "client": this context's own counts of the same traffic:
 *  {"graph_deltas", "graph_submits_full", "graph_submits_delta",
 *  "graph_delta_fallbacks", "graph_bytes_sent", "graph_bytes_full",
 *  "tensor_bytes_written", "tensor_bytes_read", "semantics"}, where
 *  graph_bytes_full is what the same submissions would have taken as full
 *  graphs, the tensor bytes are those of this context's tensor writes and
 *  reads (its own, and blind mode's, genie_config_set_semantics), and
 *  semantics is false in blind mode}), released with genie_free.
 *  Graph deltas: in remote mode a graph whose JSON has the same shape as one
 *  submitted shortly before (same ops and edges; other input shapes, scalar
 *  attributes or constant bytes) is sent as the changes only, and rebuilt
 *  by the server (docs/protocol.md; genie_config_set_graph_deltas turns it
 *  off).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, UNSUPPORTED (embedded mode),
 *  CONNECTION, TIMEOUT, SHUTDOWN.
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_context_server_info(genie_context_t *ctx,
                                                   char **out_json);

/** The tensors of `ctx` lost with its server, as JSON text released with
 *  genie_free: {"server": its node id, "address": "host:port", "session":
 *  "connected", "reconnecting" or "lost" ("embedded", with null server and
 *  address, in embedded mode), "tensors": [{"name", "id", "server",
 *  "device", "dtype", "shape", "nbytes"}, ...]}, by name. A tensor allocated
 *  on the server (or a graph output left there) lives only in this
 *  context's session on it; once that session is gone for good (the server
 *  died or stayed unreachable past the reconnect window, which is the
 *  server's lease TTL for a context that entered a cluster on etcd:
 *  docs/cluster.md, "Failover"), every such tensor still held by a handle
 *  or future is lost: never recomputed or filled in. Its next
 *  genie_tensor_write, genie_tensor_read or a submission binding it fails
 *  with CONNECTION naming it and the server (in a context that entered
 *  through etcd, the call the loss cut short already does, after waiting
 *  out the reconnect window), and it is listed here. A
 *  tensor's name is the graph value it was last bound to or produced as,
 *  else "tensor ID". Host tensors ("cpu") and other contexts' tensors are
 *  untouched. The list is empty while the session lives; genie_init again
 *  reaches another server (after destroying the lost tensors and
 *  genie_shutdown of this context).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out_json NULL), OUT_OF_MEMORY.
 *  Never waits for the server.
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_context_lost_tensors(const genie_context_t *ctx,
                                                    char **out_json);

/* ------------------------------------------------------------------------- */
/* Servers                                                                   */
/* ------------------------------------------------------------------------- */
/*
 * A server executes the graphs of remote clients on this process's devices;
 * `genie serve` is this API behind a command line. Each client connection is
 * a session whose tensors no other session can name.
 */

/** Creates a server listening on `host` (NULL: "127.0.0.1"; binding any
 *  other address is an explicit choice) and `port` (0 picks a free port: read
 *  it with genie_server_port). It serves at once, on its own thread. From
 *  `config` (may be NULL): auth token, session grace period, maximum message
 *  size, worker threads, node id, log level, and as the cluster's master
 *  (see "Cluster" below) the heartbeat interval and timeout, GPU poll and
 *  health intervals; environment overrides apply.
 *  With a master address set on `config` (genie_config_set_master_addr /
 *  _port; not from GENIE_MASTER_ADDR / GENIE_MASTER_PORT, which point
 *  clients at a server), the server joins that master as a worker:
 *  after binding it registers its node id, address (`host`, or this
 *  machine's host name when `host` is a wildcard) and device profile, and
 *  returns once the master has connected back. It stays a worker while
 *  that connection lives (docs/multinode.md).
 *  Errors: INVALID_ARGUMENT (out NULL, port outside 0..65535, an auth token
 *  that looks guessable: the detail says how to make one), INVALID_HANDLE,
 *  IO (cannot bind or listen: the detail names the address and reason);
 *  joining: CONNECTION / TIMEOUT (the master cannot be reached, or it cannot
 *  reach this server back), AUTH, VERSION_MISMATCH, INVALID_ARGUMENT (the
 *  master refused the registration, e.g. the node id is the master's, or
 *  the address leads back to the master itself);
 *  metrics (genie_config_set_metrics_port): UNSUPPORTED (no Prometheus
 *  support in this library), IO (the metrics address cannot be bound),
 *  INVALID_ARGUMENT (beyond loopback without authentication, or this
 *  process already serves metrics on another port).
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_create(const genie_config_t *config,
                                             const char *host, int32_t port,
                                             genie_server_t **out);

/** As genie_server_create, with the server's own settings from `server`
 *  (may be NULL: their defaults) and the shared ones from `config` (may be
 *  NULL); server settings set on `config` through the deprecated setters
 *  are ignored. Environment overrides apply to both.
 *  Errors: as genie_server_create.
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_create_with(
    const genie_config_t *config, const genie_server_config_t *server,
    const char *host, int32_t port, genie_server_t **out);

/** The TCP port the server listens on. Errors: INVALID_HANDLE,
 *  INVALID_ARGUMENT.
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_port(const genie_server_t *server,
                                           int32_t *out);

/** The TCP port of the server's metrics endpoint (see
 *  genie_config_set_metrics_port), or -1 when it serves none.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out NULL).
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_metrics_port(const genie_server_t *server,
                                                   int32_t *out);

/** Asks the server to stop: it stops accepting, lets graphs in flight finish
 *  and report, closes every connection and frees every session. Returns at
 *  once; genie_server_wait blocks until that is done. Safe from any thread
 *  and idempotent. Errors: INVALID_HANDLE.
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_stop(genie_server_t *server);

/** Blocks until the server has stopped (after genie_server_stop).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; thread-safe on one server. @since 0.2 */
GENIE_API genie_status_t genie_server_wait(genie_server_t *server);

/** Stops the server (as genie_server_stop + genie_server_wait) and releases
 *  it. Accepts NULL.
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; no other call with the same handle may still be running. @since 0.2 */
GENIE_API void genie_server_destroy(genie_server_t *server);

/* ------------------------------------------------------------------------- */
/* Cluster: discovery, state and events                                      */
/* ------------------------------------------------------------------------- */
/*
 * genie_init runs in phases, each timed and logged at INFO: config, local
 * node (id, host name, role, local GPUs), network discovery (RDMA devices,
 * DPDK libraries, and in remote mode TCP reachability, round-trip time and
 * the master's own backends), backend selection, connection to the master,
 * monitoring. Monitoring runs on the context's loop thread: heartbeats to
 * the master (remote mode), GPU polls through NVML (loaded at run time:
 * libnvidia-ml.so.1, or the library named by GENIE_NVML_LIBRARY; none or no
 * GPU means zero GPUs, not an error) and health checks. A `genie serve`
 * process is the master: it tracks the nodes that heartbeat to it, marks
 * those silent past the heartbeat timeout as lost, and answers each
 * heartbeat with its view of the cluster. docs/cluster.md has the JSON
 * schemas.
 *
 * Data-plane backends (genie_config_set_backend): AUTO picks the first of
 * dpdk_gpudev, rdma, dpdk and tcp that both ends can use, always falling back
 * to TCP, and records why each faster backend was not chosen
 * (GENIE_EVENT_BACKEND_SELECTED, "backend" in genie_cluster_state). An
 * explicit request for a backend whose library, device or plugin is not
 * usable here fails genie_init with GENIE_ERR_UNSUPPORTED naming what the
 * probe found; UCX is used only when asked for.
 */

/** Health of a node, worst first last. @since 0.2 */
typedef enum genie_health {
  GENIE_HEALTH_HEALTHY = 0,
  GENIE_HEALTH_DEGRADED = 1,  /* works, with a problem (a GPU overheated, a
                                 peer lost, memory getting short) */
  GENIE_HEALTH_UNHEALTHY = 2, /* a needed part does not work (the session
                                 with the master is gone, memory very short) */
  GENIE_HEALTH_CRITICAL = 3,  /* cannot work (the master is lost, memory
                                 exhausted) */
  GENIE_HEALTH_MAX_ENUM = 0x7fffffff
} genie_health_t;

/** Cluster events, one bit each, so that a subscription mask can combine
 *  them. The JSON passed with each is described in docs/cluster.md; every
 *  one has "type" (the name without GENIE_EVENT_) and "time_ms". @since 0.2 */
typedef enum genie_event_type {
  GENIE_EVENT_NODE_JOINED = 1u << 0,     /* a node appeared in the view */
  GENIE_EVENT_NODE_LOST = 1u << 1,       /* silent past the heartbeat timeout */
  GENIE_EVENT_NODE_RECOVERED = 1u << 2,  /* a lost node answers again */
  GENIE_EVENT_GPU_AVAILABLE = 1u << 3,   /* utilisation <= 90 % (first poll,
                                            or back from UNAVAILABLE) */
  GENIE_EVENT_GPU_UNAVAILABLE = 1u << 4, /* utilisation > 90 % */
  GENIE_EVENT_GPU_OVERHEATED = 1u << 5,  /* temperature crossed above 85 C */
  GENIE_EVENT_HEALTH_CHANGED = 1u << 6,  /* this node's health level changed */
  GENIE_EVENT_BACKEND_SELECTED = 1u << 7, /* the data-plane backend (and why) */
  GENIE_EVENT_ALL = 0xffu,
  GENIE_EVENT_MAX_ENUM = 0x7fffffff
} genie_event_type_t;

/** Event callback. Runs on the context's loop thread, one event at a time,
 *  in the order the events happened. `event_json` is borrowed for the call
 *  only. It may call genie_unsubscribe (its own subscription included),
 *  genie_subscribe and genie_cluster_state; it must not call genie_shutdown
 *  on its context, and in remote mode functions that wait for the server
 *  fail there with UNSUPPORTED (see genie_future_callback_t). Keep it short:
 *  heartbeats wait while it runs. @since 0.2 */
typedef void (*genie_event_fn)(genie_event_type_t type, const char *event_json,
                               void *user_data);

/** The cluster as this context sees it, as JSON text released with
 *  genie_free: "mode" ("embedded" or "remote"), "node" (this node: id,
 *  host, role, backend, status, last_heartbeat_ms, gpus with name, memory,
 *  utilisation, temperature; health and its reasons), "nodes" (every node
 *  known: this one, and in remote mode the master and the nodes it tracks),
 *  "master" (address, node id, status, rtt_us), "backend" (selected and
 *  "reason"), "discovery" (as genie_discover), "init_phases" (name and
 *  duration_ms each), "health" (level and reasons), "counters". Thread-safe.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out_json NULL), SHUTDOWN,
 *  OUT_OF_MEMORY.
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_cluster_state(genie_context_t *ctx,
                                             char **out_json);

/** Network discovery without a context: RDMA devices (libibverbs loaded at
 *  run time: devices, port state, link layer), DPDK (libraries; unless
 *  disabled with genie_config_set_dpdk_probe, EAL initialisation, ports and
 *  gpudev devices, probed in a forked child process), local GPUs (NVML),
 *  and, when `host` is not NULL, TCP reachability of the Genie server at
 *  host:port with the round-trip time of five probes and that server's own
 *  backends; then the backend the configuration would select, and why.
 *  Every probe reports "available" and a "reason"; a missing library or
 *  device is reported, not an error. `config` may be NULL (defaults plus
 *  environment). `*out_json` is released with genie_free. An unreachable
 *  host is reported in the JSON ("tcp": {"reachable": false, "reason"}),
 *  not an error. Waits at most the configured timeout for the host.
 *  Errors: INVALID_ARGUMENT (out_json NULL, port outside 1..65535 with a
 *  host, bad environment value), INVALID_HANDLE, OUT_OF_MEMORY.
 *  Threads: any. @since 0.2 */
GENIE_API genie_status_t genie_discover(const genie_config_t *config,
                                        const char *host, int32_t port,
                                        char **out_json);

/** The live members of a cluster on etcd (docs/cluster.md, "A cluster on
 *  etcd"), without a context: one read of /genie/<cluster>/nodes/ at the
 *  etcd endpoints and cluster of `config` (genie_config_set_etcd_endpoints
 *  and genie_config_set_cluster, or GENIE_ETCD_ENDPOINTS and GENIE_CLUSTER;
 *  `config` may be NULL: defaults plus environment). Writes JSON text,
 *  released with genie_free, to `*out_json`: "store" (the etcd endpoints
 *  and cluster, in words), "cluster", "revision" (etcd's revision of the
 *  read) and "members", by id: each the status the member registered (id,
 *  role, listen, devices, gpus, health, backends) with "id" and "revision"
 *  (of its last write); a member whose value does not parse has "error"
 *  instead. A member is listed while its lease lives: one that died is
 *  listed until its lease TTL runs out. Waits at most the configured
 *  timeout (5 s at most) per etcd endpoint.
 *  Errors: INVALID_ARGUMENT (out_json NULL, no etcd endpoints, a bad
 *  endpoint, cluster name or environment value), INVALID_HANDLE,
 *  UNSUPPORTED (the etcd store plugin, libgenie_store_etcd.so, is not
 *  installed), CONNECTION (no endpoint answers; the detail names them),
 *  TIMEOUT, PROTOCOL (etcd refused the read), OUT_OF_MEMORY.
 *  Threads: any. @since 0.2 */
GENIE_API genie_status_t genie_cluster_members(const genie_config_t *config,
                                               char **out_json);

/** Subscribes `fn` to the events whose bits are set in `mask` (any
 *  combination of genie_event_type_t, GENIE_EVENT_ALL for all) on `ctx`.
 *  Events that happen from now on are delivered; in addition, if the mask
 *  has BACKEND_SELECTED, the backend selected at init is delivered once
 *  right after subscribing, so a subscriber always learns it. Writes an id
 *  for genie_unsubscribe to `*out_subscription` (may be NULL when the
 *  subscription lasts as long as the context).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (fn NULL, mask 0 or with bits
 *  outside GENIE_EVENT_ALL), SHUTDOWN.
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_subscribe(genie_context_t *ctx, uint32_t mask,
                                         genie_event_fn fn, void *user_data,
                                         uint64_t *out_subscription);

/** Ends a subscription: once this returns, its callback never runs again
 *  (if it is running on the loop thread right now, this waits for it to
 *  return, unless called from that callback itself, which is allowed and
 *  does not wait). Subscriptions end with their context anyway.
 *  Errors: INVALID_HANDLE, NOT_FOUND (no such subscription: unknown, or
 *  already ended).
 *  Threads: any; thread-safe on one context. @since 0.2 */
GENIE_API genie_status_t genie_unsubscribe(genie_context_t *ctx,
                                           uint64_t subscription);

/* ------------------------------------------------------------------------- */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------- */

/** Allocates a tensor of `dtype` and `shape` (see Shapes at the top: ndim 0
 *  is a scalar) on `device`, zero-filled. It stays resident
 *  on that device until destroyed, so a weight or KV cache is sent once.
 *  Devices: "cpu" or "cpu:0" (host memory); "gpu:N" / "cuda:N" (a local GPU);
 *  "remote:N" (device N of the master server); "NODE/gpu:N" or "NODE/cpu"
 *  (a device of a named node). NULL means "cpu" in embedded mode and
 *  "remote:0" in remote mode, where graphs run.
 *  Remote mode: "remote:N" is the server's N-th device (the detail of an
 *  out-of-range N lists them); "SERVER/cpu" and "SERVER/gpu:N", with
 *  SERVER the server's node id, name the same devices, and such tensors
 *  report "remote:N" from genie_tensor_device. "cpu" stays host memory of
 *  this process (see genie_graph_submit for binding it). "NODE/cpu:0" with
 *  NODE another node's id is a device of a worker of the master (a
 *  `genie serve --join` process, docs/multinode.md): the master allocates it
 *  there and forwards writes and reads (the bytes pass through the master,
 *  never through another client); genie_tensor_device reports "NODE/cpu:0".
 *  A graph bound to such tensors is planned across the master and its
 *  workers, and its parts run where their data is; outputs stay where they
 *  were produced (on a worker or the master) and are read, bound and
 *  destroyed like any other. A NODE that is not a worker gets UNSUPPORTED
 *  naming the workers there are; a worker the cluster layer marked lost
 *  (no heartbeat within the timeout) or that left (its connection to the
 *  master closed) gets CONNECTION naming it, until it heartbeats or
 *  registers again.
 *  Errors: INVALID_HANDLE (ctx), INVALID_ARGUMENT (out NULL, shape NULL with
 *  ndim > 0, ndim too large, negative dimension, bad dtype), PARSE (device
 *  string malformed),
 *  TOO_LARGE (byte size overflows), UNSUPPORTED (device not available here,
 *  e.g. a GPU without CUDA or a remote device in embedded mode; the detail
 *  says why), OUT_OF_MEMORY, SHUTDOWN, CONNECTION.
 *  Threads: any; thread-safe on one tensor. */
GENIE_API genie_status_t genie_tensor_alloc(genie_context_t *ctx,
                                            genie_dtype_t dtype,
                                            const int64_t *shape, size_t ndim,
                                            const char *device,
                                            genie_tensor_t **out);

/** Destroys a tensor and frees its memory on its device. Accepts NULL. Graphs
 *  already submitted with this tensor keep their own reference, so destroying
 *  an input right after genie_graph_submit is safe.
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; no other call with the same handle may still be running. */
GENIE_API void genie_tensor_destroy(genie_tensor_t *tensor);

/** Copies `nbytes` from `src` into the tensor starting at byte `offset`.
 *  For a server tensor the bytes go straight from `src` to the network and
 *  the call returns once the server has stored them.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (src NULL with nbytes > 0),
 *  SIZE_MISMATCH (offset + nbytes exceeds the tensor), SHUTDOWN, CONNECTION,
 *  TIMEOUT, UNSUPPORTED (a server tensor, from a completion callback).
 *  Thread-safe; concurrent writes to overlapping ranges race.
 *  Threads: any; thread-safe on one tensor. */
GENIE_API genie_status_t genie_tensor_write(genie_tensor_t *tensor,
                                            size_t offset, const void *src,
                                            size_t nbytes);

/** Copies `nbytes` of the tensor starting at byte `offset` into `dst`. For a
 *  server tensor (a graph output in remote mode, say) this is when its bytes
 *  cross the network: they land straight in `dst`.
 *  Errors: as genie_tensor_write.
 *  Threads: any; thread-safe on one tensor. */
GENIE_API genie_status_t genie_tensor_read(const genie_tensor_t *tensor,
                                           size_t offset, void *dst,
                                           size_t nbytes);

/** Describes a tensor. Any out-parameter may be NULL. `shape` and `ndim`
 *  are filled as Shapes at the top says (room for GENIE_MAX_DIMS entries).
 *  Errors: INVALID_HANDLE.
 *  Threads: any; thread-safe on one tensor. */
GENIE_API genie_status_t genie_tensor_info(const genie_tensor_t *tensor,
                                           genie_dtype_t *dtype,
                                           int64_t *shape, size_t *ndim,
                                           size_t *nbytes);

/** The canonical device string of the tensor ("cpu:0", "remote:0" ...).
 *  Borrowed: valid until the tensor is destroyed. NULL for a bad handle.
 *  Errors: none (NULL for a bad handle).
 *  Threads: any; thread-safe on one tensor. */
GENIE_API const char *genie_tensor_device(const genie_tensor_t *tensor);

/** Annotates the tensor with what it is: the execution phase it belongs to,
 *  its role (a weight, a KV cache ...) and its layer index (>= 0; -1:
 *  unknown), as genie_graph_set_phase / _set_role / _set_layer annotate a
 *  graph's values. The annotation belongs to the tensor, not the handle:
 *  every handle of the same tensor (genie_future_output gives several) sees
 *  it, and a later call replaces it; GENIE_PHASE_UNKNOWN,
 *  GENIE_TENSOR_ROLE_UNSPECIFIED and -1 together clear it. Tensors start
 *  unannotated, graph outputs included; weights made by
 *  genie_graph_import_onnx start as GENIE_TENSOR_ROLE_WEIGHT.
 *  What it does: every transfer of the tensor's bytes to or from a server
 *  by genie_tensor_write and genie_tensor_read carries the tensor's
 *  semantic tag (its dtype, phase, role and layer): a data transport that
 *  carries tags (dpdk) puts it on every packet, a transfer by RMA names it
 *  in its request, and the server counts the bytes under it
 *  (genie_context_server_info, "tagged_bytes": e.g.
 *  "write decode/kv_cache/3"). An unannotated tensor's transfers go
 *  untagged. Host ("cpu") tensors never cross the network on their own.
 *  Bound as a graph input: the graph's annotations of that input (the role
 *  set with genie_graph_set_role, the phase and layer of the nodes using
 *  it) tag the transfers the graph makes of it (a host tensor copied to the
 *  server, moves between a master and its workers); the tensor's own
 *  annotation tags only its own writes and reads. Neither changes the
 *  other.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (phase not a genie_phase_t;
 *  role not a genie_tensor_role_t, e.g. a genie_node_role_t; layer below
 *  -1 or above 65534, the largest a tag can carry); on error the
 *  annotation is unchanged. Thread-safe.
 *  Threads: any; thread-safe on one tensor. @since 0.2 */
GENIE_API genie_status_t genie_tensor_set_semantics(genie_tensor_t *tensor,
                                                    genie_phase_t phase,
                                                    genie_tensor_role_t role,
                                                    int32_t layer);

/** The tensor's annotation (genie_tensor_set_semantics): GENIE_PHASE_UNKNOWN,
 *  GENIE_TENSOR_ROLE_UNSPECIFIED and -1 where it has none. Any
 *  out-parameter may be NULL. Errors: INVALID_HANDLE. Thread-safe.
 *  Threads: any; thread-safe on one tensor. @since 0.2 */
GENIE_API genie_status_t genie_tensor_get_semantics(const genie_tensor_t *tensor,
                                                    genie_phase_t *phase,
                                                    genie_tensor_role_t *role,
                                                    int32_t *layer);

/* ------------------------------------------------------------------------- */
/* Graphs                                                                    */
/* ------------------------------------------------------------------------- */
/*
 * A graph is a DAG of nodes. Each node applies an operator ("matmul",
 * "layer_norm", ... — docs/graph-format.md lists them with their inputs,
 * outputs and attributes) to named values and produces named values. A value
 * is a graph input (bound to a tensor at submission), a constant (bytes stored
 * in the graph), or a node output. Names are unique within a graph: 1..255
 * bytes, no control characters. A graph under construction is not
 * thread-safe. Graphs are not tied to a context and may be submitted to any.
 */

/** Creates an empty graph. `name` may be NULL.
 *  Errors: INVALID_ARGUMENT (out NULL, bad name), OUT_OF_MEMORY.
 *  Threads: any. */
GENIE_API genie_status_t genie_graph_create(const char *name,
                                            genie_graph_t **out);

/** Destroys a graph. Accepts NULL. Futures of submitted graphs are not
 *  affected (submission takes a snapshot).
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; no other call with the same handle may still be running. */
GENIE_API void genie_graph_destroy(genie_graph_t *graph);

/** Declares a graph input named `name` with `dtype` and `shape` (see Shapes
 *  at the top). A dimension of -1 is dynamic: it takes the size of the
 *  bound tensor at submission.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (bad name, dtype, ndim, dimension
 *  < -1), INVALID_GRAPH (name already used), TOO_LARGE (the static
 *  dimensions alone overflow the size limit).
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_add_input(genie_graph_t *graph,
                                               const char *name,
                                               genie_dtype_t dtype,
                                               const int64_t *shape,
                                               size_t ndim);

/** Adds a constant value of `dtype` and `shape` (see Shapes at the top; no
 *  -1) whose bytes (`nbytes`, which must equal the size of dtype × shape)
 *  are copied into the graph.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, INVALID_GRAPH (name used),
 *  SIZE_MISMATCH, TOO_LARGE, OUT_OF_MEMORY.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_add_constant(genie_graph_t *graph,
                                                  const char *name,
                                                  genie_dtype_t dtype,
                                                  const int64_t *shape,
                                                  size_t ndim,
                                                  const void *data,
                                                  size_t nbytes);

/** Adds a node `name` applying operator `op` to the values named in
 *  `inputs` (n_inputs entries; an entry may be NULL or "" for an omitted
 *  optional input) and producing values named in `outputs` (n_outputs >= 1).
 *  Inputs may name values added later (the graph is checked by
 *  genie_graph_validate), but an output name must be new.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (NULL arrays, bad names),
 *  UNKNOWN_OP (the detail lists close names), INVALID_GRAPH (name already
 *  used, wrong number of inputs or outputs for the operator).
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_add_node(genie_graph_t *graph,
                                              const char *op, const char *name,
                                              const char *const *inputs,
                                              size_t n_inputs,
                                              const char *const *outputs,
                                              size_t n_outputs);

/** Sets an integer attribute of node `node` (replacing any earlier value).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, NOT_FOUND (no such node),
 *  INVALID_ATTRIBUTE (the operator has no such attribute, or it is not of
 *  this type).
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_attr_int(genie_graph_t *graph,
                                                  const char *node,
                                                  const char *key,
                                                  int64_t value);

/** Sets a floating-point attribute. Errors: as genie_graph_set_attr_int.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_attr_float(genie_graph_t *graph,
                                                    const char *node,
                                                    const char *key,
                                                    double value);

/** Sets a string attribute (copied). Errors: as genie_graph_set_attr_int.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_attr_string(genie_graph_t *graph,
                                                     const char *node,
                                                     const char *key,
                                                     const char *value);

/** Sets an integer-list attribute (`count` entries, copied; count may be 0).
 *  Errors: as genie_graph_set_attr_int.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_attr_ints(genie_graph_t *graph,
                                                   const char *node,
                                                   const char *key,
                                                   const int64_t *values,
                                                   size_t count);

/** Sets a float-list attribute. Errors: as genie_graph_set_attr_ints.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_attr_floats(genie_graph_t *graph,
                                                     const char *node,
                                                     const char *key,
                                                     const double *values,
                                                     size_t count);

/** Annotates node `node` with its execution phase.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not a genie_phase_t), NOT_FOUND.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_phase(genie_graph_t *graph,
                                               const char *node,
                                               genie_phase_t phase);

/** Annotates node `node` with the module path it comes from, e.g.
 *  "transformer.h.0.attn" (copied; NULL clears it).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (node NULL), NOT_FOUND.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_module(genie_graph_t *graph,
                                                const char *node,
                                                const char *module_path);

/** Annotates node `node` with its layer index (>= 0; -1 clears it).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (< -1), NOT_FOUND.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_layer(genie_graph_t *graph,
                                               const char *node, int32_t layer);

/** Annotates node `node` with its modality.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, NOT_FOUND.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_modality(genie_graph_t *graph,
                                                  const char *node,
                                                  genie_modality_t modality);

/** Annotates value `value` (an input, constant or node output) with its role.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not a genie_tensor_role_t, e.g.
 *  a genie_node_role_t), NOT_FOUND.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_set_role(genie_graph_t *graph,
                                              const char *value,
                                              genie_tensor_role_t role);

/** Marks value `value` as a graph output, in call order (its index among the
 *  outputs of a future). Marking the same value twice is an error.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, INVALID_GRAPH (already marked).
 *  The value must exist by genie_graph_validate.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_mark_output(genie_graph_t *graph,
                                                 const char *value);

/** Checks the graph: every input of every node exists, no cycles, every
 *  attribute is valid, at least one output is marked, and shape and dtype
 *  inference succeeds for every node. On error the detail names the node
 *  and what is wrong. A graph with dynamic (-1) input dimensions cannot be
 *  inferred before its inputs are bound: this fails with INVALID_GRAPH, and
 *  genie_graph_submit checks it with the bound shapes.
 *  Errors: INVALID_HANDLE, INVALID_GRAPH, UNKNOWN_OP, INVALID_ATTRIBUTE,
 *  SHAPE_MISMATCH, DTYPE_MISMATCH, TOO_LARGE.
 *  Threads: any; one thread at a time per graph. */
GENIE_API genie_status_t genie_graph_validate(genie_graph_t *graph);

/** Number of nodes in the graph. Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any, several at once, while no thread changes the graph. */
GENIE_API genie_status_t genie_graph_num_nodes(const genie_graph_t *graph,
                                               size_t *out);

/** Name of node `index`, 0 <= index < genie_graph_num_nodes (nodes are
 *  numbered in the order they were added, or listed in the JSON; the order
 *  never changes). Borrowed: valid until the graph is next changed or
 *  destroyed.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out NULL), NOT_FOUND (index out
 *  of range).
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_node_name(const genie_graph_t *graph,
                                               size_t index, const char **out);

/** Operator of node `index` ("matmul", ...), numbered as
 *  genie_graph_node_name. Borrowed: valid until the graph is next changed
 *  or destroyed. Errors: as genie_graph_node_name.
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_node_op(const genie_graph_t *graph,
                                             size_t index, const char **out);

/** Number of declared graph inputs. Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_num_inputs(const genie_graph_t *graph,
                                                size_t *out);

/** Name of graph input `index` (declaration order). Borrowed: valid until the
 *  graph is next changed or destroyed.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out NULL), NOT_FOUND (index out
 *  of range).
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_input_name(const genie_graph_t *graph,
                                                size_t index, const char **out);

/** Number of values marked as outputs. Errors: INVALID_HANDLE,
 *  INVALID_ARGUMENT.
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_num_outputs(const genie_graph_t *graph,
                                                 size_t *out);

/** Name of output `index` (mark order: the future's output order). Borrowed:
 *  valid until the graph is next changed or destroyed.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, NOT_FOUND.
 *  Threads: any, several at once, while no thread changes the graph. @since 0.2 */
GENIE_API genie_status_t genie_graph_output_name(const genie_graph_t *graph,
                                                 size_t index,
                                                 const char **out);

/** Dtype and shape of value `value`, as inferred by genie_graph_validate (or
 *  declared, for inputs and constants). `shape` and `ndim` are filled as
 *  Shapes at the top says. Any out-parameter may be NULL.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (value NULL), NOT_FOUND,
 *  INVALID_GRAPH (graph not validated since its last change and the value
 *  is a node output).
 *  Threads: any, several at once, while no thread changes the graph. */
GENIE_API genie_status_t genie_graph_value_info(const genie_graph_t *graph,
                                                const char *value,
                                                genie_dtype_t *dtype,
                                                int64_t *shape, size_t *ndim);

/** Structural hash of the graph: ops, edges, shapes, dtypes, attributes and
 *  annotations, not the bytes of constants and not names of values. Equal
 *  for equal structure across processes and machines.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any, several at once, while no thread changes the graph. */
GENIE_API genie_status_t genie_graph_hash(const genie_graph_t *graph,
                                          uint64_t *out);

/** Serialises the graph to JSON (docs/graph-format.md). `*out_json` is
 *  NUL-terminated and released with genie_free(); `out_len` (may be NULL)
 *  receives its length. Import of the export gives an identical export.
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT, OUT_OF_MEMORY.
 *  Threads: any, several at once, while no thread changes the graph. */
GENIE_API genie_status_t genie_graph_to_json(const genie_graph_t *graph,
                                             char **out_json, size_t *out_len);

/** Builds a graph from JSON text of `len` bytes (docs/graph-format.md).
 *  Errors: INVALID_ARGUMENT, PARSE (not JSON, or not the format: the detail
 *  gives the JSON path), plus any error of the building calls above.
 *  Threads: any. */
GENIE_API genie_status_t genie_graph_from_json(const char *json, size_t len,
                                               genie_graph_t **out);

/** Imports an ONNX model: `model` is the `len` bytes of a .onnx file (an
 *  ONNX ModelProto with its tensors inside). The operators Genie maps, and
 *  how, are listed in docs/onnx.md; shape arithmetic on constants (Shape,
 *  Gather, Concat, ConstantOfShape, Expand of constants ...) is computed at
 *  import, so the model's input shapes must be static (no symbolic
 *  dimensions). Module paths and layer indices are taken from the node names
 *  torch.onnx.export writes ("/h.0/attn/MatMul" -> module "h.0.attn", layer 0).
 *
 *  `*out_graph` receives the validated graph. Its inputs are the model's
 *  inputs (those that are not initializers), in order, followed by one input
 *  (role GENIE_TENSOR_ROLE_WEIGHT, named after the ONNX value) per constant
 *  tensor the graph uses: each initializer, and each constant of more than 16
 *  elements computed from them at import (a batch norm folded to a scale,
 *  say); smaller computed constants are inline graph constants.
 *  There are `*out_num_weights` of them; each is uploaded to a new
 *  tensor allocated on `device` (NULL: the context's default device; the
 *  server in remote mode; annotated GENIE_TENSOR_ROLE_WEIGHT with
 *  genie_tensor_set_semantics, so the upload is tagged) and
 *  `(*out_weights)[i]` is the tensor for graph
 *  input number (number of inputs - *out_num_weights + i): bind them at
 *  genie_graph_submit and they stay resident. The caller owns the graph
 *  (genie_graph_destroy), each tensor (genie_tensor_destroy) and the array
 *  (genie_free; NULL when there are no weights). Outputs are the model's
 *  outputs, in order.
 *
 *  Errors: INVALID_HANDLE (ctx), INVALID_ARGUMENT (NULL model with len > 0,
 *  or an out-parameter NULL), PARSE (the bytes are not an ONNX model, it has
 *  no graph, or an initializer's data does not match its dims and element
 *  type: the detail names the initializer), UNSUPPORTED (a node Genie cannot
 *  map: the detail names the node and its op_type; also an element type, a
 *  symbolic dimension, external data, another operator domain or an
 *  attribute value it cannot map), INVALID_GRAPH (a value used before it is
 *  produced, no outputs), TOO_LARGE (a model of 2 GiB or more), the errors
 *  of genie_graph_validate (SHAPE_MISMATCH, DTYPE_MISMATCH, INVALID_ATTRIBUTE:
 *  the detail names the ONNX node), and those of genie_tensor_alloc and
 *  genie_tensor_write for the weights (SHUTDOWN, CONNECTION, OUT_OF_MEMORY
 *  ...). On any error the out-parameters are untouched and no tensor is left
 *  allocated. Thread-safe: other threads may use the context meanwhile.
 *  Threads: any. @since 0.2 */
GENIE_API genie_status_t genie_graph_import_onnx(genie_context_t *ctx,
                                                 const void *model, size_t len,
                                                 const char *device,
                                                 genie_graph_t **out_graph,
                                                 genie_tensor_t ***out_weights,
                                                 size_t *out_num_weights);

/* ------------------------------------------------------------------------- */
/* Custom operators                                                          */
/* ------------------------------------------------------------------------- */
/* A vendor adds an operator to Genie by registering a name, a shape/dtype
 * inference callback and a CPU kernel callback. Graphs then use it like a
 * built-in op: genie_graph_add_node(g, "acme.swish", ...), in C, Python, Go
 * or Rust, and from JSON. docs/custom-ops.md is the guide.
 *
 * Scope.  Registrations are process-wide, not per context: graphs are built
 *   without a context and genie_graph_add_node checks the op at once. A
 *   graph runs where its context runs it: embedded, in this process; remote,
 *   in the `genie serve` process, which must have the op too (load the
 *   vendor library there: `genie serve --op-library libacme_ops.so`). A
 *   server without the op fails the submission with GENIE_ERR_UNKNOWN_OP
 *   naming the node and the op.
 *
 * Callbacks.  Inference runs on the thread that validates a graph using
 *   the op (genie_graph_validate, genie_graph_submit, genie_plan_explain,
 *   or the server's thread in remote mode), kernels on executor workers;
 *   either may run concurrently for
 *   different nodes or graphs, so they must be thread-safe. They must not
 *   throw, longjmp or call genie_op_register/unregister. They return
 *   GENIE_OK or a negative GENIE_ERR_* code; genie_op_set_error() adds a
 *   message. The failure reaches the caller as a Genie error with that code
 *   and a detail naming the node and the op:
 *   "node 'sw' (acme.swish): acme.swish kernel failed: <message>".
 *
 * Dtypes.  The CPU computes f16 and bf16 in f32: a CPU kernel receives
 *   f16/bf16 values converted to f32 and writes f32 outputs where inference
 *   declared f16/bf16 (Genie converts back). The views' dtype is always
 *   what the buffer holds. */

/** A tensor as a callback sees it. Inference: `data` is NULL and `nbytes`
 *  0; the callback fills dtype, ndim and shape of each output. Kernels:
 *  `data` points to `nbytes` bytes of host memory (CPU kernels), dense and
 *  row-major (`strides`, in elements, are the row-major strides of
 *  `shape`), valid only during the call; inputs are read-only, outputs are
 *  allocated by Genie with the inferred shape and every byte must be
 *  written. An omitted optional input has dtype GENIE_DTYPE_INVALID. @since 0.2 */
typedef struct genie_op_tensor {
  void *data;
  size_t nbytes;
  genie_dtype_t dtype;
  uint32_t ndim;                    /* 0 (a scalar) .. GENIE_MAX_DIMS */
  int64_t shape[GENIE_MAX_DIMS];    /* shape[0 .. ndim) */
  int64_t strides[GENIE_MAX_DIMS];  /* kernels only: elements, row-major */
} genie_op_tensor_t;

/** The call a callback serves (one node's inference or kernel run):
 *  attributes and the error message. Valid only during the callback. @since 0.2 */
typedef struct genie_op_ctx genie_op_ctx_t;

/** Shape and dtype inference: given the inputs' dtypes and shapes
 *  (`inputs[0 .. n_inputs)`, data NULL) and the node's attributes (through
 *  `ctx`), sets dtype, ndim and shape of every output (`outputs[0 ..
 *  n_outputs)`, n_outputs = the desc's num_outputs; they arrive zeroed).
 *  Also the place to check inputs and attributes: return
 *  GENIE_ERR_SHAPE_MISMATCH, GENIE_ERR_DTYPE_MISMATCH or
 *  GENIE_ERR_INVALID_ATTRIBUTE with genie_op_set_error(). Runs whenever a
 *  graph using the op is validated (validation, submission, planning). @since 0.2 */
typedef genie_status_t (*genie_op_infer_fn)(genie_op_ctx_t *ctx,
                                            const genie_op_tensor_t *inputs,
                                            size_t n_inputs,
                                            genie_op_tensor_t *outputs,
                                            size_t n_outputs,
                                            void *user_data);

/** A kernel: computes the outputs from the inputs (see genie_op_tensor_t).
 *  The shapes are those inference gave. @since 0.2 */
typedef genie_status_t (*genie_op_kernel_fn)(genie_op_ctx_t *ctx,
                                             const genie_op_tensor_t *inputs,
                                             size_t n_inputs,
                                             genie_op_tensor_t *outputs,
                                             size_t n_outputs,
                                             void *user_data);

/** Optional cost estimate for the scheduler: the floating-point operations
 *  of one node, given its input and output types (data NULL). A negative
 *  or NaN result means "unknown". Without it a custom op costs one FLOP per
 *  output element plus the bytes it reads and writes. @since 0.2 */
typedef double (*genie_op_flops_fn)(genie_op_ctx_t *ctx,
                                    const genie_op_tensor_t *inputs,
                                    size_t n_inputs,
                                    const genie_op_tensor_t *outputs,
                                    size_t n_outputs, void *user_data);

/** What genie_op_register reads. Versioned by size: set struct_size to
 *  sizeof(genie_op_desc_t) (GENIE_OP_DESC_SIZE_V1); fields are only ever
 *  appended, and the library treats fields beyond a smaller struct_size
 *  as zero. Zero-initialise it (`genie_op_desc_t d = {0};` or memset) so
 *  unused fields are 0. @since 0.2 */
typedef struct genie_op_desc {
  size_t struct_size;
  /** "acme.swish": 1 to 64 characters of [A-Za-z0-9_.], starting with a
   *  letter, no "..", no trailing '.'. A vendor prefix ("acme.") keeps it
   *  clear of future built-in ops (built-in names never contain '.'). */
  const char *name;
  int32_t min_inputs; /* 0 .. 64 */
  int32_t max_inputs; /* min_inputs .. 64, or -1: any number (variadic) */
  int32_t num_outputs; /* 1 .. 64 */
  genie_op_infer_fn infer;     /* required */
  genie_op_kernel_fn cpu_kernel; /* required */
  /** Reserved for the CUDA backend: must be NULL in this version (device
   *  pointers and the stream will come through genie_op_tensor_t and
   *  genie_op_ctx_t; docs/custom-ops.md, "CUDA kernels"). */
  genie_op_kernel_fn cuda_kernel;
  genie_op_flops_fn flops; /* optional (NULL: the default cost) */
  /** Passed to every callback. Owned by Genie once registration succeeds. */
  void *user_data;
  /** Optional: called once with user_data when the op is unregistered and
   *  no call of it is still running (on that thread, or on the last
   *  caller's). Not called for an op still registered when the process
   *  exits, nor when genie_op_register fails (the caller keeps user_data). */
  void (*destroy)(void *user_data);
} genie_op_desc_t;

/** The size of version 1 of genie_op_desc_t. */
#define GENIE_OP_DESC_SIZE_V1 (sizeof(genie_op_desc_t))

/** Registers a custom operator for this process. `desc` and its strings
 *  are copied. Graphs built afterwards may use `desc->name`.
 *  Errors: INVALID_ARGUMENT (desc NULL; struct_size smaller than the first
 *  version's fields; a NULL, empty, too long or badly formed name — the
 *  detail shows the offending character; a name that is a built-in op or
 *  an op already registered; input/output counts out of range; infer or
 *  cpu_kernel NULL), VERSION_MISMATCH (struct_size larger than this
 *  library's genie_op_desc_t and the extra bytes not all zero: the program
 *  was built against a newer genie.h), UNSUPPORTED (cuda_kernel set: no
 *  CUDA kernels in this version). On error nothing is registered and
 *  destroy is not called. Thread-safe.
 *  Threads: any; thread-safe. @since 0.2 */
GENIE_API genie_status_t genie_op_register(const genie_op_desc_t *desc);

/** Removes custom op `name`. Graphs already built keep their nodes but no
 *  longer validate or run (UNKNOWN_OP); kernels running now finish first,
 *  then destroy(user_data) runs. Errors: INVALID_ARGUMENT (name NULL),
 *  NOT_FOUND (no custom op of that name; built-in ops cannot be removed).
 *  Thread-safe; must not be called from a callback of the op.
 *  Threads: any; thread-safe. @since 0.2 */
GENIE_API genie_status_t genie_op_unregister(const char *name);

/** 1 if `name` is a registered custom op, else 0 (also for NULL and for
 *  built-in ops). Never fails.
 *  Errors: none. Threads: any. @since 0.2 */
GENIE_API int genie_op_is_registered(const char *name);

/** The symbol an op library exports (see genie_op_library_load). */
#define GENIE_OP_LIBRARY_INIT "genie_op_library_init"
/** Its type: registers the library's ops with genie_op_register and
 *  returns GENIE_OK, or an error status (such as that of a failed
 *  genie_op_register, whose detail genie_op_library_load passes on). @since 0.2 */
typedef genie_status_t (*genie_op_library_init_fn)(void);

/** Loads an op library: a shared object that links libgenie and exports
 *  `genie_status_t genie_op_library_init(void)` (GENIE_OP_LIBRARY_INIT),
 *  which registers its ops. The library stays loaded for the life of the
 *  process. Loading the same file again does nothing and succeeds. This is
 *  how `genie serve --op-library PATH` and the bindings
 *  (genie.load_op_library in Python) get a vendor's ops.
 *  Errors: INVALID_ARGUMENT (path NULL or empty), IO (the file cannot be
 *  loaded: the detail has dlopen's reason), NOT_FOUND (it does not export
 *  genie_op_library_init), or the error its init returned (the detail
 *  names the library). Thread-safe.
 *  Threads: any; thread-safe. @since 0.2 */
GENIE_API genie_status_t genie_op_library_load(const char *path);

/** Attribute `name` of the node, for callbacks. The string and arrays are
 *  borrowed: valid until the callback returns. An int attribute is
 *  accepted by the float getters (converted). Errors: INVALID_ARGUMENT
 *  (ctx, name or an out-parameter NULL), NOT_FOUND (the node has no such
 *  attribute), INVALID_ATTRIBUTE (it has another type; the detail says
 *  which).
 *  Threads: the callback's own thread, during the callback. @since 0.2 */
GENIE_API genie_status_t genie_op_attr_int(const genie_op_ctx_t *ctx,
                                           const char *name, int64_t *out);
GENIE_API genie_status_t genie_op_attr_float(const genie_op_ctx_t *ctx,
                                             const char *name, double *out);
GENIE_API genie_status_t genie_op_attr_string(const genie_op_ctx_t *ctx,
                                              const char *name,
                                              const char **out);
GENIE_API genie_status_t genie_op_attr_ints(const genie_op_ctx_t *ctx,
                                            const char *name,
                                            const int64_t **out,
                                            size_t *out_len);
GENIE_API genie_status_t genie_op_attr_floats(const genie_op_ctx_t *ctx,
                                              const char *name,
                                              const double **out,
                                              size_t *out_len);

/** Sets the message that goes with the error status the callback is about
 *  to return (copied; the last call wins). Without it the detail names the
 *  status only. Errors: INVALID_ARGUMENT (ctx or message NULL).
 *  Threads: the callback's own thread, during the callback. @since 0.2 */
GENIE_API genie_status_t genie_op_set_error(genie_op_ctx_t *ctx,
                                            const char *message);

/* ------------------------------------------------------------------------- */
/* Submission and futures                                                    */
/* ------------------------------------------------------------------------- */

/** Completion callback. Runs once, on a Genie thread (an executor worker in
 *  embedded mode; in remote mode the context's loop thread, or the thread
 *  that read the completion off the connection: another Genie thread, or a
 *  thread inside genie_future_wait or genie_future_poll on a future of the
 *  same context) — or on the registering thread if the future had already
 *  completed. `status` is the future's final status. Must not block for
 *  long (no genie_future_wait in it), and must not call genie_shutdown or
 *  genie_future_destroy on this future. In remote mode the loop thread is
 *  the one that talks to the server, so functions that wait for the server
 *  (tensor alloc, read and write of server tensors, submit,
 *  genie_context_server_info) fail there with GENIE_ERR_UNSUPPORTED instead
 *  of deadlocking; genie_future_output and genie_tensor_destroy are fine. */
typedef void (*genie_future_callback_t)(genie_future_t *future,
                                        genie_status_t status, void *user_data);

/** Submits `graph` for execution on `ctx`, binding each graph input named
 *  `input_names[i]` to tensor `inputs[i]` (n_inputs pairs; every graph input
 *  must be bound exactly once, dtypes must match and shapes must match the
 *  declaration, -1 dimensions taking the bound size). The graph is validated
 *  and snapshotted: it may be changed or destroyed after the call. Execution
 *  is asynchronous; the future reports completion and holds the outputs,
 *  which stay on the device where they were produced until read. In
 *  embedded mode a graph of built-in ops small enough to take microseconds
 *  (no matrix product, convolution or attention, and up to 65,536 elements
 *  over its nodes' inputs and outputs) that runs on the CPU runs on the
 *  calling thread instead, as handing it to an executor worker would cost
 *  more: its future is complete when the call returns. Input
 *  tensors are read while the graph runs: do not write them before the
 *  future completes.
 *  Remote mode: the graph runs on the server and its outputs stay there
 *  (lazy: bytes cross the network only when read), so an output passed to
 *  another submission never leaves the server. Bound server tensors are
 *  used in place; a host ("cpu") tensor is copied to the server for this
 *  submission only (allocate it on "remote:0" to keep it resident there):
 *  inside the submission itself when it is small (at most 64 KiB, 1 MiB
 *  for all of them), with its own upload otherwise. An output annotated
 *  GENIE_TENSOR_ROLE_OUTPUT (genie_graph_set_role: what the caller reads)
 *  held in the server's host memory comes back inside the graph's
 *  completion when it is as small, so that genie_tensor_read of it costs
 *  no round trip; it stays on the server all the same. A step of a decode
 *  loop (token in host memory, logits annotated) is one round trip.
 *  Bindings are checked here, before anything is sent, as in embedded mode.
 *  The call does not wait for the server: it returns once the graph is
 *  queued, so many submissions can be in flight (they are sent in call
 *  order, after every genie_tensor_write that has returned). What the server
 *  refuses at submission arrives through the future like an execution
 *  error: NOT_FOUND (a tensor the server no longer holds), SHUTDOWN (the
 *  server is stopping), CONNECTION (the connection was lost before the
 *  graph completed), or any validation error on its side.
 *  Errors: returned now, the future not created: INVALID_HANDLE,
 *  INVALID_ARGUMENT, INVALID_GRAPH (unbound or unknown input), DTYPE_MISMATCH,
 *  SHAPE_MISMATCH, any validation error, SHUTDOWN, and in remote mode
 *  CONNECTION and TIMEOUT (not connected, or reconnecting did not succeed in
 *  time; also from uploading a bound host tensor), TOO_LARGE (the graph's
 *  message exceeds the maximum message size), UNSUPPORTED (from a completion
 *  callback).
 *  Errors while executing are reported by the future.
 *  Threads: any; thread-safe on one context (the graph must not be changed
 *  meanwhile). */
GENIE_API genie_status_t genie_graph_submit(genie_context_t *ctx,
                                            const genie_graph_t *graph,
                                            const char *const *input_names,
                                            genie_tensor_t *const *inputs,
                                            size_t n_inputs,
                                            genie_future_t **out);

/** Destroys a future. Accepts NULL. If the graph is still executing, it runs
 *  to completion in the background and its outputs are released. The
 *  callback never runs after this returns (if it is running on another
 *  thread, this waits for it to return). Output tensors already obtained
 *  with genie_future_output stay valid.
 *  Errors: none (a bad handle is ignored).
 *  Threads: any; no other call with the same handle may still be running. */
GENIE_API void genie_future_destroy(genie_future_t *future);

/** Waits until the future completes or `timeout_ms` passes (< 0: no limit).
 *  Returns GENIE_OK if it completed successfully, the execution error if it
 *  failed, or GENIE_ERR_TIMEOUT if it is still running (the future stays
 *  valid). In remote mode the waiting thread may read the completion from
 *  the server itself (and so run completion callbacks of other futures of
 *  the context). Errors: INVALID_HANDLE.
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_wait(genie_future_t *future,
                                           int64_t timeout_ms);

/** Returns GENIE_IN_PROGRESS while running, then GENIE_OK or the execution
 *  error. Never blocks. Errors: INVALID_HANDLE.
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_poll(const genie_future_t *future);

/** Sets the completion callback (replacing none: only one may be set). If the
 *  future has already completed, `cb` runs on the calling thread before this
 *  returns. Errors: INVALID_HANDLE, INVALID_ARGUMENT (cb NULL, or a callback
 *  already set).
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_set_callback(genie_future_t *future,
                                                   genie_future_callback_t cb,
                                                   void *user_data);

/** Number of outputs (graph outputs in the order they were marked).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT.
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_num_outputs(const genie_future_t *future,
                                                  size_t *out);

/** Gives a new tensor handle for output `index` of a completed future. The
 *  tensor lives on the device that produced it; read it with
 *  genie_tensor_read, pass it to another submission, and destroy the handle
 *  when done (each call gives a new handle to the same tensor).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (out NULL, or the future has not
 *  completed yet: wait first), NOT_FOUND (index out of range), or the
 *  future's execution error if it failed.
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_output(genie_future_t *future,
                                             size_t index,
                                             genie_tensor_t **out);

/** As genie_future_output, selecting the output by its value name.
 *  Errors: as genie_future_output; NOT_FOUND if no output has that name.
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_output_by_name(genie_future_t *future,
                                                     const char *name,
                                                     genie_tensor_t **out);

/** Wall-clock execution time of a completed future in nanoseconds (from the
 *  start of the first node to the end of the last).
 *  Errors: INVALID_HANDLE, INVALID_ARGUMENT (not completed).
 *  Threads: any; thread-safe on one future. */
GENIE_API genie_status_t genie_future_exec_ns(const genie_future_t *future,
                                              uint64_t *out);

/* ------------------------------------------------------------------------- */
/* Plans                                                                     */
/* ------------------------------------------------------------------------- */

/** Plans `graph` as a submission on `ctx` would, without running it, and
 *  returns the plan as JSON: where each node would run and why.
 *  The JSON (docs/scheduler.md describes every field) holds the analysis
 *  (the stage recognised — "prefill", "decode", "vision" ... — whether from
 *  annotations or inferred, and the evidence; the patterns found: attention,
 *  fused attention, MLP, conv-norm-activation, residual, embedding, LM head;
 *  the KV caches and the nodes kept with them), the devices with their
 *  predicted peak memory and budget, every node in execution order with its
 *  device, the rule that decided ("kv_cache_colocation", "resident_weight",
 *  "only_device", "min_finish_time", "stage_merge"), a sentence saying why,
 *  its FLOPs, bytes and predicted start, finish and duration, the transfers
 *  between devices, and the predicted total time (stages run one after
 *  another; a stage on a worker and every transfer include their request
 *  round trips). The graph is validated on a copy
 *  (the handle is not changed); every input is planned as not yet resident
 *  anywhere, so inputs must have static shapes.
 *  Embedded mode plans over this process's devices: the CPU, profiled on
 *  first use by a short calibration (about 50 ms) whose result is cached in
 *  $XDG_CACHE_HOME/genie (else ~/.cache/genie). Remote mode sends the graph
 *  to the master, which plans over its own devices and its workers' (as it
 *  would for a submission) and answers with the same JSON.
 *  `*out_json` is NUL-terminated and released with genie_free().
 *  Errors: INVALID_HANDLE (ctx or graph), INVALID_ARGUMENT (out_json NULL),
 *  any validation error (INVALID_GRAPH also for an input with a dynamic
 *  dimension), OUT_OF_MEMORY (the graph does not fit in the devices' memory
 *  budgets; the detail names the node, the device, the bytes in use and the
 *  largest tensors alive), SHUTDOWN, and in remote mode CONNECTION and
 *  TIMEOUT (the master did not answer) or any error the master reports.
 *  Threads: any thread; concurrent calls on one context are fine (the graph
 *  must not be changed meanwhile). @since 0.2 */
GENIE_API genie_status_t genie_plan_explain(genie_context_t *ctx,
                                            const genie_graph_t *graph,
                                            char **out_json);

/** As genie_plan_explain, for `graph` bound to tensors exactly as
 *  genie_graph_submit would bind them (same rules: every input bound once,
 *  dtypes equal, a -1 dimension takes the bound size), so the plan is the
 *  one a submission with these tensors gets: each bound input is planned
 *  where its tensor lives (in remote mode a tensor on a worker, e.g.
 *  "node-b/cpu:0", pins the nodes that the co-location rules keep with it),
 *  and dynamic dimensions take the bound sizes. Nothing runs and no tensor
 *  bytes move; in remote mode a tensor in this process's memory is planned
 *  on the master's default device, where a submission would copy it.
 *  `n_inputs` 0 is genie_plan_explain. `*out_json` is released with
 *  genie_free().
 *  Errors: as genie_plan_explain, and as genie_graph_submit for the
 *  bindings: INVALID_ARGUMENT (input_names or inputs NULL with n_inputs > 0,
 *  a NULL name, a tensor of another context), INVALID_HANDLE (a tensor),
 *  INVALID_GRAPH (an unknown, unbound or twice-bound input), DTYPE_MISMATCH,
 *  SHAPE_MISMATCH. Threads: as genie_plan_explain. @since 0.2 */
GENIE_API genie_status_t genie_plan_explain_bound(
    genie_context_t *ctx, const genie_graph_t *graph,
    const char *const *input_names, genie_tensor_t *const *inputs,
    size_t n_inputs, char **out_json);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GENIE_H */
