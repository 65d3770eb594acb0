//! Hostile peers: an attacker process that writes its own shared memory and
//! control socket by hand (`attacker/`, no ferry code) against a victim
//! process that uses ferry normally.
//!
//! Each attack runs in three processes: this test (the orchestrator)
//! re-runs the test binary as the VICTIM, which spawns it once more, with
//! `ferry::spawn`, as the ATTACKER. A crash, hang or address-space growth
//! of the victim is thus isolated and measured. The victim may end only
//! with messages, `Protocol`, `Disconnected`, `Timeout`/`Empty`/`Full`;
//! within its deadline; with no more descriptors than it began with; and
//! with bounded address space. It prints what it saw as one-line reports
//! (`attacker::report`), and the orchestrator judges them, gathering every
//! finding before it fails.
//!
//! One test per class of attack:
//! 1. [`bad_ring_positions_in_a_received_pipe_end`]
//! 2. [`address_space_exhaustion_by_handles`]
//! 3. [`frames_that_never_complete_a_message`]
//! 4. [`control_socket_backpressure`] (with an honest two-process check)
//! 5. [`wake_storm`]
//! 9. [`doorbell_records`] (the records a `Select` or an async receiver
//!    sends)
//! 10. [`descriptor_record_flood`]
//! 11. [`malformed_descriptor_records`]
//! 12. [`hostile_parent_at_bootstrap`] (this test plays the raw parent;
//!     the victim is the child), and [`hostile_parent_at_invitation`] (a
//!     child invited to a server reads a note its parent wrote)
//!
//! and two local faults, with an honest ferry peer:
//! 7. [`out_of_descriptors_is_a_local_error`] (a pipe end, then a
//!    descriptor)
//! 8. [`disconnected_is_sticky`]
//!
//! (A named server's handshake is attacked in `tests/hostile_server.rs`.)
//!
//! (Class 6, writable read-only blocks, lives in `tests/sealed_blocks.rs`.)

// clippy.toml's rule on atomics is for the library (loom must see all of
// them); this test and the attacker use std's, as any other program would.
#![allow(clippy::disallowed_types)]

mod attacker;
mod common;

use std::collections::BTreeSet;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use attacker::attacks;
use attacker::report::{Report, Verdict, VictimRun, Watch, outcome, run_victim, stage};
use common::{ChildGuard, Watchdog, monotonic_ns, secs};
use ferry::{Pipe, PipeOptions, RecvError, TryRecvError, Wait};

/// How long a victim process may run before its own watchdog fires.
const VICTIM_LIMIT: Duration = Duration::from_secs(25);
/// How long the orchestrator lets a victim run before killing it as hung.
const RUN_LIMIT: Duration = Duration::from_secs(30);
const GIB: u64 = 1 << 30;

/// Plays `role` in `test`: an attack, or the victim.
fn play(test: &str, role: &str, victim: fn(&str, &str)) {
    if role.starts_with("attacker-") {
        attacks::run(role);
    } else {
        victim(test, role);
    }
}

/// Whether a reported outcome is a `Protocol` error.
fn is_protocol(outcome: &str) -> bool {
    outcome.starts_with("Protocol")
}

/// The variant name of a reported outcome (`Protocol(...)` → `Protocol`).
fn kind(outcome: &str) -> &str {
    outcome.split('(').next().unwrap_or(outcome)
}

/// A victim process under attack: its watchdog, what it measured before
/// the attack, the attacker it spawned, and the pipe to it.
struct Victim {
    dog: Watchdog,
    fds_before: usize,
    vm_before: u64,
    attacker: ChildGuard,
    boot: Pipe,
}

impl Victim {
    /// Starts the victim: spawns this test as `attacker-<attack>`, with
    /// `options` for the bootstrap pipe.
    fn start(test: &str, role: &str, attack: &str, options: &PipeOptions) -> Self {
        let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
        let fds_before = common::fd_count();
        let vm_before = common::vm_peak();
        let cmd = common::child_command(test, &format!("attacker-{attack}"));
        let (attacker, boot) = common::spawn_command(&dog, cmd, options);
        Self {
            dog,
            fds_before,
            vm_before,
            attacker,
            boot,
        }
    }

    /// Ends the attack: drops `pipes` and the bootstrap pipe, kills and
    /// reaps the attacker, and prints `report` (the final one) with the
    /// address-space growth and the descriptor counts.
    fn finish(self, pipes: Vec<Pipe>, report: Report) {
        let vm_growth = common::vm_peak().saturating_sub(self.vm_before);
        let Self {
            dog,
            fds_before,
            attacker,
            boot,
            ..
        } = self;
        drop(pipes);
        drop(boot);
        end_attack(dog, fds_before, vm_growth, attacker, report);
    }
}

