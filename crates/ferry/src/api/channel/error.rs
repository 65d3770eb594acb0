//! What can go wrong, per operation.

use std::fmt;

use crate::base::wire::Violation;
use crate::transport::link::Failure;

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

    /// Whether the peer is gone: always true, since the link the peer
    /// broke the rules on is shut down (see the crate's "Errors" section).
    ///
    /// ```
    /// use ferry::{ProtocolError, Violation};
    /// assert!(ProtocolError::from(Violation::TooManyHandles).is_disconnected());
    /// ```
    pub fn is_disconnected(&self) -> bool {
        true
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

/// How a send went wrong inside the crate, whichever call it was; each
/// public call turns it into its own error type.
#[derive(Debug)]
pub(crate) enum SendFault {
    Disconnected,
    /// The deadline passed (a `try_` call's deadline is now).
    Timeout,
    TooLarge {
        len: usize,
        limit: usize,
    },
    NotTransferable(&'static str),
    Protocol(ProtocolError),
    Io(std::io::Error),
}

/// How a receive went wrong inside the crate (see [`SendFault`]).
#[derive(Debug)]
pub(crate) enum RecvFault {
    Disconnected,
    Timeout,
    Protocol(ProtocolError),
    Io(std::io::Error),
}

impl From<Failure> for SendFault {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::HungUp => Self::Disconnected,
            Failure::Protocol(why) => Self::Protocol(ProtocolError(why)),
        }
    }
}

impl From<Failure> for RecvFault {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::HungUp => Self::Disconnected,
            Failure::Protocol(why) => Self::Protocol(ProtocolError(why)),
        }
    }
}

/// A deadline that cannot pass was reported passed: never expected, and
/// reported as the OS's timeout rather than a panic.
fn timed_out() -> std::io::Error {
    std::io::ErrorKind::TimedOut.into()
}

/// Defines one send error type: the variants every send shares, plus the
/// one (if any) its operation adds.
macro_rules! send_error {
    ($(#[$doc:meta])* $name:ident $(, $(#[$extra_doc:meta])* $extra:ident => $text:literal)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$extra_doc])* $extra,)?
            /// The receiving end is gone (dropped, or its process exited or
            /// died).
            Disconnected,
            /// The message is longer than this pipe's limit. Nothing was sent.
            TooLarge {
                /// The message's length.
                len: usize,
                /// The pipe's limit.
                limit: usize,
            },
            /// Pipe ends were attached that cannot travel (see
            /// [`crate::Sender::send_with`]), or handles were attached and
            /// the receiving end takes bytes only
            /// ([`crate::Receiver::set_bytes_only`]). The text says which.
            NotTransferable(&'static str),
            /// The peer broke the protocol; the link is shut down.
            Protocol(ProtocolError),
            /// The operating system refused (for example, out of descriptors).
            Io(std::io::Error),
        }

        impl $name {
            /// Whether the peer is gone: [`Disconnected`](Self::Disconnected),
            /// or [`Protocol`](Self::Protocol) (the link it broke is shut
            /// down, so nothing sent on it arrives any more).
            ///
            /// ```
            #[doc = concat!("assert!(ferry::", stringify!($name), "::Disconnected.is_disconnected());")]
            #[doc = concat!("let local = ferry::", stringify!($name), "::Io(std::io::ErrorKind::OutOfMemory.into());")]
            /// assert!(!local.is_disconnected());
            /// ```
            pub fn is_disconnected(&self) -> bool {
                matches!(self, Self::Disconnected | Self::Protocol(_))
            }
        }

        impl SendWithError<$name> {
            /// Whether the peer is gone (see the error's own
            /// `is_disconnected`).
            ///
            /// ```
            #[doc = concat!("let e = ferry::SendWithError { error: ferry::", stringify!($name), "::Disconnected, handles: Vec::new() };")]
            /// assert!(e.is_disconnected());
            /// ```
            pub fn is_disconnected(&self) -> bool {
                self.error.is_disconnected()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Self::$extra => f.write_str($text),)?
                    Self::Disconnected => f.write_str("the receiving end of the pipe is gone"),
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

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                match self {
                    Self::Protocol(e) => Some(e),
                    Self::Io(e) => Some(e),
                    _ => None,
                }
            }
        }

        impl From<SendFault> for $name {
            fn from(fault: SendFault) -> Self {
                match fault {
                    SendFault::Disconnected => Self::Disconnected,
                    SendFault::Timeout => send_error!(@timeout $($extra)?),
                    SendFault::TooLarge { len, limit } => Self::TooLarge { len, limit },
                    SendFault::NotTransferable(why) => Self::NotTransferable(why),
                    SendFault::Protocol(e) => Self::Protocol(e),
                    SendFault::Io(e) => Self::Io(e),
                }
            }
        }
    };
    (@timeout $extra:ident) => { Self::$extra };
    (@timeout) => { Self::Io(timed_out()) };
}

