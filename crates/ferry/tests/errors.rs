//! Errors hand the value back: every failed typed send returns its value
//! whole (in one process and across two), `is_disconnected` answers "is
//! the peer gone?" on every form, a send from inside `Serialize` and a
//! sender named twice in one message are refused at the sender, and clones
//! of one sender feed one receiver in order.
#![cfg(feature = "serde")]

use std::time::{Duration, Instant};

use ferry::PipeOptions;
use ferry::typed::{
    Receiver, RecvError, RecvTimeoutError, SendError, SendFailure, SendTimeoutError, Sender,
    TryRecvError, TrySendError,
};
use ferry_testkit::{secs, this_test};
use serde::{Deserialize, Serialize};

/// A typed sender and receiver over one byte pipe in this process: values
/// are encoded, as they are to another process.
fn encoded_channel<T>() -> (Sender<T>, Receiver<T>)
where
    T: Serialize + serde::de::DeserializeOwned + Send + 'static,
{
    let (a, b) = ferry::pipe().expect("pipe");
    let (tx, _) = a.split();
    let (_, rx) = b.split();
    (Sender::from_bytes(tx), Receiver::from_bytes(rx))
}

/// A value worth handing back: its payload is checked on return.
fn payload(n: u32) -> (u32, String) {
    (n, format!("value {n} {}", "x".repeat(200)))
}

/// Fills `tx` with `try_send` until it is full; returns the error.
fn fill(tx: &Sender<(u32, String)>) -> TrySendError<(u32, String)> {
    for n in 0..1_000_000 {
        if let Err(e) = tx.try_send(payload(n)) {
            return e;
        }
    }
    panic!("a million values fit in the pipe");
}

#[test]
fn try_send_full_hands_the_value_back_in_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = encoded_channel::<(u32, String)>();
    let e = fill(&tx);
    assert!(e.is_full(), "{e:?}");
    assert!(!e.is_disconnected());
    assert_eq!(format!("{e:?}"), "Full(..)");
    let n = match e {
        TrySendError::Full(value) => {
            assert_eq!(value, payload(value.0));
            value.0
        }
        other => panic!("expected Full, got {other:?}"),
    };
    // Nothing sent before it was lost.
    for k in 0..n {
        assert_eq!(rx.recv().expect("queued value"), payload(k));
    }
}

#[test]
fn try_send_full_hands_the_value_back_across_processes() {
    if ferry_testkit::role().is_some() {
        // Holds the pipe and never reads, until the parent kills it.
        let (_dog, _main) = ferry_testkit::child_pipe("sleeper", secs(60));
        std::thread::sleep(secs(60));
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (mut child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "sleeper", &PipeOptions::new());
    let tx = Sender::<(u32, String)>::from_bytes(main.split().0);
    let e = fill(&tx);
    assert!(e.is_full() && !e.is_disconnected(), "{e:?}");
    let value = e.into_inner();
    assert_eq!(value, payload(value.0));
    // A timed send gives the value back too, by its deadline.
    let start = Instant::now();
    let e = tx
        .send_timeout(payload(7), Duration::from_millis(50))
        .unwrap_err();
    assert!(e.is_timeout() && !e.is_disconnected(), "{e:?}");
    assert!(start.elapsed() < secs(5), "took {:?}", start.elapsed());
    assert_eq!(e.into_inner(), payload(7));
    child.kill();
}

#[test]
fn sends_after_the_receiver_is_gone_hand_the_value_back_across_processes() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("one and done", secs(60));
        let rx = Receiver::<(u32, String)>::from_bytes(main.split().1);
        assert_eq!(rx.recv().expect("one value"), payload(0));
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "one and done", &PipeOptions::new());
    let tx = Sender::<(u32, String)>::from_bytes(main.split().0);
    tx.send(payload(0)).expect("the one value");
    child.wait_ok();
    match tx.send(payload(1)) {
        Err(SendError::Disconnected(value)) => assert_eq!(value, payload(1)),
        other => panic!("expected Disconnected, got {other:?}"),
    }
    let e = tx.send_timeout(payload(2), secs(1)).unwrap_err();
    assert!(e.is_disconnected() && !e.is_timeout(), "{e:?}");
    assert_eq!(e.into_inner(), payload(2));
    let e = tx.try_send(payload(3)).unwrap_err();
    assert!(e.is_disconnected() && !e.is_full(), "{e:?}");
    assert_eq!(e.into_inner(), payload(3));
}