/// The end of every attack: kills and reaps the attacker, and prints
/// `report` with the address-space growth and the descriptor counts.
fn end_attack(
    dog: Watchdog,
    fds_before: usize,
    vm_growth: u64,
    mut attacker: ChildGuard,
    report: Report,
) {
    attacker.kill();
    attacker.wait();
    let fds_after = settled_fd_count(fds_before);
    report
        .num("vm_growth", vm_growth)
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

/// The descriptor count once it is back to `before`, or after 4 s: the
/// pool's background reserve gives idle blocks (and their descriptors)
/// back within about 3 s.
fn settled_fd_count(before: usize) -> usize {
    let start = Instant::now();
    loop {
        let now = common::fd_count();
        if now <= before || start.elapsed() > secs(4) {
            return now;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The victim's final report (the one with its descriptor counts).
fn final_report(run: &VictimRun) -> &Report {
    run.find("fds_after")
        .unwrap_or_else(|| panic!("victim `{}` ended without its final report", run.role))
}

// ---------------------------------------------------------------------
// 1. Bad ring positions in a received pipe end.

/// Round trips through the end whose positions start near `u64::MAX`.
const ROUND_TRIPS: u64 = 20;

/// The attacker sends a pipe end of its own 4 KiB region whose ring
/// positions are (a) not multiples of 8, (b) near `u64::MAX` and
/// inconsistent, or (c) aligned, consistent and near `u64::MAX`. (a) and
/// (b) must be refused with `Protocol` (at `recv_with` or at the end's
/// first use) without a crash; (c) must work: 20 messages of 1,000 bytes
/// (5 ring capacities, so positions wrap past `u64::MAX`) go round trip
/// through the attacker, which echoes them by hand.
#[test]
fn bad_ring_positions_in_a_received_pipe_end() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, positions_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for case in ["a", "b", "c"] {
        let role = format!("victim-positions-{case}");
        let run = run_victim(&dog, test, &role, RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_positions(&mut verdict, case, &run);
        }
    }
    verdict.finish();
}

fn check_positions(verdict: &mut Verdict, case: &str, run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let field = |key| r.get(key).unwrap_or("-");
    let recv_with = r.str("recv_with");
    if case == "c" {
        verdict.check(recv_with == "Ok" && field("echo") == "Ok", || {
            format!(
                "(c) aligned positions near u64::MAX must work: recv_with {recv_with}, \
                 {} of {ROUND_TRIPS} round trips, then {}",
                field("round_trips"),
                field("echo")
            )
        });
        return;
    }
    let at_once = is_protocol(recv_with);
    let on_use =
        recv_with == "Ok" && is_protocol(field("try_send")) && is_protocol(field("try_recv"));
    verdict.check(at_once || on_use, || {
        format!(
            "({case}) impossible positions must give Protocol: recv_with {recv_with}, \
             then try_send {}, try_recv {}",
            field("try_send"),
            field("try_recv")
        )
    });
}

fn positions_victim(test: &str, role: &str) {
    let case = role.trim_start_matches("victim-positions-");
    let v = Victim::start(
        test,
        role,
        &format!("positions-{case}"),
        &PipeOptions::new(),
    );
    stage("recv_with");
    let got = v.boot.receiver().recv_with();
    let report = Report::new().text("recv_with", outcome(&got));
    let pipes = got.map(|m| m.pipes).unwrap_or_default();
    let mut report = report.num("ends", pipes.len() as u64);
    if let Some(end) = pipes.first() {
        report = match case {
            "c" => round_trips(end, report),
            _ => first_use(end, report),
        };
    }
    v.finish(pipes, report);
}

/// `try_send` (the write that would land out of bounds), then `try_recv`.
fn first_use(end: &Pipe, report: Report) -> Report {
    stage("try_send");
    let sent = end.sender().try_send(b"hello");
    stage("try_recv");
    let got = end.receiver().try_recv();
    report
        .text("try_send", outcome(&sent))
        .text("try_recv", outcome(&got))
}

/// Message `seq` of `len` bytes, stamped so any mix-up shows.
fn pattern(seq: u64, len: usize) -> Vec<u8> {
    let mut msg = vec![(seq % 251) as u8; len];
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg
}

fn round_trips(end: &Pipe, report: Report) -> Report {
    stage("round trips");
    for i in 0..ROUND_TRIPS {
        let msg = pattern(i, 1000);
        // Every other round trip writes and reads in place, in the
        // attacker's ring (some frames cross its end: those are copied).
        let sent = match i % 2 {
            0 => end.send(&msg),
            _ => end
                .sender()
                .send_in_place(msg.len(), |slot| slot.copy_from_slice(&msg)),
        };
        if let Err(e) = sent {
            return report
                .num("round_trips", i)
                .text("echo", format!("send: {e:?}"));
        }
        let got = match i % 2 {
            0 => end.receiver().recv_timeout(secs(2)),
            // No deadline here: an attacker that stops echoing leaves the
            // victim to its run limit, which fails the test as a hang.
            _ => match end.receiver().recv_in_place(|reply| reply.to_vec()) {
                Ok(reply) => Ok(reply),
                Err(e) => Err(ferry::RecvTimeoutError::from(e)),
            },
        };
        let why = match got {
            Ok(reply) if reply == msg => continue,
            Ok(reply) => format!("recv: a wrong reply of {} bytes", reply.len()),
            Err(e) => format!("recv: {e:?}"),
        };
        return report.num("round_trips", i).text("echo", why);
    }
    report.num("round_trips", ROUND_TRIPS).text("echo", "Ok")
}

// ---------------------------------------------------------------------
// 2. Address-space exhaustion by handles.

/// The attacker sends pipe ends of maximal regions (rings of 1 GiB, a
/// sparse 2 GiB + 4 KiB memfd each), as many as the socket takes, and
/// then a `Whole` frame whose tag claims (a) 254 or 32,767 handles: the
/// victim must answer `Protocol` within 1 s; or (b) one handle, the last
/// end sent. Either way the victim stops mapping at the link's map budget
/// (`PipeOptions::max_mapped`, set to 4 GiB here): a receiver that is
/// waiting reads the control records ahead of the message that claims them
/// (so a sender never blocks on a full socket), and maps each end's region
/// as it reads it (so it holds no descriptor for it), so the attack may
/// cost up to the budget, never more.
#[test]
fn address_space_exhaustion_by_handles() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, handles_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in ["handles-254", "handles-32767", "regions-ahead"] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_handles(&mut verdict, attack, &run);
        }
    }
    verdict.finish();
}

fn check_handles(verdict: &mut Verdict, attack: &str, run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (recv_with, micros) = (r.str("recv_with"), r.u64("recv_with_us"));
    let growth = r.u64("vm_growth");
    verdict.note(format!(
        "{attack}: recv_with {recv_with} with {} ends in {} ms; address space +{:.1} GiB",
        r.u64("ends"),
        micros / 1000,
        growth as f64 / GIB as f64
    ));
    if attack != "regions-ahead" {
        verdict.check(is_protocol(recv_with) && micros < 1_000_000, || {
            format!(
                "{attack}: a tag claiming too many handles must give Protocol within \
                 1 s: got {recv_with} after {} ms",
                micros / 1000
            )
        });
    }
    // The victim's map budget (4 GiB), and 1 GiB for the rest of it.
    let bound = 5 * GIB;
    verdict.check(growth < bound, || {
        format!(
            "{attack}: address space grew by {:.1} GiB (bound {} GiB)",
            growth as f64 / GIB as f64,
            bound / GIB
        )
    });
}

fn handles_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    // A map budget of 4 GiB, so the bound below stays tight.
    let options = PipeOptions::new().max_mapped(4 << 30);
    let v = Victim::start(test, role, attack, &options);
    stage("recv_with");
    let start = Instant::now();
    let got = v.boot.receiver().recv_with();
    let micros = start.elapsed().as_micros() as u64;
    stage("try_recv after the attack");
    let after = v.boot.receiver().try_recv();
    let report = Report::new()
        .text("recv_with", outcome(&got))
        .num("recv_with_us", micros)
        .text("try_recv", outcome(&after));
    let pipes = got.map(|m| m.pipes).unwrap_or_default();
    let report = report.num("ends", pipes.len() as u64);
    v.finish(pipes, report);
}

// ---------------------------------------------------------------------
// 3. Frames that never complete a message.

/// The attacker keeps the victim's ring full of frames that never make a
/// message: `First` + `Abort` pairs, or one `First` and then empty `More`
/// frames; or one `Whole` frame naming a handle never sent while valid
/// `Block` + `Retire` records for fresh ids keep the socket busy. Each of
/// 200 `try_recv` calls must return (`Empty` or `Protocol`) within 20 ms,
/// and each of 10 `recv_timeout(200 ms)` calls within 250 ms.
#[test]
fn frames_that_never_complete_a_message() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, stuck_victim);
    }
    stuck_attacks(test, &RECEIVES);
}

/// The receive calls a stuck victim times, and what each may take.
const RECEIVES: [Timed; 2] = [
    Timed {
        key: "try_recv",
        name: "try_recv",
        bound_ms: 20,
        allowed: &["Empty", "Protocol"],
    },
    Timed {
        key: "recv_timeout",
        name: "recv_timeout(200 ms)",
        bound_ms: 250,
        allowed: &["Timeout", "Protocol"],
    },
];

/// The select calls a stuck victim times, and what each may take.
const SELECTS: [Timed; 2] = [
    Timed {
        key: "try_ready",
        name: "try_ready",
        bound_ms: 20,
        allowed: &["Empty", "Ok"],
    },
    Timed {
        key: "ready_timeout",
        name: "ready_timeout(200 ms)",
        bound_ms: 250,
        allowed: &["Timeout", "Ok", "Io"],
    },
];

/// One kind of call a victim timed: its key in the report
/// (`<key>_max_us`, `<key>_outcomes`), its name, how long one call may
/// take, and the outcomes it may give.
struct Timed {
    key: &'static str,
    name: &'static str,
    bound_ms: u64,
    allowed: &'static [&'static str],
}

