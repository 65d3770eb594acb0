//! The typed sending half.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::{SendError, SendFailure, SendTimeoutError, TrySendError};
use super::handles;
use super::moving;
use super::queue::{Presence, Queue};
use super::remote::{self, SendFail, Until};
use crate::api::channel::Handle;
use crate::api::codec::EncodeError;
use crate::base::sync::{AtomicUsize, Ordering};

/// Where a sender's values go.
#[allow(clippy::large_enum_variant)] // one per half; boxing adds a pointer chase per call
pub(super) enum Mode<T> {
    /// Into the in-process queue (the receiver is in this process).
    Local(Arc<Queue<T>>),
    /// Encoded, over a byte half.
    Remote {
        tx: crate::api::channel::Sender,
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
/// are encoded (see [`crate::api::typed`]) and travel through shared memory.
///
/// A sender can go to another process inside a message: make it a field
/// of the value you send (it travels as a handle). If its receiver left
/// earlier with values still being forwarded to it, the send that carries
/// the sender waits until they have gone (so they stay ahead of the
/// sender's own).
///
/// It is `Clone` and `Sync`: many threads of this process can send into one
/// receiver, each through a clone (or one shared sender), each thread's
/// values arriving in the order it sent them. The clones share one path to
/// the receiver (a lock: one send at a time), and the receiver sees
/// [`Disconnected`](super::RecvError::Disconnected) once the last clone is
/// gone and every value has been received. Once either half has gone to
/// another process, a clone can go too (inside a value): it travels as a
/// clone of its own, with a ring of its own to the receiver (see the byte
/// [`Sender`](crate::Sender#clones)). So can one while both halves are in
/// this process: the clones then stop sharing their in-process queue and
/// send over a pipe to the receiver (after what they queued), as a sender
/// that has travelled does.
///
/// ```
/// let (tx, rx) = ferry::channel::<(u32, u32)>(400).unwrap();
/// let threads: Vec<_> = (0..4)
///     .map(|id| {
///         let tx = tx.clone();
///         std::thread::spawn(move || (0..100).for_each(|n| tx.send((id, n)).unwrap()))
///     })
///     .collect();
/// drop(tx);
/// threads.into_iter().for_each(|t| t.join().unwrap());
/// assert_eq!(rx.iter().count(), 400);
/// ```
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for Sender<T> {
    /// Another sender into the same receiver.
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// What the clones of one sender share: where values go, behind a lock
/// that knows which thread holds it, so that a send made on the same sender
/// from inside the `Serialize` of a value it is sending is refused instead
/// of waiting for itself.
pub(super) struct Shared<T> {
    /// The in-process queue, if the sender started in-process: while both
    /// halves are still here, a send takes only the queue's own lock (as
    /// fast as a sender without clones), not `mode`'s.
    queue: Option<Arc<Queue<T>>>,
    mode: Mutex<Mode<T>>,
    /// [`thread_token`] of the thread holding `mode`, 0 while none does.
    holder: AtomicUsize,
}

/// A number no other live thread has: the address of a thread-local.
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|token| std::ptr::from_ref(token) as usize)
}

/// `Shared::mode`, held.
struct Held<'a, T> {
    mode: MutexGuard<'a, Mode<T>>,
    holder: &'a AtomicUsize,
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        // Relaxed: only this thread ever stores its own token, so only its
        // own reads can see it; the mutex orders everything else.
        self.holder.store(0, Ordering::Relaxed);
    }
}

impl<T> std::ops::Deref for Held<'_, T> {
    type Target = Mode<T>;
    fn deref(&self) -> &Mode<T> {
        &self.mode
    }
}

impl<T> std::ops::DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut Mode<T> {
        &mut self.mode
    }
}

impl<T> Shared<T> {
    fn new(mode: Mode<T>) -> Arc<Self> {
        let queue = match &mode {
            Mode::Local(queue) => Some(Arc::clone(queue)),
            _ => None,
        };
        Arc::new(Self {
            queue,
            mode: Mutex::new(mode),
            holder: AtomicUsize::new(0),
        })
    }

