//! What every wait policy must do, as one suite run on each policy a user
//! can choose ([`adaptive`], [`spin`], [`sleep`]); `policy.rs`'s table test
//! says what the default does row by row, this suite what any policy owes
//! the mechanism and the machine:
//!
//! - never to spin (poll or pause) where the answer needs this CPU: on a
//!   machine with one, or with the peer on this one;
//! - to hand control back to the mechanism within a short step (a poll
//!   burst of at most [`BURST`], a pause of at most [`BLIND_SPIN`]), so the
//!   deadline and the peer's end are looked at;
//! - to end a wait asleep within [`AWAKE_SPIN`] of spinning if it sleeps at
//!   all, and never to sleep if it promises not to ([`Sleeps`]), whatever
//!   the wait sees;
//! - run by the mechanism ([`run`]) on a target, to meet the deadline, see
//!   the condition, and end when the peer ends.
//!
//! The first three are checked over a grid of every kind of [`Seen`] (and
//! a simulated wait from each start); the last runs the real mechanism on
//! a target whose condition another thread brings about.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::policy::{
    AWAKE_SPIN, BLIND_SPIN, BURST, CALM_WAITS, FAIR_EVERY, HERE_YIELDS, STREAM_WAITS, WAKE_GRACE,
    YIELD_AFTER, YIELD_EVERY, adaptive, sleep, spin,
};
use super::{Memory, Peer, Place, Seen, Step, Target, run};
use crate::base::sync::{AtomicBool, Ordering};

/// Whether, and when, a policy puts a wait to sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sleeps {
    /// At its first step, always.
    AtOnce,
    /// Once it has spun for long enough (or, where it may not spin, yielded
    /// a few times).
    Eventually,
    /// Never: it polls or yields until the condition holds or the deadline
    /// passes.
    Never,
}

/// A policy under test.
type Policy = fn(&Seen) -> Step;

const US: Duration = Duration::from_micros(1);

