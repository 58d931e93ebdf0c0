//! The safe API end to end: results, every kind of bad input, threads,
//! remote mode through an in-process server.
use std::thread;
use std::time::Duration;

use genie::{
    Config, Context, DType, Error, ErrorKind, Future, Graph, Modality, Phase, Role, Server, ServerConfig, Tensor,
};

const X: [f32; 6] = [1.0, 2.0, 3.0, -1.0, 0.5, 2.0];
const W: [f32; 12] = [0.1, 0.2, 0.3, -0.4, 0.5, -0.6, 1.0, 0.0, -1.0, 0.25, 0.25, 0.25];
const B: [f32; 4] = [0.5, -0.5, 1.0, -2.0];

fn expected() -> Vec<f32> {
    let mut out = vec![0f32; 8];
    for i in 0..2 {
        for o in 0..4 {
            let mut s = B[o];
            for k in 0..3 {
                s += X[i * 3 + k] * W[o * 3 + k];
            }
            out[i * 4 + o] = s.max(0.0);
        }
    }
    out
}

fn context() -> Context {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    Context::with_config(&cfg).unwrap()
}

/// z = relu(x @ w^T + b): x [2,3], w [4,3] inputs, b [4] constant.
fn mlp() -> Graph {
    let mut g = Graph::new(Some("mlp")).unwrap();
    g.add_input("x", DType::F32, &[2, 3]).unwrap();
    g.add_input("w", DType::F32, &[4, 3]).unwrap();
    g.add_constant_slice("b", &[4], &B).unwrap();
    g.add_node("linear", "fc", &["x", "w", "b"], &["y"]).unwrap();
    g.add_node("relu", "act", &["y"], &["z"]).unwrap();
    g.set_role("w", Role::Weight).unwrap();
    g.set_role("x", Role::Input).unwrap();
    g.set_phase("fc", Phase::Forward).unwrap();
    g.set_layer("fc", 0).unwrap();
    g.set_module("fc", Some("mlp.fc")).unwrap();
    g.set_modality("fc", Modality::Text).unwrap();
    g.mark_output("z").unwrap();
    g.validate().unwrap();
    g
}

fn run(ctx: &Context, g: &Graph) -> Vec<f32> {
    let x = ctx.tensor_from_slice(&[2, 3], &X, None).unwrap();
    let w = ctx.tensor_from_slice(&[4, 3], &W, None).unwrap();
    let f = ctx.submit(g, &[("x", &x), ("w", &w)]).unwrap();
    f.wait().unwrap();
    assert_eq!(f.num_outputs().unwrap(), 1);
    let z = f.output_by_name("z").unwrap();
    let info = z.info().unwrap();
    assert_eq!((info.dtype, info.shape.as_slice(), info.nbytes), (DType::F32, &[2i64, 4][..], 32));
    z.to_vec::<f32>().unwrap()
}

fn assert_close(got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() < 1e-5, "value {}: got {} want {} (all {:?})", i, g, w, got);
    }
}

/// The error is of `kind`, carries the right code and a detail containing `want`.
fn assert_err<T: std::fmt::Debug>(r: genie::Result<T>, kind: ErrorKind, want: &str) -> Error {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind(), kind, "{}", e);
    assert_eq!(Some(e.code()), kind.code(), "{}", e);
    assert!(!e.detail().is_empty(), "no detail: {}", e);
    assert!(e.detail().contains(want), "detail {:?} does not mention {:?}", e.detail(), want);
    assert!(e.to_string().starts_with(e.code_name()), "{}", e);
    e
}

#[test]
fn version_and_kinds() {
    assert_eq!(genie::abi_version(), genie::ffi::GENIE_ABI_VERSION);
    assert!(!genie::version().is_empty());
    assert_eq!(DType::BF16.size(), 2);
    assert_eq!(DType::I64.name(), "i64");
    assert_eq!(ErrorKind::from_code(genie::ffi::GENIE_ERR_PARSE), ErrorKind::Parse);
    assert_eq!(ErrorKind::from_code(-1000), ErrorKind::Unknown);
    assert_eq!(DType::from_raw(99), None);
}

