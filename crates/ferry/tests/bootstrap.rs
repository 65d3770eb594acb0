//! `Pipe::from_parent` in processes that ferry did not start, or whose
//! `FERRY_BOOTSTRAP` is forged: a clear error, never a panic or a hang. And
//! in a child that ferry did start: every option the parent set, in force.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use ferry::{BootstrapError, Pipe, PipeOptions, RecvError, SendError, Wait};
use ferry_testkit::{BOOTSTRAP_ENV, ChildGuard, Watchdog, XorShift, checksum, secs, this_test};

/// The exit code of a plain child whose check ran and passed (a child that
/// ran no test at all would exit with 0, a failed one with 101).
const CHECKED: i32 = 42;

/// In the child: `from_parent` must fail with `NotSpawned`, naming the
/// variable in its message.
fn expect_not_spawned() -> ! {
    let _dog = Watchdog::start("child `not-spawned`", secs(30));
    match Pipe::from_parent() {
        Err(BootstrapError::NotSpawned(why)) => {
            assert!(why.contains(BOOTSTRAP_ENV), "unclear message: {why}");
            let shown = BootstrapError::NotSpawned(why.clone()).to_string();
            assert!(shown.contains(&why), "Display drops the reason: {shown}");
        }
        other => panic!("expected NotSpawned, got {other:?}"),
    }
    std::process::exit(CHECKED);
}

/// Runs `cmd` (not through ferry) under `dog` and checks that its check
/// ran and passed.
fn run_plain(dog: &Watchdog, cmd: &mut Command, what: &str) {
    let child = cmd.spawn().expect("spawn a plain child");
    let mut child: ChildGuard = dog.watch(child);
    let status = child.wait();
    assert_eq!(status.code(), Some(CHECKED), "{what}: child {status}");
}

/// A plain `Command`, with no `FERRY_BOOTSTRAP` at all.
#[test]
fn plain_child_is_not_spawned() {
    if ferry_testkit::role().is_some() {
        expect_not_spawned();
    }
    let dog = Watchdog::start(this_test!(), secs(30));
    let mut cmd = ferry_testkit::child_command(this_test!(), "not-spawned");
    run_plain(&dog, &mut cmd, "no variable");
}

/// A well-formed `FERRY_BOOTSTRAP` value naming descriptor `fd` and parent
/// `parent`, with the default options (written out by hand: the test
/// checks the format `ferry::spawn` writes).
fn bootstrap_value(fd: &str, parent: u32) -> String {
    format!(
        "fd={fd},parent={parent},limit=268435456,out_of_line=65536,pool_cap=67108864,max_mapped=4294967296,wait=2"
    )
}

