//! The policies: pure functions from what a wait has seen to its next step.
//!
//! The default ([`adaptive`]) follows three rules (`DESIGN.md`, Waiting):
//!
//! 1. **Never spin on one CPU, or against a peer on this CPU.** The answer
//!    cannot come while this thread holds the CPU the peer needs: yield to
//!    the peer while it works, then sleep.
//! 2. **Spin while the peer is awake on another CPU, bounded.** It is
//!    working on what this side waits for; a spin catches the answer
//!    without the tens of microseconds a cross-CPU wake-up costs.
//! 3. **Sleep once the peer sleeps** (after a short grace, since a peer
//!    this side has just woken takes one wake-up to say it is awake), or
//!    once another thread has wanted this CPU (the mechanism tells: a
//!    step of this wait or a recent one lost the CPU): spinning would take
//!    the slices that thread needs.
//!
//! It reads nothing but what the mechanism hands it ([`Seen`]): no clock,
//! no file, no system call; every branch is a row of the table test below.
//! [`spin`] and [`sleep`] are the two plain policies a user may choose.

use std::time::Duration;

/// What the wait sees of its peer's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// Running or runnable: working on what this side waits for.
    Awake,
    /// Asleep, or about to sleep: nothing comes until something wakes it.
    Asleep,
    /// Not visible from here (a lone receiving half, an in-process queue).
    Unseen,
}

/// Where the peer last said it runs, against this thread's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// On this thread's CPU.
    Here,
    /// On another CPU.
    Elsewhere,
    /// Not said yet (a fresh pipe), or not published (an in-process queue).
    Unknown,
}

/// What a wait has seen so far: the policy's whole input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    /// Time since the wait's first step ended (zero before).
    pub spun: Duration,
    /// Steps taken in this wait.
    pub steps: u32,
    /// The peer's state, as last read.
    pub peer: Peer,
    /// Where the peer runs, as last read.
    pub place: Place,
    /// CPUs online.
    pub cpus: usize,
    /// Waits of this end since a step of one found this thread's CPU taken
    /// by another thread (0: in this wait; saturates).
    pub calm: u32,
    /// Waits of this end so far, this one included (wraps).
    pub waits: u32,
    /// Waits in a row, this one included, that found this receiver
    /// catching up with a one-way stream (see `Pace`; 0 for a sender).
    pub streak: u8,
}

/// A wait's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Poll this many times, with a spin hint before each.
    Poll(u32),
    /// Give the CPU to another runnable thread (`sched_yield`), then poll.
    Yield,
    /// Sleep on the futex until woken, the deadline or the peer's end.
    Sleep,
    /// Spin this long without looking, so a batch builds.
    Pause(Duration),
}

/// Polls between two clock reads: long enough that reading the clock
/// costs little beside them, short enough (under a few microseconds on any
/// core: a spin hint is 1 to 150 cycles) that a step losing the CPU to
/// another thread stands out (see `super::STALL`).
#[cfg(not(loom))]
pub const BURST: u32 = 64;
/// Under loom, every spin hint is a scheduling point (`loom::thread::
/// yield_now`): two polls a burst keep a spin through [`AWAKE_SPIN`] (a
/// hundred steps of the fake clock) within what `tests/loom_wait.rs` can
/// explore, and change no decision (no policy reads the burst's length).
#[cfg(loom)]
pub const BURST: u32 = 2;
/// Longest spin while the peer is awake on another CPU: long enough for
/// the peer to copy a large message (1 MiB in and out: 100–500 µs), short
/// enough that a peer busy longer is slept through (its wake-up then
/// costs a few percent of the wait).
pub const AWAKE_SPIN: Duration = Duration::from_millis(1);
/// Longest spin once the peer is seen asleep: a few cross-CPU wake-ups
/// (25–50 µs on the machines measured), so a peer this side has just woken
/// can say it is awake before this side gives up.
pub const WAKE_GRACE: Duration = Duration::from_micros(100);
/// Longest spin where the peer's state is not seen: about one cross-CPU
/// wake-up, beyond which sleeping costs no more.
pub const BLIND_SPIN: Duration = Duration::from_micros(50);
/// From this far into a spin, one step in [`YIELD_EVERY`] is a yield: a
/// thread that wants this CPU gets it (and the mechanism sees it took
/// it), at one system call per few bursts in waits already long.
pub const YIELD_AFTER: Duration = Duration::from_micros(50);
/// See [`YIELD_AFTER`].
pub const YIELD_EVERY: u32 = 8;
/// Yields to a peer on this CPU before sleeping, when it is not seen at
/// work (it may have just been woken, and says so only once it runs).
pub const HERE_YIELDS: u32 = 4;
/// How long a receiver that keeps catching up with a stream
/// (see `Pace`) waits before it looks at the ring again: past a few
/// microseconds the gain in messages a second flattens while the latency
/// a streamed message may gain grows, so this stays a tenth of one
/// cross-CPU wake-up (25-50 µs), the price Sleep's batching charges every
/// batch (figures: `docs/notes/2026-11-27-measurements.md`, "Stream pause").
pub const STREAM_PAUSE: Duration = Duration::from_micros(4);
/// Waits in a row that must look like a stream before a reader pauses.
pub const STREAM_WAITS: u8 = 2;
/// Waits after losing the CPU to another thread during which this end
/// sleeps without spinning.
pub const CALM_WAITS: u32 = 64;
/// One wait in this many first yields, so a pair answering each other
/// from spins (it never sleeps, and rarely waits long enough to yield)
/// lets a thread woken on its CPU run within microseconds, not a slice.
pub const FAIR_EVERY: u32 = 1024;

