//! How a pipe end waits: the user's choice ([`Wait`]), and the ring half as
//! a target of the wait mechanism (`crate::transport::wait`).
//!
//! A pipe half waits on its ring: a receiver for a frame, a sender for
//! room. What the policy sees of the peer is in the ring's control block:
//! each side says there when it sleeps (its `waiting` word, which the wake
//! protocol needs anyway) and which CPU it last waited or woke on (its
//! `cpu` word, written only on a change). Sleeping is the ring's wake
//! protocol ([`wake::sleep_until`]); the peer's death ends a wait through
//! the flags the peer and the link's watcher set, read at every step.
//!
//! The opt-in [`Wait::Tuned`] runs the older heuristics of `tuned/`.

mod tuned;

use crate::base::sync::AtomicBool;
use std::time::{Duration, Instant};

use super::route::LinkRef;
use crate::base::sync::Ordering;
use crate::transport::link::{Failure, Link};
use crate::transport::ring::Corrupt;
use crate::transport::ring::control::Side;
use crate::transport::ring::region::SidesView;
use crate::transport::ring::wake;
use crate::transport::wait::{
    self, LIVENESS, Memory, Pace, Peer, Place, forget_my_cpu, my_cpu, policy,
};

/// How a pipe end waits for a message (or for room to send one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wait {
    /// Sleep on the futex at once. Cheapest in CPU; a cross-CPU wake-up
    /// costs tens of microseconds.
    Sleep,
    /// Busy-poll and never sleep. Lowest latency for pinned pairs on
    /// different CPUs; burns a CPU while waiting. When the peer is seen on
    /// the same CPU, the spinner yields between polls so the peer can run.
    Spin,
    /// Spin while the peer works on another CPU (up to a millisecond),
    /// sleep once it sleeps; on the peer's CPU, or on a machine with one,
    /// yield to it instead and never spin; and sleep without spinning for
    /// a while once another thread has wanted this CPU. Reads nothing the
    /// system may deny (no `/proc`, no affinity).
    #[default]
    Adaptive,
    /// [`Wait::Adaptive`] plus the heuristics measured on earlier machines:
    /// a stream's reader lets batches build, a pair of processes on one
    /// CPU holds the CPU now and then so the scheduler parts them, large
    /// round trips try one CPU where it measures faster, a sleeper takes
    /// short naps first. Opt-in: it asks the system for its affinity and
    /// may hold a CPU for milliseconds.
    Tuned,
}

impl Wait {
    pub(crate) fn to_u8(self) -> u8 {
        self as u8
    }
    pub(crate) fn from_u8(raw: u8) -> Self {
        match raw {
            0 => Self::Sleep,
            1 => Self::Spin,
            3 => Self::Tuned,
            _ => Self::Adaptive,
        }
    }
}

/// Why a wait ended without the condition becoming true.
#[derive(Debug)]
pub(crate) enum Stop {
    Timeout,
    Gone(Failure),
    Corrupt(Corrupt),
}

impl From<Corrupt> for Stop {
    fn from(c: Corrupt) -> Self {
        Self::Corrupt(c)
    }
}

/// One direction's waiting state, kept from one wait to the next.
#[derive(Debug, Default)]
pub(crate) struct Waiter {
    memory: Memory,
    /// The opt-in policy's state, made on its first wait.
    tuned: Option<Box<tuned::Tuned>>,
}

/// What a wait looks at: the sides of the ring it waits on, and the link
/// whose failure ends it.
pub(crate) struct Scope<'a> {
    pub(crate) wait: Wait,
    /// The control-block sides of the waiting half (see [`SidesView`]).
    pub(crate) sides: &'a SidesView,
    /// Whether this process holds both halves of the pipe end: then this
    /// thread's CPU is published on the other ring too, and a consumer
    /// sees whether the peer sleeps.
    pub(crate) joined: bool,
    /// Whether the waiting half writes the ring (else it reads it, and
    /// frames the peer committed before going are still wanted).
    pub(crate) producer: bool,
    /// The waiting half: its link (followed to wherever the other side
    /// moved) ends the wait when it fails.
    pub(super) half: &'a super::half::Half,
    /// The pipe end's record that a call already saw the peer gone.
    pub(crate) hung_up: &'a AtomicBool,
    /// A receiver's frames taken so far (`Consumer::taken`), for its
    /// stream pacing (`crate::transport::wait::Pace`); `None` for a sender.
    pub(crate) taken: Option<u64>,
}

