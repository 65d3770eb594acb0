//! The opt-in policy ([`Wait::Tuned`](super::Wait::Tuned)): the default's
//! rules plus the heuristics measured on earlier machines, each kept out
//! of the default because it reads what a sandbox may deny, holds a CPU to
//! move another process, or wins on one machine only.
//!
//! - **Stream pauses** (`Pace`): a receiver that keeps catching up with a
//!   one-way stream lets a batch build before it looks again
//!   ([`STREAM_PAUSE`]): reading at the writer's heels, each look takes the
//!   line the writer is about to write.
//! - **Parting holds** (`part`): a small round trip's pair that finds
//!   itself on one CPU holds the CPU now and then, so the scheduler moves
//!   the peer to an idle one. Asks the thread's affinity.
//! - **One-CPU trials** (`share`): a receiving end times large round trips
//!   on one CPU and on two, per message size, and where one CPU wins it
//!   sleeps a few waits so the scheduler may bring it next to its peer.
//! - **Spin slots** (`SpinSlot`): at most one spinning thread per CPU
//!   beyond the first, per process.
//! - **First looks** ([`FIRST_LOOKS`]): a fresh pipe's first waits yield
//!   as to a peer on this CPU.
//!
//! Its own loop (it predates the mechanism in `crate::transport::wait`); it shares the
//! pipe's scope, its sleep and its CPU bookkeeping with the default.

mod part;
mod share;

use crate::base::sync::AtomicUsize;
use std::time::{Duration, Instant};

use self::part::{Parting, Room};
use self::share::{Plan, Share};
use super::{Scope, Stop, block, forget_my_cpu, my_cpu};
use crate::base::sync::{Ordering, spin_hint};
use crate::transport::ring::Corrupt;
use crate::transport::wait::policy::{STREAM_PAUSE, STREAM_WAITS};
use crate::transport::wait::{HEELS_POLLS, LIVENESS, Pace, online_cpus};

/// Longest spin of the tuned policy while the peer is awake (working on
/// what this side waits for): a 1 MiB message copied in and out takes
/// 100–500 µs on the machines measured, and a peer busy for longer than
/// this is better slept through (the wake-up costs under 5 % of the wait).
const MAX_SPIN: Duration = Duration::from_millis(1);
/// Longest spin of the tuned policy while the peer sleeps: twice the
/// slowest cross-CPU wake-up measured (25–50 µs on the machines measured), so a peer this side's message has just woken can say so
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
/// unless the peer is seen awake (see `Tuned::yield_to_peer`).
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

/// One direction's waiting state: the adaptive spin budget.
#[derive(Debug)]
pub(crate) struct Tuned {
    budget: Duration,
    /// Adaptive spins begun, to give the CPU away every
    /// [`YIELD_EVERY_SPINS`].
    spins: u32,
    /// A receiver's view of whether it reads a stream.
    pace: Pace,
    /// A receiver's record of whether large round trips run faster with
    /// the pair on one CPU.
    share: Share,
    /// Waits left that yield first while the peer's CPU is not known (see
    /// [`FIRST_LOOKS`]).
    first_looks: u8,
    /// A receiver's record of its waits on its peer's CPU (see `part`).
    parting: Parting,
}

impl Default for Tuned {
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

impl Scope<'_> {
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

    /// Whether the peer last published the CPU this thread runs on now.
    fn sharing_cpu(&self) -> bool {
        // Relaxed: a scheduling hint.
        self.peer().cpu.load(Ordering::Relaxed) == crate::base::sys::current_cpu() as u32 + 1
    }

    /// Publishes this thread's CPU (writing only on a change, so the
    /// peer's cached copy stays valid) and tells whether the peer last ran
    /// on another one.
    fn publish_apart(&self, mine: u32) -> bool {
        self.publish_cpu(mine);
        // Relaxed: a scheduling hint; a stale value costs only speed.
        mine != self.peer().cpu.load(Ordering::Relaxed)
    }
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
    if online_cpus() < 2 || !crate::base::sys::may_move() {
        return Room::Pinned;
    }
    if share.large() {
        // One CPU may be faster: `share` decides (counted as busy, so a
        // pipe whose messages turn small tries later).
        return Room::Busy;
    }
    Room::Free
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

impl Tuned {
    /// Records the length of the message just received.
    pub(crate) fn received(&mut self, len: usize) {
        self.share.last_len = len;
    }

