//! A half leaving the process: the in-process queue gives way to a byte
//! pipe, and nothing queued is lost or reordered.
//!
//! - **The sender leaves.** It takes the sending half of a new one-way
//!   byte pipe; the receiver here first drains the values queued before
//!   the move (moved, never encoded), then reads the pipe.
//! - **The receiver leaves.** It takes the receiving half; the values
//!   queued here are encoded and sent, in order, once the message carrying
//!   the receiver has gone (so halves inside them can travel too). Values
//!   the sender here sends meanwhile join the end of that queue; once it
//!   is empty, the sender sends on the pipe directly.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::handles;
use super::queue::{Presence, Queue};
use super::remote;
use crate::api::channel::Handle;
use crate::api::codec::EncodeError;

/// A one-way byte pipe: the sending half of one ring, the receiving half
/// of the same ring, holding at most `capacity` messages (the queue's
/// bound; `usize::MAX`: the ring's bytes alone).
fn one_way(
    capacity: usize,
) -> Result<(crate::api::channel::Sender, crate::api::channel::Receiver), EncodeError> {
    let mut options = crate::api::channel::PipeOptions::new();
    if capacity != usize::MAX {
        options = options.capacity(capacity);
    }
    options
        .channel()
        .map_err(|e| EncodeError::Handle(format!("cannot make the pipe it travels over: {e}")))
}

/// A pipe made before taking the queue's lock (making one takes system
/// calls, too long to hold a spin lock for), if the half will need one.
fn pipe_unless_moved(
    other: Presence,
    capacity: usize,
) -> Result<Option<(crate::api::channel::Sender, crate::api::channel::Receiver)>, EncodeError> {
    match other {
        Presence::Moved => Ok(None),
        Presence::Here | Presence::Dropped => one_way(capacity).map(Some),
    }
}

/// `pipe`, or a new one if the state changed since it was made.
fn or_new(
    pipe: Option<(crate::api::channel::Sender, crate::api::channel::Receiver)>,
    capacity: usize,
) -> Result<(crate::api::channel::Sender, crate::api::channel::Receiver), EncodeError> {
    pipe.map_or_else(|| one_way(capacity), Ok)
}

/// The sender of `queue` is leaving: the byte half it becomes.
pub(super) fn sender_leaves<T>(
    queue: &Queue<T>,
) -> Result<crate::api::channel::Sender, EncodeError> {
    let receiver = queue.lock().receiver;
    let pipe = pipe_unless_moved(receiver, queue.capacity())?;
    let mut state = queue.lock();
    match state.receiver {
        Presence::Here => {
            let (tx, rx) = or_new(pipe, queue.capacity())?;
            state.sender = Presence::Moved;
            state.incoming = Some(rx);
            let sleeping = queue.changed(&mut state);
            drop(state);
            queue.wake(sleeping);
            Ok(tx)
        }
        Presence::Dropped => {
            // Its sends will find the receiver gone.
            state.sender = Presence::Moved;
            drop(state);
            Ok(or_new(pipe, queue.capacity())?.0)
        }
        Presence::Moved if state.forward_pending => Err(EncodeError::Handle(
            "both halves of one channel cannot travel in one message".into(),
        )),
        Presence::Moved => {
            let mut state = queue.wait_forwarded(state);
            state.sender = Presence::Moved;
            state
                .forward
                .take()
                .ok_or_else(|| EncodeError::Handle("its pipe has been taken".into()))
        }
    }
}

/// The receiver of `queue` is leaving: the byte half it becomes. Values
/// queued here follow it (see the module docs).
pub(super) fn receiver_leaves<T>(
    queue: &Arc<Queue<T>>,
) -> Result<crate::api::channel::Receiver, EncodeError>
where
    T: Serialize + Send + 'static,
{
    let sender = queue.lock().sender;
    let pipe = pipe_unless_moved(sender, queue.capacity())?;
    let mut state = queue.lock();
    match state.sender {
        Presence::Here | Presence::Dropped => {
            let (tx, rx) = or_new(pipe, queue.capacity())?;
            state.receiver = Presence::Moved;
            queue.room_made(&mut state);
            if state.items.is_empty() {
                state.forward = Some(tx);
                return Ok(rx);
            }
            let backlog = std::mem::take(&mut state.items);
            state.forward_pending = true;
            drop(state);
            let queue = Arc::clone(queue);
            handles::after_send(Box::new(move || forward(queue, tx, backlog)));
            Ok(rx)
        }
        Presence::Moved if state.items.is_empty() => match state.incoming.take() {
            Some(rx) => {
                state.receiver = Presence::Moved;
                Ok(rx)
            }
            None => Err(EncodeError::Handle("its pipe has been taken".into())),
        },
        Presence::Moved => Err(EncodeError::Handle(
            "its sender has left this process while values it sent are still queued \
             here; receive them first"
                .into(),
        )),
    }
}

