//! Whether a pair trading large messages should share one CPU.
//!
//! An adaptive waiter spins while its peer works on another CPU, which
//! keeps the two processes on two CPUs: right for small messages on every
//! machine measured. For large ones it depends on the machine: a message
//! copied within one core's cache beat one pulled across cores on one
//! machine, the two were even on another, and at 20 KiB one CPU lost
//! (figures: `docs/notes/2026-11-27-measurements.md`, "Tuned: sharing a CPU"). So it is measured per
//! pipe end and message size class, not assumed: a receiving end that
//! answers each message (a round trip) times the period between its waits
//! on each side of the choice, and
//!
//! - on two CPUs, with periods measured there, it tries one: it sleeps
//!   instead of spinning, a few waits in a row, which lets the scheduler
//!   wake it next to its peer (the kernel's wake-ups pull a sleeper to its
//!   waker's CPU, where that CPU is allowed and the scheduler judges it
//!   better; often, not always: sleeping pairs shared a CPU in 23 of 24
//!   runs of one batch and 12 of 24 of another). A try that leaves it apart,
//!   or puts it together only for a few waits ([`HOLD`]), is not repeated
//!   for a while ([`BACKOFF_FIRST`], doubling);
//! - on one CPU it stays there (it sleeps after a few yields, as before
//!   a peer on its CPU was yielded to on) while one CPU measures faster,
//!   and otherwise yields to the awake peer on, which lets an idle CPU take
//!   one of the pair.
//!
//! Once one CPU measures slower, the end never tries it again; a thread
//! that may not run on its peer's CPU (pinned apart) never tries at all.

use std::time::Instant;

/// The smallest message a pair may share a CPU for: below this, two CPUs
/// win on every machine measured, by 2× or more.
pub(crate) const MIN_LEN: usize = 8 * 1024;
/// Size classes: powers of two from [`MIN_LEN`]; larger share the last.
const CLASSES: usize = 8;
/// Periods each way before a class's choice is made.
const SAMPLES: u32 = 8;
/// One CPU is chosen when its period is at most this share of two CPUs'
/// (in 64ths: 7/8), so noise does not flip a choice that gains little.
const BETTER: u64 = 56;
/// Waits a try sleeps through, apart, before it gives up.
const TRY_WAITS: u8 = 8;
/// Waits before the first try is repeated after a failed one; doubled on
/// each failure, up to [`BACKOFF_MOST`].
const BACKOFF_FIRST: u32 = 256;
/// Waits in a row on one CPU after which a move has held: a pair the
/// scheduler parts sooner counts as a failed try (on some machines it
/// parted a pair within a few round trips, again and again).
const HOLD: u32 = 64;
/// See [`BACKOFF_FIRST`].
const BACKOFF_MOST: u32 = 1 << 16;

/// What a receiving end's next wait does about where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// As for any message: spin on two CPUs, yield to the peer on one.
    Usual,
    /// On the peer's CPU, where one CPU measures faster: stay (sleep after
    /// a few yields rather than yield on while the peer works).
    Stay,
    /// On two CPUs, where one may be faster: sleep, so the scheduler may
    /// wake this thread on the peer's CPU.
    Try,
}

/// One size class's periods in ns: the shortest of the first [`SAMPLES`],
/// then smoothed (1/8 of each new one). The first periods in a state can
/// be far off its norm (a fresh pipe's first copies fault their pages in:
/// 500 µs against 65 at 248,832 B in one log), and a choice made on them
/// would stand: the state not chosen is not measured again.
#[derive(Debug, Default, Clone, Copy)]
struct Periods {
    /// `[two CPUs, one CPU]`.
    ns: [u64; 2],
    count: [u32; 2],
}

impl Periods {
    fn add(&mut self, one: bool, ns: u64) {
        let i = usize::from(one);
        self.ns[i] = match self.count[i] {
            0 => ns,
            1..SAMPLES => self.ns[i].min(ns),
            _ => self.ns[i] - self.ns[i] / 8 + ns / 8,
        };
        self.count[i] = self.count[i].saturating_add(1);
    }

