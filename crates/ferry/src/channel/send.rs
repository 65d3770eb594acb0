//! Sending: messages into frames, frames into the ring.

use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use super::wait::{Stop, Waiter};
use super::{Pipe, SendError, SendWithError};
use crate::ring::event::{self, SysFutex};
use crate::ring::{Corrupt, Producer};
use crate::shm::RingView;
use crate::sync::Ordering;
use crate::wire::frame::{HANDLE_ID, Kind, TOTAL, Tag};

/// Most pipe ends one message may carry.
pub const MAX_HANDLES: usize = 253;

/// The sending half of a pipe end, behind its mutex.
#[derive(Debug)]
pub(super) struct Tx {
    ring: Producer<RingView>,
    waiter: Waiter,
    /// A message was begun and abandoned; an `Abort` frame is owed.
    owes_abort: bool,
}

impl Tx {
    pub(super) fn new(ring: Producer<RingView>) -> Self {
        Self {
            ring,
            waiter: Waiter::default(),
            owes_abort: false,
        }
    }
}

fn stop_to_error(pipe: &Pipe, stop: Stop) -> SendError {
    match stop {
        Stop::Timeout => SendError::Timeout,
        Stop::Gone(failure) => failure.into(),
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
    pub fn send_with(&self, bytes: &[u8], pipes: Vec<Pipe>) -> Result<(), SendWithError> {
        let refuse = |why, pipes| {
            Err(SendWithError {
                error: SendError::NotTransferable(why),
                pipes,
            })
        };
        let Some(link) = self.link.get() else {
            return refuse(
                "pipe ends travel only over a pipe to another process",
                pipes,
            );
        };
        if pipes.len() > MAX_HANDLES {
            return refuse("more than 253 pipe ends in one message", pipes);
        }
        if pipes.iter().any(|p| p.link.get().is_some()) {
            return refuse(
                "only a pipe end whose twin is in this process can be sent",
                pipes,
            );
        }
        let twins =
            |(i, p): (usize, &Pipe)| pipes[..i].iter().any(|q| Arc::ptr_eq(&p.region, &q.region));
        if pipes.iter().enumerate().any(twins) {
            return refuse("both ends of one pipe cannot travel together", pipes);
        }
        if bytes.len() > self.limit {
            let error = SendError::TooLarge {
                len: bytes.len(),
                limit: self.limit,
            };
            return Err(SendWithError { error, pipes });
        }
        let mut ids = Vec::with_capacity(pipes.len());
        for (i, pipe) in pipes.iter().enumerate() {
            if let Err(e) = pipe.send_region(link, None).map(|id| ids.push(id)) {
                let error = match e.kind() {
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                        SendError::Disconnected
                    }
                    _ => SendError::Io(e),
                };
                // Ends already sent are dropped (closed): their twins see
                // `Disconnected`. The rest go back to the caller.
                return Err(SendWithError {
                    error,
                    pipes: pipes.into_iter().skip(i + 1).collect(),
                });
            }
        }
        self.send_message(bytes, &ids, None)
            .map_err(|error| SendWithError {
                error,
                pipes: Vec::new(),
            })?;
        for pipe in pipes {
            pipe.moved_over(link);
        }
        Ok(())
    }

    fn send_message(
        &self,
        bytes: &[u8],
        ids: &[u64],
        deadline: Option<Instant>,
    ) -> Result<(), SendError> {
        let mut tx = self.begin_send(bytes.len(), deadline)?;
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
            return self.push(&mut tx, whole, &[bytes], deadline);
        }
        let id_bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        if small && id_bytes.len() + bytes.len() <= tx.ring.max_body() / 2 {
            return self.push(&mut tx, whole, &[&id_bytes, bytes], deadline);
        }
        if let Some(link) = self.link.get().filter(|_| !small)
            && self.send_out_of_line(&mut tx, link, bytes, &id_bytes, deadline)?
        {
            return Ok(());
        }
        self.send_pieces(&mut tx, bytes, &id_bytes, deadline)
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
            return Err(SendError::Disconnected);
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
        let total = (bytes.len() as u64).to_le_bytes();
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