/// Forged values: malformed, naming another parent, or naming a descriptor
/// that is closed, negative, or not a socket.
#[test]
fn forged_bootstrap_variable_is_refused() {
    if ferry_testkit::role().is_some() {
        expect_not_spawned();
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let me = std::process::id();
    let good = bootstrap_value("3", me);
    let forged = [
        "garbage".to_string(),
        String::new(),
        "3".to_string(),
        ":".to_string(),
        "3:".to_string(),
        ":1".to_string(),
        "3:1".to_string(),
        "3:1:1".to_string(),
        "99999999999:1".to_string(),
        // The positional format of earlier versions.
        format!("3:{me}:268435456:65536:67108864:2"),
        bootstrap_value("3", me + 1),
        bootstrap_value("-1", me),
        bootstrap_value("99999999999", me),
        bootstrap_value("987", me),
        bootstrap_value(" 3", me),
        // Standard input: /dev/null, not a socket.
        bootstrap_value("0", me),
        format!("{good},map_budget=1"),
        good.replace(",wait=2", ""),
        good.replace("wait=2", "wait=7"),
        good.replace("pool_cap=67108864", "pool_cap=99999999999999999999999"),
    ];
    for value in &forged {
        let mut cmd = ferry_testkit::child_command(this_test!(), "not-spawned");
        cmd.env(BOOTSTRAP_ENV, value);
        run_plain(&dog, &mut cmd, &format!("{BOOTSTRAP_ENV}={value:?}"));
    }
}

/// In the child: descriptor 0 is a socket that is not a ferry link; taking
/// a pipe from it must fail (it was not ferry that set it up), not panic
/// or hang.
fn expect_refused() -> ! {
    let _dog = Watchdog::start("child `refused`", secs(30));
    match Pipe::from_parent() {
        Err(BootstrapError::Protocol(_)) => {}
        // Refused for what the socket is, not for the variable's syntax.
        Err(BootstrapError::NotSpawned(why)) if !why.contains("malformed") => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    std::process::exit(CHECKED);
}

/// `FERRY_BOOTSTRAP` names a real inherited socket (standard input) with the
/// right parent, but the far end is not ferry: it sends nothing, garbage,
/// a record of the right length without a descriptor, or hangs up.
#[test]
fn foreign_socket_is_refused() {
    if ferry_testkit::role().is_some() {
        expect_refused();
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let payloads: [Option<&[u8]>; 5] = [
        Some(b""),
        Some(b"hello, I am not ferry"),
        Some(&[0; 16]),
        Some(b"FRY\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
        None,
    ];
    for payload in payloads {
        let (mut ours, theirs) = UnixStream::pair().expect("socket pair");
        if let Some(bytes) = payload {
            ours.write_all(bytes).expect("write");
        }
        let mut cmd = ferry_testkit::child_command(this_test!(), "refused");
        cmd.env(BOOTSTRAP_ENV, bootstrap_value("0", std::process::id()))
            .stdin(Stdio::from(OwnedFd::from(theirs)));
        if payload.is_none() {
            drop(ours);
            run_plain(&dog, &mut cmd, "hung-up socket");
        } else {
            run_plain(&dog, &mut cmd, &format!("socket sending {payload:?}"));
        }
    }
}

/// A child of a ferry child inherits the environment (and, before the
/// child takes its pipe, the descriptor too) but is refused: its parent is
/// not the process that set the variable. Its parent's pipe still works,
/// and a second `from_parent` there gives `AlreadyTaken`.
#[test]
fn grandchild_is_not_spawned() {
    match ferry_testkit::role().as_deref() {
        Some("not-spawned") => expect_not_spawned(),
        Some("middle") => return middle(this_test!()),
        _ => {}
    }
    let dog = Watchdog::start(this_test!(), secs(30));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "middle", &PipeOptions::new());
    pipe.send(b"ping").expect("ping");
    assert_eq!(pipe.recv().expect("pong"), b"pong");
    drop(pipe);
    child.wait_ok();
}

fn middle(test: &str) {
    let dog = Watchdog::start("child `middle`", secs(30));
    let mut cmd = ferry_testkit::child_command(test, "not-spawned");
    // Keep the inherited FERRY_BOOTSTRAP, which `child_command` removes.
    let inherited = std::env::var(BOOTSTRAP_ENV).expect("spawned by ferry");
    cmd.env(BOOTSTRAP_ENV, inherited);
    run_plain(&dog, &mut cmd, "grandchild");
    let pipe = Pipe::from_parent().expect("the middle child's own pipe");
    assert!(matches!(
        Pipe::from_parent(),
        Err(BootstrapError::AlreadyTaken)
    ));
    assert_eq!(pipe.recv().expect("ping"), b"ping");
    pipe.send(b"pong").expect("pong");
}

// Every option set on `spawn` reaches the child.

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Spawns the child playing `role` in `test` with `options`, lets `parent`
/// talk to it, and checks that the child's checks passed.
fn with_child(test: &str, role: &str, options: &PipeOptions, parent: impl FnOnce(&Pipe)) {
    let dog = Watchdog::start(format!("{test} ({role})"), secs(60));
    let (child, pipe) = ferry_testkit::spawn_child(&dog, test, role, options);
    parent(&pipe);
    drop(pipe);
    child.wait_ok();
}

/// In a child: its pipe from the parent, under a watchdog.
fn child_pipe() -> (Watchdog, Pipe) {
    ferry_testkit::child_pipe(&ferry_testkit::role().expect("a child"), secs(60))
}

#[test]
fn capacity_reaches_the_child() {
    const CAPACITY: usize = 16 * KIB;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = child_pipe();
        assert_eq!(pipe.sender().ring_size(), CAPACITY);
        return;
    }
    let options = PipeOptions::new().ring_size(CAPACITY);
    with_child(this_test!(), "capacity", &options, |_| {});
}

#[test]
fn max_message_reaches_the_child() {
    const LIMIT: usize = 100_000;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = child_pipe();
        assert_eq!(pipe.sender().max_message(), LIMIT);
        match pipe.send(&vec![1; LIMIT + 1]) {
            Err(SendError::TooLarge { len, limit }) => assert_eq!((len, limit), (LIMIT + 1, LIMIT)),
            other => panic!("a message over the limit: {other:?}"),
        }
        pipe.send(&vec![2; LIMIT]).expect("a message at the limit");
        return;
    }
    let options = PipeOptions::new().max_message(LIMIT);
    with_child(this_test!(), "max-message", &options, |pipe| {
        assert_eq!(pipe.recv().expect("a message at the limit"), vec![2; LIMIT]);
    });
}

#[test]
fn wait_reaches_the_child() {
    match ferry_testkit::role().as_deref() {
        Some("block") => return assert_eq!(child_pipe().1.sender().wait(), Wait::Sleep),
        Some("spin") => return assert_eq!(child_pipe().1.sender().wait(), Wait::Spin),
        _ => {}
    }
    for (role, wait) in [("block", Wait::Sleep), ("spin", Wait::Spin)] {
        with_child(this_test!(), role, &PipeOptions::new().wait(wait), |_| {});
    }
}

/// A message of `len` bytes from the child, derived from `len`.
fn sized(len: usize) -> Vec<u8> {
    XorShift::new(len as u64).bytes(len)
}

/// The size the child sends with each out-of-line threshold, and whether
/// it must arrive in place: `usize::MAX` keeps 1 MiB in the ring (which by
/// default goes out of line); 16 KiB sends 32 KiB out of line (which by
/// default goes through the ring).
const OUT_OF_LINE_CASES: [(&str, usize, usize, bool); 2] = [
    ("never", usize::MAX, MIB, false),
    ("16k", 16 * KIB, 32 * KIB, true),
];

#[test]
fn out_of_line_reaches_the_child() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, pipe) = child_pipe();
        let (_, _, len, _) = OUT_OF_LINE_CASES
            .into_iter()
            .find(|case| case.0 == role)
            .expect("a known role");
        pipe.send(&sized(len)).expect("send");
        return;
    }
    for (role, threshold, len, in_place) in OUT_OF_LINE_CASES {
        let options = PipeOptions::new().out_of_line(threshold);
        with_child(this_test!(), role, &options, |pipe| {
            let view = pipe.receiver().recv_shared().expect("the child's message");
            assert_eq!(view.is_in_place(), in_place, "{role}: {len} bytes");
            assert!(*view == *sized(len), "{role}: the message changed");
        });
    }
}

