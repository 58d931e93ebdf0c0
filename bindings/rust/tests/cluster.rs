//! The cluster API from Rust: state, discovery, plan explanation, event
//! subscriptions (the callback on the loop thread, Drop unsubscribing) and
//! bad input. The JSON is checked with the small parser below (the crate
//! has no dependencies).
use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

use genie::{Config, Context, DType, ErrorKind, EventKind, EventMask, Graph, Server};

#[derive(Debug, Clone, PartialEq)]
enum Json {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(BTreeMap<String, Json>),
}

impl Json {
    fn parse(text: &str) -> Json {
        let b = text.as_bytes();
        let mut i = 0;
        let v = value(b, &mut i);
        ws(b, &mut i);
        assert_eq!(i, b.len(), "trailing text in {}", text);
        v
    }
    fn get(&self, key: &str) -> &Json {
        match self {
            Json::Obj(m) => m.get(key).unwrap_or_else(|| panic!("no key {:?} in {:?}", key, self)),
            _ => panic!("not an object: {:?}", self),
        }
    }
    fn str(&self) -> &str {
        match self {
            Json::Str(s) => s,
            _ => panic!("not a string: {:?}", self),
        }
    }
    fn num(&self) -> f64 {
        match self {
            Json::Num(n) => *n,
            _ => panic!("not a number: {:?}", self),
        }
    }
    fn arr(&self) -> &[Json] {
        match self {
            Json::Arr(a) => a,
            _ => panic!("not an array: {:?}", self),
        }
    }
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && (b[*i] as char).is_ascii_whitespace() {
        *i += 1;
    }
}

fn value(b: &[u8], i: &mut usize) -> Json {
    ws(b, i);
    match b[*i] {
        b'{' => {
            *i += 1;
            let mut m = BTreeMap::new();
            ws(b, i);
            if b[*i] == b'}' {
                *i += 1;
                return Json::Obj(m);
            }
            loop {
                ws(b, i);
                let k = match value(b, i) {
                    Json::Str(s) => s,
                    v => panic!("object key {:?}", v),
                };
                ws(b, i);
                assert_eq!(b[*i], b':');
                *i += 1;
                m.insert(k, value(b, i));
                ws(b, i);
                *i += 1;
                if b[*i - 1] == b'}' {
                    return Json::Obj(m);
                }
            }
        }
        b'[' => {
            *i += 1;
            let mut a = Vec::new();
            ws(b, i);
            if b[*i] == b']' {
                *i += 1;
                return Json::Arr(a);
            }
            loop {
                a.push(value(b, i));
                ws(b, i);
                *i += 1;
                if b[*i - 1] == b']' {
                    return Json::Arr(a);
                }
            }
        }
        b'"' => {
            *i += 1;
            let mut s = Vec::new();
            while b[*i] != b'"' {
                if b[*i] == b'\\' {
                    *i += 1;
                    match b[*i] {
                        b'n' => s.push(b'\n'),
                        b't' => s.push(b'\t'),
                        b'u' => {
                            let code =
                                u32::from_str_radix(std::str::from_utf8(&b[*i + 1..*i + 5]).unwrap(), 16).unwrap();
                            let mut buf = [0u8; 4];
                            s.extend_from_slice(char::from_u32(code).unwrap_or('?').encode_utf8(&mut buf).as_bytes());
                            *i += 4;
                        }
                        c => s.push(c),
                    }
                } else {
                    s.push(b[*i]);
                }
                *i += 1;
            }
            *i += 1;
            Json::Str(String::from_utf8(s).unwrap())
        }
        b't' => {
            *i += 4;
            Json::Bool(true)
        }
        b'f' => {
            *i += 5;
            Json::Bool(false)
        }
        b'n' => {
            *i += 4;
            Json::Null
        }
        _ => {
            let start = *i;
            while *i < b.len() && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                *i += 1;
            }
            Json::Num(std::str::from_utf8(&b[start..*i]).unwrap().parse().unwrap())
        }
    }
}

fn config() -> Config {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    cfg
}

fn mlp() -> Graph {
    let mut g = Graph::new(Some("explain")).unwrap();
    g.add_input("x", DType::F32, &[4, 8]).unwrap();
    g.add_input("w", DType::F32, &[8, 8]).unwrap();
    g.add_node("matmul", "mm", &["x", "w"], &["h"]).unwrap();
    g.add_node("relu", "act", &["h"], &["y"]).unwrap();
    g.mark_output("y").unwrap();
    g
}

