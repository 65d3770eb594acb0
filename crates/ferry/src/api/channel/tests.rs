//! A hostile peer, played by writing straight into a pipe's shared memory:
//! whatever it writes, the honest end returns messages or a `Protocol`
//! error, and never panics, reads out of bounds, or allocates without bound.

use std::time::Duration;

use super::*;
use crate::api::channel::{LOAN_IN_PLACE, OUT_OF_LINE};
use crate::base::sync::Ordering;
use crate::base::wire::frame::{Kind, Tag};
use crate::transport::link::GRACE;
use crate::transport::ring::Producer;

/// An honest end `b`, and a raw producer writing into the ring it reads.
fn hostile() -> (Pipe, Producer<crate::transport::ring::RingView>, Pipe) {
    let (a, b) = PipeOptions::new()
        .ring_size(4096)
        .max_message(10_000)
        .pipe()
        .unwrap();
    let forger = Producer::new(a.region().ring(a.role())).unwrap();
    (a, forger, b)
}

fn tag(kind: Kind, handles: u16) -> u32 {
    Tag { kind, handles }.encode()
}

fn expect_protocol(b: &Pipe, what: &str) {
    match b.receiver().recv_timeout(Duration::from_secs(5)) {
        Err(RecvTimeoutError::Protocol(e)) => eprintln!("{what}: {e}"),
        other => panic!("{what}: expected a protocol error, got {other:?}"),
    }
    assert!(
        matches!(b.receiver().try_recv(), Err(TryRecvError::Protocol(_))),
        "{what}: the pipe stays broken"
    );
}

#[test]
fn forged_frames_are_protocol_errors() {
    let cases: Vec<(&str, u32, Vec<u8>)> = vec![
        ("unknown kind", 99 | 1 << 8, vec![]),
        ("wrong version", 1 | 7 << 8, vec![]),
        ("continuation first", tag(Kind::More, 0), vec![1, 2]),
        ("abort with nothing begun", tag(Kind::Abort, 0), vec![]),
        (
            "first shorter than its total",
            tag(Kind::First, 0),
            vec![1, 2, 3],
        ),
        (
            "total over the limit",
            tag(Kind::First, 0),
            20_000u64.to_le_bytes().to_vec(),
        ),
        (
            "handles on an in-process pipe",
            tag(Kind::Whole, 1),
            vec![0; 8],
        ),
        (
            "more handles than a message may carry",
            tag(Kind::Whole, 254),
            vec![0; 254 * 8],
        ),
        (
            "handles longer than the frame",
            tag(Kind::Whole, 200),
            vec![0; 8],
        ),
        ("attach with no handle", tag(Kind::Attach, 0), vec![]),
        ("attach with two handles", tag(Kind::Attach, 2), vec![0; 16]),
        ("attach with a payload", tag(Kind::Attach, 1), vec![0; 16]),
        (
            "attach naming a handle never queued",
            tag(Kind::Attach, 1),
            vec![0; 8],
        ),
    ];
    for (what, raw, body) in cases {
        let (_a, mut forger, b) = hostile();
        assert!(forger.try_push(raw, &[&body]).unwrap());
        expect_protocol(&b, what);
    }
}

/// An `Attach` frame must carry a receiving half: one naming a sender
/// (or a whole end) breaks the rules, and the end it named is dropped
/// (its other side sees the pipe gone).
#[test]
fn an_attach_of_anything_but_a_receiver_is_a_protocol_error() {
    let (a, mut forger, b) = hostile();
    let (x, y) = pipe().unwrap();
    let (x_tx, _x_rx) = x.split();
    let id = a.tx.core.half.link.local().push(Handle::Sender(x_tx));
    assert!(
        forger
            .try_push(tag(Kind::Attach, 1), &[&id.to_le_bytes()])
            .unwrap()
    );
    expect_protocol(&b, "attach of a sender");
    assert!(matches!(y.recv(), Err(RecvError::Disconnected)));
}

#[test]
fn a_whole_message_over_the_limit_is_refused() {
    let (a, b) = PipeOptions::new()
        .ring_size(4096)
        .max_message(100)
        .pipe()
        .unwrap();
    let mut forger = Producer::new(a.region().ring(a.role())).unwrap();
    assert!(forger.try_push(tag(Kind::Whole, 0), &[&[0; 101]]).unwrap());
    expect_protocol(&b, "whole over the limit");
}