    /// Whether one CPU is faster: `None` until both are measured.
    fn one_faster(&self) -> Option<bool> {
        (self.count[0] >= SAMPLES && self.count[1] >= SAMPLES)
            .then(|| self.ns[1].saturating_mul(64) <= self.ns[0].saturating_mul(BETTER))
    }
}

/// The previous wait, to time the period to this one.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: Instant,
    class: usize,
    /// Whether the pair shared a CPU at that wait.
    one: bool,
    /// Whether that wait was a try (its period is a move, not a state).
    tried: bool,
    /// This end's send position then.
    sent: u64,
}

/// A receiving end's record of where large round trips run faster.
#[derive(Debug, Default)]
pub(crate) struct Share {
    /// The last message's length (set by the receiver).
    pub(crate) last_len: usize,
    last: Option<Mark>,
    classes: [Periods; CLASSES],
    /// Waits left in the current try.
    trying: u8,
    /// Waits in a row on one CPU, up to [`HOLD`].
    together: u32,
    /// Waits before the next try may begin, and the next backoff's length.
    backoff: u32,
    backoff_next: u32,
}

/// The size class of a message of `len` bytes (at least [`MIN_LEN`]).
fn class_of(len: usize) -> usize {
    let octaves = (len / MIN_LEN).ilog2() as usize;
    octaves.min(CLASSES - 1)
}

impl Share {
    /// Whether the last message was large enough for [`Share::plan`].
    #[inline]
    pub(crate) fn large(&self) -> bool {
        self.last_len >= MIN_LEN
    }

    /// Forgets the last wait (a small message came between: the period to
    /// the next large one is no round trip).
    #[inline]
    pub(crate) fn forget(&mut self) {
        self.last = None;
    }

    /// Records the period since the last wait and plans this one. `one`:
    /// whether the peer last said it runs on this thread's CPU; `sent`:
    /// this end's send position; `may_move`: whether this thread may run
    /// on the peer's CPU (asked only when a try would begin).
    pub(crate) fn plan(&mut self, one: bool, sent: u64, may_move: impl FnOnce() -> bool) -> Plan {
        if !self.large() {
            self.forget();
            return Plan::Usual;
        }
        self.plan_at(Instant::now(), one, sent, may_move)
    }

    /// [`Share::plan`] at `now`, for a large message.
    fn plan_at(
        &mut self,
        now: Instant,
        one: bool,
        sent: u64,
        may_move: impl FnOnce() -> bool,
    ) -> Plan {
        let class = class_of(self.last_len);
        // A period counts when it is one round trip of one class in one
        // state: this end answered in it, and neither end moved.
        if let Some(mark) = self.last
            && mark.class == class
            && mark.one == one
            && !mark.tried
            && mark.sent != sent
        {
            let ns = u64::try_from((now - mark.at).as_nanos()).unwrap_or(u64::MAX);
            self.classes[class].add(one, ns);
        }
        if one {
            // A try that worked, or a pair the scheduler put together.
            self.trying = 0;
            self.together = (self.together + 1).min(HOLD);
            if self.together == HOLD {
                self.backoff_next = BACKOFF_FIRST;
            }
        } else {
            if (1..HOLD).contains(&self.together) {
                // Parted soon after it came together: as a failed try.
                self.fail();
            }
            self.together = 0;
        }
        let one_faster = self.classes[class].one_faster();
        let plan = match (one, one_faster) {
            (true, Some(true)) => Plan::Stay,
            (true, _) => Plan::Usual,
            // Two CPUs measured (for a try to be judged against), and one
            // not yet measured slower.
            (false, faster) if faster != Some(false) && self.classes[class].count[0] >= SAMPLES => {
                self.try_plan(may_move)
            }
            (false, _) => Plan::Usual,
        };
        self.last = Some(Mark {
            at: now,
            class,
            one,
            tried: plan == Plan::Try,
            sent,
        });
        plan
    }

