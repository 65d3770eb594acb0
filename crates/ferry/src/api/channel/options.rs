//! Settings chosen when a pipe is made.

use std::sync::Arc;

use super::{Pipe, Receiver, Sender, Wait};
use crate::transport::ring::Region;

/// Default ring capacity per direction: 256 KiB, so a pipe's region is
/// 516 KiB of shared memory (a page of header and control blocks, then the
/// two rings), and a link's default map budget (8 GiB) holds ~16,000 moved
/// ends. Smaller default rings were measured and cost streams (64 B across
/// CPUs, 1 KiB on one CPU: each full ring is a context switch when both
/// share a CPU): 128 KiB 7-9 % and 64 KiB 11-19 % below 256 KiB, alternated
/// in one sitting. A program with many small pipes sets
/// [`PipeOptions::capacity`] (4 KiB rings make an 12 KiB region).
pub(super) const DEFAULT_CAPACITY: usize = 256 * 1024;
/// Default largest message.
pub(super) const DEFAULT_LIMIT: usize = 256 * 1024 * 1024;

/// Settings for a new pipe.
///
/// ```
/// use ferry::{PipeOptions, Wait};
/// let (a, b) = PipeOptions::new().ring_size(64 * 1024).wait(Wait::Sleep).pipe()?;
/// let reader = std::thread::spawn(move || b.recv());
/// a.send(&[7; 100_000])?; // larger than the ring: travels in pieces
/// assert_eq!(reader.join().unwrap()?.len(), 100_000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct PipeOptions {
    pub(super) capacity: usize,
    pub(crate) limit: usize,
    pub(crate) wait: Wait,
    pub(crate) pool_cap: usize,
    pub(crate) out_of_line: usize,
    pub(crate) max_mapped: usize,
    /// Most messages in flight per sender, if bounded.
    pub(crate) messages: Option<usize>,
    /// Whether the receivers made take bytes only.
    pub(crate) bytes_only: bool,
}

impl Default for PipeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl PipeOptions {
    /// The defaults: 256 KiB per direction, 256 MiB messages, adaptive waits.
    pub fn new() -> Self {
        Self {
            capacity: DEFAULT_CAPACITY,
            limit: DEFAULT_LIMIT,
            wait: Wait::Adaptive,
            pool_cap: crate::transport::link::DEFAULT_POOL_CAP,
            out_of_line: super::OUT_OF_LINE,
            max_mapped: crate::transport::link::DEFAULT_MAX_MAPPED,
            messages: None,
            bytes_only: false,
        }
    }

    /// Most bytes of the peer's shared memory (the regions of pipe ends it
    /// sends, and its pool blocks) that the link a spawned child is joined
    /// by may map into this process; 8 GiB by default. Checked before each
    /// mapping, so no peer can exhaust this process's address space: a pipe
    /// end whose region does not fit what is left is refused alone (the
    /// message arrives without it, [`Message::refused`](crate::Message::refused)
    /// counts it, and its other end sees the pipe disconnected; the peer
    /// cannot know this budget, so this is not its fault and the link goes
    /// on); pool blocks past it are a `Protocol` error.
    pub fn max_mapped(mut self, bytes: usize) -> Self {
        self.max_mapped = bytes;
        self
    }

    /// The limits of a link made with these options.
    pub(crate) fn link_limits(&self) -> crate::transport::link::LinkLimits {
        crate::transport::link::LinkLimits {
            pool_cap: self.pool_cap,
            max_mapped: self.max_mapped,
        }
    }

    /// Most bytes of shared-memory blocks (for large messages) mapped per
    /// direction on the link a spawned child is joined by; 64 MiB by
    /// default. Enforced before mapping: at the cap a sender waits briefly
    /// for a block to come back, then sends through the ring instead; a
    /// message whose block would not fit the cap at all always goes
    /// through the ring.
    pub fn pool_cap(mut self, bytes: usize) -> Self {
        self.pool_cap = bytes;
        self
    }

    /// Bytes each direction's ring holds before `send` blocks (a power of
    /// two, 4 KiB to 1 GiB; 256 KiB by default). Each pipe's region is this
    /// twice plus 4 KiB, charged to the map budget of every link its ends
    /// are sent over (see [`PipeOptions::max_mapped`]). Not to be confused
    /// with the [`capacity`](PipeOptions::capacity) in messages.
    pub fn ring_size(mut self, bytes: usize) -> Self {
        self.capacity = bytes;
        self
    }

    /// The largest message either end sends or accepts.
    pub fn max_message(mut self, bytes: usize) -> Self {
        self.limit = bytes;
        self
    }

