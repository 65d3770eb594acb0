//! Descriptors a hostile peer sends, against a victim process that uses
//! ferry normally (the attacker writes its socket and shared memory by
//! hand: `attacker/`, no ferry code). As in the other attacks, this test
//! re-runs its binary as the VICTIM, which spawns it as the ATTACKER(s),
//! and judges the one-line reports the victim prints.
//!
//! 1. [`descriptors_whose_close_blocks`]: TCP sockets lingering 2 s on
//!    close, sent in messages the victim receives as bytes only, and left
//!    unclaimed when a malformed record (carrying one too) fails the link.
//!    No receive may wait for their close, and afterwards the victim's
//!    descriptor count is back where it began.
//! 2. [`descriptors_sent_ahead_by_many_peers`]: with its descriptor limit
//!    lowered to 512, the victim takes six attackers that each send
//!    descriptors ahead as far as it lets them; it must never run out of
//!    descriptors, and an honest child must still be spawned and get a
//!    descriptor through.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crate::attacker::linger::{FIRST, LINGER, SECOND, THIRD};
use crate::attacker::region::sealed_memfd;
use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use ferry::{Handle, Pipe, PipeOptions, TryRecvError};
use ferry_testkit::{ChildGuard, Watchdog, secs, this_test};

/// How long a victim may run before the orchestrator kills it as hung.
const RUN_LIMIT: Duration = Duration::from_secs(50);

/// Plays `role`: an attacker, the honest child, or a victim.
fn play(test: &str, role: &str) {
    match role {
        "attacker-linger" => {
            let _dog = Watchdog::start("attacker `linger`", secs(40));
            crate::attacker::linger::run();
        }
        "attacker-fd-flood" => {
            raise_descriptor_limit();
            crate::attacker::attacks::run(role);
        }
        "honest" => honest_child(),
        "victim-linger" => linger_victim(test, role),
        "victim-budget" => budget_victim(test, role),
        other => panic!("no role {other:?}"),
    }
}

/// The victim's final report.
fn final_report(run: &VictimRun) -> &Report {
    run.find("fds_after")
        .unwrap_or_else(|| panic!("victim `{}` ended without its final report", run.role))
}

