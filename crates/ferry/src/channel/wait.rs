//! How a pipe end waits: spin, sleep, or spin then sleep.
//!
//! Measured on the 2-vCPU machines ferry is built on (AMD Zen 5 and Intel
//! Xeon guests): waking a sleeper on another CPU costs 25–50 µs, a futex
//! round trip between two processes on one CPU 3–4.5 µs, and spinning while
//! the peer shares your CPU about 44 µs per round trip (the spinner burns
//! the slice the peer needs). So [`Wait::Adaptive`] spins only while the
//! peer last ran on another CPU and more than one CPU is online; on the
//! peer's own CPU it yields to the peer (no wake-up call is then needed,
//! and a stream is read in batches) while the peer works, and a few times
//! more, before it sleeps.
//!
//! How long it spins follows what the peer does, not a clock tuned to one
//! machine: each side says in the shared control block when it sleeps
//! (its `waiting` word, which the wake protocol needs anyway). While the
//! peer is awake it is working on what this side waits for (copying a
//! large reply takes hundreds of microseconds), so the waiter spins on, up
//! to [`MAX_SPIN`]; once the peer sleeps too, nothing will come until
//! something else wakes it, and the waiter sleeps after [`WAKE_GRACE`] (a
//! peer this side has just woken takes one wake-up to say it is awake).
//! Where the peer's state cannot be seen (a lone receiving half), the
//! spin is bounded by recent waits instead.
//!
//! A receiver that keeps catching up with a one-way stream lets a batch
//! build before it looks again ([`STREAM_PAUSE`]; see `Pace`): reading at
//! the writer's heels, each look takes the line the writer is about to
//! write, and both sides pay a cross-core transfer per few messages.
//!
//! A small round trip's pair that finds itself on one CPU holds the CPU
//! now and then, so the scheduler moves the peer to an idle one (see
//! `part`): taking turns, neither would ever be moved.
//!
//! Large round trips run faster with the pair on one CPU on some machines
//! (a copy within one core's cache against one across cores) and slower on
//! others: a receiving end measures which, per message size, and where one
//! CPU wins it sleeps a few waits instead of spinning, so the scheduler may
//! bring it next to its peer, and stays there (see `share`).

use crate::sync::{AtomicBool, AtomicUsize};
use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::part::{self, Parting, Room};
use super::share::{Plan, Share};
use crate::link::{Failure, Link};
use crate::ring::Corrupt;
use crate::ring::control::Side;
use crate::ring::region::SidesView;
use crate::ring::wake;
use crate::sync::{Ordering, spin_hint};

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
    /// Spin while the peer works on another CPU, and sleep once it sleeps
    /// too (or has run a long while); on the peer's CPU, yield to it the
    /// same way. A receiver that keeps catching up with a one-way
    /// stream looks again only after a few microseconds, so it reads in
    /// batches (a streamed message may wait that much longer; a round
    /// trip never does). Where round trips of large messages (8 KiB and
    /// up) measure faster with both ends on one CPU, as on some machines,
    /// a receiver sleeps a few waits so the scheduler may put it there,
    /// and stays.
    #[default]
    Adaptive,
}

impl Wait {
    pub(crate) fn to_u8(self) -> u8 {
        self as u8
    }
    pub(crate) fn from_u8(raw: u8) -> Self {
        match raw {
            0 => Self::Sleep,
            1 => Self::Spin,
            _ => Self::Adaptive,
        }
    }
}

