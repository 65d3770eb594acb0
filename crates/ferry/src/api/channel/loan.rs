//! The zero-copy API: [`Loan`] to write a message in place, [`SharedBytes`]
//! to read one in place, both owned values; and their scoped forms,
//! [`Sender::send_in_place`] and [`Receiver::recv_in_place`], which lend a
//! closure the message's bytes where they lie — in the ring for a small
//! message, so nothing at all is copied or allocated for it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::error::SendFault;
use super::receiver::Delivery;
use super::{Pipe, Receiver, RecvError, RecvTimeoutError, SendError, Sender};
use crate::transport::link::Link;
use crate::transport::pool::block::Block;
use crate::transport::pool::per_link::Held;
use std::time::{Duration, Instant};

/// Loans of at least this many bytes, on a pipe to another process, are
/// shared-memory blocks written in place; smaller ones are ordinary memory
/// copied through the ring, which costs less than a block's bookkeeping and
/// the extra cache lines it moves between the processes (descriptor, block,
/// release slot). Round trips measured on the 2-vCPU reference machine (p50,
/// µs, loan in a block / copied through the ring; CPUs apart, then shared):
///
/// | size | apart | shared |
/// |---|---|---|
/// | 144 B | 0.73 / 0.27 | 5.18 / 4.68 |
/// | 4 KiB | 1.28 / 0.73 | 5.31 / 4.96 |
/// | 8 KiB | 1.66 / 0.98 | 5.44 / 5.23 |
/// | 16 KiB | 1.95 / 1.61 | 5.73 / 5.75 |
/// | 32 KiB | 2.73 / 2.85 | 6.27 / 6.96 |
pub const LOAN_IN_PLACE: usize = 16 * 1024;