/// Runs the three attacks whose frames never complete a message against
/// victims of `test`, and checks each victim's `calls`.
fn stuck_attacks(test: &str, calls: &[Timed]) {
    let _serial = common::serial();
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
/// each of 200 `try_ready` calls returns within 20 ms, each of 10
/// `ready_timeout(200 ms)` within 250 ms, and a `try_recv` after a ready
/// never says `Empty`.
#[test]
fn a_select_over_frames_that_never_complete_stays_bounded() {
    let test = this_test!();
    if let Some(role) = common::role() {
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
    let vm_growth = common::vm_peak().saturating_sub(vm_before);
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
        let kinds = r.str(&format!("{}_outcomes", call.key));
        verdict.note(format!(
            "{attack}: {} max {max_ms} ms ({kinds}: {})",
            call.name,
            r.str(&format!("{}_error", call.key))
        ));
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
            .text(&format!("{key}_outcomes"), self.kinds)
            .text(&format!("{key}_error"), self.first_error)
    }
}

/// Calls `call` `n` times, timing each.
fn time_calls<T, E: std::fmt::Debug>(n: usize, mut call: impl FnMut() -> Result<T, E>) -> Calls {
    let mut longest = Duration::ZERO;
    let mut kinds = BTreeSet::new();
    let mut first_error = None;
    for _ in 0..n {
        let start = Instant::now();
        let result = call();
        longest = longest.max(start.elapsed());
        let outcome = outcome(&result);
        kinds.insert(kind(&outcome).to_string());
        if !matches!(kind(&outcome), "Ok" | "Empty" | "Timeout") {
            first_error.get_or_insert(outcome);
        }
    }
    Calls {
        longest,
        kinds: kinds.into_iter().collect::<Vec<_>>().join(" "),
        first_error: first_error.unwrap_or_else(|| "-".into()),
    }
}

// ---------------------------------------------------------------------
// 4. Control-socket backpressure.

/// How long after the attack begins the orchestrator kills the attacker
/// at the latest (sooner, once the victim's `try_send` loop is done).
const KILL_AFTER: Duration = Duration::from_secs(5);
/// Pipe ends the honest check moves over pipe B.
const MOVED: u64 = 1000;
/// Round trips of the honest check over pipe A (half 1 MiB, half small).
const ROUNDS: u64 = 400;
/// Ends X has moved when Y starts: enough to fill the control socket.
const CONGESTED: u64 = 250;

/// The attacker never reads its control socket nor consumes its ring. A
/// helper thread of the victim moves pipe ends to it until that blocks
/// (documented backpressure); then the victim `try_send`s 1 MiB messages
/// (each new pool block announced over the socket) for 2 s: every call
/// must return within 20 ms. The orchestrator then SIGKILLs the attacker:
/// the moving thread must end with `Disconnected` within 1 s.
///
/// Then two honest ferry processes: thread X moves 1,000 pipe ends over
/// pipe B (whose reader in the child sleeps 1 ms per message) while thread
/// Y makes 400 round trips (half 1 MiB) over pipe A; all within 60 s, in
/// order, and never 10 s without progress.
#[test]
fn control_socket_backpressure() {
    let test = this_test!();
    if let Some(role) = common::role() {
        if role == "echo" {
            return echo_child();
        }
        return play(test, &role, backpressure_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(120));
    let mut verdict = Verdict::new();
    let (run, killed_ns) = run_backpressure_victim(&dog, test);
    if verdict.survived(&run) {
        check_backpressure(&mut verdict, &run, killed_ns);
    }
    honest_backpressure(&dog, test, &mut verdict);
    verdict.finish();
}

/// Runs the victim, killing its attacker when its `try_send` loop is done
/// (or [`KILL_AFTER`] the attack began); returns the run and the
/// monotonic time of the kill.
fn run_backpressure_victim(dog: &Watchdog, test: &str) -> (VictimRun, Option<u64>) {
    let mut attacker: Option<(i32, Instant)> = None;
    let mut killed_ns = None;
    let run = run_victim(dog, test, "victim-backpressure", RUN_LIMIT, |event| {
        if let Some(pid) = event.and_then(|r| r.get("attacker_pid")) {
            attacker = pid
                .parse()
                .ok()
                .map(|pid| (pid, Instant::now() + KILL_AFTER));
        }
        let loop_done = event.is_some_and(|r| r.get("try_send_max_us").is_some());
        if let Some((pid, deadline)) = attacker
            && killed_ns.is_none()
            && (loop_done || Instant::now() >= deadline)
        {
            killed_ns = Some(monotonic_ns());
            let pid = rustix::process::Pid::from_raw(pid).expect("a process id");
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    });
    (run, killed_ns)
}

fn check_backpressure(verdict: &mut Verdict, run: &VictimRun, killed_ns: Option<u64>) {
    verdict.no_fd_growth(run);
    let loop_report = run.find("try_send_max_us").expect("the try_send report");
    let max = loop_report.u64("try_send_max_us");
    verdict.note(format!(
        "backpressure: {} ends moved before the try_send loop; {} try_send calls ({}), max {} ms",
        loop_report.u64("moved_before_loop"),
        loop_report.u64("try_send_calls"),
        loop_report.str("try_send_outcomes"),
        max / 1000
    ));
    verdict.check(max <= 20_000, || {
        format!("a try_send took {} ms (bound 20 ms)", max / 1000)
    });
    let r = final_report(run);
    let (mover, done_ns) = (r.str("mover"), r.u64("mover_done_ns"));
    let Some(killed_ns) = killed_ns else {
        return verdict.fail("the attacker was never killed".into());
    };
    let after_kill = done_ns as i64 - killed_ns as i64;
    verdict.note(format!(
        "backpressure: the mover ended with {mover} {} ms after the kill, having moved {}",
        after_kill / 1_000_000,
        r.u64("moved")
    ));
    verdict.check(
        mover == "Disconnected" && (0..1_000_000_000).contains(&after_kill),
        || {
            format!(
                "the moving thread must end with Disconnected within 1 s of the kill: \
             {mover} at {} ms after it",
                after_kill / 1_000_000
            )
        },
    );
}

fn backpressure_victim(test: &str, role: &str) {
    let v = Victim::start(test, role, "silent", &PipeOptions::new());
    let (side, side_far) = ferry::pipe().expect("make a pipe");
    v.boot
        .sender()
        .send_with(b"side", vec![side_far])
        .expect("move a pipe end to the attacker");
    Report::new()
        .num("attacker_pid", u64::from(v.attacker.id()))
        .print();
    let progress = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&progress);
    let mover = thread::spawn(move || {
        let ended = move_until_error(&side, &counter);
        (side, ended)
    });
    stage("waiting for the mover to block");
    wait_for_stall(&progress);
    let moved_before = progress.load(Ordering::Relaxed);
    stage("try_send loop");
    let (max, calls, kinds) = try_send_for(&v.boot, secs(2));
    Report::new()
        .num("try_send_max_us", max.as_micros() as u64)
        .num("try_send_calls", calls)
        .text("try_send_outcomes", kinds)
        .num("moved_before_loop", moved_before)
        .print();
    stage("mover after the kill");
    let (side, (ended, done_ns)) = mover.join().expect("the mover thread");
    let report = Report::new()
        .text("mover", ended)
        .num("mover_done_ns", done_ns)
        .num("moved", progress.load(Ordering::Relaxed));
    v.finish(vec![side], report);
}

/// Moves fresh pipe ends over `side` until that fails; returns the error
/// and the monotonic time it came.
fn move_until_error(side: &Pipe, progress: &AtomicU64) -> (String, u64) {
    loop {
        let (near, far) = match PipeOptions::new().ring_size(4096).pipe() {
            Ok(ends) => ends,
            Err(e) => return (format!("pipe: {e}"), monotonic_ns()),
        };
        if let Err(e) = side.sender().send_with(b"move", vec![far]) {
            return (format!("{:?}", e.error), monotonic_ns());
        }
        drop(near);
        // Relaxed: a progress counter, read on its own.
        progress.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits until `progress` has not moved for 100 ms (at most 2 s).
fn wait_for_stall(progress: &AtomicU64) {
    let start = Instant::now();
    // Relaxed (both loads): a progress counter, read on its own.
    let mut last = (progress.load(Ordering::Relaxed), Instant::now());
    while start.elapsed() < secs(2) {
        thread::sleep(Duration::from_millis(10));
        let now = progress.load(Ordering::Relaxed);
        if now != last.0 {
            last = (now, Instant::now());
        } else if last.1.elapsed() >= Duration::from_millis(100) {
            return;
        }
    }
}

/// `try_send`s 1 MiB messages for `run`; returns the longest call, the
/// number of calls and the kinds of outcome seen.
fn try_send_for(pipe: &Pipe, run: Duration) -> (Duration, u64, String) {
    let msg = vec![0x5a; 1 << 20];
    let (mut longest, mut calls, mut kinds) = (Duration::ZERO, 0, BTreeSet::new());
    let start = Instant::now();
    while start.elapsed() < run {
        let call = Instant::now();
        let result = pipe.sender().try_send(&msg);
        longest = longest.max(call.elapsed());
        calls += 1;
        kinds.insert(kind(&outcome(&result)).to_string());
    }
    (
        longest,
        calls,
        kinds.into_iter().collect::<Vec<_>>().join(" "),
    )
}

/// The honest half of class 4 (see [`control_socket_backpressure`]).
fn honest_backpressure(dog: &Watchdog, test: &str, verdict: &mut Verdict) {
    let (mut child, a) = common::spawn_child(dog, test, "echo", &PipeOptions::new());
    let (b, b_far) = ferry::pipe().expect("make pipe B");
    a.sender()
        .send_with(b"B", vec![b_far])
        .expect("send pipe B");
    let (a, b) = (Arc::new(a), Arc::new(b));
    let (moved, echoed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let start = Instant::now();
    let x = thread::spawn({
        let (b, moved) = (Arc::clone(&b), Arc::clone(&moved));
        move || move_ends(&b, &moved)
    });
    // Y starts once X's records fill the socket (it holds about 280).
    while moved.load(Ordering::Relaxed) < CONGESTED && start.elapsed() < secs(2) {
        thread::sleep(Duration::from_millis(1));
    }
    let y = thread::spawn({
        let (a, echoed) = (Arc::clone(&a), Arc::clone(&echoed));
        move || echo_rounds(&a, &echoed)
    });
    let counters = [&*moved, &*echoed];
    if let Err(why) = wait_for_threads(&[&x, &y], &counters, start) {
        child.kill();
        return verdict.fail(why);
    }
    for (name, thread) in [("X (moving ends)", x), ("Y (round trips)", y)] {
        match thread.join().expect("a test thread") {
            Ok(summary) => verdict.note(format!("honest peers: {name}: {summary}")),
            Err(why) => verdict.fail(format!("honest peers: thread {name}: {why}")),
        }
    }
    let _ = a.send(b"end");
    let count = b
        .receiver()
        .recv_timeout(secs(30))
        .map(|m| common::msg_u64(&m));
    drop((a, b));
    verdict.check(matches!(count, Ok(MOVED)), || {
        format!("honest peers: the child's B reader counted {count:?}, not {MOVED}")
    });
    verdict.check(child.wait().success(), || {
        "honest peers: the child failed".into()
    });
    verdict.note(format!(
        "honest peers: everything done in {:?}",
        start.elapsed()
    ));
}

/// Waits for `threads`, failing if `counters` all stand still for 10 s
/// (a deadlock) or the whole takes over 60 s.
fn wait_for_threads(
    threads: &[&thread::JoinHandle<Result<String, String>>],
    counters: &[&AtomicU64],
    start: Instant,
) -> Result<(), String> {
    // Relaxed (all loads): progress counters, read on their own.
    let read = || {
        counters
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect::<Vec<_>>()
    };
    let mut last = (read(), Instant::now());
    while !threads.iter().all(|t| t.is_finished()) {
        thread::sleep(Duration::from_millis(50));
        let now = read();
        if now != last.0 {
            last = (now, Instant::now());
        }
        let why = if last.1.elapsed() > secs(10) {
            "no progress for 10 s (a deadlock)"
        } else if start.elapsed() > secs(60) {
            "not done within 60 s"
        } else {
            continue;
        };
        return Err(format!(
            "honest peers: {why} after {:?}: {} of {MOVED} ends moved, {} of {ROUNDS} round trips",
            start.elapsed(),
            last.0[0],
            last.0[1]
        ));
    }
    Ok(())
}

/// Thread X: moves `MOVED` fresh pipe ends over `b`, each in a message
/// carrying its sequence number; says how long it took.
fn move_ends(b: &Pipe, moved: &AtomicU64) -> Result<String, String> {
    let start = Instant::now();
    for seq in 0..MOVED {
        let (near, far) = PipeOptions::new()
            .ring_size(4096)
            .pipe()
            .map_err(|e| format!("pipe: {e}"))?;
        b.sender()
            .send_with(&seq.to_le_bytes(), vec![far])
            .map_err(|e| format!("moving end {seq}: {e}"))?;
        drop(near);
        // Relaxed: a progress counter, read on its own.
        moved.fetch_add(1, Ordering::Relaxed);
    }
    Ok(format!("done in {:?}", start.elapsed()))
}

/// Message `seq` of the round trips: 1 MiB when even, 100 bytes when odd.
fn round_message(seq: u64) -> Vec<u8> {
    pattern(seq, if seq.is_multiple_of(2) { 1 << 20 } else { 100 })
}

/// Thread Y: `ROUNDS` round trips over `a`, each checked; says how long
/// they took.
fn echo_rounds(a: &Pipe, echoed: &AtomicU64) -> Result<String, String> {
    let start = Instant::now();
    let mut slowest = (Duration::ZERO, 0);
    for seq in 0..ROUNDS {
        let round = Instant::now();
        let msg = round_message(seq);
        a.send(&msg).map_err(|e| format!("send {seq}: {e}"))?;
        let reply = a.recv().map_err(|e| format!("reply {seq}: {e}"))?;
        if reply != msg {
            return Err(format!("reply {seq} differs ({} bytes)", reply.len()));
        }
        // Relaxed: a progress counter, read on its own.
        echoed.fetch_add(1, Ordering::Relaxed);
        slowest = slowest.max((round.elapsed(), seq));
    }
    Ok(format!(
        "done in {:?}; the slowest round trip, #{}, took {:?}",
        start.elapsed(),
        slowest.1,
        slowest.0
    ))
}

/// The honest child: echoes pipe A on one thread, reads pipe B slowly on
/// another and reports how many ends arrived, in order.
fn echo_child() {
    let (_dog, a) = common::child_pipe("echo", secs(90));
    let b = a
        .receiver()
        .recv_with()
        .expect("pipe B")
        .pipes
        .pop()
        .expect("one end");
    let reader = thread::spawn(move || {
        for seq in 0..MOVED {
            let msg = b.receiver().recv_with().expect("a moved end");
            assert_eq!(msg.bytes, seq.to_le_bytes(), "ends arrive in order");
            assert_eq!(msg.pipes.len(), 1, "message {seq} carries one end");
            thread::sleep(Duration::from_millis(1));
        }
        b.send(&common::u64_msg(MOVED)).expect("send the count");
        b
    });
    loop {
        let msg = a.recv().expect("a message to echo");
        if msg == b"end" {
            break;
        }
        a.send(&msg).expect("echo");
    }
    let b = reader.join().expect("the B reader");
    // Until the parent has read the count.
    let _ = b.receiver().recv_timeout(secs(30));
}

// ---------------------------------------------------------------------
// 5. Wake storm.

/// The attacker bumps the word the victim's blocked `recv` sleeps on and
/// calls `FUTEX_WAKE` on it, in a loop, for 2 s, publishing nothing. The
/// victim's thread (with `Wait::Sleep`, then the default) must use under
/// 10 % of a CPU over that time, then receive the real message the
/// attacker publishes at the end within 50 ms.
#[test]
fn wake_storm() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, storm_victim);
    }
    let _serial = common::serial();
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
    let (cpu_before, start) = (common::thread_cpu_time(), Instant::now());
    let got = v.boot.recv();
    let done_ns = monotonic_ns();
    let (cpu, wall) = (common::thread_cpu_time() - cpu_before, start.elapsed());
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

// ---------------------------------------------------------------------
// 7. Out of descriptors is a local error.

/// The child lowers its descriptor limit so that no descriptor can be
/// opened, then receives a message carrying a pipe end from its (honest)
/// parent: the error must be local (not `Protocol`, not `Disconnected`).
/// With the limit restored, receiving again must deliver the end, and a
/// message must round-trip through it: the link survives. Then the same
/// with a message carrying a descriptor (a memfd): at the limit a local
/// error, the record left queued; with the limit restored the message
/// arrives with the memfd, whose contents read back.
#[test]
fn out_of_descriptors_is_a_local_error() {
    let test = this_test!();
    if common::role().is_some() {
        return nofile_child();
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut cmd = common::child_command(test, "victim-nofile");
    cmd.stdout(Stdio::piped());
    let (child, pipe) = common::spawn_command(&dog, cmd, &PipeOptions::new());
    let watch = Watch::new(child, "victim-nofile", RUN_LIMIT);
    let limited = pipe.receiver().recv_timeout(secs(10));
    if matches!(&limited, Ok(m) if m == b"limited") {
        let (near, far) = ferry::pipe().expect("make a pipe");
        pipe.sender()
            .send_with(b"end", vec![far])
            .expect("send a pipe end");
        if matches!(near.receiver().recv_timeout(secs(10)), Ok(m) if m == b"ping") {
            near.send(b"pong").expect("answer the ping");
        }
        if matches!(pipe.receiver().recv_timeout(secs(10)), Ok(m) if m == b"limited-fd") {
            let fd = ferry::Handle::Fd(note_memfd(NOFILE_NOTE));
            pipe.sender()
                .send_with(b"fd", vec![fd])
                .expect("send a descriptor");
        }
        let _ = pipe.receiver().recv_timeout(secs(10));
    }
    drop(pipe);
    let run = watch.finish(|_| {});
    let mut verdict = Verdict::new();
    if verdict.survived(&run) {
        check_nofile(&mut verdict, &run);
    }
    verdict.finish();
}

fn check_nofile(verdict: &mut Verdict, run: &VictimRun) {
    let r = run.find("at_limit").expect("the report at the limit");
    verdict.check(r.str("limit_holds") == "yes", || {
        "the lowered limit did not stop a new descriptor".into()
    });
    let at_limit = r.str("at_limit");
    verdict.note(format!("recv_with at the descriptor limit gave {at_limit}"));
    let local = !matches!(kind(at_limit), "Ok" | "Protocol" | "Disconnected");
    verdict.check(local, || {
        format!("out of descriptors must be a local error: recv_with gave {at_limit}")
    });
    let Some(r) = run.find("after") else {
        return verdict.fail("the victim never reported the second receive".into());
    };
    let (after, trip) = (r.str("after"), r.get("round_trip").unwrap_or("-"));
    verdict.check(after == "Ok" && trip == "pong", || {
        format!(
            "the link must survive: with the limit restored recv_with gave {after}, \
             and the round trip through the end {trip}"
        )
    });
    check_nofile_fd(verdict, run);
}

/// The second half of [`check_nofile`]: a descriptor record at the limit.
fn check_nofile_fd(verdict: &mut Verdict, run: &VictimRun) {
    let Some(r) = run.find("fd_at_limit") else {
        return verdict.fail("the victim never reported the descriptor at the limit".into());
    };
    let at_limit = r.str("fd_at_limit");
    verdict.note(format!(
        "recv_with of a descriptor at the limit gave {at_limit}"
    ));
    let local = !matches!(kind(at_limit), "Ok" | "Protocol" | "Disconnected");
    verdict.check(local, || {
        format!("a descriptor at the limit must be a local error: recv_with gave {at_limit}")
    });
    let Some(r) = run.find("fd_after") else {
        return verdict.fail("the victim never reported the descriptor's second receive".into());
    };
    let (after, text) = (r.str("fd_after"), r.get("fd_text").unwrap_or("-"));
    verdict.check(after == "Ok" && text == NOFILE_NOTE, || {
        format!(
            "with the limit restored the message must arrive with its descriptor: \
             recv_with gave {after}, the memfd read {text:?}"
        )
    });
}

/// What the memfd sent to a victim at its descriptor limit holds.
const NOFILE_NOTE: &str = "a memfd across the limit";

/// A memfd holding `text`.
fn note_memfd(text: &str) -> std::os::fd::OwnedFd {
    let fd = rustix::fs::memfd_create("hostile-note", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("memfd_create");
    rustix::io::write(&fd, text.as_bytes()).expect("write the memfd");
    fd
}

/// The text of a memfd, read from its start.
fn memfd_text(fd: &std::os::fd::OwnedFd) -> String {
    let mut buf = [0u8; 256];
    match rustix::io::pread(fd, &mut buf, 0) {
        Ok(n) => String::from_utf8_lossy(&buf[..n]).into_owned(),
        Err(e) => format!("pread: {e}"),
    }
}

fn nofile_child() {
    let (_dog, pipe) = common::child_pipe("victim-nofile", VICTIM_LIMIT);
    let pipe = Arc::new(pipe);
    let old = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    // The peer's descriptors refused so far are closed by ferry's closer
    // threads: once they are, the lowest free descriptor stays put.
    common::settled_fd_count();
    set_nofile(Some(lowest_free_fd()), old.maximum);
    let holds = match std::fs::File::open("/dev/null") {
        Err(e) => e.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()),
        Ok(_) => false,
    };
    pipe.send(b"limited").expect("tell the parent");
    stage("recv_with at the limit");
    let at_limit = pipe.receiver().recv_with();
    set_nofile(old.current, old.maximum);
    Report::new()
        .text("limit_holds", if holds { "yes" } else { "no" })
        .text("at_limit", outcome(&at_limit))
        .print();
    stage("recv_with after the limit");
    let mut report = Report::new();
    report = match recv_with_within(&pipe, secs(5)) {
        None => report.text("after", "nothing within 5 s"),
        Some(Ok(mut msg)) if msg.pipes.len() == 1 => {
            let end = msg.pipes.pop().expect("one end");
            let trip = end
                .send(b"ping")
                .map(|()| end.receiver().recv_timeout(secs(5)));
            let trip = match trip {
                Ok(Ok(reply)) => String::from_utf8_lossy(&reply).into_owned(),
                Ok(e) => outcome(&e),
                Err(e) => format!("send: {e:?}"),
            };
            report.text("after", "Ok").text("round_trip", trip)
        }
        Some(Ok(msg)) => report.text("after", format!("Ok with {} ends", msg.pipes.len())),
        Some(other) => report.text("after", outcome(&other)),
    };
    report.print();
    nofile_fd(&pipe, old);
    let _ = pipe.send(b"done");
}

/// At the limit again, a message with a descriptor: a local error; then,
/// with `old` restored, the message with its memfd.
fn nofile_fd(pipe: &Arc<Pipe>, old: rustix::process::Rlimit) {
    common::settled_fd_count();
    set_nofile(Some(lowest_free_fd()), old.maximum);
    let _ = pipe.send(b"limited-fd");
    stage("recv_with of a descriptor at the limit");
    let at_limit = pipe.receiver().recv_with();
    set_nofile(old.current, old.maximum);
    Report::new()
        .text("fd_at_limit", outcome(&at_limit))
        .print();
    drop(at_limit);
    stage("recv_with of a descriptor after the limit");
    let report = match recv_with_within(pipe, secs(5)) {
        None => Report::new().text("fd_after", "nothing within 5 s"),
        Some(Ok(msg)) if msg.fds.len() == 1 => Report::new()
            .text("fd_after", "Ok")
            .text("fd_text", memfd_text(&msg.fds[0])),
        Some(Ok(msg)) => Report::new().text("fd_after", format!("Ok with {} fds", msg.fds.len())),
        Some(other) => Report::new().text("fd_after", outcome(&other)),
    };
    report.print();
}

/// The number the next descriptor would get: the lowest one not open.
fn lowest_free_fd() -> u64 {
    use std::os::fd::AsRawFd;
    let probe = std::fs::File::open("/dev/null").expect("open /dev/null");
    probe.as_raw_fd() as u64
}

fn set_nofile(current: Option<u64>, maximum: Option<u64>) {
    let limit = rustix::process::Rlimit { current, maximum };
    rustix::process::setrlimit(rustix::process::Resource::Nofile, limit)
        .expect("set RLIMIT_NOFILE");
}

/// `recv_with` on another thread, giving up after `limit` (the thread is
/// left behind: the process ends soon after).
fn recv_with_within(
    pipe: &Arc<Pipe>,
    limit: Duration,
) -> Option<Result<ferry::Message, RecvError>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = Arc::clone(pipe);
    thread::spawn(move || {
        let _ = tx.send(pipe.receiver().recv_with());
    });
    rx.recv_timeout(limit).ok()
}

// ---------------------------------------------------------------------
// 8. Disconnected is sticky.

/// Fresh children per trial.
const TRIALS: usize = 200;

/// After the peer is SIGKILLed and reaped, once a `send` of 1 MiB (which
/// needs the control socket) has returned `Disconnected`, an immediate
/// `try_recv` must return `Disconnected`, not `Empty`: every time, over 200
/// trials. Half the trials also call `try_recv` just before the kill, as an
/// event loop polling the pipe would.
#[test]
fn disconnected_is_sticky() {
    let test = this_test!();
    if common::role().is_some() {
        let (_dog, pipe) = common::child_pipe("sleeper", secs(30));
        pipe.send(b"ready").expect("ready");
        thread::sleep(secs(60));
        return;
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    let mut empties = [0usize; 2];
    let big = vec![1u8; 1 << 20];
    for trial in 0..TRIALS {
        let polled = trial % 2;
        let (mut child, pipe) = common::spawn_child(&dog, test, "sleeper", &PipeOptions::new());
        assert_eq!(
            pipe.receiver().recv_timeout(secs(10)).expect("ready"),
            b"ready"
        );
        if polled == 1 {
            assert!(matches!(
                pipe.receiver().try_recv(),
                Err(TryRecvError::Empty)
            ));
        }
        child.kill();
        child.wait();
        let sent = pipe.send(&big);
        if !matches!(sent, Err(ferry::SendError::Disconnected)) {
            verdict.fail(format!(
                "trial {trial}: send of 1 MiB to a dead peer gave {sent:?}"
            ));
            continue;
        }
        match pipe.receiver().try_recv() {
            Err(TryRecvError::Disconnected) => {}
            Err(TryRecvError::Empty) => empties[polled] += 1,
            other => verdict.fail(format!("trial {trial}: try_recv gave {other:?}")),
        }
    }
    verdict.note(format!(
        "try_recv said Empty after send said Disconnected in {} of {} plain trials \
         and {} of {} polled ones",
        empties[0],
        TRIALS / 2,
        empties[1],
        TRIALS / 2
    ));
    verdict.check(empties == [0, 0], || {
        format!(
            "Disconnected is not sticky: try_recv said Empty {} times in {TRIALS} trials",
            empties[0] + empties[1]
        )
    });
    verdict.finish();
}

// ---------------------------------------------------------------------
// 9. Doorbell records.

/// (a) A doorbell record whose descriptor is a pipe, not a datagram
/// socket, is a `Protocol` error (ringing a pipe could block or fill it).
/// (b) A flood of valid doorbell records (hundreds per message, naming the
/// bootstrap region's every side and regions that do not exist, each with
/// a fresh socket) costs no descriptors: each replaces the one before it
/// or is dropped; the messages after them arrive.
#[test]
fn doorbell_records() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, doorbell_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in ["doorbell-pipe", "doorbell-flood"] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("recv_with");
        match attack {
            "doorbell-pipe" => verdict.check(is_protocol(got), || {
                format!("a doorbell that is a pipe must give Protocol: recv_with gave {got}")
            }),
            _ => {
                let (rounds, records) = (r.u64("rounds"), r.u64("doorbells"));
                verdict.note(format!(
                    "doorbell flood: {records} records over {rounds} messages"
                ));
                verdict.check(got == "Ok" && rounds == attacks::DOORBELL_ROUNDS, || {
                    format!(
                        "the messages after a doorbell flood must arrive: {rounds} did, then {got}"
                    )
                });
            }
        }
    }
    verdict.finish();
}

fn doorbell_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    let rounds = match attack {
        "doorbell-flood" => attacks::DOORBELL_ROUNDS,
        _ => 1,
    };
    let (mut got, mut ends, mut records) = (Ok(()), Vec::new(), 0u64);
    let mut done = 0u64;
    for _ in 0..rounds {
        stage("recv_with");
        match v.boot.receiver().recv_with() {
            Ok(mut msg) => {
                records += msg
                    .bytes
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
                ends.append(&mut msg.pipes);
                done += 1;
            }
            Err(e) => {
                got = Err(e);
                break;
            }
        }
    }
    let report = Report::new()
        .text("recv_with", outcome(&got))
        .num("rounds", done)
        .num("doorbells", records);
    v.finish(ends, report);
}

// ---------------------------------------------------------------------
// 10. A flood of descriptor records.

/// Slack over the pending-descriptor cap a victim's count may show while
/// it reads (the duplicate a peek takes, the directory `fd_count` reads).
const FD_SLACK: u64 = 4;

/// Whether a reported outcome is the local shortage of pending
/// descriptors: `Io` with `QuotaExceeded`.
fn is_quota(outcome: &str) -> bool {
    kind(outcome) == "Io" && outcome.contains("QuotaExceeded")
}

/// The attacker sends a side pipe, then 1,000 descriptor records (each a
/// fresh memfd) that the message on the bootstrap pipe cannot reach
/// without holding them all. The victim's `recv_with` there must give a
/// local `Io` error (`QuotaExceeded`, not `Protocol`) once 256 are
/// pending, having grown its descriptor count by at most that; the side
/// pipe's message claiming 10 of them must still arrive with those 10
/// (each the memfd sent under its id); a second receive on the bootstrap
/// pipe must again be the local error (the link stays up); and once the
/// pipes are dropped the count is back to where it began.
#[test]
fn descriptor_record_flood() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, fd_flood_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    let run = run_victim(&dog, test, "victim-fd-flood", RUN_LIMIT, |_| {});
    if verdict.survived(&run) {
        check_fd_flood(&mut verdict, &run);
    }
    verdict.finish();
}

