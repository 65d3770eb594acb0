//! A typed message from arbitrary bytes: decoding as a rich type (nested
//! structs, enums, strings, maps, byte buffers, options, recursion) never
//! panics, never overflows the stack, and never allocates past what the
//! input holds (libFuzzer's `-rss_limit_mb` and `-malloc_limit_mb` catch
//! both); a value that decodes encodes to bytes that decode to a value
//! that encodes to the same bytes (every field was read, none ignored).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
enum Shape {
    Empty,
    Circle(f64),
    Rect { w: u32, h: i16 },
    Poly(Vec<(i32, i64)>),
    Nested(Box<Shape>),
}

#[derive(Serialize, Deserialize)]
struct Rich {
    id: u64,
    name: String,
    tags: Vec<String>,
    map: BTreeMap<String, Vec<u16>>,
    shape: Shape,
    next: Option<Box<Rich>>,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
    flags: (bool, char, i128, u128, f32),
    unit: Vec<()>,
}

fn check<T: Serialize + for<'de> Deserialize<'de>>(data: &[u8]) {
    if let Ok(value) = ferry::typed::decode::<T>(data) {
        let once = ferry::typed::encode(&value).expect("a decoded value encodes");
        let again: T = ferry::typed::decode(&once).expect("an encoded value decodes");
        let twice = ferry::typed::encode(&again).expect("and encodes again");
        assert_eq!(once, twice);
    }
}

fuzz_target!(|data: &[u8]| {
    check::<Rich>(data);
    check::<Vec<Shape>>(data);
    check::<BTreeMap<String, Option<Vec<u8>>>>(data);
});
