//! Messages written and read in place (`send_in_place`, `recv_in_place`)
//! across real processes: every size class (through the ring, across its
//! end, in pieces, out of line), replies written from inside the read, and
//! a call on the same half from inside the closure refused, not hung.

use std::panic::{AssertUnwindSafe, catch_unwind};

use ferry::{PipeOptions, RecvError};
use ferry_testkit::{XorShift, checksum, msg_u64, secs, this_test, u64_msg};

/// A 16 KiB ring: small messages cross its end often, and a message above
/// 8 KiB (half of it) travels in pieces.
const CAPACITY: usize = 16 << 10;

/// Message `i` of the echo test: mostly small (through the ring, many of
/// them across its end), some in pieces, some out of line.
fn message(i: usize) -> Vec<u8> {
    let mut rng = XorShift::new(i as u64 + 11);
    let len = match i % 10 {
        0 => 0,
        1 => 8_200 + rng.upto(40_000), // in pieces through the ring
        2 => ferry::OUT_OF_LINE + rng.upto(300_000), // a block
        _ => rng.upto(700),
    };
    rng.bytes(len)
}

#[test]
fn messages_written_and_read_in_place_echo_across_processes() {
    const COUNT: usize = 2_000;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("in-place-echo", secs(90));
        let mut echoed = 0u64;
        loop {
            // The reply is written in place from inside the read, while the
            // request is still lent: both rings in place at once.
            let got = pipe.receiver().recv_in_place(|request| {
                pipe.sender().send_in_place(request.len(), |reply| {
                    if reply.len() < CAPACITY / 2 {
                        assert!(reply.iter().all(|&b| b == 0), "a ring slot starts zeroed");
                    }
                    reply.copy_from_slice(request);
                })
            });
            match got {
                Ok(sent) => sent.expect("echo"),
                Err(RecvError::Disconnected) => break,
                Err(e) => panic!("receive: {e}"),
            }
            echoed += 1;
        }
        assert_eq!(echoed, COUNT as u64);
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(90));
    let options = PipeOptions::new().ring_size(CAPACITY);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "in-place-echo", &options);
    for i in 0..COUNT {
        let expected = message(i);
        // Alternate in-place and copying calls on this side; the child
        // always works in place.
        if i % 2 == 0 {
            pipe.sender()
                .send_in_place(expected.len(), |slot| slot.copy_from_slice(&expected))
                .expect("send in place");
        } else {
            pipe.send(&expected).expect("send");
        }
        let sum = if i % 3 == 0 {
            checksum(&pipe.recv().expect("echo"))
        } else {
            pipe.receiver()
                .recv_in_place(|echo| {
                    assert_eq!(echo.len(), expected.len(), "echo {i}");
                    checksum(echo)
                })
                .expect("echo")
        };
        assert_eq!(sum, checksum(&expected), "echo {i}");
    }
    drop(pipe);
    child.wait_ok();
}

/// The child reads one message in place and, from inside the read, calls
/// `recv` on the same half: a mistake that would wait for itself for good.
/// It must panic at once, the message must count as received, and the
/// pipe must go on working; the same for `send` inside `send_in_place`
/// (and nothing of that message is sent).
#[test]
fn a_call_on_the_same_half_inside_the_closure_panics_and_the_pipe_goes_on() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("reentry", secs(60));
        let nested = catch_unwind(AssertUnwindSafe(|| {
            pipe.receiver().recv_in_place(|first| {
                assert_eq!(first, b"first");
                let _ = pipe.recv();
            })
        }));
        let message = nested.expect_err("a panic, not a wait");
        let text = (message.downcast_ref::<&str>().copied())
            .or_else(|| message.downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        assert!(text.contains("same half"), "{text}");
        // `first` counted as received: the next is `second`.
        assert_eq!(pipe.recv().expect("second"), b"second");
        let nested = catch_unwind(AssertUnwindSafe(|| {
            pipe.sender().send_in_place(4, |slot| {
                slot.copy_from_slice(b"lost");
                let _ = pipe.send(b"inner");
            })
        }));
        assert!(nested.is_err(), "send inside send_in_place panics");
        pipe.sender()
            .send_in_place(2, |slot| slot.copy_from_slice(b"ok"))
            .expect("send after");
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "reentry", &PipeOptions::new());
    pipe.send(b"first").expect("send");
    pipe.send(b"second").expect("send");
    // Neither the panicked message nor the inner send arrived: only "ok".
    assert_eq!(pipe.recv().expect("reply"), b"ok");
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    child.wait_ok();
}

/// A closure that panics: on the sending side nothing is sent; on the
/// receiving side the message is gone (counted as received), the next one
/// comes, and the other process sees nothing amiss.
#[test]
fn a_closure_that_panics_sends_nothing_and_consumes_its_message() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("panics", secs(60));
        let read = catch_unwind(AssertUnwindSafe(|| {
            pipe.receiver()
                .recv_in_place(|_| panic!("the reader fails"))
        }));
        assert!(read.is_err());
        let next = pipe.receiver().recv_in_place(msg_u64).expect("next");
        assert_eq!(next, 2);
        let write = catch_unwind(AssertUnwindSafe(|| {
            pipe.sender()
                .send_in_place(8, |_| panic!("the writer fails"))
        }));
        assert!(write.is_err());
        pipe.send(&u64_msg(3)).expect("report");
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "panics", &PipeOptions::new());
    pipe.send(&u64_msg(1)).expect("send");
    pipe.send(&u64_msg(2)).expect("send");
    assert_eq!(msg_u64(&pipe.recv().expect("report")), 3);
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    child.wait_ok();
}