fn check_fd_flood(verdict: &mut Verdict, run: &VictimRun) {
    use attacker::fd_records::CLAIMED;
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (flood, held) = (r.str("flood"), r.u64("held"));
    verdict.note(format!(
        "fd flood: recv_with gave {flood} after {} ms, holding {held} more descriptors",
        r.u64("flood_us") / 1000
    ));
    verdict.check(is_quota(flood), || {
        format!("a flood of unclaimed descriptors must give a local Io(QuotaExceeded): got {flood}")
    });
    let cap = ferry::wire::MAX_PENDING_FDS as u64;
    verdict.check(held <= cap + FD_SLACK, || {
        format!("the flood made the victim hold {held} descriptors (cap {cap})")
    });
    let (claimed, count) = (r.str("claimed"), r.u64("claimed_fds"));
    verdict.check(
        claimed == "Ok" && count == CLAIMED && r.str("claimed_ids") == "yes",
        || {
            format!(
                "the side pipe's message must arrive with the {CLAIMED} descriptors it claims: \
                 {claimed} with {count} fds, ids match: {}",
                r.str("claimed_ids")
            )
        },
    );
    let (again, held_again) = (r.str("again"), r.u64("held_again"));
    verdict.check(is_quota(again) && held_again <= cap + FD_SLACK, || {
        format!(
            "the link must stay up: a second receive gave {again}, holding {held_again} descriptors"
        )
    });
}

