//! `try_` calls across processes: they never wait behind another thread's
//! call on the same end (even one stuck on a full control socket).

mod common;

use std::time::{Duration, Instant};

use common::secs;
use ferry::{PipeOptions, SendTimeoutError, TrySendError};

/// How long the `sleeper` child leaves its socket unread.
const SLEEP: Duration = Duration::from_secs(4);
/// Pipe ends each filling message carries (the most one may).
const FILL: usize = 253;

/// The child of [`a_try_call_never_waits_behind_a_send_stuck_on_the_socket`]:
/// takes two more pipes, then reads nothing (its socket fills) for
/// [`SLEEP`], then takes the filling messages and waits for the end.
fn sleeper() {
    let (_dog, pipe) = common::child_pipe("sleeper", secs(60));
    let mut extra = pipe.recv_with().expect("the extra pipes").pipes;
    assert_eq!(extra.len(), 2);
    pipe.send(b"asleep").expect("asleep");
    std::thread::sleep(SLEEP);
    for end in extra.iter().chain([&pipe]) {
        let msg = end.recv_with().expect("a filling message");
        assert_eq!(msg.pipes.len(), FILL);
    }
    assert_eq!(pipe.recv().expect("the end"), b"end");
    extra.clear();
}

/// Sends a message carrying [`FILL`] pipe ends (their twins dropped).
fn fill(pipe: &ferry::Pipe) -> Result<(), ferry::SendError> {
    let ends: Vec<ferry::Pipe> = (0..FILL)
        .map(|_| {
            let (_near, far) = PipeOptions::new().capacity(4096).pipe().expect("pipe");
            far
        })
        .collect();
    pipe.send_with(b"fill", ends).map_err(|e| e.error)
}

/// A thread's `send_with` waits on the control socket, which the peer
/// does not read, holding its end's send lock: another thread's
/// `try_send` on the same end answers `Full` at once (before, it waited
/// until the peer read its socket: seconds), and its `send_timeout` keeps
/// its deadline.
#[test]
fn a_try_call_never_waits_behind_a_send_stuck_on_the_socket() {
    if common::role().is_some() {
        return sleeper();
    }
    let dog = common::Watchdog::start(this_test!(), secs(60));
    let (child, main) = common::spawn_child(&dog, this_test!(), "sleeper", &PipeOptions::new());
    let (here_1, there_1) = ferry::pipe().expect("pipe");
    let (here_2, there_2) = ferry::pipe().expect("pipe");
    main.send_with(b"extra", vec![there_1, there_2])
        .expect("send the extra pipes");
    assert_eq!(main.recv().expect("asleep"), b"asleep");
    std::thread::scope(|s| {
        // Two pipes' worth of records fill most of the socket (it holds a
        // few hundred); the third message, on `main`, waits on it.
        let first = [s.spawn(|| fill(&here_1)), s.spawn(|| fill(&here_2))];
        std::thread::sleep(Duration::from_millis(300));
        let stuck = s.spawn(|| fill(&main));
        std::thread::sleep(Duration::from_millis(300));
        assert!(!stuck.is_finished(), "the socket never filled");

        for round in 0..5 {
            let started = Instant::now();
            let result = main.try_send(b"x");
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
            let result = main.send_timeout(b"y", Duration::from_millis(50));
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
        for filler in first.into_iter().chain([stuck]) {
            filler.join().expect("filler").expect("a filling send");
        }
    });
    main.send(b"end").expect("end");
    child.wait_ok();
}
