//! Sending: messages into frames, frames into the ring.

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::wait::{Stop, Waiter};
use super::{Pipe, SendError, SendWithError};
use crate::link::{Failure, Link};
use crate::ring::event::{self, SysFutex};
use crate::ring::{Corrupt, Producer};
use crate::shm::RingView;
use crate::sync::Ordering;
use crate::wire::MAX_HANDLES;
use crate::wire::frame::{HANDLE_ID, Kind, TOTAL, Tag, encode_handle_id, encode_total};

/// Most pipe ends one pipe direction has in flight: sent, and not yet
/// received by the peer (one message may always carry up to
/// [`MAX_HANDLES`] when none are). Each end crosses the link's control socket as a
/// record before the message naming it, and the socket is shared by every
/// pipe of the link; this window keeps one pipe's ends from filling it
/// (it holds a few hundred records), and it is the backpressure of
/// [`Pipe::send_with`]: past it, the send waits for the receiver as it
/// would for room in a full pipe.
pub const HANDLE_WINDOW: usize = 64;

/// The sending half of a pipe end, behind its mutex.
#[derive(Debug)]
pub(super) struct Tx {
    ring: Producer<RingView>,
    waiter: Waiter,
    /// A message was begun and abandoned; an `Abort` frame is owed.
    owes_abort: bool,
    /// Pipe ends sent through this ring so far (wrapping).
    handles_sent: u32,
}

impl Tx {
    pub(super) fn new(ring: Producer<RingView>) -> Self {
        Self {
            ring,
            waiter: Waiter::default(),
            owes_abort: false,
            handles_sent: 0,
        }
    }
}

fn stop_to_error(pipe: &Pipe, stop: Stop) -> SendError {
    match stop {
        Stop::Timeout => SendError::Timeout,
        Stop::Gone(failure) => pipe.gone(failure).into(),
        Stop::Corrupt(Corrupt(why)) => pipe.corrupt(why).into(),
    }
}

