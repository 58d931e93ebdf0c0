//! Finds libgenie through the `pkg-config` program (genie.pc): for an
//! install in a non-system prefix, set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
//! (and LD_LIBRARY_PATH=<prefix>/lib to run). PKG_CONFIG names another
//! pkg-config program.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&pkg_config)
        .args(["--libs", "genie"])
        .output()
        .unwrap_or_else(|e| panic!("genie: cannot run `{}`: {} (install pkg-config)", pkg_config, e));
    if !output.status.success() {
        panic!(
            "genie: `{} --libs genie` failed: {}\n\
             Install Genie (cmake --install BUILD --prefix PREFIX) and set \
             PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (or the lib/<arch>/pkgconfig folder).",
            pkg_config,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let libs = String::from_utf8(output.stdout).expect("pkg-config output is not UTF-8");
    let mut linked = false;
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:libdir={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={}", lib);
            linked |= lib == "genie";
        } else {
            println!("cargo:rustc-link-arg={}", flag);
        }
    }
    if !linked {
        panic!("genie: `{} --libs genie` gave no -lgenie: '{}'", pkg_config, libs.trim());
    }
}