    /// Waits as [`super::Waiter::wait_missed`] does, with this policy.
    #[inline(never)]
    pub(crate) fn wait_missed<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        mut poll: impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        let apart = scope.publish_apart(my_cpu());
        let plan = match self.share.large() {
            true => self.plan_share(scope, apart),
            false => {
                self.share.forget();
                Plan::Usual
            }
        };
        // A try at one CPU sleeps, so the peer's wake-up may bring this
        // thread to it (see `share`).
        let spin = apart && online_cpus() > 1 && plan != Plan::Try;
        if spin {
            self.spins = self.spins.wrapping_add(1);
            if self.spins.is_multiple_of(YIELD_EVERY_SPINS) {
                // A pair of threads answering each other from spins never
                // sleeps, so threads woken for other pipes on these CPUs
                // would wait for the scheduler's slice: let one run. (With
                // none runnable this returns at once.)
                crate::base::sys::yield_cpu();
            }
        }
        if spin && apart {
            if let Some(taken) = scope.taken
                && self.pace.next(taken, || scope.sent()) >= STREAM_WAITS
            {
                pause(STREAM_PAUSE, deadline);
            }
            // A reply often lands within a few hundred nanoseconds: poll a
            // while before paying for clock reads. (Not on the peer's CPU:
            // there the reply cannot come until this thread yields.)
            for polls in 0..BURST as u32 {
                spin_hint();
                if let Some(ready) = poll()? {
                    self.pace.heels(polls < HEELS_POLLS);
                    return Ok(ready);
                }
            }
        }
        if scope.taken.is_some() {
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
        if (!apart || self.look_first(!scope.peer_said_cpu()))
            && let Some(ready) =
                self.yield_to_peer(scope, deadline, &mut poll, !apart && plan != Plan::Stay)?
        {
            return Ok(ready);
        }
        // From here the wait runs on or sleeps: the next one asks for its CPU.
        forget_my_cpu();
        // Past the first burst, an adaptive wait spins on only with leave
        // (see `SpinSlot`), held while it spins.
        let slot = match spin {
            true => SpinSlot::take(),
            false => None,
        };
        if slot.is_none() {
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
        let may_move = || peer != 0 && crate::base::sys::may_run_on(peer - 1);
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
            crate::base::sys::yield_cpu();
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
        let mut last_check = start;
        loop {
            for _ in 0..32 {
                spin_hint();
                match poll() {
                    Ok(None) => {}
                    Ok(Some(r)) => return Some(Ok(r)),
                    Err(e) => return Some(Err(e.into())),
                }
            }
            let now = Instant::now();
            // The spin stops once it finds the peer on its CPU (where the
            // reply cannot come until it yields).
            if now - start >= scope.spin_limit(self.budget) || scope.sharing_cpu() {
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

    /// The pipe's sleep, as the default's.
    fn block<R>(
        &mut self,
        scope: &Scope<'_>,
        deadline: Option<Instant>,
        poll: &mut impl FnMut() -> Result<Option<R>, Corrupt>,
    ) -> Result<R, Stop> {
        block(scope, deadline, poll, super::LOOKS_ASLEEP)
    }
}

#[cfg(test)]
mod tests {
    use super::{FIRST_LOOKS, Tuned};

    #[test]
    fn a_fresh_end_yields_first_while_its_peer_has_not_said_where_it_runs() {
        let mut waiter = Tuned::default();
        let looks: Vec<bool> = (0..FIRST_LOOKS + 3)
            .map(|_| waiter.look_first(true))
            .collect();
        let expected: Vec<bool> = (0..FIRST_LOOKS + 3).map(|i| i < FIRST_LOOKS).collect();
        assert_eq!(looks, expected);
        // Once the peer has said, never again (a hint a peer may clear).
        let mut waiter = Tuned::default();
        assert!(!waiter.look_first(false));
        assert!(!waiter.look_first(true));
    }
}
