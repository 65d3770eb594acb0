//! Waiting without waste, across real processes: a thread blocked in a
//! ferry wait makes no periodic wakeups (an idle pipe costs nothing, with
//! one pipe or a hundred), and the peer's death is pushed to every waiter
//! (blocked in `recv`, or in `send` on a full pipe) within milliseconds,
//! not found by polling.
//!
//! `FERRY_DEATH_TRIALS` sets how many `SIGKILL` trials the death test runs
//! (default 20); it prints the distribution of detection times.

use std::thread;
use std::time::{Duration, Instant};

use ferry::{Pipe, PipeOptions, RecvError, SendError, TrySendError, Wait};
use ferry_testkit::{ChildGuard, Watchdog, secs, this_test};

/// How long the idle test counts wakeups.
const IDLE_WINDOW: Duration = Duration::from_secs(2);
/// How long blocked threads settle before counting starts.
const SETTLE: Duration = Duration::from_millis(300);
/// What the death test asserts of the time from `SIGKILL` to
/// `Disconnected` (the target is 1 ms; this bound is generous so a loaded
/// machine cannot fail CI, and the measured figures are printed).
const DEATH_BOUND: Duration = Duration::from_millis(200);
/// Capacity of the pipe the death test fills so a `send` blocks.
const SMALL: usize = 4096;

/// Voluntary context switches of every thread of this process so far
/// (each sleep that ends is one), from `/proc/self/task/*/status`.
fn process_wakeups() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").expect("read /proc/self/task") {
        let path = task.expect("a task").path().join("status");
        // A thread that ended since the listing has no status: skip it.
        let Ok(status) = std::fs::read_to_string(path) else {
            continue;
        };
        total += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Lets the waiters settle, counts this process's wakeups over
/// [`IDLE_WINDOW`], then kills the holder (which ends every wait).
fn wakeups_then_kill(child: &mut ChildGuard) -> u64 {
    thread::sleep(SETTLE);
    let before = process_wakeups();
    thread::sleep(IDLE_WINDOW);
    let woke = process_wakeups() - before;
    child.kill();
    woke
}

/// The child: takes `count` pipe ends from the parent (in batches, as the
/// parent sends them), says ready, then holds them without a word until
/// it is killed.
fn holder() {
    let (_dog, main) = ferry_testkit::child_pipe("holder", secs(60));
    let mut held = Vec::new();
    loop {
        let msg = main.receiver().recv_with().expect("a batch of pipe ends");
        if msg.bytes == b"done" {
            break;
        }
        held.extend(msg.pipes);
    }
    main.send(b"ready").expect("ready");
    // Blocked until killed (or the parent goes, which ends this wait).
    let _ = main.recv();
}

/// Spawns the holder and moves `count` fresh pipes' far ends to it; returns
/// the near ends.
fn spawn_holder(
    dog: &Watchdog,
    test: &str,
    count: usize,
    options: &PipeOptions,
) -> (ChildGuard, Pipe, Vec<Pipe>) {
    let (child, main) = ferry_testkit::spawn_child(dog, test, "holder", &PipeOptions::new());
    let mut near = Vec::new();
    for batch in (0..count).collect::<Vec<_>>().chunks(16) {
        let mut far = Vec::new();
        for _ in batch {
            let (a, b) = options.pipe().expect("make a pipe");
            near.push(a);
            far.push(b);
        }
        main.sender()
            .send_with(b"ends", far)
            .expect("send a batch of ends");
    }
    main.send(b"done").expect("done");
    assert_eq!(main.recv().expect("the holder's ready"), b"ready");
    (child, main, near)
}

/// Counts this process's wakeups while one thread per pipe sleeps in
/// `recv`, then kills the holder and checks every thread saw it.
fn idle_wakeups(test: &str, pipes: usize, wait: Wait) -> u64 {
    let dog = Watchdog::start(format!("{test} ({pipes} pipes)"), secs(60));
    let options = PipeOptions::new().wait(wait);
    let (mut child, _main, near) = spawn_holder(&dog, test, pipes, &options);
    let waiters: Vec<_> = near
        .into_iter()
        .map(|pipe| thread::spawn(move || pipe.recv()))
        .collect();
    let woke = wakeups_then_kill(&mut child);
    for waiter in waiters {
        let got = waiter.join().expect("a waiter thread");
        assert!(matches!(got, Err(RecvError::Disconnected)), "{got:?}");
    }
    woke
}

/// Counts this process's wakeups while one thread waits in `Select::ready`
/// over a pipe per idle pipe, then kills the holder: the select returns,
/// and each receiver says `Disconnected`.
fn idle_select_wakeups(test: &str, pipes: usize) -> u64 {
    let dog = Watchdog::start(format!("{test} (select, {pipes} pipes)"), secs(60));
    let (mut child, _main, near) = spawn_holder(&dog, test, pipes, &PipeOptions::new());
    let waiter = thread::spawn(move || {
        let mut select = ferry::Select::new().expect("a select");
        let mut senders = Vec::new();
        for pipe in near {
            let (tx, rx) = pipe.split();
            select.add(rx).expect("add");
            senders.push(tx);
        }
        let key = select.ready().expect("select");
        let rx = select.get::<ferry::Receiver>(key).expect("a receiver");
        matches!(rx.try_recv(), Err(ferry::TryRecvError::Disconnected))
    });
    let woke = wakeups_then_kill(&mut child);
    assert!(
        waiter.join().expect("the select thread"),
        "not Disconnected"
    );
    woke
}

