//! Typed channels across real processes: rich values both ways, halves
//! inside messages, a receiver moved while values are queued for it, and
//! a hostile peer's malformed encodings.
#![cfg(feature = "serde")]

use std::collections::BTreeMap;

use ferry::PipeOptions;
use ferry::typed::{ByteBuf, Pipe as TypedPipe, Reason, Receiver, RecvError, Sender};
use ferry_testkit::{secs, this_test};
use serde::{Deserialize, Serialize};

/// Counts the largest single allocation while watching, to check that a
/// hostile length prefix allocates nothing beyond the message.
mod counting {
    // A global allocator is an unsafe trait; test-only, and std's atomics
    // are what an allocator can use (no loom here).
    #![allow(unsafe_code, clippy::disallowed_types)]

    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting;

    thread_local! {
        static WATCH: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    static LARGEST: AtomicUsize = AtomicUsize::new(0);

    /// Runs `f` and returns what it returned with the largest single
    /// allocation (or reallocation) this thread made meanwhile.
    pub fn largest<R>(f: impl FnOnce() -> R) -> (R, usize) {
        LARGEST.store(0, Ordering::SeqCst);
        WATCH.with(|w| w.set(true));
        let r = f();
        WATCH.with(|w| w.set(false));
        (r, LARGEST.load(Ordering::SeqCst))
    }

    fn watching() -> bool {
        // `try_with`: no thread-local during a thread's teardown.
        WATCH.try_with(|w| w.get()).unwrap_or(false)
    }

    // SAFETY: forwards every call to the system allocator unchanged; it
    // only records sizes on the side.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            if watching() {
                LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
            }
            // SAFETY: the caller's layout, passed on.
            unsafe { System.alloc(layout) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System.alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            if watching() {
                LARGEST.fetch_max(new_size, Ordering::Relaxed);
            }
            // SAFETY: as the caller's contract (`ptr` from this allocator).
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static ALLOC: Counting = Counting;
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Shape {
    Empty,
    Circle(f64),
    Rect { w: u32, h: u32 },
    Poly(Vec<(i32, i32)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Rich {
    id: u64,
    name: String,
    tags: Vec<String>,
    map: BTreeMap<String, Vec<i64>>,
    shape: Shape,
    nested: Option<Box<Rich>>,
    data: ByteBuf,
    floats: (f32, f64),
    ch: char,
}

fn rich(id: u64, data: usize) -> Rich {
    Rich {
        id,
        name: format!("value {id} ✓"),
        tags: (0..id % 5).map(|i| format!("tag{i}")).collect(),
        map: (0..3)
            .map(|i| (format!("k{i}"), vec![i, -i, i64::MAX]))
            .collect(),
        shape: match id % 4 {
            0 => Shape::Empty,
            1 => Shape::Circle(1.5),
            2 => Shape::Rect { w: 3, h: 4 },
            _ => Shape::Poly(vec![(1, 2), (-3, 4)]),
        },
        nested: id.is_multiple_of(2).then(|| Box::new(rich(id + 1, 3))),
        data: (0..data)
            .map(|i| (i * 31 + id as usize) as u8)
            .collect::<Vec<_>>()
            .into(),
        floats: (0.25, -1e300),
        ch: 'ß',
    }
}

/// The child echoes every `Rich` it receives until the parent hangs up.
#[test]
fn rich_values_round_trip_across_processes() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("echo", secs(60));
        let end = TypedPipe::<Rich, Rich>::from_pipe(main);
        while let Ok(value) = end.recv() {
            end.send(value).expect("echo");
        }
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) = ferry_testkit::spawn_child(&dog, this_test!(), "echo", &PipeOptions::new());
    let end = TypedPipe::<Rich, Rich>::from_pipe(main);
    // Empty, small, ring-sized, out of line, and 100 MiB byte fields.
    for (id, size) in [0, 1, 144, 70_000, 1 << 20, 100 << 20]
        .into_iter()
        .enumerate()
    {
        let value = rich(id as u64, size);
        end.send(value.clone()).expect("send");
        let back = end.recv().expect("echo back");
        assert!(back == value, "value {id} ({size} bytes) came back changed");
    }
    drop(end);
    child.wait_ok();
}

#[derive(Debug, Serialize, Deserialize)]
struct Add {
    a: i32,
    b: i32,
    reply: Sender<i32>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Setup {
    requests: Receiver<Add>,
    done: Sender<String>,
}

/// The parent queues a request (with its reply channel) in-process, then
/// sends the request receiver to the child inside a message; the queued
/// request follows it, and every later request carries its own reply
/// sender to the child.
#[test]
fn typed_halves_travel_inside_messages() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("adder", secs(60));
        let setup = Receiver::<Setup>::from_bytes(main.split().1)
            .recv()
            .expect("setup");
        let mut served = 0;
        for Add { a, b, reply } in setup.requests.iter() {
            reply.send(a + b).expect("reply");
            served += 1;
        }
        setup.done.send(format!("served {served}")).expect("done");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "adder", &PipeOptions::new());
    let (to_child, _) = main.split();
    let to_child = Sender::<Setup>::from_bytes(to_child);
    let (requests, served) = ferry::channel::<Add>(16).unwrap();
    let (done_tx, done) = ferry::channel::<String>(16).unwrap();
    let (reply, first_answer) = ferry::channel(1).unwrap();
    requests.send(Add { a: 40, b: 2, reply }).unwrap();
    to_child
        .send(Setup {
            requests: served,
            done: done_tx,
        })
        .expect("send the setup");
    assert_eq!(
        first_answer.recv().expect("the queued request's answer"),
        42
    );
    for i in 0..100 {
        let (reply, answer) = ferry::channel(1).unwrap();
        requests
            .send(Add {
                a: i,
                b: 1000,
                reply,
            })
            .expect("request");
        assert_eq!(answer.recv().expect("answer"), i + 1000);
    }
    drop(requests);
    assert_eq!(done.recv().expect("done"), "served 101");
    child.wait_ok();
}

/// Values queued in-process when the receiver leaves, more than the pipe
/// holds, plus values sent from another thread while it moves: the child
/// gets all of them, in order.
#[test]
fn a_receiver_moved_while_values_are_queued() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    const QUEUED: u64 = 20_000;
    const AFTER: u64 = 20_000;
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("reader", secs(60));
        let (back, inbox) = main.split();
        let rx = Receiver::<Receiver<(u64, String)>>::from_bytes(inbox)
            .recv()
            .expect("the receiver");
        let mut next = 0;
        for (i, text) in rx.iter() {
            assert_eq!((i, text), (next, format!("value {next}")), "out of order");
            next += 1;
        }
        back.send(&next.to_le_bytes()).expect("count");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "reader", &PipeOptions::new());
    // Room for every value queued before the move.
    let (tx, rx) = ferry::channel::<(u64, String)>(QUEUED as usize).unwrap();
    for i in 0..QUEUED {
        tx.send((i, format!("value {i}"))).unwrap();
    }
    let (to_child, from_child) = main.split();
    let later = std::thread::spawn(move || {
        for i in QUEUED..QUEUED + AFTER {
            tx.send((i, format!("value {i}")))
                .expect("send after the move");
        }
    });
    Sender::<Receiver<(u64, String)>>::from_bytes(to_child)
        .send(rx)
        .expect("send the receiver");
    later.join().unwrap();
    let count = from_child.recv().expect("the child's count");
    assert_eq!(
        u64::from_le_bytes(count.try_into().unwrap()),
        QUEUED + AFTER
    );
    child.wait_ok();
}

