//! Threads sharing one pipe end: a call with a deadline keeps it, and a
//! `try_` call answers at once, while another thread of the same end holds
//! the send or receive side, waiting for room or for a message as long as
//! it takes.

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::{PipeOptions, RecvTimeoutError, SendTimeoutError, TryRecvError, TrySendError};
use ferry_testkit::{Watchdog, secs, this_test};

/// How long the parent lets a blocking call settle into its wait before it
/// tries the timed ones (they pass anyway if it has not, but then prove
/// less; they never fail for it).
const SETTLE: Duration = Duration::from_millis(200);
/// The deadline of the timed calls.
const SHORT: Duration = Duration::from_millis(50);
/// A timed call that has not returned by then waited for the other
/// thread's call, not for its own deadline. (Without its deadline it would
/// wait for good here: the peer does nothing until the parent moves on.)
const LATE: Duration = Duration::from_secs(5);

#[test]
fn timed_and_try_calls_answer_behind_a_waiting_thread() {
    if let Some(role) = ferry_testkit::role() {
        assert_eq!(role, "peer");
        return peer();
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let mut cmd = ferry_testkit::child_command(this_test!(), "peer");
    cmd.stdin(Stdio::piped());
    let (mut child, main) =
        ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new().ring_size(4096));
    let main = Arc::new(main);

    // Receive side: one thread waits in `recv` for a message the peer
    // sends only when told; this thread's timed receive times out.
    let waiting = {
        let main = Arc::clone(&main);
        std::thread::spawn(move || main.recv().expect("the waiting receive"))
    };
    std::thread::sleep(SETTLE);
    let start = Instant::now();
    assert!(matches!(
        main.receiver().recv_timeout(SHORT),
        Err(RecvTimeoutError::Timeout)
    ));
    assert!(
        start.elapsed() < LATE,
        "a timed receive waited for another thread's receive"
    );
    // A `try_` call answers at once: the ring is empty, and whatever comes
    // first is the waiting thread's.
    let start = Instant::now();
    assert!(matches!(
        main.receiver().try_recv(),
        Err(TryRecvError::Empty)
    ));
    assert!(
        start.elapsed() < LATE,
        "a try_recv waited for another thread's receive"
    );
    main.send(b"send two").expect("cue the peer");
    let mut got = [
        waiting.join().expect("the receiving thread"),
        main.receiver()
            .recv_timeout(secs(10))
            .expect("the second message"),
    ];
    got.sort();
    assert_eq!(got, [b"one".to_vec(), b"two".to_vec()]);

    // Send side: the peer reads nothing more until a byte on its standard
    // input. Fill the pipe; one thread waits in `send` for room; this
    // thread's timed send times out and delivers nothing.
    let mut filled = 0u64;
    while main.sender().try_send(&filled.to_le_bytes()).is_ok() {
        filled += 1;
    }
    assert!(filled > 0, "nothing fit in an empty pipe");
    let blocked = {
        let main = Arc::clone(&main);
        std::thread::spawn(move || main.send(b"blocked").expect("the waiting send"))
    };
    std::thread::sleep(SETTLE);
    let start = Instant::now();
    assert!(matches!(
        main.sender().send_timeout(b"late", SHORT),
        Err(SendTimeoutError::Timeout)
    ));
    assert!(
        start.elapsed() < LATE,
        "a timed send waited for another thread's send"
    );
    // A `try_` call answers `Full` at once, and delivers nothing.
    let start = Instant::now();
    assert!(matches!(
        main.sender().try_send(b"late"),
        Err(TrySendError::Full)
    ));
    assert!(
        start.elapsed() < LATE,
        "a try_send waited for another thread's send"
    );
    child
        .take_stdin()
        .write_all(b"d")
        .expect("let the peer drain");
    blocked.join().expect("the sending thread");
    main.send(b"last").expect("the last message");
    let count = main
        .receiver()
        .recv_timeout(secs(10))
        .expect("the peer's count");
    assert_eq!(
        ferry_testkit::msg_u64(&count),
        filled + 2,
        "the peer got the filling messages, the blocked one and the last, and no other"
    );
    child.wait_ok();
}

fn peer() {
    let (_dog, main) = ferry_testkit::child_pipe("peer", secs(50));
    assert_eq!(main.recv().expect("the cue"), b"send two");
    main.send(b"one").expect("one");
    main.send(b"two").expect("two");
    let mut go = [0u8];
    std::io::stdin()
        .read_exact(&mut go)
        .expect("the byte that lets the peer drain");
    let mut count = 0u64;
    loop {
        let msg = main.recv().expect("a message to drain");
        count += 1;
        if msg == b"last" {
            break;
        }
        assert_ne!(msg, b"late", "a timed-out send was delivered");
    }
    main.send(&ferry_testkit::u64_msg(count))
        .expect("the count");
}