/// Serializes as far as its field, then fails.
#[derive(Debug, PartialEq, Deserialize)]
struct Unencodable(String);

impl Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "this value refuses to be encoded",
        ))
    }
}

#[test]
fn an_encode_failure_hands_the_value_back() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = encoded_channel::<Unencodable>();
    let value = Unencodable("precious".repeat(1000));
    let e = tx.send(value).unwrap_err();
    assert!(!e.is_disconnected());
    assert!(matches!(e.failure(), Some(SendFailure::Encode(_))), "{e:?}");
    assert!(e.to_string().contains("refuses to be encoded"), "{e}");
    assert_eq!(e.into_inner(), Unencodable("precious".repeat(1000)));
    let e = tx.try_send(Unencodable("again".into())).unwrap_err();
    assert!(matches!(&e, TrySendError::Failed(v, SendFailure::Encode(_)) if v.0 == "again"));
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
}

thread_local! {
    /// The sender a `Reentrant` value sends on while it is serialized.
    static ON: std::cell::RefCell<Option<std::rc::Rc<Sender<Reentrant>>>> =
        const { std::cell::RefCell::new(None) };
    /// What that inner send gave.
    static INNER: std::cell::RefCell<Option<Result<(), SendError<Reentrant>>>> =
        const { std::cell::RefCell::new(None) };
}

/// Sends `Reentrant(inner)` on [`ON`] from inside its own serialization.
#[derive(Debug, PartialEq, Deserialize)]
struct Reentrant(u32);

impl Serialize for Reentrant {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.0 == 1
            && let Some(tx) = ON.with(|on| on.borrow().clone())
        {
            let inner = tx.send(Reentrant(2));
            INNER.with(|i| *i.borrow_mut() = Some(inner));
        }
        serializer.serialize_u32(self.0)
    }
}

#[test]
fn a_send_from_inside_serialize_on_the_same_sender_is_refused() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = encoded_channel::<Reentrant>();
    let tx = std::rc::Rc::new(tx);
    ON.with(|on| *on.borrow_mut() = Some(std::rc::Rc::clone(&tx)));
    tx.send(Reentrant(1)).expect("the outer send");
    let inner = INNER
        .with(|i| i.borrow_mut().take())
        .expect("the inner send ran");
    match inner {
        Err(SendError::Failed(value, SendFailure::Reentrant)) => assert_eq!(value, Reentrant(2)),
        other => panic!("expected Failed(.., Reentrant), got {other:?}"),
    }
    assert_eq!(rx.recv().expect("the outer value"), Reentrant(1));
    ON.with(|on| on.borrow_mut().take());
    // The sender is still whole.
    tx.send(Reentrant(3)).expect("a later send");
    assert_eq!(rx.recv().expect("the later value"), Reentrant(3));
}

/// One sender, serialized at three places of one message.
#[derive(Debug)]
struct Thrice(Sender<u32>);

impl Serialize for Thrice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.0, &self.0, &self.0).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Thrice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (a, _, _) = <(Sender<u32>, Sender<u32>, Sender<u32>)>::deserialize(deserializer)?;
        Ok(Self(a))
    }
}

#[derive(Debug, Serialize, Deserialize)]
enum Carry {
    Thrice(Thrice),
    Once(Sender<u32>),
}

