//! The public pipe: a bidirectional, bounded message pipe between two ends,
//! in one process or across two.

mod error;
mod loan;
mod options;
mod out_of_line;
mod recv;
mod send;
mod wait;

pub use crate::wire::{HANDLE_WINDOW, MAX_HANDLES};
pub use error::{ProtocolError, RecvError, SendError, SendWithError};
pub use loan::{LOAN_IN_PLACE, Loan, SharedBytes};
pub use options::PipeOptions;
pub use out_of_line::OUT_OF_LINE;
pub use recv::Message;
pub use wait::Wait;

use crate::sync::{AtomicBool, AtomicU8};
use crate::wire::Violation;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Instant;

use crate::link::{Failure, Link, PeerEnd};
use crate::pool::budget::Charge;
use crate::ring::Region;
use crate::ring::region::EndHold;
use crate::ring::wake;
use crate::ring::{Consumer, Corrupt, Producer};
use crate::sync::Ordering;

/// One end of a bidirectional message pipe.
///
/// Messages are byte strings of any length from 0 up to the pipe's limit
/// (256 MiB unless set with [`PipeOptions::max_message`]). Each direction is
/// bounded by its ring's capacity; a message larger than the ring travels in
/// pieces. Messages arrive whole, in order, and never twice.
///
/// A `Pipe` may be shared between threads (`&Pipe` is enough to send and to
/// receive): sends are serialized with each other, and so are receives.
///
/// ```
/// let (a, b) = ferry::pipe()?;
/// a.send(b"ping")?;
/// assert_eq!(b.recv()?, b"ping");
/// b.send(b"pong")?;
/// assert_eq!(a.recv()?, b"pong");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Pipe {
    region: Arc<Region>,
    /// This end writes ring `role` and reads ring `1 - role`.
    role: usize,
    tx: Mutex<send::Tx>,
    rx: Mutex<recv::Rx>,
    /// The link to the process holding the other end; unset while both ends
    /// live in this process (shared with the twin until one end moves).
    link: Arc<OnceLock<Arc<Link>>>,
    wait: AtomicU8,
    limit: usize,
    /// Messages from this many bytes travel out of line (to another process).
    out_of_line: usize,
    /// Set once this end has been sent away; its drop then closes nothing.
    moved: AtomicBool,
    /// A protocol failure seen on a pipe with no link.
    broken: OnceLock<Violation>,
    /// Set once any call on this end has seen the peer gone: every later
    /// call says so too (after the messages still queued are received).
    hung_up: AtomicBool,
    /// For an end the peer sent: its region's charge to the link's map
    /// budget, given back when this end (and its mapping) goes.
    _charge: Option<Charge>,
    /// This process's claim on end `role` of the pipe: held once at most.
    _hold: EndHold,
}

/// Creates a pipe whose two ends are in this process, with default options.
///
/// Either end can later be sent to another process with
/// [`Pipe::send_with`]; the two ends keep talking through shared memory.
pub fn pipe() -> std::io::Result<(Pipe, Pipe)> {
    PipeOptions::new().pipe()
}

impl Pipe {
    fn new(
        region: Arc<Region>,
        role: usize,
        link: Arc<OnceLock<Arc<Link>>>,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let hold = region
            .hold_end(role)
            .ok_or(Corrupt(Violation::EndHeldTwice))?;
        Ok(Self {
            _hold: hold,
            tx: Mutex::new(send::Tx::new(Producer::new(region.ring(role))?)),
            rx: Mutex::new(recv::Rx::new(Consumer::new(region.ring(1 - role))?)),
            region,
            role,
            link,
            wait: AtomicU8::new(options.wait.to_u8()),
            limit: options.limit,
            out_of_line: options.out_of_line,
            moved: AtomicBool::new(false),
            broken: OnceLock::new(),
            hung_up: AtomicBool::new(false),
            _charge: None,
        })
    }

    /// An end whose shared memory arrived over `link`.
    pub(crate) fn adopt(
        link: &Arc<Link>,
        end: PeerEnd,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let cell = Arc::new(OnceLock::from(Arc::clone(link)));
        link.watch(&end.region, end.role);
        let mut pipe = Self::new(end.region, end.role, cell, options)?;
        pipe._charge = Some(end.charge);
        Ok(pipe)
    }