impl Sender {
    /// Lends a writable slot of `len` bytes for a message written in place.
    ///
    /// On a pipe to another process a slot of at least [`LOAN_IN_PLACE`]
    /// bytes (16 KiB, or the pipe's out-of-line threshold if that is lower)
    /// is a shared-memory block, and [`Loan::send`] sends it without
    /// copying; the receiver can read it in place with
    /// [`Receiver::recv_shared`]. Otherwise the slot is ordinary memory and
    /// sending copies it: for a smaller message, whose copy costs less than
    /// a block; on a pipe within one process; for more than 256 MiB, the
    /// largest block; or when the link's pool is at its cap with every block
    /// out.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let mut slot = a.sender().loan(5)?;
    /// slot.copy_from_slice(b"hello");
    /// slot.send()?;
    /// assert_eq!(&*b.receiver().recv_shared()?, b"hello");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    // Always inline, with `lend_slot` and `Loan::send`: under a plain
    // `#[inline]` the compiler kept them out of line, and the loan was
    // built in one frame and moved to the caller's (callgrind: 65 of a
    // small loan-and-view round trip's ~1,190 instructions per side).
    #[inline(always)]
    pub fn loan(&self, len: usize) -> Result<Loan<'_>, SendError> {
        Ok(Loan {
            slot: self.lend_slot(len).map_err(SendError::from)?,
            sender: SenderRef::Borrowed(self),
            len,
        })
    }

    /// Sends one message of `len` bytes that `write` writes in place: for
    /// a message that goes through the ring (below the out-of-line
    /// threshold, 64 KiB by default), straight into the ring, with no copy
    /// and no buffer of its own; for a larger one, into a [`loan`]'s slot.
    /// Write all `len` bytes: they start as zeros for a message through
    /// the ring, but a block may hold this process's own earlier messages
    /// (never another process's bytes). The message is sent when `write`
    /// returns, waiting while the pipe is full, as [`Sender::send`] does.
    ///
    /// `write` runs while this half's send lock is held: other threads
    /// sending on it wait until it returns, and a send on this same half
    /// from inside `write` panics (it would wait for itself). Sending on
    /// another pipe, or receiving on this one, is fine. If `write` panics,
    /// nothing is sent.
    ///
    /// The bytes `write` gets may be memory the receiving process can
    /// write too (the ring's): write the message there, and do not rely on
    /// reading back what you wrote.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.sender().send_in_place(5, |slot| slot.copy_from_slice(b"hello"))?;
    /// let len = b.receiver().recv_in_place(|bytes| {
    ///     assert_eq!(bytes, b"hello");
    ///     bytes.len()
    /// })?;
    /// assert_eq!(len, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Sender::send`] (`write` is not called if the message cannot be
    /// sent, e.g. [`SendError::TooLarge`] or
    /// [`SendError::Disconnected`]).
    ///
    /// [`loan`]: Sender::loan
    #[inline]
    pub fn send_in_place(
        &self,
        len: usize,
        write: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendError> {
        match self.write_in_ring(len, write)? {
            Ok(()) => Ok(()),
            Err(write) => self.send_in_loan(len, write),
        }
    }

    /// [`Sender::send_in_place`] of a message that does not go through the
    /// ring in one piece: written into a loan's slot (a block, when it goes
    /// out of line), then sent.
    #[inline(never)]
    fn send_in_loan(&self, len: usize, write: impl FnOnce(&mut [u8])) -> Result<(), SendError> {
        let mut loan = self.loan(len)?;
        write(&mut loan);
        loan.send()
    }

    /// [`loan`](Sender::loan) that does not borrow the sender: the loan
    /// holds a handle of its own on the sender's ring (as a clone would),
    /// so it can be kept in a struct, or outlive the sender it came from;
    /// the receiver sees the end only once it is sent or dropped.
    ///
    /// ```
    /// let (tx, rx) = ferry::bytes::channel(4)?;
    /// let mut loan = tx.loan_owned(3)?;
    /// drop(tx);
    /// loan.copy_from_slice(b"abc");
    /// loan.send()?;
    /// assert_eq!(rx.recv()?, b"abc");
    /// assert!(rx.recv().is_err()); // the loan was the last handle
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Sender::loan`].
    pub fn loan_owned(&self, len: usize) -> Result<Loan<'static>, SendError> {
        Ok(Loan {
            slot: self.lend_slot(len).map_err(SendError::from)?,
            sender: SenderRef::Owned(self.handle()),
            len,
        })
    }

    /// The slot of a loan of `len` bytes: a block of the link's pool, or
    /// ordinary memory (see [`Sender::loan`]). Inline for the small heap
    /// slot, the common loan; a block is taken out of line.
    #[inline(always)]
    fn lend_slot(&self, len: usize) -> Result<Slot, SendFault> {
        if len > self.limit.get()
            || (len >= LOAN_IN_PLACE.min(self.out_of_line.get()) && self.is_linked())
        {
            return self.lend_large_slot(len);
        }
        Ok(Slot::Heap(super::spare::zeroed(len)))
    }

    /// [`Sender::lend_slot`] past the limit, or for a block.
    #[inline(never)]
    fn lend_large_slot(&self, len: usize) -> Result<Slot, SendFault> {
        if len > self.limit.get() {
            return Err(SendFault::TooLarge {
                len,
                limit: self.limit.get(),
            });
        }
        let block = match self.core.half.link.get() {
            Some(link) => self
                .lend_block(&link, len, None)?
                .map(|(id, block)| (id, block, Arc::clone(&link))),
            None => None,
        };
        Ok(match block {
            Some(lent) => Slot::Block(lent),
            None => Slot::Heap(super::spare::zeroed(len)),
        })
    }
}

impl Pipe {}

impl Receiver {
    /// Receives the next message as a view: a large message from another
    /// process is read in place in shared memory (its block goes back to
    /// the sender's pool when the view is dropped); others are copied.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.send(b"seen in place")?;
    /// assert_eq!(&*b.receiver().recv_shared()?, b"seen in place");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    #[inline]
    pub fn recv_shared(&self) -> Result<SharedBytes, RecvError> {
        let mut bytes = super::spare::take();
        let mut held = None;
        self.recv_message(
            &mut Delivery {
                bytes: &mut bytes,
                ends: None,
                refused: 0,
                block: Some(&mut held),
            },
            None,
        )
        .map_err(RecvError::from)?;
        Ok(shared(held, bytes))
    }

    /// [`Receiver::recv_shared`], waiting at most `timeout` (zero: never
    /// waiting).
    ///
    /// ```
    /// use std::time::Duration;
    /// let (a, b) = ferry::pipe()?;
    /// let none = b.receiver().recv_shared_timeout(Duration::ZERO);
    /// assert!(matches!(none, Err(ferry::RecvTimeoutError::Timeout)));
    /// a.send(b"seen in place")?;
    /// assert_eq!(&*b.receiver().recv_shared_timeout(Duration::ZERO)?, b"seen in place");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv_timeout`].
    pub fn recv_shared_timeout(&self, timeout: Duration) -> Result<SharedBytes, RecvTimeoutError> {
        let mut bytes = super::spare::take();
        let mut held = None;
        let received = self.recv_message(
            &mut Delivery {
                bytes: &mut bytes,
                ends: None,
                refused: 0,
                block: Some(&mut held),
            },
            Some(Instant::now() + timeout),
        );
        match received {
            Ok(()) => Ok(shared(held, bytes)),
            Err(e) => {
                super::spare::give(bytes);
                Err(e.into())
            }
        }
    }
}

