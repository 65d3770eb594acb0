//! A ring frame's tag, and the fixed fields of a frame body, from arbitrary
//! bytes: decoding never panics, a tag that decodes is within the limits
//! and packs back to the same word, and the body fields round trip.
#![no_main]

use ferry::wire::MAX_HANDLES;
use ferry::wire::frame::{
    BLOCK_REF, HANDLE_ID, TOTAL, Tag, decode_handle_id, decode_total, encode_handle_id,
    encode_total,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((raw, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let raw = u32::from_le_bytes(*raw);
    if let Ok(tag) = Tag::decode(raw) {
        assert_eq!(tag.encode(), raw);
        assert!(usize::from(tag.handles) <= MAX_HANDLES);
        assert!(tag.prefix_len() <= BLOCK_REF + MAX_HANDLES * HANDLE_ID);
    }
    if let Some((field, _)) = rest.split_first_chunk::<TOTAL>() {
        assert_eq!(encode_total(decode_total(field)), *field);
    }
    if let Some((field, _)) = rest.split_first_chunk::<HANDLE_ID>() {
        assert_eq!(encode_handle_id(decode_handle_id(field)), *field);
    }
});
