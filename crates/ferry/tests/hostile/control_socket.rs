//! Backpressure on the control socket: an attacker that never reads it
//! stalls only its own pipe (with an honest two-process check of the same
//! congestion).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, kind, pattern, play};
use ferry::{Pipe, PipeOptions};
use ferry_testkit::{Watchdog, monotonic_ns, secs, this_test};

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
    if let Some(role) = ferry_testkit::role() {
        if role == "echo" {
            return echo_child();
        }
        return play(test, &role, backpressure_victim);
    }
    let _serial = ferry_testkit::serial();
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
    let (mut child, a) = ferry_testkit::spawn_child(dog, test, "echo", &PipeOptions::new());
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
        .map(|m| ferry_testkit::msg_u64(&m));
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
    let (_dog, a) = ferry_testkit::child_pipe("echo", secs(90));
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
        b.send(&ferry_testkit::u64_msg(MOVED))
            .expect("send the count");
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