#[test]
fn thread_safety_markers() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Context>();
    send_sync::<Tensor>();
    send_sync::<Future>();
    send_sync::<Error>();
    send::<Graph>(); // not Sync: see the compile_fail doc tests in lib.rs
    send::<Server>();
}

#[test]
fn mlp_embedded() {
    let ctx = context();
    assert!(ctx.is_embedded());
    assert!(ctx.is_connected().unwrap()); // embedded: nothing to lose
    assert!(!ctx.node_id().is_empty());
    assert_close(&run(&ctx, &mlp()), &expected());
}

#[test]
fn tensor_round_trip() {
    let ctx = context();
    let t = ctx.alloc(DType::I32, &[2, 2], Some("cpu")).unwrap();
    assert_eq!(t.device(), "cpu:0");
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![0; 4]);
    t.copy_from_slice(&[1i32, 2, 3, 4]).unwrap();
    let mut part = [0u8; 8];
    t.read_bytes(4, &mut part).unwrap();
    assert_eq!(part, [2, 0, 0, 0, 3, 0, 0, 0]);
    t.write_bytes(12, &9i32.to_ne_bytes()).unwrap();
    assert_eq!(t.to_vec::<i32>().unwrap(), vec![1, 2, 3, 9]);
    assert_eq!(t.to_bytes().unwrap().len(), 16);
    let l = ctx.tensor_from_slice(&[2], &[7i64, -8], None).unwrap();
    assert_eq!(l.to_vec::<i64>().unwrap(), vec![7, -8]);
    // A scalar: no dimensions, one element.
    let s = ctx.tensor_from_slice(&[], &[4.5f32], None).unwrap();
    let info = s.info().unwrap();
    assert!(info.shape.is_empty() && info.nbytes == 4, "{:?}", info.shape);
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![4.5]);
}