impl<'a> Scope<'a> {
    /// The link to the process holding the other side now, if any.
    fn link(&self) -> Option<LinkRef<'a>> {
        self.half.link()
    }

    /// The waiting side.
    pub(crate) fn me(&self) -> &'a Side {
        self.sides.me()
    }

    /// The side that will change the ring.
    pub(crate) fn peer(&self) -> &'a Side {
        self.sides.peer()
    }

    /// My side of the other ring, where my CPU is published too, while
    /// this process holds both halves of the pipe end.
    fn my_other(&self) -> Option<&'a Side> {
        self.joined.then(|| self.sides.my_other())
    }

    /// The peer's side whose `waiting` word says whether the peer sleeps,
    /// where this side can see it: a producer waits on the consumer of its
    /// own ring; a consumer on the peer's receive of the other ring, which
    /// the peer holds only while this end is whole.
    fn peer_sleeps(&self) -> Option<&'a Side> {
        (self.producer || self.joined).then(|| self.sides.peer_rx())
    }

    /// The peer's state, as its `waiting` word says.
    fn peer_state(&self) -> Peer {
        // Relaxed: a scheduling hint; the peer writes it around its
        // sleeps, and a stale value costs only speed.
        match self.peer_sleeps() {
            Some(side) if side.waiting.load(Ordering::Relaxed) == 0 => Peer::Awake,
            Some(_) => Peer::Asleep,
            None => Peer::Unseen,
        }
    }

    /// Where the peer last said it runs, against `mine` (1 + this CPU).
    fn place(&self, mine: u32) -> Place {
        // Relaxed: a scheduling hint.
        match self.peer().cpu.load(Ordering::Relaxed) {
            0 => Place::Unknown,
            cpu if cpu == mine => Place::Here,
            _ => Place::Elsewhere,
        }
    }

    /// This end's send position on the other ring: a receiver tells from
    /// it whether its end answered between two waits.
    fn sent(&self) -> u64 {
        // Relaxed: a scheduling hint (the peer can write the word too; a
        // false value costs one pause or one look, never correctness).
        self.sides.my_other().pos.load(Ordering::Relaxed)
    }

    /// Whether frames the peer committed before going are still wanted
    /// (a receiver drains them; a sender stops at once).
    fn drain(&self) -> bool {
        !self.producer
    }

    fn gone(&self) -> Option<Failure> {
        // Acquire: pairs with the Release store of `closed` when the peer
        // dropped its end, after its last frame.
        if self.peer().closed.load(Ordering::Acquire) != 0 {
            return Some(Failure::HungUp);
        }
        // Relaxed: a sticky flag set by this process (see `Pipe::gone`).
        if self.hung_up.load(Ordering::Relaxed) {
            return Some(Failure::HungUp);
        }
        self.half.link_failure(Link::failure)
    }

    /// [`Scope::gone`], after asking the kernel; also reads what the peer
    /// left on the link's socket (see [`Link::drain`]).
    fn check_gone(&self) -> Option<Failure> {
        if let Some(link) = self.link() {
            link.drain();
        }
        self.gone()
            .or_else(|| self.half.link_failure(Link::check_peer))
    }

    /// Ends a wait on a gone peer: a receiver takes one last look.
    fn after_gone<R>(
        &self,
        failure: Failure,
        poll: impl FnOnce() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        if !self.drain() {
            return Err(Stop::Gone(failure));
        }
        poll()?.ok_or(Stop::Gone(failure))
    }

    /// Publishes this thread's CPU (`mine`: 1 + the CPU) on this side, and
    /// on the other ring while the end is whole.
    fn publish_cpu(&self, mine: u32) {
        publish(self.me(), mine);
        if let Some(other) = self.my_other() {
            publish(other, mine);
        }
    }
}

