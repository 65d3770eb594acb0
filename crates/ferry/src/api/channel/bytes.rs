//! Byte channels: a connected [`Sender`] and [`Receiver`] of byte
//! messages, in one process or (once either half travels inside a
//! message) across two.
//!
//! ```
//! let (tx, rx) = ferry::bytes::channel(8)?;
//! tx.send(b"hello")?;
//! assert_eq!(rx.recv()?, b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A channel is one ring of a pipe's region: `4 KiB + 2 ×` the ring
//! capacity of address space (516 KiB with the default 256 KiB ring; a
//! region's two rings have one capacity, and the one a channel does not
//! use is never written, so its pages take no memory).

pub use super::{
    Handle, Message, Receiver, RecvError, RecvTimeoutError, SendError, SendTimeoutError,
    SendWithError, Sender, TryRecvError, TrySendError,
};

/// Makes a one-way byte channel in this process: a [`Sender`] and the
/// [`Receiver`] its messages go to, holding at most `capacity` messages.
///
/// `capacity` counts messages: while `capacity` messages are sent and not
/// yet received, [`Sender::send`] waits, [`Sender::try_send`] says
/// [`TrySendError::Full`] and [`Sender::send_timeout`] times out; one
/// receive makes room for one more. The bound holds with the receiver in
/// another process too (see
/// [`PipeOptions::capacity`](super::PipeOptions::capacity));
/// the ring's bytes (256 KiB by default,
/// [`PipeOptions::capacity`](super::PipeOptions::capacity)) bound the
/// channel as well, whichever is reached first. Clones of the sender
/// share the bound (see [`Sender#clones`]).
///
/// ```
/// let (tx, rx) = ferry::bytes::channel(1)?;
/// tx.send(b"first")?;
/// assert!(matches!(tx.try_send(b"second"), Err(ferry::TrySendError::Full)));
/// assert_eq!(rx.recv()?, b"first");
/// tx.try_send(b"second")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// `InvalidInput` for a `capacity` of 0 (no message could pass: there is
/// no rendezvous channel); else an [`std::io::Error`] if the shared memory
/// cannot be made (out of memory or descriptors).
pub fn channel(capacity: usize) -> std::io::Result<(Sender, Receiver)> {
    super::PipeOptions::new().capacity(capacity).channel()
}
