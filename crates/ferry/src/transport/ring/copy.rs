//! Raw copies into and out of a ring's data area, wrapping at its end.
//!
//! Soundness: each function's caller promises the ring range it names is
//! its own (free space for the producer, published data for the consumer)
//! and no longer than the capacity; positions are reduced modulo the
//! capacity, a power of two (the [`Storage`] contract), so every access
//! lands inside the data area.
#![allow(unsafe_code)]

use super::Storage;
use crate::base::memcopy;

/// Where position `pos` falls in the data area.
#[inline]
fn offset<S: Storage>(s: &S, pos: u64) -> usize {
    (pos as usize) & (s.capacity() - 1)
}

/// Whether this CPU has the write-prefetch hint `prefetchw` (x86-64's
/// PRFCHW feature, on AMD since K8 and on Intel since Broadwell), asked of
/// the CPU once. Where it lacks it, [`prefetch_for_write`] must not run.
pub(super) fn can_prefetch_for_write() -> bool {
    #[cfg(all(target_arch = "x86_64", not(any(miri, loom))))]
    {
        use std::arch::x86_64::__cpuid;
        use std::sync::OnceLock;
        static PRFCHW: OnceLock<bool> = OnceLock::new();
        *PRFCHW.get_or_init(|| {
            // SAFETY: `cpuid` is present on every x86-64 CPU and only
            // reports; leaf 0x8000_0001 exists if leaf 0x8000_0000 says so.
            #[allow(unused_unsafe)]
            let ecx = unsafe {
                (__cpuid(0x8000_0000).eax >= 0x8000_0001).then(|| __cpuid(0x8000_0001).ecx)
            };
            ecx.is_some_and(|ecx| ecx & (1 << 8) != 0)
        })
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(miri, loom)))))]
    false
}

/// Asks the CPU to bring the cache line holding position `pos` of the
/// data area into this core's cache for writing, ahead of the write (so a
/// line the consumer's core last read is taken from it while the producer
/// does other work, not when a store waits on it). A hint: it reads and
/// writes nothing the program sees and never faults.
///
/// Call only where [`can_prefetch_for_write`] said yes.
#[inline(always)]
pub(super) fn prefetch_for_write<S: Storage>(s: &S, pos: u64) {
    let line = s.data().wrapping_add(offset(s, pos));
    #[cfg(all(target_arch = "x86_64", not(any(miri, loom))))]
    // SAFETY: `prefetchw` only hints (no memory is read or written, no fault
    // is raised; `line` is inside the data area anyway), and the caller has
    // checked this CPU has the instruction.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) line, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(all(target_arch = "x86_64", not(any(miri, loom)))))]
    let _ = line;
}

/// Copies `src` into the ring at position `pos`, wrapping at the end.
///
/// # Safety
/// The range `pos..pos + src.len()` must be owned by the caller (free space
/// for the producer), and `src.len() <= capacity`.
#[inline]
pub(super) unsafe fn copy_in<S: Storage>(s: &S, pos: u64, src: &[u8]) {
    let (cap, at) = (s.capacity(), offset(s, pos));
    let first = src.len().min(cap - at);
    // SAFETY: `at + first <= cap` and `src.len() - first <= cap - first`,
    // so both copies stay inside the data area the caller owns (see above).
    unsafe {
        memcopy::copy(src.as_ptr(), s.data().add(at), first);
        if first < src.len() {
            memcopy::copy(src.as_ptr().add(first), s.data(), src.len() - first);
        }
    }
}

/// Copies from the ring at position `pos` into `dst`, wrapping at the end.
///
/// # Safety
/// `dst` must be valid for `len` writes; the ring range `pos..pos + len`
/// must be published to the caller (the consumer), with `len <= capacity`.
#[inline]
pub(super) unsafe fn copy_out<S: Storage>(s: &S, pos: u64, dst: *mut u8, len: usize) {
    let (cap, at) = (s.capacity(), offset(s, pos));
    let first = len.min(cap - at);
    // SAFETY: as in `copy_in`, both ranges lie inside the data area, and
    // `dst` is valid for `first + (len - first) = len` bytes.
    unsafe {
        memcopy::copy(s.data().add(at), dst, first);
        if first < len {
            memcopy::copy(s.data(), dst.add(first), len - first);
        }
    }
}

/// Where the ring range `pos..pos + len` starts in the data area, if it
/// lies there in one piece (does not wrap at the end); `len <= capacity`.
/// Making a slice of it is the caller's to argue (see `Consumer::body_in_place`
/// and `Producer::try_push_in_place`).
#[inline]
pub(super) fn in_one_piece<S: Storage>(s: &S, pos: u64, len: usize) -> Option<*mut u8> {
    let at = offset(s, pos);
    // `at < capacity`, so the subtraction cannot wrap; the pointer stays
    // inside the data area (or one past it, for an empty range at its end).
    (len <= s.capacity() - at).then(|| s.data().wrapping_add(at))
}

/// Writes a frame header at position `pos` (8-aligned, so it never wraps).
///
/// # Safety
/// As for [`copy_in`] with 8 bytes; `pos` must be a multiple of 8.
#[inline]
pub(super) unsafe fn write_header<S: Storage>(s: &S, pos: u64, header: u64) {
    let at = offset(s, pos);
    // SAFETY: `at` is 8-aligned and the capacity a power of two >= 64, so
    // `at + 8 <= capacity`; the caller owns the range.
    unsafe {
        s.data()
            .add(at)
            .cast::<u64>()
            .write_unaligned(header.to_le())
    }
}

/// Reads the frame header at position `pos` (8-aligned, never wrapping).
///
/// # Safety
/// As for [`copy_out`] with 8 bytes; `pos` must be a multiple of 8.
#[inline]
pub(super) unsafe fn read_header<S: Storage>(s: &S, pos: u64) -> u64 {
    let at = offset(s, pos);
    // SAFETY: as in `write_header`; the range is published to the caller.
    u64::from_le(unsafe { s.data().add(at).cast::<u64>().read_unaligned() })
}