send_error! {
    /// Why [`send`](crate::Sender::send) (or another call that waits as
    /// long as it takes) failed. The caller keeps its bytes, so nothing is
    /// lost; nothing of the message was delivered.
    SendError
}

send_error! {
    /// Why [`try_send`](crate::Sender::try_send) failed. The caller keeps
    /// its bytes; nothing of the message was delivered.
    TrySendError,
    /// The pipe has no room for the message now.
    Full => "the pipe is full"
}

send_error! {
    /// Why [`send_timeout`](crate::Sender::send_timeout) failed. The caller
    /// keeps its bytes; nothing of the message was delivered.
    SendTimeoutError,
    /// The pipe stayed full until the deadline (or another thread of this
    /// end stayed in a send that waits for room).
    Timeout => "the pipe stayed full until the deadline"
}

/// Defines one receive error type, as [`send_error!`] does.
macro_rules! recv_error {
    ($(#[$doc:meta])* $name:ident $(, $(#[$extra_doc:meta])* $extra:ident => $text:literal)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$extra_doc])* $extra,)?
            /// The sending end is gone and every message it sent has been
            /// received.
            Disconnected,
            /// The peer broke the protocol; the link is shut down.
            Protocol(ProtocolError),
            /// This process could not take what the peer sent (for example,
            /// it is out of file descriptors or address space). The peer did
            /// nothing wrong and nothing was lost: the message stays queued,
            /// and a later call receives it once the shortage is over.
            Io(std::io::Error),
        }

        impl $name {
            /// Whether the peer is gone: [`Disconnected`](Self::Disconnected),
            /// or [`Protocol`](Self::Protocol) (the link it broke is shut
            /// down, so nothing more arrives on it).
            ///
            /// ```
            #[doc = concat!("assert!(ferry::", stringify!($name), "::Disconnected.is_disconnected());")]
            #[doc = concat!("let local = ferry::", stringify!($name), "::Io(std::io::ErrorKind::OutOfMemory.into());")]
            /// assert!(!local.is_disconnected());
            /// ```
            pub fn is_disconnected(&self) -> bool {
                matches!(self, Self::Disconnected | Self::Protocol(_))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Self::$extra => f.write_str($text),)?
                    Self::Disconnected => f.write_str("the sending end of the pipe is gone"),
                    Self::Protocol(e) => e.fmt(f),
                    Self::Io(e) => write!(
                        f,
                        "system error while receiving (the message stays queued): {e}"
                    ),
                }
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                match self {
                    Self::Protocol(e) => Some(e),
                    Self::Io(e) => Some(e),
                    _ => None,
                }
            }
        }

        impl From<RecvFault> for $name {
            fn from(fault: RecvFault) -> Self {
                match fault {
                    RecvFault::Disconnected => Self::Disconnected,
                    RecvFault::Timeout => recv_error!(@timeout $($extra)?),
                    RecvFault::Protocol(e) => Self::Protocol(e),
                    RecvFault::Io(e) => Self::Io(e),
                }
            }
        }
    };
    (@timeout $extra:ident) => { Self::$extra };
    (@timeout) => { Self::Io(timed_out()) };
}

recv_error! {
    /// Why [`recv`](crate::Receiver::recv) (or another call that waits as
    /// long as it takes) failed.
    RecvError
}

recv_error! {
    /// Why [`try_recv`](crate::Receiver::try_recv) failed.
    TryRecvError,
    /// No message is waiting now.
    Empty => "no message is waiting"
}

recv_error! {
    /// Why [`recv_timeout`](crate::Receiver::recv_timeout) failed.
    RecvTimeoutError,
    /// No message arrived before the deadline (or another thread of this
    /// end was waiting for it all that time).
    Timeout => "no message arrived before the deadline"
}

