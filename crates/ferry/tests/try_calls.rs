//! `try_` calls across processes: they never wait behind another thread's
//! call on the same end (even one stuck on a full control socket), and a
//! `try_send` retried on `Full` gets a message larger than the ring
//! through to a receiver that keeps reading.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use ferry::{PipeOptions, SendTimeoutError, TryRecvError, TrySendError};
use ferry_testkit::{XorShift, secs, this_test};

/// Ring capacity of the pipe carrying large messages.
const RING: usize = 16 * 1024;
/// Messages of three rings each, sent with `try_send`.
const LARGE: usize = 3 * RING;
const COUNT: u64 = 200;

/// Message `seq` of the large stream.
fn large(seq: u64) -> Vec<u8> {
    let mut msg = XorShift::new(seq + 1).bytes(LARGE);
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg
}

/// The child of [`try_send_gets_messages_larger_than_the_ring_through`]:
/// polls with `try_recv` (pausing when it finds nothing) until it has
/// every message, checking each.
fn poller() {
    let (_dog, pipe) = ferry_testkit::child_pipe("poller", secs(60));
    pipe.send(b"ready").expect("ready");
    let mut seq = 0;
    while seq < COUNT {
        match pipe.receiver().try_recv() {
            Ok(msg) => {
                assert!(msg == large(seq), "message {seq} arrived changed");
                seq += 1;
            }
            // A pause between polls, as a receiver busy with other work
            // makes: the sender's `try_send` finds the ring full of the
            // pieces it wrote and must not throw them away.
            Err(TryRecvError::Empty) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("message {seq}: {e}"),
        }
    }
    pipe.send(b"all").expect("all");
    let _ = pipe.recv();
}

/// 200 messages of three rings each, with out-of-line blocks off so they
/// travel through the ring in pieces, sent with `try_send` retried on
/// `Full` to a child polling with `try_recv`: all arrive, in order,
/// intact, within 10 s. (Before, each `Full` answer threw away the pieces
/// it had written, and the stream crawled or stalled.)
#[test]
fn try_send_gets_messages_larger_than_the_ring_through() {
    if ferry_testkit::role().is_some() {
        return poller();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    a_refilled_buffer_is_another_message();
    let options = PipeOptions::new().ring_size(RING);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "poller", &options);
    pipe.sender().set_out_of_line(usize::MAX);
    assert_eq!(pipe.recv().expect("ready"), b"ready");
    let start = Instant::now();
    let mut fulls = 0u64;
    for seq in 0..COUNT {
        let msg = large(seq);
        loop {
            match pipe.sender().try_send(&msg) {
                Ok(()) => break,
                Err(TrySendError::Full) => fulls += 1,
                Err(e) => panic!("message {seq}: {e}"),
            }
            assert!(
                start.elapsed() < secs(10),
                "message {seq} not through after 10 s ({fulls} Full answers)"
            );
            std::thread::yield_now();
        }
    }
    let answer = pipe
        .receiver()
        .recv_timeout(secs(10))
        .expect("the child's count");
    assert_eq!(answer, b"all");
    let took = start.elapsed();
    assert!(took < secs(10), "{COUNT} messages took {took:?}");
    drop(pipe);
    child.wait_ok();
}

/// In one process: a message larger than the ring stopped part way by
/// `Full`, whose buffer the caller then refills with another message of
/// the same length, is abandoned, not finished with the new bytes: the
/// receiver gets the second message whole, and nothing of the first.
fn a_refilled_buffer_is_another_message() {
    let (a, b) = PipeOptions::new().ring_size(4096).pipe().expect("pipe");
    let mut buf = vec![0xaa; 20_000];
    assert!(matches!(a.sender().try_send(&buf), Err(TrySendError::Full)));
    buf.fill(0xbb);
    let mut got = None;
    for _ in 0..10_000 {
        match a.sender().try_send(&buf) {
            Ok(()) => break,
            Err(TrySendError::Full) => {}
            Err(e) => panic!("{e}"),
        }
        match b.receiver().try_recv() {
            Ok(msg) => got = Some(msg),
            Err(TryRecvError::Empty) => {}
            Err(e) => panic!("{e}"),
        }
    }
    let msg = got
        .or_else(|| b.receiver().try_recv().ok())
        .expect("the second message");
    assert!(msg == buf, "a message of {} bytes arrived mixed", msg.len());
    assert!(matches!(b.receiver().try_recv(), Err(TryRecvError::Empty)));
}

/// How long the `sleeper` child leaves its socket unread.
const SLEEP: Duration = Duration::from_secs(5);
/// Pipe ends each filling message carries (the most one may).
const FILL: usize = 253;

