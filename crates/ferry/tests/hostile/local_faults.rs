//! Two local faults, with an honest ferry peer: running out of
//! descriptors is a local error that the link survives, and
//! `Disconnected` is sticky once seen.

use std::process::Stdio;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use crate::attacker::report::{Report, Verdict, VictimRun, Watch, outcome, stage};
use crate::victim::{RUN_LIMIT, VICTIM_LIMIT, kind};
use ferry::{Pipe, PipeOptions, RecvError, TryRecvError};
use ferry_testkit::{Watchdog, secs, this_test};
// ---------------------------------------------------------------------
// Out of descriptors is a local error.

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
    if ferry_testkit::role().is_some() {
        return nofile_child();
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut cmd = ferry_testkit::child_command(test, "victim-nofile");
    cmd.stdout(Stdio::piped());
    let (child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new());
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
    let (_dog, pipe) = ferry_testkit::child_pipe("victim-nofile", VICTIM_LIMIT);
    let pipe = Arc::new(pipe);
    let old = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    // The peer's descriptors refused so far are closed by ferry's closer
    // threads: once they are, the lowest free descriptor stays put.
    ferry_testkit::settled_fd_count();
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
    ferry_testkit::settled_fd_count();
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
// Disconnected is sticky.

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
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("sleeper", secs(30));
        pipe.send(b"ready").expect("ready");
        thread::sleep(secs(60));
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    let mut empties = [0usize; 2];
    let big = vec![1u8; 1 << 20];
    for trial in 0..TRIALS {
        let polled = trial % 2;
        let (mut child, pipe) =
            ferry_testkit::spawn_child(&dog, test, "sleeper", &PipeOptions::new());
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
