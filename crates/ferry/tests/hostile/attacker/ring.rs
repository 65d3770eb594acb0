//! One ring of a region, driven by hand: positions, frames and the futex
//! wake, written the way a (possibly lying) peer would.
//!
//! Soundness: a [`RawRing`] borrows its [`RawRegion`](super::region::RawRegion),
//! which checked that the 256-byte control block and the `capacity` data
//! bytes lie inside its mapping. Control words are reached as atomics at
//! 8-aligned offsets of a page-aligned mapping (any bits are a valid
//! atomic); data bytes only through raw-pointer copies at indices reduced
//! modulo the capacity, so no access leaves the data area.
#![allow(unsafe_code)]

use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

use super::wire::{
    self, CONSUMER_SIDE, FOLLOWED, FOLLOWED_AT, FRAME_HEADER, MOVED, MOVING, NAMING, POS, SIGNAL,
    WAITING,
};

/// Which side of a ring a word belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The writer (its `pos` is the tail).
    Producer,
    /// The reader (its `pos` is the head).
    Consumer,
}

/// One ring of a mapped region.
#[derive(Debug, Clone, Copy)]
pub struct RawRing<'a> {
    control: NonNull<u8>,
    data: NonNull<u8>,
    capacity: usize,
    _region: PhantomData<&'a ()>,
}

impl<'a> RawRing<'a> {
    /// A ring whose control block is at `control` and data at `data`.
    /// Only [`RawRegion::ring`](super::region::RawRegion::ring) calls this,
    /// after checking both lie inside its mapping.
    pub(super) fn new(control: NonNull<u8>, data: NonNull<u8>, capacity: usize) -> Self {
        Self {
            control,
            data,
            capacity,
            _region: PhantomData,
        }
    }

