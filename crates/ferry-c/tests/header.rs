//! `include/ferry.h` is what cbindgen makes of `src/abi.rs` now: every ABI
//! change shows in review as a change to the committed header.
//! `FERRY_BLESS=1 cargo test -p ferry-c --test header` rewrites it.

use std::path::Path;

#[test]
fn the_committed_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("reading cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not make the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("the header is UTF-8");
    let path = crate_dir.join("include/ferry.h");
    if std::env::var_os("FERRY_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("writing include/ferry.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(committed.lines().count().min(fresh.lines().count()));
        panic!(
            "include/ferry.h differs from what cbindgen makes of src/abi.rs (first at line {}): \
             run `FERRY_BLESS=1 cargo test -p ferry-c --test header` and commit the header\n\
             committed: {:?}\nfresh:     {:?}",
            first + 1,
            committed.lines().nth(first).unwrap_or("<end>"),
            fresh.lines().nth(first).unwrap_or("<end>"),
        );
    }
}
