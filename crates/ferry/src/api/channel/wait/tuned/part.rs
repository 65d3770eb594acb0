//! Whether a pair trading small messages on one CPU should try to part.
//!
//! Two CPUs win for small round trips on every machine measured, but the
//! scheduler does not part a pair that takes turns: each of the two ran a
//! microsecond ago, so the load balancer finds both cache-hot and leaves
//! them, and a sleeper is woken next to its waker. A spinner parts sooner:
//! its peer waits in the run queue without running, and the balancer moves
//! a task that has not run for half a millisecond
//! (`sched_migration_cost`) at its next tick. (The runs behind this are in
//! `docs/notes/2026-11-27-measurements.md`, "Tuned: parting a pair".)
//!
//! So a receiving end whose waits keep finding its peer on its own CPU
//! *holds* once in a while: it polls without yielding, for up to
//! [`HOLD`], so the peer turns cold in the run queue and an idle CPU's
//! balancer takes it; the peer's answer then comes from there. The kick
//! that makes an idle CPU balance comes with the busy CPU's scheduler tick
//! (1–10 ms apart by kernel build), and the same tick
//! ends the holder's slice once it has run about 1.5 ms: then the peer
//! runs on this CPU, is hot again, and answers here. So a hold parts the
//! pair only when a tick falls between 0.5 and about 1.5 ms into it (its
//! parted pairs parted 0.7 ms in); a hold begun just after a tick (as the
//! next one is, right after a preemption) never does. A *try* therefore
//! makes up to [`HOLDS`] holds, the next begun [`STEP`] later after the
//! last one's end than the one before, so one of them begins in that
//! window whatever the tick's length (1–10 ms by kernel build); between
//! holds the pair takes turns as before. A pair that cannot part pays
//! for each hold about the rest of a tick (measured: see the note above).
//!
//! Tries are spaced by waits, not a clock (no clock read on the path of a
//! pair that shares a CPU, outside a try): [`BACKOFF_FIRST`] waits after
//! the first, doubling to [`BACKOFF_MOST`], and back to the start once the
//! pair has run apart for [`APART_RESET`] waits. A try begins only where
//! another CPU may take the peer: not in a thread pinned to one CPU (it
//! asks its affinity once every [`BACKOFF_MOST`] waits), nor while more
//! threads are runnable in the system than there are CPUs (no CPU is
//! idle: a server's 100 clients on 2 CPUs, one `Select` thread serving
//! them all, made 20 % fewer round trips with their holds). Neither does
//! one that streams (it does not answer between
//! waits: on one CPU a stream moves small messages in batches, faster
//! than on two), nor one whose pair measured one CPU faster (large
//! messages, see `share`).

use std::time::{Duration, Instant};

/// Longest hold: past half a millisecond without running (Linux's
/// default `sched_migration_cost`) the peer may be moved at the next
/// scheduler tick, 1–10 ms apart by kernel build; a hold the scheduler
/// does not end sooner (see the module comment) ends here.
pub(crate) const HOLD: Duration = Duration::from_millis(12);
/// Holds in one try, and the step between their delays: the delays cover
/// 0 to 10.5 ms after the last hold's end in steps shorter than the
/// window a hold must begin in (about 1 ms, see the module comment).
const HOLDS: u8 = 16;
/// See [`HOLDS`].
const STEP: Duration = Duration::from_micros(700);
/// Waits in a row on the peer's CPU, each after answering, before the
/// first try.
const TOGETHER_FIRST: u32 = 4;
/// Waits on the peer's CPU between tries after the first; doubled after
/// each, up to [`BACKOFF_MOST`]. At 1.35 µs a round trip on one CPU, the
/// second try comes 22 ms after the first.
const BACKOFF_FIRST: u32 = 1 << 14;
/// See [`BACKOFF_FIRST`]: at most one try per this many waits.
const BACKOFF_MOST: u32 = 1 << 24;
/// Waits in a row apart after which the pair counts as parted: a later
/// meeting tries again after [`TOGETHER_FIRST`] waits.
const APART_RESET: u32 = 64;

