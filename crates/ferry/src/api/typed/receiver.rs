//! The typed receiving half.

use std::cell::{Cell, OnceCell, RefCell};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::{RecvError, RecvTimeoutError, TryRecvError};
use super::handles;
use super::moving;
use super::queue::{Presence, Queue};
use super::remote::{self, RecvFail};
use crate::api::channel::Handle;
use crate::api::channel::{Descriptor, RecvFault, Selectable, Source};
use crate::api::codec::EncodeError;
use crate::base::sys::Doorbell;

/// Where a receiver's values come from.
#[allow(clippy::large_enum_variant)] // one per half; boxing adds a pointer chase per call
pub(super) enum Mode<T> {
    /// The in-process queue (the sender is in this process, or was).
    Local(Arc<Queue<T>>),
    /// Decoded, from a byte half (received into `buf`, kept between
    /// receives).
    Remote {
        rx: crate::api::channel::Receiver,
        buf: Vec<u8>,
    },
    /// Taken into the message being encoded, as handle `index`.
    Moved(u32),
    /// Turned into its byte half.
    Gone,
}

impl<T> Mode<T> {
    fn remote(rx: crate::api::channel::Receiver) -> Self {
        Self::Remote {
            rx,
            buf: Vec::new(),
        }
    }
}

/// The receiving half of a typed channel, made by
/// [`channel`](super::channel) or [`Receiver::from_bytes`].
///
/// A message from another process that does not decode as `T` gives
/// [`RecvError::Decode`] (naming `T`, the byte offset and the reason);
/// that message is dropped, with any halves it carried, and the next
/// receive goes on with the next message.
pub struct Receiver<T> {
    pub(super) mode: RefCell<Mode<T>>,
    ready: Readiness,
}

/// What waiting by descriptor keeps: the doorbells handed out (so a
/// descriptor lent by [`Receiver::ready_fd`] stays open as long as the
/// receiver), and whether a receive has returned the end.
#[derive(Default)]
struct Readiness {
    /// The in-process queue's doorbell.
    local: OnceCell<Arc<Doorbell>>,
    /// The byte half's doorbell, once values come from another process.
    remote: OnceCell<Arc<Doorbell>>,
    /// A receive returned `Disconnected` or `Protocol`.
    ended: Cell<bool>,
}

impl<T> Receiver<T> {
    /// A receiver of the in-process queue `queue`.
    pub(super) fn local(queue: Arc<Queue<T>>) -> Self {
        Self {
            mode: RefCell::new(Mode::Local(queue)),
            ready: Readiness::default(),
        }
    }
}

/// Whether a receive with this deadline is a `try_`: it arms the
/// readiness descriptor when it finds nothing, as the byte half's does.
fn is_try(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| d <= Instant::now())
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mode = match self.mode.try_borrow().as_deref() {
            Ok(Mode::Local(_)) => "in-process",
            Ok(Mode::Remote { .. }) => "from another process",
            Ok(Mode::Moved(_) | Mode::Gone) => "moved",
            Err(_) => "busy",
        };
        f.debug_struct("Receiver").field("mode", &mode).finish()
    }
}

/// A receive's failure, by kind.
enum Fail {
    Empty,
    Disconnected,
    Fault(RecvFail),
}

impl From<Fail> for RecvError {
    fn from(fail: Fail) -> Self {
        match fail {
            // Never made by a receive that waits as long as it takes.
            Fail::Empty => RecvError::Io(std::io::ErrorKind::TimedOut.into()),
            Fail::Disconnected => RecvError::Disconnected,
            Fail::Fault(RecvFail::Recv(fault)) => fault.into(),
            Fail::Fault(RecvFail::Decode(e)) => RecvError::Decode(e),
        }
    }
}

impl From<Fail> for TryRecvError {
    fn from(fail: Fail) -> Self {
        match fail {
            Fail::Empty => TryRecvError::Empty,
            Fail::Fault(RecvFail::Recv(fault)) => fault.into(),
            other => RecvError::from(other).into(),
        }
    }
}