/// The child that takes a clone of a typed sender from its parent and
/// sends `count` values `(1, i)` through it.
fn clone_writer(count: u32) {
    let (_dog, main) = ferry_testkit::child_pipe("writer", secs(60));
    let (_back, inbox) = main.split();
    let tx = Receiver::<Sender<(u8, u32)>>::from_bytes(inbox)
        .recv()
        .expect("the clone");
    for i in 0..count {
        tx.send((1, i)).expect("send from the clone");
    }
}

/// A typed sender whose receiver has gone to a child can be cloned and a
/// clone sent to a second child: both children's values, and this
/// process's own, reach the receiver, each in order, and it sees the end
/// once all three are gone.
#[test]
fn a_typed_clone_travels_once_its_receiver_has() {
    const EACH: u32 = 500;
    match ferry_testkit::role().as_deref() {
        Some("reader") => {
            let (_dog, main) = ferry_testkit::child_pipe("reader", secs(60));
            let (back, inbox) = main.split();
            let rx = Receiver::<Receiver<(u8, u32)>>::from_bytes(inbox)
                .recv()
                .expect("the receiver");
            let mut next = [0u32; 2];
            for (id, i) in rx.iter() {
                assert_eq!(i, next[usize::from(id)], "sender {id} out of order");
                next[usize::from(id)] += 1;
            }
            back.send(format!("{next:?}").as_bytes()).expect("counts");
        }
        Some("writer") => clone_writer(EACH),
        Some(other) => panic!("no role {other}"),
        None => {
            // Descriptor counts are compared in this binary: one test at a time.
            let _serial = ferry_testkit::serial();
            let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
            let (reader, to_reader) =
                ferry_testkit::spawn_child(&dog, this_test!(), "reader", &PipeOptions::new());
            let (writer, to_writer) =
                ferry_testkit::spawn_child(&dog, this_test!(), "writer", &PipeOptions::new());
            let (tx, rx) = ferry::channel::<(u8, u32)>(64).unwrap();
            let (to_writer, _) = to_writer.split();
            let to_writer = Sender::<Sender<(u8, u32)>>::from_bytes(to_writer);
            let (to_reader, from_reader) = to_reader.split();
            Sender::<Receiver<(u8, u32)>>::from_bytes(to_reader)
                .send(rx)
                .expect("send the receiver");
            to_writer.send(tx.clone()).expect("send a clone");
            for i in 0..EACH {
                tx.send((0, i)).expect("send from here");
            }
            drop(tx);
            writer.wait_ok();
            let counts = String::from_utf8(from_reader.recv().expect("the counts")).unwrap();
            assert_eq!(counts, format!("[{EACH}, {EACH}]"));
            reader.wait_ok();
        }
    }
}