fn fd_flood_victim(test: &str, role: &str) {
    use attacker::fd_records::FD_BASE;
    let v = Victim::start(test, role, "fd-flood", &PipeOptions::new());
    stage("side pipe");
    let side = v
        .boot
        .receiver()
        .recv_with()
        .ok()
        .and_then(|mut m| m.pipes.pop())
        .expect("the side pipe");
    let linked = common::settled_fd_count() as u64;
    v.boot.send(b"go").expect("go");
    stage("recv_with under the flood");
    let start = Instant::now();
    let flood = v.boot.receiver().recv_with();
    let micros = start.elapsed().as_micros() as u64;
    let held = (common::settled_fd_count() as u64).saturating_sub(linked);
    stage("recv_with on the side pipe");
    let claimed = side.receiver().recv_with();
    let (count, ids_match) = match &claimed {
        Ok(msg) => {
            let sizes = msg
                .fds
                .iter()
                .map(|fd| rustix::fs::fstat(fd).map(|s| s.st_size as u64));
            let ids_match = sizes.zip(FD_BASE..).all(|(size, id)| size.ok() == Some(id));
            (msg.fds.len() as u64, ids_match)
        }
        Err(_) => (0, false),
    };
    let claimed = {
        let text = outcome(&claimed);
        drop(claimed);
        text
    };
    stage("recv_timeout after the side message");
    let again = v.boot.receiver().recv_timeout(secs(2));
    let held_again = (common::settled_fd_count() as u64).saturating_sub(linked);
    let report = Report::new()
        .text("flood", outcome(&flood))
        .num("flood_us", micros)
        .num("held", held)
        .text("claimed", claimed)
        .num("claimed_fds", count)
        .text("claimed_ids", if ids_match { "yes" } else { "no" })
        .text("again", outcome(&again))
        .num("held_again", held_again);
    v.finish(vec![side], report);
}