impl From<Fail> for RecvTimeoutError {
    fn from(fail: Fail) -> Self {
        match fail {
            Fail::Empty => RecvTimeoutError::Timeout,
            Fail::Fault(RecvFail::Recv(fault)) => fault.into(),
            other => RecvError::from(other).into(),
        }
    }
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Receiver<T> {
    /// Receives the next value, waiting as long as it takes.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<Vec<String>>(16)?;
    /// tx.send(vec!["a".into(), "b".into()])?;
    /// drop(tx);
    /// assert_eq!(rx.recv()?, ["a", "b"]);
    /// assert!(matches!(rx.recv(), Err(ferry::typed::RecvError::Disconnected)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvError::Disconnected`] once the sender is gone and every value
    /// has been received; [`RecvError::Decode`] for a message that is not a
    /// `T`; the rest as [`crate::Receiver::recv`].
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(RecvError::from)
    }

    /// Receives the next value if one is waiting.
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] if none is; the rest as [`Receiver::recv`].
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        self.recv_until(Some(Instant::now()))
            .map_err(TryRecvError::from)
    }

    /// Receives the next value, waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] if none came in time; the rest as
    /// [`Receiver::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(Instant::now() + timeout))
            .map_err(RecvTimeoutError::from)
    }

    /// The values, received one by one until the sender is gone (or a
    /// receive fails).
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(|| self.recv().ok())
    }

    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, Fail> {
        match self.recv_to(deadline, None)? {
            Some(value) => Ok(value),
            // Without a place, a value is always returned.
            None => Err(Fail::Disconnected),
        }
    }

    /// Receives the next value, waiting as long as it takes, over `place`:
    /// from another process the message is decoded with serde's
    /// `deserialize_in_place`, so buffers `place` already owns (a
    /// [`ByteBuf`](super::ByteBuf) field's, a `Vec`'s, a `String`'s) are reused
    /// rather than allocated again, where the type's `Deserialize` supports
    /// it (with `serde_derive`'s `deserialize_in_place` feature for derived
    /// types). In one process the value is moved into `place`.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<Vec<u32>>(16)?;
    /// let mut place = Vec::with_capacity(16);
    /// tx.send(vec![1, 2, 3])?;
    /// rx.recv_into(&mut place)?;
    /// assert_eq!(place, [1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`]; on [`RecvError::Decode`] `place` holds a
    /// valid but unspecified value.
    pub fn recv_into(&self, place: &mut T) -> Result<(), RecvError> {
        match self.recv_to(None, Some(place)) {
            Ok(Some(value)) => {
                *place = value;
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(fail) => Err(fail.into()),
        }
    }

    /// Receives into `place` if it is given and the message is decoded
    /// (then `None`), else returns the value.
    fn recv_to(&self, deadline: Option<Instant>, place: Option<&mut T>) -> Result<Option<T>, Fail> {
        let received = self.receive(deadline, place);
        if let Err(
            Fail::Disconnected
            | Fail::Fault(RecvFail::Recv(RecvFault::Disconnected | RecvFault::Protocol(_))),
        ) = &received
        {
            self.ready.ended.set(true);
        }
        received
    }

    fn receive(
        &self,
        deadline: Option<Instant>,
        mut place: Option<&mut T>,
    ) -> Result<Option<T>, Fail> {
        loop {
            let mut mode = self.mode.borrow_mut();
            match &mut *mode {
                Mode::Local(queue) => {
                    let mut state = queue.wait_until(deadline, |state| {
                        !state.items.is_empty() || state.sender != Presence::Here
                    });
                    if let Some(value) = state.items.pop_front() {
                        queue.room_made(&mut state);
                        return Ok(Some(value));
                    }
                    match state.sender {
                        Presence::Here => {
                            if is_try(deadline) {
                                queue.arm(&mut state, true);
                            }
                            return Err(Fail::Empty);
                        }
                        Presence::Dropped => return Err(Fail::Disconnected),
                        Presence::Moved => {
                            let rx = state.incoming.take();
                            drop(state);
                            match rx {
                                Some(rx) => *mode = Mode::remote(rx),
                                None => return Err(Fail::Disconnected),
                            }
                        }
                    }
                }
                Mode::Remote { rx, buf } => {
                    let mut armed = false;
                    loop {
                        let received = match place.as_deref_mut() {
                            Some(place) => {
                                remote::recv_into(rx, buf, deadline, place).map(|()| None)
                            }
                            None => remote::recv(rx, buf, deadline).map(Some),
                        };
                        match received {
                            // A `try_` that found nothing arms the
                            // descriptor and looks once more, as the byte
                            // half's does.
                            Err(RecvFail::Recv(RecvFault::Timeout))
                                if !armed && is_try(deadline) && self.arm_remote(rx) =>
                            {
                                armed = true;
                            }
                            Err(RecvFail::Recv(RecvFault::Timeout)) => return Err(Fail::Empty),
                            Err(other) => return Err(Fail::Fault(other)),
                            Ok(value) => return Ok(value),
                        }
                    }
                }
                Mode::Moved(_) | Mode::Gone => return Err(Fail::Disconnected),
            }
        }
    }

    /// A descriptor that becomes readable when a value (or the sender's
    /// end) may be waiting, for a poll loop of the caller's own (epoll,
    /// mio, tokio's `AsyncFd`), as [`crate::Receiver::ready_fd`]: call
    /// [`Receiver::try_recv`] until it says `Empty` (which arms the
    /// descriptor), then wait for the descriptor to be readable, and
    /// repeat. In one process it is the queue's own doorbell, rung by a
    /// send only while armed (a plain send pays nothing for it).
    ///
    /// If the sender leaves this process, values come over a pipe with a
    /// descriptor of its own: after a `try_recv` says `Empty`, call
    /// `ready_fd` again and wait on what it returns (a [`Select`](crate::Select)
    /// does this itself). A descriptor once returned stays open as long as
    /// the receiver. Never read or write the descriptor itself.
    ///
    /// ```
    /// use rustix::event::{PollFd, PollFlags, poll};
    /// let (tx, rx) = ferry::channel::<String>(16).unwrap();
    /// let fd = rx.ready_fd()?;
    /// assert!(matches!(rx.try_recv(), Err(ferry::typed::TryRecvError::Empty))); // arms it
    /// tx.send("ping".into())?; //                                          rings it
    /// let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    /// assert_eq!(poll(&mut fds, None)?, 1);
    /// assert_eq!(rx.try_recv()?, "ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`crate::Receiver::ready_fd`]; `NotConnected` if this receiver
    /// has moved.
    pub fn ready_fd(&self) -> std::io::Result<BorrowedFd<'_>> {
        let (bell, local) = self.descriptor()?;
        let slot = match local {
            true => &self.ready.local,
            false => &self.ready.remote,
        };
        Ok(slot.get_or_init(|| bell).as_fd())
    }

    /// Arms the byte half's descriptor for a `try_` that found nothing;
    /// whether it did. A receiver that waited on the queue's descriptor
    /// before its sender left this process gets the byte half's made now,
    /// so the caller's next `ready_fd` returns one that is armed.
    fn arm_remote(&self, rx: &crate::api::channel::Receiver) -> bool {
        if self.ready.local.get().is_some()
            && self.ready.remote.get().is_none()
            && let Ok(bell) = rx.doorbell()
        {
            let _ = self.ready.remote.set(bell);
        }
        rx.arm()
    }

    /// The doorbell that rings for this receiver now, and whether it is
    /// the in-process queue's.
    fn descriptor(&self) -> std::io::Result<(Arc<Doorbell>, bool)> {
        match &*self.mode.borrow() {
            Mode::Local(queue) => Ok((queue.doorbell()?, true)),
            Mode::Remote { rx, .. } => Ok((rx.doorbell()?, false)),
            Mode::Moved(_) | Mode::Gone => Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "this receiver has moved",
            )),
        }
    }

    /// See [`typed::Pipe::split`](super::Pipe::split).
    pub(super) fn unjoin(&self) {
        if let Mode::Remote { rx, .. } = &mut *self.mode.borrow_mut() {
            rx.unjoin();
        }
    }

    /// A typed receiver over a byte half; the sender must be a typed sender
    /// of the same `T`.
    pub fn from_bytes(rx: crate::api::channel::Receiver) -> Self {
        Self {
            mode: RefCell::new(Mode::remote(rx)),
            ready: Readiness::default(),
        }
    }

    /// The byte half this receiver reads (made now if the sender is in
    /// this process; values queued here then follow it, in order), to send
    /// to another process by hand.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Handle`] if the pipe cannot be made, or if the sender
    /// has left this process while values it sent are still queued here;
    /// the receiver is then unchanged.
    pub fn into_bytes(self) -> Result<crate::api::channel::Receiver, EncodeError> {
        self.take_bytes()
    }

    fn take_bytes(&self) -> Result<crate::api::channel::Receiver, EncodeError> {
        let mut mode = self.mode.borrow_mut();
        match std::mem::replace(&mut *mode, Mode::Gone) {
            Mode::Local(queue) => match moving::receiver_leaves(&queue) {
                Ok(rx) => Ok(rx),
                Err(e) => {
                    *mode = Mode::Local(queue);
                    Err(e)
                }
            },
            Mode::Remote { rx, .. } => Ok(rx),
            other @ (Mode::Moved(_) | Mode::Gone) => {
                *mode = other;
                Err(EncodeError::Handle(
                    "this receiver has already moved".into(),
                ))
            }
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        if let Mode::Local(queue) = self.mode.get_mut() {
            let mut state = queue.lock();
            state.receiver = Presence::Dropped;
            queue.room_made(&mut state);
            let items = std::mem::take(&mut state.items);
            let incoming = state.incoming.take();
            drop(state);
            // The values are dropped without the lock held (their drops
            // may touch other channels).
            drop(items);
            drop(incoming);
        }
    }
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Serialize for Receiver<T> {
    /// A receiver inside a value travels as a handle; it can be serialized
    /// only by a ferry typed send.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Mode::Moved(index) = *self.mode.borrow() {
            handles::name_again(index).map_err(serde::ser::Error::custom)?;
            return serializer.serialize_u32(index);
        }
        handles::room().map_err(serde::ser::Error::custom)?;
        let rx = self.take_bytes().map_err(serde::ser::Error::custom)?;
        let index = handles::push_end(Handle::Receiver(rx), None);
        *self.mode.borrow_mut() = Mode::Moved(index);
        serializer.serialize_u32(index)
    }
}

