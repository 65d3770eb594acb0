//! A pipe region's header from arbitrary bytes, against an object length
//! that is either arbitrary or close to the one the header claims: decoding
//! never panics, and a header that decodes names a valid capacity that
//! matches the length, and encodes back to the same bytes.
#![no_main]

use ferry::wire::region::{DATA_AT, HEADER_LEN, RegionHeader, region_len, valid_capacity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((header, rest)) = data.split_first_chunk::<HEADER_LEN>() else {
        return;
    };
    let Some((&mode, rest)) = rest.split_first() else {
        return;
    };
    let mut word = [0u8; 8];
    let n = rest.len().min(8);
    word[..n].copy_from_slice(&rest[..n]);
    let word = u64::from_le_bytes(word);
    let object_len = if mode & 1 == 0 {
        // Any length at all.
        word as usize
    } else {
        // The length the claimed capacity implies, nudged by a little.
        let claimed = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
        (claimed as usize)
            .wrapping_mul(2)
            .wrapping_add(DATA_AT)
            .wrapping_add(word as i16 as isize as usize)
    };
    if let Ok(decoded) = RegionHeader::decode(header, object_len) {
        assert!(valid_capacity(decoded.ring_capacity()));
        assert_eq!(region_len(decoded.ring_capacity()), Some(object_len));
        assert_eq!(decoded.encode(), *header);
    }
});
