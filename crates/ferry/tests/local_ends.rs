//! Ends and descriptors over a pipe whose two ends are in one process (the
//! same calls as across processes, in order with the bytes), an end sent
//! to its own twin, a move out of the process while ends sent within it
//! are unreceived, and large messages carrying handles out of line.
#![cfg(feature = "serde")]

use std::io::{Read, Seek, Write};
use std::os::fd::OwnedFd;

use ferry::typed::{ByteBuf, Fd, Receiver, Sender};
use ferry::{Handle, PipeOptions, SendError};
use ferry_testkit::{secs, this_test};
use serde::{Deserialize, Serialize};

/// A memory file holding `text`, its offset at the start.
fn file_with(text: &str) -> std::fs::File {
    let fd = rustix::fs::memfd_create("ferry-local-ends", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("a memory file");
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes()).expect("write it");
    file.rewind().expect("rewind it");
    file
}

/// What a descriptor's file holds, from the start.
fn read_all(fd: OwnedFd) -> String {
    let mut file = std::fs::File::from(fd);
    file.rewind().expect("rewind");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("read");
    text
}

/// Byte messages with pipe ends and descriptors between two ends in one
/// process, interleaved with plain messages: each arrives with its own
/// ends, in order, and each end still talks to its twin here.
#[test]
fn ends_and_fds_over_a_pipe_within_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().unwrap();
    let mut twins = Vec::new();
    // Two ends a message, all unreceived until the loop below: within the
    // window of ends in flight (a send past it waits for the receiver).
    for i in 0..(ferry::HANDLE_WINDOW / 2) {
        a.send(format!("plain {i}").as_bytes()).unwrap();
        let (c, d) = ferry::pipe().unwrap();
        let file = file_with(&format!("file {i}"));
        let ends = vec![Handle::Pipe(c), Handle::Fd(file.into())];
        a.sender()
            .send_with(format!("with ends {i}").as_bytes(), ends)
            .expect("ends over a pipe within one process");
        twins.push(d);
    }
    for (i, d) in twins.iter().enumerate() {
        assert_eq!(b.recv().unwrap(), format!("plain {i}").as_bytes());
        let mut message = b.receiver().recv_with().unwrap();
        assert_eq!(message.bytes, format!("with ends {i}").as_bytes());
        assert_eq!((message.pipes.len(), message.fds.len()), (1, 1));
        assert_eq!(read_all(message.fds.pop().unwrap()), format!("file {i}"));
        let c = message.pipes.pop().unwrap();
        c.send(format!("through end {i}").as_bytes()).unwrap();
        assert_eq!(d.recv().unwrap(), format!("through end {i}").as_bytes());
        d.send(b"back").unwrap();
        assert_eq!(c.recv().unwrap(), b"back");
    }
    assert!(matches!(
        b.receiver().try_recv(),
        Err(ferry::TryRecvError::Empty)
    ));
}

/// Halves and a large message (in pieces through the ring) within one
/// process; ends not yet received are dropped with the receiver, so their
/// twins see the pipe gone.
#[test]
fn halves_large_messages_and_a_dropped_receiver_within_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().unwrap();
    let (c, d) = ferry::pipe().unwrap();
    let (c_tx, c_rx) = c.split();
    let large: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    // Larger than the ring: the receiver takes its pieces on a thread.
    let receiver = std::thread::spawn(move || (b.receiver().recv_with().unwrap(), b));
    a.sender()
        .send_with(&large, vec![Handle::Sender(c_tx), Handle::Receiver(c_rx)])
        .unwrap();
    let (message, b) = receiver.join().unwrap();
    assert!(message.bytes == large, "the large message arrives whole");
    let (c_tx, c_rx) = (&message.senders[0], &message.receivers[0]);
    c_tx.send(b"from c").unwrap();
    assert_eq!(d.recv().unwrap(), b"from c");
    d.send(b"to c").unwrap();
    assert_eq!(c_rx.recv().unwrap(), b"to c");

    let (e, f) = ferry::pipe().unwrap();
    a.sender().send_with(b"never received", vec![e]).unwrap();
    drop(b);
    assert!(matches!(f.recv(), Err(ferry::RecvError::Disconnected)));
}

