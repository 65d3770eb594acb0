//! `Pipe::from_parent` in processes that ferry did not start, or whose
//! `FERRY_BOOTSTRAP` is forged: a clear error, never a panic or a hang.

mod common;

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use common::{BOOTSTRAP_ENV, ChildGuard, Watchdog, secs};
use ferry::{BootstrapError, Pipe, PipeOptions};

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
    if common::role().is_some() {
        expect_not_spawned();
    }
    let dog = Watchdog::start(this_test!(), secs(30));
    let mut cmd = common::child_command(this_test!(), "not-spawned");
    run_plain(&dog, &mut cmd, "no variable");
}

/// Forged values: malformed, naming another parent, or naming a descriptor
/// that is closed, negative, or not a socket.
#[test]
fn forged_bootstrap_variable_is_refused() {
    if common::role().is_some() {
        expect_not_spawned();
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let me = std::process::id();
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
        format!("3:{}", me + 1),
        format!("-1:{me}"),
        format!("987:{me}"),
        format!(" 3:{me}"),
        // Standard input: /dev/null, not a socket.
        format!("0:{me}"),
    ];
    for value in &forged {
        let mut cmd = common::child_command(this_test!(), "not-spawned");
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
        Err(BootstrapError::NotSpawned(_) | BootstrapError::Protocol(_)) => {}
        other => panic!("expected a refusal, got {other:?}"),
    }
    std::process::exit(CHECKED);
}

/// `FERRY_BOOTSTRAP` names a real inherited socket (standard input) with the
/// right parent, but the far end is not ferry: it sends nothing, garbage,
/// a record of the right length without a descriptor, or hangs up.
#[test]
fn foreign_socket_is_refused() {
    if common::role().is_some() {
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
        let mut cmd = common::child_command(this_test!(), "refused");
        cmd.env(BOOTSTRAP_ENV, format!("0:{}", std::process::id()))
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
    match common::role().as_deref() {
        Some("not-spawned") => expect_not_spawned(),
        Some("middle") => return middle(this_test!()),
        _ => {}
    }
    let dog = Watchdog::start(this_test!(), secs(30));
    let (child, pipe) = common::spawn_child(&dog, this_test!(), "middle", &PipeOptions::new());
    pipe.send(b"ping").expect("ping");
    assert_eq!(pipe.recv().expect("pong"), b"pong");
    drop(pipe);
    child.wait_ok();
}

fn middle(test: &str) {
    let dog = Watchdog::start("child `middle`", secs(30));
    let mut cmd = common::child_command(test, "not-spawned");
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