#[test]
fn cluster_state_of_an_embedded_context() {
    let mut cfg = config();
    cfg.heartbeat_interval(Duration::from_millis(1234))
        .unwrap()
        .heartbeat_timeout(Duration::from_millis(5678))
        .unwrap()
        .gpu_poll_interval(Duration::from_millis(910))
        .unwrap()
        .health_interval(Duration::from_millis(1112))
        .unwrap()
        .graph_deltas(false)
        .unwrap();
    let ctx = Context::with_config(&cfg).unwrap();
    let st = Json::parse(&ctx.cluster_state().unwrap());
    assert_eq!(st.get("mode").str(), "embedded");
    assert_eq!(st.get("master"), &Json::Null);
    assert_eq!(st.get("node").get("id").str(), ctx.node_id());
    let nodes = st.get("nodes").arr();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].get("id").str(), ctx.node_id());
    assert_eq!(st.get("backend").get("selected").str(), "tcp");
    assert!(!st.get("backend").get("reason").str().is_empty());
    let iv = st.get("intervals");
    assert_eq!(iv.get("heartbeat_interval_ms").num(), 1234.0);
    assert_eq!(iv.get("heartbeat_timeout_ms").num(), 5678.0);
    assert_eq!(iv.get("gpu_poll_interval_ms").num(), 910.0);
    assert_eq!(iv.get("health_interval_ms").num(), 1112.0);
}

#[test]
fn discover_reports_probes_and_a_server() {
    let d = Json::parse(&genie::discover(None, None, 0).unwrap());
    assert_eq!(d.get("tcp"), &Json::Null);
    assert_eq!(d.get("selection").get("selected").str(), "tcp");
    assert!(!d.get("rdma").get("reason").str().is_empty());
    let mut scfg = config();
    scfg.node_id(Some("rs-disc")).unwrap();
    let srv = Server::new(Some(&scfg), None, 0).unwrap();
    let d = Json::parse(&genie::discover(None, Some("127.0.0.1"), srv.port().unwrap()).unwrap());
    assert_eq!(d.get("tcp").get("reachable"), &Json::Bool(true));
    assert_eq!(d.get("tcp").get("server_node_id").str(), "rs-disc");
    let e = genie::discover(None, Some("127.0.0.1"), 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!e.detail().is_empty());
}

#[test]
fn cluster_members_needs_etcd_endpoints() {
    let mut cfg = config();
    cfg.etcd_endpoints(None).unwrap();
    let e = genie::cluster_members(Some(&cfg)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.detail().contains("etcd"), "{}", e.detail());
}

#[test]
fn plan_explain_names_every_node_with_a_device() {
    let ctx = Context::with_config(&config()).unwrap();
    let g = mlp();
    let plan = Json::parse(&ctx.plan_explain(&g).unwrap());
    let nodes = plan.get("nodes").arr();
    let names: Vec<&str> = nodes.iter().map(|n| n.get("name").str()).collect();
    assert_eq!(names, ["mm", "act"]);
    for n in nodes {
        let dev = n.get("device").str();
        assert!(dev.rsplit('/').next().unwrap().starts_with("cpu"), "{}", dev);
        assert!(!n.get("rule").str().is_empty() && !n.get("why").str().is_empty());
    }
    let mut dyn_g = Graph::new(None).unwrap();
    dyn_g.add_input("x", DType::F32, &[-1, 4]).unwrap();
    dyn_g.add_node("relu", "r", &["x"], &["y"]).unwrap();
    dyn_g.mark_output("y").unwrap();
    let e = ctx.plan_explain(&dyn_g).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidGraph);
    assert!(!e.detail().is_empty());

    // Bound, the bound size resolves the dynamic dimension.
    for rows in [3i64, 1000] {
        let x = ctx.alloc(DType::F32, &[rows, 4], None).unwrap();
        let plan = Json::parse(&ctx.plan_explain_bound(&dyn_g, &[("x", &x)]).unwrap());
        let nodes = plan.get("nodes").arr();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].get("name").str(), "r");
        assert_eq!(nodes[0].get("bytes").num(), (2 * rows * 4 * 4) as f64);
    }
    let wrong = ctx.alloc(DType::I32, &[3, 4], None).unwrap();
    let e = ctx.plan_explain_bound(&dyn_g, &[("x", &wrong)]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DtypeMismatch);
    assert!(!e.detail().is_empty());
}