    /// The data area's size in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn side_at(side: Side) -> usize {
        match side {
            Side::Producer => 0,
            Side::Consumer => CONSUMER_SIDE,
        }
    }

    fn word64(&self, side: Side, field: usize) -> &'a AtomicU64 {
        let offset = Self::side_at(side) + field;
        assert!(offset + 8 <= wire::CONTROL_SIZE && offset.is_multiple_of(8));
        // SAFETY: inside the control block (asserted, and the region checked
        // the block is mapped), 8-aligned in a page-aligned mapping, and any
        // bits are a valid AtomicU64; the mapping outlives 'a.
        unsafe { &*self.control.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    fn word32(&self, side: Side, field: usize) -> &'a AtomicU32 {
        let offset = Self::side_at(side) + field;
        assert!(offset + 4 <= wire::CONTROL_SIZE && offset.is_multiple_of(4));
        // SAFETY: as in `word64`, for a 4-aligned AtomicU32.
        unsafe { &*self.control.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// The producer's published position (bytes ever written).
    pub fn tail(&self) -> u64 {
        // Acquire: pairs with the victim's Release store of its tail, so the
        // frame bytes below it are visible to our reads.
        self.word64(Side::Producer, POS).load(Ordering::Acquire)
    }

    /// Publishes `pos` as the producer's tail, true or not.
    pub fn set_tail(&self, pos: u64) {
        // Release: pairs with the victim consumer's Acquire load of the
        // tail; our frame bytes are written before it.
        self.word64(Side::Producer, POS)
            .store(pos, Ordering::Release);
    }

    /// The consumer's published position (bytes ever read).
    pub fn head(&self) -> u64 {
        // Acquire: pairs with the victim's Release store of its head.
        self.word64(Side::Consumer, POS).load(Ordering::Acquire)
    }

    /// Publishes `pos` as the consumer's head, true or not.
    pub fn set_head(&self, pos: u64) {
        // Release: pairs with the victim producer's Acquire load of the head.
        self.word64(Side::Consumer, POS)
            .store(pos, Ordering::Release);
    }

    /// Bumps `side`'s `moved` count, as a holder that sent the side on
    /// does (after its `Moved` record), and wakes the other side.
    pub fn bump_moved(&self, side: Side) {
        // Release: after the record was sent, as ferry's mover.
        self.word32(side, MOVED).fetch_add(1, Ordering::Release);
        self.wake(side);
    }

    /// Says the producer's holder moves it (and never stops).
    pub fn set_moving(&self, on: bool) {
        // Release: as ferry's mover clears it.
        self.word32(Side::Producer, MOVING)
            .store(u32::from(on), Ordering::Release);
    }

    /// Says the producer switched to the consumer's link of move `count`
    /// at ring position `at`, true or not.
    pub fn set_followed(&self, count: u32, at: u64) {
        self.word64(Side::Producer, FOLLOWED_AT)
            .store(at, Ordering::Relaxed);
        // SeqCst: as ferry's producer says it.
        self.word32(Side::Producer, FOLLOWED)
            .store(count, Ordering::SeqCst);
    }

    /// Says the producer names its link in a frame (and never stops).
    pub fn set_naming(&self, on: bool) {
        // Release: as ferry's producer clears it.
        self.word32(Side::Producer, NAMING)
            .store(u32::from(on), Ordering::Release);
    }

    /// Whether `side` says it is about to sleep or asleep.
    pub fn waiting(&self, side: Side) -> bool {
        // Relaxed: a hint polled in a loop; the fences in `notify` order the
        // reads that matter.
        self.word32(side, WAITING).load(Ordering::Relaxed) != 0
    }

    /// Copies `bytes` into the data area from position `pos`, wrapping.
    pub fn write_at(&self, pos: u64, bytes: &[u8]) {
        for (i, chunk) in self.spans(pos, bytes.len()) {
            // SAFETY: `spans` yields index ranges inside the data area.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes[chunk.clone()].as_ptr(),
                    self.data.as_ptr().add(i),
                    chunk.len(),
                )
            };
        }
    }

    /// Copies `len` bytes out of the data area from position `pos`, wrapping.
    pub fn read_at(&self, pos: u64, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        for (i, chunk) in self.spans(pos, len) {
            // SAFETY: `spans` yields index ranges inside the data area, and
            // `chunk` lies inside `out`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.data.as_ptr().add(i),
                    out[chunk.clone()].as_mut_ptr(),
                    chunk.len(),
                )
            };
        }
        out
    }

    /// Splits `len` bytes from `pos` into (data index, range of the
    /// caller's buffer) pieces, none crossing the end of the data area.
    fn spans(&self, pos: u64, len: usize) -> Vec<(usize, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let mut done = 0;
        while done < len {
            let at = (pos.wrapping_add(done as u64) as usize) & (self.capacity - 1);
            let n = (len - done).min(self.capacity - at);
            out.push((at, done..done + n));
            done += n;
        }
        out
    }

    /// Writes a frame (header and body) at `pos` without publishing it;
    /// returns its size in the ring.
    pub fn write_frame_at(&self, pos: u64, tag: u32, body: &[u8]) -> u64 {
        let len = u32::try_from(body.len()).expect("frame body under 4 GiB");
        self.write_at(pos, &wire::frame_header(len, tag));
        self.write_at(pos.wrapping_add(FRAME_HEADER as u64), body);
        wire::frame_size(body.len())
    }

    /// As the producer: writes a frame at the tail and publishes it, then
    /// wakes the consumer if it sleeps. `false` (nothing written) if the
    /// frame does not fit now.
    pub fn publish_frame(&self, tag: u32, body: &[u8]) -> bool {
        let (tail, head) = (self.tail(), self.head());
        let used = tail.wrapping_sub(head);
        let size = wire::frame_size(body.len());
        if used > self.capacity as u64 || used + size > self.capacity as u64 {
            return false;
        }
        let size = self.write_frame_at(tail, tag, body);
        self.set_tail(tail.wrapping_add(size));
        self.notify(Side::Producer);
        true
    }

    /// [`publish_frame`](Self::publish_frame), retrying until it fits or
    /// `limit` passes; whether it was published.
    pub fn publish_frame_within(&self, tag: u32, body: &[u8], limit: std::time::Duration) -> bool {
        let start = std::time::Instant::now();
        while !self.publish_frame(tag, body) {
            if start.elapsed() > limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        true
    }

    /// As the consumer: takes the frame at the head, if one is published,
    /// and wakes the producer if it sleeps. Returns its tag and body.
    pub fn take_frame(&self) -> Option<(u32, Vec<u8>)> {
        let (head, tail) = (self.head(), self.tail());
        let available = tail.wrapping_sub(head);
        if available < FRAME_HEADER as u64 || available > self.capacity as u64 {
            return None;
        }
        let header = u64::from_le_bytes(self.read_at(head, 8).try_into().expect("8 bytes"));
        let (len, tag) = (header as u32 as usize, (header >> 32) as u32);
        if wire::frame_size(len) > available {
            return None;
        }
        let body = self.read_at(head.wrapping_add(FRAME_HEADER as u64), len);
        self.set_head(head.wrapping_add(wire::frame_size(len)));
        self.notify(Side::Consumer);
        Some((tag, body))
    }

    /// After changing the ring as `me`: wakes the other side if it says it
    /// sleeps (ferry's protocol: fence, look at its `waiting`, bump our
    /// `signal`, `FUTEX_WAKE`).
    pub fn notify(&self, me: Side) {
        // SeqCst: pairs with the sleeper's fence between setting `waiting`
        // and re-checking the ring (ferry's `wake::prepare`).
        fence(Ordering::SeqCst);
        let other = match me {
            Side::Producer => Side::Consumer,
            Side::Consumer => Side::Producer,
        };
        if self.waiting(other) {
            self.wake(me);
        }
    }

    /// Bumps `me`'s `signal` and makes the `FUTEX_WAKE` call on it,
    /// whether or not anything changed: what a wake storm repeats.
    pub fn wake(&self, me: Side) {
        let signal = self.word32(me, SIGNAL);
        // Release: pairs with the sleeper's Acquire read of its ticket.
        signal.fetch_add(1, Ordering::Release);
        let _ = rustix::thread::futex::wake(signal, rustix::thread::futex::Flags::empty(), 1);
    }
}