/// The descriptor count once it is back to `before`, or after `limit`.
fn settled_fd_count(before: usize, limit: Duration) -> usize {
    let start = Instant::now();
    loop {
        let now = ferry_testkit::fd_count();
        if now <= before || start.elapsed() > limit {
            return now;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills and reaps a child.
fn end(mut child: ChildGuard) {
    child.kill();
    child.wait();
}

// ---------------------------------------------------------------------
// 1. Descriptors whose close blocks.

/// Longest a `try_recv` may take (it would take the 2 s linger).
const TRY_LIMIT: Duration = Duration::from_millis(100);
/// Longest a `recv_timeout(200 ms)` may take.
const TIMEOUT_LIMIT: Duration = Duration::from_millis(400);

/// The attacker sends TCP sockets whose close lingers 2 s (checked on
/// this kernel: a `close` of such a socket returns after 2.0 s): one named
/// by a message the victim takes with `try_recv` (bytes only, so the
/// socket is dropped), one by a message it takes with
/// `recv_timeout(200 ms)`, then one left unclaimed and one inside a
/// malformed record (which stays queued on the link's socket), which
/// fails the link at the next `try_recv`. Each
/// call must return within its bound (100 ms, 400 ms, 100 ms), with the
/// message, then `Protocol`; dropping the failed pipe (and with it the
/// link holding the unclaimed socket) within 100 ms too; and afterwards
/// the victim's descriptors are back to their count before the attack
/// (every one handed to the closer was closed there).
#[test]
fn descriptors_whose_close_blocks() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(70));
    let mut verdict = Verdict::new();
    let run = run_victim(&dog, test, "victim-linger", RUN_LIMIT, |_| {});
    if verdict.survived(&run) {
        check_linger(&mut verdict, &run);
    }
    verdict.finish();
}

fn check_linger(verdict: &mut Verdict, run: &VictimRun) {
    let r = final_report(run);
    let ms = |key: &str| r.u64(key) / 1000;
    verdict.note(format!(
        "lingering closes: try_recv {} ms, recv_timeout {} ms, failing try_recv {} ms, \
         drop {} ms; descriptors back in {} ms",
        ms("first_us"),
        ms("second_us"),
        ms("third_us"),
        ms("drop_us"),
        ms("settle_us")
    ));
    for (call, key, limit) in [
        ("try_recv", "first", TRY_LIMIT),
        ("recv_timeout(200 ms)", "second", TIMEOUT_LIMIT),
        ("try_recv that fails the link", "third", TRY_LIMIT),
        ("dropping the failed pipe", "drop", TRY_LIMIT),
    ] {
        let took = Duration::from_micros(r.u64(&format!("{key}_us")));
        // (For the drop, "took" is what it did.)
        verdict.check(took <= limit, || {
            format!("{call} took {took:?} (at most {limit:?}): it waited for a peer's close")
        });
    }
    for (key, expected) in [("first", "Ok"), ("second", "Ok")] {
        let got = r.str(key);
        verdict.check(got == expected, || {
            format!("the {key} message must arrive: got {got}")
        });
    }
    let third = r.str("third");
    verdict.check(third.starts_with("Protocol"), || {
        format!("a malformed record must fail the link: got {third}")
    });
    let (before, after) = (r.u64("fds_before"), r.u64("fds_after"));
    verdict.check(after <= before, || {
        format!("descriptors grew from {before} to {after}: the closer did not finish")
    });
}

/// `call` timed, repeated (1 ms apart, for at most 5 s) while it finds
/// nothing: the longest single call and what the last one gave.
fn until_ready<T>(
    call: impl Fn() -> Result<T, TryRecvError>,
) -> (Duration, Result<T, TryRecvError>) {
    let start = Instant::now();
    let mut longest = Duration::ZERO;
    loop {
        let began = Instant::now();
        let got = call();
        longest = longest.max(began.elapsed());
        if !matches!(got, Err(TryRecvError::Empty)) || start.elapsed() > secs(5) {
            return (longest, got);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn linger_victim(test: &str, role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), secs(45));
    let fds_before = ferry_testkit::fd_count();
    let cmd = ferry_testkit::child_command(test, "attacker-linger");
    let (attacker, boot) = ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new());
    stage("try_recv of a message naming a lingering socket");
    let (first_took, first) = until_ready(|| boot.receiver().try_recv());
    let first = match first {
        Ok(bytes) if bytes == FIRST => "Ok".to_string(),
        other => outcome(&other.map(|_| ())),
    };
    stage("recv_timeout of a message naming a lingering socket");
    let began = Instant::now();
    let second = boot.receiver().recv_timeout(Duration::from_millis(200));
    let second_took = began.elapsed();
    let second = match second {
        Ok(bytes) if bytes == SECOND => "Ok".to_string(),
        other => outcome(&other.map(|_| ())),
    };
    stage("try_recv as a malformed record fails the link");
    boot.send(b"go-c").expect("go-c");
    let (third_took, third) = until_ready(|| boot.receiver().try_recv());
    let third = match third {
        Ok(bytes) if bytes == THIRD => "Ok (the link should have failed)".to_string(),
        other => outcome(&other.map(|_| ())),
    };
    stage("drop the failed pipe");
    let began = Instant::now();
    drop(boot);
    let drop_took = began.elapsed();
    stage("the descriptors are closed");
    // A descriptor leaves the table when its close begins, lingering or
    // not; the attacker stays (holding its sockets' other ends, so the
    // closer's closes linger on) until the count is back.
    let began = Instant::now();
    let fds_after = settled_fd_count(fds_before, LINGER * 4);
    let settled = began.elapsed();
    end(attacker);
    Report::new()
        .text("first", first)
        .num("first_us", first_took.as_micros() as u64)
        .text("second", second)
        .num("second_us", second_took.as_micros() as u64)
        .text("third", third)
        .num("third_us", third_took.as_micros() as u64)
        .num("drop_us", drop_took.as_micros() as u64)
        .num("settle_us", settled.as_micros() as u64)
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

// ---------------------------------------------------------------------
// 2. Descriptors sent ahead by many peers.

/// The victim's soft descriptor limit.
const LOWERED_LIMIT: u64 = 512;
/// Attackers flooding the victim with descriptors at once.
const FLOODERS: usize = 6;
/// The size of the memfd the honest child sends.
const HONEST_LEN: u64 = 4242;

/// With its soft descriptor limit lowered to 512, the victim spawns six
/// attackers in turn; each sends a side pipe, then a flood of descriptor
/// records (fresh memfds) that no message claims, with a message naming
/// the flood's last, so the victim reads all it lets itself hold. Each
/// such receive must end with a local shortage of ferry's own budget
/// (`Io(QuotaExceeded)`), never the process's `EMFILE` ("out of file
/// descriptors"); then an honest child must still be spawned and its
/// message with a memfd received, the memfd intact. (The children raise
/// their own soft limit back, as the descriptors in flight count against
/// the sender's.)
#[test]
fn descriptors_sent_ahead_by_many_peers() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(70));
    let mut verdict = Verdict::new();
    let run = run_victim(&dog, test, "victim-budget", RUN_LIMIT, |_| {});
    if verdict.survived(&run) {
        check_budget(&mut verdict, &run);
    }
    verdict.finish();
}

