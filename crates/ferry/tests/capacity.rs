//! Capacity bounds: a byte channel and a typed channel made with a
//! capacity of N messages hold N, in one process and with the receiver in
//! another: `try_send` says `Full` at exactly N, `send_timeout` times out,
//! `send` waits, and one receive makes room for one more.

use std::time::{Duration, Instant};

use ferry::{PipeOptions, SendTimeoutError, TrySendError};
use ferry_testkit::{secs, this_test};

const CAPACITY: usize = 4;

/// Long enough that a send that should wait would have finished by then.
const PATIENCE: Duration = Duration::from_millis(200);

/// Fills a byte sender to `CAPACITY` and checks it refuses one more.
fn fill_bytes(tx: &ferry::Sender) {
    for i in 0..CAPACITY {
        tx.try_send(&[i as u8])
            .unwrap_or_else(|e| panic!("message {i} of {CAPACITY} refused: {e:?}"));
    }
    assert!(
        matches!(tx.try_send(b"over"), Err(TrySendError::Full)),
        "a message past the capacity was taken"
    );
    let start = Instant::now();
    assert!(matches!(
        tx.send_timeout(b"over", Duration::from_millis(50)),
        Err(SendTimeoutError::Timeout)
    ));
    assert!(start.elapsed() >= Duration::from_millis(40));
}

#[test]
fn a_byte_channel_holds_capacity_messages_in_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::bytes::channel(CAPACITY).unwrap();
    fill_bytes(&tx);
    // A blocking send waits until one message is received.
    std::thread::scope(|s| {
        let waiting = s.spawn(|| {
            tx.send(b"late").unwrap();
            Instant::now()
        });
        std::thread::sleep(PATIENCE);
        assert!(!waiting.is_finished(), "send did not wait at capacity");
        let received_at = Instant::now();
        assert_eq!(rx.recv().unwrap(), [0]);
        assert!(waiting.join().unwrap() >= received_at);
    });
    // Full again at exactly the capacity; one receive, one more.
    assert!(matches!(tx.try_send(b"over"), Err(TrySendError::Full)));
    assert_eq!(rx.recv().unwrap(), [1]);
    tx.try_send(b"next").unwrap();
    for expected in [&[2u8][..], &[3], b"late", b"next"] {
        assert_eq!(rx.recv().unwrap(), expected);
    }
}

#[test]
fn a_byte_channel_of_capacity_zero_is_refused() {
    let refused = ferry::bytes::channel(0).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
    assert!(refused.to_string().contains("at least 1"), "{refused}");
    let refused = PipeOptions::new().capacity(0).pipe().unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
}

/// The bound of a pipe's own senders, set with `PipeOptions`.
#[test]
fn a_pipe_with_a_capacity_holds_that_many_each_way() {
    let (a, b) = PipeOptions::new().capacity(CAPACITY).pipe().unwrap();
    fill_bytes(a.sender());
    fill_bytes(b.sender());
    assert_eq!(b.recv().unwrap(), [0]);
    a.sender().try_send(b"one more").unwrap();
    assert!(matches!(
        a.sender().try_send(b"over"),
        Err(TrySendError::Full)
    ));
}

/// The child takes the receiver; it receives one message when told, then
/// the rest once the parent says so, and checks their order.
#[test]
fn a_byte_channel_holds_capacity_messages_with_the_receiver_in_a_child() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
        let mut msg = main.receiver().recv_with().expect("the receiver");
        let rx = msg.receivers.pop().expect("a receiver");
        assert_eq!(main.recv().unwrap(), b"take one");
        assert_eq!(rx.recv().unwrap(), [0]);
        main.send(b"took one").unwrap();
        assert_eq!(main.recv().unwrap(), b"take the rest");
        for expected in [&[1u8][..], &[2], &[3], b"late", b"next"] {
            assert_eq!(rx.recv().unwrap(), expected);
        }
        main.send(b"done").unwrap();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (tx, rx) = ferry::bytes::channel(CAPACITY).unwrap();
    main.sender().send_with(b"the receiver", vec![rx]).unwrap();
    fill_bytes(&tx);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| tx.send(b"late").unwrap());
        std::thread::sleep(PATIENCE);
        assert!(!waiting.is_finished(), "send did not wait at capacity");
        main.send(b"take one").unwrap();
        assert_eq!(main.recv().unwrap(), b"took one");
        waiting.join().unwrap();
    });
    assert!(matches!(tx.try_send(b"over"), Err(TrySendError::Full)));
    main.send(b"take the rest").unwrap();
    tx.send_timeout(b"next", secs(10)).unwrap();
    assert_eq!(main.recv().unwrap(), b"done");
    child.wait_ok();
}

