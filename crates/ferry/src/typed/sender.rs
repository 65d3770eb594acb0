//! The typed sending half.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::handles;
use super::moving;
use super::queue::{Presence, Queue};
use super::remote::{self, SendFail, Until};
use crate::codec::EncodeError;
use crate::{End, SendError, SendTimeoutError, TrySendError};

/// Where a sender's values go.
#[allow(clippy::large_enum_variant)] // one per half; boxing adds a pointer chase per call
pub(super) enum Mode<T> {
    /// Into the in-process queue (the receiver is in this process).
    Local(Arc<Queue<T>>),
    /// Encoded, over a byte half.
    Remote {
        tx: crate::Sender,
        /// The encode buffer, kept between sends.
        scratch: remote::Scratch,
    },
    /// Taken into the message being encoded, as handle `index`.
    Moved(u32),
    /// Turned into its byte half.
    Gone,
}

/// The sending half of a typed channel, made by [`channel`](super::channel)
/// or [`Sender::from_bytes`].
///
/// While its receiver is in this process, [`send`](Sender::send) moves the
/// value into a queue: nothing is encoded or copied. Once either half has
/// gone to another process (inside a message, or as a byte half), values
/// are encoded (see [`crate::typed`]) and travel through shared memory.
///
/// A sender can go to another process inside a message: make it a field
/// of the value you send (it travels as a handle). If its receiver left
/// earlier with values still being forwarded to it, the send that carries
/// the sender waits until they have gone (so they stay ahead of the
/// sender's own).
pub struct Sender<T> {
    pub(super) mode: RefCell<Mode<T>>,
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode.try_borrow().as_deref() {
            Ok(Mode::Local(_)) => "in-process",
            Ok(Mode::Remote { .. }) => "to another process",
            Ok(Mode::Moved(_) | Mode::Gone) => "moved",
            Err(_) => "busy",
        };
        f.debug_struct("Sender").field("mode", &mode).finish()
    }
}