fn check_budget(verdict: &mut Verdict, run: &VictimRun) {
    let r = final_report(run);
    verdict.note(format!(
        "{FLOODERS} flooders: at most {} descriptors open (limit {LOWERED_LIMIT}); held after \
         each flood: {}",
        r.u64("most_fds"),
        r.str("held")
    ));
    for i in 0..FLOODERS {
        let got = r.str(&format!("flood{i}"));
        let quota = got.contains("QuotaExceeded") && !got.contains("out of file descriptors");
        verdict.check(quota, || {
            format!("flood {i} must end with ferry's own local shortage, not EMFILE: got {got}")
        });
    }
    for (key, expected) in [("spawn", "Ok"), ("honest", "Ok"), ("reply", "Ok")] {
        let got = r.str(key);
        verdict.check(got == expected, || {
            format!("the honest child ({key}) must get in: got {got}")
        });
    }
    verdict.check(r.u64("most_fds") < LOWERED_LIMIT, || {
        format!(
            "the victim reached its descriptor limit ({})",
            r.u64("most_fds")
        )
    });
    let (before, after) = (r.u64("fds_before"), r.u64("fds_after"));
    verdict.check(after <= before, || {
        format!("descriptors grew from {before} to {after}")
    });
}

/// Raises this process's soft descriptor limit to its hard limit.
fn raise_descriptor_limit() {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    setrlimit(Resource::Nofile, limit).expect("raise the soft descriptor limit");
}

/// Sets this process's soft descriptor limit to `soft`.
fn lower_descriptor_limit(soft: u64) {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = Some(soft);
    setrlimit(Resource::Nofile, limit).expect("lower the soft descriptor limit");
}

/// A flooder's process and pipes.
type Flooder = (ChildGuard, Pipe, Option<Pipe>);

/// One flooder: spawned, its side pipe taken, its flood received as far
/// as the victim lets it. What the flood's receive (or the spawn) gave.
fn take_flood(dog: &Watchdog, test: &str) -> (String, Option<Flooder>) {
    let cmd = ferry_testkit::child_command(test, "attacker-fd-flood");
    let (child, boot) = match PipeOptions::new().spawn(cmd) {
        Ok((child, boot)) => (dog.watch(child), boot),
        Err(e) => return (format!("spawn: {e:?}"), None),
    };
    let side = boot
        .receiver()
        .recv_with()
        .ok()
        .and_then(|mut m| m.pipes.pop());
    let _ = boot.send(b"go");
    let flood = outcome(&boot.receiver().recv_with());
    (flood, Some((child, boot, side)))
}

fn budget_victim(test: &str, role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), secs(45));
    let fds_before = ferry_testkit::fd_count();
    lower_descriptor_limit(LOWERED_LIMIT);
    let mut report = Report::new();
    let mut peers = Vec::new();
    let mut held = Vec::new();
    let mut most = 0;
    for i in 0..FLOODERS {
        stage(&format!("flood {i}"));
        let (flood, flooder) = take_flood(&dog, test);
        let now = ferry_testkit::fd_count();
        most = most.max(now);
        held.push(now.to_string());
        report = report.text(&format!("flood{i}"), flood);
        peers.extend(flooder);
    }
    stage("the honest child");
    let spawned = PipeOptions::new().spawn(ferry_testkit::child_command(test, "honest"));
    report = report.text("spawn", outcome(&spawned));
    if let Ok((child, pipe)) = spawned {
        let child = dog.watch(child);
        let message = pipe.receiver().recv_with();
        most = most.max(ferry_testkit::fd_count());
        let intact = match &message {
            Ok(m) => m.fds.len() == 1 && memfd_len(&m.fds[0]) == Some(HONEST_LEN),
            Err(_) => false,
        };
        let honest = match (&message, intact) {
            (Ok(_), true) => "Ok".to_string(),
            (Ok(m), false) => format!("a message with {} descriptors, not the memfd", m.fds.len()),
            (Err(e), _) => format!("{e:?}"),
        };
        report = report
            .text("honest", honest)
            .text("reply", outcome(&pipe.send(b"thanks")));
        drop(message);
        child.wait_ok();
    }
    stage("teardown");
    for (child, boot, side) in peers {
        drop((boot, side));
        end(child);
    }
    let fds_after = settled_fd_count(fds_before, secs(4));
    report
        .num("most_fds", most as u64)
        .text("held", held.join("/"))
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

fn memfd_len(fd: &impl AsFd) -> Option<u64> {
    rustix::fs::fstat(fd).ok().map(|s| s.st_size as u64)
}

/// The honest child: sends a memfd of [`HONEST_LEN`] bytes to its parent
/// and waits for the answer.
fn honest_child() {
    raise_descriptor_limit();
    let (_dog, pipe) = ferry_testkit::child_pipe("honest", secs(40));
    let memfd = sealed_memfd("honest", HONEST_LEN).expect("make a memfd");
    pipe.sender()
        .send_with(b"honest", vec![Handle::Fd(memfd)])
        .expect("send the memfd");
    let answer = pipe.recv().expect("the parent's answer");
    assert_eq!(answer, b"thanks");
}
