//! Receiving and sending on tokio, without a helper thread (the `tokio`
//! feature).
//!
//! An [`AsyncReceiver`] registers its receiver's doorbell (see
//! [`Receiver::ready_fd`]) with tokio's reactor through
//! [`AsyncFd`](::tokio::io::unix::AsyncFd): a task waiting for a message
//! sleeps in the runtime's own epoll, and the sending process wakes it by
//! ringing the doorbell. No thread, queue or copy stands between the ring
//! and the task. An [`AsyncSender`] does the same for room in a full pipe,
//! so a slow receiver suspends the sending task: nothing is buffered
//! without bound.
//!
//! Cancel safety: [`AsyncReceiver::recv`] takes a message only in the poll
//! that returns it, so a dropped `recv` future loses nothing (a message
//! that was arriving in pieces stays with the receiver for the next call).
//! [`AsyncSender::send`] sends the whole message in the poll that returns
//! `Ok`, or nothing.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (a, b) = ferry::pipe()?;
//! let (tx, _) = a.split();
//! let (_, rx) = b.split();
//! let (tx, rx) = (tx.into_async()?, rx.into_async()?);
//! let reader = tokio::spawn(async move { rx.recv().await });
//! tx.send(b"hello").await?;
//! assert_eq!(reader.await??, b"hello");
//! # Ok(())
//! # }
//! ```
//!
//! Typed receivers (`typed::Receiver::into_async`) and servers
//! (`Server::into_async`) register their readiness descriptors the same
//! way, through [`register`].
//!
//! Soundness: tokio's `AsyncFd::register_with_interest` is `unsafe`
//! because the registered descriptor must stay open, and stay the same,
//! for as long as the `AsyncFd` lives. Here the `AsyncFd` owns a [`Bell`],
//! which owns a reference to the descriptor's owner (a doorbell, a
//! poller), and the duplicate it registers instead, if any: it closes only
//! after the `AsyncFd` is gone, and `as_raw_fd` always returns the same one.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use ::tokio::io::Interest;
use ::tokio::io::unix::AsyncFd;

use super::{Descriptor, Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError};

/// A readiness descriptor as tokio's reactor sees it: its owner's, or a
/// duplicate of it when clones of one sender each register the doorbell
/// they share (a reactor's epoll takes a descriptor once; a duplicate is
/// another entry for the same socket, readable together with it).
pub(crate) struct Bell {
    owner: Descriptor,
    duplicate: Option<OwnedFd>,
}

impl std::fmt::Debug for Bell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Bell").field(&self.as_raw_fd()).finish()
    }
}

impl Bell {
    /// Whether this is `fd`'s owner.
    pub(crate) fn is(&self, fd: &Descriptor) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.owner), Arc::as_ptr(fd))
    }
}

impl AsRawFd for Bell {
    fn as_raw_fd(&self) -> RawFd {
        match &self.duplicate {
            Some(fd) => fd.as_raw_fd(),
            None => self.owner.as_fd().as_raw_fd(),
        }
    }
}

/// Registers `bell` with the current runtime's reactor, through a
/// duplicate of its descriptor if `shared` (see [`Bell`]).
pub(crate) fn register(bell: &Descriptor, shared: bool) -> io::Result<AsyncFd<Bell>> {
    if ::tokio::runtime::Handle::try_current().is_err() {
        return Err(io::Error::other(
            "into_async was called outside a tokio runtime",
        ));
    }
    let duplicate = match shared {
        true => Some(crate::base::sys::duplicate(bell.as_fd())?),
        false => None,
    };
    let bell = Bell {
        owner: Arc::clone(bell),
        duplicate,
    };
    // SAFETY: the `AsyncFd` owns the `Bell`, whose `Arc` keeps the doorbell
    // (and so its descriptor) open and unchanged for as long as the
    // `AsyncFd` lives, and which owns its duplicate, if any, as long (see
    // the module comment).
    unsafe { AsyncFd::register_with_interest(bell, Interest::READABLE) }
        .map_err(|e| io::Error::other(format!("registering a doorbell with tokio: {e}")))
}

/// A [`Receiver`] for async code on tokio.
#[derive(Debug)]
pub struct AsyncReceiver {
    rx: Receiver,
    bell: AsyncFd<Bell>,
}

impl Receiver {
    /// This receiver for async code on tokio ([`AsyncReceiver`]). Call it
    /// inside a tokio runtime (with its IO driver enabled).
    ///
    /// # Errors
    ///
    /// As [`Receiver::ready_fd`]; also outside a tokio runtime, or if the
    /// runtime refuses to register the doorbell.
    ///
    /// # Panics
    ///
    /// As tokio's `AsyncFd`, if the runtime was built without its IO driver
    /// (`enable_io`).
    pub fn into_async(self) -> io::Result<AsyncReceiver> {
        let bell = register(&(Arc::clone(self.half.doorbell()?) as Descriptor), false)?;
        Ok(AsyncReceiver { rx: self, bell })
    }
}