/// Longest spin of [`Wait::Adaptive`] while the peer is awake (working on
/// what this side waits for): a 1 MiB message copied in and out takes
/// 100–500 µs on the machines measured, and a peer busy for longer than
/// this is better slept through (the wake-up costs under 5 % of the wait).
const MAX_SPIN: Duration = Duration::from_millis(1);
/// Longest spin of [`Wait::Adaptive`] while the peer sleeps: twice the
/// slowest cross-CPU wake-up measured (25 µs on Zen 5, 40–50 µs on Xeon
/// guests), so a peer this side's message has just woken can say so
/// before this side gives up; one that stays asleep is waiting itself.
const WAKE_GRACE: Duration = Duration::from_micros(100);
/// Longest spin before sleeping where the peer's state is not seen: about
/// one cross-CPU wake-up, beyond which sleeping is no slower.
const BLIND_SPIN: Duration = Duration::from_micros(60);
/// Shortest blind spin, once waits have proven long.
const MIN_SPIN: Duration = Duration::from_micros(2);
/// An adaptive waiter gives its CPU away once every this many spins, so
/// one busy pair of threads cannot starve the others of a server with a
/// thread per client (100 clients on 2 CPUs: the slowest made 50 round
/// trips a second while the busiest pair made hundreds of thousands).
const YIELD_EVERY_SPINS: u32 = 64;
/// Times an adaptive wait yields to a peer on its own CPU before sleeping,
/// unless the peer is seen awake (see `Waiter::yield_to_peer`).
const SAME_CPU_YIELDS: usize = 8;
/// Waits of a pipe end that, while the peer has not yet said where it
/// runs (a fresh pipe: it has neither waited nor woken this side), first
/// yield as to a peer on this CPU, in case it is one: otherwise the blind
/// spin holds the CPU the peer needs for the very message awaited. (A
/// server's thread for a new client, both on one CPU: connect and first
/// round trip took 103–106 µs, against a Unix socket's 14; yielding first,
/// 50–56.) Bounded, so a peer that never says (a writer whose reader keeps
/// up) costs its reader these few waits' yields and no more.
const FIRST_LOOKS: u8 = 4;
/// Polls made before the first clock read of a spinning wait.
const BURST: usize = 256;
/// How long an adaptive receiver that keeps catching up with a stream
/// (see `Pace`) waits before it looks at the ring again. Measured on a
/// 2-vCPU KVM guest (64 B messages between unpinned processes, 30 runs
/// each, grouped by the cross-CPU line round trip `ferry-bench` probes):
/// looking at once moved 9.6 M msg/s with the vCPUs far apart and 19.4 M
/// near, a 3 µs pause 16.7-18.1 and 22-25, 8 µs 20.2 and 26, 20 µs 22.3
/// and 25.7 (Sleep: 10 and 16-22). Past a few microseconds the gain
/// flattens while the latency a streamed message may gain grows: this
/// stays a tenth of one cross-CPU wake-up (25-50 µs), the price Sleep's
/// batching charges every batch.
const STREAM_PAUSE: Duration = Duration::from_micros(4);
/// A wait that ends within this many polls found the writer at work
/// right there: the reader was at its heels.
const HEELS_POLLS: usize = 16;
/// Waits in a row that must look like a stream before a reader pauses.
const STREAM_WAITS: u8 = 2;
/// A sleeper woken this many times without its condition asks the kernel
/// whether the peer process lives, timeouts or not.
const CHECK_EVERY_WAKES: u32 = 64;
/// A sleeper that needs no timeout still takes this many naps of
/// [`WARM_NAP`] first. Measured on the KVM guests ferry runs on, a futex
/// sleeper is woken from another CPU sooner the nearer its own timeout is
/// (p50 of a blocking round trip across CPUs at 144 B, `ferry-sleep` over
/// the same run's `shm-futex`: 0.96-0.98 with a 20 ms nap, 1.00-1.02 with
/// 100 ms, 1.05-1.08 with 1 s or none). A waiter woken before its nap
/// ends (any busy pipe) keeps that; an idle one wakes this many times,
/// then sleeps until woken.
const WARM_NAPS: u32 = 2;
/// See [`WARM_NAPS`].
const WARM_NAP: Duration = Duration::from_millis(20);
/// How often a spinner (or a sleeper whose link has no hang-up watcher)
/// asks the kernel whether the peer process is alive.
pub(crate) const LIVENESS: Duration = Duration::from_millis(20);
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

/// One direction's waiting state: the adaptive spin budget.
#[derive(Debug)]
pub(crate) struct Waiter {
    budget: Duration,
    /// Adaptive spins begun, to give the CPU away every
    /// [`YIELD_EVERY_SPINS`].
    spins: u32,
    /// A receiver's view of whether it reads a stream.
    pace: Pace,
    /// A receiver's record of whether large round trips run faster with
    /// the pair on one CPU.
    pub(crate) share: Share,
    /// Waits left that yield first while the peer's CPU is not known (see
    /// [`FIRST_LOOKS`]).
    first_looks: u8,
    /// A receiver's record of its waits on its peer's CPU (see `part`).
    parting: Parting,
}

