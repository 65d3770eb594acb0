//! What can go wrong with a typed call. A failed send hands its value back
//! in every case (crossbeam-channel's `err.rs`), so nothing is lost: the
//! value was moved into the call, and encoding only borrows it.
//!
//! `Debug` and `Display` never print the value (it need not be `Debug`,
//! and may be large): `Debug` shows `..` in its place.

use std::fmt;

use crate::api::channel::ProtocolError;
use crate::api::channel::RecvFault;
use crate::api::codec::{DecodeError, EncodeError};

/// Why a typed send failed, when it was neither for the receiver being
/// gone nor for a lack of room. Carried, with the value, by
/// [`SendError::Failed`], [`TrySendError::Failed`] and
/// [`SendTimeoutError::Failed`].
///
/// ```
/// use ferry::typed::SendFailure;
/// let failure = SendFailure::TooLarge { len: 10, limit: 4 };
/// assert!(!failure.is_disconnected());
/// assert!(failure.to_string().contains("10 bytes"));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum SendFailure {
    /// The encoded value is longer than the pipe's limit. Nothing was sent.
    TooLarge {
        /// The encoded length.
        len: usize,
        /// The pipe's limit.
        limit: usize,
    },
    /// Channel halves or descriptors in the value cannot travel over this
    /// pipe (see [`crate::Sender::send_with`]; or the byte receiver takes
    /// bytes only, [`crate::Receiver::set_bytes_only`]). Nothing was sent.
    NotTransferable(&'static str),
    /// The peer broke the protocol; the link is shut down.
    Protocol(ProtocolError),
    /// The operating system refused (for example, out of descriptors): a
    /// shortage of this process, not the peer's fault.
    Io(std::io::Error),
    /// The value could not be encoded (its `Serialize` failed, it nests too
    /// deep, or a channel half in it cannot travel). Nothing was sent.
    Encode(EncodeError),
    /// The send was made on this sender (or a clone of it) from inside the
    /// `Serialize` of a value this thread is sending on it. Nothing was
    /// sent.
    Reentrant,
}

impl SendFailure {
    /// Whether the peer is gone for this sender: true for
    /// [`Protocol`](Self::Protocol) (the link it broke is shut down, so
    /// nothing sent on it arrives any more), false for the rest.
    ///
    /// ```
    /// use ferry::typed::SendFailure;
    /// assert!(!SendFailure::Reentrant.is_disconnected());
    /// ```
    pub fn is_disconnected(&self) -> bool {
        matches!(self, Self::Protocol(_))
    }
}

impl fmt::Display for SendFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { len, limit } => write!(
                f,
                "encoded message of {len} bytes exceeds the pipe's limit of {limit} bytes"
            ),
            Self::NotTransferable(why) => write!(f, "a half in the value cannot be sent: {why}"),
            Self::Protocol(e) => e.fmt(f),
            Self::Io(e) => write!(f, "system error while sending: {e}"),
            Self::Encode(e) => write!(f, "cannot encode the value: {e}"),
            Self::Reentrant => f.write_str(
                "a send on this sender from inside the serialization of a value it is sending",
            ),
        }
    }
}

impl std::error::Error for SendFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Protocol(e) => Some(e),
            Self::Io(e) => Some(e),
            Self::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// Defines one typed send error: the variants every send shares, plus the