/// Whether another CPU may take a peer that shares this thread's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// This thread may run on one CPU only.
    Pinned,
    /// No CPU is idle (more threads are runnable than there are CPUs), or
    /// it cannot be seen.
    Busy,
    /// A CPU may be idle.
    Free,
}

/// A try in progress: holds made, and when the last one ended.
#[derive(Debug, Clone, Copy)]
struct Try {
    holds: u8,
    last_end: Instant,
}

/// A receiving end's record of its waits on the peer's CPU.
#[derive(Debug)]
pub(crate) struct Parting {
    /// Waits in a row on the peer's CPU, up to the next try.
    together: u32,
    /// Waits in a row apart, up to [`APART_RESET`].
    apart: u32,
    /// This end's send position at the last look (see
    /// [`Parting::together`]).
    sent: u64,
    /// Waits together before the next look (0 during a try: every wait
    /// looks), the waits from a try's end to the next, and the backoff
    /// after that.
    due: u32,
    after: u32,
    backoff: u32,
    trying: Option<Try>,
}

impl Default for Parting {
    fn default() -> Self {
        Self {
            together: 0,
            apart: 0,
            sent: 0,
            due: TOGETHER_FIRST,
            after: BACKOFF_FIRST,
            backoff: BACKOFF_FIRST,
            trying: None,
        }
    }
}

impl Parting {
    /// Records a wait apart from the peer: a try in progress has worked
    /// (or the scheduler parted the pair anyway).
    #[inline]
    pub(crate) fn apart(&mut self) {
        if self.apart < APART_RESET {
            self.end_try();
            self.apart += 1;
            if self.apart == APART_RESET {
                *self = Self {
                    apart: APART_RESET,
                    sent: self.sent,
                    ..Self::default()
                };
            }
        }
    }

    /// Records a wait on the peer's CPU and tells whether it should hold
    /// (then [`Parting::held`] follows). Counts, and compares with the
    /// count due; `sent` (this end's send position, to tell whether it
    /// answered since the last look), `room` and `now` are asked only
    /// when a try is due, and at each wait of a try.
    #[inline]
    pub(crate) fn together(
        &mut self,
        sent: impl FnOnce() -> u64,
        room: impl FnOnce() -> Room,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        self.apart = 0;
        self.together += 1;
        if self.together < self.due {
            return false;
        }
        self.look(sent(), room, now)
    }

    /// [`Parting::together`] once a try is due or under way.
    #[inline(never)]
    fn look(
        &mut self,
        sent: u64,
        room: impl FnOnce() -> Room,
        now: impl FnOnce() -> Instant,
    ) -> bool {
        self.together = 0;
        let answered = sent != self.sent;
        self.sent = sent;
        if !answered {
            // A stream's reader, or a pause: no try, or no more of this
            // one; look again as due.
            self.end_try();
            return false;
        }
        if let Some(attempt) = self.trying {
            return now() - attempt.last_end >= STEP * u32::from(attempt.holds);
        }
        let room = room();
        if room == Room::Pinned {
            // Ask again much later (a pin can be lifted).
            self.due = BACKOFF_MOST;
            return false;
        }
        // A busy system counts as a try that failed.
        self.after = self.backoff;
        self.backoff = self.backoff.saturating_mul(2).min(BACKOFF_MOST);
        if room == Room::Busy {
            self.due = self.after;
            return false;
        }
        // Every wait of the try looks.
        self.due = 0;
        self.trying = Some(Try {
            holds: 0,
            last_end: now(),
        });
        true
    }

    /// Ends a try: the next is due after its backoff.
    fn end_try(&mut self) {
        if self.trying.take().is_some() {
            self.due = self.after;
        }
    }