// ---------------------------------------------------------------------
// 11. Malformed descriptor records.

/// Each attack leaves three valid descriptors pending (or one, or none)
/// and then breaks a rule; the victim's `recv_with` must give `Protocol`
/// naming it, close the pending descriptors at once (its count, taken
/// right after the error, is no higher than before the attack), and the
/// link must stay closed (`recv_timeout` gives `Protocol` at once):
/// - a descriptor record with 0, 2 or 5 descriptors
///   (`RecordDescriptorCount`), or with 8, more than the receive buffer
///   takes (`MSG_CTRUNC`: `MalformedRecord`);
/// - a descriptor record whose id a pending descriptor or pipe end holds,
///   or a pipe end whose id a pending descriptor holds (`PipeEndIdTwice`);
/// - a message naming one descriptor twice (`PipeEndNamedTwice`).
///
/// And one honest use a victim must survive: a message with three
/// descriptors and a pipe end received with the bytes-only `recv` arrives,
/// its descriptors closed at once; the next message arrives too.
#[test]
fn malformed_descriptor_records() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return play(test, &role, fd_record_victim);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    // A record's receive buffer holds 4 to 6 descriptors (`CMSG_SPACE`
    // rounding, and where the buffer falls): 5 may arrive whole (one too
    // many) or cut short (`MSG_CTRUNC`); 8 are always cut short.
    let count = &["RecordDescriptorCount"][..];
    let id_twice = &["PipeEndIdTwice"][..];
    for (attack, expected) in [
        ("fd-none", count),
        ("fd-two", count),
        ("fd-five", &["RecordDescriptorCount", "MalformedRecord"]),
        ("fd-eight", &["MalformedRecord"]),
        ("fd-id-twice", id_twice),
        ("fd-id-of-pipe-end", id_twice),
        ("pipe-end-id-of-fd", id_twice),
        ("fd-named-twice", &["PipeEndNamedTwice"]),
        ("fd-bytes-only", &["Ok"]),
    ] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_fd_record(&mut verdict, attack, expected, &run);
        }
    }
    verdict.finish();
}

