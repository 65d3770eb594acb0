//! Large messages out of line through the link's block pool, across real
//! processes: order with small messages, and a peer killed while it holds
//! blocks. (The long stream under the pool cap is `pool_stream.rs`, alone
//! in its process so other tests' blocks do not count in its memory.)

use std::time::{Duration, Instant};

use ferry::{PipeOptions, RecvError, SendError, SendTimeoutError};
use ferry_testkit::{XorShift, checksum, msg_u64, secs, this_test, u64_msg};

const MIB: usize = 1 << 20;

/// The sizes of the interleaving test: below, at and above the out-of-line
/// threshold, and larger than the ring.
const SIZES: [usize; 9] = [10, 200_000, 0, MIB, 70_000, 65_535, 65_536, 3, 5 * MIB];

/// Message `i` of the interleaving test, derived from a seed both sides know.
fn interleaved(i: usize) -> Vec<u8> {
    XorShift::new(i as u64 + 1).bytes(SIZES[i % SIZES.len()])
}

#[test]
fn large_and_small_messages_interleave_in_order() {
    const COUNT: usize = 90;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("interleave", secs(60));
        for i in 0..COUNT {
            let expected = interleaved(i);
            // Alternate the copying and the in-place receive.
            if i % 2 == 0 {
                assert_eq!(pipe.recv().expect("message"), expected, "message {i}");
            } else {
                let view = pipe.receiver().recv_shared().expect("message");
                assert_eq!(
                    view.is_in_place(),
                    expected.len() >= ferry::OUT_OF_LINE,
                    "{i}"
                );
                assert_eq!(checksum(&view), checksum(&expected), "message {i}");
            }
        }
        pipe.send(&u64_msg(COUNT as u64)).expect("report");
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "interleave", &PipeOptions::new());
    for i in 0..COUNT {
        pipe.send(&interleaved(i)).expect("send");
    }
    assert_eq!(msg_u64(&pipe.recv().expect("report")), COUNT as u64);
    drop(pipe);
    child.wait_ok();
}

/// Message `i` of the small-loan echo: below the in-place threshold, so
/// every loan is a private buffer copied through the ring.
fn small_loan(i: usize) -> Vec<u8> {
    let mut rng = XorShift::new(i as u64 + 7);
    let len = rng.upto(ferry::LOAN_IN_PLACE - 1);
    rng.bytes(len)
}

#[test]
fn small_loans_and_views_echo_across_processes() {
    const COUNT: usize = 500;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("loan-echo", secs(60));
        for i in 0..COUNT {
            let view = pipe.receiver().recv_shared().expect("message");
            assert!(!view.is_in_place(), "message {i} was copied");
            // The reply's loan is written while the view is still held.
            let mut reply = pipe.sender().loan(view.len()).expect("loan");
            assert!(reply.iter().all(|&b| b == 0), "loan {i} starts zeroed");
            reply.copy_from_slice(&view);
            if i % 7 == 0 {
                // A loan dropped unsent sends nothing.
                drop(pipe.sender().loan(view.len() + 1).expect("loan"));
            }
            reply.send().expect("echo");
        }
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "loan-echo", &PipeOptions::new());
    for i in 0..COUNT {
        let expected = small_loan(i);
        let mut slot = pipe.sender().loan(expected.len()).expect("loan");
        slot.copy_from_slice(&expected);
        slot.send().expect("send");
        let echo = pipe.receiver().recv_shared().expect("echo");
        assert_eq!(&*echo, &expected[..], "echo {i}");
    }
    // Nothing beyond the echoes: the child's unsent loans sent nothing.
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    child.wait_ok();
}

#[test]
fn a_peer_killed_while_holding_blocks_frees_them_and_nothing_hangs() {
    const HELD: usize = 4;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("holder", secs(60));
        let views: Vec<_> = (0..HELD)
            .map(|_| pipe.receiver().recv_shared().expect("block"))
            .collect();
        assert!(views.iter().all(|v| v.is_in_place()));
        let mut slot = pipe.sender().loan(MIB).expect("loan");
        slot.fill(0xee);
        slot.send().expect("send a block back");
        let _unsent = pipe.sender().loan(MIB).expect("a loan never sent");
        pipe.send(b"holding").expect("report");
        std::thread::sleep(secs(600)); // until killed
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().pool_cap(HELD * MIB);
    let (mut child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "holder", &options);
    let in_links = ferry::pool_stats().in_links;
    for _ in 0..HELD {
        pipe.send(&vec![1; MIB]).expect("send");
    }
    let theirs = pipe.receiver().recv_shared().expect("the child's block");
    assert_eq!(pipe.recv().expect("report"), b"holding");
    assert_eq!(ferry::pool_stats().in_links, in_links + HELD as u64);
    // The pool is at its cap and every block is held: a send waits.
    assert!(matches!(
        pipe.sender()
            .send_timeout(&vec![2; MIB], Duration::from_millis(100)),
        Err(SendTimeoutError::Timeout)
    ));
    child.kill();
    let killed = Instant::now();
    match pipe.send(&vec![3; MIB]) {
        Err(SendError::Disconnected) => {}
        other => panic!("send to a killed peer at the cap: {other:?}"),
    }
    eprintln!("send at the cap saw the death after {:?}", killed.elapsed());
    assert!(killed.elapsed() < secs(2));
    // A view of the dead peer's block stays readable.
    assert!(theirs.is_in_place() && theirs.iter().all(|&b| b == 0xee));
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    drop(theirs);
    drop(pipe);
    assert_eq!(
        ferry::pool_stats().in_links,
        in_links,
        "blocks unmapped with the link"
    );
    child.wait();
}
