//! The Rust side of bench/binding_overhead.sh: the per-call cost of
//! submitting a tiny graph (out = a + b, two f32 [4] tensors, resident) and
//! waiting for it, embedded, through the safe API. The C program
//! bench/binding_overhead.c makes the same calls directly.
//!
//!   binding_overhead [--iters N]
//!
//! Prints one line: `per_call_ns <mean ns per call>` over N timed calls
//! (default 20000) after N/10 untimed ones. A call is submit + wait + drop.
use std::time::Instant;

use genie::{Context, DType, Graph};

fn main() -> genie::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iters: usize = match args.as_slice() {
        [] => 20000,
        [flag, n] if flag == "--iters" => n.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| usage()),
        _ => usage(),
    };
    let ctx = Context::new()?;
    if !ctx.is_embedded() {
        eprintln!("binding_overhead: unset GENIE_MASTER_ADDR: this benchmark runs embedded");
        std::process::exit(1);
    }
    let mut g = Graph::new(Some("tiny_add"))?;
    g.add_input("a", DType::F32, &[4])?;
    g.add_input("b", DType::F32, &[4])?;
    g.add_node("add", "add", &["a", "b"], &["out"])?;
    g.mark_output("out")?;
    let a = ctx.tensor_from_slice(&[4], &[1f32, 2.0, 3.0, 4.0], None)?;
    let b = ctx.tensor_from_slice(&[4], &[10f32, 20.0, 30.0, 40.0], None)?;
    let inputs = [("a", &a), ("b", &b)];

    for _ in 0..iters / 10 {
        ctx.submit(&g, &inputs)?.wait()?;
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        ctx.submit(&g, &inputs)?.wait()?;
    }
    println!("per_call_ns {:.1}", t0.elapsed().as_nanos() as f64 / iters as f64);
    Ok(())
}

fn usage() -> ! {
    eprintln!("usage: binding_overhead [--iters N]");
    std::process::exit(2)
}