/// one (if any) its operation adds, each holding the value.
macro_rules! send_error {
    (
        $(#[$doc:meta])* $name:ident
        $(, $(#[$extra_doc:meta])* $extra:ident => $text:literal, $(#[$is_doc:meta])* $is:ident)?
    ) => {
        $(#[$doc])*
        #[non_exhaustive]
        pub enum $name<T> {
            $($(#[$extra_doc])* $extra(T),)?
            /// The receiving end is gone (dropped, or its process exited or
            /// died). The value was not sent.
            Disconnected(T),
            /// Another failure (see [`SendFailure`]). The value was not sent.
            Failed(T, SendFailure),
        }

        impl<T> $name<T> {
            /// The value that was not sent.
            ///
            /// ```
            #[doc = concat!("let e = ferry::typed::", stringify!($name), "::Disconnected(\"kept\");")]
            /// assert_eq!(e.into_inner(), "kept");
            /// ```
            pub fn into_inner(self) -> T {
                match self {
                    $(Self::$extra(value) => value,)?
                    Self::Disconnected(value) | Self::Failed(value, _) => value,
                }
            }

            /// Whether the peer is gone: [`Disconnected`](Self::Disconnected),
            /// or a [`SendFailure::Protocol`] (its link is shut down).
            ///
            /// ```
            /// use ferry::typed::SendFailure;
            #[doc = concat!("assert!(ferry::typed::", stringify!($name), "::Disconnected(1).is_disconnected());")]
            #[doc = concat!("let e = ferry::typed::", stringify!($name), "::Failed(1, SendFailure::Reentrant);")]
            /// assert!(!e.is_disconnected());
            /// ```
            pub fn is_disconnected(&self) -> bool {
                match self {
                    Self::Disconnected(_) => true,
                    Self::Failed(_, failure) => failure.is_disconnected(),
                    #[allow(unreachable_patterns)]
                    _ => false,
                }
            }

            /// The failure, if it is [`Failed`](Self::Failed).
            ///
            /// ```
            /// use ferry::typed::SendFailure;
            #[doc = concat!("let e = ferry::typed::", stringify!($name), "::Failed(1, SendFailure::Reentrant);")]
            /// assert!(matches!(e.failure(), Some(SendFailure::Reentrant)));
            /// ```
            pub fn failure(&self) -> Option<&SendFailure> {
                match self {
                    Self::Failed(_, failure) => Some(failure),
                    _ => None,
                }
            }

            $(
                $(#[$is_doc])*
                pub fn $is(&self) -> bool {
                    matches!(self, Self::$extra(_))
                }
            )?
        }

        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Self::$extra(_) => f.write_str(concat!(stringify!($extra), "(..)")),)?
                    Self::Disconnected(_) => f.write_str("Disconnected(..)"),
                    Self::Failed(_, failure) => write!(f, "Failed(.., {failure:?})"),
                }
            }
        }

        impl<T> fmt::Display for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $(Self::$extra(_) => f.write_str($text),)?
                    Self::Disconnected(_) => f.write_str("the receiving end of the channel is gone"),
                    Self::Failed(_, failure) => failure.fmt(f),
                }
            }
        }

        impl<T> std::error::Error for $name<T> {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                match self {
                    Self::Failed(_, failure) => Some(failure),
                    _ => None,
                }
            }
        }
    };
}

send_error! {
    /// Why a typed [`send`](super::Sender::send) failed; it holds the value,
    /// which [`into_inner`](SendError::into_inner) gives back.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<String>(16).unwrap();
    /// drop(rx);
    /// let e = tx.send("kept".to_string()).unwrap_err();
    /// assert!(e.is_disconnected());
    /// assert_eq!(format!("{e:?}"), "Disconnected(..)");
    /// assert_eq!(e.into_inner(), "kept");
    /// ```
    SendError
}

send_error! {
    /// Why a typed [`try_send`](super::Sender::try_send) failed; it holds
    /// the value, which [`into_inner`](TrySendError::into_inner) gives back.
    ///
    /// ```
    /// use ferry::typed::TrySendError;
    /// let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    /// drop(rx);
    /// match tx.try_send(7) {
    ///     Err(TrySendError::Disconnected(value)) => assert_eq!(value, 7),
    ///     other => panic!("{other:?}"),
    /// }
    /// ```
    TrySendError,
    /// The channel has no room now.
    Full => "the channel is full",
    /// Whether it is [`Full`](TrySendError::Full).
    ///
    /// ```
    /// let e = ferry::typed::TrySendError::Full(1);
    /// assert!(e.is_full() && !e.is_disconnected());
    /// ```
    is_full
}

send_error! {
    /// Why a typed [`send_timeout`](super::Sender::send_timeout) failed; it
    /// holds the value, which [`into_inner`](SendTimeoutError::into_inner)
    /// gives back.
    ///
    /// ```
    /// let e = ferry::typed::SendTimeoutError::Timeout("late");
    /// assert_eq!(e.to_string(), "the channel stayed full until the deadline");
    /// assert_eq!(e.into_inner(), "late");
    /// ```
    SendTimeoutError,
    /// The channel stayed full until the deadline.
    Timeout => "the channel stayed full until the deadline",
    /// Whether it is [`Timeout`](SendTimeoutError::Timeout).
    ///
    /// ```
    /// let e = ferry::typed::SendTimeoutError::Timeout(1);
    /// assert!(e.is_timeout() && !e.is_disconnected());
    /// ```
    is_timeout
}