/// The default policy (see the module comment).
pub fn adaptive(seen: &Seen) -> Step {
    // Rule 3, the crowded half: another thread wanted this CPU lately.
    if seen.calm < CALM_WAITS {
        return Step::Sleep;
    }
    // Fairness: once in a while, let a waiting thread run first.
    if seen.steps == 0 && seen.waits.is_multiple_of(FAIR_EVERY) {
        return Step::Yield;
    }
    // Rule 1: one CPU, or a peer on this one.
    if seen.cpus < 2 || seen.place == Place::Here {
        let at_work = seen.peer == Peer::Awake && seen.spun < AWAKE_SPIN;
        return match seen.steps < HERE_YIELDS || at_work {
            true => Step::Yield,
            false => Step::Sleep,
        };
    }
    // Rule 2, and rule 3's grace. A peer that has not said where it runs
    // gets the blind spin at most: a short one, as crossbeam's backoff
    // makes, which also keeps a fresh pair from sleeping into one CPU.
    let limit = match (seen.peer, seen.place) {
        (_, Place::Unknown) | (Peer::Unseen, _) => BLIND_SPIN,
        (Peer::Awake, _) => AWAKE_SPIN,
        (Peer::Asleep, _) => WAKE_GRACE,
    };
    if seen.spun >= limit {
        return Step::Sleep;
    }
    // A reader at a stream's heels lets a batch build before it looks.
    if seen.steps == 0 && seen.streak >= STREAM_WAITS {
        return Step::Pause(STREAM_PAUSE);
    }
    match seen.spun >= YIELD_AFTER && seen.steps.is_multiple_of(YIELD_EVERY) {
        true => Step::Yield,
        false => Step::Poll(BURST),
    }
}

/// Busy-polling, never asleep (`Wait::Spin`): polls, except on one CPU or
/// beside a peer on this CPU, where it yields between looks (a pure spin
/// there would hold the CPU the answer needs for a whole slice).
pub fn spin(seen: &Seen) -> Step {
    match seen.cpus < 2 || seen.place == Place::Here {
        true => Step::Yield,
        false => Step::Poll(BURST),
    }
}