    /// On two CPUs where one may be faster: go on with a try, begin one,
    /// or wait out the backoff of one that failed.
    fn try_plan(&mut self, may_move: impl FnOnce() -> bool) -> Plan {
        if self.trying > 0 {
            self.trying -= 1;
            if self.trying == 0 {
                // Still apart after the whole try.
                self.fail();
                return Plan::Usual;
            }
            return Plan::Try;
        }
        if self.backoff > 0 {
            self.backoff -= 1;
            return Plan::Usual;
        }
        if !may_move() {
            // Pinned away from the peer: look again only much later.
            self.backoff = BACKOFF_MOST;
            return Plan::Usual;
        }
        self.trying = TRY_WAITS;
        Plan::Try
    }

    /// A try failed: none for the next backoff, the one after twice as long.
    fn fail(&mut self) {
        self.backoff = self.backoff_next.max(BACKOFF_FIRST);
        self.backoff_next = (self.backoff * 2).min(BACKOFF_MOST);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A receiving end's waits, each one round trip after the last.
    struct Waits {
        share: Share,
        now: Instant,
        sent: u64,
    }

    impl Waits {
        fn of(len: usize) -> Self {
            Self {
                share: Share {
                    last_len: len,
                    ..Share::default()
                },
                now: Instant::now(),
                sent: 0,
            }
        }

        /// `n` waits `period_us` apart, in one state; their plans.
        fn run(&mut self, one: bool, n: usize, period_us: u64, may_move: bool) -> Vec<Plan> {
            (0..n)
                .map(|_| {
                    self.sent += 1;
                    self.now += Duration::from_micros(period_us);
                    match self.share.last_len < MIN_LEN {
                        true => self.share.plan(one, self.sent, || may_move),
                        false => self.share.plan_at(self.now, one, self.sent, || may_move),
                    }
                })
                .collect()
        }
    }

    const N: usize = SAMPLES as usize;

    #[test]
    fn small_messages_always_wait_as_usual() {
        let mut waits = Waits::of(MIN_LEN - 1);
        let plans = waits.run(false, 40, 400, true);
        assert!(plans.iter().all(|&p| p == Plan::Usual), "{plans:?}");
    }

    #[test]
    fn a_pair_apart_tries_one_cpu_once_two_are_measured_and_stays_where_it_is_faster() {
        let mut waits = Waits::of(248_832);
        // The first wait has no period; then SAMPLES periods on two CPUs.
        let plans = waits.run(false, N + 1, 60, true);
        assert!(plans[..N].iter().all(|&p| p == Plan::Usual), "{plans:?}");
        assert_eq!(plans[N], Plan::Try);
        // The try worked: on one CPU, faster (35 µs against 60).
        let plans = waits.run(true, N + 2, 35, true);
        assert!(plans[..N].iter().all(|&p| p == Plan::Usual), "{plans:?}");
        assert_eq!(plans[N..], [Plan::Stay, Plan::Stay]);
    }

    #[test]
    fn one_cpu_measured_slower_is_never_tried_again() {
        let mut waits = Waits::of(20_736);
        waits.run(false, N + 1, 5, true);
        // On one CPU (the try worked), slower: 9 µs against 5.
        let plans = waits.run(true, N + 2, 9, true);
        assert!(plans.iter().all(|&p| p == Plan::Usual), "{plans:?}");
        let plans = waits.run(false, 2000, 5, true);
        assert!(plans.iter().all(|&p| p == Plan::Usual), "{plans:?}");
    }

    #[test]
    fn a_slow_first_period_in_a_state_does_not_decide() {
        let mut waits = Waits::of(248_832);
        let plans = waits.run(false, N + 1, 60, true);
        assert_eq!(plans[N], Plan::Try);
        // Together: a first round trip that faults pages in (2 ms), then
        // 35 µs: one CPU wins, as measured.
        waits.run(true, 2, 2000, true);
        let plans = waits.run(true, N, 35, true);
        assert_eq!(plans.last(), Some(&Plan::Stay), "{plans:?}");
    }

    #[test]
    fn a_gain_within_the_noise_is_not_taken() {
        let mut waits = Waits::of(20_736);
        waits.run(false, N + 1, 100, true);
        // 90 µs against 100: less than an eighth better.
        let plans = waits.run(true, N + 2, 90, true);
        assert!(plans.iter().all(|&p| p == Plan::Usual), "{plans:?}");
    }

    #[test]
    fn a_try_that_leaves_the_pair_apart_backs_off_doubling() {
        let mut waits = Waits::of(100_000);
        waits.run(false, N, 60, true);
        let plans = waits.run(false, 3000, 60, true);
        // Runs of tries, and the usual waits between them.
        let mut runs: Vec<(Plan, usize)> = Vec::new();
        for plan in plans {
            match runs.last_mut() {
                Some((last, n)) if *last == plan => *n += 1,
                _ => runs.push((plan, 1)),
            }
        }
        let first = BACKOFF_FIRST as usize;
        let tries = (Plan::Try, TRY_WAITS as usize);
        // The wait that ends a try is usual too.
        let expected = [
            tries,
            (Plan::Usual, first + 1),
            tries,
            (Plan::Usual, 2 * first + 1),
            tries,
        ];
        assert_eq!(runs[..5], expected, "{runs:?}");
    }

    #[test]
    fn a_pair_parted_soon_after_a_try_backs_off_as_from_a_failed_one() {
        let mut waits = Waits::of(248_832);
        waits.run(false, N + 1, 60, true);
        // The try worked, but the pair parted after 3 waits.
        assert_eq!(waits.run(true, 3, 35, true), [Plan::Usual; 3]);
        let plans = waits.run(false, BACKOFF_FIRST as usize + 1, 60, true);
        assert!(
            plans[..BACKOFF_FIRST as usize]
                .iter()
                .all(|&p| p == Plan::Usual),
            "{plans:?}"
        );
        assert_eq!(plans[BACKOFF_FIRST as usize], Plan::Try);
        // Parted again: twice the backoff.
        waits.run(true, 3, 35, true);
        let plans = waits.run(false, 2 * BACKOFF_FIRST as usize + 1, 60, true);
        assert!(
            plans[..2 * BACKOFF_FIRST as usize]
                .iter()
                .all(|&p| p == Plan::Usual)
        );
        assert_eq!(plans[2 * BACKOFF_FIRST as usize], Plan::Try);
        // A move that held for HOLD waits resets the backoff: when the
        // pair parts after it, the next try comes at once.
        waits.run(true, HOLD as usize, 35, true);
        assert_eq!(waits.run(false, 1, 60, true), [Plan::Try]);
    }

    #[test]
    fn a_thread_pinned_away_from_its_peer_never_tries() {
        let mut waits = Waits::of(100_000);
        let plans = waits.run(false, 1000, 60, false);
        assert!(plans.iter().all(|&p| p == Plan::Usual), "{plans:?}");
    }

    #[test]
    fn a_stream_is_never_timed() {
        // This end sends nothing between waits: no period counts.
        let mut share = Share {
            last_len: 65_536,
            ..Share::default()
        };
        let now = Instant::now();
        for i in 0..40 {
            let at = now + Duration::from_micros(60 * i);
            assert_eq!(share.plan_at(at, false, 7, || true), Plan::Usual);
        }
    }

    #[test]
    fn size_classes_are_octaves_from_the_smallest() {
        assert_eq!(class_of(MIN_LEN), 0);
        assert_eq!(class_of(20_736), 1);
        assert_eq!(class_of(248_832), 4);
        assert_eq!(class_of(usize::MAX), CLASSES - 1);
    }
}