/// The same with one tokio task per pipe awaiting `recv` on one
/// current-thread runtime.
#[cfg(feature = "tokio")]
fn idle_async_wakeups(test: &str, pipes: usize) -> u64 {
    let dog = Watchdog::start(format!("{test} (async, {pipes} pipes)"), secs(60));
    let (mut child, _main, near) = spawn_holder(&dog, test, pipes, &PipeOptions::new());
    let waiter = thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let mut tasks = Vec::new();
            for pipe in near {
                let (_, rx) = pipe.split();
                let rx = rx.into_async().expect("async rx");
                tasks.push(tokio::spawn(async move { rx.recv().await }));
            }
            let mut all_gone = true;
            for task in tasks {
                all_gone &= matches!(task.await, Ok(Err(RecvError::Disconnected)));
            }
            all_gone
        })
    });
    let woke = wakeups_then_kill(&mut child);
    assert!(
        waiter.join().expect("the runtime thread"),
        "not Disconnected"
    );
    woke
}

/// An idle select (and, with the `tokio` feature, idle async tasks) costs
/// nothing either.
#[test]
fn idle_select_and_async_make_no_wakeups() {
    if ferry_testkit::role().is_some() {
        return holder();
    }
    let _serial = ferry_testkit::serial();
    for pipes in [1, 100] {
        let woke = idle_select_wakeups(this_test!(), pipes);
        eprintln!(
            "select over {pipes} idle pipes: {woke} wakeups of the whole process in {IDLE_WINDOW:?}"
        );
        assert!(
            woke <= 4,
            "select over {pipes} idle pipes woke this process {woke} times"
        );
        #[cfg(feature = "tokio")]
        {
            let woke = idle_async_wakeups(this_test!(), pipes);
            eprintln!(
                "{pipes} idle async receivers: {woke} wakeups of the whole process in {IDLE_WINDOW:?}"
            );
            assert!(
                woke <= 4,
                "{pipes} idle async receivers woke this process {woke} times"
            );
        }
    }
}

/// An idle pipe costs nothing: over two seconds, this whole process (one
/// or a hundred threads asleep in `recv`, the watcher, the test's own
/// threads) wakes about as often as one blocked socket read would: not at
/// all, bar the measuring thread's own sleep.
#[test]
fn idle_waiters_make_no_wakeups() {
    if ferry_testkit::role().is_some() {
        return holder();
    }
    let _serial = ferry_testkit::serial();
    for wait in [Wait::Adaptive, Wait::Sleep] {
        for pipes in [1, 100] {
            let woke = idle_wakeups(this_test!(), pipes, wait);
            eprintln!(
                "{pipes} idle pipes ({wait:?}): {woke} wakeups of the whole process in {IDLE_WINDOW:?}"
            );
            assert!(
                woke <= 4,
                "{pipes} idle pipes ({wait:?}) woke this process {woke} times in {IDLE_WINDOW:?}"
            );
        }
    }
}

/// What one waiter of the death test was doing.
#[derive(Debug, Clone, Copy)]
enum Blocked {
    Recv,
    RecvTimeout,
    Send,
}

/// One trial: 8 threads blocked in `recv` (one in `recv_timeout`) on 8
/// pipes to the holder, and one in `send` on a full pipe; the holder is
/// killed; returns how long after the kill each saw `Disconnected`.
fn death_trial(test: &str) -> Vec<(Blocked, Duration)> {
    let dog = Watchdog::start(format!("{test} (a trial)"), secs(60));
    let small = PipeOptions::new().ring_size(SMALL);
    let (mut child, _main, mut near) = spawn_holder(&dog, test, 9, &small);
    let full = near.pop().expect("nine pipes");
    loop {
        match full.sender().try_send(&[1; 512]) {
            Ok(()) => {}
            Err(TrySendError::Full) => break,
            Err(e) => panic!("filling a pipe: {e}"),
        }
    }
    let mut waiters: Vec<_> = near
        .into_iter()
        .enumerate()
        .map(|(i, pipe)| {
            thread::spawn(move || {
                let how = if i == 0 {
                    Blocked::RecvTimeout
                } else {
                    Blocked::Recv
                };
                let gone = match how {
                    Blocked::RecvTimeout => matches!(
                        pipe.receiver().recv_timeout(secs(30)),
                        Err(ferry::RecvTimeoutError::Disconnected)
                    ),
                    _ => matches!(pipe.recv(), Err(RecvError::Disconnected)),
                };
                (how, gone, Instant::now())
            })
        })
        .collect();
    waiters.push(thread::spawn(move || {
        let gone = matches!(full.send(&[2; 512]), Err(SendError::Disconnected));
        (Blocked::Send, gone, Instant::now())
    }));
    thread::sleep(Duration::from_millis(50));
    let killed = Instant::now();
    child.kill();
    waiters
        .into_iter()
        .map(|w| {
            let (how, gone, at) = w.join().expect("a waiter thread");
            assert!(gone, "{how:?} did not end with Disconnected");
            (how, at.saturating_duration_since(killed))
        })
        .collect()
}

/// The peer's death reaches every waiter on its link at once, pushed by
/// the kernel's hang-up: threads in `recv`, `recv_timeout` and a `send` on
/// a full pipe all return `Disconnected` within the bound.
#[test]
fn death_is_pushed_to_every_waiter() {
    if ferry_testkit::role().is_some() {
        return holder();
    }
    let _serial = ferry_testkit::serial();
    let trials: usize = std::env::var("FERRY_DEATH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut seen: Vec<Duration> = Vec::new();
    for _ in 0..trials {
        for (how, after) in death_trial(this_test!()) {
            assert!(
                after < DEATH_BOUND,
                "{how:?} saw the death {after:?} after the kill"
            );
            seen.push(after);
        }
    }
    seen.sort();
    let at = |q: f64| seen[((seen.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "death seen after SIGKILL, {} waiters over {trials} trials: p50 {:?}, p99 {:?}, max {:?}",
        seen.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}
