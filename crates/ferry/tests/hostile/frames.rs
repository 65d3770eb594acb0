//! Frames that never complete a message (aborted, endless, or naming a
//! handle never sent): every receive and select still returns in time.

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, end_attack, final_report, kind, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};

/// The attacker keeps the victim's ring full of frames that never make a
/// message: `First` + `Abort` pairs, or one `First` and then empty `More`
/// frames; or one `Whole` frame naming a handle never sent while valid
/// `Block` + `Retire` records for fresh ids keep the socket busy. Each of
/// 200 `try_recv` calls must return (`Empty` or `Protocol`) having used at
/// most 20 ms of CPU (and within 200 ms), and each of 10
/// `recv_timeout(200 ms)` calls within 250 ms.
#[test]
fn frames_that_never_complete_a_message() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, stuck_victim);
    }
    stuck_attacks(test, &RECEIVES);
}

/// The receive calls a stuck victim times, and what each may take.
const RECEIVES: [Timed; 2] = [
    Timed {
        key: "try_recv",
        name: "try_recv",
        cpu_ms: 20,
        bound_ms: 200,
        allowed: &["Empty", "Protocol"],
    },
    Timed {
        key: "recv_timeout",
        name: "recv_timeout(200 ms)",
        cpu_ms: 250,
        bound_ms: 250,
        allowed: &["Timeout", "Protocol"],
    },
];

/// The select calls a stuck victim times, and what each may take.
const SELECTS: [Timed; 2] = [
    Timed {
        key: "try_ready",
        name: "try_ready",
        cpu_ms: 20,
        bound_ms: 200,
        allowed: &["Empty", "Ok"],
    },
    Timed {
        key: "ready_timeout",
        name: "ready_timeout(200 ms)",
        cpu_ms: 250,
        bound_ms: 250,
        allowed: &["Timeout", "Ok", "Io"],
    },
];

/// One kind of call a victim timed: its key in the report
/// (`<key>_max_us`, `<key>_cpu_max_us`, `<key>_outcomes`), its name, how
/// much of its thread's CPU one call may use and how long it may take,
/// and the outcomes it may give.
///
/// The work a hostile peer can make a call do is bounded in CPU time: a
/// call that returns at once must use little of it. Its time on the clock
/// is bounded more loosely, for liveness (a call that blocked would go
/// past it): on a shared two-vCPU guest a call can be preempted for tens
/// of milliseconds (once, 26 ms of a `try_ready` that used none).
struct Timed {
    key: &'static str,
    name: &'static str,
    cpu_ms: u64,
    bound_ms: u64,
    allowed: &'static [&'static str],
}

/// Runs the three attacks whose frames never complete a message against
/// victims of `test`, and checks each victim's `calls`.
fn stuck_attacks(test: &str, calls: &[Timed]) {
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in ["first-abort", "first-more", "records"] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_stuck(&mut verdict, attack, &run, calls);
        }
    }
    verdict.finish();
}

/// The same attacks on a receiver in a [`ferry::Select`]: a set never
/// reports a message that is not whole, so it never says ready for these
/// frames (only, at most, for the peer breaking the rules, after which a
/// receive says `Protocol`), and it collects the pieces within a bound:
/// each of 200 `try_ready` calls returns having used at most 20 ms of
/// CPU (and within 200 ms), each of 10
/// `ready_timeout(200 ms)` within 250 ms, and a `try_recv` after a ready
/// never says `Empty`.
#[test]
fn a_select_over_frames_that_never_complete_stays_bounded() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, select_stuck_victim);
    }
    stuck_attacks(test, &SELECTS);
}

/// The victim of [`a_select_over_frames_that_never_complete_stays_bounded`]:
/// the bootstrap pipe's receiving half in a `Select`.
fn select_stuck_victim(test: &str, role: &str) {
    let (v, go) = stuck_start(test, role);
    let vm_before = v.vm_before;
    let Victim {
        dog,
        fds_before,
        attacker,
        boot,
        ..
    } = v;
    let (tx, rx) = boot.split();
    let mut select = ferry::Select::new().expect("a select");
    let key = select.add(rx).expect("the receiver joins the set");
    let mut after_ready = BTreeSet::new();
    let mut after = |select: &ferry::Select, ready: bool| {
        if ready {
            let rx: &ferry::Receiver = select.get(key).expect("the member");
            let got = rx.try_recv();
            after_ready.insert(kind(&outcome(&got)).to_string());
        }
    };
    stage("try_ready x200");
    let tries = time_calls(200, || {
        let ready = select.try_ready();
        after(&select, ready.is_ok());
        ready
    });
    stage("ready_timeout x10");
    let wait = Duration::from_millis(200);
    let waits = time_calls(10, || {
        let ready = select.ready_timeout(wait);
        after(&select, ready.is_ok());
        ready
    });
    let after_ready = match after_ready.is_empty() {
        true => "-".to_string(),
        false => after_ready.into_iter().collect::<Vec<_>>().join(" "),
    };
    let report = Report::new().text("go", go);
    let report = waits
        .into_report(tries.into_report(report, "try_ready"), "ready_timeout")
        .text("after_ready", after_ready);
    let vm_growth = ferry_testkit::vm_peak().saturating_sub(vm_before);
    drop(select);
    drop(tx);
    end_attack(dog, fds_before, vm_growth, attacker, report);
}

