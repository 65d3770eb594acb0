//! One-way halves across processes: a `Sender` or a `Receiver` moved to a
//! child on its own, while the other half of its pipe end stays here.

use ferry::{Handle, PipeOptions, RecvError, SendError};
use ferry_testkit::{secs, this_test};

const ROUNDS: usize = 200;

/// The child takes a sending half and sends through it; the parent reads
/// those messages on the other side of that ring, and the half it kept
/// (the receiving half of the same end) still works here. When the child
/// exits, the parent's reader sees `Disconnected` after the last message.
#[test]
fn a_sender_half_travels_and_its_ring_keeps_working() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
        let mut msg = main.receiver().recv_with().expect("the half");
        assert_eq!(msg.bytes, b"take this sender");
        assert!(msg.pipes.is_empty() && msg.receivers.is_empty());
        let tx = msg.senders.pop().expect("a sender");
        for i in 0..ROUNDS {
            tx.send(format!("from the child {i}").as_bytes())
                .expect("send through the moved half");
        }
        main.send(b"done").expect("done");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (mut child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (a, b) = ferry::pipe().unwrap();
    let (a_tx, a_rx) = a.split();
    main.sender()
        .send_with(b"take this sender", vec![a_tx])
        .expect("send the half");
    for i in 0..ROUNDS {
        assert_eq!(b.recv().unwrap(), format!("from the child {i}").as_bytes());
    }
    // The other direction stays in this process.
    b.send(b"local").unwrap();
    assert_eq!(a_rx.recv().unwrap(), b"local");
    assert_eq!(main.recv().unwrap(), b"done");
    child.wait();
    assert!(matches!(b.recv(), Err(RecvError::Disconnected)));
    // The half that stayed here still talks to its twin.
    b.send(b"still here").unwrap();
    assert_eq!(a_rx.recv().unwrap(), b"still here");
}

/// The child takes a receiving half and echoes what arrives on it over the
/// bootstrap pipe; the parent writes through the twin it kept.
#[test]
fn a_receiver_half_travels_and_reads_what_is_sent_here() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
        let mut msg = main.receiver().recv_with().expect("the half");
        let rx = msg.receivers.pop().expect("a receiver");
        loop {
            match rx.recv() {
                Ok(bytes) => main.send(&bytes).expect("echo"),
                Err(RecvError::Disconnected) => break,
                Err(e) => panic!("receive through the moved half: {e}"),
            }
        }
        main.send(b"hung up").expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (mut child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (a, b) = ferry::pipe().unwrap();
    let (b_tx, b_rx) = b.split();
    main.sender()
        .send_with(b"take this receiver", vec![Handle::from(b_rx)])
        .expect("send the half");
    for i in 0..ROUNDS {
        let msg = format!("to the child {i}");
        a.send(msg.as_bytes()).unwrap();
        assert_eq!(main.recv().unwrap(), msg.as_bytes());
    }
    b_tx.send(b"local").unwrap();
    assert_eq!(a.recv().unwrap(), b"local");
    // Dropping the writer here closes the ring the child reads.
    drop(a);
    assert_eq!(main.recv().unwrap(), b"hung up");
    child.wait();
    assert!(matches!(b_tx.send(b"x"), Err(SendError::Disconnected)));
}

/// Both sides of one ring cannot leave together (the refusal hands every
/// end back); a half or a whole end whose twin has already left follows
/// it.
#[test]
fn halves_that_cannot_travel_are_handed_back() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
        loop {
            match main.receiver().recv_with() {
                Ok(msg) => {
                    let ends = msg.pipes.len() + msg.senders.len() + msg.receivers.len();
                    main.send(&[ends as u8]).expect("count");
                }
                Err(RecvError::Disconnected) => return,
                Err(e) => panic!("receive the ends: {e}"),
            }
        }
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (mut child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (a, b) = ferry::pipe().unwrap();
    let (a_tx, a_rx) = a.split();
    let (b_tx, b_rx) = b.split();
    // a_tx writes ring 0, b_rx reads it.
    let refused = main
        .sender()
        .send_with(b"", vec![Handle::from(a_tx), Handle::from(b_rx)])
        .expect_err("both sides of ring 0");
    assert!(
        matches!(refused.error, SendError::NotTransferable(_)),
        "{refused}"
    );
    assert_eq!(refused.handles.len(), 2);
    let mut back = refused.handles.into_iter();
    let (Handle::Sender(a_tx), Some(Handle::Receiver(b_rx))) = (back.next().unwrap(), back.next())
    else {
        panic!("the ends come back in order");
    };
    // One side of ring 0 leaves; the other may follow it (forwarded, see
    // `tests/routing.rs`), and so may a whole end whose twin has left.
    main.sender()
        .send_with(b"", vec![a_tx])
        .expect("a_tx alone");
    assert_eq!(main.recv().unwrap(), [1]);
    main.sender()
        .send_with(b"", vec![b_rx])
        .expect("its twin has left: b_rx is forwarded to it");
    assert_eq!(main.recv().unwrap(), [1]);
    let (c, d) = ferry::pipe().unwrap();
    main.sender().send_with(b"", vec![c]).expect("c");
    assert_eq!(main.recv().unwrap(), [1]);
    main.sender()
        .send_with(b"", vec![d])
        .expect("its twin has left: d is forwarded to it");
    assert_eq!(main.recv().unwrap(), [1]);
    // Ring 1's sides are both still here: either may go.
    main.sender().send_with(b"", vec![b_tx]).expect("b_tx");
    assert_eq!(main.recv().unwrap(), [1]);
    drop(a_rx);
    drop(main);
    child.wait();
}
