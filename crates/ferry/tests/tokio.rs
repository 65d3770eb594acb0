//! Async receive and send on tokio, across real processes: round trips
//! with messages of every size (in the ring, in pieces, out of line), a
//! full pipe suspending the sending task, cancelled receives losing
//! nothing, the stream ending when the peer goes, and a `SIGKILL` seen by
//! a task asleep in `recv`.
#![cfg(feature = "tokio")]

use std::pin::Pin;
use std::time::{Duration, Instant};

use ferry::{PipeOptions, RecvError};
use ferry_testkit::{XorShift, secs, this_test};

/// Sizes of the round trips: empty, small, in pieces, out of line, large.
const SIZES: [usize; 7] = [0, 1, 144, 5000, 70_000, 300_000, 4 << 20];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The child: echoes every message (blocking calls) until the parent goes,
/// or holds the pipe until it is killed.
fn child(role: &str) {
    let (_dog, pipe) = ferry_testkit::child_pipe(role, secs(60));
    if role == "hold" {
        pipe.send(b"ready").expect("ready");
        let _ = pipe.recv();
        return;
    }
    let mut buf = Vec::new();
    while pipe.receiver().recv_into(&mut buf).is_ok() {
        pipe.send(&buf).expect("echo");
    }
}

/// Round trips of every size through tokio on this side, a blocking echo
/// on the other.
#[test]
fn async_round_trips_of_every_size() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "echo", &PipeOptions::new());
    let (tx, rx) = pipe.split();
    runtime().block_on(async move {
        let (tx, rx) = (
            tx.into_async().expect("async tx"),
            rx.into_async().expect("async rx"),
        );
        let mut rng = XorShift::new(3);
        for round in 0..3 {
            for size in SIZES {
                let message = rng.bytes(size);
                tx.send(&message).await.expect("async send");
                let echo = rx.recv().await.expect("async recv");
                assert!(echo == message, "round {round}, {size} bytes");
            }
        }
        drop(tx); // the child's recv ends; it exits, and so the stream
        let mut rx = rx;
        let end =
            std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut rx), cx)).await;
        assert!(end.is_none(), "the stream did not end: {end:?}");
    });
    child.wait_ok();
}

/// A full pipe suspends `send` (no error, nothing buffered) until the
/// receiver makes room.
#[test]
fn a_full_pipe_suspends_the_sending_task() {
    let (a, b) = PipeOptions::new().ring_size(4096).pipe().expect("a pipe");
    let (tx, _) = a.split();
    runtime().block_on(async move {
        let tx = tx.into_async().expect("async tx");
        let chunk = [7u8; 1000];
        let mut sent = 0;
        // Until a send stays suspended for 50 ms: the pipe is full.
        while let Ok(result) =
            tokio::time::timeout(Duration::from_millis(50), tx.send(&chunk)).await
        {
            result.expect("send");
            sent += 1;
        }
        assert!(sent >= 3, "only {sent} messages fit");
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            for _ in 0..sent + 1 {
                assert_eq!(b.recv().expect("recv"), [7u8; 1000]);
            }
        });
        let started = Instant::now();
        tx.send(&chunk).await.expect("send once there is room");
        assert!(started.elapsed() >= Duration::from_millis(10));
        reader.join().expect("reader");
    });
}

/// `recv` futures cancelled at random points lose no message.
#[test]
fn cancelled_receives_lose_nothing() {
    let (a, b) = ferry::pipe().expect("a pipe");
    let (_, rx) = b.split();
    let writer = std::thread::spawn(move || {
        let mut rng = XorShift::new(11);
        for i in 0..500u32 {
            let len = rng.upto(3000);
            let mut m = rng.bytes(len);
            m.extend_from_slice(&i.to_le_bytes());
            a.send(&m).expect("send");
            if i % 7 == 0 {
                std::thread::sleep(Duration::from_micros(rng.upto(300) as u64));
            }
        }
        a
    });
    runtime().block_on(async move {
        let rx = rx.into_async().expect("async rx");
        let mut rng = XorShift::new(12);
        let mut next = 0u32;
        while next < 500 {
            let patience = Duration::from_micros(rng.upto(200) as u64);
            if let Ok(got) = tokio::time::timeout(patience, rx.recv()).await {
                let m = got.expect("recv");
                let index = u32::from_le_bytes(m[m.len() - 4..].try_into().expect("4 bytes"));
                assert_eq!(index, next, "a message was lost or reordered");
                next += 1;
            }
        }
    });
    writer.join().expect("writer");
}

