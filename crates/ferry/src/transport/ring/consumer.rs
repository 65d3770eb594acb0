//! The reading side of a ring, and the frames it hands out.
//!
//! Soundness: the consumer reads only between its head and its cached tail,
//! bytes the producer has published and does not write until the head
//! passes them. Both are multiples of 8 at most the capacity apart (checked
//! at adoption and on every re-read of the tail). A [`Frame`] is accepted
//! back only if it starts at the head and ends within the cached tail, so
//! every copy stays inside the published range whatever frame safe code
//! passes in.
#![allow(unsafe_code)]

use super::copy::{copy_out, in_one_piece, read_header};
use super::{Corrupt, FRAME_ALIGN, FRAME_HEADER, Storage, check_adopted};
use crate::base::sync::Ordering;
use crate::base::wire::Violation;

/// One frame at a consumer's read position, as [`Consumer::peek`] found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    tag: u32,
    len: u32,
    /// The consumer's head when the frame was peeked.
    at: u64,
}

impl Frame {
    /// The producer's opaque tag.
    pub fn tag(&self) -> u32 {
        self.tag
    }

    /// Where the frame starts in the ring (bytes written before it).
    pub fn at(&self) -> u64 {
        self.at
    }

    /// Body length in bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the body is empty.
    #[cfg(any(loom, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the frame takes in the ring, header and padding included.
    fn size(&self) -> u64 {
        (u64::from(self.len) + FRAME_HEADER as u64).next_multiple_of(FRAME_ALIGN as u64)
    }
}

/// The reading side of a ring.
#[derive(Debug)]
pub struct Consumer<S: Storage> {
    storage: S,
    /// Bytes ever read: this side's own position, the only one it trusts.
    head: u64,
    /// The producer's tail as last read and checked: a multiple of 8, at
    /// most the capacity ahead of `head`.
    tail: u64,
    /// Frames this consumer has released (wrapping); see [`Consumer::taken`].
    taken: u64,
}

impl<S: Storage> Consumer<S> {
    /// The consumer of a fresh ring, or one resumed at the published head.
    /// Fails if the positions in the control block cannot be true.
    pub(crate) fn new(storage: S) -> Result<Self, Corrupt> {
        let control = storage.control();
        // Relaxed: this side's own word; whoever held this end before handed
        // it over through a socket or a thread spawn, which orders it.
        let head = control.consumer.pos.load(Ordering::Relaxed);
        // Acquire: pairs with the producer's Release store of the tail, as in
        // `published`: the frames below it are visible.
        let tail = control.producer.pos.load(Ordering::Acquire);
        check_adopted(tail, head, storage.capacity())?;
        Ok(Self {
            storage,
            head,
            tail,
            taken: 0,
        })
    }

    /// Whether a frame is published and unread, re-reading the tail.
    #[cfg(any(test, loom, feature = "internals"))]
    pub fn is_empty(&mut self) -> Result<bool, Corrupt> {
        Ok(self.published()? == 0)
    }

    /// Bytes published and unread; re-reads the producer's tail only when
    /// the cached one is used up.
    #[inline]
    fn published(&mut self) -> Result<u64, Corrupt> {
        let cached = self.tail.wrapping_sub(self.head);
        if cached != 0 {
            return Ok(cached);
        }
        // Acquire: pairs with the producer's Release store of the tail, so
        // the frame bytes below it are visible to our reads.
        let tail = self.storage.control().producer.pos.load(Ordering::Acquire);
        let available = tail.wrapping_sub(self.head);
        if available > self.storage.capacity() as u64 || !tail.is_multiple_of(FRAME_ALIGN as u64) {
            return Err(Corrupt(Violation::BadWritePosition));
        }
        self.tail = tail;
        Ok(available)
    }

    /// Whether `pred` holds for the tag of any frame published between the
    /// read position and `end` (at most the published tail), reading only
    /// their headers and consuming none: for a mover that must know what
    /// the frames it leaves unread name.
    #[cfg_attr(loom, allow(dead_code))] // the channel layer's, which loom leaves out
    pub(crate) fn any_tag_until(
        &self,
        end: u64,
        mut pred: impl FnMut(u32) -> bool,
    ) -> Result<bool, Corrupt> {
        // Acquire: pairs with the producer's Release store of the tail, so
        // the headers below it are visible.
        let tail = self.storage.control().producer.pos.load(Ordering::Acquire);
        let available = tail.wrapping_sub(self.head);
        let wanted = end.wrapping_sub(self.head);
        if available > self.storage.capacity() as u64
            || !tail.is_multiple_of(FRAME_ALIGN as u64)
            || wanted > available
        {
            return Err(Corrupt(Violation::BadWritePosition));
        }
        let mut pos = self.head;
        while pos != end {
            let left = end.wrapping_sub(pos);
            if left < FRAME_HEADER as u64 {
                return Err(Corrupt(Violation::FrameOverrun));
            }
            // SAFETY: `pos` is a multiple of 8 (the head is, and so is every
            // frame's size) and `[pos, pos + 8)` lies in the published range
            // (`left` >= 8 and `end` is at most the tail checked above).
            let header = unsafe { read_header(&self.storage, pos) };
            let (len, tag) = crate::base::wire::ring::decode_frame_header(header);
            let frame = Frame { len, tag, at: pos };
            if frame.size() > left {
                return Err(Corrupt(Violation::FrameOverrun));
            }
            if pred(tag) {
                return Ok(true);
            }
            pos = pos.wrapping_add(frame.size());
        }
        Ok(false)
    }

