//! A control-socket record from arbitrary bytes (of any length): decoding
//! never panics, and a record that decodes encodes back to the same bytes
//! (so every field was checked, none ignored).
#![no_main]

use ferry::wire::record::Record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = Record::decode(data) {
        assert_eq!(record.encode()[..], *data);
    }
});