/// Asleep at once (`Wait::Sleep`).
pub fn sleep(_: &Seen) -> Step {
    Step::Sleep
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    /// A wait on two CPUs, its peer awake elsewhere, 5 µs and 3 steps in.
    const BASE: Seen = Seen {
        spun: Duration::from_micros(5),
        steps: 3,
        peer: Peer::Awake,
        place: Place::Elsewhere,
        cpus: 2,
        calm: u32::MAX,
        waits: 7,
        streak: 0,
    };

    /// One row: what changes from [`BASE`], and the step expected.
    type Row = (&'static str, fn(&mut Seen), Step);

    #[test]
    fn the_default_policy_as_a_table() {
        let rows: &[Row] = &[
            ("peer awake elsewhere: spin", |_| {}, Step::Poll(BURST)),
            (
                "first step of a wait",
                |s| (s.steps, s.spun) = (0, Duration::ZERO),
                Step::Poll(BURST),
            ),
            (
                "one wait in FAIR_EVERY yields first",
                |s| (s.steps, s.waits) = (0, 2 * FAIR_EVERY),
                Step::Yield,
            ),
            (
                "  ...only as its first step",
                |s| s.waits = 2 * FAIR_EVERY,
                Step::Poll(BURST),
            ),
            (
                "long spin: one step in YIELD_EVERY yields",
                |s| (s.spun, s.steps) = (YIELD_AFTER, 2 * YIELD_EVERY),
                Step::Yield,
            ),
            (
                "  ...the others poll",
                |s| (s.spun, s.steps) = (YIELD_AFTER, 2 * YIELD_EVERY + 1),
                Step::Poll(BURST),
            ),
            (
                "peer awake past AWAKE_SPIN: sleep",
                |s| s.spun = AWAKE_SPIN,
                Step::Sleep,
            ),
            (
                "peer asleep within the grace: spin",
                |s| (s.peer, s.spun) = (Peer::Asleep, 90 * US),
                Step::Poll(BURST),
            ),
            (
                "peer asleep past the grace: sleep",
                |s| (s.peer, s.spun) = (Peer::Asleep, WAKE_GRACE),
                Step::Sleep,
            ),
            (
                "peer unseen: a blind spin",
                |s| s.peer = Peer::Unseen,
                Step::Poll(BURST),
            ),
            (
                "peer unseen past BLIND_SPIN: sleep",
                |s| (s.peer, s.spun) = (Peer::Unseen, BLIND_SPIN),
                Step::Sleep,
            ),
            (
                "peer on this CPU, at work: yield",
                |s| (s.place, s.spun) = (Place::Here, 500 * US),
                Step::Yield,
            ),
            (
                "peer on this CPU, busy past AWAKE_SPIN: sleep",
                |s| (s.place, s.spun, s.steps) = (Place::Here, AWAKE_SPIN, HERE_YIELDS),
                Step::Sleep,
            ),
            (
                "peer on this CPU, asleep: a few yields",
                |s| (s.place, s.peer) = (Place::Here, Peer::Asleep),
                Step::Yield,
            ),
            (
                "  ...then sleep",
                |s| (s.place, s.peer, s.steps) = (Place::Here, Peer::Asleep, HERE_YIELDS),
                Step::Sleep,
            ),
            (
                "peer's CPU unknown: a blind spin",
                |s| s.place = Place::Unknown,
                Step::Poll(BURST),
            ),
            (
                "  ...no longer than BLIND_SPIN",
                |s| (s.place, s.spun) = (Place::Unknown, BLIND_SPIN),
                Step::Sleep,
            ),
            ("one CPU online: never spin", |s| s.cpus = 1, Step::Yield),
            (
                "  ...sleep once the peer sleeps",
                |s| (s.cpus, s.peer, s.steps) = (1, Peer::Asleep, HERE_YIELDS),
                Step::Sleep,
            ),
            ("CPU taken in this wait: sleep", |s| s.calm = 0, Step::Sleep),
            (
                "CPU taken a few waits ago: sleep",
                |s| s.calm = CALM_WAITS - 1,
                Step::Sleep,
            ),
            (
                "a reader at a stream's heels: a batch builds first",
                |s| (s.steps, s.streak) = (0, STREAM_WAITS),
                Step::Pause(STREAM_PAUSE),
            ),
            (
                "  ...then it looks",
                |s| s.streak = STREAM_WAITS,
                Step::Poll(BURST),
            ),
            (
                "  ...not yet a stream",
                |s| (s.steps, s.streak) = (0, STREAM_WAITS - 1),
                Step::Poll(BURST),
            ),
            (
                "  ...never on the peer's CPU",
                |s| (s.steps, s.streak, s.place) = (0, STREAM_WAITS, Place::Here),
                Step::Yield,
            ),
            (
                "calm again: spin",
                |s| s.calm = CALM_WAITS,
                Step::Poll(BURST),
            ),
        ];
        let mut wrong = Vec::new();
        for (name, change, expected) in rows {
            let mut seen = BASE;
            change(&mut seen);
            let step = adaptive(&seen);
            if step != *expected {
                wrong.push(format!(
                    "{name}: {step:?}, expected {expected:?} ({seen:?})"
                ));
            }
        }
        assert!(wrong.is_empty(), "rows that differ:\n{}", wrong.join("\n"));
    }

    #[test]
    fn spin_never_sleeps_and_sleep_never_spins() {
        for (place, cpus) in [
            (Place::Elsewhere, 2),
            (Place::Unknown, 2),
            (Place::Here, 2),
            (Place::Elsewhere, 1),
        ] {
            let seen = Seen {
                place,
                cpus,
                spun: Duration::from_secs(1),
                ..BASE
            };
            let yields = place == Place::Here || cpus < 2;
            assert_eq!(
                spin(&seen),
                if yields {
                    Step::Yield
                } else {
                    Step::Poll(BURST)
                }
            );
            assert_eq!(sleep(&seen), Step::Sleep);
        }
    }
}