    /// Takes the lock, waiting while another thread holds it; `None` if
    /// this thread holds it already (a send from inside a send).
    fn lock(&self) -> Option<Held<'_, T>> {
        let me = thread_token();
        // Relaxed: a thread sees its own token here only if it stored it
        // itself and has not released the lock (see `Held::drop`).
        if self.holder.load(Ordering::Relaxed) == me {
            return None;
        }
        // A panic in a value's `Serialize` poisons the lock; the mode is
        // still whole (a send changes it only between calls it makes).
        let mode = self.mode.lock().unwrap_or_else(PoisonError::into_inner);
        self.holder.store(me, Ordering::Relaxed);
        Some(Held {
            mode,
            holder: &self.holder,
        })
    }

    /// Takes the lock if no thread holds it.
    fn try_lock(&self) -> Option<Held<'_, T>> {
        let mode = match self.mode.try_lock() {
            Ok(mode) => mode,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        self.holder.store(thread_token(), Ordering::Relaxed);
        Some(Held {
            mode,
            holder: &self.holder,
        })
    }
}

impl<T> Drop for Shared<T> {
    /// The last clone is gone: the receiver here sees it once it has
    /// drained the queue.
    fn drop(&mut self) {
        let mode = self.mode.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Mode::Local(queue) = mode {
            let mut state = queue.lock();
            state.sender = Presence::Dropped;
            let sleeping = queue.changed(&mut state);
            drop(state);
            queue.wake(sleeping);
        }
    }
}