/// Says in `side` where this thread runs now, ahead of any wait: for the
/// end of a connection just made, whose peer would otherwise not know
/// whether it shares this CPU until this end first waits.
pub(super) fn say_cpu(side: &Side) {
    publish(side, crate::base::sys::current_cpu() as u32 + 1);
}

/// Writes `mine` (1 + a CPU) into `side`'s CPU word, only on a change, so
/// the peer's cached copy stays valid.
fn publish(side: &Side, mine: u32) {
    // Relaxed (both): a scheduling hint; a stale value costs only speed.
    if side.cpu.load(Ordering::Relaxed) != mine {
        side.cpu.store(mine, Ordering::Relaxed);
    }
}

/// Says in `side` where this thread runs, as it wakes the other side: a
/// side that never waits (a stream's writer whose reader keeps up) would
/// otherwise never say. On a path that makes a wake-up call, this costs
/// next to nothing.
pub(crate) fn publish_waker_cpu(side: &Side) {
    publish(side, my_cpu());
}

impl Waiter {
    /// Waits until `poll` yields a value, the deadline passes, or the peer is
    /// gone. A gone peer's committed frames are still delivered: `poll` runs
    /// once more after the peer is seen gone.
    #[inline]
    pub(crate) fn wait<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        mut poll: impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        if let Some(ready) = poll()? {
            return Ok(ready);
        }
        self.wait_missed(scope, deadline, poll)
    }

    /// Records the length of the message just received (the tuned policy
    /// plans large round trips by it).
    #[inline]
    pub(crate) fn received(&mut self, len: usize) {
        if let Some(tuned) = &mut self.tuned {
            tuned.received(len);
        }
    }

    /// [`Waiter::wait`] for a caller whose own poll has just found nothing.
    #[inline(never)]
    pub(crate) fn wait_missed<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        poll: impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        if deadline.is_some_and(|d| d <= Instant::now()) {
            // A `try_` call: no wait, but a peer found gone is said so.
            return match scope
                .half
                .link_failure(|l| l.check_peer_every(LIVENESS))
                .or_else(|| scope.gone())
            {
                Some(failure) => scope.after_gone(failure, poll),
                None => Err(Stop::Timeout),
            };
        }
        if scope.wait == Wait::Tuned {
            let tuned = self.tuned.get_or_insert_default();
            return tuned.wait_missed(scope, deadline, poll);
        }
        let mine = my_cpu();
        scope.publish_cpu(mine);
        let mut target = Ring { scope, poll, mine };
        let memory = &mut self.memory;
        // One copy of the mechanism per policy, each inlining its policy.
        let result = match scope.wait {
            Wait::Sleep => wait::run(policy::sleep, memory, &mut target, deadline),
            Wait::Spin => wait::run(policy::spin, memory, &mut target, deadline),
            Wait::Adaptive | Wait::Tuned => {
                wait::run(policy::adaptive, memory, &mut target, deadline)
            }
        };
        if target.mine == 0 {
            forget_my_cpu();
        }
        result
    }
}

/// A pipe half's wait, as the mechanism sees it.
struct Ring<'s, 'a, P> {
    scope: &'s Scope<'a>,
    poll: P,
    /// 1 + this thread's CPU, as read at the wait's start; 0 once the wait
    /// has slept (the thread may have moved).
    mine: u32,
}

impl<R, P: FnMut() -> Result<Option<R>, Corrupt>> wait::Target for Ring<'_, '_, P> {
    type Ready = R;
    type Stop = Stop;

    #[inline]
    fn poll(&mut self) -> Result<Option<R>, Stop> {
        Ok((self.poll)()?)
    }

    fn place(&self) -> Place {
        self.scope.place(self.mine)
    }

    fn peer(&self) -> Peer {
        self.scope.peer_state()
    }