impl Default for Waiter {
    fn default() -> Self {
        Self {
            budget: BLIND_SPIN,
            spins: 0,
            pace: Pace::default(),
            share: Share::default(),
            first_looks: FIRST_LOOKS,
            parting: Parting::default(),
        }
    }
}

/// Whether a receiver keeps catching up with a one-way stream: its last
/// waits each ended at once (the writer was at work right there), each
/// after more than one message, and this end sent nothing between them.
/// Then it pauses [`STREAM_PAUSE`] before it looks again, so the writer
/// runs ahead and the reader takes a batch. A round trip (this end
/// answers between waits), a pipelined one (it answers too), and a trickle
/// (one message per wait, or waits that last) never pause.
#[derive(Debug, Default)]
struct Pace {
    /// Frames taken and this end's send position at the last wait.
    taken: u64,
    sent: u64,
    /// Whether the last wait ended within [`HEELS_POLLS`].
    heels: bool,
    /// Waits in a row that looked like a stream.
    streak: u8,
}

impl Pace {
    /// Whether this wait, after `taken` frames in all and with this end's
    /// send position at `sent`, should let a batch build first.
    fn streaming(&mut self, taken: u64, sent: u64) -> bool {
        let stream = self.heels && taken.wrapping_sub(self.taken) >= 2 && sent == self.sent;
        self.taken = taken;
        self.sent = sent;
        self.heels = false;
        self.streak = match stream {
            true => self.streak.saturating_add(1),
            false => 0,
        };
        self.streak >= STREAM_WAITS
    }
}

/// Waits in a row that may reuse the CPU the first of them read. A wait
/// that ends within its first poll burst or its yields to the peer has
/// hardly run: the thread is almost surely where it was. Any wait that
/// spins on or sleeps asks again next time (a thread moves while it
/// sleeps), and so does every wait after this many: a stale answer costs
/// at most one wait's strategy, never correctness.
const CPU_REUSES: u32 = 16;

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
    pub(crate) link: Option<&'a Link>,
    /// The pipe end's record that a call already saw the peer gone.
    pub(crate) hung_up: &'a AtomicBool,
    /// A receiver's frames taken so far (`Consumer::taken`), for its
    /// [`Pace`]; `None` for a sender.
    pub(crate) taken: Option<u64>,
}

impl<'a> Scope<'a> {
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

    /// The peer's side whose `waiting` word says whether the peer sleeps
    /// (see the module comment), where this side can see it: a producer
    /// waits on the consumer of its own ring; a consumer on the peer's
    /// receive of the other ring, which the peer holds only while this end
    /// is whole.
    fn peer_sleeps(&self) -> Option<&'a Side> {
        (self.producer || self.joined).then(|| self.sides.peer_rx())
    }

    /// Whether frames the peer committed before going are still wanted
    /// (a receiver drains them; a sender stops at once).
    fn drain(&self) -> bool {
        !self.producer
    }
}