#[test]
fn pieces_that_disagree_with_their_total_are_refused() {
    for (what, pieces) in [("too long", vec![8usize, 8]), ("too short", vec![8, 2])] {
        let (_a, mut forger, b) = hostile();
        let total = 12u64.to_le_bytes();
        assert!(
            forger
                .try_push(tag(Kind::First, 0), &[&total, &[1; 0]])
                .unwrap()
        );
        assert!(
            forger
                .try_push(tag(Kind::More, 0), &[&vec![1; pieces[0]]])
                .unwrap()
        );
        assert!(
            forger
                .try_push(tag(Kind::Last, 0), &[&vec![1; pieces[1]]])
                .unwrap()
        );
        expect_protocol(&b, what);
    }
}

#[test]
fn impossible_ring_positions_are_refused() {
    let (a, b) = PipeOptions::new().ring_size(4096).pipe().unwrap();
    a.region()
        .control(a.role())
        .producer
        .pos
        .store(1 << 40, Ordering::Release);
    expect_protocol(&b, "tail far beyond the head");
    let (a, b) = PipeOptions::new().ring_size(4096).pipe().unwrap();
    b.region()
        .control(a.role())
        .consumer
        .pos
        .store(1 << 40, Ordering::Release);
    // The producer re-reads the head only when its cached view is full.
    let outcome = (0..10)
        .map(|_| a.sender().send_timeout(&[0; 1000], Duration::from_secs(5)))
        .find(Result::is_err);
    match outcome {
        Some(Err(SendTimeoutError::Protocol(e))) => eprintln!("head beyond tail: {e}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn random_garbage_never_panics() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let rounds = if cfg!(miri) { 20 } else { 3000 };
    for _ in 0..rounds {
        let (_a, mut forger, b) = hostile();
        for _ in 0..(next() % 4 + 1) {
            let raw = match next() % 3 {
                0 => next() as u32,
                1 => (next() % 6) as u32 | 1 << 8,
                _ => (next() % 6) as u32 | 1 << 8 | ((next() % 3) as u32) << 16,
            };
            let body: Vec<u8> = (0..next() % 64).map(|_| next() as u8).collect();
            let _ = forger.try_push(raw, &[&body]);
        }
        drop(_a);
        loop {
            match b.receiver().try_recv() {
                Ok(msg) => assert!(msg.len() <= 10_000),
                Err(
                    TryRecvError::Protocol(_) | TryRecvError::Disconnected | TryRecvError::Empty,
                ) => break,
                Err(e) => panic!("unexpected {e:?}"),
            }
        }
    }
}

/// Two ends joined by a real link (a socket pair), both in this process:
/// what two processes would hold, without the second process.
fn linked_pair() -> (Pipe, Pipe) {
    let (sa, sb) = crate::base::sys::socket_pair().unwrap();
    let (la, lb) = (
        crate::transport::link::Link::new(sa, PipeOptions::new().pool_cap(1 << 30).link_limits()),
        crate::transport::link::Link::new(sb, PipeOptions::new().pool_cap(1 << 30).link_limits()),
    );
    let (a, far) = PipeOptions::new().pipe().unwrap();
    let id = 1;
    far.send_whole(&la, id, None).unwrap();
    let mut deadline = crate::transport::link::Deadline::new(None);
    let end = lb
        .collect(&[id], None, &mut deadline)
        .unwrap()
        .0
        .pop()
        .unwrap();
    (a, Pipe::adopt(&lb, end, &PipeOptions::new()).unwrap())
}

/// A linked pair whose first large message (block 0, generation 1, in a
/// 128 KiB block) has been delivered, and a forger on the sender's ring.
fn after_one_block() -> (Pipe, Producer<crate::transport::ring::RingView>, Pipe) {
    let (a, b) = linked_pair();
    let msg: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
    a.send(&msg).unwrap();
    assert_eq!(b.recv().unwrap(), msg);
    let forger = Producer::new(a.region().ring(a.role())).unwrap();
    (a, forger, b)
}

fn block_ref(id: u32, generation: u32, len: u64) -> Vec<u8> {
    crate::base::wire::frame::BlockRef {
        id,
        generation,
        len,
    }
    .encode()
    .to_vec()
}

#[test]
fn out_of_line_messages_round_trip_over_a_link() {
    let (a, b) = linked_pair();
    for len in [70_000usize, 5, 1 << 20, 64 * 1024, 0, 3 << 20] {
        let msg: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
        a.send(&msg).unwrap();
        assert_eq!(b.recv().unwrap(), msg, "{len} bytes copied out");
        a.send(&msg).unwrap();
        let view = b.receiver().recv_shared().unwrap();
        assert_eq!(view.is_in_place(), len >= OUT_OF_LINE);
        assert_eq!(&*view, &msg[..], "{len} bytes in place");
    }
    let mut slot = b.sender().loan(200_000).unwrap();
    slot.fill(9);
    slot.send().unwrap();
    assert_eq!(a.recv().unwrap(), vec![9; 200_000]);
    // Loans from LOAN_IN_PLACE bytes are blocks read in place; smaller
    // ones are copied through the ring; both arrive whole and in order.
    for len in [1, LOAN_IN_PLACE - 1, LOAN_IN_PLACE, 100_000] {
        let mut slot = a.sender().loan(len).unwrap();
        slot.fill(len as u8);
        slot.send().unwrap();
        let view = b.receiver().recv_shared().unwrap();
        assert_eq!(view.is_in_place(), len >= LOAN_IN_PLACE, "{len} bytes");
        assert_eq!(&*view, &vec![len as u8; len][..], "{len} bytes");
    }
}

#[test]
fn small_loans_start_zeroed_and_unsent_ones_send_nothing() {
    let (a, b) = linked_pair();
    // A view's buffer goes back to this thread's spares when dropped; a
    // loan that reuses it starts zeroed, never with the message read
    // before (which may have come from another link's peer).
    a.send(&[0xAB; 300]).unwrap();
    drop(b.receiver().recv_shared().unwrap());
    let first = b.sender().loan(300).unwrap();
    assert_eq!(&*first, &[0; 300][..]);
    // Two loans at once on one thread; the first dropped unsent.
    let mut second = b.sender().loan(10).unwrap();
    second.fill(2);
    drop(first);
    second.send().unwrap();
    assert_eq!(a.recv().unwrap(), [2; 10]);
    assert!(matches!(
        a.receiver().try_recv(),
        Err(crate::api::channel::TryRecvError::Empty)
    ));
    // Past the pipe's limit: refused, nothing sent.
    let too_large = b.sender().max_message() + 1;
    assert!(matches!(
        b.sender().loan(too_large),
        Err(SendError::TooLarge { len, .. }) if len == too_large
    ));
    b.sender().loan(3).unwrap().send().unwrap();
    assert_eq!(a.recv().unwrap(), [0; 3]);
}

#[test]
fn an_owned_loan_holds_a_handle_of_its_own() {
    let (a, b) = linked_pair();
    let mut slot = a.sender().loan_owned(100_000).unwrap();
    slot.fill(3);
    // The loan outlives the end it came from, and still sends.
    drop(a);
    slot.send().unwrap();
    let view = b.receiver().recv_shared().unwrap();
    assert!(view.is_in_place());
    assert_eq!(&*view, &[3; 100_000][..]);
    // It was the last handle on that ring: the receiver sees the end.
    assert!(matches!(
        b.receiver().try_recv(),
        Err(TryRecvError::Disconnected)
    ));
}

#[test]
fn forged_block_descriptors_are_protocol_errors() {
    let whole_block = |handles| tag(Kind::Block, handles);
    let cases = [
        ("a block never announced", block_ref(7, 1, 10)),
        ("a length past the block's end", block_ref(0, 2, 1 << 20)),
        ("a stale generation", block_ref(0, 1, 10)),
        ("a length over the limit", block_ref(0, 2, u64::MAX)),
    ];
    for (what, body) in cases {
        let (_a, mut forger, b) = after_one_block();
        assert!(forger.try_push(whole_block(0), &[&body]).unwrap());
        expect_protocol(&b, what);
    }
    let (_a, mut forger, b) = after_one_block();
    assert!(
        forger
            .try_push(whole_block(0), &[&block_ref(0, 2, 10)])
            .unwrap()
    );
    let held = b.receiver().recv_shared().unwrap();
    assert!(held.is_in_place());
    assert!(
        forger
            .try_push(whole_block(0), &[&block_ref(0, 3, 10)])
            .unwrap()
    );
    expect_protocol(&b, "a block sent again while held");
}

#[test]
fn frames_that_never_complete_a_message_cannot_hold_a_call_past_its_deadline() {
    // A ring full of messages that begin and are aborted, never a whole one.
    let (a, b) = PipeOptions::new().ring_size(1 << 20).pipe().unwrap();
    let mut forger = Producer::new(a.region().ring(a.role())).unwrap();
    let total = 100u64.to_le_bytes();
    let mut pairs = 0;
    while forger.try_push(tag(Kind::First, 0), &[&total, &[7; 10]]) == Ok(true) {
        if forger.try_push(tag(Kind::Abort, 0), &[]) != Ok(true) {
            break;
        }
        pairs += 1;
    }
    assert!(pairs > 20_000, "{pairs} pairs");
    // Each `try_recv` takes a bounded number of frames, then says Empty:
    // it does not run on for as long as the peer keeps it busy.
    let mut calls = 0;
    loop {
        calls += 1;
        match b.receiver().try_recv() {
            Err(TryRecvError::Empty) if a.sender().ring_size() - 64 <= free_bytes(&a) => break,
            Err(TryRecvError::Empty) => {}
            other => panic!("expected Empty, got {other:?}"),
        }
        assert!(calls <= 2 * pairs, "the ring never drained");
    }
    let most = 2 * pairs / calls;
    eprintln!("{pairs} aborted messages took {calls} calls, at most ~{most} frames each");
    assert!(calls >= 2 * pairs / (2 * GRACE as usize), "{calls} calls");
}

/// Bytes free in the ring `pipe` writes (its peer's reads caught up).
fn free_bytes(pipe: &Pipe) -> usize {
    let control = pipe.region().control(pipe.role());
    // Acquire: pairs with the consumer's Release store of its head.
    let head = control.consumer.pos.load(Ordering::Acquire);
    // Relaxed: our own (the forger's) last store.
    let tail = control.producer.pos.load(Ordering::Relaxed);
    pipe.sender().ring_size() - tail.wrapping_sub(head) as usize
}

#[test]
fn a_pipe_keeps_a_window_of_ends_in_flight() {
    use crate::base::wire::HANDLE_WINDOW;
    let (a, b) = linked_pair();
    let mut twins = Vec::new();
    for i in 0..HANDLE_WINDOW {
        let (near, far) = crate::api::channel::pipe().unwrap();
        a.sender()
            .try_send_with(b"end", vec![far])
            .unwrap_or_else(|e| panic!("end {i} within the window: {e}"));
        twins.push(near);
    }
    let (near, far) = crate::api::channel::pipe().unwrap();
    let refused = a
        .sender()
        .try_send_with(b"one too many", vec![far])
        .unwrap_err();
    assert!(matches!(refused.error, TrySendError::Full), "{refused}");
    assert_eq!(refused.handles.len(), 1, "the end is handed back");
    let started = std::time::Instant::now();
    let refused = a
        .sender()
        .send_with_timeout(b"one too many", refused.handles, Duration::from_millis(20))
        .unwrap_err();
    assert!(
        matches!(refused.error, SendTimeoutError::Timeout),
        "{refused}"
    );
    assert!(started.elapsed() >= Duration::from_millis(20));
    // The receiver takes one: one more may go.
    let got = b.receiver().recv_with().unwrap();
    assert_eq!(got.pipes.len(), 1);
    got.pipes[0].send(b"moved").unwrap();
    assert_eq!(twins[0].recv().unwrap(), b"moved");
    a.sender()
        .try_send_with(b"now it fits", refused.handles)
        .unwrap();
    drop(near);
    for _ in 0..HANDLE_WINDOW {
        assert_eq!(b.receiver().recv_with().unwrap().pipes.len(), 1);
    }
}

#[test]
fn a_writer_that_never_waits_says_where_it_runs_when_it_wakes_its_reader() {
    let (a, b) = PipeOptions::new().wait(Wait::Sleep).pipe().unwrap();
    // A wake that never comes fails the test within 10 s instead of hanging.
    let reader =
        std::thread::spawn(move || b.receiver().recv_timeout(Duration::from_secs(10)).unwrap());
    let control = a.region().control(a.role());
    // Relaxed (all): the words are scheduling hints; the test only looks.
    let started = std::time::Instant::now();
    while control.consumer.waiting.load(Ordering::Relaxed) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the reader never slept"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        control.producer.cpu.load(Ordering::Relaxed),
        0,
        "the writer has not said where it runs yet"
    );
    a.send(b"wake up").unwrap();
    assert_eq!(reader.join().unwrap(), b"wake up");
    let cpu = control.producer.cpu.load(Ordering::Relaxed);
    assert!(
        (1..=crate::base::sys::online_cpus() as u32).contains(&cpu),
        "the writer's CPU word after waking its reader: {cpu}"
    );
}

/// Messages a forward took out of the ring and then could not send on
/// (see `prefix.rs`) are read first, in order, with what they carry, then
/// the ring's; once they are read, receives take the common path again.
#[test]
fn messages_held_for_a_forward_that_did_not_go_are_read_first() {
    let (a, b) = pipe().unwrap();
    let (tx, _a_rx) = a.split();
    let (_b_tx, rx) = b.split();
    tx.send(b"ring 1").unwrap();
    let file = std::fs::File::open("/dev/null").unwrap();
    let held: super::prefix::Held = [
        (b"held 0".to_vec(), vec![Handle::Fd(file.into())]),
        (b"held 1".to_vec(), Vec::new()),
    ]
    .into();
    rx.set_held_prefix(held);
    tx.send(b"ring 2").unwrap();
    assert!(rx.attached(), "receives go through the prefix first");
    assert!(rx.merged_ready(), "ready: a held message");
    let first = rx.recv_with().unwrap();
    assert_eq!(first.bytes, b"held 0");
    assert_eq!(first.fds.len(), 1, "with its descriptor");
    assert_eq!(rx.recv().unwrap(), b"held 1");
    assert_eq!(rx.recv().unwrap(), b"ring 1");
    assert!(!rx.attached(), "the common path again");
    assert_eq!(rx.recv().unwrap(), b"ring 2");
    drop(tx);
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

/// A route takes at most `MOST_HOPS` hops (past that, the move that would
/// add one breaks the pipe, `RouteTooLong`), and dropping one that long
/// drops its chain one hop at a time: nested, it would overflow the stack
/// (this test's thread has 2 MiB).
#[test]
fn a_route_of_the_most_hops_is_refused_more_and_drops_without_recursion() {
    use super::route::{MOST_HOPS, RingLink};
    let route = RingLink::default();
    {
        let _following = route.following.lock().unwrap();
        for i in 0..MOST_HOPS as u64 {
            assert!(!route.most_kept(), "hop {i} refused");
            route.push(i, None);
        }
        assert!(route.most_kept(), "a hop past the most is refused");
    }
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || drop(route))
        .unwrap()
        .join()
        .expect("dropped without overflowing the stack");
}

/// A fresh ring's consumer takes handles; a receiver that writes any
/// non-zero value into its `bytes_only` word (a hostile one, garbage)
/// takes bytes only: its sender refuses handles to it, and hands them
/// back, and bytes go on.
#[test]
fn any_non_zero_bytes_only_word_refuses_handles_to_its_writer_alone() {
    let (a, b) = crate::api::channel::pipe().unwrap();
    let control = a.region().control(a.role());
    // Relaxed: a setting, read by this thread.
    assert_eq!(control.consumer.bytes_only.load(Ordering::Relaxed), 0);
    assert!(!b.receiver().bytes_only());
    control
        .consumer
        .bytes_only
        .store(0xdead_beef, Ordering::Relaxed);
    assert!(b.receiver().bytes_only());
    let (near, far) = crate::api::channel::pipe().unwrap();
    let refused = a.sender().send_with(b"end", vec![far]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    assert_eq!(refused.handles.len(), 1, "the end is handed back");
    a.send(b"bytes").unwrap();
    assert_eq!(b.recv().unwrap(), b"bytes");
    // The other direction is not this receiver's to refuse.
    b.sender().send_with(b"end", refused.handles).unwrap();
    let mut got = a.receiver().recv_with().unwrap();
    got.pipes.pop().unwrap().send(b"through").unwrap();
    assert_eq!(near.recv().unwrap(), b"through");
}
