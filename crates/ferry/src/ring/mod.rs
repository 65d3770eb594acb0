//! A bounded single-producer, single-consumer ring of variable-size frames.
//!
//! A frame is an 8-byte ring header (`len: u32` body bytes, `tag: u32`
//! opaque to the ring, both little-endian) followed by `len` body bytes,
//! padded to 8 bytes. Positions are byte counters that only grow; a frame
//! may wrap around the end of the data area, its header never does.
//!
//! The ring is generic over its [`Storage`], so the same code runs on heap
//! memory under Miri and loom and on a shared mapping in production. The
//! peer on the other side of a mapping may be hostile: every position and
//! length read from shared memory is checked before use, and a violation is
//! a [`Corrupt`] error, never a panic or an out-of-bounds access.
//!
//! Waiting is not here: see [`event`] for the sleep/wake protocol over the
//! same control block.
#![allow(unsafe_code)]

pub mod control;
pub mod event;
pub mod storage;

pub use control::{CONTROL_SIZE, Control};
pub use storage::{HeapStorage, Storage};

use crate::sync::Ordering;

/// Bytes of the ring's own frame header.
pub const FRAME_HEADER: usize = 8;
/// Frames start on this alignment.
pub const FRAME_ALIGN: usize = 8;

/// The peer broke the ring's rules: it published a position or frame length
/// that cannot be true. The ring must not be used again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt(pub &'static str);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Bytes a frame with a body of `len` bytes takes in the ring.
pub const fn frame_size(len: usize) -> usize {
    (FRAME_HEADER + len).next_multiple_of(FRAME_ALIGN)
}

/// Copies `src` into the ring at position `pos`, wrapping at the end.
///
/// # Safety
/// The range `pos..pos + src.len()` must be owned by the caller (free space
/// for the producer), and `src.len() <= capacity`.
unsafe fn copy_in<S: Storage>(s: &S, pos: u64, src: &[u8]) {
    let cap = s.capacity();
    let at = (pos as usize) & (cap - 1);
    let first = src.len().min(cap - at);
    // SAFETY: `at + first <= cap` and `src.len() - first <= cap - first`,
    // so both copies stay inside the data area the caller owns (see above).
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), s.data().add(at), first);
        if first < src.len() {
            std::ptr::copy_nonoverlapping(src.as_ptr().add(first), s.data(), src.len() - first);
        }
    }
}

/// Copies from the ring at position `pos` into `dst`, wrapping at the end.
///
/// # Safety
/// `dst` must be valid for `len` writes; the ring range `pos..pos + len`
/// must be published to the caller (the consumer), with `len <= capacity`.
unsafe fn copy_out<S: Storage>(s: &S, pos: u64, dst: *mut u8, len: usize) {
    let cap = s.capacity();
    let at = (pos as usize) & (cap - 1);
    let first = len.min(cap - at);
    // SAFETY: as in `copy_in`, both ranges lie inside the data area, and
    // `dst` is valid for `first + (len - first) = len` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.data().add(at), dst, first);
        if first < len {
            std::ptr::copy_nonoverlapping(s.data(), dst.add(first), len - first);
        }
    }
}

/// Writes a frame header at position `pos` (8-aligned, so it never wraps).
///
/// # Safety
/// As for [`copy_in`] with 8 bytes; `pos` must be a multiple of 8.
unsafe fn write_header<S: Storage>(s: &S, pos: u64, header: u64) {
    let at = (pos as usize) & (s.capacity() - 1);
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
unsafe fn read_header<S: Storage>(s: &S, pos: u64) -> u64 {
    let at = (pos as usize) & (s.capacity() - 1);
    // SAFETY: as in `write_header`; the range is published to the caller.
    u64::from_le(unsafe { s.data().add(at).cast::<u64>().read_unaligned() })
}

/// The writing side of a ring.
#[derive(Debug)]
pub struct Producer<S: Storage> {
    storage: S,
    tail: u64,
    head: u64,
}

impl<S: Storage> Producer<S> {
    /// The producer of a fresh ring, or one resumed at the published tail.
    pub fn new(storage: S) -> Self {
        // Relaxed: only this side ever writes `producer.pos`.
        let tail = storage.control().producer.pos.load(Ordering::Relaxed);
        Self {
            storage,
            tail,
            head: tail,
        }
    }

    /// The shared storage.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Largest body one frame can carry.
    pub fn max_body(&self) -> usize {
        self.storage.capacity() - FRAME_HEADER
    }

    /// Free bytes now, after re-reading the consumer's head.
    pub fn free(&mut self) -> Result<usize, Corrupt> {
        let cap = self.storage.capacity() as u64;
        // Acquire: pairs with the consumer's Release store of its head, so
        // the bytes it released have been fully read before we reuse them.
        let head = self.storage.control().consumer.pos.load(Ordering::Acquire);
        if head < self.head || head > self.tail {
            return Err(Corrupt("consumer published an impossible read position"));
        }
        self.head = head;
        Ok((cap - (self.tail - head)) as usize)
    }

    /// Writes one frame whose body is `parts` concatenated, if it fits now.
    /// Returns `Ok(false)` (and writes nothing) when it does not.
    pub fn try_push(&mut self, tag: u32, parts: &[&[u8]]) -> Result<bool, Corrupt> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let size = frame_size(len);
        assert!(len <= self.max_body(), "frame body larger than the ring");
        if size > self.free_cached() && size > self.free()? {
            return Ok(false);
        }
        let header = len as u64 | u64::from(tag) << 32;
        let mut pos = self.tail;
        // SAFETY: `tail..tail + size` is free space (checked just above), and
        // it belongs to the producer until the tail is published; the tail
        // is a multiple of 8.
        unsafe {
            write_header(&self.storage, pos, header);
            pos += FRAME_HEADER as u64;
            for part in parts {
                copy_in(&self.storage, pos, part);
                pos += part.len() as u64;
            }
        }
        self.tail += size as u64;
        // Release: pairs with the consumer's Acquire load of the tail, so the
        // frame's bytes are visible before its position is.
        self.storage
            .control()
            .producer
            .pos
            .store(self.tail, Ordering::Release);
        Ok(true)
    }

    fn free_cached(&self) -> usize {
        self.storage.capacity() - (self.tail - self.head) as usize
    }
}