#[test]
fn tensor_semantics() {
    let ctx = context();
    let t = ctx.alloc(DType::F16, &[4], None).unwrap();
    assert_eq!(t.semantics().unwrap(), (Phase::Unknown, Role::Unspecified, -1));
    t.set_semantics(Phase::Decode, Role::KvCache, 3).unwrap();
    assert_eq!(t.set_semantics(Phase::Prefill, Role::Weight, 65535).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(t.set_semantics(Phase::Prefill, Role::Weight, -2).unwrap_err().kind(), ErrorKind::InvalidArgument);
    assert_eq!(t.semantics().unwrap(), (Phase::Decode, Role::KvCache, 3));
    t.set_semantics(Phase::Unknown, Role::Unspecified, -1).unwrap();
    assert_eq!(t.semantics().unwrap(), (Phase::Unknown, Role::Unspecified, -1));
}

#[test]
fn graph_introspection_and_json() {
    let g = mlp();
    assert_eq!(g.inputs().unwrap(), ["x", "w"]);
    assert_eq!(g.outputs().unwrap(), ["z"]);
    assert_eq!(g.num_nodes().unwrap(), 2);
    let nodes = g.nodes().unwrap();
    let pairs: Vec<(&str, &str)> = nodes.iter().map(|n| (n.name.as_str(), n.op.as_str())).collect();
    assert_eq!(pairs, [("fc", "linear"), ("act", "relu")]);
    assert_eq!(g.value_info("y").unwrap(), (DType::F32, vec![2, 4]));
    let js = g.to_json().unwrap();
    assert!(js.contains("\"mlp.fc\""), "{}", js);
    let g2 = Graph::from_json(&js).unwrap();
    assert_eq!(g.hash().unwrap(), g2.hash().unwrap());
    assert_eq!(js, g2.to_json().unwrap());
    assert_close(&run(&context(), &g2), &expected());
}

#[test]
fn unknown_op() {
    let mut g = Graph::new(None).unwrap();
    g.add_input("a", DType::F32, &[2]).unwrap();
    assert_err(g.add_node("frobnicate", "n", &["a"], &["b"]), ErrorKind::UnknownOp, "frobnicate");
    assert_err(g.add_node("matmull", "n", &["a", "a"], &["b"]), ErrorKind::UnknownOp, "matmul");
    g.add_node("relu", "r", &["a"], &["b"]).unwrap(); // unchanged, still usable
}

#[test]
fn bad_input() {
    let ctx = context();
    let mut g = mlp();
    // Wrong dtype: bound at submission, and read/written as a Rust slice.
    let xi = ctx.alloc(DType::I32, &[2, 3], None).unwrap();
    let w = ctx.alloc(DType::F32, &[4, 3], None).unwrap();
    assert_err(ctx.submit(&g, &[("x", &xi), ("w", &w)]), ErrorKind::DtypeMismatch, "x");
    assert_err(xi.to_vec::<f32>(), ErrorKind::DtypeMismatch, "i32");
    assert_err(xi.copy_from_slice(&[0f32; 6]), ErrorKind::DtypeMismatch, "i32");
    // Wrong shape, unbound and unknown inputs.
    let x = ctx.alloc(DType::F32, &[2, 3], None).unwrap();
    let ws = ctx.alloc(DType::F32, &[3, 4], None).unwrap();
    assert_err(ctx.submit(&g, &[("x", &x), ("w", &ws)]), ErrorKind::ShapeMismatch, "w");
    assert_err(ctx.submit(&g, &[("x", &x)]), ErrorKind::InvalidGraph, "w");
    assert_err(ctx.submit(&g, &[("x", &x), ("w", &w), ("nope", &x)]), ErrorKind::InvalidGraph, "nope");
    // Wrong size buffers.
    assert_err(x.write_bytes(0, &[0u8; 100]), ErrorKind::SizeMismatch, "");
    assert_err(x.read_bytes(20, &mut [0u8; 8]), ErrorKind::SizeMismatch, "");
    assert_err(x.copy_from_slice(&[0f32; 5]), ErrorKind::SizeMismatch, "20 bytes");
    assert_err(ctx.tensor_from_slice(&[2, 2], &[1f32, 2.0, 3.0], None), ErrorKind::SizeMismatch, "12 bytes");
    assert_err(g.add_constant("c", DType::F32, &[4], &[0u8; 3]), ErrorKind::SizeMismatch, "");
    // Bad shapes and devices.
    assert_err(ctx.alloc(DType::F32, &[2, -3], None), ErrorKind::InvalidArgument, "");
    assert_err(ctx.alloc(DType::F32, &[1; 9], None), ErrorKind::InvalidArgument, "");
    assert!(ctx.alloc(DType::F32, &[2], Some("warp:9")).is_err());
    assert_err(ctx.alloc(DType::F32, &[2], Some("remote:0")), ErrorKind::Unsupported, "");
    // NUL bytes never reach C.
    assert_err(g.add_input("a\0b", DType::F32, &[1]), ErrorKind::InvalidArgument, "NUL");
    assert_err(ctx.submit(&g, &[("x\0", &x)]), ErrorKind::InvalidArgument, "NUL");
    // Graph errors.
    let mut bad = Graph::new(None).unwrap();
    bad.add_input("a", DType::F32, &[2]).unwrap();
    assert_err(bad.add_input("a", DType::F32, &[2]), ErrorKind::InvalidGraph, "a");
    assert_err(bad.set_phase("nope", Phase::Forward), ErrorKind::NotFound, "nope");
    bad.add_node("softmax", "s", &["a"], &["b"]).unwrap();
    assert_err(bad.set_attr_string("s", "axis", "x"), ErrorKind::InvalidAttribute, "axis");
    assert_err(bad.validate(), ErrorKind::InvalidGraph, "");
    assert_err(Graph::from_json("{\"format\": \"genie.graph\", \"inputs\": ["), ErrorKind::Parse, "");
    // Config values are validated by the library.
    let mut cfg = Config::new().unwrap();
    assert_err(cfg.master_port(70000), ErrorKind::InvalidArgument, "");
    assert_err(cfg.num_threads(-1), ErrorKind::InvalidArgument, "");
}

#[test]
fn handles_outlive_each_other_safely() {
    let ctx = context();
    let g = mlp();
    let x = ctx.tensor_from_slice(&[2, 3], &X, None).unwrap();
    let w = ctx.tensor_from_slice(&[4, 3], &W, None).unwrap();
    let f = ctx.submit(&g, &[("x", &x), ("w", &w)]).unwrap();
    drop(x); // the submission keeps its own reference
    drop(g); // and its own snapshot of the graph
    f.wait().unwrap();
    let z = f.output(0).unwrap();
    drop(f); // outputs outlive their future
    assert_close(&z.to_vec::<f32>().unwrap(), &expected());
    // After shutdown, tensors answer Shutdown and are still dropped safely.
    drop(ctx);
    assert_err(w.to_bytes(), ErrorKind::Shutdown, "");
    assert_err(z.to_vec::<f32>(), ErrorKind::Shutdown, "");
}

#[test]
fn future_errors() {
    let ctx = context();
    let g = mlp();
    let x = ctx.tensor_from_slice(&[2, 3], &X, None).unwrap();
    let w = ctx.tensor_from_slice(&[4, 3], &W, None).unwrap();
    let f = ctx.submit(&g, &[("x", &x), ("w", &w)]).unwrap();
    f.wait_timeout(Duration::from_secs(10)).unwrap();
    assert!(f.poll().unwrap());
    assert_err(f.output(1), ErrorKind::NotFound, "");
    assert_err(f.output_by_name("y"), ErrorKind::NotFound, "y");
    assert!(f.exec_time().unwrap() > Duration::ZERO);
    // Integer division by zero fails during execution: the future says so.
    let mut gd = Graph::new(Some("div")).unwrap();
    gd.add_input("a", DType::I32, &[2]).unwrap();
    gd.add_input("b", DType::I32, &[2]).unwrap();
    gd.add_node("div", "d", &["a", "b"], &["q"]).unwrap();
    gd.mark_output("q").unwrap();
    let a = ctx.alloc(DType::I32, &[2], None).unwrap();
    let fd = ctx.submit(&gd, &[("a", &a), ("b", &a)]).unwrap();
    assert_err(fd.wait(), ErrorKind::InvalidArgument, "");
    assert_err(fd.output(0), ErrorKind::InvalidArgument, "");
}

#[test]
fn threads_share_context_tensors_and_futures() {
    let ctx = context();
    let w = ctx.tensor_from_slice(&[4, 3], &W, None).unwrap();
    let want = expected();
    let (ctx, w, want) = (&ctx, &w, &want);
    thread::scope(|s| {
        for _ in 0..8 {
            // A graph is Send, not Sync: each thread builds (or is given) its own.
            let g = mlp();
            s.spawn(move || {
                let x = ctx.tensor_from_slice(&[2, 3], &X, None).unwrap();
                for _ in 0..20 {
                    let f = ctx.submit(&g, &[("x", &x), ("w", w)]).unwrap();
                    // The future is waited on from another thread.
                    let z =
                        thread::scope(|s2| s2.spawn(|| f.wait().and_then(|_| f.output(0))).join().unwrap()).unwrap();
                    assert_close(&z.to_vec::<f32>().unwrap(), want);
                }
            });
        }
    });
}

#[test]
fn remote_through_in_process_server() {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    let server = Server::new(Some(&cfg), None, 0).unwrap();
    let port = server.port().unwrap();
    cfg.master_addr(Some("127.0.0.1")).unwrap().master_port(i32::from(port)).unwrap();
    cfg.timeout(Duration::from_secs(20)).unwrap();
    let ctx = Context::with_config(&cfg).unwrap();
    assert!(!ctx.is_embedded());
    assert!(ctx.is_connected().unwrap());
    assert!(ctx.server_info().unwrap().contains("\"sessions\""));
    let lost = ctx.lost_tensors().unwrap();
    assert!(lost.contains("\"session\":\"connected\"") && lost.contains("\"tensors\":[]"), "{}", lost);
    assert!(context().lost_tensors().unwrap().contains("\"session\":\"embedded\""));
    assert_close(&run(&ctx, &mlp()), &expected());
    let t = ctx.alloc(DType::F32, &[2], None).unwrap();
    assert_eq!(t.device(), "remote:0");
    assert_err(t.write_bytes(0, &[0u8; 12]), ErrorKind::SizeMismatch, "");
    assert_err(context().server_info(), ErrorKind::Unsupported, "");
    drop(t);
    drop(server);
    // The server is gone: the context sees its connection lost.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while ctx.is_connected().unwrap() {
        assert!(std::time::Instant::now() < deadline, "still connected to a stopped server");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(ctx);
    cfg.timeout(Duration::from_secs(2)).unwrap();
    let e = Context::with_config(&cfg).expect_err("connected to a stopped server");
    assert!(matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout), "{}", e);
}

