//! A wake storm on the word a blocked receive sleeps on: the sleeper
//! stays cheap, and the real message still arrives at once.

use std::time::Instant;

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, play};
use ferry::{PipeOptions, Wait};
use ferry_testkit::{Watchdog, monotonic_ns, secs, this_test};

/// The attacker bumps the word the victim's blocked `recv` sleeps on and
/// calls `FUTEX_WAKE` on it, in a loop, for 2 s, publishing nothing. The
/// victim's thread (with `Wait::Sleep`, then the default) must use under
/// 10 % of a CPU over that time, then receive the real message the
/// attacker publishes at the end within 50 ms.
#[test]
fn wake_storm() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, storm_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for wait in ["block", "adaptive"] {
        let run = run_victim(
            &dog,
            test,
            &format!("victim-storm-{wait}"),
            RUN_LIMIT,
            |_| {},
        );
        if verdict.survived(&run) {
            check_storm(&mut verdict, wait, &run);
        }
    }
    verdict.finish();
}

fn check_storm(verdict: &mut Verdict, wait: &str, run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let recv = r.str("recv");
    if recv != "Ok" {
        return verdict.fail(format!("{wait}: recv under a wake storm gave {recv}"));
    }
    let (cpu, wall) = (r.u64("cpu_us"), r.u64("wall_us"));
    let (latency, wakes) = (r.u64("latency_us"), r.u64("wakes"));
    verdict.note(format!(
        "{wait}: {wakes} wakes; the blocked thread used {} ms of CPU in {} ms ({}%); \
         the message came {} us after it was sent",
        cpu / 1000,
        wall / 1000,
        cpu * 100 / wall.max(1),
        latency
    ));
    verdict.check(wakes >= 1000 && wall >= 1_900_000, || {
        format!(
            "{wait}: the storm did not happen ({wakes} wakes in {} ms)",
            wall / 1000
        )
    });
    verdict.check(cpu * 10 < wall, || {
        format!(
            "{wait}: the blocked thread used {}% of a CPU during the storm (bound 10%)",
            cpu * 100 / wall.max(1)
        )
    });
    verdict.check(latency < 50_000, || {
        format!(
            "{wait}: the real message took {} ms (bound 50 ms)",
            latency / 1000
        )
    });
}

fn storm_victim(test: &str, role: &str) {
    let v = Victim::start(test, role, "wake-storm", &PipeOptions::new());
    if role.ends_with("block") {
        v.boot.sender().set_wait(Wait::Sleep);
        v.boot.receiver().set_wait(Wait::Sleep);
    }
    stage("recv under the storm");
    let (cpu_before, start) = (ferry_testkit::thread_cpu_time(), Instant::now());
    let got = v.boot.recv();
    let done_ns = monotonic_ns();
    let (cpu, wall) = (
        ferry_testkit::thread_cpu_time() - cpu_before,
        start.elapsed(),
    );
    let mut report = Report::new()
        .text("recv", outcome(&got))
        .num("cpu_us", cpu.as_micros() as u64)
        .num("wall_us", wall.as_micros() as u64);
    if let Ok(msg) = &got
        && msg.len() == 16
    {
        let word = |at: usize| u64::from_le_bytes(msg[at..at + 8].try_into().expect("8 bytes"));
        report = report
            .num("latency_us", done_ns.saturating_sub(word(0)) / 1000)
            .num("wakes", word(8));
    }
    v.finish(Vec::new(), report);
}
