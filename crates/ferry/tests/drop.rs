//! Dropping one end, or the exit of the process holding it: the other end
//! receives every message sent before, then `Disconnected`, and its sends
//! fail with `Disconnected`.

use std::io::Read;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use ferry::{Pipe, PipeOptions, RecvError, SendError, Wait};
use ferry_testkit::{secs, this_test};

const COUNT: u64 = 1000;

/// Message `seq` of the stream: mostly small, every 100th 1 MiB (sent in
/// pieces), the last one too.
fn message(seq: u64) -> Vec<u8> {
    let len = if seq % 100 == 99 {
        1 << 20
    } else {
        (seq as usize * 37) % 3000
    };
    let mut msg = vec![(seq % 251) as u8; len];
    let n = len.min(8);
    msg[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    msg
}

fn send_all(pipe: &Pipe) {
    for seq in 0..COUNT {
        pipe.send(&message(seq))
            .unwrap_or_else(|e| panic!("send {seq}: {e}"));
    }
}

/// Receives the whole stream, then expects `Disconnected` (again and again,
/// and from sends too).
fn recv_all_then_disconnected(pipe: &Pipe) {
    for seq in 0..COUNT {
        let msg = pipe.recv().unwrap_or_else(|e| panic!("recv {seq}: {e}"));
        assert!(msg == message(seq), "message {seq}");
    }
    let started = Instant::now();
    match pipe.recv() {
        Err(RecvError::Disconnected) => {}
        Ok(msg) => panic!("an extra {}-byte message", msg.len()),
        Err(e) => panic!("{e}"),
    }
    assert!(started.elapsed() < secs(1), "slow to see the end");
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    assert!(matches!(
        pipe.receiver().try_recv(),
        Err(ferry::TryRecvError::Disconnected)
    ));
    assert!(matches!(pipe.send(b"x"), Err(SendError::Disconnected)));
    assert!(matches!(
        pipe.sender().try_send(b"x"),
        Err(ferry::TrySendError::Disconnected)
    ));
}

/// The child sends the stream, drops its end and stays alive (until its
/// standard input closes): the parent sees the drop, not an exit.
#[test]
fn child_drops_its_end_after_sending() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("dropper", secs(30));
        send_all(&pipe);
        drop(pipe);
        let mut rest = Vec::new();
        std::io::stdin().read_to_end(&mut rest).expect("stdin");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let mut cmd = ferry_testkit::child_command(this_test!(), "dropper");
    cmd.stdin(Stdio::piped());
    let (mut child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new());
    let stdin = child.take_stdin();
    recv_all_then_disconnected(&pipe);
    drop(stdin);
    child.wait_ok();
}

/// The child sends the stream and exits at once, without dropping its end.
#[test]
fn child_exits_after_sending() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("exiter", secs(30));
        send_all(&pipe);
        std::process::exit(0);
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "exiter", &PipeOptions::new());
    recv_all_then_disconnected(&pipe);
    child.wait_ok();
}

/// The parent sends the stream and drops its end while it lives on; the
/// child checks it got everything and then `Disconnected`.
#[test]
fn parent_drops_its_end_after_sending() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("receiver", secs(30));
        recv_all_then_disconnected(&pipe);
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "receiver", &PipeOptions::new());
    send_all(&pipe);
    drop(pipe);
    child.wait_ok();
}

/// Both ends in one process: the receiver drains what was sent, then gets
/// `Disconnected`.
#[test]
fn in_process_drop_after_sending() {
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().expect("pipe");
    thread::scope(|s| {
        s.spawn(move || {
            send_all(&a);
            drop(a);
        });
        recv_all_then_disconnected(&b);
    });
    drop(dog);
}

/// Dropping an end wakes the other end's blocked `recv` (empty ring) and
/// blocked `send` (full ring), for each wait strategy.
#[test]
fn in_process_drop_wakes_blocked_calls() {
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    for wait in [Wait::Sleep, Wait::Adaptive, Wait::Spin] {
        let options = PipeOptions::new().ring_size(4096).wait(wait);
        let (a, b) = options.pipe().expect("pipe");
        let (result, latency) = drop_during(a, || b.recv());
        eprintln!("{wait:?} recv: Disconnected {latency:?} after the drop");
        assert!(matches!(result, Err(RecvError::Disconnected)), "{result:?}");
        assert!(latency < secs(1), "{wait:?}: {latency:?}");

        let (a, b) = options.pipe().expect("pipe");
        while b.sender().try_send(&[0; 100]).is_ok() {}
        let (result, latency) = drop_during(a, || b.send(&[1; 100]));
        eprintln!("{wait:?} send: Disconnected {latency:?} after the drop");
        assert!(matches!(result, Err(SendError::Disconnected)), "{result:?}");
        assert!(latency < secs(1), "{wait:?}: {latency:?}");
    }
    drop(dog);
}

/// Drops `end` from another thread while `blocked` runs here; returns what
/// `blocked` returned and how long after the drop.
fn drop_during<R>(end: Pipe, blocked: impl FnOnce() -> R) -> (R, Duration) {
    thread::scope(|s| {
        let dropper = s.spawn(move || {
            thread::sleep(Duration::from_millis(100));
            let at = Instant::now();
            drop(end);
            at
        });
        let result = blocked();
        let done = Instant::now();
        (
            result,
            done.saturating_duration_since(dropper.join().expect("dropper")),
        )
    })
}

/// An end dropped while its peer had not read everything: the peer still
/// reads it all. An end dropped with messages unread: the sender is told
/// `Disconnected` at once.
#[test]
fn in_process_drop_with_messages_in_flight() {
    let (a, b) = ferry::pipe().expect("pipe");
    a.send(b"one").expect("send");
    a.send(b"two").expect("send");
    b.send(b"unread").expect("send");
    drop(a);
    assert!(matches!(b.send(b"three"), Err(SendError::Disconnected)));
    assert_eq!(b.recv().expect("one"), b"one");
    assert_eq!(b.receiver().try_recv().expect("two"), b"two");
    assert!(matches!(
        b.receiver().try_recv(),
        Err(ferry::TryRecvError::Disconnected)
    ));
    assert!(matches!(
        b.receiver().recv_timeout(secs(5)),
        Err(ferry::RecvTimeoutError::Disconnected)
    ));
}