impl Receiver {
    /// Receives the next message and lends its bytes to `read` where they
    /// lie, returning what `read` returns: a message that came through the
    /// ring is read in the ring, with no copy and no buffer of its own; one
    /// that came out of line, in its block (as [`Receiver::recv_shared`]);
    /// the rare message stored across the ring's end, or in pieces, is
    /// copied first. The message counts as received once `read` returns,
    /// or panics.
    ///
    /// `read` runs while this half's receive lock is held: other threads
    /// receiving on it (`try_recv` too) wait until it returns, and a
    /// receive on this same half from inside `read` panics (it would wait
    /// for itself). Sending, on this pipe or another, is fine: a reply
    /// can be written from inside `read`.
    ///
    /// A *hostile* sender can change the bytes while `read` reads them (as
    /// with [`SharedBytes`]): parse what you check from a copy, not twice
    /// from the slice.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.send(b"ping")?;
    /// // Answered from inside the read: the reply is written in place too.
    /// b.receiver().recv_in_place(|request| {
    ///     b.sender().send_in_place(request.len(), |reply| reply.copy_from_slice(request))
    /// })??;
    /// assert_eq!(a.recv()?, b"ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`]; `read` is not called then.
    #[inline]
    pub fn recv_in_place<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Result<R, RecvError> {
        match self.read_in_ring(read)? {
            Ok(value) => Ok(value),
            Err(read) => self.recv_in_view(read),
        }
    }

    /// [`Receiver::recv_in_place`] of a message not in one piece in the
    /// ring: read through a view.
    #[inline(never)]
    fn recv_in_view<R>(&self, read: impl FnOnce(&[u8]) -> R) -> Result<R, RecvError> {
        let view = self.recv_shared()?;
        Ok(read(&view))
    }
}

/// A received message's view: its block if it came out of line, else its
/// copied bytes.
#[inline]
pub(super) fn shared(held: Option<Held>, bytes: Vec<u8>) -> SharedBytes {
    SharedBytes(match held {
        Some(held) => {
            super::spare::give(bytes);
            Shared::Block(held)
        }
        None => Shared::Owned(bytes),
    })
}

impl Drop for Shared {
    #[inline]
    fn drop(&mut self) {
        if let Self::Owned(bytes) = self {
            super::spare::give(std::mem::take(bytes));
        }
    }
}

#[derive(Debug)]
enum Slot {
    /// A block of the pool of `link`, the ring's link when it was lent.
    Block((u32, Block, Arc<Link>)),
    Heap(Vec<u8>),
    Sent,
}

/// The sender a loan is sent on: borrowed, or kept alive by the loan.
#[derive(Debug)]
enum SenderRef<'a> {
    Borrowed(&'a Sender),
    Owned(Sender),
}

impl Deref for SenderRef<'_> {
    type Target = Sender;
    fn deref(&self) -> &Sender {
        match self {
            Self::Borrowed(sender) => sender,
            Self::Owned(sender) => sender,
        }
    }
}

/// A writable slot for one message, from [`Sender::loan`] (borrowing the
/// sender) or [`Sender::loan_owned`] (`Loan<'static>`, holding a handle of
/// its own). Write it, then [`send`](Loan::send) it; dropping it unsent gives
/// the slot back.
#[derive(Debug)]
pub struct Loan<'a> {
    sender: SenderRef<'a>,
    slot: Slot,
    len: usize,
}