impl Scope<'_> {
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
        self.link.and_then(Link::failure)
    }

    /// [`Scope::gone`], after asking the kernel; also reads what the peer
    /// left on the link's socket (see [`Link::drain`]).
    fn check_gone(&self) -> Option<Failure> {
        if let Some(link) = self.link {
            link.drain();
        }
        self.gone().or_else(|| self.link.and_then(Link::check_peer))
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

    /// How long an adaptive spin may last so far: long while the peer is
    /// awake, short once it sleeps, `blind` where its state is not seen.
    fn spin_limit(&self, blind: Duration) -> Duration {
        // A peer that has not said where it runs may share this CPU.
        if !self.peer_said_cpu() {
            return blind.min(WAKE_GRACE);
        }
        match self.peer_sleeps() {
            // Relaxed: a scheduling hint; the peer writes it around its
            // sleeps, and a stale value costs only speed.
            Some(side) if side.waiting.load(Ordering::Relaxed) == 0 => MAX_SPIN,
            Some(_) => WAKE_GRACE,
            None => blind,
        }
    }

    /// Whether the peer has said where it runs: it has waited, or woken
    /// this side, at least once (its CPU word is 0 until then).
    fn peer_said_cpu(&self) -> bool {
        // Relaxed: a scheduling hint.
        self.peer().cpu.load(Ordering::Relaxed) != 0
    }

    /// Whether the peer is seen awake (not about to sleep or asleep).
    fn peer_awake(&self) -> bool {
        // Relaxed: a scheduling hint.
        self.peer_sleeps()
            .is_some_and(|side| side.waiting.load(Ordering::Relaxed) == 0)
    }

    /// Whether the peer is seen asleep (or about to sleep).
    fn peer_asleep(&self) -> bool {
        // Relaxed: a scheduling hint.
        self.peer_sleeps()
            .is_some_and(|side| side.waiting.load(Ordering::Relaxed) != 0)
    }

    /// This end's send position on the other ring: a receiver tells from
    /// it whether its end answered between two waits.
    fn sent(&self) -> u64 {
        // Relaxed: a scheduling hint (the peer can write the word too; a
        // false value costs one pause or one look, never correctness).
        self.sides.my_other().pos.load(Ordering::Relaxed)
    }

    /// Whether the peer last published the CPU this thread runs on now.
    fn sharing_cpu(&self) -> bool {
        // Relaxed: a scheduling hint.
        self.peer().cpu.load(Ordering::Relaxed) == crate::sys::current_cpu() as u32 + 1
    }

    /// Publishes this thread's CPU (writing only on a change, so the
    /// peer's cached copy stays valid) and tells whether the peer last ran
    /// on another one.
    fn publish_cpu(&self, mine: u32) -> bool {
        publish(self.me(), mine);
        if let Some(other) = self.my_other() {
            publish(other, mine);
        }
        // Relaxed: a scheduling hint; a stale value costs only speed.
        mine != self.peer().cpu.load(Ordering::Relaxed)
    }
}

/// Says in `side` where this thread runs now, ahead of any wait: for the
/// end of a connection just made, whose peer would otherwise not know
/// whether it shares this CPU until this end first waits, and would spin
/// blind on the CPU this end needs.
pub(super) fn say_cpu(side: &Side) {
    publish(side, crate::sys::current_cpu() as u32 + 1);
}

/// Writes `mine` (1 + a CPU) into `side`'s CPU word, only on a change, so
/// the peer's cached copy stays valid.
fn publish(side: &Side, mine: u32) {
    // Relaxed (both): a scheduling hint; a stale value costs only speed.
    if side.cpu.load(Ordering::Relaxed) != mine {
        side.cpu.store(mine, Ordering::Relaxed);
    }
}

/// Says in `side` where this thread runs, as it wakes the other side. A
/// side that never waits (a stream's writer whose reader keeps up with it)
/// would otherwise never say, and a reader that cannot see where its writer
/// runs takes it for one on another CPU: on a shared CPU it spun before
/// every sleep, burning the slice the writer needed (a 64 KiB stream with
/// both processes on one CPU moved 75 k msg/s in such runs against 97 k
/// in the others). On a path that makes a wake-up call, this costs next
/// to nothing.
pub(crate) fn publish_waker_cpu(side: &Side) {
    publish(side, my_cpu());
}

/// Threads of this process spinning adaptively right now.
static SPINNING: AtomicUsize = AtomicUsize::new(0);

/// Leave to spin adaptively: at most one thread per online CPU beyond the
/// first spins at a time in this process, so many threads waiting at once
/// (a server with a thread per client) sleep instead of taking the CPUs
/// their peers' replies need. Given back on drop.
struct SpinSlot;

impl SpinSlot {
    fn take() -> Option<Self> {
        let most = online_cpus().saturating_sub(1).max(1);
        // Relaxed: a count only; no other memory is published through it.
        if SPINNING.fetch_add(1, Ordering::Relaxed) < most {
            Some(Self)
        } else {
            SPINNING.fetch_sub(1, Ordering::Relaxed);
            None
        }
    }
}

