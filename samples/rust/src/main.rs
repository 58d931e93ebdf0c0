//! The 2-layer MLP sample through the Rust binding; the same program exists
//! in C (samples/c/mlp.c), Go and Python, and all print the same checksum.
//!
//!   y = relu(x @ w1 + b1) @ w2 + b2
//!   x [4,64] input; w1 [64,128], b1 [128]; w2 [128,32], b2 [32]; y [4,32]
//!
//! Weights are allocated once as resident tensors on the context's default
//! device (host memory embedded, the server when GENIE_MASTER_ADDR is set)
//! and hold the seeded values of include/genie_seed.h (a function of each
//! value's name), reimplemented below.
use genie::{Context, DType, Graph, Phase, Role, Tensor};

const INPUTS: [(&str, &[i64]); 5] =
    [("x", &[4, 64]), ("w1", &[64, 128]), ("b1", &[128]), ("w2", &[128, 32]), ("b2", &[32])];

/// Seeded f32 values of value `name`: FNV-1a 64 of the name seeds
/// splitmix64; each value is uniform in [-s, s) with s = 1/sqrt(last dim).
fn seeded(name: &str, shape: &[i64]) -> Vec<f32> {
    let mut state: u64 = 0xcbf29ce484222325;
    for b in name.bytes() {
        state ^= u64::from(b);
        state = state.wrapping_mul(0x100000001b3);
    }
    let n: i64 = shape.iter().product();
    let scale = match shape.last() {
        Some(&d) if d > 0 => 1.0 / (d as f64).sqrt(),
        _ => 1.0,
    };
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            let r = z ^ (z >> 31);
            ((((r >> 40) as f64 / 16777216.0) * 2.0 - 1.0) * scale) as f32
        })
        .collect()
}

fn build_graph() -> genie::Result<Graph> {
    let mut g = Graph::new(Some("mlp"))?;
    for (name, shape) in INPUTS {
        g.add_input(name, DType::F32, shape)?;
    }
    let nodes: [(&str, &str, &[&str], &str, i32, &str); 5] = [
        ("matmul", "fc1.matmul", &["x", "w1"], "fc1.mm", 0, "mlp.fc1"),
        ("add", "fc1.bias", &["fc1.mm", "b1"], "fc1.out", 0, "mlp.fc1"),
        ("relu", "act1", &["fc1.out"], "act1.out", 0, "mlp.act1"),
        ("matmul", "fc2.matmul", &["act1.out", "w2"], "fc2.mm", 1, "mlp.fc2"),
        ("add", "fc2.bias", &["fc2.mm", "b2"], "y", 1, "mlp.fc2"),
    ];
    for (op, name, ins, out, layer, module) in nodes {
        g.add_node(op, name, ins, &[out])?;
        g.set_phase(name, Phase::Forward)?;
        g.set_layer(name, layer)?;
        g.set_module(name, Some(module))?;
    }
    for (value, role) in [
        ("x", Role::Input),
        ("w1", Role::Weight),
        ("b1", Role::Weight),
        ("w2", Role::Weight),
        ("b2", Role::Weight),
        ("fc1.out", Role::Activation),
        ("act1.out", Role::Activation),
        ("y", Role::Output),
    ] {
        g.set_role(value, role)?;
    }
    g.mark_output("y")?;
    g.validate()?;
    Ok(g)
}

fn run() -> genie::Result<()> {
    let graph = build_graph()?;
    let ctx = Context::new()?; // embedded, or remote when GENIE_MASTER_ADDR is set
    println!("mode {}", if ctx.is_embedded() { "embedded" } else { "remote" });
    let tensors = INPUTS
        .iter()
        .map(|(name, shape)| ctx.tensor_from_slice(shape, &seeded(name, shape), None))
        .collect::<genie::Result<Vec<Tensor>>>()?;
    let bindings: Vec<(&str, &Tensor)> = INPUTS.iter().map(|(n, _)| *n).zip(tensors.iter()).collect();
    let future = ctx.submit(&graph, &bindings)?;
    future.wait()?;
    let y = future.output_by_name("y")?;
    let info = y.info()?;
    let sum: f64 = y.to_vec::<f32>()?.iter().map(|&v| f64::from(v)).sum();
    let dims: Vec<String> = info.shape.iter().map(|d| d.to_string()).collect();
    println!("output y shape [{}] dtype {}", dims.join(", "), info.dtype.name());
    println!("checksum y = {:.4}", sum);
    Ok(())
}

fn main() {
    if std::env::args().len() > 1 {
        eprintln!("usage: mlp (no arguments; GENIE_MASTER_ADDR selects remote mode)");
        std::process::exit(2);
    }
    if let Err(e) = run() {
        eprintln!("mlp: {}", e);
        std::process::exit(1);
    }
}