/// Every kind of situation a wait can see: each field over the values
/// where some policy's answer changes, and either side of them.
fn grid() -> impl Iterator<Item = Seen> {
    let spuns = [
        Duration::ZERO,
        US,
        BLIND_SPIN - US,
        BLIND_SPIN,
        YIELD_AFTER,
        WAKE_GRACE,
        AWAKE_SPIN - US,
        AWAKE_SPIN,
        Duration::from_secs(1),
    ];
    let steps = [
        0,
        1,
        HERE_YIELDS - 1,
        HERE_YIELDS,
        YIELD_EVERY,
        2 * YIELD_EVERY + 1,
        u32::MAX,
    ];
    let peers = [Peer::Awake, Peer::Asleep, Peer::Unseen];
    let places = [Place::Here, Place::Elsewhere, Place::Unknown];
    let calms = [0, CALM_WAITS - 1, CALM_WAITS, u32::MAX];
    let waits = [1, FAIR_EVERY, 7];
    let streaks = [0, STREAM_WAITS, u8::MAX];
    let mut all = Vec::new();
    for spun in spuns {
        for steps in steps {
            for peer in peers {
                for place in places {
                    for cpus in [1, 2, 64] {
                        for calm in calms {
                            for waits in waits {
                                for streak in streaks {
                                    all.push(Seen {
                                        spun,
                                        steps,
                                        peer,
                                        place,
                                        cpus,
                                        calm,
                                        waits,
                                        streak,
                                    });
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    all.into_iter()
}

/// Whether `step` holds the CPU without giving it up.
fn spins(step: Step) -> bool {
    matches!(step, Step::Poll(_) | Step::Pause(_))
}

/// Collects the situations where `wrong` holds, and fails naming a few.
fn check(what: &str, policy: Policy, wrong: impl Fn(&Seen, Step) -> bool) {
    let found: Vec<String> = grid()
        .filter_map(|seen| {
            let step = policy(&seen);
            wrong(&seen, step).then(|| format!("{step:?} at {seen:?}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "{what}: {} situations, first:\n{}",
        found.len(),
        found[..found.len().min(5)].join("\n")
    );
}

fn never_spins_where_the_answer_needs_this_cpu(policy: Policy, _: Sleeps) {
    check(
        "spun beside its peer or on one CPU",
        policy,
        |seen, step| (seen.cpus < 2 || seen.place == Place::Here) && spins(step),
    );
}

fn every_step_hands_back_to_the_mechanism_soon(policy: Policy, _: Sleeps) {
    check(
        "a step too long to look at the deadline",
        policy,
        |_, step| match step {
            Step::Poll(n) => n == 0 || n > BURST,
            Step::Pause(d) => d.is_zero() || d > BLIND_SPIN,
            Step::Yield | Step::Sleep => false,
        },
    );
}

fn sleeps_as_it_promises(policy: Policy, sleeps: Sleeps) {
    check("a sleep against its promise", policy, |seen, step| {
        match sleeps {
            Sleeps::AtOnce => step != Step::Sleep,
            Sleeps::Never => step == Step::Sleep,
            // Past the longest spin, and past the yields to a peer on this
            // CPU, a wait that may sleep does.
            Sleeps::Eventually => {
                seen.spun >= AWAKE_SPIN && seen.steps >= HERE_YIELDS && step != Step::Sleep
            }
        }
    });
}

/// What a step costs in the simulation below: a poll ~10 ns, a yield 2 µs.
fn cost(step: Step) -> Duration {
    match step {
        Step::Poll(n) => Duration::from_nanos(10) * n,
        Step::Pause(d) => d,
        Step::Yield => 2 * US,
        Step::Sleep => Duration::ZERO,
    }
}

/// From the first step of a wait in every situation, steps as the
/// mechanism takes them (the clock advancing by each step's cost) while
/// nothing arrives: a policy that sleeps reaches `Sleep` within
/// `AWAKE_SPIN` (plus a step); one that never sleeps keeps polling or
/// yielding for 100,000 steps.
fn a_wait_ends_asleep_or_keeps_looking(policy: Policy, sleeps: Sleeps) {
    let mut wrong = Vec::new();
    for start in grid().filter(|s| s.steps == 0 && s.spun.is_zero()) {
        let mut seen = start;
        let outcome = loop {
            let step = policy(&seen);
            if step == Step::Sleep || seen.steps >= 100_000 {
                break step;
            }
            seen.spun += cost(step);
            seen.steps += 1;
        };
        let bad = match sleeps {
            Sleeps::AtOnce => seen.steps != 0,
            Sleeps::Eventually => {
                outcome != Step::Sleep || seen.spun > AWAKE_SPIN + 10 * HERE_YIELDS * US
            }
            Sleeps::Never => outcome == Step::Sleep,
        };
        if bad {
            wrong.push(format!("{outcome:?} after {:?}, from {start:?}", seen.spun));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}",
        wrong[..wrong.len().min(5)].join("\n")
    );
}

/// Why the test target's wait ended without its condition.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Timeout,
    PeerGone,
}

/// A target whose condition (`ready`) and peer's end (`gone`) another
/// thread sets; its sleep naps in short steps until either, or the
/// deadline.
struct Flags {
    ready: Arc<AtomicBool>,
    gone: Arc<AtomicBool>,
    place: Place,
    peer: Peer,
}

impl Flags {
    fn ended_now(&self) -> Option<Result<(), End>> {
        // Acquire (both): pairs with the setter's Release store.
        if self.ready.load(Ordering::Acquire) {
            return Some(Ok(()));
        }
        self.gone
            .load(Ordering::Acquire)
            .then_some(Err(End::PeerGone))
    }
}

impl Target for Flags {
    type Ready = ();
    type Stop = End;
    fn poll(&mut self) -> Result<Option<()>, End> {
        // Acquire: pairs with the setter's Release store.
        Ok(self.ready.load(Ordering::Acquire).then_some(()))
    }
    fn place(&self) -> Place {
        self.place
    }
    fn peer(&self) -> Peer {
        self.peer
    }
    fn ended(&mut self, _ask: bool) -> Option<Result<(), End>> {
        // Acquire: pairs with the setter's Release store.
        self.gone
            .load(Ordering::Acquire)
            .then_some(Err(End::PeerGone))
    }
    fn timed_out(&mut self) -> Result<(), End> {
        Err(End::Timeout)
    }
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), End> {
        loop {
            if let Some(end) = self.ended_now() {
                return end;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(End::Timeout);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Runs the mechanism with `policy` on a target beside a peer in each
/// place; `set` (if any) is raised by another thread after 5 ms.
fn run_waits(
    policy: Policy,
    deadline: Option<Duration>,
    set: Option<fn(&Flags) -> &Arc<AtomicBool>>,
) -> Vec<(Place, Result<(), End>, Duration)> {
    let mut results = Vec::new();
    for place in [Place::Elsewhere, Place::Here, Place::Unknown] {
        let mut target = Flags {
            ready: Arc::new(AtomicBool::new(false)),
            gone: Arc::new(AtomicBool::new(false)),
            place,
            peer: Peer::Awake,
        };
        let setter = set.map(|flag| {
            let flag = Arc::clone(flag(&target));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                // Release: pairs with the target's Acquire loads.
                flag.store(true, Ordering::Release);
            })
        });
        let start = Instant::now();
        let result = run(
            policy,
            &mut Memory::default(),
            &mut target,
            deadline.map(|d| start + d),
        );
        results.push((place, result, start.elapsed()));
        if let Some(setter) = setter {
            setter.join().unwrap();
        }
    }
    results
}

/// Long enough for any wait here on a busy machine; a wait that took it
/// did not end when it should have.
const SLACK: Duration = Duration::from_secs(2);

fn the_mechanism_meets_the_deadline(policy: Policy, _: Sleeps) {
    let deadline = Duration::from_millis(20);
    for (place, result, took) in run_waits(policy, Some(deadline), None) {
        assert_eq!(result, Err(End::Timeout), "{place:?}");
        assert!(took >= deadline, "{place:?}: ended after {took:?}");
        assert!(took < deadline + SLACK, "{place:?}: ended after {took:?}");
    }
}

fn the_mechanism_sees_the_condition(policy: Policy, _: Sleeps) {
    for (place, result, took) in run_waits(policy, None, Some(|t| &t.ready)) {
        assert_eq!(result, Ok(()), "{place:?}");
        assert!(took < SLACK, "{place:?}: took {took:?}");
    }
}

fn the_mechanism_ends_when_the_peer_ends(policy: Policy, _: Sleeps) {
    for (place, result, took) in run_waits(policy, None, Some(|t| &t.gone)) {
        assert_eq!(result, Err(End::PeerGone), "{place:?}");
        assert!(took < SLACK, "{place:?}: took {took:?}");
    }
}

/// One module per policy, each running the whole suite.
macro_rules! policy_suite {
    ($($name:ident: $policy:expr, $sleeps:expr;)*) => {$(
        mod $name {
            use super::Sleeps;
            const POLICY: super::Policy = $policy;
            const SLEEPS: Sleeps = $sleeps;

            #[test]
            fn never_spins_where_the_answer_needs_this_cpu() {
                super::never_spins_where_the_answer_needs_this_cpu(POLICY, SLEEPS);
            }
            #[test]
            fn every_step_hands_back_to_the_mechanism_soon() {
                super::every_step_hands_back_to_the_mechanism_soon(POLICY, SLEEPS);
            }
            #[test]
            fn sleeps_as_it_promises() {
                super::sleeps_as_it_promises(POLICY, SLEEPS);
            }
            #[test]
            fn a_wait_ends_asleep_or_keeps_looking() {
                super::a_wait_ends_asleep_or_keeps_looking(POLICY, SLEEPS);
            }
            #[test]
            fn the_mechanism_meets_the_deadline() {
                super::the_mechanism_meets_the_deadline(POLICY, SLEEPS);
            }
            #[test]
            fn the_mechanism_sees_the_condition() {
                super::the_mechanism_sees_the_condition(POLICY, SLEEPS);
            }
            #[test]
            fn the_mechanism_ends_when_the_peer_ends() {
                super::the_mechanism_ends_when_the_peer_ends(POLICY, SLEEPS);
            }
        }
    )*};
}

policy_suite! {
    adaptive: super::adaptive, Sleeps::Eventually;
    spin: super::spin, Sleeps::Never;
    sleep: super::sleep, Sleeps::AtOnce;
}
