//! Waiting on many pipes at once, across real processes: `Select` over
//! receivers whose senders live in a child, a receiver's readiness
//! descriptor in a plain `poll` loop, fairness, and the peer's death (a
//! clean exit or `SIGKILL`) reported as an event of each receiver.

use std::os::fd::AsFd;
use std::thread;
use std::time::{Duration, Instant};

use ferry::{Key, Pipe, PipeOptions, Receiver, Select, Sender, TryRecvError};
use ferry_testkit::{ChildGuard, Watchdog, XorShift, secs, this_test};

/// Pipes in the cross-process tests.
const PIPES: usize = 10;
/// Messages the child sends in the stream test.
const MESSAGES: usize = 400;
/// Messages of the flood test.
const FLOOD: usize = 20_000;
/// Message sizes: in the ring, in pieces, out of line.
const SIZES: [usize; 5] = [0, 12, 1000, 70_000, 1 << 20];

/// The message the child sends as the `n`th on pipe `pipe`.
fn message(rng: &mut XorShift, pipe: usize, n: usize) -> Vec<u8> {
    let len = SIZES[rng.upto(SIZES.len() - 1)];
    let mut m = rng.bytes(len.max(16));
    m[..8].copy_from_slice(&(pipe as u64).to_le_bytes());
    m[8..16].copy_from_slice(&(n as u64).to_le_bytes());
    m
}

/// The child: takes `PIPES` ends, says ready, then plays its role.
fn child(role: &str) {
    let (_dog, main) = ferry_testkit::child_pipe(role, secs(60));
    let mut ends: Vec<Pipe> = Vec::new();
    while ends.len() < PIPES {
        let msg = main.receiver().recv_with().expect("a batch of ends");
        ends.extend(msg.pipes);
    }
    main.send(b"ready").expect("ready");
    match role {
        "flood" => {
            // Small messages round-robin with pauses of every length, so
            // the parent's select is often asleep when one lands.
            let mut rng = XorShift::new(9);
            for i in 0..FLOOD {
                let pipe = i % PIPES;
                ends[pipe]
                    .send(&(i as u64).to_le_bytes())
                    .expect("flood send");
                if rng.upto(15) == 0 {
                    thread::sleep(Duration::from_micros(rng.upto(200) as u64));
                }
            }
            assert_eq!(main.recv().expect("the parent's done"), b"done");
        }
        "stream" => {
            let mut rng = XorShift::new(7);
            let mut sent = [0usize; PIPES];
            for _ in 0..MESSAGES {
                let pipe = rng.upto(PIPES - 1);
                let m = message(&mut rng, pipe, sent[pipe]);
                ends[pipe].send(&m).expect("send on a selected pipe");
                sent[pipe] += 1;
            }
            // Dropping every end (and exiting) is the last event of each.
            assert_eq!(main.recv().expect("the parent's done"), b"done");
        }
        _ => {
            // Held until killed.
            let _ = main.recv();
        }
    }
}

/// Spawns the child playing `role`, with the far ends of `PIPES` pipes.
fn spawn(dog: &Watchdog, test: &str, role: &str) -> (ChildGuard, Pipe, Vec<Pipe>) {
    let (child, main) = ferry_testkit::spawn_child(dog, test, role, &PipeOptions::new());
    let (mut near, mut far) = (Vec::new(), Vec::new());
    for _ in 0..PIPES {
        let (a, b) = ferry::pipe().expect("a pipe");
        near.push(a);
        far.push(b);
    }
    main.sender()
        .send_with(b"ends", far)
        .expect("ends to the child");
    assert_eq!(main.recv().expect("the child's ready"), b"ready");
    (child, main, near)
}

/// A `Select` that owns the receiving halves of `near`, in order; the
/// keys it gave them, and the sending halves (kept, so the pipes stay
/// whole).
fn select_over(near: Vec<Pipe>) -> (Select, Vec<Key>, Vec<Sender>) {
    let mut select = Select::new().expect("a select");
    let mut keys = Vec::new();
    let mut senders = Vec::new();
    for pipe in near {
        let (tx, rx) = pipe.split();
        keys.push(select.add(rx).expect("add a receiver"));
        senders.push(tx);
    }
    (select, keys, senders)
}

/// The receiver under `key`, and its index in `keys`.
fn member<'a>(select: &'a Select, keys: &[Key], key: Key) -> (usize, &'a Receiver) {
    let i = keys.iter().position(|&k| k == key).expect("a key of ours");
    (i, select.get::<Receiver>(key).expect("a byte receiver"))
}

/// Every message sent on every pipe arrives, in order per pipe and intact,
/// through `Select` alone (no blocking receive), each whole when `ready`
/// says so (never `Empty`, though some are larger than the ring); then
/// each pipe's end is reported once as `Disconnected`, and after that
/// the set has nothing to report.
#[test]
fn select_receives_every_message_of_every_pipe() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let (child, main, near) = spawn(&dog, this_test!(), "stream");
    let (mut select, keys, _senders) = select_over(near);
    let mut rng = XorShift::new(7);
    let mut expected: Vec<Vec<Vec<u8>>> = vec![Vec::new(); PIPES];
    let mut counts = [0usize; PIPES];
    for _ in 0..MESSAGES {
        let pipe = rng.upto(PIPES - 1);
        let m = message(&mut rng, pipe, counts[pipe]);
        expected[pipe].push(m);
        counts[pipe] += 1;
    }
    let mut got = [0usize; PIPES];
    let mut received = 0;
    while received < MESSAGES {
        let key = select.ready().expect("select");
        let (i, rx) = member(&select, &keys, key);
        match rx.try_recv() {
            Ok(m) => {
                assert_eq!(m, expected[i][got[i]], "pipe {i}, message {}", got[i]);
                got[i] += 1;
                received += 1;
            }
            Err(e) => panic!("pipe {i} after {} messages: {e}", got[i]),
        }
    }
    main.send(b"done").expect("done");
    child.wait_ok();
    let mut gone = [false; PIPES];
    while gone.iter().any(|g| !g) {
        let key = select.ready().expect("select");
        let (i, rx) = member(&select, &keys, key);
        match rx.try_recv() {
            Err(TryRecvError::Disconnected) => gone[i] = true,
            other => panic!("pipe {i} after the child exited: {other:?}"),
        }
    }
    // Every end was received: nothing is left to report.
    assert!(select.ready_timeout(Duration::from_millis(50)).is_err());
}