impl Loan<'_> {
    /// Sends the slot's bytes as one message, waiting while the pipe is full.
    #[inline(always)]
    pub fn send(self) -> Result<(), SendError> {
        match &self.slot {
            // The common loan, inline: a copy through the ring, then the
            // buffer goes back to this thread's spares as the loan drops.
            Slot::Heap(bytes) => self.sender.send(bytes),
            Slot::Block(_) => self.send_block(),
            Slot::Sent => Ok(()),
        }
    }

    /// [`Loan::send`] of a block.
    #[inline(never)]
    fn send_block(mut self) -> Result<(), SendError> {
        // Only `send` of a block comes here.
        let Slot::Block((id, block, lent_by)) = std::mem::replace(&mut self.slot, Slot::Sent)
        else {
            return Ok(());
        };
        let mut tx = match self.sender.begin_send(self.len, None) {
            Ok(tx) => tx,
            Err(e) => {
                self.slot = Slot::Block((id, block, lent_by));
                return Err(e.into());
            }
        };
        let naming = self.sender.core.half.begin_naming();
        match naming.link().map(Arc::clone) {
            Some(link) if Arc::ptr_eq(&link, &lent_by) => Ok(self
                .sender
                .push_block(&mut tx, &link, id, block, self.len, None)?),
            // The receiving side moved since the block was lent: its new
            // holder does not have the old link's blocks. The bytes go as
            // any message, and the block back to its pool.
            _ => {
                drop(naming);
                drop(tx);
                let bytes = block.bytes()[..self.len].to_vec();
                let _ = lent_by.with_pool(|pool| pool.give_back(id, block));
                Ok(self.sender.send(&bytes)?)
            }
        }
    }

    /// Gives an unsent loan's block back to the pool.
    #[inline(never)]
    fn give_block_back(&mut self) {
        if let Slot::Block((id, block, link)) = std::mem::replace(&mut self.slot, Slot::Sent) {
            let _ = link.with_pool(|pool| pool.give_back(id, block));
        }
    }
}

impl Deref for Loan<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.slot {
            Slot::Block((_, block, _)) => &block.bytes()[..self.len],
            Slot::Heap(bytes) => bytes,
            Slot::Sent => &[],
        }
    }
}

impl DerefMut for Loan<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.slot {
            Slot::Block((_, block, _)) => &mut block.bytes_mut()[..self.len],
            Slot::Heap(bytes) => bytes,
            Slot::Sent => &mut [],
        }
    }
}

impl Drop for Loan<'_> {
    #[inline]
    fn drop(&mut self) {
        match &mut self.slot {
            Slot::Heap(bytes) => super::spare::give(std::mem::take(bytes)),
            Slot::Block(_) => self.give_block_back(),
            Slot::Sent => {}
        }
    }
}

#[derive(Debug)]
enum Shared {
    Block(Held),
    Owned(Vec<u8>),
    /// A range of another view: a byte field of a typed message, read in
    /// place (see [`crate::api::typed`]).
    #[cfg(feature = "serde")]
    Part(Arc<SharedBytes>, std::ops::Range<usize>),
}

/// A received message read in place (from [`Receiver::recv_shared`]).
///
/// When the message came out of line from another process, these bytes
/// are the sender's pool block, mapped read-only here, and go back to the
/// sender's pool when this is dropped. A *hostile* sender can still change
/// them while you read (it keeps write access to its own block): validate
/// what you parse from a copy, not twice from the view. An honest sender
/// never touches a block until it is released.
#[derive(Debug)]
pub struct SharedBytes(Shared);

impl SharedBytes {
    /// Whether the bytes are read in place in shared memory (not a copy).
    pub fn is_in_place(&self) -> bool {
        match &self.0 {
            Shared::Block(_) => true,
            Shared::Owned(_) => false,
            #[cfg(feature = "serde")]
            Shared::Part(whole, _) => whole.is_in_place(),
        }
    }

    #[cfg(feature = "serde")]
    /// The part of `whole` that `part` is, if `part` lies inside it (a
    /// borrowed byte field of a message decoded from `whole`).
    pub(crate) fn part_of(whole: &Arc<SharedBytes>, part: &[u8]) -> Option<SharedBytes> {
        let base = whole.as_ptr() as usize;
        let start = (part.as_ptr() as usize).checked_sub(base)?;
        let end = start.checked_add(part.len())?;
        (end <= whole.len()).then(|| SharedBytes(Shared::Part(Arc::clone(whole), start..end)))
    }
}

impl From<Vec<u8>> for SharedBytes {
    /// Bytes of this process's own, to send as a typed message's byte
    /// field.
    fn from(bytes: Vec<u8>) -> Self {
        Self(Shared::Owned(bytes))
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Shared::Block(held) => held.bytes(),
            Shared::Owned(bytes) => bytes,
            // In bounds: checked by `part_of`, and `whole` never changes length.
            #[cfg(feature = "serde")]
            Shared::Part(whole, range) => whole.get(range.clone()).unwrap_or_default(),
        }
    }
}