    /// Records a hold that ended at `end` with the pair not known parted.
    pub(crate) fn held(&mut self, end: Instant) {
        if let Some(attempt) = &mut self.trying {
            attempt.holds += 1;
            attempt.last_end = end;
            if attempt.holds >= HOLDS {
                self.end_try();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round trips on one CPU, one per `gap`, each hold lasting `hold`
    /// and never parting the pair: the waits (1-based) that hold.
    fn holds(parting: &mut Parting, waits: u64, gap: Duration, hold: Duration) -> Vec<u64> {
        let mut now = Instant::now();
        let mut held = Vec::new();
        for i in 1..=waits {
            if parting.together(|| i, || Room::Free, || now) {
                held.push(i);
                now += hold;
                parting.held(now);
            }
            now += gap;
        }
        held
    }

    #[test]
    fn a_try_holds_at_ever_later_phases_then_the_next_waits_its_backoff() {
        let mut parting = Parting::default();
        let gap = Duration::from_micros(100);
        let hold = Duration::from_millis(4);
        let held = holds(&mut parting, 40_000, gap, hold);
        let first = u64::from(TOGETHER_FIRST);
        // The try: the first hold at once, hold k (from 0) at least k steps
        // after the last one's end, one wait per 100 µs.
        let mut expected = vec![first];
        for k in 1..u64::from(HOLDS) {
            let step = u64::try_from(STEP.as_micros()).unwrap() * k;
            expected.push(expected.last().unwrap() + step.div_ceil(100));
        }
        let end = *expected.last().unwrap();
        // The next try after its backoff of waits together.
        expected.push(end + u64::from(BACKOFF_FIRST));
        assert_eq!(held[..expected.len()], expected[..]);
    }

    #[test]
    fn a_stream_or_a_pinned_thread_never_holds() {
        // Not answering between waits: a stream's reader.
        let mut parting = Parting::default();
        let now = Instant::now();
        assert!((0..100_000).all(|_| !parting.together(|| 0, || Room::Free, || now)));
        // Pinned: asked once, then not for a long while.
        let mut parting = Parting::default();
        let mut asked = 0;
        for i in 1..=100_000u64 {
            let room = || {
                asked += 1;
                Room::Pinned
            };
            assert!(!parting.together(|| i, room, || now));
        }
        assert_eq!(asked, 1);
    }

    #[test]
    fn a_try_ends_when_the_end_stops_answering() {
        let mut parting = Parting::default();
        let now = Instant::now();
        let first = u64::from(TOGETHER_FIRST);
        assert!((1..=first).any(|i| parting.together(|| i, || Room::Free, || now)));
        parting.held(now);
        // The same send position: the try ends, and the next look is a
        // backoff away (not at every wait).
        assert!(!parting.together(|| first, || Room::Free, || now));
        assert_eq!(parting.due, BACKOFF_FIRST);
    }

    #[test]
    fn a_busy_system_holds_off_as_a_failed_try_does() {
        let mut parting = Parting::default();
        let now = Instant::now();
        let mut asked = Vec::new();
        for i in 1..=100_000u64 {
            let room = || {
                asked.push(i);
                Room::Busy
            };
            assert!(!parting.together(|| i, room, || now));
        }
        let first = u64::from(TOGETHER_FIRST);
        let second = first + u64::from(BACKOFF_FIRST);
        let third = second + 2 * u64::from(BACKOFF_FIRST);
        assert_eq!(asked, [first, second, third]);
    }

    #[test]
    fn a_pair_that_parted_tries_again_soon_when_it_meets_again() {
        let mut parting = Parting::default();
        let now = Instant::now();
        let first = u64::from(TOGETHER_FIRST);
        let mut sent = 0;
        let mut hold = |parting: &mut Parting, waits: u64| -> Vec<u64> {
            (1..=waits)
                .filter(|_| {
                    sent += 7;
                    parting.together(|| sent, || Room::Free, || now)
                })
                .collect()
        };
        assert_eq!(hold(&mut parting, first), [first]);
        // The try's hold parted the pair: a wait apart ends the try ...
        parting.apart();
        for _ in 0..APART_RESET - 2 {
            parting.apart();
        }
        // ... but a few waits apart do not count as parted: no new try yet.
        assert!(hold(&mut parting, 1000).is_empty());
        // A run of them does.
        for _ in 0..APART_RESET {
            parting.apart();
        }
        assert_eq!(hold(&mut parting, first), [first]);
    }
}