impl Drop for SpinSlot {
    fn drop(&mut self) {
        // Relaxed: see `take`.
        SPINNING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Whether another CPU may take a peer on this thread's CPU (see `part`),
/// for a receiving end whose last message is recorded in `share`.
fn room(share: &Share) -> Room {
    if online_cpus() < 2 || !crate::sys::may_move() {
        return Room::Pinned;
    }
    if share.large() {
        // One CPU may be faster: `share` decides (counted as busy, so a
        // pipe whose messages turn small tries later).
        return Room::Busy;
    }
    match crate::sys::runnable_threads() {
        Some(runnable) if runnable <= online_cpus() => Room::Free,
        _ => Room::Busy,
    }
}

fn online_cpus() -> usize {
    static CPUS: OnceLock<usize> = OnceLock::new();
    *CPUS.get_or_init(crate::sys::online_cpus)
}

/// Spins for `length` (less if `deadline` comes first) without looking at
/// anything shared.
fn pause(length: Duration, deadline: Option<Instant>) {
    let start = Instant::now();
    let end = deadline.map_or(start + length, |d| d.min(start + length));
    while Instant::now() < end {
        for _ in 0..8 {
            spin_hint();
        }
    }
}

thread_local! {
    /// 1 + the CPU this thread ran on at its last wait that asked, and how
    /// many more waits may reuse the answer (see [`CPU_REUSES`]).
    static MY_CPU: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// 1 + the CPU this thread runs on: asked of the system, or the last
/// answer while it may be reused.
fn my_cpu() -> u32 {
    MY_CPU.with(|known| {
        let (cpu, reuses) = match known.get() {
            (cpu, reuses @ 1..) => (cpu, reuses),
            _ => (crate::sys::current_cpu() as u32 + 1, CPU_REUSES),
        };
        known.set((cpu, reuses - 1));
        cpu
    })
}

/// Makes this thread's next wait ask for its CPU.
fn forget_my_cpu() {
    MY_CPU.with(|known| known.set((0, 0)));
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

    /// [`Waiter::wait`] for a caller whose own poll has just found nothing.
    #[inline(never)]
    pub(crate) fn wait_missed<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        mut poll: impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        if deadline.is_some_and(|d| d <= Instant::now()) {
            return match scope
                .link
                .and_then(|l| l.check_peer_every(LIVENESS))
                .or_else(|| scope.gone())
            {
                Some(failure) => scope.after_gone(failure, poll),
                None => Err(Stop::Timeout),
            };
        }
        let apart = scope.publish_cpu(my_cpu());
        let plan = match scope.wait == Wait::Adaptive && self.share.large() {
            true => self.plan_share(scope, apart),
            false => {
                self.share.forget();
                Plan::Usual
            }
        };
        let spin = match scope.wait {
            Wait::Sleep => false,
            Wait::Spin => true,
            // A try at one CPU sleeps, so the peer's wake-up may bring this
            // thread to it (see `share`).
            Wait::Adaptive => apart && online_cpus() > 1 && plan != Plan::Try,
        };
        if spin && scope.wait == Wait::Adaptive {
            self.spins = self.spins.wrapping_add(1);
            if self.spins.is_multiple_of(YIELD_EVERY_SPINS) {
                // A pair of threads answering each other from spins never
                // sleeps, so threads woken for other pipes on these CPUs
                // would wait for the scheduler's slice: let one run. (With
                // none runnable this returns at once.)
                crate::sys::yield_cpu();
            }
        }
        if spin && apart {
            if scope.wait == Wait::Adaptive
                && let Some(taken) = scope.taken
                && self.pace.streaming(taken, scope.sent())
            {
                pause(STREAM_PAUSE, deadline);
            }
            // A reply often lands within a few hundred nanoseconds: poll a
            // while before paying for clock reads. (Not on the peer's CPU:
            // there the reply cannot come until this thread yields.)
            for polls in 0..BURST {
                spin_hint();
                if let Some(ready) = poll()? {
                    self.pace.heels = polls < HEELS_POLLS;
                    return Ok(ready);
                }
            }
        }
        if scope.wait == Wait::Adaptive && scope.taken.is_some() {
            // A round trip on the peer's CPU: hold once in a while, so the
            // scheduler may part the pair (see `part`).
            if apart {
                self.parting.apart();
            } else if self
                .parting
                .together(|| scope.sent(), || room(&self.share), Instant::now)
                && let Some(ready) = self.hold(scope, deadline, &mut poll)?
            {
                return Ok(ready);
            }
        }
        if scope.wait == Wait::Adaptive
            && (!apart || self.look_first(!scope.peer_said_cpu()))
            && let Some(ready) =
                self.yield_to_peer(scope, deadline, &mut poll, !apart && plan != Plan::Stay)?
        {
            return Ok(ready);
        }
        // From here the wait runs on or sleeps: the next one asks for its CPU.
        forget_my_cpu();
        // Past the first burst, an adaptive wait spins on only with leave
        // (see `SpinSlot`), held while it spins.
        let slot = match scope.wait {
            Wait::Adaptive if spin => SpinSlot::take(),
            _ => None,
        };
        if !spin || (scope.wait == Wait::Adaptive && slot.is_none()) {
            return self.block(scope, deadline, &mut poll);
        }
        let start = Instant::now();
        let spun = self.spin(scope, start, deadline, &mut poll);
        drop(slot);
        let result = match spun {
            Some(r) => r,
            None => self.block(scope, deadline, &mut poll),
        };
        self.learn(start.elapsed());
        result
    }

    /// Where a receiving end's wait after a large message should run (see
    /// `share`); kept out of the wait's common path.
    #[inline(never)]
    fn plan_share(&mut self, scope: &Scope<'_>, apart: bool) -> Plan {
        if scope.taken.is_none() || online_cpus() < 2 {
            return Plan::Usual;
        }
        // Relaxed: a scheduling hint.
        let peer = scope.peer().cpu.load(Ordering::Relaxed) as usize;
        let may_move = || peer != 0 && crate::sys::may_run_on(peer - 1);
        self.share.plan(!apart, scope.sent(), may_move)
    }

    /// Lets a peer that last ran on this thread's CPU run, a few times, in
    /// case it is about to answer: while this side yields instead of
    /// sleeping, the peer makes no wake-up call, and a stream fills the
    /// ring in batches instead of waking the reader for every message (on
    /// one CPU, sleeping at once moved 64 B messages at a tenth of the rate
    /// of yielding). A peer that is not runnable makes each yield return at
    /// once, so an idle wait costs at most [`SAME_CPU_YIELDS`] calls, then
    /// sleeps.
    ///
    /// While the peer is seen awake (working on what this side waits for)
    /// it yields on (with `on`), up to [`MAX_SPIN`], as a spinner on
    /// another CPU would spin: two unpinned processes the kernel had put on
    /// one CPU (its wake-ups pull a sleeper next to its waker) stayed there
    /// for whole runs when the waiter slept after a few yields, at 2.5×
    /// the round trip of two CPUs (144 B: 8 of 18 runs of a matrix, against
    /// none of ferry-spin's). Yielding alone does not part them either (each
    /// of the pair stays cache-hot, which the balancer leaves): a receiver
    /// holds now and then for that (see `part`). Where one CPU measures
    /// faster (large round trips on some machines, see `share`), the pair
    /// stays: `on` is false.
    fn yield_to_peer<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
        on: bool,
    ) -> Result<Option<R>, Stop> {
        // From the last of the first few yields: how long the peer has
        // been seen awake (no clock read before).
        let mut awake_since = None;
        let mut yields = 0;
        loop {
            crate::sys::yield_cpu();
            if let Some(ready) = poll()? {
                return Ok(Some(ready));
            }
            yields += 1;
            if scope.gone().is_some() || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if yields >= SAME_CPU_YIELDS {
                if !on || !scope.peer_awake() {
                    break;
                }
                let now = Instant::now();
                if now - *awake_since.get_or_insert(now) >= MAX_SPIN {
                    break;
                }
            }
        }
        Ok(None)
    }

    /// Polls without yielding for up to [`part::HOLD`], so a peer on this
    /// CPU waits in the run queue until the scheduler moves it to an idle
    /// CPU (see `part`); ends at the message, a deadline, a gone or
    /// sleeping peer, or the hold's end. Holds a [`SpinSlot`], so a server's
    /// threads do not hold all at once.
    #[inline(never)]
    fn hold<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<Option<R>, Stop> {
        let Some(_slot) = SpinSlot::take() else {
            // Another thread spins: this hold counts as made, so a try
            // ends after its holds whether or not any could begin.
            self.parting.held(Instant::now());
            return Ok(None);
        };
        // The answer may come from another CPU: ask again next wait,
        // which tells whether the pair parted (see `Parting::apart`).
        forget_my_cpu();
        let start = Instant::now();
        let result = 'hold: loop {
            for _ in 0..BURST {
                spin_hint();
                if let Some(ready) = poll()? {
                    break 'hold Some(ready);
                }
            }
            let now = Instant::now();
            if now - start >= part::HOLD
                || deadline.is_some_and(|d| now >= d)
                || scope.peer_asleep()
                || scope.gone().is_some()
            {
                break None;
            }
        };
        self.parting.held(Instant::now());
        Ok(result)
    }