fn check_stuck(verdict: &mut Verdict, attack: &str, run: &VictimRun, calls: &[Timed]) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let go = r.str("go");
    verdict.check(go == "Ok", || {
        format!("{attack}: the attack never began ({go})")
    });
    let only = |kinds: &str, allowed: &[&str]| kinds.split(' ').all(|k| allowed.contains(&k));
    for call in calls {
        let max_ms = r.u64(&format!("{}_max_us", call.key)) / 1000;
        let cpu_ms = r.u64(&format!("{}_cpu_max_us", call.key)) / 1000;
        let kinds = r.str(&format!("{}_outcomes", call.key));
        verdict.note(format!(
            "{attack}: {} max {max_ms} ms, CPU max {cpu_ms} ms ({kinds}: {})",
            call.name,
            r.str(&format!("{}_error", call.key))
        ));
        verdict.check(cpu_ms <= call.cpu_ms, || {
            format!(
                "{attack}: a {} used {cpu_ms} ms of CPU (bound {} ms)",
                call.name, call.cpu_ms
            )
        });
        verdict.check(max_ms <= call.bound_ms, || {
            format!(
                "{attack}: a {} took {max_ms} ms (bound {} ms)",
                call.name, call.bound_ms
            )
        });
        verdict.check(only(kinds, call.allowed), || {
            format!(
                "{attack}: {} gave {kinds} (allowed: {})",
                call.name,
                call.allowed.join(", ")
            )
        });
    }
    // A select's receives after it said ready (none for a receiver alone).
    if let Some(after) = r.get("after_ready") {
        verdict.note(format!("{attack}: receives after a ready: {after}"));
        verdict.check(only(after, &["-", "Protocol", "Disconnected"]), || {
            format!("{attack}: a receive after a ready gave {after} (allowed: Protocol)")
        });
    }
}

fn stuck_victim(test: &str, role: &str) {
    let (v, go) = stuck_start(test, role);
    stage("try_recv x200");
    let tries = time_calls(200, || v.boot.receiver().try_recv());
    stage("recv_timeout x10");
    let wait = Duration::from_millis(200);
    let waits = time_calls(10, || v.boot.receiver().recv_timeout(wait));
    let report = Report::new().text("go", go);
    let report = waits.into_report(tries.into_report(report, "try_recv"), "recv_timeout");
    v.finish(Vec::new(), report);
}

/// Starts a victim of the attacks whose frames never complete a message,
/// and waits for the attacker's `go`; returns it and how the wait went.
fn stuck_start(test: &str, role: &str) -> (Victim, String) {
    let attack = role.trim_start_matches("victim-");
    // A 64 MiB ring: the victim needs tens of milliseconds to drain it, so
    // the attacker (which only moves the tail) refills it in time even on
    // a busy machine.
    let options = PipeOptions::new().ring_size(64 << 20);
    let v = Victim::start(test, role, attack, &options);
    stage("go");
    let go = match v.boot.receiver().recv_timeout(secs(10)) {
        Ok(msg) if msg == b"go" => "Ok".to_string(),
        other => outcome(&other),
    };
    thread::sleep(Duration::from_millis(10));
    (v, go)
}

/// How `n` calls of one kind went.
struct Calls {
    /// The longest call.
    longest: Duration,
    /// The most of its thread's CPU time a call used.
    most_cpu: Duration,
    /// The kinds of outcome seen (`Empty`, `Protocol`, ...), space-separated.
    kinds: String,
    /// The first error that was not `Empty` or `Timeout`, in full.
    first_error: String,
}

impl Calls {
    /// Adds these calls to `report` under `key` (`<key>_max_us`,
    /// `<key>_outcomes`, `<key>_error`), as [`check_stuck`] reads them.
    fn into_report(self, report: Report, key: &str) -> Report {
        report
            .num(&format!("{key}_max_us"), self.longest.as_micros() as u64)
            .num(
                &format!("{key}_cpu_max_us"),
                self.most_cpu.as_micros() as u64,
            )
            .text(&format!("{key}_outcomes"), self.kinds)
            .text(&format!("{key}_error"), self.first_error)
    }
}

/// Calls `call` `n` times, timing each.
fn time_calls<T, E: std::fmt::Debug>(n: usize, mut call: impl FnMut() -> Result<T, E>) -> Calls {
    let (mut longest, mut most_cpu) = (Duration::ZERO, Duration::ZERO);
    let mut kinds = BTreeSet::new();
    let mut first_error = None;
    for _ in 0..n {
        let (start, cpu) = (Instant::now(), ferry_testkit::thread_cpu_time());
        let result = call();
        longest = longest.max(start.elapsed());
        most_cpu = most_cpu.max(ferry_testkit::thread_cpu_time().saturating_sub(cpu));
        let outcome = outcome(&result);
        kinds.insert(kind(&outcome).to_string());
        if !matches!(kind(&outcome), "Ok" | "Empty" | "Timeout") {
            first_error.get_or_insert(outcome);
        }
    }
    Calls {
        longest,
        most_cpu,
        kinds: kinds.into_iter().collect::<Vec<_>>().join(" "),
        first_error: first_error.unwrap_or_else(|| "-".into()),
    }
}
