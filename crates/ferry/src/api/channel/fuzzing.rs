//! Hooks for the fuzz targets in `crates/ferry/fuzz/`: raw access to a
//! pipe's shared region, so a target can play the hostile peer. Built only
//! with the `fuzzing` feature, hidden from the docs, and no part of the API.
//!
//! Soundness: both functions copy through the region mapping's own base
//! pointer (taken from ring 0's data pointer, which is derived from the
//! mapping's raw pointer and so may reach all of it), only inside the
//! mapping's length (checked here), and only while, by the caller's
//! promise, nothing else touches the region: then no access races, and no
//! Rust reference into the region is alive to be invalidated (the pipe
//! makes its references to the control blocks only inside its own calls).
#![allow(unsafe_code)]

use std::sync::Arc;

use crate::api::channel::Pipe;
use crate::base::wire::region::{DATA_AT, region_len as layout_len};
use crate::transport::ring::Region;
use crate::transport::ring::Storage;

/// Bytes of `pipe`'s shared region: the header, the control blocks and
/// both rings' data (see [`crate::base::wire::region`]).
pub fn region_len(pipe: &Pipe) -> usize {
    // Cannot fail: the region was made with a valid capacity.
    layout_len(pipe.region().capacity()).unwrap_or(DATA_AT)
}

/// The region's first byte.
fn base(region: &Arc<Region>) -> *mut u8 {
    // `wrapping_sub` keeps the provenance of the mapping's raw pointer,
    // which `data()` offset by exactly DATA_AT for ring 0.
    region.ring(0).data().wrapping_sub(DATA_AT)
}

/// The part of `offset..offset + len` inside a region of `region` bytes.
fn clip(offset: usize, len: usize, region: usize) -> usize {
    len.min(region.saturating_sub(offset))
}

/// Writes `bytes` at `offset` of `pipe`'s shared region, as a hostile peer
/// could, cut short at the region's end; returns how many bytes it wrote.
///
/// # Safety
///
/// While this runs, no other thread may use `pipe`, its other end, or
/// anything borrowed from either (such as a [`crate::Loan`]).
pub unsafe fn write_region(pipe: &Pipe, offset: usize, bytes: &[u8]) -> usize {
    let len = clip(offset, bytes.len(), region_len(pipe));
    if len == 0 {
        return 0;
    }
    // SAFETY: `offset + len <= region_len` (clipped above), so the range
    // lies inside the mapping; nothing else accesses it now (the caller's
    // promise), and no reference covers it (see the module comment).
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), base(pipe.region()).add(offset), len) };
    len
}

/// Reads `out.len()` bytes at `offset` of `pipe`'s shared region, cut
/// short at the region's end; returns how many bytes it read.
///
/// # Safety
///
/// As for [`write_region`].
pub unsafe fn read_region(pipe: &Pipe, offset: usize, out: &mut [u8]) -> usize {
    let len = clip(offset, out.len(), region_len(pipe));
    if len == 0 {
        return 0;
    }
    // SAFETY: as in `write_region`: in bounds, and nothing writes the range
    // while we copy it.
    unsafe {
        std::ptr::copy_nonoverlapping(base(pipe.region()).add(offset), out.as_mut_ptr(), len)
    };
    len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::wire::region::{HEADER_LEN, MAGIC};

    #[test]
    fn reads_and_writes_stay_inside_the_region() {
        let (a, b) = crate::api::channel::PipeOptions::new()
            .ring_size(4096)
            .pipe()
            .unwrap();
        let len = region_len(&a);
        assert_eq!(len, DATA_AT + 2 * 4096);
        let mut header = [0u8; HEADER_LEN];
        // SAFETY: this thread alone uses the pipe.
        assert_eq!(unsafe { read_region(&b, 0, &mut header) }, HEADER_LEN);
        assert_eq!(header[..8], MAGIC);
        // SAFETY: as above.
        unsafe {
            assert_eq!(write_region(&a, len - 2, &[7; 5]), 2);
            assert_eq!(write_region(&a, len, &[7; 5]), 0);
            assert_eq!(write_region(&a, usize::MAX, &[7; 5]), 0);
            let mut tail = [0u8; 4];
            assert_eq!(read_region(&b, len - 4, &mut tail), 4);
            assert_eq!(tail, [0, 0, 7, 7]);
        }
    }
}