/// An end sent to its own twin arrives as a local pipe again: `a` sends
/// its receiving half to `b`, which then talks to itself through it.
#[test]
fn an_end_sent_to_its_own_twin_arrives_as_a_local_pipe() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().unwrap();
    let (a_tx, a_rx) = a.split();
    a_tx.send_with(b"your own receiver", vec![a_rx]).unwrap();
    let mut message = b.receiver().recv_with().unwrap();
    let a_rx = message.receivers.pop().expect("the receiving half");
    b.send(b"to myself").unwrap();
    assert_eq!(a_rx.recv().unwrap(), b"to myself");
    // `b` cannot send it back: it reads the ring `b` writes.
    let refused = b.sender().send_with(b"and back", vec![a_rx]).unwrap_err();
    let a_rx = match refused.handles.into_iter().next() {
        Some(Handle::Receiver(rx)) => rx,
        other => panic!("the receiver handed back, not {other:?}"),
    };
    b.send(b"still mine").unwrap();
    assert_eq!(a_rx.recv().unwrap(), b"still mine");
    let (x, y) = ferry::pipe().unwrap();
    a_tx.send_with(b"a new one", vec![x]).unwrap();
    let x = b.receiver().recv_with().unwrap().pipes.pop().unwrap();
    y.send(b"hello x").unwrap();
    assert_eq!(x.recv().unwrap(), b"hello x");
}

/// An end cannot travel over the ring it receives from: refused, handed
/// back, still working.
#[test]
fn an_end_over_the_ring_it_reads_is_refused() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().unwrap();
    let err = a.sender().send_with(b"", vec![b]).unwrap_err();
    assert!(
        matches!(err.error, SendError::NotTransferable(why) if why.contains("ring it receives")),
        "{:?}",
        err.error
    );
    let b = err.handles.into_iter().next().unwrap().into_pipe().unwrap();
    a.send(b"still here").unwrap();
    assert_eq!(b.recv().unwrap(), b"still here");
}

/// The same window of ends in flight as across processes: past
/// `HANDLE_WINDOW` unreceived ends a `try_` send says `Full`, ends back.
#[test]
fn the_handle_window_bounds_a_pipe_within_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().unwrap();
    let mut twins = Vec::new();
    for _ in 0..ferry::HANDLE_WINDOW {
        let (c, d) = ferry::pipe().unwrap();
        a.sender().try_send_with(b"", vec![c]).unwrap();
        twins.push(d);
    }
    let (c, _d) = ferry::pipe().unwrap();
    let full = a.sender().try_send_with(b"", vec![c]).unwrap_err();
    assert!(matches!(full.error, ferry::TrySendError::Full));
    assert_eq!(full.handles.len(), 1);
    b.receiver().recv_with().unwrap();
    a.sender().try_send_with(b"", full.handles).unwrap();
    let too_many: Vec<OwnedFd> = (0..=ferry::MAX_HANDLES)
        .map(|_| file_with("").into())
        .collect();
    let refused = a.sender().send_with(b"", too_many).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    assert_eq!(refused.handles.len(), ferry::MAX_HANDLES + 1);
}

/// A typed request carrying a descriptor and a reply sender.
#[derive(Serialize, Deserialize)]
struct Request {
    data: ByteBuf,
    file: Fd,
    reply: Sender<u64>,
}

/// Serves requests: replies with the length of each request's data plus
/// the length of its file's text.
fn serve(requests: &Receiver<Request>, count: usize) {
    for _ in 0..count {
        let Request { data, file, reply } = requests.recv().expect("a request");
        let text = read_all(file.into_owned());
        reply.send((data.len() + text.len()) as u64).expect("reply");
    }
}

