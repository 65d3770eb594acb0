//! A bounded single-producer, single-consumer ring of variable-size frames.
//!
//! A frame is an 8-byte ring header (`len: u32` body bytes, `tag: u32`
//! opaque to the ring, both little-endian) followed by `len` body bytes,
//! padded to 8 bytes (the bytes are specified in `wire/ring.rs`). Positions are byte counters modulo 2^64: they grow
//! and wrap, every computation on them wraps, and every check is made on
//! distances (`tail - head <= capacity`), never on their order as numbers.
//! A frame may wrap around the end of the data area, its header never does.
//!
//! The ring is generic over its [`Storage`], so the same code runs on heap
//! memory under Miri and loom and on a shared mapping in production.
//!
//! # A hostile peer
//!
//! The process on the other side of a mapping may write anything into it.
//! A side adopting a ring (`Producer::new`, `Consumer::new`) reads both
//! positions once and accepts them only if they are multiples of
//! [`FRAME_ALIGN`] no more than the capacity apart; from then on it trusts
//! only the positions it cached and checks every value it re-reads from the
//! other side. A violation is a [`Corrupt`] error, never a panic or an
//! out-of-bounds access, in every build.
//!
//! # Soundness of the public API
//!
//! The producer writes the bytes between the tail and the head plus the
//! capacity, the consumer reads those between the head and the tail; they
//! never touch the same bytes at once as long as nothing else moves a
//! position. So safe code outside this crate gets a ring only from
//! [`heap`], which hands out the one producer and the one consumer of fresh
//! memory and keeps the storage and its control block to itself. Inside the
//! crate, the constructors adopt any storage: the crate makes at most one
//! producer and one consumer per ring at a time in this process. A peer in
//! another process lies outside Rust's memory model: its writes can only
//! change bytes we copy or lend in place (every byte value is a valid
//! `u8`) or positions we check. A [`Frame`] remembers where it was peeked, and the consumer
//! refuses (panics on) one that does not lie in its published range at its
//! read position, so no safe call reads outside that range.
//!
//! Waiting is not here: see [`wake`] for the sleep/wake protocol over the
//! same control block.
// Public only for loom, the fuzz targets and the benchmarks (feature
// `internals`); crate-private otherwise.
#![cfg_attr(not(any(loom, feature = "internals")), allow(unreachable_pub))]

mod consumer;
pub mod control;
mod copy;
mod producer;
#[cfg(not(loom))]
pub(crate) mod region;
pub mod storage;
pub mod wake;

pub use consumer::{Consumer, Frame};
pub use control::{CONTROL_SIZE, Control};
#[cfg_attr(not(feature = "serde"), allow(unused_imports))]
pub use producer::{FrameWriter, Producer};
#[cfg(not(loom))]
pub(crate) use region::{Region, RingView};
#[cfg(any(test, loom, feature = "internals"))]
pub use storage::HeapStorage;
pub use storage::Storage;

use crate::base::wire::Violation;
#[cfg(any(test, loom, feature = "internals"))]
use std::sync::Arc;

pub use crate::base::wire::ring::{FRAME_ALIGN, FRAME_HEADER, frame_size};

/// The peer broke the ring's rules: it published a position or frame length
/// that cannot be true. The ring must not be used again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub Violation);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.message())
    }
}

impl std::error::Error for Corrupt {}

/// A broken ring as an I/O error of kind `InvalidData`.
impl From<Corrupt> for std::io::Error {
    fn from(corrupt: Corrupt) -> Self {
        Self::new(std::io::ErrorKind::InvalidData, corrupt)
    }
}

/// A fresh ring of `capacity` bytes on the heap (a power of two, at least
/// 64): its only producer and its only consumer.
///
/// For the ring's tests, the fuzz targets and benchmarks
/// (`ring/tests.rs` shows a frame pushed, peeked, read and consumed).
#[cfg(any(test, loom, feature = "internals"))]
pub fn heap(capacity: usize) -> (Producer<Arc<HeapStorage>>, Consumer<Arc<HeapStorage>>) {
    let storage = HeapStorage::new(capacity);
    let fresh = "a fresh ring's positions are both zero";
    (
        Producer::new(Arc::clone(&storage)).expect(fresh),
        Consumer::new(storage).expect(fresh),
    )
}

/// Checks the positions a side read once each when adopting a ring: both
/// multiples of [`FRAME_ALIGN`], the tail at most `capacity` past the head.
fn check_adopted(tail: u64, head: u64, capacity: usize) -> Result<(), Corrupt> {
    let align = FRAME_ALIGN as u64;
    if !tail.is_multiple_of(align) || !head.is_multiple_of(align) {
        return Err(Corrupt(Violation::UnalignedPosition));
    }
    if tail.wrapping_sub(head) > capacity as u64 {
        return Err(Corrupt(Violation::PositionsTooFarApart));
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(test, not(loom)))]
mod proptests;

#[cfg(all(test, not(loom)))]
mod conformance;

#[cfg(any(loom, test))]
pub mod bell_conformance;