#[test]
fn a_sender_named_twice_in_one_message_is_refused_at_the_sender() {
    if ferry_testkit::role().is_some() {
        // Answers 7 on every sender it gets, until the parent hangs up.
        let (_dog, main) = ferry_testkit::child_pipe("answerer", secs(60));
        let rx = Receiver::<Carry>::from_bytes(main.split().1);
        loop {
            match rx.recv() {
                Ok(Carry::Once(reply)) => reply.send(7).expect("answer"),
                Ok(Carry::Thrice(Thrice(reply))) => reply.send(3).expect("answer"),
                Err(e) if e.is_disconnected() => return,
                Err(e) => panic!("child: {e}"),
            }
        }
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "answerer", &PipeOptions::new());
    let to_child = Sender::<Carry>::from_bytes(main.split().0);
    let (reply, answers) = ferry::channel::<u32>(16).unwrap();
    let e = to_child.send(Carry::Thrice(Thrice(reply))).unwrap_err();
    assert!(!e.is_disconnected());
    assert!(matches!(e.failure(), Some(SendFailure::Encode(_))), "{e:?}");
    assert!(e.to_string().contains("more than once"), "{e}");
    let Carry::Thrice(Thrice(reply)) = e.into_inner() else {
        panic!("a different value came back");
    };
    // The sender handed back still reaches its receiver here...
    reply.send(5).expect("a send on the sender handed back");
    assert_eq!(answers.recv().expect("its value"), 5);
    // ...and can still travel, once.
    to_child.send(Carry::Once(reply)).expect("sent once");
    assert_eq!(answers.recv().expect("the child's answer"), 7);
    // A sender with clones travels as a clone of its own (its receiver
    // here), and the clone that stays goes on sending.
    let (reply, answers) = ferry::channel::<u32>(16).unwrap();
    let clone = reply.clone();
    to_child
        .send(Carry::Once(reply))
        .expect("a sender with clones travels");
    clone.send(1).expect("the clone that stayed works");
    let mut got = [answers.recv().unwrap(), answers.recv().unwrap()];
    got.sort_unstable();
    assert_eq!(got, [1, 7]);
    drop(to_child);
    child.wait_ok();
}

#[test]
fn is_disconnected_on_every_form_across_processes() {
    if ferry_testkit::role().is_some() {
        let (_dog, _main) = ferry_testkit::child_pipe("quitter", secs(60));
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    // Byte halves.
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "quitter", &PipeOptions::new());
    child.wait_ok();
    let (tx, rx) = main.split();
    let e = tx.send(b"x").unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let e = tx.try_send(b"x").unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let e = tx.send_timeout(b"x", secs(1)).unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let (a, _b) = ferry::pipe().expect("pipe");
    let e = tx
        .send_with(b"x", vec![ferry::Handle::Pipe(a)])
        .unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let e = rx.recv().unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let e = rx.try_recv().unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    let e = rx.recv_timeout(secs(1)).unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    // Typed halves.
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "quitter", &PipeOptions::new());
    child.wait_ok();
    let (tx, rx) = main.split();
    let (tx, rx) = (Sender::<u8>::from_bytes(tx), Receiver::<u8>::from_bytes(rx));
    assert!(tx.send(1).unwrap_err().is_disconnected());
    assert!(tx.try_send(1).unwrap_err().is_disconnected());
    assert!(tx.send_timeout(1, secs(1)).unwrap_err().is_disconnected());
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
    assert!(rx.try_recv().unwrap_err().is_disconnected());
    assert!(matches!(
        rx.recv_timeout(secs(1)),
        Err(RecvTimeoutError::Disconnected)
    ));
    // And what is not the peer gone says so.
    let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    assert!(!rx.try_recv().unwrap_err().is_disconnected());
    assert!(
        !rx.recv_timeout(Duration::from_millis(1))
            .unwrap_err()
            .is_disconnected()
    );
    assert!(!SendTimeoutError::Timeout(1u8).is_disconnected());
    drop(tx);
    assert!(rx.recv().unwrap_err().is_disconnected());
}

#[test]
fn send_with_error_debug_is_short() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, _b) = ferry::pipe().expect("pipe");
    let (tx, _rx) = a.split();
    let ends: Vec<ferry::Handle> = (0..64)
        .map(|_| ferry::pipe().expect("pipe").0.into())
        .collect();
    // Too large to send: refused, every end handed back.
    let too_large = vec![0u8; tx.max_message() + 1];
    let e = tx.send_with(&too_large, ends).unwrap_err();
    assert_eq!(e.handles.len(), 64);
    let debug = format!("{e:?}");
    assert!(debug.len() < 300, "{} bytes: {debug:.300}", debug.len());
    assert!(debug.contains("64 handed back"), "{debug}");
    assert!(debug.contains("TooLarge"), "{debug}");
}