#[cfg(feature = "serde")]
mod typed {
    use super::*;

    /// Fills a typed sender to `CAPACITY` and checks it refuses one more.
    fn fill(tx: &ferry::typed::Sender<u32>) {
        for i in 0..CAPACITY as u32 {
            tx.try_send(i)
                .unwrap_or_else(|e| panic!("value {i} of {CAPACITY} refused: {e:?}"));
        }
        assert!(
            matches!(tx.try_send(99), Err(ferry::typed::TrySendError::Full(99))),
            "a value past the capacity was taken"
        );
        let start = Instant::now();
        assert!(matches!(
            tx.send_timeout(99, Duration::from_millis(50)),
            Err(ferry::typed::SendTimeoutError::Timeout(99))
        ));
        assert!(start.elapsed() >= Duration::from_millis(40));
    }

    #[test]
    fn a_typed_channel_holds_capacity_values_in_one_process() {
        let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
        let (tx, rx) = ferry::channel::<u32>(CAPACITY).unwrap();
        fill(&tx);
        // The typed sender is not `Sync`: it goes to the thread and back.
        let waiting = std::thread::spawn(move || {
            tx.send(100).unwrap();
            (tx, Instant::now())
        });
        std::thread::sleep(PATIENCE);
        assert!(!waiting.is_finished(), "send did not wait at capacity");
        let received_at = Instant::now();
        assert_eq!(rx.recv().unwrap(), 0);
        let (tx, sent_at) = waiting.join().unwrap();
        assert!(sent_at >= received_at);
        assert!(matches!(
            tx.try_send(99),
            Err(ferry::typed::TrySendError::Full(99))
        ));
        assert_eq!(rx.recv().unwrap(), 1);
        tx.try_send(101).unwrap();
        for expected in [2, 3, 100, 101] {
            assert_eq!(rx.recv().unwrap(), expected);
        }
    }

    /// A sender waiting for room wakes when the receiver goes.
    #[test]
    fn a_typed_sender_waiting_for_room_sees_the_receiver_go() {
        let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
        let (tx, rx) = ferry::channel::<u32>(1).unwrap();
        tx.send(0).unwrap();
        let waiting = std::thread::spawn(move || tx.send(1).map_err(|e| e.to_string()));
        std::thread::sleep(PATIENCE);
        assert!(!waiting.is_finished(), "send did not wait at capacity");
        drop(rx);
        let sent = waiting.join().unwrap();
        assert!(sent.is_err(), "a send to a dropped receiver succeeded");
    }

    #[test]
    fn a_typed_channel_of_capacity_zero_is_refused() {
        let refused = ferry::channel::<u32>(0).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::InvalidInput);
    }

    /// The typed receiver moves to the child (as its byte half); the
    /// sender here is bounded by the same capacity.
    #[test]
    fn a_typed_channel_holds_capacity_values_with_the_receiver_in_a_child() {
        if ferry_testkit::role().is_some() {
            let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let rx = ferry::typed::Receiver::<u32>::from_bytes(msg.receivers.pop().unwrap());
            assert_eq!(main.recv().unwrap(), b"take one");
            assert_eq!(rx.recv().unwrap(), 0);
            main.send(b"took one").unwrap();
            assert_eq!(main.recv().unwrap(), b"take the rest");
            for expected in [1, 2, 3, 100, 101] {
                assert_eq!(rx.recv().unwrap(), expected);
            }
            main.send(b"done").unwrap();
            return;
        }
        let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
        let (child, main) =
            ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
        let (tx, rx) = ferry::channel::<u32>(CAPACITY).unwrap();
        main.sender()
            .send_with(b"the receiver", vec![rx.into_bytes().unwrap()])
            .unwrap();
        fill(&tx);
        let waiting = std::thread::spawn(move || {
            tx.send(100).unwrap();
            tx
        });
        std::thread::sleep(PATIENCE);
        assert!(!waiting.is_finished(), "send did not wait at capacity");
        main.send(b"take one").unwrap();
        assert_eq!(main.recv().unwrap(), b"took one");
        let tx = waiting.join().unwrap();
        assert!(matches!(
            tx.try_send(99),
            Err(ferry::typed::TrySendError::Full(99))
        ));
        main.send(b"take the rest").unwrap();
        tx.send_timeout(101, secs(10)).unwrap();
        assert_eq!(main.recv().unwrap(), b"done");
        child.wait_ok();
    }
}