/// The child of [`a_try_call_never_waits_behind_a_send_stuck_on_the_socket`]:
/// takes two more pipes, then reads nothing (its socket fills) for
/// [`SLEEP`], then takes the filling messages and waits for the end.
fn sleeper() {
    let (_dog, pipe) = ferry_testkit::child_pipe("sleeper", secs(60));
    let mut extra = pipe.receiver().recv_with().expect("the extra pipes").pipes;
    assert_eq!(extra.len(), 2);
    pipe.send(b"asleep").expect("asleep");
    std::thread::sleep(SLEEP);
    for end in &extra {
        let msg = end.receiver().recv_with().expect("a filling message");
        assert_eq!(msg.pipes.len(), FILL);
    }
    // `main` is left unread until the parent's `try_send` got through.
    assert_eq!(extra[0].recv().expect("go"), b"go");
    let msg = pipe
        .receiver()
        .recv_with()
        .expect("the filling message on main");
    assert_eq!(msg.pipes.len(), FILL);
    assert_eq!(pipe.recv().expect("x"), b"x");
    assert_eq!(pipe.recv().expect("the end"), b"end");
    extra.clear();
}

/// Whether `fd` turns readable within `limit`.
fn readable(fd: &impl AsFd, limit: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let fd = fd.as_fd();
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let timeout = rustix::time::Timespec {
        tv_sec: limit.as_secs() as i64,
        tv_nsec: i64::from(limit.subsec_nanos()),
    };
    poll(&mut fds, Some(&timeout)).expect("poll") == 1
}

/// [`FILL`] pipe ends, their twins dropped.
fn fill_ends() -> Vec<ferry::Pipe> {
    (0..FILL)
        .map(|_| {
            let (_near, far) = PipeOptions::new().ring_size(4096).pipe().expect("pipe");
            far
        })
        .collect()
}

/// Sends a message carrying `ends`.
fn fill(pipe: &ferry::Pipe, ends: Vec<ferry::Pipe>) -> Result<(), ferry::SendError> {
    pipe.sender().send_with(b"fill", ends).map_err(|e| e.error)
}

/// A thread's `send_with` waits on the control socket, which the peer
/// does not read, holding its end's send lock: another thread's
/// `try_send` on the same end answers `Full` at once (before, it waited
/// until the peer read its socket: seconds), and its `send_timeout` keeps
/// its deadline. Once the stuck send is done, the sender's readiness
/// descriptor, armed by the `Full` answers, is rung, though the receiver
/// has read nothing from the ring.
#[test]
fn a_try_call_never_waits_behind_a_send_stuck_on_the_socket() {
    if ferry_testkit::role().is_some() {
        return sleeper();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "sleeper", &PipeOptions::new());
    let (here_1, there_1) = ferry::pipe().expect("pipe");
    let (here_2, there_2) = ferry::pipe().expect("pipe");
    // The filling ends are made before the child starts its sleep: making
    // 759 pipes takes long on a loaded machine, and the sleep must cover
    // the whole of what follows.
    let [ends_1, ends_2, ends_main] = [(); 3].map(|()| fill_ends());
    main.sender()
        .send_with(b"extra", vec![there_1, there_2])
        .expect("send the extra pipes");
    assert_eq!(main.recv().expect("asleep"), b"asleep");
    // Made (and handed to the child) while the socket has room.
    let ready = main.sender().ready_fd().expect("a readiness descriptor");
    std::thread::scope(|s| {
        // Two pipes' worth of records fill most of the socket (it holds a
        // few hundred); the third message, on `main`, waits on it.
        let first = [
            s.spawn(|| fill(&here_1, ends_1)),
            s.spawn(|| fill(&here_2, ends_2)),
        ];
        std::thread::sleep(Duration::from_millis(300));
        let stuck = s.spawn(|| fill(&main, ends_main));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!stuck.is_finished(), "the socket never filled");

        for round in 0..5 {
            let started = Instant::now();
            let result = main.sender().try_send(b"x");
            let took = started.elapsed();
            assert!(
                took < Duration::from_millis(200),
                "round {round}: try_send waited {took:?} behind a send stuck on the socket \
                 ({result:?})"
            );
            assert!(
                matches!(result, Err(TrySendError::Full)),
                "round {round}: {result:?}"
            );
            let started = Instant::now();
            let result = main.sender().send_timeout(b"y", Duration::from_millis(50));
            let took = started.elapsed();
            assert!(
                matches!(result, Err(SendTimeoutError::Timeout)),
                "round {round}: {result:?}"
            );
            assert!(
                took < Duration::from_millis(1000),
                "round {round}: send_timeout(50 ms) took {took:?}"
            );
        }
        assert!(!stuck.is_finished(), "the peer read its socket early");
        // The `Full` answers armed the descriptor. Nothing but the stuck
        // send giving the lock back rings it: the child reads its socket
        // after a while, and not `main`'s ring until told.
        let started = Instant::now();
        loop {
            assert!(
                readable(&ready, secs(15).saturating_sub(started.elapsed())),
                "the descriptor armed by `Full` was never rung once the lock was free"
            );
            match main.sender().try_send(b"x") {
                Ok(()) => break,
                Err(TrySendError::Full) => {}
                Err(e) => panic!("try_send after the wake: {e}"),
            }
        }
        here_1.send(b"go").expect("go");
        for filler in first.into_iter().chain([stuck]) {
            filler.join().expect("filler").expect("a filling send");
        }
    });
    main.send(b"end").expect("end");
    child.wait_ok();
}
