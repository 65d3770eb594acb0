//! ferry moves messages between processes on one machine, through shared
//! memory, and stays sound when the other process is buggy, dead or hostile.
//!
//! ```
//! let (a, b) = ferry::pipe()?;
//! a.send(b"hello")?;
//! assert_eq!(b.recv()?, b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Concepts
//!
//! - A [`Pipe`] is one end of a bidirectional, bounded message pipe. Make
//!   both ends in one process with [`pipe()`], or start a child process that
//!   holds the other end with [`spawn()`] (the child calls
//!   [`Pipe::from_parent`]).
//! - Pipe ends travel to the peer process inside messages
//!   ([`Pipe::send_with`], [`Pipe::recv_with`]); all pipes between two
//!   processes share one *link* (one socket), so descriptors grow with peer
//!   processes, not with pipes.
//! - Each end chooses how it waits ([`Wait`]): sleep at once, spin, or the
//!   default, spin briefly only while the peer runs on another CPU.
//! - When the peer process exits or is killed, every call on its pipes
//!   returns [`RecvError::Disconnected`] or [`SendError::Disconnected`]
//!   within milliseconds, after every message it fully sent is delivered.
//! - A peer that breaks the wire rules gets its link shut down, and calls
//!   return a `Protocol` error; ferry never panics or reads out of bounds
//!   because of what a peer wrote.
//!
//! # Large messages
//!
//! Between processes, a message of at least [`OUT_OF_LINE`] bytes (64 KiB)
//! travels out of line: its payload goes into a shared-memory block from
//! the link's pool (mapped once, pre-faulted by a background helper, reused
//! for many messages) and the ring carries a 16-byte descriptor. Smaller
//! messages are copied through the ring. [`Pipe::loan`] and
//! [`Pipe::recv_shared`] write and read such a block in place, without the
//! copies (a loan from [`LOAN_IN_PLACE`] bytes, 16 KiB: below that a copy
//! through the ring is cheaper than a block). The threshold comes from round trips measured on the 2-vCPU
//! machines ferry is built on (p50, µs, copy in and out on both sides):
//!
//! | size | through the ring | out of line |
//! |---|---|---|
//! | 32 KiB | 6.2 | 7.1 |
//! | 64 KiB | 7.4 | 7.4 |
//! | 128 KiB | 27 | 11 |
//! | 243 KiB | 34 | 19 |
//! | 1 MiB | 169 | 83 |
//!
//! A link direction keeps at most 8 MiB of one block size in flight (4 to
//! 64 blocks) and 64 MiB in all ([`PipeOptions::pool_cap`]): a sender that
//! runs further ahead of its receiver waits for a block to come back (at
//! most 2 ms, then it sends through the ring), since its blocks would only
//! leave the cache before they are read. [`pool_stats`] tells where blocks
//! came from (made in the background, made on a sender's path, or reused).
//!
//! # Layers
//!
//! [`sys`] (system calls) → `shm` (shared regions) and [`ring`] (frames and
//! the wait/wake protocol) → `link` (the control socket) → `channel` (the
//! public [`Pipe`]) → `bootstrap` (spawning). The wire format is in `wire`.
//!
//! # Portability
//!
//! Linux only for now: memfd, futex, `SOCK_SEQPACKET` and `SCM_RIGHTS`.
//! [`sys`] documents what another OS backend must provide.

#[cfg(not(loom))]
mod bootstrap;
#[cfg(not(loom))]
mod channel;
#[cfg(not(loom))]
mod link;
pub mod ring;
#[cfg(loom)]
pub mod shm;
#[cfg(not(loom))]
mod shm;
mod sync;
#[cfg(not(loom))]
pub mod sys;
// Public but hidden: pure functions over bytes, for the fuzz targets.
#[cfg(not(loom))]
#[doc(hidden)]
pub mod wire;

#[cfg(all(feature = "fuzzing", not(loom)))]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(not(loom))]
pub use bootstrap::spawn;
#[cfg(not(loom))]
pub use shm::reserve::PoolStats;

/// Where this process's pool blocks came from: made by the background
/// helper, made on a sender's path, or reused. See [`PoolStats`].
#[cfg(not(loom))]
pub fn pool_stats() -> PoolStats {
    shm::reserve::blocks().stats()
}
#[cfg(not(loom))]
pub use channel::{
    BootstrapError, LOAN_IN_PLACE, Loan, Message, OUT_OF_LINE, Pipe, PipeOptions, ProtocolError,
    RecvError, SendError, SendWithError, SharedBytes, Wait, pipe,
};