impl<T> std::fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.shared.mode.try_lock().as_deref() {
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
    /// Every error holds the value, whole (with any channel half in it put
    /// back): [`SendError::Disconnected`] if the receiver is gone;
    /// [`SendError::Failed`] with [`SendFailure::Encode`] if the value
    /// cannot be encoded for another process, [`SendFailure::Reentrant`] for
    /// a send made from inside the `Serialize` of a value this thread is
    /// sending on this sender, the rest as [`crate::Sender::send`].
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.send_until(value, Until::Sent)
            .map_err(|(fail, value)| fail.send_error(value))
    }

    /// Sends `value` if there is room now.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// drop(rx);
    /// let e = tx.try_send(1).unwrap_err();
    /// assert!(e.is_disconnected());
    /// assert_eq!(e.into_inner(), 1);
    /// ```
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] (holding the value) if a pipe to another
    /// process has no room now; the rest as [`Sender::send`].
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.send_until(value, Until::Now)
            .map_err(|(fail, value)| fail.try_send_error(value))
    }

    /// Sends `value`, waiting at most `timeout` for room.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// tx.send_timeout(1, std::time::Duration::from_secs(1))?;
    /// assert_eq!(rx.recv()?, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] (holding the value) if there was no
    /// room in time; the rest as [`Sender::send`].
    pub fn send_timeout(&self, value: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.send_until(value, Until::Deadline(Instant::now() + timeout))
            .map_err(|(fail, value)| fail.send_timeout_error(value))
    }

    /// Sends a copy of `*value`, which the caller keeps (and its buffers
    /// with it). The copy is made through the format, in one process as
    /// to another: to another process the value is encoded from the
    /// reference; in one process it is encoded and decoded into the value
    /// the queue moves. So `T` need not be `Clone`: a descriptor field
    /// ([`Fd`](super::Fd)) is duplicated, and the caller keeps its own; a
    /// typed half inside the value is handed over, as any send hands it
    /// over (the caller's is left moved).
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
    /// As [`Sender::send`]; the error holds `()`, since the caller still
    /// has the value. A value that does not decode as it encoded (its
    /// `Serialize` and `Deserialize` disagree) is
    /// [`SendFailure::Encode`] in one process.
    pub fn send_ref(&self, value: &T) -> Result<(), SendError<()>>
    where
        T: serde::de::DeserializeOwned,
    {
        let Some(mut mode) = self.shared.lock() else {
            return Err(SendError::Failed((), SendFailure::Reentrant));
        };
        if let Mode::Remote { tx, scratch } = &mut *mode {
            return remote::send(tx, scratch, value, Until::Sent)
                .map_err(|fail| fail.send_error(()));
        }
        drop(mode);
        let copy = copy_through_format(value)
            .map_err(|e| SendError::Failed((), SendFailure::Encode(e)))?;
        self.send(copy).map_err(|e| match e {
            SendError::Disconnected(_) => SendError::Disconnected(()),
            SendError::Failed(_, failure) => SendError::Failed((), failure),
        })
    }

    /// Sends `value`; on failure, hands it back with what went wrong.
    fn send_until(&self, value: T, until: Until) -> Result<(), (SendFail, T)> {
        let mut value = Some(value);
        if self.send_local(&mut value) {
            return Ok(());
        }
        let Some(mut mode) = self.shared.lock() else {
            let value = value.expect("not sent");
            return Err((SendFail::Failed(SendFailure::Reentrant), value));
        };
        loop {
            match &mut *mode {
                Mode::Local(queue) => {
                    let mut state = queue.lock();
                    match state.receiver {
                        Presence::Here if queue.is_full(&state) => {
                            let deadline = match until {
                                Until::Now => {
                                    return Err((SendFail::Full, value.expect("not sent")));
                                }
                                Until::Sent => None,
                                Until::Deadline(d) if Instant::now() >= d => {
                                    return Err((SendFail::Timeout, value.expect("not sent")));
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
                        Presence::Dropped => break,
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
                    return match remote::send(tx, scratch, &value, until) {
                        Ok(()) => Ok(()),
                        Err(fail) => Err((fail, value)),
                    };
                }
                Mode::Moved(_) | Mode::Gone => break,
            }
        }
        Err((SendFail::Disconnected, value.expect("not sent")))
    }

    /// Moves `value` into the in-process queue if both halves are still in
    /// this process (then the mode is `Local`: a sender that leaves marks
    /// the queue under its lock, and a receiver that leaves does too).
    /// Otherwise leaves it to the caller.
    fn send_local(&self, value: &mut Option<T>) -> bool {
        let Some(queue) = &self.shared.queue else {
            return false;
        };
        let mut state = queue.lock();
        // A full queue is the slow path's (it waits for room, or says
        // `Full` or `Timeout` with the value).
        if state.sender != Presence::Here
            || state.receiver != Presence::Here
            || queue.is_full(&state)
        {
            return false;
        }
        state.items.extend(value.take());
        let sleeping = queue.changed(&mut state);
        drop(state);
        queue.wake(sleeping);
        true
    }

    /// A typed sender over a byte half (for example one half of the pipe
    /// [`crate::spawn`] gives, or one that came in a [`crate::Message`]).
    /// Values are encoded; the receiver must be a typed receiver of the
    /// same `T`.
    pub fn from_bytes(tx: crate::api::channel::Sender) -> Self {
        Self {
            shared: Shared::new(Mode::Remote {
                tx,
                scratch: remote::Scratch::default(),
            }),
        }
    }

    /// See [`typed::Pipe::split`](super::Pipe::split).
    pub(super) fn unjoin(&self) {
        if let Some(mut mode) = self.shared.lock()
            && let Mode::Remote { tx, .. } = &mut *mode
        {
            tx.unjoin();
        }
    }

    /// The byte half this sender sends through (made now if the receiver is
    /// in this process), to send to another process by hand, for example
    /// with [`crate::Sender::send_with`].
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    /// let clone = tx.clone();
    /// assert!(clone.into_bytes().is_err()); // `tx` is still here
    /// let bytes = tx.into_bytes()?;
    /// ferry::typed::Sender::<u8>::from_bytes(bytes).send(3)?;
    /// assert_eq!(rx.recv()?, 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`EncodeError::Handle`] if the pipe cannot be made (out of memory or
    /// descriptors), or if this sender has clones (they would lose their
    /// way to the receiver); this sender is then dropped, the clones are
    /// unchanged.
    pub fn into_bytes(self) -> Result<crate::api::channel::Sender, EncodeError> {
        if Arc::strong_count(&self.shared) > 1 {
            return Err(has_clones());
        }
        let mut mode = self.shared.lock().ok_or_else(busy)?;
        take_bytes(&mut mode)
    }
}

impl<T> Sender<T> {
    /// A sender into the in-process queue `queue`.
    pub(super) fn local(queue: Arc<Queue<T>>) -> Self {
        Self {
            shared: Shared::new(Mode::Local(queue)),
        }
    }
}

/// Why a sender with clones gives no byte half: the clones send through
/// it too.
fn has_clones() -> EncodeError {
    EncodeError::Handle(
        "this sender has clones, which send through its byte half too: drop them first, or send \
         a clone inside a value (it travels as a clone of its own)"
            .into(),
    )
}

/// Why a sender in use cannot travel.
fn busy() -> EncodeError {
    EncodeError::Handle("this sender is in use (sending) while it is being sent".into())
}

/// Takes the byte half out of `mode`, leaving `Gone` (or the mode
/// unchanged on an error).
fn take_bytes<T: Serialize + Send + 'static>(
    mode: &mut Mode<T>,
) -> Result<crate::api::channel::Sender, EncodeError> {
    match std::mem::replace(mode, Mode::Gone) {
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

impl<T: Serialize + Send + 'static> Serialize for Sender<T> {
    /// A sender inside a value travels as a handle; it can be serialized
    /// only by a ferry typed send, at most once per value. One with clones
    /// sends a clone of its byte half, which travels as a clone of its own
    /// (while the receiver is in this process, the clones first leave their
    /// shared queue for a byte pipe to it). If the send fails, the sender
    /// is put back as it was (sending through the byte half it took, if it
    /// was in-process).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Never wait for the lock here: a thread sending on this sender
        // while another sends it could each wait for the other.
        let mut mode = self
            .shared
            .try_lock()
            .ok_or_else(|| serde::ser::Error::custom(busy()))?;
        if let Mode::Moved(index) = *mode {
            handles::name_again(index).map_err(serde::ser::Error::custom)?;
            return serializer.serialize_u32(index);
        }
        if Arc::strong_count(&self.shared) > 1 {
            // The clones here keep the byte half; a clone of it goes, and
            // travels as a clone of its own (see `Sender#clones` of the
            // byte layer). In-process clones share a queue, not a ring:
            // the queue's sender leaves it as one that travels does (its
            // values stay ahead, the receiver reads a byte pipe after
            // them), and the clones here send over that pipe's byte half
            // from now on.
            if let Mode::Local(queue) = &*mode {
                let queue = Arc::clone(queue);
                let tx = moving::sender_leaves(&queue).map_err(serde::ser::Error::custom)?;
                *mode = Mode::Remote {
                    tx,
                    scratch: remote::Scratch::default(),
                };
            }
            let Mode::Remote { tx, .. } = &*mode else {
                return Err(serde::ser::Error::custom(busy()));
            };
            // A copy, as a descriptor is: made on the encode's first pass,
            // named by the same index on a second.
            let tx = tx.clone();
            let index =
                handles::push_fd(|| Ok(Handle::Sender(tx))).map_err(serde::ser::Error::custom)?;
            return serializer.serialize_u32(index);
        }
        handles::room().map_err(serde::ser::Error::custom)?;
        let tx = take_bytes(&mut mode).map_err(serde::ser::Error::custom)?;
        let shared = Arc::clone(&self.shared);
        let restore = Box::new(move |end| {
            if let Handle::Sender(tx) = end
                && let Some(mut mode) = shared.try_lock()
                && matches!(*mode, Mode::Moved(_))
            {
                *mode = Mode::Remote {
                    tx,
                    scratch: remote::Scratch::default(),
                };
            }
        });
        let index = handles::push_end(Handle::Sender(tx), Some(restore));
        *mode = Mode::Moved(index);
        serializer.serialize_u32(index)
    }
}

impl<'de, T: Serialize + Send + 'static> Deserialize<'de> for Sender<T> {
    /// Claims the sending half the message carried under this handle.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let index = u32::deserialize(deserializer)?;
        match handles::claim(index).map_err(serde::de::Error::custom)? {
            Handle::Sender(tx) => Ok(Self::from_bytes(tx)),
            _ => Err(serde::de::Error::custom(format!(
                "handle {index} is not a sending half"
            ))),
        }
    }
}

/// A copy of `value` made by encoding it and decoding the bytes, with the
/// handles the encode collected (duplicated descriptors, halves taken out
/// of the value) claimed by the decode, all within this process.
fn copy_through_format<T: Serialize + serde::de::DeserializeOwned>(
    value: &T,
) -> Result<T, EncodeError> {
    let (bytes, mut out) = handles::encoding(|| crate::api::codec::encode(value));
    let bytes = match bytes {
        Ok(bytes) => bytes,
        Err(e) => {
            out.restore();
            out.finish();
            return Err(e);
        }
    };
    let ends = std::mem::take(&mut out.ends)
        .into_iter()
        .map(crate::api::channel::Arrived::Handle)
        .collect();
    let (copy, _unclaimed) =
        handles::decoding(ends, None, || crate::api::codec::decode::<T>(&bytes));
    out.finish();
    copy.map_err(|e| EncodeError::Custom(format!("the value did not decode as it encoded: {e}")))
}
