//! The ring's shared control block: one cache-line pair per side.
//!
//! Every field is an atomic, valid for any bit pattern a peer may write, and
//! the block holds no pointers or descriptors, so it may live in memory that
//! another (possibly hostile) process maps too.

use crate::base::sync::{AtomicU32, AtomicU64};

/// The words one side of a ring writes. The other side only reads them
/// (except `signal`, which the other side sleeps on but never writes).
///
/// Two cache lines: `pos` alone on the first, written for every frame; the
/// rest on the second, written only to sleep, wake, close or move CPU, so
/// the other side's reads of them stay cache hits while frames flow. The
/// whole side is 128-byte aligned: adjacent-line prefetch pairs 64-byte
/// lines, so the two sides never share such a pair.
#[repr(C, align(128))]
#[derive(Debug, Default)]
pub struct Side {
    /// Producer: bytes ever written (tail). Consumer: bytes ever read (head).
    pub pos: AtomicU64,
    _hot: [u64; 7],
    /// Bumped by this side to wake the other; the other side sleeps on it.
    pub signal: AtomicU32,
    /// Non-zero while this side is about to sleep or asleep.
    pub waiting: AtomicU32,
    /// Non-zero once this side has gone away for good.
    pub closed: AtomicU32,
    /// 1 + the CPU this side last ran on; 0 if unknown.
    pub cpu: AtomicU32,
    /// Consumer only: handles (pipe ends) it has claimed so far, wrapping.
    /// The producer keeps at most a window of them in flight.
    pub handles: AtomicU32,
    /// Non-zero while this side waits on its doorbell, which the other side
    /// then rings after every change (see [`crate::transport::ring::wake`]).
    pub doorbell: AtomicU32,
    /// Bumped (wrapping) each time this side leaves for another process
    /// while the other side is held elsewhere: the other side's holder
    /// then reads its link for the record saying where it went.
    pub moved: AtomicU32,
    /// Producer: non-zero while it names a link's handles or blocks in a
    /// frame it is about to publish (see `wire/ring.rs`).
    pub naming: AtomicU32,
    /// Non-zero while this side's holder moves it to another process
    /// (see `wire/ring.rs`).
    pub moving: AtomicU32,
    /// Producer: the consumer's `moved` count as of its first naming
    /// section on the consumer's newest link (see `wire/ring.rs`).
    pub followed: AtomicU32,
    /// Producer: its position as that section began.
    pub followed_at: AtomicU64,
    /// Consumer: non-zero while it takes bytes only (see `wire/ring.rs`):
    /// its producer refuses messages that attach handles. Any non-zero
    /// value counts.
    pub bytes_only: AtomicU32,
}

/// Both sides of one single-producer, single-consumer ring.
#[repr(C)]
#[derive(Debug, Default)]
pub struct Control {
    /// Written by the producer.
    pub producer: Side,
    /// Written by the consumer.
    pub consumer: Side,
}

pub use crate::base::wire::ring::CONTROL_SIZE;

// The layout `wire/ring.rs` specifies, word by word.
#[cfg(not(loom))]
const _: () = {
    use crate::base::wire::ring as wire;
    use std::mem::offset_of;
    assert!(size_of::<Side>() == wire::SIDE_SIZE);
    assert!(align_of::<Side>() == wire::SIDE_SIZE);
    assert!(size_of::<Control>() == CONTROL_SIZE);
    assert!(offset_of!(Control, consumer) == wire::CONSUMER_SIDE);
    assert!(offset_of!(Side, pos) == wire::POS);
    assert!(offset_of!(Side, signal) == wire::SIGNAL);
    assert!(offset_of!(Side, waiting) == wire::WAITING);
    assert!(offset_of!(Side, closed) == wire::CLOSED);
    assert!(offset_of!(Side, cpu) == wire::CPU);
    assert!(offset_of!(Side, handles) == wire::HANDLES);
    assert!(offset_of!(Side, doorbell) == wire::DOORBELL);
    assert!(offset_of!(Side, moved) == wire::MOVED);
    assert!(offset_of!(Side, naming) == wire::NAMING);
    assert!(offset_of!(Side, moving) == wire::MOVING);
    assert!(offset_of!(Side, followed) == wire::FOLLOWED);
    assert!(offset_of!(Side, followed_at) == wire::FOLLOWED_AT);
    assert!(offset_of!(Side, bytes_only) == wire::BYTES_ONLY);
};
