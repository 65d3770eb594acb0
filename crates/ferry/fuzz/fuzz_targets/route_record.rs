//! A routing record from arbitrary bytes (of any length): decoding never
//! panics, and a record that decodes encodes back to the same bytes (so
//! every field was checked, none ignored).
#![no_main]

use ferry::wire::route::RouteRecord;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(record) = RouteRecord::decode(data) {
        assert_eq!(record.encode()[..], *data);
    }
});