/// A typed sender whose receiver is in this process, with clones sharing
/// the in-process queue, sends a clone to a child: the values queued
/// before stay ahead, the clones here (one in another thread) go on
/// sending, and the receiver here gets every sender's values, each in
/// order, then the end once all are gone.
#[test]
fn a_typed_clone_travels_while_its_receiver_is_here() {
    const EACH: u32 = 500;
    match ferry_testkit::role().as_deref() {
        Some("writer") => clone_writer(EACH),
        Some(other) => panic!("no role {other}"),
        None => {
            // Descriptor counts are compared in this binary: one test at a time.
            let _serial = ferry_testkit::serial();
            let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
            let (writer, to_writer) =
                ferry_testkit::spawn_child(&dog, this_test!(), "writer", &PipeOptions::new());
            let (tx, rx) = ferry::channel::<(u8, u32)>(64).unwrap();
            let other = tx.clone();
            let queued = 10;
            for i in 0..queued {
                tx.send((0, i)).expect("queued before the clone leaves");
            }
            let (to_writer, _) = to_writer.split();
            Sender::<Sender<(u8, u32)>>::from_bytes(to_writer)
                .send(tx.clone())
                .expect("a clone leaves while the receiver is here");
            let thread = std::thread::spawn(move || {
                for i in 0..EACH {
                    other.send((2, i)).expect("send from a clone in a thread");
                }
            });
            let mine = std::thread::spawn(move || {
                for i in queued..EACH {
                    tx.send((0, i)).expect("send from here");
                }
            });
            let mut next = [0u32; 3];
            for (id, i) in rx.iter() {
                assert_eq!(i, next[usize::from(id)], "sender {id} out of order");
                next[usize::from(id)] += 1;
            }
            assert_eq!(next, [EACH; 3], "every value, then the end");
            thread.join().unwrap();
            mine.join().unwrap();
            writer.wait_ok();
        }
    }
}

/// A hostile child sends byte messages that are not valid encodings of
/// the parent's type. Each is refused with the documented reason, nothing
/// beyond the message's size is allocated for it, and the valid message
/// after each one still arrives.
#[test]
fn malformed_encodings_are_refused_and_the_stream_goes_on() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Node(Option<Box<Node>>);
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Msg {
        topic: u32,
        data: ByteBuf,
        words: Vec<String>,
        tree: Node,
    }
    let bad: Vec<(Vec<u8>, &str)> = vec![
        // Truncated: a topic and nothing else.
        (vec![5], "ends early"),
        // A byte length of 2^62 with three bytes left.
        (
            vec![
                5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 1, 2, 3,
            ],
            "a length of",
        ),
        // Two billion words claimed in a few bytes.
        (
            vec![5, 0, 0x80, 0x80, 0x80, 0x80, 0x08, 0],
            "too many elements",
        ),
        // A megabyte of nested `Some`.
        ([vec![5, 0, 0], vec![1u8; 1 << 20]].concat(), "nest deeper"),
        // A valid message with a byte left over.
        (vec![5, 0, 0, 0, 9], "left after"),
    ];
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("hostile", secs(60));
        main.send(&[7, 2, 1, 2, 1, 1, b'x', 0]).expect("warm-up");
        for (bytes, _) in &bad {
            main.send(bytes).expect("bad");
            main.send(&[7, 2, 1, 2, 1, 1, b'x', 0]).expect("good");
        }
        let _ = main.recv();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "hostile", &PipeOptions::new());
    let (_keep, inbox) = main.split();
    let rx = Receiver::<Msg>::from_bytes(inbox);
    // The first receive sets up what every receive reuses.
    rx.recv().expect("the first, valid message");
    for (bytes, why) in &bad {
        let (got, largest) = counting::largest(|| rx.recv());
        let Err(RecvError::Decode(e)) = got else {
            panic!("{why}: expected a decode error, got {got:?}");
        };
        assert!(e.type_name().ends_with("Msg"), "{e}");
        assert!(e.to_string().contains(why), "{why}: {e}");
        // The message itself is received into memory of its own size;
        // decoding it allocates nothing larger.
        assert!(
            largest <= bytes.len().max(4096),
            "{why}: allocated {largest} bytes for a {}-byte message",
            bytes.len()
        );
        if let Reason::LengthPastEnd { left, .. } = e.reason() {
            assert!(*left < 16);
        }
        let good = rx.recv().expect("the valid message after it");
        assert_eq!(
            good,
            Msg {
                topic: 7,
                data: vec![1, 2].into(),
                words: vec!["x".into()],
                tree: Node(None),
            }
        );
    }
    drop(rx);
    drop(_keep);
    child.wait_ok();
}