/// With a 2 MiB cap on both sides, the child's 1 MiB messages all arrive:
/// the child's link keeps to the cap that the parent enforces.
#[test]
fn pool_cap_reaches_the_child() {
    const CAP: usize = 2 * MIB;
    const COUNT: u64 = 50;
    let message = |i: u64| XorShift::new(i + 1).bytes(MIB);
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = child_pipe();
        for i in 0..COUNT {
            pipe.send(&message(i)).expect("send");
        }
        return;
    }
    let options = PipeOptions::new().pool_cap(CAP);
    with_child(this_test!(), "pool-cap", &options, |pipe| {
        for i in 0..COUNT {
            let got = pipe.recv().unwrap_or_else(|e| panic!("message {i}: {e:?}"));
            assert_eq!(checksum(&got), checksum(&message(i)), "message {i}");
        }
    });
}

/// A child told to map at most 1 MiB of its parent's memory (the bootstrap
/// pipe's region already takes half of it) refuses the parent's first 1 MiB
/// block with a protocol error naming the budget; with the default budget
/// the same message arrives.
#[test]
fn max_mapped_reaches_the_child() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, pipe) = child_pipe();
        let outcome = match pipe.recv() {
            Ok(msg) => format!("ok {}", msg.len()),
            Err(RecvError::Protocol(e)) => format!("protocol {e}"),
            Err(e) => format!("other {e:?}"),
        };
        let expected_ok = role == "default-budget";
        assert_eq!(outcome.starts_with("ok"), expected_ok, "{role}: {outcome}");
        if !expected_ok {
            assert!(outcome.contains("map budget"), "{role}: {outcome}");
        }
        return;
    }
    for (role, options) in [
        ("small-budget", PipeOptions::new().max_mapped(MIB)),
        ("default-budget", PipeOptions::new()),
    ] {
        let dog = ferry_testkit::Watchdog::start(this_test!(), ferry_testkit::secs(30));
        let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), role, &options);
        match pipe.send(&vec![5; MIB]) {
            Ok(()) | Err(SendError::Disconnected) => {}
            Err(e) => panic!("{role}: {e:?}"),
        }
        child.wait_ok();
    }
}
