//! A `Block` frame's descriptor from arbitrary bytes: decoding never
//! panics and every descriptor encodes back to the same bytes.
#![no_main]

use ferry::wire::frame::{BLOCK_REF, BlockRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((bytes, _)) = data.split_first_chunk::<BLOCK_REF>() else {
        return;
    };
    let block = BlockRef::decode(bytes);
    assert_eq!(block.encode(), *bytes);
});