fn check_fd_record(verdict: &mut Verdict, attack: &str, expected: &[&str], run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (got, then) = (r.str("recv"), r.str("then"));
    let (linked, at_error) = (r.u64("linked"), r.u64("at_error"));
    verdict.note(format!(
        "{attack}: recv gave {got}, then {then}; descriptors {linked} before, {at_error} after"
    ));
    verdict.check(at_error <= linked, || {
        format!(
            "{attack}: the victim holds {at_error} descriptors after the receive, {linked} before"
        )
    });
    if expected == ["Ok"] {
        let after = String::from_utf8_lossy(attacker::fd_records::AFTER).into_owned();
        return verdict.check(got == "Ok" && then == after, || {
            format!("{attack}: both messages must arrive as bytes: got {got}, then {then}")
        });
    }
    let named = expected.iter().any(|why| got.contains(why));
    verdict.check(is_protocol(got) && named, || {
        format!(
            "{attack}: expected Protocol({}), got {got}",
            expected.join(" or ")
        )
    });
    verdict.check(is_protocol(then), || {
        format!("{attack}: the link must stay closed after a violation: recv_timeout gave {then}")
    });
}

fn fd_record_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    let linked = common::settled_fd_count() as u64;
    v.boot.send(b"go").expect("go");
    stage("recv");
    let (got, pipes) = match attack {
        "fd-bytes-only" => match v.boot.recv() {
            Ok(bytes) if bytes == attacker::fd_records::BYTES_ONLY => (Ok(()), Vec::new()),
            Ok(bytes) => (Err(format!("wrong bytes: {bytes:?}")), Vec::new()),
            Err(e) => (Err(format!("{e:?}")), Vec::new()),
        },
        _ => match v.boot.receiver().recv_with() {
            Ok(msg) => (Err(format!("Ok with {} fds", msg.fds.len())), msg.pipes),
            Err(e) => (Err(format!("{e:?}")), Vec::new()),
        },
    };
    let at_error = common::fd_count_back_to(linked as usize) as u64;
    stage("then");
    let then = match v.boot.receiver().recv_timeout(secs(2)) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("{e:?}"),
    };
    let got = match got {
        Ok(()) => "Ok".to_string(),
        Err(e) => e,
    };
    let report = Report::new()
        .text("recv", got)
        .text("then", then)
        .num("linked", linked)
        .num("at_error", at_error);
    v.finish(pipes, report);
}

// ---------------------------------------------------------------------
// 12. A hostile parent at the bootstrap.

/// This test plays a raw parent: it makes the control socket pair
/// itself, queues what an attack sends on it, and starts the victim with
/// a `FERRY_BOOTSTRAP` naming the socket, as `ferry::spawn` would. The
/// victim's `Pipe::from_parent` must return an error, never panic or
/// wait, and leave no descriptor behind:
/// - a descriptor record (kind 6) where the pipe end id 0 should be, or
///   a pipe end whose descriptor is a pipe, not a memfd, or one with two
///   descriptors: `Protocol`;
/// - 260 descriptor records ahead of the pipe end: `Io` (QuotaExceeded):
///   a parent cannot make its child hold more than 256 descriptors;
/// - nothing sent (the parent's end open, or closed): `Protocol`.
#[test]
fn hostile_parent_at_bootstrap() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return boot_victim(&role);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    for attack in [
        "boot-fd-record",
        "boot-not-memfd",
        "boot-two-fds",
        "boot-fd-flood",
        "boot-nothing",
        "boot-hangup",
    ] {
        let run = run_raw_parent(&dog, test, attack);
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("from_parent");
        verdict.note(format!("{attack}: from_parent gave {got}"));
        let ok = match attack {
            "boot-fd-flood" => is_quota(got),
            _ => is_protocol(got),
        };
        verdict.check(ok, || format!("{attack}: from_parent gave {got}"));
    }
    verdict.finish();
}