/// A task asleep in `recv` sees the peer's `SIGKILL`.
#[test]
fn a_killed_peer_ends_an_async_recv() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (mut child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "hold", &PipeOptions::new());
    assert_eq!(pipe.recv().expect("ready"), b"ready");
    let (_tx, rx) = pipe.split();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let at = Instant::now();
        child.kill();
        (child, at)
    });
    let (result, seen) = runtime().block_on(async move {
        let rx = rx.into_async().expect("async rx");
        let result = rx.recv().await;
        (result, Instant::now())
    });
    let (_child, killed) = killer.join().expect("killer");
    assert!(matches!(result, Err(RecvError::Disconnected)), "{result:?}");
    let after = seen.saturating_duration_since(killed);
    eprintln!("an async recv saw the kill after {after:?}");
    assert!(after < Duration::from_millis(200), "{after:?}");
}

/// A stress of the async doorbells across processes: 20,000 round trips
/// of small messages, the child echoing with pauses at random, so this
/// side's tasks are often asleep in the reactor when a message lands. A
/// lost ring would hang it (the watchdog fails the test).
#[test]
fn async_round_trips_under_stress_lose_no_wakeup() {
    if let Some(role) = ferry_testkit::role() {
        if role == "slow-echo" {
            let (_dog, pipe) = ferry_testkit::child_pipe(&role, secs(60));
            let mut rng = XorShift::new(5);
            let mut buf = Vec::new();
            while pipe.receiver().recv_into(&mut buf).is_ok() {
                if rng.upto(31) == 0 {
                    std::thread::sleep(Duration::from_micros(rng.upto(100) as u64));
                }
                pipe.send(&buf).expect("echo");
            }
            return;
        }
        return child(&role);
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "slow-echo", &PipeOptions::new());
    let (tx, rx) = pipe.split();
    runtime().block_on(async move {
        let (tx, rx) = (
            tx.into_async().expect("async tx"),
            rx.into_async().expect("async rx"),
        );
        for i in 0..20_000u32 {
            tx.send(&i.to_le_bytes()).await.expect("send");
            assert_eq!(rx.recv().await.expect("recv"), i.to_le_bytes());
        }
    });
    child.wait_ok();
}

/// Ring capacity of [`async_sends_of_messages_larger_than_the_ring_complete`].
const RING: usize = 16 * 1024;

/// Message `seq` of three rings.
fn three_rings(seq: u64) -> Vec<u8> {
    let mut msg = XorShift::new(seq + 1).bytes(3 * RING);
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg
}

/// `AsyncSender::send` of messages three times the ring (out-of-line
/// blocks off, so they go through the ring in pieces) to a child that
/// polls with `try_recv`, pausing 1 ms whenever it finds nothing: each
/// send completes, writing pieces as room appears (before, every wake
/// began the message again, and the pieces written were thrown away).
#[test]
fn async_sends_of_messages_larger_than_the_ring_complete() {
    const COUNT: u64 = 100;
    if let Some(role) = ferry_testkit::role() {
        let (_dog, pipe) = ferry_testkit::child_pipe(&role, secs(60));
        let mut seq = 0;
        while seq < COUNT {
            match pipe.receiver().try_recv() {
                Ok(msg) => {
                    assert!(msg == three_rings(seq), "message {seq} arrived changed");
                    seq += 1;
                }
                Err(ferry::TryRecvError::Empty) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => panic!("message {seq}: {e}"),
            }
        }
        pipe.send(b"all").expect("all");
        let _ = pipe.recv();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().ring_size(RING);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "poller", &options);
    pipe.sender().set_out_of_line(usize::MAX);
    let (tx, rx) = pipe.split();
    let start = Instant::now();
    runtime().block_on(async move {
        let tx = tx.into_async().expect("async tx");
        for seq in 0..COUNT {
            let msg = three_rings(seq);
            let left = secs(10).saturating_sub(start.elapsed());
            tokio::time::timeout(left, tx.send(&msg))
                .await
                .unwrap_or_else(|_| panic!("message {seq} not sent after 10 s"))
                .expect("async send");
        }
        assert_eq!(
            rx.recv_timeout(secs(10)).expect("the child's count"),
            b"all"
        );
        drop(tx);
    });
    child.wait_ok();
}