    /// How both ends wait. (A spawned child's end gets every option set here;
    /// an end that arrives in a message starts with the defaults, and its
    /// holder chooses with [`Sender::set_wait`] and [`Receiver::set_wait`].)
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Messages of at least this many bytes, to another process, travel out
    /// of line in a shared-memory block instead of through the ring
    /// ([`super::OUT_OF_LINE`] by default; `usize::MAX` never).
    pub fn out_of_line(mut self, bytes: usize) -> Self {
        self.out_of_line = bytes;
        self
    }

    /// Most messages each sender of the pipe has in flight (sent and not
    /// yet received) before `send` waits, `try_send` says `Full` and
    /// `send_timeout` `Timeout`; unbounded (only the ring's bytes bound a
    /// pipe) unless set. At least 1: [`PipeOptions::pipe`] and
    /// [`PipeOptions::channel`] refuse 0 (`InvalidInput`). The ring's
    /// byte bound ([`PipeOptions::ring_size`]) applies as well: a sender
    /// also waits while the ring has no room for the next message.
    ///
    /// Counted by the sender, in this process or another alike: it keeps
    /// where in the ring each message it has in flight ends, and counts as
    /// received those the receiver has read past. A sender that travels to
    /// another process leaves its count behind (the new holder's sends are
    /// bounded by the ring's bytes alone); a receiver that travels keeps
    /// its sender bounded.
    ///
    /// ```
    /// let (tx, rx) = ferry::PipeOptions::new().capacity(2).channel()?;
    /// tx.send(b"1")?;
    /// tx.send(b"2")?;
    /// assert!(matches!(tx.try_send(b"3"), Err(ferry::TrySendError::Full)));
    /// assert_eq!(rx.recv()?, b"1");
    /// tx.try_send(b"3")?; // one received: room for one more
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(mut self, messages: usize) -> Self {
        self.messages = Some(messages);
        self
    }

    /// Whether the receivers these options make take bytes only from the
    /// start ([`Receiver::set_bytes_only`]), before any sender can write:
    /// both of [`PipeOptions::pipe`]'s (and so both ends of a spawned
    /// child's pipe), [`PipeOptions::channel`]'s, the
    /// server's end of each client's pipe under
    /// [`ServerOptions::pipe_options`](crate::ServerOptions::pipe_options)
    /// (set before the client is welcomed), and the client's own end under
    /// [`ConnectOptions::pipe_options`](crate::ConnectOptions::pipe_options)
    /// (set before its opening goes out). Off by default.
    ///
    /// ```
    /// let (a, b) = ferry::PipeOptions::new().bytes_only(true).pipe()?;
    /// assert!(b.receiver().bytes_only());
    /// let (x, _y) = ferry::pipe()?;
    /// let err = a.sender().send_with(b"x", vec![x]).unwrap_err();
    /// assert!(matches!(err.error, ferry::SendError::NotTransferable(_)));
    /// assert_eq!(err.handles.len(), 1); // handed back
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bytes_only(mut self, on: bool) -> Self {
        self.bytes_only = on;
        self
    }

    /// Makes a one-way channel in this process: a [`Sender`] and the
    /// [`Receiver`] of the same ring (see [`crate::bytes::channel`]).
    ///
    /// ```
    /// let (tx, rx) = ferry::PipeOptions::new().ring_size(4096).channel()?;
    /// tx.send(b"one way")?;
    /// assert_eq!(rx.recv()?, b"one way");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`PipeOptions::pipe`].
    pub fn channel(&self) -> std::io::Result<(Sender, Receiver)> {
        let (a, b) = self.pipe()?;
        // The other ring's halves close here: nothing ever travels on it
        // (its data pages are never touched, so they take address space,
        // not memory: both rings of a region have one capacity).
        let (tx, _) = a.split();
        let (_, rx) = b.split();
        Ok((tx, rx))
    }

    /// Makes a pipe with both ends in this process.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a ring capacity that is not a power of two from
    /// 4 KiB to 1 GiB, or a message capacity of 0; else an
    /// [`std::io::Error`] if the shared memory cannot be made (out of
    /// memory or descriptors).
    pub fn pipe(&self) -> std::io::Result<(Pipe, Pipe)> {
        if self.messages == Some(0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a message capacity must be at least 1 (0 would let no message through)",
            ));
        }
        let region = Region::create(self.capacity)?;
        // One cell per ring, shared by its two sides while both are here.
        let links = [Arc::default(), Arc::default()];
        let ends = (
            Pipe::new(&region, 0, &links, self)?,
            Pipe::new(&region, 1, &links, self)?,
        );
        if self.bytes_only {
            ends.0.receiver().set_bytes_only(true);
            ends.1.receiver().set_bytes_only(true);
        }
        Ok(ends)
    }
}