/// A value whose encoding fails: in one process it is moved, never
/// encoded.
#[derive(Debug, Deserialize)]
struct Unencodable(String);

impl Serialize for Unencodable {
    fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
        Err(serde::ser::Error::custom(
            "this value refuses to be encoded",
        ))
    }
}

#[test]
fn in_process_values_are_moved_not_encoded() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::channel::<Unencodable>(16).unwrap();
    let text = "x".repeat(1000);
    let ptr = text.as_ptr();
    tx.send(Unencodable(text)).expect("no encoding in-process");
    let back = rx.recv().unwrap();
    // The same heap buffer: moved, not copied.
    assert_eq!(back.0.as_ptr(), ptr);
    // Once the receiver is turned into bytes, values must be encoded.
    let bytes_rx = rx.into_bytes().unwrap();
    let e = tx.send(Unencodable("y".into())).unwrap_err();
    assert!(e.to_string().contains("refuses to be encoded"), "{e}");
    drop(bytes_rx);
}

#[test]
fn in_process_disconnects_and_timeouts() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    assert!(matches!(
        rx.try_recv(),
        Err(ferry::typed::TryRecvError::Empty)
    ));
    let start = std::time::Instant::now();
    assert!(matches!(
        rx.recv_timeout(std::time::Duration::from_millis(30)),
        Err(ferry::typed::RecvTimeoutError::Timeout)
    ));
    assert!(start.elapsed() >= std::time::Duration::from_millis(30));
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    drop(tx);
    assert_eq!(rx.recv().unwrap(), 1);
    assert_eq!(rx.recv().unwrap(), 2);
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));

    let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    drop(rx);
    assert!(matches!(
        tx.send(3),
        Err(ferry::typed::SendError::Disconnected(3))
    ));

    // A receiver blocked in another thread is woken by the sender's drop.
    let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    let waiter = std::thread::spawn(move || rx.recv());
    std::thread::sleep(std::time::Duration::from_millis(50));
    drop(tx);
    assert!(matches!(
        waiter.join().unwrap(),
        Err(RecvError::Disconnected)
    ));
}

/// Two threads, a million values, in order; then the same across a byte
/// pipe made by hand.
#[test]
fn in_process_stream_between_threads() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    const N: u64 = 1_000_000;
    let (tx, rx) = ferry::channel::<u64>(16).unwrap();
    let producer = std::thread::spawn(move || {
        for i in 0..N {
            tx.send(i).unwrap();
        }
    });
    for i in 0..N {
        assert_eq!(rx.recv().unwrap(), i);
    }
    producer.join().unwrap();
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

/// A sender moved out (as bytes) while values are queued: the receiver
/// here drains the queue first, then reads the pipe, in order.
#[test]
fn a_sender_turned_into_bytes_keeps_order() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::channel::<String>(16).unwrap();
    tx.send("queued".into()).unwrap();
    let bytes = tx.into_bytes().unwrap();
    let tx = Sender::<String>::from_bytes(bytes);
    tx.send("through the pipe".into()).unwrap();
    assert_eq!(rx.recv().unwrap(), "queued");
    assert_eq!(rx.recv().unwrap(), "through the pipe");
    drop(tx);
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

/// A half encoded outside a ferry send (here by the bare encoder) refuses,
/// and stays usable.
#[test]
fn a_half_outside_a_ferry_send_refuses_to_serialize() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::channel::<u8>(16).unwrap();
    let e = ferry::typed::encode(&tx).unwrap_err();
    assert!(
        e.to_string()
            .contains("only be serialized by a ferry typed send"),
        "{e}"
    );
    tx.send(9).unwrap();
    assert_eq!(rx.recv().unwrap(), 9);
}

