//! src/ffi.rs must be exactly what bindgen makes of include/genie.h today:
//! regenerates it into a temporary file (regen-ffi.sh --check) and fails on
//! any difference. Needs Debian's bindgen and rustfmt; without them the
//! check is reported as skipped (tests/scripts/rust_test.sh requires them).
use std::path::Path;
use std::process::Command;

#[test]
fn ffi_matches_header() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("regen-ffi.sh");
    if Command::new("bindgen").arg("--version").output().is_err() || !Path::new("/usr/bin/rustfmt").exists() {
        eprintln!("SKIPPED: bindgen or /usr/bin/rustfmt is not installed; src/ffi.rs not checked against the header");
        return;
    }
    // bindgen and rustfmt are tools here, not code under test: no sanitizer
    // runtime preloaded into them (tests/scripts/rust_test.sh preloads it).
    let out = Command::new("bash")
        .arg(&script)
        .arg("--check")
        .env_remove("LD_PRELOAD")
        .env_remove("ASAN_OPTIONS")
        .output()
        .expect("run regen-ffi.sh");
    assert!(
        out.status.success(),
        "src/ffi.rs is out of date with include/genie.h: run bindings/rust/regen-ffi.sh\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