    /// Whether a wait apart from a peer whose CPU is `unknown` yields
    /// first, as to a peer on this CPU: on the first [`FIRST_LOOKS`] such
    /// waits, and never once the peer has said where it runs.
    fn look_first(&mut self, unknown: bool) -> bool {
        if !unknown {
            self.first_looks = 0;
            return false;
        }
        let look = self.first_looks > 0;
        self.first_looks = self.first_looks.saturating_sub(1);
        look
    }

    /// Adapts the blind spin budget: reset by a wait that ended within it,
    /// halved by one that outlasted it.
    fn learn(&mut self, waited: Duration) {
        self.budget = if waited <= BLIND_SPIN {
            BLIND_SPIN
        } else {
            (self.budget / 2).max(MIN_SPIN)
        };
    }

    /// Busy-polls; `None` once an adaptive budget runs out.
    fn spin<R>(
        &mut self,
        scope: &Scope<'_>,
        start: Instant,
        deadline: Option<Instant>,
        poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Option<Result<R, Stop>> {
        let adaptive = scope.wait == Wait::Adaptive;
        let mut last_check = start;
        let mut polls = 32;
        loop {
            for _ in 0..polls {
                spin_hint();
                match poll() {
                    Ok(None) => {}
                    Ok(Some(r)) => return Some(Ok(r)),
                    Err(e) => return Some(Err(e.into())),
                }
            }
            polls = 32;
            if !adaptive && scope.sharing_cpu() {
                // A pure spinner on the peer's CPU would hold it for a whole
                // scheduler slice; let the peer run instead, and look once
                // each time this thread gets the CPU back.
                crate::sys::yield_cpu();
                polls = 1;
            }
            let now = Instant::now();
            // An adaptive spinner stops once it finds the peer on its CPU
            // (where the reply cannot come until it yields).
            if adaptive && (now - start >= scope.spin_limit(self.budget) || scope.sharing_cpu()) {
                return None;
            }
            if deadline.is_some_and(|d| now >= d) {
                return Some(Err(Stop::Timeout));
            }
            // The flags are cheap to read every round; asking the kernel
            // whether the peer process lives is not.
            let failure = if now - last_check >= LIVENESS {
                last_check = now;
                scope.check_gone()
            } else {
                scope.gone()
            };
            if let Some(failure) = failure {
                return Some(scope.after_gone(failure, poll));
            }
        }
    }

    /// Sleeps on the ring's bell until woken with the condition true
    /// ([`wake::sleep_until`]). Reads no clock unless there is a deadline,
    /// and sleeps without a timeout: the link's watcher wakes it when the
    /// peer hangs up. (Unwatched, it naps [`LIVENESS`] at a time and asks
    /// the kernel after each nap that ran out.) The peer is also checked
    /// every few wakes.
    fn block<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        let mut sleeper = Blocked {
            scope,
            deadline,
            poll,
            wakes: 0,
            ran_out: 0,
        };
        match wake::sleep_until(&wake::BELL, scope.me(), scope.peer(), &mut sleeper) {
            Err(Stop::Gone(failure)) => scope.after_gone(failure, poll),
            result => result,
        }
    }
}

