//! Copies of byte ranges that stay fast whatever the two addresses are.
//!
//! The C library's `memcpy` can be many times slower for some relative
//! alignments of source and destination: on one machine measured, glibc's
//! `rep movsb` ran at 2 GB/s instead of 35 whenever the destination sat 8
//! to 24 bytes past the source modulo 64, while the same bytes copied in
//! pieces of at most [`PIECE`] bytes ran at full speed (figures:
//! `docs/notes/2026-11-27-measurements.md`, "Copies").
//!
//! Which way is faster depends on the CPU, the C library and the sizes, so
//! it is measured here, not assumed: the first copy of each size class and
//! distance class (the destination's offset past the source modulo 64) is
//! done both ways, twice, timed, and the faster way serves every later
//! copy of that class in this process. Copies of at most [`PIECE`] bytes,
//! and those whose addresses agree modulo 64, are plain `memcpy` calls.
#![allow(unsafe_code)]
// Under loom only the ring is built, and it needs only `copy`.
#![cfg_attr(loom, allow(dead_code))]

// Under loom (whose atomics cannot be statics) every copy is a plain one:
// the choice below is a speed hint, nothing the model checks.
#[cfg(not(loom))]
use crate::base::sync::{AtomicU8, Ordering};
#[cfg(not(loom))]
use std::time::Instant;

/// The largest piece a copy in pieces hands to `memcpy` at once: below the
/// sizes at which C libraries switch to string instructions.
const PIECE: usize = 2048;

/// Size classes: powers of two from 2 KiB up; larger copies share the last.
const SIZE_CLASSES: usize = 24;
/// Distance classes: the destination's offset past the source modulo 64,
/// in steps of 8.
const DISTANCE_CLASSES: usize = 8;

const UNMEASURED: u8 = 0;
const WHOLE: u8 = 1;
const PIECES: u8 = 2;

/// How each class copies, once measured.
#[cfg(not(loom))]
static CHOICE: [[AtomicU8; DISTANCE_CLASSES]; SIZE_CLASSES] =
    [const { [const { AtomicU8::new(UNMEASURED) }; DISTANCE_CLASSES] }; SIZE_CLASSES];

/// Copies `len` bytes from `src` to `dst`.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`]: `src` valid for `len` reads,
/// `dst` for `len` writes, the two ranges not overlapping.
#[cfg(not(loom))]
#[inline]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    let distance = match len > PIECE {
        true => (dst as usize).wrapping_sub(src as usize) % 64,
        false => 0,
    };
    if distance == 0 {
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        return;
    }
    // SAFETY: the caller's promise.
    unsafe { copy_large(src, dst, len, distance) }
}

/// [`copy`] under loom: a plain one.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`].
#[cfg(loom)]
#[inline]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
}

/// Copies `src` into `dst`, of the same length.
///
/// # Panics
/// If the lengths differ.
pub(crate) fn copy_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(
        dst.len(),
        src.len(),
        "copy between slices of different lengths"
    );
    // SAFETY: both valid for their common length; a `&mut` and a `&` never
    // overlap.
    unsafe { copy(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
}

/// Appends `src` to `dst`.
pub(crate) fn extend(dst: &mut Vec<u8>, src: &[u8]) {
    dst.reserve(src.len());
    let start = dst.len();
    // SAFETY: `reserve` made room for `src.len()` bytes after `start`, all
    // written before `set_len`; `src` cannot overlap the spare capacity of
    // a vector borrowed mutably.
    unsafe {
        copy(src.as_ptr(), dst.as_mut_ptr().add(start), src.len());
        dst.set_len(start + src.len());
    }
}

/// [`copy`] of more than [`PIECE`] bytes at a distance that is not a
/// multiple of 64.
///
/// # Safety
/// As [`copy`].
#[cfg(not(loom))]
#[inline(never)]
unsafe fn copy_large(src: *const u8, dst: *mut u8, len: usize, distance: usize) {
    let size = ((usize::BITS - len.leading_zeros()) as usize).saturating_sub(12);
    let choice = &CHOICE[size.min(SIZE_CLASSES - 1)][distance / 8];
    match choice.load(Ordering::Relaxed) {
        // SAFETY: the caller's promise.
        WHOLE => unsafe { std::ptr::copy_nonoverlapping(src, dst, len) },
        // SAFETY: the caller's promise.
        PIECES => unsafe { in_pieces(src, dst, len) },
        // SAFETY: the caller's promise.
        _ => unsafe { measure(src, dst, len, choice) },
    }
}

/// Copies in calls of at most [`PIECE`] bytes.
///
/// # Safety
/// As [`copy`].
#[cfg(not(loom))]
unsafe fn in_pieces(src: *const u8, dst: *mut u8, len: usize) {
    let mut done = 0;
    while done < len {
        // Opaque to the optimizer, which would otherwise merge the pieces
        // back into one call.
        let piece = std::hint::black_box(PIECE.min(len - done));
        // SAFETY: `done + piece <= len`: inside both ranges the caller
        // promised.
        unsafe { std::ptr::copy_nonoverlapping(src.add(done), dst.add(done), piece) };
        done += piece;
    }
}

/// Copies both ways, twice, and records the faster for `choice`'s class
/// (the copy is complete whichever way ran last).
///
/// # Safety
/// As [`copy`].
#[cfg(not(loom))]
#[cold]
unsafe fn measure(src: *const u8, dst: *mut u8, len: usize, choice: &AtomicU8) {
    let (mut whole, mut pieces) = (u128::MAX, u128::MAX);
    for _ in 0..2 {
        let start = Instant::now();
        // SAFETY: the caller's promise.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
        let middle = Instant::now();
        // SAFETY: the caller's promise.
        unsafe { in_pieces(src, dst, len) };
        let end = Instant::now();
        whole = whole.min((middle - start).as_nanos());
        pieces = pieces.min((end - middle).as_nanos());
    }
    // Pieces only where they win clearly: each piece is a call, and a whole
    // copy may use stores the pieces do not (non-temporal ones, for copies
    // larger than the caches).
    let faster = if pieces.saturating_mul(3) < whole.saturating_mul(2) {
        PIECES
    } else {
        WHOLE
    };
    choice.store(faster, Ordering::Relaxed);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_size_and_distance_copies_exactly() {
        let src: Vec<u8> = (0..70_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
        let mut dst = vec![0u8; 70_100];
        for len in [0, 1, 63, PIECE, PIECE + 1, 4095, 20_736, 65_536, 69_000] {
            for at in [0, 1, 8, 16, 24, 40, 63] {
                dst.fill(0xee);
                // SAFETY: `at + len <= dst.len()` and `len <= src.len()`;
                // two separate vectors do not overlap.
                unsafe { copy(src.as_ptr(), dst.as_mut_ptr().add(at), len) };
                assert_eq!(&dst[at..at + len], &src[..len], "len {len} at {at}");
                assert!(
                    dst[..at].iter().all(|&b| b == 0xee),
                    "before, len {len} at {at}"
                );
                assert!(
                    dst[at + len..].iter().all(|&b| b == 0xee),
                    "after, len {len} at {at}"
                );
            }
        }
        // Each class measured has a choice now; copying again uses it.
        let measured = CHOICE
            .iter()
            .flatten()
            .any(|c| c.load(Ordering::Relaxed) != UNMEASURED);
        assert!(measured);
    }
}