/// One frame at the consumer's read position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The producer's opaque tag.
    pub tag: u32,
    /// Body length in bytes (checked to lie inside the published range).
    pub len: usize,
}

/// The reading side of a ring.
#[derive(Debug)]
pub struct Consumer<S: Storage> {
    storage: S,
    head: u64,
    tail: u64,
}

impl<S: Storage> Consumer<S> {
    /// The consumer of a fresh ring, or one resumed at the published head.
    pub fn new(storage: S) -> Self {
        // Relaxed: only this side ever writes `consumer.pos`.
        let head = storage.control().consumer.pos.load(Ordering::Relaxed);
        Self {
            storage,
            head,
            tail: head,
        }
    }

    /// The shared storage.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// Whether a frame is published and unread, re-reading the tail.
    pub fn is_empty(&mut self) -> Result<bool, Corrupt> {
        Ok(self.published()? == 0)
    }

    /// Bytes published and unread, after re-reading the producer's tail.
    fn published(&mut self) -> Result<u64, Corrupt> {
        if self.tail > self.head {
            return Ok(self.tail - self.head);
        }
        // Acquire: pairs with the producer's Release store of the tail, so
        // the frame bytes below it are visible to our reads.
        let tail = self.storage.control().producer.pos.load(Ordering::Acquire);
        let cap = self.storage.capacity() as u64;
        if tail < self.head || tail - self.head > cap || !tail.is_multiple_of(FRAME_ALIGN as u64) {
            return Err(Corrupt("producer published an impossible write position"));
        }
        self.tail = tail;
        Ok(tail - self.head)
    }

    /// The next frame, if one is published. Its header is read once into
    /// locals and checked against the published range.
    pub fn peek(&mut self) -> Result<Option<Frame>, Corrupt> {
        let available = self.published()?;
        if available == 0 {
            return Ok(None);
        }
        // SAFETY: `available > 0` and positions are 8-aligned, so a whole
        // 8-byte header lies in the published range.
        let header = unsafe { read_header(&self.storage, self.head) };
        let (len, tag) = (header as u32 as usize, (header >> 32) as u32);
        if frame_size(len) as u64 > available {
            return Err(Corrupt("frame length runs past the published data"));
        }
        Ok(Some(Frame { tag, len }))
    }

    /// Copies `dst.len()` body bytes of `frame`, from body offset `offset`.
    pub fn read(&self, frame: Frame, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= frame.len, "read past the frame body");
        let pos = self.head + (FRAME_HEADER + offset) as u64;
        // SAFETY: `peek` checked the whole frame lies in the published range,
        // and the assertion keeps this read inside the frame.
        unsafe { copy_out(&self.storage, pos, dst.as_mut_ptr(), dst.len()) };
    }

    /// Appends `len` body bytes of `frame`, from body offset `offset`, to `dst`.
    pub fn read_append(&self, frame: Frame, offset: usize, len: usize, dst: &mut Vec<u8>) {
        assert!(offset + len <= frame.len, "read past the frame body");
        dst.reserve(len);
        let pos = self.head + (FRAME_HEADER + offset) as u64;
        let start = dst.len();
        // SAFETY: `reserve` made room for `len` bytes after `start`; the ring
        // range lies inside the frame, which `peek` checked is published.
        // Every byte of the new length is written before `set_len`.
        unsafe {
            copy_out(&self.storage, pos, dst.as_mut_ptr().add(start), len);
            dst.set_len(start + len);
        }
    }

    /// Releases `frame` (the one last peeked) back to the producer.
    pub fn consume(&mut self, frame: Frame) {
        self.head += frame_size(frame.len) as u64;
        // Release: pairs with the producer's Acquire load of the head; our
        // reads of the frame happen before the producer may overwrite it.
        self.storage
            .control()
            .consumer
            .pos
            .store(self.head, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