/// Both halves of one channel in one message (with a value queued, so the
/// receiver's values wait to be forwarded): refused with an error, not a
/// hang.
#[test]
fn both_halves_of_one_channel_in_one_message_are_refused() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    // A hang (a lost wake, a deadlock in a move) fails in seconds.
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, _b) = ferry::pipe().unwrap();
    let out = Sender::<(Receiver<u32>, Sender<u32>)>::from_bytes(a.split().0);
    let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    tx.send(1).unwrap();
    let e = out.send((rx, tx)).unwrap_err();
    assert!(e.to_string().contains("both halves of one channel"), "{e}");
}

/// A hostile child attaches pipe ends the receiver's type has no place
/// for, or names a handle it did not attach: each message is refused with
/// a decode error, the ends it carried are closed (the descriptor count
/// comes back), and the stream goes on.
#[test]
fn handles_the_type_does_not_hold_are_refused_and_closed() {
    // Descriptor counts are compared in this binary: one test at a time.
    let _serial = ferry_testkit::serial();
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Plain(u32);
    #[derive(Debug, Serialize, Deserialize)]
    struct WithReply(u32, Sender<u32>);
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("hostile", secs(60));
        for round in 0..50u8 {
            // One pipe end attached to a `Plain` that holds none.
            let (a, _b) = ferry::pipe().unwrap();
            main.sender()
                .send_with(&[round], vec![a])
                .expect("plain with an end");
            // A `WithReply` naming handle 3 with nothing attached.
            main.send(&[round, 3]).expect("a dangling handle");
            main.send(&[round]).expect("a good one");
        }
        let _ = main.recv();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "hostile", &PipeOptions::new());
    let (_keep, inbox) = main.split();
    // Each round's messages are read as `Plain`, then `WithReply`, then
    // `Plain`, through typed receivers of the same byte half in turn.
    let mut inbox = Some(inbox);
    let before = ferry_testkit::fd_count();
    for round in 0..50u32 {
        let plain = Receiver::<Plain>::from_bytes(inbox.take().unwrap());
        let Err(RecvError::Decode(e)) = plain.recv() else {
            panic!("an unclaimed end was accepted");
        };
        assert!(
            e.to_string()
                .contains("handles (channel halves or descriptors) the type does not hold"),
            "{e}"
        );
        let with_reply = Receiver::<WithReply>::from_bytes(plain.into_bytes().unwrap());
        let Err(RecvError::Decode(e)) = with_reply.recv() else {
            panic!("a dangling handle was accepted");
        };
        assert!(e.to_string().contains("handle 3"), "{e}");
        let plain = Receiver::<Plain>::from_bytes(with_reply.into_bytes().unwrap());
        assert_eq!(plain.recv().unwrap(), Plain(round));
        inbox = Some(plain.into_bytes().unwrap());
    }
    assert_eq!(
        ferry_testkit::fd_count_back_to(before),
        before,
        "descriptors of refused ends leaked"
    );
    drop(inbox);
    drop(_keep);
    child.wait_ok();
}

/// A value that is not `Clone` (it holds a descriptor) sent by reference
/// in one process: the receiver gets a duplicate of the descriptor, the
/// sender keeps its own, and both name the same open file.
#[test]
fn send_ref_needs_no_clone_and_duplicates_a_descriptor() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsRawFd;

    #[derive(Serialize, Deserialize)]
    struct Opened {
        name: String,
        file: ferry::typed::Fd,
    }

    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (tx, rx) = ferry::channel::<Opened>(4).unwrap();
    let path = std::env::temp_dir().join(format!("ferry-send-ref-{}", std::process::id()));
    let file = std::fs::File::options()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    let kept = Opened {
        name: "log".into(),
        file: file.into(),
    };
    tx.send_ref(&kept).unwrap();
    let got = rx.recv().unwrap();
    assert_eq!(got.name, "log");
    assert_ne!(
        got.file.as_raw_fd(),
        kept.file.as_raw_fd(),
        "the receiver's descriptor is a duplicate, not the sender's"
    );
    let mut theirs = std::fs::File::from(got.file.into_owned());
    theirs.write_all(b"through the copy").unwrap();
    let mut mine = std::fs::File::from(kept.file.into_owned());
    mine.seek(SeekFrom::Start(0)).unwrap();
    let mut text = String::new();
    mine.read_to_string(&mut text).unwrap();
    assert_eq!(text, "through the copy");
}