impl Pipe {
    /// Sends a message, waiting while the pipe is full.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.send(b"")?;             // empty messages are messages too
    /// assert_eq!(b.recv()?, b"");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn send(&self, bytes: &[u8]) -> Result<(), SendError> {
        self.send_message(bytes, &[], None)
    }

    /// Sends a message if the pipe has room for all of it now; otherwise
    /// returns [`SendError::Full`] having sent nothing.
    pub fn try_send(&self, bytes: &[u8]) -> Result<(), SendError> {
        self.send_message(bytes, &[], Some(Instant::now()))
            .map_err(|e| match e {
                SendError::Timeout => SendError::Full,
                other => other,
            })
    }

    /// Sends a message, waiting at most `timeout` for room; on
    /// [`SendError::Timeout`] nothing was delivered.
    pub fn send_timeout(&self, bytes: &[u8], timeout: Duration) -> Result<(), SendError> {
        self.send_message(bytes, &[], Some(Instant::now() + timeout))
    }

    /// Sends a message carrying pipe ends to the process at the other end.
    ///
    /// Each attached end must have its twin in this process (as both ends of
    /// [`crate::pipe()`] do), and this pipe must lead to another process.
    /// The moved end and its twin then talk through shared memory, watched
    /// over by this pipe's link; no descriptor stays open per pipe.
    /// The receiver takes them with [`Pipe::recv_with`].
    ///
    /// At most [`HANDLE_WINDOW`] ends are in flight per pipe direction (sent
    /// and not yet received); past that this waits for the receiver, as
    /// [`Pipe::send`] waits for room in a full pipe.
    pub fn send_with(&self, bytes: &[u8], pipes: Vec<Pipe>) -> Result<(), SendWithError> {
        self.send_with_deadline(bytes, pipes, None)
    }

    /// [`Pipe::send_with`] if the pipe has room for the message and its
    /// ends now; otherwise [`SendError::Full`], with every end handed back.
    pub fn try_send_with(&self, bytes: &[u8], pipes: Vec<Pipe>) -> Result<(), SendWithError> {
        self.send_with_deadline(bytes, pipes, Some(Instant::now()))
            .map_err(|mut e| {
                if let SendError::Timeout = e.error {
                    e.error = SendError::Full;
                }
                e
            })
    }

    /// [`Pipe::send_with`], waiting at most `timeout` for room; on
    /// [`SendError::Timeout`] the ends not sent are handed back.
    pub fn send_with_timeout(
        &self,
        bytes: &[u8],
        pipes: Vec<Pipe>,
        timeout: Duration,
    ) -> Result<(), SendWithError> {
        self.send_with_deadline(bytes, pipes, Some(Instant::now() + timeout))
    }

    fn send_with_deadline(
        &self,
        bytes: &[u8],
        pipes: Vec<Pipe>,
        deadline: Option<Instant>,
    ) -> Result<(), SendWithError> {
        let link = match self.check_transfer(bytes, &pipes) {
            Ok(link) => link,
            Err(error) => return Err(SendWithError { error, pipes }),
        };
        let mut tx = match self.begin_send(bytes.len(), deadline) {
            Ok(tx) => tx,
            Err(error) => return Err(SendWithError { error, pipes }),
        };
        if let Err(error) = self.wait_for_window(&mut tx, pipes.len(), deadline) {
            return Err(SendWithError { error, pipes });
        }
        let mut ids = Vec::with_capacity(pipes.len());
        for (i, pipe) in pipes.iter().enumerate() {
            if let Err(e) = pipe
                .send_region(link, None, deadline)
                .map(|id| ids.push(id))
            {
                // Ends already sent are dropped (closed): their twins see
                // `Disconnected`. The rest go back to the caller.
                return Err(SendWithError {
                    error: self.io_error(e),
                    pipes: pipes.into_iter().skip(i + 1).collect(),
                });
            }
        }
        self.send_locked(&mut tx, bytes, &ids, deadline)
            .map_err(|error| SendWithError {
                error,
                pipes: Vec::new(),
            })?;
        tx.handles_sent = tx.handles_sent.wrapping_add(ids.len() as u32);
        for pipe in pipes {
            pipe.moved_over(link);
        }
        Ok(())
    }

    /// The link the ends will travel over, once they may.
    fn check_transfer(&self, bytes: &[u8], pipes: &[Pipe]) -> Result<&Arc<Link>, SendError> {
        let Some(link) = self.link.get() else {
            return Err(SendError::NotTransferable(
                "pipe ends travel only over a pipe to another process",
            ));
        };
        if pipes.len() > MAX_HANDLES {
            return Err(SendError::NotTransferable(
                "more than 253 pipe ends in one message",
            ));
        }
        if pipes.iter().any(|p| p.link.get().is_some()) {
            return Err(SendError::NotTransferable(
                "only a pipe end whose twin is in this process can be sent",
            ));
        }
        let twins =
            |(i, p): (usize, &Pipe)| pipes[..i].iter().any(|q| Arc::ptr_eq(&p.region, &q.region));
        if pipes.iter().enumerate().any(twins) {
            return Err(SendError::NotTransferable(
                "both ends of one pipe cannot travel together",
            ));
        }
        if bytes.len() > self.limit {
            return Err(SendError::TooLarge {
                len: bytes.len(),
                limit: self.limit,
            });
        }
        Ok(link)
    }

    /// Waits until `count` more ends fit in this direction's window.
    fn wait_for_window(
        &self,
        tx: &mut Tx,
        count: usize,
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        if count == 0 {
            return Ok(());
        }
        let scope = self.scope(true);
        let sent = tx.handles_sent;
        tx.waiter
            .wait(&scope, deadline, || {
                // Relaxed: a count only compared here; the receiver's wake
                // (with its fence) makes us look again.
                let claimed = scope.peer.handles.load(Ordering::Relaxed);
                let in_flight = sent.wrapping_sub(claimed) as usize;
                let room = in_flight == 0 || in_flight + count <= HANDLE_WINDOW;
                Ok(room.then_some(()))
            })
            .map_err(|stop| stop_to_error(self, stop))
    }

    fn send_message(
        &self,
        bytes: &[u8],
        ids: &[u64],
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        let mut tx = self.begin_send(bytes.len(), deadline)?;
        self.send_locked(&mut tx, bytes, ids, deadline)
    }

    /// Sends a message with the send lock held.
    fn send_locked(
        &self,
        tx: &mut Tx,
        bytes: &[u8],
        ids: &[u64],
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        let whole = Tag {
            kind: Kind::Whole,
            handles: ids.len() as u16,
        };
        // Between processes, large messages go out of line; one larger than
        // the largest block travels in pieces.
        let small = bytes.len() < self.out_of_line
            || self.link().is_none()
            || crate::shm::block::class_for(bytes.len()).is_none();
        if ids.is_empty() && small && bytes.len() <= tx.ring.max_body() / 2 {
            return self.push(tx, whole, &[bytes], deadline);
        }
        let id_bytes: Vec<u8> = ids.iter().flat_map(|&id| encode_handle_id(id)).collect();
        if small && id_bytes.len() + bytes.len() <= tx.ring.max_body() / 2 {
            return self.push(tx, whole, &[&id_bytes, bytes], deadline);
        }
        if let Some(link) = self.link.get().filter(|_| !small)
            && self.send_out_of_line(tx, link, bytes, &id_bytes, deadline)?
        {
            return Ok(());
        }
        self.send_pieces(tx, bytes, &id_bytes, deadline)
    }

    /// Checks a message of `len` bytes may be sent, and takes the send lock.
    pub(super) fn begin_send(
        &self,
        len: usize,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'_, Tx>, SendError> {
        if len > self.limit {
            return Err(SendError::TooLarge {
                len,
                limit: self.limit,
            });
        }
        if let Some(failure) = self.failure() {
            return Err(failure.into());
        }
        let mut tx = Self::lock(&self.tx);
        // Acquire: pairs with the Release store in the peer's drop.
        if self.scope(true).peer.closed.load(Ordering::Acquire) != 0 {
            return Err(self.gone(Failure::HungUp).into());
        }
        if tx.owes_abort {
            let abort = Tag {
                kind: Kind::Abort,
                handles: 0,
            };
            self.push(&mut tx, abort, &[], deadline)?;
            tx.owes_abort = false;
        }
        Ok(tx)
    }

    /// Sends a message too large for one frame as `First`, `More`…, `Last`.
    fn send_pieces(
        &self,
        tx: &mut Tx,
        bytes: &[u8],
        id_bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        let piece = tx.ring.max_body() / 4;
        let first_len = piece
            .saturating_sub(TOTAL + id_bytes.len())
            .min(bytes.len());
        let total = encode_total(bytes.len() as u64);
        let handles = (id_bytes.len() / HANDLE_ID) as u16;
        let (first, mut rest) = bytes.split_at(first_len);
        self.push(
            tx,
            Tag {
                kind: Kind::First,
                handles,
            },
            &[&total, id_bytes, first],
            deadline,
        )?;
        loop {
            let (chunk, after) = rest.split_at(piece.min(rest.len()));
            let kind = if after.is_empty() {
                Kind::Last
            } else {
                Kind::More
            };
            if let Err(e) = self.push(tx, Tag { kind, handles: 0 }, &[chunk], deadline) {
                tx.owes_abort = !matches!(e, SendError::Disconnected | SendError::Protocol(_));
                if tx.owes_abort
                    && self
                        .push(
                            tx,
                            Tag {
                                kind: Kind::Abort,
                                handles: 0,
                            },
                            &[],
                            Some(Instant::now()),
                        )
                        .is_ok()
                {
                    tx.owes_abort = false;
                }
                return Err(e);
            }
            if after.is_empty() {
                return Ok(());
            }
            rest = after;
        }
    }

    /// Writes one frame, waiting for room, then wakes the receiver if asleep.
    pub(super) fn push(
        &self,
        tx: &mut Tx,
        tag: Tag,
        parts: &[&[u8]],
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        let scope = self.scope(true);
        let Tx { ring, waiter, .. } = tx;
        let raw = tag.encode();
        waiter
            .wait(&scope, deadline, || {
                ring.try_push(raw, parts).map(|done| done.then_some(()))
            })
            .map_err(|stop| stop_to_error(self, stop))?;
        event::notify(&SysFutex, scope.me, scope.peer);
        Ok(())
    }
}