impl<T: Serialize + Send + 'static> Sender<T> {
    /// Sends `value`, waiting while a pipe to another process is full.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<(u32, String)>(16)?;
    /// tx.send((1, "one".into()))?;
    /// assert_eq!(rx.recv()?, (1, "one".to_string()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendError::Disconnected`] if the receiver is gone (the value is
    /// dropped); [`SendError::Encode`] if the value cannot be encoded for
    /// another process; the rest as [`crate::Sender::send`].
    pub fn send(&self, value: T) -> Result<(), SendError> {
        self.send_until(value, Until::Sent).map_err(SendError::from)
    }

    /// Sends `value` if there is room now.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] if a pipe to another process has no room now;
    /// the rest as [`Sender::send`].
    pub fn try_send(&self, value: T) -> Result<(), TrySendError> {
        self.send_until(value, Until::Now)
            .map_err(TrySendError::from)
    }

    /// Sends `value`, waiting at most `timeout` for room.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] if there was no room in time; the rest
    /// as [`Sender::send`].
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError> {
        self.send_until(value, Until::Deadline(Instant::now() + timeout))
            .map_err(SendTimeoutError::from)
    }

    /// Sends a copy of `*value`, which the caller keeps (and its buffers
    /// with it): to another process the value is encoded from the
    /// reference, with no clone; in one process it is cloned, since the
    /// queue moves values.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<String>(16)?;
    /// let text = "kept".to_string();
    /// tx.send_ref(&text)?;
    /// assert_eq!(rx.recv()?, text);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Sender::send`].
    pub fn send_ref(&self, value: &T) -> Result<(), SendError>
    where
        T: Clone,
    {
        if let Mode::Remote { tx, scratch } = &mut *self.mode.borrow_mut() {
            return remote::send(tx, scratch, value, Until::Sent).map_err(SendError::from);
        }
        self.send(value.clone())
    }

    fn send_until(&self, value: T, until: Until) -> Result<(), SendFail> {
        let mut value = Some(value);
        loop {
            let mut mode = self.mode.borrow_mut();
            match &mut *mode {
                Mode::Local(queue) => {
                    let mut state = queue.lock();
                    match state.receiver {
                        Presence::Here if queue.is_full(&state) => {
                            let deadline = match until {
                                Until::Now => return Err(SendFail::Full),
                                Until::Sent => None,
                                Until::Deadline(d) if Instant::now() >= d => {
                                    return Err(SendFail::Timeout);
                                }
                                Until::Deadline(d) => Some(d),
                            };
                            queue.wait_for_room(state, deadline);
                        }
                        Presence::Here => {
                            state.items.extend(value.take());
                            let sleeping = queue.changed(&mut state);
                            drop(state);
                            queue.wake(sleeping);
                            return Ok(());
                        }
                        Presence::Dropped => return Err(SendFail::Send(SendError::Disconnected)),
                        Presence::Moved => match state.forward.take() {
                            // Still forwarding what was queued: join the end.
                            None => {
                                state.items.extend(value.take());
                                return Ok(());
                            }
                            Some(tx) => {
                                drop(state);
                                *mode = Mode::Remote {
                                    tx,
                                    scratch: remote::Scratch::default(),
                                };
                            }
                        },
                    }
                }
                Mode::Remote { tx, scratch } => {
                    let value = value.take().expect("sent once");
                    return remote::send(tx, scratch, &value, until);
                }
                Mode::Moved(_) | Mode::Gone => {
                    return Err(SendFail::Send(SendError::Disconnected));
                }
            }
        }
    }

    /// A typed sender over a byte half (for example one half of the pipe
    /// [`crate::spawn`] gives, or one that came in a [`crate::Message`]).
    /// Values are encoded; the receiver must be a typed receiver of the
    /// same `T`.
    pub fn from_bytes(tx: crate::Sender) -> Self {
        Self {
            mode: RefCell::new(Mode::Remote {
                tx,
                scratch: remote::Scratch::default(),
            }),
        }
    }

    /// See [`Duplex::split`](super::Duplex::split).
    pub(super) fn unjoin(&self) {
        if let Mode::Remote { tx, .. } = &mut *self.mode.borrow_mut() {
            tx.unjoin();
        }
    }

    /// The byte half this sender sends through (made now if the receiver is
    /// in this process), to send to another process by hand, for example
    /// with [`crate::Sender::send_with`].
    ///
    /// # Errors
    ///
    /// [`EncodeError::Handle`] if the pipe cannot be made (out of memory or
    /// descriptors); the sender is then unchanged.
    pub fn into_bytes(self) -> Result<crate::Sender, EncodeError> {
        self.take_bytes()
    }

    /// Takes the byte half out, leaving `Gone` (or the mode unchanged on
    /// an error).
    fn take_bytes(&self) -> Result<crate::Sender, EncodeError> {
        let mut mode = self.mode.borrow_mut();
        match std::mem::replace(&mut *mode, Mode::Gone) {
            Mode::Local(queue) => match moving::sender_leaves(&queue) {
                Ok(tx) => Ok(tx),
                Err(e) => {
                    *mode = Mode::Local(queue);
                    Err(e)
                }
            },
            Mode::Remote { tx, .. } => Ok(tx),
            other @ (Mode::Moved(_) | Mode::Gone) => {
                *mode = other;
                Err(EncodeError::Handle("this sender has already moved".into()))
            }
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Mode::Local(queue) = self.mode.get_mut() {
            let mut state = queue.lock();
            state.sender = Presence::Dropped;
            let sleeping = queue.changed(&mut state);
            drop(state);
            queue.wake(sleeping);
        }
    }
}

impl<T: Serialize + Send + 'static> Serialize for Sender<T> {
    /// A sender inside a value travels as a handle; it can be serialized
    /// only by a ferry typed send.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Mode::Moved(index) = *self.mode.borrow() {
            return serializer.serialize_u32(index);
        }
        handles::room().map_err(serde::ser::Error::custom)?;
        let tx = self.take_bytes().map_err(serde::ser::Error::custom)?;
        let index = handles::push_end(End::Sender(tx));
        *self.mode.borrow_mut() = Mode::Moved(index);
        serializer.serialize_u32(index)
    }
}

impl<'de, T: Serialize + Send + 'static> Deserialize<'de> for Sender<T> {
    /// Claims the sending half the message carried under this handle.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let index = u32::deserialize(deserializer)?;
        match handles::claim(index).map_err(serde::de::Error::custom)? {
            End::Sender(tx) => Ok(Self::from_bytes(tx)),
            _ => Err(serde::de::Error::custom(format!(
                "handle {index} is not a sending half"
            ))),
        }
    }
}