    /// Sends this end's shared memory over `link` (the first step of moving
    /// it), waiting for room until `deadline`; returns the id the peer
    /// claims it by.
    pub(crate) fn send_region(
        &self,
        link: &Link,
        id: Option<u64>,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        link.send_pipe_end(&self.region, self.role, id, deadline)
    }

    /// Completes a move: the twin left here now answers to `link`, and this
    /// end is forgotten without closing anything.
    pub(crate) fn moved_over(self, link: &Arc<Link>) {
        let _ = self.link.set(Arc::clone(link));
        link.watch(&self.region, 1 - self.role);
        // Relaxed: read only by this end's own drop, just below.
        self.moved.store(true, Ordering::Relaxed);
    }

    /// How this end waits.
    pub fn wait_strategy(&self) -> Wait {
        // Relaxed: a setting, read on its own.
        Wait::from_u8(self.wait.load(Ordering::Relaxed))
    }

    /// Changes how this end waits, from the next wait on.
    pub fn set_wait(&self, wait: Wait) {
        // Relaxed: a setting, read on its own.
        self.wait.store(wait.to_u8(), Ordering::Relaxed);
    }

    /// The largest message this end sends or accepts.
    pub fn max_message(&self) -> usize {
        self.limit
    }

    /// Sets the largest message this end sends or accepts.
    pub fn set_max_message(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Sets the size from which messages to another process travel out of
    /// line, in a shared-memory block ([`OUT_OF_LINE`] by default;
    /// `usize::MAX` never).
    pub fn set_out_of_line(&mut self, bytes: usize) {
        self.out_of_line = bytes;
    }

    /// Each direction's ring capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.region.capacity()
    }

    #[cfg(feature = "fuzzing")]
    pub(crate) fn region(&self) -> &Arc<Region> {
        &self.region
    }

    fn link(&self) -> Option<&Link> {
        self.link.get().map(|l| &**l)
    }

    fn failure(&self) -> Option<Failure> {
        if let Some(why) = self.broken.get() {
            return Some(Failure::Protocol(*why));
        }
        let link = self.link().and_then(Link::failure);
        // Relaxed: a sticky flag; what it stands for was seen by this
        // process already.
        match (link, self.hung_up.load(Ordering::Relaxed)) {
            (None, true) => Some(Failure::HungUp),
            (link, _) => link,
        }
    }

    /// Records that a call saw the peer gone, so every later call says so.
    fn gone(&self, failure: Failure) -> Failure {
        if failure == Failure::HungUp {
            // Relaxed: see `failure`.
            self.hung_up.store(true, Ordering::Relaxed);
        }
        failure
    }

    /// Turns a failed socket write into the error it stands for: the peer
    /// gone (recorded on the link and this end), or a local failure.
    fn io_error(&self, e: std::io::Error) -> SendError {
        if let Some(link) = self.link() {
            link.note_io(&e);
        }
        match e.kind() {
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                self.gone(Failure::HungUp).into()
            }
            std::io::ErrorKind::TimedOut => SendError::Timeout,
            _ => SendError::Io(e),
        }
    }

    /// Records a violation by the peer and shuts the link.
    fn corrupt(&self, why: Violation) -> Failure {
        let _ = self.broken.set(why);
        if let Some(link) = self.link() {
            link.fail(Failure::Protocol(why));
        }
        Failure::Protocol(why)
    }

    fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn scope<'a>(&'a self, sending: bool) -> wait::Scope<'a> {
        let out = self.region.control(self.role);
        let inbound = self.region.control(1 - self.role);
        let (me, peer, my_other) = if sending {
            (&out.producer, &out.consumer, &inbound.consumer)
        } else {
            (&inbound.consumer, &inbound.producer, &out.producer)
        };
        wait::Scope {
            wait: self.wait_strategy(),
            me,
            peer,
            my_other,
            link: self.link(),
            hung_up: &self.hung_up,
            drain: !sending,
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // Relaxed: `moved` is only written through `&self` by this end's owner.
        if self.moved.load(Ordering::Relaxed) {
            return;
        }
        let out = self.region.control(self.role);
        let inbound = self.region.control(1 - self.role);
        // Release: pairs with the peer's Acquire load of `closed`, after our
        // last frame was published.
        out.producer.closed.store(1, Ordering::Release);
        inbound.consumer.closed.store(1, Ordering::Release);
        wake::ring(&out.producer, &out.consumer);
        wake::ring(&inbound.consumer, &inbound.producer);
    }
}

#[cfg(test)]
mod tests;