#[test]
fn subscribe_delivers_and_drop_unsubscribes() {
    let ctx = Context::with_config(&config()).unwrap();
    let subscriptions =
        |ctx: &Context| Json::parse(&ctx.cluster_state().unwrap()).get("counters").get("subscriptions").num();
    let (tx, rx) = mpsc::channel();
    let sub = ctx.subscribe(EventKind::BackendSelected | EventKind::NodeLost, move |e| tx.send(e).unwrap()).unwrap();
    let ev = rx.recv_timeout(Duration::from_secs(10)).expect("BACKEND_SELECTED was not delivered");
    assert_eq!(ev.kind, Some(EventKind::BackendSelected));
    let j = Json::parse(&ev.json);
    assert_eq!(j.get("type").str(), "BACKEND_SELECTED");
    assert_eq!(j.get("backend").str(), "tcp");
    assert!(!j.get("reason").str().is_empty() && j.get("time_ms").num() > 0.0);
    assert_eq!(subscriptions(&ctx), 1.0);
    drop(sub);
    assert_eq!(subscriptions(&ctx), 0.0);
    // The callback (and its sender) is gone: the channel is disconnected.
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Err(mpsc::RecvTimeoutError::Disconnected));

    // A panicking callback is caught; delivery to others goes on.
    let bad = ctx.subscribe(EventKind::BackendSelected, |_| panic!("on purpose")).unwrap();
    let (tx, rx) = mpsc::channel();
    let good = ctx.subscribe(EventMask::ALL, move |e| tx.send(e.kind).unwrap()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Some(EventKind::BackendSelected));
    bad.unsubscribe().unwrap();
    good.unsubscribe().unwrap();
    assert_eq!(subscriptions(&ctx), 0.0);
}

#[test]
fn node_lost_when_the_master_stops() {
    let mut hb = config();
    hb.heartbeat_interval(Duration::from_millis(50)).unwrap().heartbeat_timeout(Duration::from_millis(200)).unwrap();
    hb.node_id(Some("rs-master")).unwrap();
    let srv = Server::new(Some(&hb), None, 0).unwrap();
    let mut cfg = config();
    cfg.heartbeat_interval(Duration::from_millis(50)).unwrap().heartbeat_timeout(Duration::from_millis(200)).unwrap();
    cfg.master_addr(Some("127.0.0.1")).unwrap().master_port(i32::from(srv.port().unwrap())).unwrap();
    cfg.timeout(Duration::from_secs(5)).unwrap();
    let ctx = Context::with_config(&cfg).unwrap();
    let st = Json::parse(&ctx.cluster_state().unwrap());
    assert_eq!(st.get("mode").str(), "remote");
    assert_eq!(st.get("master").get("node_id").str(), "rs-master");
    let (tx, rx) = mpsc::channel();
    let sub = ctx.subscribe(EventKind::NodeLost, move |e| tx.send(e).unwrap()).unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(600)).is_err(), "NODE_LOST while the master is up");
    drop(srv);
    let ev = rx.recv_timeout(Duration::from_secs(20)).expect("no NODE_LOST after the master stopped");
    assert_eq!(ev.kind, Some(EventKind::NodeLost));
    let j = Json::parse(&ev.json);
    assert_eq!(j.get("node").get("id").str(), "rs-master");
    assert!(!j.get("reason").str().is_empty());
    drop(sub);
}

#[test]
fn cluster_bad_input() {
    let ctx = Context::with_config(&config()).unwrap();
    for bits in [0u32, 1 << 9] {
        let e = ctx.subscribe(EventMask::from_bits(bits), |_| {}).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(!e.detail().is_empty());
    }
    let e = config().heartbeat_interval(Duration::from_millis(5)).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(!e.detail().is_empty());
    let e = config().health_interval(Duration::from_secs(200_000)).map(|_| ()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(EventMask::ALL.contains(EventKind::GpuOverheated));
    assert!(!EventMask::from(EventKind::NodeLost).contains(EventKind::NodeJoined));
}
