//! What a [`Sender`](super::Sender) and a [`Receiver`](super::Receiver)
//! have in common: one side of one ring of a pipe's region, the link to
//! the process holding the other side, and the flags that remember how
//! the pipe ended.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::PipeOptions;
use super::error::SendFault;
use super::wait::{self, Wait};
use crate::link::{Failure, Link};
use crate::pool::budget::Charge;
use crate::ring::region::{EndHold, Part};
use crate::ring::{Corrupt, Region, wake};
use crate::sync::{AtomicBool, AtomicU8, Ordering};
use crate::wire::Violation;

/// The link a ring's two sides talk over: unset while both are in this
/// process, set (once) when one of them moves to another. Shared by the
/// two sides while they are both here.
pub(super) type LinkCell = Arc<OnceLock<Arc<Link>>>;

/// One side of one ring, as a half of a pipe end holds it.
#[derive(Debug)]
pub(super) struct Half {
    pub(super) region: Arc<Region>,
    /// The side this half is: the producer or the consumer of its ring.
    pub(super) part: Part,
    /// The link to the process holding the ring's other side.
    pub(super) link: LinkCell,
    wait: AtomicU8,
    pub(super) limit: usize,
    /// Whether this process holds the other half of the same pipe end too
    /// (then this thread's CPU is published on both, as a hint to the
    /// peer's waits).
    pub(super) joined: bool,
    /// Set once this half has been sent away; its drop then closes nothing.
    moved: AtomicBool,
    /// A protocol failure seen on a pipe with no link.
    broken: OnceLock<Violation>,
    /// Set once any call on this half has seen the peer gone: every later
    /// call says so too (after the messages still queued are received).
    hung_up: AtomicBool,
    /// For a half the peer sent: its region's charge to the link's map
    /// budget, given back when the last half of it (and its mapping) goes.
    pub(super) charge: Option<Arc<Charge>>,
    /// This process's claim on its side of the ring: held once at most.
    _hold: EndHold,
}

impl Half {
    pub(super) fn new(
        region: Arc<Region>,
        part: Part,
        link: LinkCell,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let hold = region.hold(part).ok_or(Corrupt(Violation::EndHeldTwice))?;
        Ok(Self {
            _hold: hold,
            region,
            part,
            link,
            wait: AtomicU8::new(options.wait.to_u8()),
            limit: options.limit,
            joined: false,
            moved: AtomicBool::new(false),
            broken: OnceLock::new(),
            hung_up: AtomicBool::new(false),
            charge: None,
        })
    }

    /// The ring this half writes or reads.
    pub(super) fn ring(&self) -> usize {
        match self.part {
            Part::Producer(ring) | Part::Consumer(ring) => ring,
        }
    }

    fn is_producer(&self) -> bool {
        matches!(self.part, Part::Producer(_))
    }

    pub(super) fn wait_strategy(&self) -> Wait {
        // Relaxed: a setting, read on its own.
        Wait::from_u8(self.wait.load(Ordering::Relaxed))
    }

    pub(super) fn set_wait(&self, wait: Wait) {
        // Relaxed: a setting, read on its own.
        self.wait.store(wait.to_u8(), Ordering::Relaxed);
    }

    pub(super) fn link(&self) -> Option<&Link> {
        self.link.get().map(|l| &**l)
    }

    pub(super) fn failure(&self) -> Option<Failure> {
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
    pub(super) fn gone(&self, failure: Failure) -> Failure {
        if failure == Failure::HungUp {
            // Relaxed: see `failure`.
            self.hung_up.store(true, Ordering::Relaxed);
        }
        failure
    }

    /// Turns a failed socket write into the error it stands for: the peer
    /// gone (recorded on the link and this half), or a local failure.
    pub(super) fn io_error(&self, e: std::io::Error) -> SendFault {
        if let Some(link) = self.link() {
            link.note_io(&e);
        }
        match e.kind() {
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                self.gone(Failure::HungUp).into()
            }
            std::io::ErrorKind::TimedOut => SendFault::Timeout,
            _ => SendFault::Io(e),
        }
    }

    /// Records a violation by the peer and shuts the link.
    pub(super) fn corrupt(&self, why: Violation) -> Failure {
        let _ = self.broken.set(why);
        if let Some(link) = self.link() {
            link.fail(Failure::Protocol(why));
        }
        Failure::Protocol(why)
    }

    /// What a wait of this half looks at.
    pub(super) fn scope(&self) -> wait::Scope<'_> {
        let ring = self.ring();
        let control = self.region.control(ring);
        let other = self.region.control(1 - ring);
        let (me, peer, my_other) = if self.is_producer() {
            (&control.producer, &control.consumer, &other.consumer)
        } else {
            (&control.consumer, &control.producer, &other.producer)
        };
        wait::Scope {
            wait: self.wait_strategy(),
            me,
            peer,
            my_other: self.joined.then_some(my_other),
            link: self.link(),
            hung_up: &self.hung_up,
            drain: !self.is_producer(),
        }
    }

    /// Completes a move: this half is forgotten without closing anything,
    /// and the side left here answers to `link`.
    pub(super) fn moved_over(&self, link: &Arc<Link>) {
        let _ = self.link.set(Arc::clone(link));
        let twin = match self.part {
            Part::Producer(ring) => Part::Consumer(ring),
            Part::Consumer(ring) => Part::Producer(ring),
        };
        link.watch(&self.region, twin);
        // Relaxed: read only by this half's own drop.
        self.moved.store(true, Ordering::Relaxed);
    }
}

impl Drop for Half {
    fn drop(&mut self) {
        // Relaxed: `moved` is only written through `&self` by this half's owner.
        if self.moved.load(Ordering::Relaxed) {
            return;
        }
        let control = self.region.control(self.ring());
        let (me, peer) = if self.is_producer() {
            (&control.producer, &control.consumer)
        } else {
            (&control.consumer, &control.producer)
        };
        // Release: pairs with the peer's Acquire load of `closed`, after our
        // last frame was published (or our last frame was read).
        me.closed.store(1, Ordering::Release);
        wake::ring(me, peer);
    }
}

/// Locks `mutex`, whether or not a thread panicked while holding it (the
/// state behind each of ferry's locks stays valid at every step).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