/// Every error of a call that waits as long as it takes is also one its
/// `try_` and `_timeout` forms can give.
macro_rules! widen_send {
    ($($to:ident),+) => {$(
        impl From<SendError> for $to {
            fn from(e: SendError) -> Self {
                match e {
                    SendError::Disconnected => Self::Disconnected,
                    SendError::TooLarge { len, limit } => Self::TooLarge { len, limit },
                    SendError::NotTransferable(why) => Self::NotTransferable(why),
                    SendError::Protocol(e) => Self::Protocol(e),
                    SendError::Io(e) => Self::Io(e),
                }
            }
        }
    )+};
}

widen_send!(TrySendError, SendTimeoutError);

impl From<RecvError> for TryRecvError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Disconnected => Self::Disconnected,
            RecvError::Protocol(e) => Self::Protocol(e),
            RecvError::Io(e) => Self::Io(e),
        }
    }
}

impl From<RecvError> for RecvTimeoutError {
    fn from(e: RecvError) -> Self {
        match e {
            RecvError::Disconnected => Self::Disconnected,
            RecvError::Protocol(e) => Self::Protocol(e),
            RecvError::Io(e) => Self::Io(e),
        }
    }
}

/// A failed [`crate::Sender::send_with`] (or its `try_` and `_timeout`
/// forms, whose error types `E` it carries): the error, and the ends that
/// were not sent (all of them, unless the link failed part way).
///
/// Its `Debug` shows the error and how many ends came back, not the ends.
pub struct SendWithError<E = SendError> {
    /// What went wrong.
    pub error: E,
    /// The handles handed back (every one, unless the link failed part way).
    pub handles: Vec<super::Handle>,
}

impl SendWithError<SendFault> {
    /// The error as the public call that failed reports it.
    pub(crate) fn convert<E: From<SendFault>>(self) -> SendWithError<E> {
        SendWithError {
            error: self.error.into(),
            handles: self.handles,
        }
    }
}

impl<E: fmt::Debug> fmt::Debug for SendWithError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendWithError")
            .field("error", &self.error)
            .field(
                "handles",
                &format_args!("{} handed back", self.handles.len()),
            )
            .finish()
    }
}

impl<E: fmt::Display> fmt::Display for SendWithError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for SendWithError<E> {}

/// Why [`Select::add`](crate::Select::add) failed, with the member it was
/// given, handed back whole.
///
/// ```
/// let (_tx, rx) = ferry::bytes::channel(4)?;
/// let mut select = ferry::Select::new()?;
/// match select.add(rx) {
///     Ok(_key) => {}
///     Err(e) => {
///         eprintln!("cannot wait on it: {e}");
///         let _rx: ferry::Receiver = e.into_inner(); // still usable
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AddError<M> {
    /// What the system refused (out of descriptors, most likely).
    pub error: std::io::Error,
    /// The member that was not added.
    pub member: M,
}

impl<M> AddError<M> {
    /// The member that was not added.
    pub fn into_inner(self) -> M {
        self.member
    }
}

impl<M> fmt::Debug for AddError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<M> fmt::Display for AddError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot add to the select (the member is handed back): {}",
            self.error
        )
    }
}

impl<M> std::error::Error for AddError<M> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<M> From<AddError<M>> for std::io::Error {
    /// The system's error, dropping the member.
    fn from(e: AddError<M>) -> Self {
        e.error
    }
}

/// Why [`Select::try_ready`](crate::Select::try_ready) returned no index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TryReadyError {
    /// No receiver in the set is ready now.
    Empty,
}

impl fmt::Display for TryReadyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no receiver in the set is ready")
    }
}

impl std::error::Error for TryReadyError {}

/// Why [`Select::ready_timeout`](crate::Select::ready_timeout) returned no
/// index.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadyTimeoutError {
    /// No receiver was ready before the deadline.
    Timeout,
    /// Waiting failed (see [`Select::ready`](crate::Select::ready)).
    Io(std::io::Error),
}

impl fmt::Display for ReadyTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("no receiver in the set was ready before the deadline"),
            Self::Io(e) => write!(f, "waiting on the set failed: {e}"),
        }
    }
}

impl std::error::Error for ReadyTimeoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            Self::Timeout => None,
        }
    }
}