/// Runs the victim of `attack` as the child of a raw parent: this process.
fn run_raw_parent(dog: &Watchdog, test: &str, attack: &str) -> VictimRun {
    use std::os::fd::AsRawFd;
    let (parent, theirs) = attacker::socket::inheritable_pair().expect("a socket pair");
    parent.grow_send_buffer();
    queue_bootstrap_attack(&parent, attack);
    // Held until the victim is done, unless the attack is to hang up.
    let parent = (attack != "boot-hangup").then_some(parent);
    let role = format!("victim-{attack}");
    let mut cmd = common::child_command(test, &role);
    let env = attacker::wire::bootstrap_env(theirs.as_raw_fd(), std::process::id());
    cmd.env(common::BOOTSTRAP_ENV, env).stdout(Stdio::piped());
    // Only this thread spawns while the socket is inheritable (the test
    // holds `serial`), and it is closed here at once.
    let child = dog.watch(cmd.spawn().expect("spawn the victim"));
    drop(theirs);
    let run = Watch::new(child, &role, RUN_LIMIT).finish(|_| {});
    drop(parent);
    run
}

/// Queues on `parent` what `attack` sends the child before it starts.
fn queue_bootstrap_attack(parent: &attacker::socket::RawSocket, attack: &str) {
    use attacker::fd_records::fresh;
    use attacker::wire::{RecordKind, record};
    use std::os::fd::AsFd;
    let region = attacker::region::RawRegion::create(4096).expect("make a region");
    // The pipe end id 0, role 1: what `ferry::spawn` sends.
    let pipe_end = |fds: &[std::os::fd::BorrowedFd<'_>]| {
        parent
            .send_record(&record(RecordKind::PipeEnd, 1, 0), fds)
            .expect("queue a record");
    };
    match attack {
        "boot-fd-record" => {
            let fd = fresh(4096);
            parent
                .send_record(&record(RecordKind::Fd, 0, 0), &[fd.as_fd()])
                .expect("queue a record");
        }
        "boot-not-memfd" => {
            let (reader, _writer) = std::io::pipe().expect("a pipe");
            pipe_end(&[reader.as_fd()]);
        }
        "boot-two-fds" => pipe_end(&[region.fd(), region.fd()]),
        "boot-fd-flood" => {
            let count = ferry::wire::MAX_PENDING_FDS as u64 + 4;
            for id in 1..=count {
                let fd = fresh(id);
                let queued = parent.try_send_record(&record(RecordKind::Fd, 0, id), &[fd.as_fd()]);
                assert!(
                    matches!(queued, Ok(true)),
                    "the socket took only {} records before the child starts: {queued:?}",
                    id - 1
                );
            }
            pipe_end(&[region.fd()]);
        }
        _ => {}
    }
}

/// The victim of a raw parent: takes its pipe, and reports how that went
/// with its descriptor counts before (not counting the inherited socket,
/// which a failed `from_parent` must close too) and after.
fn boot_victim(role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
    let fds_before = common::fd_count() - 1;
    stage("from_parent");
    let got = Pipe::from_parent();
    let report = Report::new().text("from_parent", outcome(&got));
    drop(got);
    let fds_after = settled_fd_count(fds_before);
    report
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

/// How long an invited victim gives `connect_invited_with`.
const INVITE_TIMEOUT: Duration = Duration::from_millis(500);

/// A raw parent starts the victim as if invited to a server
/// (`FERRY_INVITE` names a pipe it inherits), and writes into that pipe:
/// - nothing, holding its end open, or 10 bytes and holding it: the
///   victim's `connect_invited_with` keeps its timeout (500 ms; before, it
///   waited for the end of the pipe for ever) and says `Timeout`;
/// - 60 bytes of garbage, or a note over the longest invitation (before:
///   a local `Io` error), then closes: `BadInvitation` naming the parent.
#[test]
fn hostile_parent_at_invitation() {
    let test = this_test!();
    if let Some(role) = common::role() {
        return invite_victim(&role);
    }
    let _serial = common::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in [
        "invite-held-open",
        "invite-partial",
        "invite-garbage",
        "invite-too-long",
    ] {
        let run = run_inviting_parent(&dog, test, attack);
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("connect_invited");
        let took = Duration::from_millis(r.u64("took_ms"));
        verdict.note(format!("{attack}: connect_invited gave {got} in {took:?}"));
        let ok = match attack {
            "invite-held-open" | "invite-partial" => got == "Timeout",
            _ => {
                got.starts_with("BadInvitation")
                    && got.contains(&format!("parent: {}", std::process::id()))
            }
        };
        verdict.check(ok, || format!("{attack}: connect_invited gave {got}"));
        verdict.check(took < INVITE_TIMEOUT + secs(2), || {
            format!("{attack}: connect_invited took {took:?}, its timeout {INVITE_TIMEOUT:?}")
        });
    }
    verdict.finish();
}

/// Runs the victim of `attack` as a child invited by a raw parent: this
/// process, which holds the note pipe's write end until the victim is
/// done, unless the attack closes it.
fn run_inviting_parent(dog: &Watchdog, test: &str, attack: &str) -> VictimRun {
    use std::os::fd::AsRawFd;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("a pipe");
    // The child's copy, without close-on-exec.
    let theirs = rustix::io::dup(&read).expect("dup the read end");
    drop(read);
    let note = invitation_note(attack);
    rustix::io::write(&write, &note).expect("write the note");
    let write = matches!(attack, "invite-held-open" | "invite-partial").then_some(write);
    let role = format!("victim-{attack}");
    let mut cmd = common::child_command(test, &role);
    let env = format!("fd={},parent={}", theirs.as_raw_fd(), std::process::id());
    cmd.env("FERRY_INVITE", env).stdout(Stdio::piped());
    // Only this thread spawns while the pipe is inheritable (the test
    // holds `serial`), and it is closed here at once.
    let child = dog.watch(cmd.spawn().expect("spawn the victim"));
    drop(theirs);
    let run = Watch::new(child, &role, RUN_LIMIT).finish(|_| {});
    drop(write);
    run
}

/// What the raw parent writes into the note's pipe for `attack`.
fn invitation_note(attack: &str) -> Vec<u8> {
    // "FRYI", version 1, abstract, no token, 0, the name's length, the
    // (absent) token, the name.
    let note = |name_len: usize, name: &[u8]| {
        let mut out = b"FRYI".to_vec();
        out.extend_from_slice(&[1, 0, 0, 0]);
        out.extend_from_slice(&(name_len as u16).to_le_bytes());
        out.extend_from_slice(&[0; 32]);
        out.extend_from_slice(name);
        out
    };
    match attack {
        "invite-partial" => note(4, b"none")[..10].to_vec(),
        "invite-garbage" => vec![0xa5; 60],
        "invite-too-long" => note(300, &[b'x'; 300]),
        _ => Vec::new(),
    }
}

/// The victim of a raw inviting parent: connects as invited, and reports
/// what came of it, how long it took, and its descriptor counts.
fn invite_victim(role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
    // Not counting the inherited pipe, which a failed connect closes too.
    let fds_before = common::fd_count() - 1;
    stage("connect_invited");
    let start = Instant::now();
    let got = ferry::connect_invited_with(ferry::ConnectOptions::new().timeout(INVITE_TIMEOUT));
    let took = start.elapsed();
    let report = Report::new()
        .text("connect_invited", outcome(&got))
        .num("took_ms", took.as_millis() as u64);
    drop(got);
    let fds_after = settled_fd_count(fds_before);
    report
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}
