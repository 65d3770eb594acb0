//! The writing side of a ring.
//!
//! Soundness: the producer writes only the free space between its tail and
//! the consumer's head plus the capacity, which the consumer does not read.
//! Its cached head and tail are multiples of 8 at most the capacity apart
//! (checked at adoption and on every re-read of the head), so the free
//! space it computes is never more than the data area.
#![allow(unsafe_code)]

use super::copy::{self, copy_in, in_one_piece, write_header};
use super::{Corrupt, FRAME_ALIGN, FRAME_HEADER, Storage, check_adopted, frame_size};
use crate::base::sync::Ordering;
use crate::base::wire::Violation;

/// The writing side of a ring.
#[derive(Debug)]
pub struct Producer<S: Storage> {
    storage: S,
    /// Bytes ever written: this side's own position, the only one it trusts.
    tail: u64,
    /// The consumer's head as last read and checked: a multiple of 8, at
    /// most the capacity behind `tail`.
    head: u64,
    /// Whether this CPU can prefetch for writing (see [`PREFETCH_AHEAD`]).
    prefetch: bool,
}

/// How far past the tail a frame's publication asks for the line it will
/// write next (`copy::prefetch_for_write`), where that is free space. A
/// consumer reading close behind the producer holds the lines of recent
/// frames; taking one back costs a cross-core round trip, and the
/// producer's store fence after each frame would wait for it. Asked this
/// far ahead, the line is the producer's again before it writes there
/// (figures: `docs/notes/2026-11-27-measurements.md`, "Prefetch").
const PREFETCH_AHEAD: usize = 512;

impl<S: Storage> Producer<S> {
    /// The producer of a fresh ring, or one resumed at the published tail.
    /// Fails if the positions in the control block cannot be true.
    pub(crate) fn new(storage: S) -> Result<Self, Corrupt> {
        let control = storage.control();
        // Relaxed: this side's own word; whoever held this end before handed
        // it over through a socket or a thread spawn, which orders it.
        let tail = control.producer.pos.load(Ordering::Relaxed);
        // Acquire: pairs with the consumer's Release store of its head, as
        // in `free`: the bytes below it have been read.
        let head = control.consumer.pos.load(Ordering::Acquire);
        check_adopted(tail, head, storage.capacity())?;
        Ok(Self {
            storage,
            tail,
            head,
            prefetch: copy::can_prefetch_for_write(),
        })
    }

    /// Largest body one frame can carry.
    #[inline]
    pub fn max_body(&self) -> usize {
        // The header holds the length in 32 bits.
        (self.storage.capacity() - FRAME_HEADER).min(u32::MAX as usize)
    }

    /// Free bytes now, after re-reading the consumer's head.
    pub fn free(&mut self) -> Result<usize, Corrupt> {
        // Acquire: pairs with the consumer's Release store of its head, so
        // the bytes it released have been fully read before we reuse them.
        let head = self.storage.control().consumer.pos.load(Ordering::Acquire);
        let released = head.wrapping_sub(self.head);
        if released > self.used() || !head.is_multiple_of(FRAME_ALIGN as u64) {
            return Err(Corrupt(Violation::BadReadPosition));
        }
        self.head = head;
        Ok(self.free_cached())
    }