/// Sends the values queued before the receiver left: here while the pipe
/// has room, then on a thread of its own if it fills.
fn forward<T>(queue: Arc<Queue<T>>, tx: crate::api::channel::Sender, backlog: VecDeque<T>)
where
    T: Serialize + Send + 'static,
{
    queue.lock().forward_pending = false;
    let mut pending = Pending {
        queue,
        tx: Some(tx),
        backlog,
        current: None,
        buf: Vec::new(),
    };
    if pending.run(false) {
        return;
    }
    let spawned = crate::base::sys::spawn_quiet("ferry-forward", None, move || {
        pending.run(true);
    });
    // Without a thread (out of threads) the values cannot follow; the pipe
    // is handed over as it is when `pending` drops.
    drop(spawned);
}

/// A value encoded and not yet sent.
struct Current {
    bytes: Vec<u8>,
    ends: Vec<Handle>,
    after: Vec<Box<dyn FnOnce() + Send>>,
}

struct Pending<T> {
    queue: Arc<Queue<T>>,
    /// `None` once handed over.
    tx: Option<crate::api::channel::Sender>,
    backlog: VecDeque<T>,
    current: Option<Current>,
    buf: Vec<u8>,
}

/// How long a forwarded value carrying halves waits for the receiver's
/// pipe to reach the other process (they can travel only then).
const LINK_PATIENCE: Duration = Duration::from_secs(60);

impl<T: Serialize> Pending<T> {
    /// Sends the backlog, then anything queued meanwhile, and hands the
    /// pipe over; returns false if `wait` is false and the pipe is full.
    fn run(&mut self, wait: bool) -> bool {
        loop {
            let Some(tx) = self.tx.as_ref() else {
                return true;
            };
            let Some(current) = self.current.as_mut() else {
                match self.backlog.pop_front() {
                    Some(value) => {
                        let (encoded, out) = remote::encode(&value, &mut self.buf);
                        // A value that cannot be encoded here could not
                        // have been sent either; it is dropped.
                        if encoded.is_ok() {
                            self.current = Some(Current {
                                bytes: std::mem::take(&mut self.buf),
                                ends: out.ends,
                                after: out.after,
                            });
                        } else {
                            out.finish();
                        }
                    }
                    None => {
                        let mut state = self.queue.lock();
                        if state.items.is_empty() {
                            // Under the lock: the sender here queues behind
                            // the backlog until it finds the pipe handed over.
                            state.forward = self.tx.take();
                            drop(state);
                            self.queue.forward_done();
                            return true;
                        }
                        self.backlog = std::mem::take(&mut state.items);
                    }
                }
                continue;
            };
            if !current.ends.is_empty() && !tx.is_linked() {
                if !wait {
                    return false;
                }
                let start = Instant::now();
                while !tx.is_linked() && start.elapsed() < LINK_PATIENCE {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            let ends = std::mem::take(&mut current.ends);
            let sent = match (ends.is_empty(), wait) {
                (true, true) => tx.send(&current.bytes).map_err(|_| None),
                (true, false) => tx.try_send(&current.bytes).map_err(|e| match e {
                    crate::api::channel::TrySendError::Full => Some(Vec::new()),
                    _ => None,
                }),
                (false, true) => tx.send_with(&current.bytes, ends).map_err(|_| None),
                (false, false) => {
                    tx.try_send_with(&current.bytes, ends)
                        .map_err(|e| match e.error {
                            crate::api::channel::TrySendError::Full => Some(e.handles),
                            _ => None,
                        })
                }
            };
            match sent {
                Err(Some(ends)) => {
                    current.ends = ends;
                    return false;
                }
                // Sent, or the receiver is gone (then nothing more can be).
                Ok(()) | Err(None) => {
                    let current = self.current.take().expect("matched above");
                    for action in current.after {
                        action();
                    }
                    if sent.is_err() {
                        self.backlog.clear();
                    }
                }
            }
        }
    }
}

impl<T> Drop for Pending<T> {
    /// Hands the pipe to the sender here: it sends directly from now on.
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let mut state = self.queue.lock();
            // Values queued after the forwarding stopped early cannot be
            // sent in order any more; they go with the queue.
            state.forward = Some(tx);
            drop(state);
            self.queue.forward_done();
        }
    }
}