/// A pipe's blocking wait, as the sleep loop sees it.
struct Blocked<'s, 'a, P> {
    scope: &'s Scope<'a>,
    deadline: Option<Instant>,
    poll: &'s mut P,
    /// Sleeps so far, to ask the kernel about the peer every few.
    wakes: u32,
    /// Naps of this wait that ran their whole length.
    ran_out: u32,
}

impl<R, P: FnMut() -> Result<Option<R>, Corrupt>> wake::Sleeper for Blocked<'_, '_, P> {
    type Ready = R;
    type Stop = Stop;

    fn poll(&mut self) -> Result<Option<R>, Corrupt> {
        (self.poll)()
    }

    /// Checks for the peer's death and the deadline; asks the kernel after
    /// a nap that ran out and every [`CHECK_EVERY_WAKES`] sleeps.
    fn before_sleep(&mut self, ran_out: bool) -> Result<Duration, Stop> {
        self.wakes = self.wakes.wrapping_add(1);
        if let Some(failure) = self.scope.gone() {
            return Err(Stop::Gone(failure));
        }
        if (ran_out || self.wakes.is_multiple_of(CHECK_EVERY_WAKES))
            && let Some(failure) = self.scope.check_gone()
        {
            return Err(Stop::Gone(failure));
        }
        // The watcher pushes a hang-up to this sleeper, so it needs no nap
        // to notice one: after the first few (see `WARM_NAPS`) it sleeps
        // without a timeout, and an idle wait makes no wakeups.
        self.ran_out += u32::from(ran_out);
        let mut nap = match self.scope.link.is_none_or(Link::watched) {
            true if self.ran_out < WARM_NAPS => WARM_NAP,
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
        if let Some(link) = self.scope.link {
            link.drain();
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::{FIRST_LOOKS, Pace, Waiter};

    #[test]
    fn a_fresh_end_yields_first_while_its_peer_has_not_said_where_it_runs() {
        let mut waiter = Waiter::default();
        let looks: Vec<bool> = (0..FIRST_LOOKS + 3)
            .map(|_| waiter.look_first(true))
            .collect();
        let expected: Vec<bool> = (0..FIRST_LOOKS + 3).map(|i| i < FIRST_LOOKS).collect();
        assert_eq!(looks, expected);
        // Once the peer has said, never again (a hint a peer may clear).
        let mut waiter = Waiter::default();
        assert!(!waiter.look_first(false));
        assert!(!waiter.look_first(true));
    }

    /// One wait that ends within its first polls (as the burst records
    /// it): whether it pauses first.
    fn wait(pace: &mut Pace, taken: u64, sent: u64) -> bool {
        let pause = pace.streaming(taken, sent);
        pace.heels = true;
        pause
    }

    #[test]
    fn a_reader_that_keeps_catching_up_with_a_stream_pauses_from_its_third_wait() {
        let mut pace = Pace::default();
        // The first wait has no history; the next two each follow a batch.
        assert!(!wait(&mut pace, 0, 7));
        assert!(!wait(&mut pace, 5, 7));
        assert!(wait(&mut pace, 12, 7));
        assert!(wait(&mut pace, 20, 7));
    }

    #[test]
    fn a_round_trip_never_pauses() {
        // One message per wait, and this end answers each.
        let mut pace = Pace::default();
        for i in 1..100u64 {
            assert!(!wait(&mut pace, i, i * 80));
        }
        // Pipelined: several messages per wait, but answered.
        let mut pace = Pace::default();
        for i in 1..100u64 {
            assert!(!wait(&mut pace, i * 4, i * 320));
        }
    }

    #[test]
    fn a_trickle_or_a_wait_that_lasted_ends_the_pausing() {
        let mut pace = Pace::default();
        for taken in [0, 5, 10, 15] {
            wait(&mut pace, taken, 0);
        }
        assert!(wait(&mut pace, 20, 0));
        // One message since the last wait: the reader keeps up.
        assert!(!wait(&mut pace, 21, 0));
        assert!(!wait(&mut pace, 30, 0));
        assert!(wait(&mut pace, 40, 0));
        // The last wait did not end at once (it spun on, or slept).
        pace.heels = false;
        assert!(!wait(&mut pace, 50, 0));
        assert!(!wait(&mut pace, 60, 0));
        assert!(wait(&mut pace, 70, 0));
        // This end answered between two waits.
        assert!(!wait(&mut pace, 80, 8));
    }
}