impl<'de, T: Serialize + DeserializeOwned + Send + 'static> Deserialize<'de> for Receiver<T> {
    /// Claims the receiving half the message carried under this handle.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let index = u32::deserialize(deserializer)?;
        match handles::claim(index).map_err(serde::de::Error::custom)? {
            Handle::Receiver(rx) => Ok(Self::from_bytes(rx)),
            _ => Err(serde::de::Error::custom(format!(
                "handle {index} is not a receiving half"
            ))),
        }
    }
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Source for Receiver<T> {
    fn source_fd(&self) -> std::io::Result<Descriptor> {
        Ok(self.descriptor()?.0 as Descriptor)
    }

    fn source_ready(&self) -> bool {
        match self.mode.try_borrow().as_deref() {
            Ok(Mode::Local(queue)) => {
                let state = queue.lock();
                !state.items.is_empty() || state.sender != Presence::Here
            }
            Ok(Mode::Remote { rx, .. }) => rx.is_ready(),
            // Moved, or (impossible from a set) in a receive.
            _ => false,
        }
    }

    fn source_arm(&self, rung: bool) {
        match self.mode.try_borrow().as_deref() {
            Ok(Mode::Local(queue)) => {
                queue.arm(&mut queue.lock(), rung);
            }
            Ok(Mode::Remote { rx, .. }) => rx.source_arm(rung),
            _ => {}
        }
    }

    fn source_disarm(&self) {
        match self.mode.try_borrow().as_deref() {
            Ok(Mode::Local(queue)) => queue.disarm(),
            Ok(Mode::Remote { rx, .. }) => rx.source_disarm(),
            _ => {}
        }
    }

    fn source_ended(&self) -> bool {
        self.ready.ended.get()
    }
}