impl AsyncReceiver {
    /// Receives the next message, suspending the task until one arrives.
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    pub async fn recv(&self) -> Result<Vec<u8>, RecvError> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next message: `Ready` with it (or the error that ends
    /// the stream), or `Pending` with the task woken when one may be there.
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    pub fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Result<Vec<u8>, RecvError>> {
        loop {
            match self.rx.try_recv() {
                Ok(message) => return Poll::Ready(Ok(message)),
                Err(TryRecvError::Empty) => {} // armed: the sender rings now
                Err(e) => return Poll::Ready(Err(recv_error(e))),
            }
            let mut guard = match ready!(self.bell.poll_read_ready(cx)) {
                Ok(guard) => guard,
                Err(e) => return Poll::Ready(Err(RecvError::Io(e))),
            };
            // The next `try_recv` clears the doorbell itself, before it
            // looks at the ring again.
            guard.clear_ready();
        }
    }

    /// The receiver back, for blocking use.
    pub fn into_inner(self) -> Receiver {
        self.rx.half.disarm_bell();
        self.rx
    }
}

/// Messages until the sender is gone: the stream ends (`None`) on
/// `Disconnected`; any other error is an item, after which the stream ends
/// as well.
impl futures_core::Stream for AsyncReceiver {
    type Item = Result<Vec<u8>, RecvError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match ready!(self.poll_recv(cx)) {
            Err(RecvError::Disconnected) => Poll::Ready(None),
            other => Poll::Ready(Some(other)),
        }
    }
}

/// The error a waiting receive reports for what a `try_` one said.
pub(crate) fn recv_error(e: TryRecvError) -> RecvError {
    match e {
        TryRecvError::Disconnected => RecvError::Disconnected,
        TryRecvError::Protocol(p) => RecvError::Protocol(p),
        TryRecvError::Io(e) => RecvError::Io(e),
        TryRecvError::Empty => RecvError::Io(io::Error::other("empty after a wake")),
    }
}

/// A [`Sender`] for async code on tokio.
#[derive(Debug)]
pub struct AsyncSender {
    tx: Sender,
    bell: AsyncFd<Bell>,
    /// The message a [`futures_sink::Sink`] user handed over and that has
    /// not fit yet.
    queued: Option<Vec<u8>>,
}

impl Sender {
    /// This sender for async code on tokio ([`AsyncSender`]). Call it
    /// inside a tokio runtime (with its IO driver enabled).
    ///
    /// Clones of one sender can each be made async, in one runtime or
    /// several: one made async while other clones exist registers a
    /// duplicate of their shared doorbell's descriptor (one descriptor
    /// more).
    ///
    /// # Errors
    ///
    /// As [`Receiver::into_async`]; also if the descriptor cannot be
    /// duplicated (out of descriptors).
    pub fn into_async(self) -> io::Result<AsyncSender> {
        let bell = register(
            &(Arc::clone(self.core.half.doorbell()?) as Descriptor),
            self.has_clones(),
        )?;
        Ok(AsyncSender {
            tx: self,
            bell,
            queued: None,
        })
    }
}

impl AsyncSender {
    /// Sends a message, suspending the task while the pipe is full. A
    /// message larger than the ring goes in pieces as the receiver makes
    /// room, each wake going on where the last stopped (see
    /// [`Sender::try_send`]); if the future is dropped part way, the next
    /// send of another message abandons it (nothing of it is delivered).
    ///
    /// # Errors
    ///
    /// As [`Sender::send`].
    pub async fn send(&self, bytes: &[u8]) -> Result<(), SendError> {
        std::future::poll_fn(|cx| self.poll_send(cx, bytes)).await
    }

    /// Sends `bytes` if the pipe has room now: `Ready` once sent (or
    /// failed), `Pending` with the task woken when room may be there.
    ///
    /// # Errors
    ///
    /// As [`Sender::send`].
    pub fn poll_send(&self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<Result<(), SendError>> {
        loop {
            match self.tx.try_send(bytes) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(TrySendError::Full) => {} // armed: the receiver rings now
                Err(e) => return Poll::Ready(Err(send_error(e))),
            }
            let mut guard = match ready!(self.bell.poll_read_ready(cx)) {
                Ok(guard) => guard,
                Err(e) => return Poll::Ready(Err(SendError::Io(e))),
            };
            guard.clear_ready();
        }
    }

    /// The sender back, for blocking use.
    pub fn into_inner(self) -> Sender {
        // A clone may still wait on the bell (see `Sender::try_send`).
        if !self.tx.has_clones() {
            self.tx.core.half.disarm_bell();
        }
        self.tx
    }

    fn poll_flush_queued(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), SendError>> {
        if let Some(message) = self.queued.take()
            && self.poll_send(cx, &message)?.is_pending()
        {
            self.queued = Some(message);
            return Poll::Pending;
        }
        Poll::Ready(Ok(()))
    }
}

/// Whole messages into the pipe: one message waits in the sink while the
/// pipe is full, and `poll_ready` holds further ones back until it fits.
impl futures_sink::Sink<Vec<u8>> for AsyncSender {
    type Error = SendError;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendError>> {
        self.get_mut().poll_flush_queued(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: Vec<u8>) -> Result<(), SendError> {
        let this = self.get_mut();
        debug_assert!(this.queued.is_none(), "start_send without poll_ready");
        this.queued = Some(item);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendError>> {
        self.get_mut().poll_flush_queued(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), SendError>> {
        self.get_mut().poll_flush_queued(cx)
    }
}

fn send_error(e: TrySendError) -> SendError {
    match e {
        TrySendError::Disconnected => SendError::Disconnected,
        TrySendError::TooLarge { len, limit } => SendError::TooLarge { len, limit },
        TrySendError::NotTransferable(why) => SendError::NotTransferable(why),
        TrySendError::Protocol(p) => SendError::Protocol(p),
        TrySendError::Io(e) => SendError::Io(e),
        TrySendError::Full => SendError::Io(io::Error::other("full after a wake")),
    }
}
