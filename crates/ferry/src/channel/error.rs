//! What can go wrong, per operation.

use std::fmt;

use crate::link::Failure;
use crate::wire::Violation;

/// The peer broke the wire rules (a bad position, length, kind, handle or
/// region). The link it came over has been shut down.
///
/// ```
/// use ferry::{ProtocolError, Violation};
/// let e = ProtocolError::from(Violation::TooManyHandles);
/// assert_eq!(e.violation().code(), 9);
/// assert!(e.to_string().contains("too many handles"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolError(Violation);

impl ProtocolError {
    /// Which rule the peer broke.
    pub fn violation(&self) -> Violation {
        self.0
    }
}

impl From<Violation> for ProtocolError {
    fn from(violation: Violation) -> Self {
        Self(violation)
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "peer broke the ferry protocol: {} (violation {})",
            self.0,
            self.0.code()
        )
    }
}

impl std::error::Error for ProtocolError {}

/// Why a send failed. The caller keeps its bytes, so nothing is lost.
#[derive(Debug)]
#[non_exhaustive]
pub enum SendError {
    /// The receiving end is gone (dropped, or its process exited or died).
    Disconnected,
    /// The pipe is full (only from `try_send`). Nothing was sent.
    Full,
    /// The pipe stayed full until the deadline (only from `send_timeout`).
    /// Nothing was sent.
    Timeout,
    /// The message is longer than this pipe's limit. Nothing was sent.
    TooLarge {
        /// The message's length.
        len: usize,
        /// The pipe's limit.
        limit: usize,
    },
    /// Pipe ends were attached that cannot travel (see [`crate::Pipe::send_with`]).
    NotTransferable(&'static str),
    /// The peer broke the protocol; the link is shut down.
    Protocol(ProtocolError),
    /// The operating system refused (for example, out of descriptors).
    Io(std::io::Error),
}

/// Why a receive failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RecvError {
    /// The sending end is gone and every message it sent has been received.
    Disconnected,
    /// Nothing to receive now (only from `try_recv`).
    Empty,
    /// Nothing arrived before the deadline (only from `recv_timeout`).
    Timeout,
    /// The peer broke the protocol; the link is shut down.
    Protocol(ProtocolError),
    /// This process could not take what the peer sent (for example, it is
    /// out of file descriptors or address space). The peer did nothing
    /// wrong and nothing was lost: the message stays queued, and a later
    /// call receives it once the shortage is over.
    Io(std::io::Error),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disconnected => f.write_str("the receiving end of the pipe is gone"),
            Self::Full => f.write_str("the pipe is full"),
            Self::Timeout => f.write_str("the pipe stayed full until the deadline"),
            Self::TooLarge { len, limit } => write!(
                f,
                "message of {len} bytes exceeds the pipe's limit of {limit} bytes"
            ),
            Self::NotTransferable(why) => write!(f, "pipe end cannot be sent: {why}"),
            Self::Protocol(e) => e.fmt(f),
            Self::Io(e) => write!(f, "system error while sending: {e}"),
        }
    }
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disconnected => f.write_str("the sending end of the pipe is gone"),
            Self::Empty => f.write_str("no message is waiting"),
            Self::Timeout => f.write_str("no message arrived before the deadline"),
            Self::Protocol(e) => e.fmt(f),
            Self::Io(e) => write!(
                f,
                "system error while receiving (the message stays queued): {e}"
            ),
        }
    }
}

impl std::error::Error for SendError {}
impl std::error::Error for RecvError {}

impl From<Failure> for SendError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::HungUp => Self::Disconnected,
            Failure::Protocol(why) => Self::Protocol(ProtocolError(why)),
        }
    }
}

impl From<Failure> for RecvError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::HungUp => Self::Disconnected,
            Failure::Protocol(why) => Self::Protocol(ProtocolError(why)),
        }
    }
}

/// A failed [`crate::Sender::send_with`]: the error, and the ends that
/// were not sent (all of them, unless the link failed part way).
#[derive(Debug)]
pub struct SendWithError {
    /// What went wrong.
    pub error: SendError,
    /// The ends handed back.
    pub ends: Vec<super::End>,
}

impl fmt::Display for SendWithError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for SendWithError {}