/// A typed receiver joins a [`Select`](crate::Select) as a byte one does.
impl<T: Serialize + DeserializeOwned + Send + 'static> Selectable for Receiver<T> {}

/// A typed [`Receiver`] for async code on tokio (the `tokio` feature):
/// it sleeps in tokio's own reactor on the receiver's readiness
/// descriptor (see [`Receiver::ready_fd`]), with no helper thread, and
/// follows the sender if it leaves this process. Cancel safety as the
/// byte [`AsyncReceiver`](crate::AsyncReceiver)'s: a value is taken only
/// in the poll that returns it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (tx, rx) = ferry::channel::<String>(16).unwrap();
/// let mut rx = rx.into_async()?;
/// let reader = tokio::spawn(async move { rx.recv().await });
/// tx.send("hello".into())?;
/// assert_eq!(reader.await??, "hello");
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "tokio")]
pub struct AsyncReceiver<T> {
    rx: Receiver<T>,
    bell: ::tokio::io::unix::AsyncFd<crate::api::channel::Bell>,
}

#[cfg(feature = "tokio")]
impl<T> std::fmt::Debug for AsyncReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncReceiver")
            .field("rx", &self.rx)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "tokio")]
impl<T: Serialize + DeserializeOwned + Send + 'static> Receiver<T> {
    /// This receiver for async code on tokio ([`AsyncReceiver`]). Call it
    /// inside a tokio runtime (with its IO driver enabled).
    ///
    /// # Errors
    ///
    /// As [`Receiver::ready_fd`]; also outside a tokio runtime, or if the
    /// runtime refuses to register the descriptor.
    ///
    /// # Panics
    ///
    /// As tokio's `AsyncFd`, if the runtime was built without its IO driver
    /// (`enable_io`).
    pub fn into_async(self) -> std::io::Result<AsyncReceiver<T>> {
        let (bell, _) = self.descriptor()?;
        let bell = crate::api::channel::register(&(bell as Descriptor), false)?;
        Ok(AsyncReceiver { rx: self, bell })
    }
}

