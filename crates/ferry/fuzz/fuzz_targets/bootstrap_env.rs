//! The environment string a spawned child reads (`FERRY_BOOTSTRAP`), from
//! arbitrary bytes: decoding never panics, and a value that decodes encodes
//! back to exactly the same text (one spelling per value).
#![no_main]

use ferry::wire::bootstrap::BootstrapEnv;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(env) = BootstrapEnv::decode(text) {
        assert_eq!(env.encode(), text);
    }
});