const CLONES: u32 = 8;

/// Receives `CLONES * per` values `(clone, n)`: each clone's in order,
/// none lost; then `Disconnected`. Returns how many came.
fn check_clones(rx: &Receiver<(u32, u32)>, per: u32) -> u32 {
    let mut next = vec![0; CLONES as usize];
    let mut got = 0;
    loop {
        match rx.recv() {
            Ok((clone, n)) => {
                let expected = &mut next[clone as usize];
                assert_eq!(n, *expected, "clone {clone}'s values out of order");
                *expected += 1;
                got += 1;
            }
            Err(RecvError::Disconnected) => break,
            Err(e) => panic!("receive: {e}"),
        }
    }
    assert!(next.iter().all(|&n| n == per), "per clone: {next:?}");
    got
}

/// Sends `per` values from each of `CLONES` threads, each on a clone of
/// `tx` (which is dropped).
fn send_from_clones(tx: Sender<(u32, u32)>, per: u32) {
    let threads: Vec<_> = (0..CLONES)
        .map(|clone| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for n in 0..per {
                    tx.send((clone, n)).expect("send");
                }
            })
        })
        .collect();
    drop(tx);
    for thread in threads {
        thread.join().expect("sender thread");
    }
}

/// Shared by reference across threads, as well as cloned.
fn sync_and_send<T: Sync + Send>(_: &T) {}

#[test]
fn clones_send_into_one_receiver_in_one_process() {
    const PER: u32 = 100_000;
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (tx, rx) = ferry::channel::<(u32, u32)>(16).unwrap();
    sync_and_send(&tx);
    let last = tx.clone();
    let sending = std::thread::spawn(move || send_from_clones(tx, PER));
    let mut next = vec![0; CLONES as usize];
    for _ in 0..CLONES * PER {
        let (clone, n) = rx.recv().expect("a value");
        assert_eq!(
            n, next[clone as usize],
            "clone {clone}'s values out of order"
        );
        next[clone as usize] += 1;
    }
    sending.join().expect("senders");
    // One clone is left: not disconnected yet.
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Empty)));
    last.send((0, PER)).expect("the last clone sends");
    drop(last);
    assert_eq!(rx.recv().expect("its value"), (0, PER));
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

#[derive(Serialize, Deserialize)]
struct Setup {
    values: Receiver<(u32, u32)>,
    report: Sender<u32>,
}

#[test]
fn clones_send_into_one_receiver_in_a_child() {
    const PER: u32 = 20_000;
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("counter", secs(120));
        let setup = Receiver::<Setup>::from_bytes(main.split().1)
            .recv()
            .expect("setup");
        let got = check_clones(&setup.values, PER);
        setup.report.send(got).expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "counter", &PipeOptions::new());
    let to_child = Sender::<Setup>::from_bytes(main.split().0);
    let (tx, values) = ferry::channel::<(u32, u32)>(16).unwrap();
    let (report, reported) = ferry::channel::<u32>(16).unwrap();
    // Some values are queued here before the receiver leaves: they follow it.
    let early = tx.clone();
    let sending = std::thread::spawn(move || send_from_clones(tx, PER));
    to_child
        .send(Setup { values, report })
        .expect("send the receiver");
    drop(early);
    sending.join().expect("senders");
    assert_eq!(reported.recv().expect("the child's count"), CLONES * PER);
    child.wait_ok();
}

/// One receiver, serialized at two places of one message.
struct Twice(Receiver<u32>);

impl Serialize for Twice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (&self.0, &self.0).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Twice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self(
            <(Receiver<u32>, Receiver<u32>)>::deserialize(deserializer)?.0,
        ))
    }
}

#[test]
fn a_receiver_named_twice_in_one_message_is_refused_at_the_sender() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, _rx) = encoded_channel::<Twice>();
    let (_values, twice) = ferry::channel::<u32>(16).unwrap();
    let e = tx.send(Twice(twice)).unwrap_err();
    assert!(matches!(e.failure(), Some(SendFailure::Encode(_))), "{e:?}");
    assert!(e.to_string().contains("more than once"), "{e}");
}