#[cfg(feature = "tokio")]
impl<T: Serialize + DeserializeOwned + Send + 'static> AsyncReceiver<T> {
    /// Receives the next value, suspending the task until one arrives.
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next value: `Ready` with it (or the error that ends
    /// the stream), or `Pending` with the task woken when one may be there.
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<T, RecvError>> {
        use std::task::Poll;
        loop {
            match self.rx.try_recv() {
                Ok(value) => return Poll::Ready(Ok(value)),
                Err(TryRecvError::Empty) => {} // armed: a send rings now
                Err(e) => return Poll::Ready(Err(woken_error(e))),
            }
            // The sender may have left this process: values then come on
            // a pipe with a descriptor of its own.
            let now = match self.rx.descriptor() {
                Ok((bell, _)) => bell as Descriptor,
                Err(e) => return Poll::Ready(Err(RecvError::Io(e))),
            };
            if !self.bell.get_ref().is(&now) {
                match crate::api::channel::register(&now, false) {
                    Ok(bell) => self.bell = bell,
                    Err(e) => return Poll::Ready(Err(RecvError::Io(e))),
                }
                continue;
            }
            let mut guard = match std::task::ready!(self.bell.poll_read_ready(cx)) {
                Ok(guard) => guard,
                Err(e) => return Poll::Ready(Err(RecvError::Io(e))),
            };
            // The next `try_recv` clears the descriptor itself.
            guard.clear_ready();
        }
    }

    /// The receiver back, for blocking use.
    pub fn into_inner(self) -> Receiver<T> {
        self.rx.source_disarm();
        self.rx
    }
}

/// Values until the sender is gone: the stream ends (`None`) on
/// `Disconnected`; any other error is an item.
#[cfg(feature = "tokio")]
impl<T: Serialize + DeserializeOwned + Send + 'static> futures_core::Stream for AsyncReceiver<T> {
    type Item = Result<T, RecvError>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        match std::task::ready!(self.get_mut().poll_recv(cx)) {
            Err(RecvError::Disconnected) => std::task::Poll::Ready(None),
            other => std::task::Poll::Ready(Some(other)),
        }
    }
}

/// What an async receive reports for a `try_recv` error other than `Empty`
/// (`Empty` after a wake cannot reach here: it waits again).
#[cfg(feature = "tokio")]
fn woken_error(e: TryRecvError) -> RecvError {
    match e {
        TryRecvError::Disconnected => RecvError::Disconnected,
        TryRecvError::Protocol(p) => RecvError::Protocol(p),
        TryRecvError::Io(e) => RecvError::Io(e),
        TryRecvError::Decode(e) => RecvError::Decode(e),
        TryRecvError::Empty => RecvError::Io(std::io::Error::other("empty after a wake")),
    }
}
