//! ONNX import through the safe API: the model of
//! tests/data/make_linear_relu_onnx.py (y = relu(x @ w + b)) imports with
//! its initializers as resident weights and runs; bad bytes are refused;
//! op libraries: a missing one is an Io error.
use genie::{Config, Context, ErrorKind};

fn context() -> Context {
    let mut cfg = Config::new().unwrap();
    cfg.use_env(false).unwrap();
    Context::with_config(&cfg).unwrap()
}

fn model() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/linear_relu.onnx");
    std::fs::read(path).unwrap()
}

fn expected(x: &[f32]) -> Vec<f32> {
    let b = [0.5f32, -0.5, 1.0, -1.0];
    let mut y = vec![0f32; 8];
    for r in 0..2 {
        for c in 0..4 {
            let mut s = b[c];
            for k in 0..3 {
                s += x[r * 3 + k] * ((k * 4 + c) as f32 - 5.0) / 4.0;
            }
            y[r * 4 + c] = s.max(0.0);
        }
    }
    y
}

#[test]
fn import_onnx_runs_with_resident_weights() {
    let ctx = context();
    let m = ctx.import_onnx(&model(), None).unwrap();
    assert_eq!(m.inputs, vec!["x".to_string()]);
    let names: Vec<&str> = m.weights.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, vec!["w", "b"]);
    let x = [1.0f32, -2.0, 0.5, 3.0, 0.25, -1.0];
    let xt = ctx.tensor_from_slice(&[2, 3], &x, None).unwrap();
    let f = m.submit(&ctx, &[("x", &xt)]).unwrap();
    f.wait().unwrap();
    let y: Vec<f32> = f.output(0).unwrap().to_vec().unwrap();
    for (g, w) in y.iter().zip(expected(&x)) {
        assert!((g - w).abs() < 1e-5, "{y:?}");
    }
}

#[test]
fn bad_models_are_refused() {
    let ctx = context();
    let e = ctx.import_onnx(b"not an onnx model", None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Parse, "{e}");
    let m = model();
    assert!(ctx.import_onnx(&m[..m.len() / 2], None).is_err());
}

#[test]
fn op_library_errors() {
    let e = genie::load_op_library("/nonexistent/libops.so").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.detail().contains("/nonexistent/libops.so"));
    assert!(genie::load_op_library("a\0b").is_err());
    assert!(!genie::op_registered("relu"));
}