    fn pace(&self, pace: &mut Pace) -> u8 {
        match self.scope.taken {
            Some(taken) => pace.next(taken, || self.scope.sent()),
            None => 0,
        }
    }

    fn ended(&mut self, ask: bool) -> Option<Result<R, Stop>> {
        let failure = match ask {
            true => self.scope.check_gone(),
            false => self.scope.gone(),
        };
        failure.map(|failure| self.scope.after_gone(failure, &mut self.poll))
    }

    fn timed_out(&mut self) -> Result<R, Stop> {
        Err(Stop::Timeout)
    }

    fn sleep(&mut self, deadline: Option<Instant>) -> Result<R, Stop> {
        self.mine = 0;
        block(self.scope, deadline, &mut self.poll, LOOKS_ASLEEP)
    }
}

/// Sleeps on the ring's bell until woken with the condition true
/// ([`wake::sleep_until`]). Reads no clock unless there is a deadline,
/// and sleeps without a timeout: the link's watcher wakes it when the
/// peer hangs up. (Unwatched, it naps [`LIVENESS`] at a time and asks
/// the kernel after each nap that ran out.) The first `warm_naps` sleeps
/// of a wait with no deadline are naps of [`WARM_NAP`].
fn block<R>(
    scope: &Scope<'_>,
    deadline: Option<Instant>,
    poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
    warm_naps: u32,
) -> Result<R, Stop> {
    let mut sleeper = Blocked {
        scope,
        deadline,
        poll,
        ran_out: 0,
        warm_naps,
    };
    match wake::sleep_until(&wake::BELL, scope.me(), scope.peer(), &mut sleeper) {
        Err(Stop::Gone(failure)) => scope.after_gone(failure, poll),
        result => result,
    }
}

/// A pipe's blocking wait, as the sleep loop sees it.
struct Blocked<'s, 'a, P> {
    scope: &'s Scope<'a>,
    deadline: Option<Instant>,
    poll: &'s mut P,
    /// Naps of this wait that ran their whole length.
    ran_out: u32,
    warm_naps: u32,
}

/// Length of a sleeper's first naps (see [`LOOKS_ASLEEP`]).
const WARM_NAP: Duration = Duration::from_millis(20);
/// Naps of [`WARM_NAP`] a sleeper with no deadline takes before it sleeps
/// without a timeout, each that runs out followed by a look at the link's
/// socket and the peer: a backstop for records a peer left on the socket
/// while no nudge reached this sleeper (a try call's stuck send relies on
/// it), at two wakeups per idle wait.
const LOOKS_ASLEEP: u32 = 2;

impl<R, P: FnMut() -> Result<Option<R>, Corrupt>> wake::Sleeper for Blocked<'_, '_, P> {
    type Ready = R;
    type Stop = Stop;

    fn poll(&mut self) -> Result<Option<R>, Corrupt> {
        (self.poll)()
    }

    /// Checks for the peer's death and the deadline; asks the kernel after
    /// a nap that ran out.
    fn before_sleep(&mut self, ran_out: bool) -> Result<Duration, Stop> {
        if let Some(failure) = self.scope.gone() {
            return Err(Stop::Gone(failure));
        }
        if ran_out && let Some(failure) = self.scope.check_gone() {
            return Err(Stop::Gone(failure));
        }
        // The watcher pushes a hang-up to this sleeper, so it needs no nap
        // to notice one, and an idle wait makes no wakeups.
        self.ran_out += u32::from(ran_out);
        let mut nap = match self.scope.link().is_none_or(|link| link.watched()) {
            true if self.ran_out < self.warm_naps => WARM_NAP,
            true => Duration::MAX,
            false => LIVENESS,
        };
        if let Some(d) = self.deadline {
            let now = Instant::now();
            if now >= d {
                return Err(Stop::Timeout);
            }
            nap = nap.min(d - now);
        }
        Ok(nap)
    }

    /// Woken for nothing in the ring: perhaps a nudge to read the link's
    /// socket, which the peer found full.
    fn woken_for_nothing(&mut self) {
        if let Some(link) = self.scope.link() {
            link.drain();
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}
