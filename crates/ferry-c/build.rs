//! The shared library's SONAME: `libferry.so.<major ABI version>`, which
//! `install.sh` installs it as (cargo names it `libferry_c.so`).

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libferry.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