/// Sends `count` requests on `requests` and checks each answer.
fn ask(requests: &Sender<Request>, count: usize, size: impl Fn(usize) -> usize) {
    for i in 0..count {
        let (reply, answer) = ferry::channel::<u64>(16).unwrap();
        let data = ByteBuf::from(vec![i as u8; size(i)]);
        let file = file_with("four").into();
        requests
            .send(Request { data, file, reply })
            .expect("a request carrying handles");
        assert_eq!(answer.recv().expect("its answer"), size(i) as u64 + 4);
    }
}

/// Typed values carrying a descriptor and a reply sender, within one
/// process: over byte halves made typed by hand, and over a typed channel
/// whose receiving half went to a byte pipe and came back.
#[test]
fn typed_values_with_handles_within_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (a, b) = ferry::pipe().unwrap();
    let requests = Sender::<Request>::from_bytes(a.split().0);
    let served = Receiver::<Request>::from_bytes(b.split().1);
    let server = std::thread::spawn(move || serve(&served, 10));
    ask(&requests, 10, |i| i * 1000);
    server.join().unwrap();

    let (requests, served) = ferry::channel::<Request>(16).unwrap();
    let served = Receiver::<Request>::from_bytes(served.into_bytes().unwrap());
    let server = std::thread::spawn(move || serve(&served, 10));
    ask(&requests, 10, |i| i * 1000);
    server.join().unwrap();
}

/// Ends sent over a pipe within this process, then one end of that pipe
/// sent to a child: refused (and handed back) while they are unreceived;
/// once received, it goes, and talks to its twin here from the child.
#[test]
fn a_move_out_while_ends_are_queued_is_refused_until_they_are_received() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("mover", secs(30));
        let b = main.receiver().recv_with().unwrap().pipes.pop().expect("b");
        let hello = b.recv().unwrap();
        b.send(&hello).unwrap();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "mover", &PipeOptions::new());
    let (a, b) = ferry::pipe().unwrap();
    a.sender()
        .send_with(b"a file", vec![file_with("queued")])
        .unwrap();
    let refused = main.sender().send_with(b"b", vec![b]).unwrap_err();
    assert!(
        matches!(&refused.error, SendError::NotTransferable(why) if why.contains("not yet received")),
        "{:?}",
        refused.error
    );
    let b = refused
        .handles
        .into_iter()
        .next()
        .unwrap()
        .into_pipe()
        .unwrap();
    // The sending end is refused too: its ring holds them.
    let (a_tx, a_rx) = a.split();
    let refused = main.sender().send_with(b"a", vec![a_tx]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let a_tx = match refused.handles.into_iter().next() {
        Some(Handle::Sender(tx)) => tx,
        other => panic!("the sender handed back, not {other:?}"),
    };
    let mut message = b.receiver().recv_with().unwrap();
    assert_eq!(read_all(message.fds.pop().unwrap()), "queued");
    main.sender()
        .send_with(b"b", vec![b])
        .expect("nothing queued any more");
    a_tx.send(b"hello from the twin").unwrap();
    assert_eq!(a_rx.recv().unwrap(), b"hello from the twin");
    child.wait_ok();
}

/// Twenty typed requests of 1 to 8 MiB, each carrying a reply sender, to
/// a child: each travels out of line in a pool block, as a large message
/// without handles does.
#[test]
fn large_requests_carrying_handles_travel_out_of_line() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("server", secs(60));
        let requests = Receiver::<Request>::from_bytes(main.split().1);
        serve(&requests, 20);
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "server", &PipeOptions::new());
    let before = ferry::pool_stats();
    let requests = Sender::<Request>::from_bytes(main.split().0);
    ask(&requests, 20, |i| (1 + i % 8) << 20);
    let after = ferry::pool_stats();
    let lent = |s: &ferry::PoolStats| s.made_on_send_path + s.taken_from_reserve + s.reused;
    let blocks = lent(&after) - lent(&before);
    assert!(
        blocks >= 20,
        "20 large requests with handles: only {blocks} went in pool blocks ({after:?})"
    );
    drop(requests);
    child.wait_ok();
}