/// With every receiver always ready, `ready` takes them in turn.
#[test]
fn select_is_fair() {
    let (near, far): (Vec<_>, Vec<_>) = (0..3).map(|_| ferry::pipe().expect("a pipe")).unzip();
    for a in &near {
        for _ in 0..200 {
            a.send(b"x").expect("fill");
        }
    }
    let (mut select, keys, _senders) = select_over(far);
    let mut taken = [0usize; 3];
    for _ in 0..300 {
        let key = select.try_ready().expect("all are ready");
        let (i, rx) = member(&select, &keys, key);
        rx.try_recv().expect("a message");
        taken[i] += 1;
    }
    assert_eq!(taken, [100, 100, 100]);
    // Still in turn after a member leaves the set.
    let second = select.remove::<Receiver>(keys[1]).expect("the second");
    for _ in 0..40 {
        let key = select.try_ready().expect("both are ready");
        let (i, rx) = member(&select, &keys, key);
        rx.try_recv().expect("a message");
        taken[i] += 1;
    }
    assert_eq!(taken, [120, 100, 120]);
    let mut select = Select::new().expect("a select");
    let key = select.add(second).expect("add");
    drop(near[1].sender().try_send(b"")); // keep it alive and ready
    assert_eq!(
        select
            .ready_timeout(Duration::from_millis(1))
            .expect("ready"),
        key
    );
}

/// A thread asleep in `Select::ready` over pipes to a child sees the
/// child's `SIGKILL` as an event, and each receiver then says
/// `Disconnected`.
#[test]
fn select_sees_the_peer_killed() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let (mut child, _main, near) = spawn(&dog, this_test!(), "hold");
    let waiter = thread::spawn(move || {
        let (mut select, _keys, _senders) = select_over(near);
        let key = select.ready().expect("select");
        let seen = Instant::now();
        let first = select.get::<Receiver>(key).expect("there").try_recv();
        (seen, matches!(first, Err(TryRecvError::Disconnected)))
    });
    thread::sleep(Duration::from_millis(100));
    let killed = Instant::now();
    child.kill();
    let (seen, disconnected) = waiter.join().expect("the select thread");
    assert!(
        disconnected,
        "the first event after the kill was not Disconnected"
    );
    let after = seen.saturating_duration_since(killed);
    eprintln!("select saw the kill after {after:?}");
    assert!(after < Duration::from_millis(200), "{after:?}");
}

/// A receiver's readiness descriptor works in a plain `poll(2)` loop: it
/// turns readable for a message from another process, and for its death.
#[test]
fn ready_fd_in_a_poll_loop() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    use rustix::event::{PollFd, PollFlags, poll};
    let dog = Watchdog::start(this_test!(), secs(60));
    let (mut child, main, near) = spawn(&dog, this_test!(), "hold");
    let rx = near[3].receiver();
    let fd = rx.ready_fd().expect("a readiness descriptor");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    let readable = |ms: i64| {
        let fd = fd.as_fd();
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let timeout = rustix::time::Timespec {
            tv_sec: ms / 1000,
            tv_nsec: (ms % 1000) * 1_000_000,
        };
        poll(&mut fds, Some(&timeout)).expect("poll") == 1
    };
    assert!(!readable(50), "readable with nothing sent");
    drop(main); // the child's main.recv() ends; it stays alive holding the ends
    child.kill();
    assert!(readable(1000), "not readable after the peer died");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
}

/// A stress of the doorbells across processes: 20,000 small messages over
/// 10 pipes, the sender pausing at random, the receiver waiting only in
/// `Select::ready`. A lost ring would hang it (the watchdog fails the test);
/// every message arrives once, in order per pipe.
#[test]
fn select_under_a_flood_loses_no_wakeup() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let (child, main, near) = spawn(&dog, this_test!(), "flood");
    let (mut select, keys, _senders) = select_over(near);
    let mut next = [0usize; PIPES];
    let mut received = 0;
    let mut buf = Vec::new();
    while received < FLOOD {
        let key = select.ready().expect("select");
        let (i, rx) = member(&select, &keys, key);
        match rx.try_recv_into(&mut buf) {
            Ok(()) => {
                let n = u64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
                let expected = (i + PIPES * next[i]) as u64;
                assert_eq!(n, expected, "pipe {i}: lost, repeated or reordered");
                next[i] += 1;
                received += 1;
            }
            Err(TryRecvError::Empty) => {}
            Err(e) => panic!("pipe {i}: {e}"),
        }
    }
    main.send(b"done").expect("done");
    child.wait_ok();
}