#[test]
fn tls_settings_reach_the_library() {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    assert_err(cfg.tls_cert(Some("/nonexistent/server.pem"), None), ErrorKind::InvalidArgument, "private key");
    cfg.tls_cert(Some("/nonexistent/server.pem"), Some("/nonexistent/server.key")).unwrap();
    cfg.tls_ca(Some("/nonexistent/ca.pem")).unwrap().tls_server_name(Some("localhost")).unwrap();
    // The files are read when the server starts: the missing one is named.
    assert_err(Server::new(Some(&cfg), None, 0), ErrorKind::InvalidArgument, "/nonexistent/server.pem");
}

#[test]
fn trace_start_stop() {
    let dir = std::env::temp_dir().join(format!("genie_rust_trace_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("trace.json");
    let path = path.to_str().unwrap();
    genie::trace_start(path).unwrap();
    genie::trace_start(path).unwrap(); // the same path again does nothing
    let other = dir.join("other.json");
    let err = genie::trace_start(other.to_str().unwrap()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    genie::trace_stop().unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains("\"traceEvents\""), "{}", text);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Settings by name (`Config::set`, `ServerConfig::set`) reach
/// genie_config_set_int/_string and genie_server_config_set_*: checked by
/// the library, and in force.
#[test]
fn settings_by_name() {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    assert_err(cfg.set("timeout_ms", -5), ErrorKind::InvalidArgument, "below 1");
    assert_err(cfg.set("max_sessions", 4), ErrorKind::InvalidArgument, "'max_sessions' is a server's setting");
    assert_err(cfg.set("no_such_setting", true), ErrorKind::InvalidArgument, "no_such_setting");
    assert_err(cfg.set("cluster", "bad name!"), ErrorKind::InvalidArgument, "bad name");
    let mut own = ServerConfig::new().unwrap();
    assert_err(own.set("timeout_ms", 5), ErrorKind::InvalidArgument, "not a setting of a server alone");
    // A server's own setting in force: one session at most.
    own.set("max_sessions", 1).unwrap();
    let server = Server::with_settings(Some(&cfg), Some(&own), None, 0).unwrap();
    let port = server.port().unwrap();
    cfg.master_addr(Some("127.0.0.1")).unwrap().master_port(i32::from(port)).unwrap();
    cfg.set("timeout_ms", 10_000).unwrap().set("graph_deltas", false).unwrap();
    let ctx = Context::with_config(&cfg).unwrap();
    assert!(ctx.is_connected().unwrap());
    assert_err(Context::with_config(&cfg), ErrorKind::Connection, "limit");
}