    /// Bytes ever written: where the next frame begins, and so where the
    /// last one published ends.
    #[inline]
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Whether the consumer has released everything below `pos` (a
    /// position this producer reached, at most its tail), re-reading the
    /// consumer's head (checked as in [`free`](Self::free)).
    pub fn released(&mut self, pos: u64) -> Result<bool, Corrupt> {
        self.free()?;
        // The head is at most the tail (checked), and so is `pos`: the
        // head is past `pos` when it is no further behind the tail.
        Ok(self.tail.wrapping_sub(self.head) <= self.tail.wrapping_sub(pos))
    }

    /// Writes one frame whose body is `parts` concatenated, if it fits now.
    /// Returns `Ok(false)` (and writes nothing) when it does not.
    ///
    /// # Panics
    /// If the body is longer than [`max_body`](Self::max_body).
    #[inline(always)]
    pub fn try_push(&mut self, tag: u32, parts: &[&[u8]]) -> Result<bool, Corrupt> {
        let len = parts
            .iter()
            .fold(0usize, |sum, p| sum.saturating_add(p.len()));
        assert!(len <= self.max_body(), "frame body larger than the ring");
        let size = frame_size(len);
        if size > self.free_cached() && size > self.free()? {
            return Ok(false);
        }
        // SAFETY: `tail..tail + size` is free space (checked just above), and
        // it belongs to the producer until the tail is published; each part
        // is at most `len <= capacity`, and `len <= max_body()` (asserted).
        unsafe {
            let mut pos = self.tail.wrapping_add(FRAME_HEADER as u64);
            for part in parts {
                copy_in(&self.storage, pos, part);
                pos = pos.wrapping_add(part.len() as u64);
            }
            self.publish(tag, len);
        }
        Ok(true)
    }

    /// Writes the header of the frame at the tail, whose `len` body bytes
    /// are written, and publishes the frame.
    ///
    /// # Safety
    /// The frame's `frame_size(len)` bytes at the tail must be free space
    /// (so the producer owns them), and `len <= max_body()`.
    #[inline(always)]
    unsafe fn publish(&mut self, tag: u32, len: usize) {
        // `len <= max_body() <= u32::MAX`: the caller's promise.
        let header = crate::base::wire::ring::encode_frame_header(len as u32, tag);
        // SAFETY: the header's 8 bytes at the tail are free space the
        // producer owns (the caller's promise); the tail is a multiple of 8.
        unsafe { write_header(&self.storage, self.tail, header) };
        self.tail = self.tail.wrapping_add(frame_size(len) as u64);
        // Release: pairs with the consumer's Acquire load of the tail, so the
        // frame's bytes are visible before its position is.
        self.storage
            .control()
            .producer
            .pos
            .store(self.tail, Ordering::Release);
        // The line holding `tail + PREFETCH_AHEAD` lies in free space when
        // it is this far from the cached head (a shared ring's data area
        // starts on a line), so the hint never takes a line the consumer
        // is still reading. (A hint either way: nothing is written.)
        if self.prefetch && self.free_cached() >= PREFETCH_AHEAD + 64 {
            copy::prefetch_for_write(&self.storage, self.tail.wrapping_add(PREFETCH_AHEAD as u64));
        }
    }

    /// Writes one frame of `len` body bytes that `write` puts in place,
    /// starting from zeros, if the frame fits now and its body lies in one
    /// piece (does not wrap at the end of the data area). Otherwise nothing
    /// is written and `write` comes back (`Ok(Err(write))`): the caller
    /// waits for room, or writes a copy with [`try_push`](Self::try_push).
    /// If `write` panics, nothing is published.
    ///
    /// The body is ring memory: a consumer in another process can write it
    /// too, so `write` should put the message, not read back from it what
    /// it relies on.
    ///
    /// # Panics
    /// If `len` is larger than [`max_body`](Self::max_body).
    #[inline(always)]
    pub fn try_push_in_place<F: FnOnce(&mut [u8])>(
        &mut self,
        tag: u32,
        len: usize,
        write: F,
    ) -> Result<Result<(), F>, Corrupt> {
        assert!(len <= self.max_body(), "frame body larger than the ring");
        let size = frame_size(len);
        if size > self.free_cached() && size > self.free()? {
            return Ok(Err(write));
        }
        let body = self.tail.wrapping_add(FRAME_HEADER as u64);
        let Some(start) = in_one_piece(&self.storage, body, len) else {
            return Ok(Err(write));
        };
        // SAFETY: `tail..tail + size` is free space (checked above), which
        // the consumer does not read until the tail is published past it
        // and which only this producer writes (`&mut self` for as long as
        // the slice lives); `in_one_piece` checked the body's `len` bytes
        // lie in the data area without wrapping.
        let slot = unsafe { std::slice::from_raw_parts_mut(start, len) };
        slot.fill(0);
        write(slot);
        // SAFETY: the frame's `size` bytes are free space (checked above)
        // and `len <= max_body()` (asserted).
        unsafe { self.publish(tag, len) };
        Ok(Ok(()))
    }

    /// Writes one frame whose body `write` produces in place, if at least
    /// `min` bytes of body fit now (else `Ok(None)`, nothing written and
    /// `write` not called). `write` may put at most the room there is (at
    /// most `max` bytes); the frame is published with the length it wrote,
    /// or not at all if it tried to write more (`Ok(Some(false))`; the
    /// caller then sends the message another way).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))] // typed sends write frames in place
    pub fn try_push_with(
        &mut self,
        tag: u32,
        min: usize,
        max: usize,
        write: impl FnOnce(&mut FrameWriter<'_, S>),
    ) -> Result<Option<bool>, Corrupt> {
        let room = |free: usize| free.saturating_sub(FRAME_HEADER) & !(FRAME_ALIGN - 1);
        let mut body = room(self.free_cached());
        if body < min {
            body = room(self.free()?);
            if body < min {
                return Ok(None);
            }
        }
        let mut writer = FrameWriter {
            storage: &self.storage,
            pos: self.tail.wrapping_add(FRAME_HEADER as u64),
            left: body.min(max).min(self.max_body()),
            written: 0,
            overflowed: false,
        };
        write(&mut writer);
        if writer.overflowed {
            return Ok(Some(false));
        }
        // SAFETY: the header and the `written` body bytes are free space
        // (the body room was computed after the header, rounded down to
        // whole frames), and the writer's bound keeps `written <= max_body()`.
        unsafe { self.publish(tag, writer.written) };
        Ok(Some(true))
    }

    /// Bytes written and not yet released, as last seen (at most capacity).
    #[inline]
    fn used(&self) -> u64 {
        self.tail.wrapping_sub(self.head)
    }

    #[inline]
    fn free_cached(&self) -> usize {
        self.storage.capacity() - self.used() as usize
    }
}

/// Writes a frame's body in place, in order, up to a bound: what
/// [`Producer::try_push_with`] hands its caller.
#[cfg_attr(not(feature = "serde"), allow(dead_code))] // typed sends write frames in place
#[derive(Debug)]
pub struct FrameWriter<'a, S: Storage> {
    storage: &'a S,
    /// Where the next byte goes.
    pos: u64,
    /// Bytes the body may still take: free space the producer owns.
    left: usize,
    written: usize,
    /// A `put` did not fit; nothing after it was written.
    overflowed: bool,
}

#[cfg_attr(not(feature = "serde"), allow(dead_code))] // typed sends write frames in place
impl<S: Storage> FrameWriter<'_, S> {
    /// Appends `bytes` to the body, if they fit (else the frame will not
    /// be published).
    #[inline]
    pub fn put(&mut self, bytes: &[u8]) {
        if self.overflowed || bytes.len() > self.left {
            self.overflowed = true;
            return;
        }
        // SAFETY: `pos..pos + bytes.len()` lies within the free space the
        // producer measured for this frame (`left` counts down from it, at
        // most the capacity), which the consumer does not read until the
        // tail is published past it.
        unsafe { copy_in(self.storage, self.pos, bytes) };
        self.pos = self.pos.wrapping_add(bytes.len() as u64);
        self.left -= bytes.len();
        self.written += bytes.len();
    }

    /// Gives up on this frame: it will not be published.
    pub fn abort(&mut self) {
        self.overflowed = true;
    }

    /// Bytes put so far.
    pub fn written(&self) -> usize {
        self.written
    }
}