    /// The next frame, if one is published. Its header is read once into
    /// locals and checked against the published range.
    #[inline]
    pub fn peek(&mut self) -> Result<Option<Frame>, Corrupt> {
        let available = self.published()?;
        if available == 0 {
            return Ok(None);
        }
        // SAFETY: `available > 0` and positions are multiples of 8, so a
        // whole 8-byte header lies in the published range at the head.
        let header = unsafe { read_header(&self.storage, self.head) };
        let (len, tag) = crate::base::wire::ring::decode_frame_header(header);
        let frame = Frame {
            len,
            tag,
            at: self.head,
        };
        if frame.size() > available {
            return Err(Corrupt(Violation::FrameOverrun));
        }
        Ok(Some(frame))
    }

    /// Copies `dst.len()` body bytes of `frame`, from body offset `offset`.
    ///
    /// # Panics
    /// If `frame` is not the one at this consumer's read position (see
    /// [`consume`](Self::consume)) or the range runs past its body.
    pub fn read(&self, frame: Frame, offset: usize, dst: &mut [u8]) {
        let pos = self.body_at(frame, offset, dst.len());
        // SAFETY: `body_at` checked the range lies inside the frame, and the
        // frame inside the published range; `dst` holds `dst.len()` bytes.
        unsafe { copy_out(&self.storage, pos, dst.as_mut_ptr(), dst.len()) };
    }

    /// Appends `len` body bytes of `frame`, from body offset `offset`, to `dst`.
    ///
    /// # Panics
    /// As [`read`](Self::read).
    #[inline(always)]
    pub fn read_append(&self, frame: Frame, offset: usize, len: usize, dst: &mut Vec<u8>) {
        let pos = self.body_at(frame, offset, len);
        dst.reserve(len);
        let start = dst.len();
        // SAFETY: `reserve` made room for `len` bytes after `start`; the ring
        // range lies inside the frame, which lies in the published range
        // (both checked by `body_at`). Every byte of the new length is
        // written before `set_len`.
        unsafe {
            copy_out(&self.storage, pos, dst.as_mut_ptr().add(start), len);
            dst.set_len(start + len);
        }
    }

    /// The body of `frame` in place in the ring, if it lies in one piece
    /// (a frame that wraps at the end of the data area is `None`: copy it).
    /// While the slice lives this consumer is borrowed, so the frame cannot
    /// be consumed and the producer does not write it.
    ///
    /// A producer in another process is outside that promise: it can change
    /// the bytes while they are read (every byte value is a valid `u8`), as
    /// it can a pool block it sent; callers parse from a copy.
    ///
    /// # Panics
    /// As [`read`](Self::read).
    #[inline]
    pub fn body_in_place(&self, frame: Frame) -> Option<&[u8]> {
        let pos = self.body_at(frame, 0, frame.len());
        let start = in_one_piece(&self.storage, pos, frame.len())?;
        // SAFETY: `body_at` checked the body lies inside the frame and the
        // frame inside the published range, which the producer of this
        // process does not write until `consume` (it takes `&mut self`, so
        // not while this borrow of `self` lives); `in_one_piece` checked the
        // range does not wrap, so it is `len` bytes of the data area, which
        // lives as long as the storage this borrow keeps.
        Some(unsafe { std::slice::from_raw_parts(start, frame.len()) })
    }

    /// Releases `frame`, the one at the read position, back to the producer.
    ///
    /// # Panics
    /// If `frame` was not peeked from this consumer at its current read
    /// position, or does not fit in what it has seen published (a frame
    /// already consumed, or one from another consumer): a caller's bug.
    #[inline]
    pub fn consume(&mut self, frame: Frame) {
        self.check(frame);
        self.head = self.head.wrapping_add(frame.size());
        self.taken = self.taken.wrapping_add(1);
        // Release: pairs with the producer's Acquire load of the head; our
        // reads of the frame happen before the producer may overwrite it.
        self.storage
            .control()
            .consumer
            .pos
            .store(self.head, Ordering::Release);
    }

    /// Frames released by [`consume`](Self::consume) so far (wrapping): a
    /// waiting reader tells from it how many it took between two waits.
    #[inline]
    pub fn taken(&self) -> u64 {
        self.taken
    }

    /// The read position this consumer keeps (not the one it publishes,
    /// which the other side's process can write).
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    /// Checks `frame` lies at the head, inside the published range.
    #[inline]
    fn check(&self, frame: Frame) {
        assert!(
            frame.at == self.head && frame.size() <= self.tail.wrapping_sub(self.head),
            "frame was not peeked from this consumer at its read position"
        );
    }

    /// The ring position of body bytes `offset..offset + len` of `frame`,
    /// after checking the frame and that the range lies inside its body.
    #[inline]
    fn body_at(&self, frame: Frame, offset: usize, len: usize) -> u64 {
        self.check(frame);
        assert!(
            offset
                .checked_add(len)
                .is_some_and(|end| end <= frame.len()),
            "read past the frame body"
        );
        frame
            .at
            .wrapping_add(FRAME_HEADER as u64)
            .wrapping_add(offset as u64)
    }
}