/// Every error of a send that waits as long as it takes is also one its
/// `try_` and `_timeout` forms can give.
macro_rules! widen_send {
    ($($to:ident),+) => {$(
        impl<T> From<SendError<T>> for $to<T> {
            fn from(e: SendError<T>) -> Self {
                match e {
                    SendError::Disconnected(value) => Self::Disconnected(value),
                    SendError::Failed(value, failure) => Self::Failed(value, failure),
                }
            }
        }
    )+};
}

widen_send!(TrySendError, SendTimeoutError);

/// Defines one typed receive error, as [`send_error!`] does.
macro_rules! recv_error {
    ($(#[$doc:meta])* $name:ident $(, $(#[$extra_doc:meta])* $extra:ident => $text:literal)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$extra_doc])* $extra,)?
            /// The sending end is gone (every clone of it) and every value
            /// it sent has been received.
            Disconnected,
            /// The peer broke the protocol; the link is shut down.
            Protocol(ProtocolError),
            /// This process could not take what the peer sent (for example,
            /// it is out of file descriptors or address space). The peer did
            /// nothing wrong and nothing was lost: the message stays queued,
            /// and a later call receives it once the shortage is over.
            Io(std::io::Error),
            /// A message did not decode as the receiver's type. That message
            /// is dropped, with any halves it carried; the stream goes on
            /// with the next one.
            Decode(DecodeError),
        }

        impl $name {
            /// Whether the peer is gone: [`Disconnected`](Self::Disconnected),
            /// or [`Protocol`](Self::Protocol) (its link is shut down).
            ///
            /// ```
            #[doc = concat!("assert!(ferry::typed::", stringify!($name), "::Disconnected.is_disconnected());")]
            #[doc = concat!("let local = ferry::typed::", stringify!($name), "::Io(std::io::ErrorKind::OutOfMemory.into());")]
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
                    Self::Disconnected => f.write_str("the sending end of the channel is gone"),
                    Self::Protocol(e) => e.fmt(f),
                    Self::Io(e) => write!(
                        f,
                        "system error while receiving (the message stays queued): {e}"
                    ),
                    Self::Decode(e) => e.fmt(f),
                }
            }
        }

        impl std::error::Error for $name {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                match self {
                    Self::Protocol(e) => Some(e),
                    Self::Io(e) => Some(e),
                    Self::Decode(e) => Some(e),
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
    (@timeout) => { Self::Io(std::io::ErrorKind::TimedOut.into()) };
}

recv_error! {
    /// Why a typed [`recv`](super::Receiver::recv) failed.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// drop(tx);
    /// let e = rx.recv().unwrap_err();
    /// assert!(matches!(e, ferry::typed::RecvError::Disconnected));
    /// assert!(e.is_disconnected());
    /// ```
    RecvError
}

recv_error! {
    /// Why a typed [`try_recv`](super::Receiver::try_recv) failed.
    ///
    /// ```
    /// let (_tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// let e = rx.try_recv().unwrap_err();
    /// assert!(matches!(e, ferry::typed::TryRecvError::Empty));
    /// assert!(!e.is_disconnected());
    /// ```
    TryRecvError,
    /// No value is waiting now.
    Empty => "no value is waiting"
}

recv_error! {
    /// Why a typed [`recv_timeout`](super::Receiver::recv_timeout) failed.
    ///
    /// ```
    /// let (_tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// let e = rx.recv_timeout(std::time::Duration::from_millis(1)).unwrap_err();
    /// assert!(matches!(e, ferry::typed::RecvTimeoutError::Timeout));
    /// ```
    RecvTimeoutError,
    /// No value arrived before the deadline.
    Timeout => "no value arrived before the deadline"
}

/// Every error of a receive that waits as long as it takes is also one its
/// `try_` and `_timeout` forms can give.
macro_rules! widen_recv {
    ($($to:ident),+) => {$(
        impl From<RecvError> for $to {
            fn from(e: RecvError) -> Self {
                match e {
                    RecvError::Disconnected => Self::Disconnected,
                    RecvError::Protocol(e) => Self::Protocol(e),
                    RecvError::Io(e) => Self::Io(e),
                    RecvError::Decode(e) => Self::Decode(e),
                }
            }
        }
    )+};
}

widen_recv!(TryRecvError, RecvTimeoutError);
