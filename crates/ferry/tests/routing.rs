//! Sending ends on: a `Sender`, a `Receiver` or a whole `Pipe` end whose
//! other side is in another process is forwarded by whoever holds it, any
//! number of hops, and then talks to the other side directly (the
//! processes in between may exit at once); both ends of one pipe may move
//! at once.
//!
//! Each test's process tree is a chain: the test process keeps the
//! receiver and hands the sender to its child, each hop forwards it to a
//! child of its own, and the last one sends. Messages carry descriptors and
//! pool blocks across the moves; order, content and the end of the pipe
//! (the sender's process gone, or the receiver dropped) are checked at the
//! other end.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use ferry::{
    Handle, Message, Pipe, PipeOptions, Receiver, RecvError, Select, SendError, Sender,
    TryRecvError,
};
use ferry_testkit::{secs, this_test};

/// Messages the last hop sends.
const ROUNDS: u64 = 300;
/// Messages each forwarding hop sends before it forwards.
const BEFORE: u64 = 5;
/// Every this many messages, one carries a descriptor.
const FD_EVERY: u64 = 2;
/// Every this many messages, one is a large one (a pool block).
const BIG_EVERY: u64 = 50;
const BIG: usize = 1 << 20;

/// The bytes of message `i` from hop `from`.
fn message(from: u32, i: u64) -> Vec<u8> {
    let len = if i % BIG_EVERY == BIG_EVERY - 1 {
        BIG
    } else {
        16 + (i as usize * 13) % 300
    };
    let mut bytes = ferry_testkit::XorShift::new(u64::from(from) << 32 | (i + 1)).bytes(len);
    bytes[..8].copy_from_slice(&i.to_le_bytes());
    bytes[8..12].copy_from_slice(&from.to_le_bytes());
    bytes
}

/// Sends `count` messages from hop `from` through `tx`: in order, every
/// other one with a socket that carries its own number.
fn send_some(tx: &Sender, from: u32, count: u64) {
    for i in 0..count {
        let bytes = message(from, i);
        if i % FD_EVERY == 0 {
            tx.send_with(&bytes, vec![numbered_fd(i)])
                .expect("send with a descriptor");
        } else {
            tx.send(&bytes).expect("send");
        }
    }
}

/// Receives `count` messages from hop `from` on `rx`'s end and checks each.
fn receive_some(rx: &Pipe, from: u32, count: u64) {
    check_some(
        &mut || rx.receiver().recv_with().expect("a message"),
        from,
        count,
    );
}

/// Checks the next `count` messages `next` gives: from hop `from`, in order.
fn check_some(next: &mut dyn FnMut() -> Message, from: u32, count: u64) {
    for i in 0..count {
        let mut msg = next();
        assert_eq!(msg.bytes, message(from, i), "message {i} from hop {from}");
        if i % FD_EVERY == 0 {
            let fd = msg.fds.pop().expect("the descriptor");
            assert_eq!(number_of(fd), i, "descriptor of message {i}");
        } else {
            assert!(msg.fds.is_empty(), "message {i} carries no descriptor");
        }
    }
}

/// A hop: takes the sender from its parent. At the end of the chain
/// (`hops` 0), it says it starts (up the chain) and sends. Otherwise it
/// sends a few messages, then forwards the sender to a child of its own
/// playing the next hop (once the child has taken its bootstrap pipe,
/// which needs its parent alive), and either exits right after
/// (`exit_at_once`) or passes the last hop's start up the chain.
fn hop(test: &str, hops: u32, exit_at_once: bool) {
    let (dog, main) = ferry_testkit::child_pipe(&format!("hop {hops}"), secs(60));
    // Its parent may exit once it has forwarded: the bootstrap is done.
    main.send(b"ready").expect("ready");
    let mut msg = main.receiver().recv_with().expect("the sender");
    let tx = msg.senders.pop().expect("a sender");
    if hops == 0 {
        main.send(b"start").ok();
        send_some(&tx, 0, ROUNDS);
        main.send(b"sent").ok();
        return;
    }
    send_some(&tx, hops, BEFORE);
    let next = format!("hop{}{}", hops - 1, if exit_at_once { "!" } else { "" });
    let (child, down) = ferry_testkit::spawn_child(&dog, test, &next, &PipeOptions::new());
    assert_eq!(down.recv().expect("the child's start"), b"ready");
    down.sender()
        .send_with(b"take this sender", vec![Handle::from(tx)])
        .expect("forward the sender");
    if exit_at_once {
        // No destructor runs: the child lives on, the messages and
        // records already sent stay queued for it.
        std::process::exit(0);
    }
    assert_eq!(down.recv().expect("the last hop's start"), b"start");
    main.send(b"start").expect("pass the start on");
    assert_eq!(down.recv().expect("the child's report"), b"sent");
    child.wait_ok();
    main.send(b"sent").ok();
}

/// In a child: plays its hop (the role is `hop<N>`, `!` for exiting at
/// once). `true` if this process was a child.
fn play(test: &str) -> bool {
    let Some(role) = ferry_testkit::role() else {
        return false;
    };
    let rest = role.strip_prefix("hop").expect("a hop role");
    let exit_at_once = rest.ends_with('!');
    let hops = rest.trim_end_matches('!').parse().expect("hops left");
    hop(test, hops, exit_at_once);
    true
}

/// Makes a pipe, hands its sender down a chain of `hops` forwards, and
/// receives what the last process sends; then that process is gone and
/// the receiver says so.
fn chain(test: &str, hops: u32, exit_at_once: bool) {
    let dog = ferry_testkit::Watchdog::start(test, secs(90));
    let first = format!("hop{}{}", hops - 1, if exit_at_once { "!" } else { "" });
    let (mut child, main) = ferry_testkit::spawn_child(&dog, test, &first, &PipeOptions::new());
    assert_eq!(main.recv().expect("the child's start"), b"ready");
    let (a, b) = ferry::pipe().expect("pipe");
    let (a_tx, _a_rx) = a.split();
    main.sender()
        .send_with(b"take this sender", vec![a_tx])
        .expect("send the sender");
    if !exit_at_once {
        // Every forward is done before the first message is read: frames
        // written before a move are read after it (their handles are on
        // the old links).
        assert_eq!(main.recv().expect("the last hop's start"), b"start");
    }
    for from in (1..hops).rev() {
        receive_some(&b, from, BEFORE);
    }
    receive_some(&b, 0, ROUNDS);
    if !exit_at_once {
        assert_eq!(main.recv().expect("the chain's report"), b"sent");
        assert!(child.wait().success(), "the chain's first hop failed");
    }
    // The last sender's process exits once it has sent: its death is seen
    // over the link its forwarder introduced.
    let since = Instant::now();
    match b.receiver().recv_timeout(Duration::from_secs(20)) {
        Err(ferry::RecvTimeoutError::Disconnected) => {}
        other => panic!("after the last message: {other:?}"),
    }
    assert!(since.elapsed() < Duration::from_secs(20));
    if exit_at_once {
        child.wait();
    }
}

/// ipcz's `MultipleHops`, for a sender: one forward, then the sender's
/// messages (descriptors and blocks too) reach the receiver in order.
#[test]
fn a_sender_forwarded_once_reaches_its_receiver() {
    if play(this_test!()) {
        return;
    }
    chain(this_test!(), 2, false);
}

/// Three forwards.
#[test]
fn a_sender_forwarded_three_times_reaches_its_receiver() {
    if play(this_test!()) {
        return;
    }
    chain(this_test!(), 4, false);
}

/// A chain of ten forwards (eleven processes): every hop's messages, then
/// the last one's, in order.
#[test]
fn a_sender_forwarded_ten_times_reaches_its_receiver() {
    if play(this_test!()) {
        return;
    }
    chain(this_test!(), 11, false);
}

/// Each forwarder exits as soon as it has sent the sender on: nothing
/// passes through it afterwards.
#[test]
fn forwarders_may_exit_at_once() {
    if play(this_test!()) {
        return;
    }
    chain(this_test!(), 3, true);
}

/// The receiver goes first: the forwarded sender's next send says
/// `Disconnected`.
#[test]
fn a_forwarded_sender_sees_its_receiver_dropped() {
    if let Some(role) = ferry_testkit::role() {
        let (dog, main) = ferry_testkit::child_pipe(&role, secs(30));
        let mut msg = main.receiver().recv_with().expect("the sender");
        let tx = msg.senders.pop().expect("a sender");
        if role == "forwarder" {
            let (child, down) =
                ferry_testkit::spawn_child(&dog, this_test!(), "sender", &PipeOptions::new());
            down.sender()
                .send_with(b"take this sender", vec![Handle::from(tx)])
                .expect("forward the sender");
            assert_eq!(down.recv().expect("report"), b"disconnected");
            child.wait_ok();
            main.send(b"disconnected").expect("report");
            return;
        }
        tx.send(b"hello").expect("first send");
        let since = Instant::now();
        loop {
            match tx.send(b"more") {
                Ok(()) if since.elapsed() < Duration::from_secs(20) => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(SendError::Disconnected) => break,
                other => panic!("after the receiver went: {other:?}"),
            }
        }
        main.send(b"disconnected").expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "forwarder", &PipeOptions::new());
    let (a, b) = ferry::pipe().expect("pipe");
    let (a_tx, _a_rx) = a.split();
    main.sender()
        .send_with(b"take this sender", vec![a_tx])
        .expect("send the sender");
    assert_eq!(b.recv().expect("first message"), b"hello");
    drop(b);
    assert_eq!(main.recv().expect("report"), b"disconnected");
    child.wait_ok();
}

/// The sending process is killed mid-stream: the receiver takes what was
/// sent, then sees `Disconnected`, and never hangs.
#[test]
fn a_forwarded_sender_killed_mid_stream_disconnects_its_receiver() {
    if let Some(role) = ferry_testkit::role() {
        let (dog, main) = ferry_testkit::child_pipe(&role, secs(30));
        let mut msg = main.receiver().recv_with().expect("the sender");
        let tx = msg.senders.pop().expect("a sender");
        if role == "forwarder" {
            let (mut child, down) =
                ferry_testkit::spawn_child(&dog, this_test!(), "sender", &PipeOptions::new());
            down.sender()
                .send_with(b"take this sender", vec![Handle::from(tx)])
                .expect("forward the sender");
            let _ = child.reap();
            main.send(b"reaped").expect("report");
            // Stays until the parent has seen the end, so the link through
            // this process is not what tells.
            let _ = main.recv();
            return;
        }
        for i in 0..100u64 {
            tx.send(&i.to_le_bytes()).expect("send");
        }
        std::process::abort();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "forwarder", &PipeOptions::new());
    let (a, b) = ferry::pipe().expect("pipe");
    let (a_tx, _a_rx) = a.split();
    main.sender()
        .send_with(b"take this sender", vec![a_tx])
        .expect("send the sender");
    for i in 0..100u64 {
        assert_eq!(b.recv().expect("a message"), i.to_le_bytes());
    }
    assert_eq!(main.recv().expect("report"), b"reaped");
    assert!(matches!(b.recv(), Err(RecvError::Disconnected)));
    main.send(b"seen").expect("release the forwarder");
    child.wait_ok();
}

/// Both halves of the receiving end wait in a `Select` made before the
/// sender left: its doorbell goes with the sender to the forwarder, and on
/// to the last hop, whose messages ring it directly; its exit too.
#[test]
fn a_select_wakes_for_a_forwarded_senders_messages() {
    if play(this_test!()) {
        return;
    }
    let test = this_test!();
    let dog = ferry_testkit::Watchdog::start(test, secs(90));
    let (child, main) = ferry_testkit::spawn_child(&dog, test, "hop1", &PipeOptions::new());
    assert_eq!(main.recv().expect("the child's start"), b"ready");
    let (a, b) = ferry::pipe().expect("pipe");
    let (a_tx, _a_rx) = a.split();
    let (_b_tx, b_rx) = b.split();
    let mut select = Select::new().expect("a select");
    let key = select.add(b_rx).expect("add the receiver");
    main.sender()
        .send_with(b"take this sender", vec![a_tx])
        .expect("send the sender");
    // A member is ready once a message and its handles have arrived: the
    // receive then takes it without waiting.
    let mut next = || {
        // A lost wakeup would show as a wait to the timeout (the select's
        // last look then finds the message): the sender sends at once.
        let since = Instant::now();
        let ready = select
            .ready_timeout(Duration::from_secs(10))
            .expect("ready");
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "a wakeup was lost"
        );
        assert_eq!(ready, key);
        let rx: &Receiver = select.get(key).expect("the receiver");
        rx.recv_with().expect("a ready receiver's message")
    };
    check_some(&mut next, 1, BEFORE);
    check_some(&mut next, 0, ROUNDS);
    assert_eq!(main.recv().expect("the chain's report"), b"start");
    assert_eq!(main.recv().expect("the chain's report"), b"sent");
    child.wait_ok();
    let ready = select
        .ready_timeout(Duration::from_secs(20))
        .expect("ready at the end");
    let rx: &Receiver = select.get(ready).expect("the receiver");
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
}

/// Sends message `n` (with a socket carrying `n`) through `tx`.
fn send_numbered(tx: &Sender, n: u64) {
    tx.send_with(&message(9, n), vec![numbered_fd(n)])
        .expect("send a numbered message");
}

/// Receives message `n` on `rx` and checks it and its socket.
fn receive_numbered(rx: &Receiver, n: u64) {
    let mut msg = rx.recv_with().expect("a numbered message");
    assert_eq!(msg.bytes, message(9, n), "message {n}");
    let fd = msg.fds.pop().expect("its descriptor");
    assert_eq!(number_of(fd), n, "descriptor of message {n}");
}

/// ipcz's `TransferBackAndForth`, for a sender: bounced between two
/// processes a hundred times, each holder sending a message with a
/// descriptor before passing it on. Each time it comes back here it is a
/// pipe within this process again (its descriptors through the ring's
/// queue, no socket); each time it leaves, a plain move. The receiver here
/// gets every message in order, those whose frames name the link read
/// after the sender came home; and the bounces leave no descriptor
/// behind.
#[test]
fn a_sender_bounced_back_and_forth_a_hundred_times() {
    const BOUNCES: u64 = 100;
    if let Some(role) = ferry_testkit::role() {
        let (_dog, main) = ferry_testkit::child_pipe(&role, secs(60));
        let mut fds_half_way = 0;
        for i in 0..BOUNCES {
            let mut msg = main.receiver().recv_with().expect("the sender");
            let tx = msg.senders.pop().expect("a sender");
            send_numbered(&tx, 2 * i + 1);
            main.sender()
                .send_with(b"back", vec![Handle::from(tx)])
                .expect("send the sender back");
            if i == BOUNCES / 2 {
                fds_half_way = ferry_testkit::settled_fd_count();
            }
        }
        // This process does nothing else: its count is the bounces' alone.
        let fds = ferry_testkit::settled_fd_count();
        let report = format!("{fds_half_way} {fds}");
        main.send(report.as_bytes()).expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "bouncer", &PipeOptions::new());
    let (a, b) = ferry::pipe().expect("pipe");
    let (mut tx, _a_rx) = a.split();
    let (_b_tx, rx) = b.split();
    for i in 0..BOUNCES {
        // Sent here, through the queue, and received before the sender
        // leaves (an end cannot leave while ends or descriptors sent over
        // its pipe within the process wait in the queue).
        send_numbered(&tx, 2 * i);
        receive_numbered(&rx, 2 * i);
        main.sender()
            .send_with(b"there", vec![Handle::from(tx)])
            .expect("send the sender there");
        let mut msg = main.receiver().recv_with().expect("the sender back");
        tx = msg.senders.pop().expect("a sender");
        // Sent there, over the link, and read once the sender is home.
        receive_numbered(&rx, 2 * i + 1);
    }
    // Home again: a send here names its descriptor in the ring's queue.
    send_numbered(&tx, 2 * BOUNCES);
    receive_numbered(&rx, 2 * BOUNCES);
    let report = String::from_utf8(main.recv().expect("the child's count")).expect("text");
    let (half, all) = report.split_once(' ').expect("two counts");
    let (half, all): (usize, usize) = (
        half.parse().expect("a count"),
        all.parse().expect("a count"),
    );
    assert!(
        all <= half,
        "the child's descriptors grew with bounces: {half} half way, {all} after {BOUNCES}"
    );
    drop(tx);
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Disconnected)));
    child.wait_ok();
}

/// Rounds of [`a_receiver_polling_while_its_sender_bounces_sees_no_false_end`],
/// each a new pipe whose sender bounces [`POLLED_BOUNCES`] times (the
/// receiver keeps a link per move of its sender until the pipe is
/// dropped, two descriptors each: 150 bounces stay well inside a soft
/// `RLIMIT_NOFILE` of 1,024).
const POLLED_ROUNDS: u64 = 6;
const POLLED_BOUNCES: u64 = 150;

/// A receiver that looks for messages without pause (`try_recv`, then a
/// poll of its ready descriptor or a short timed wait, in turns) while
/// its sender is bounced between two other processes, 900 times over six
/// pipes: each forward closes the link the receiver was reading (its old
/// holder lets it go at once), and a look that finds that link hung up
/// just as the `Moved` record lands must follow the move, not report the
/// pipe gone. Every message arrives in order, and `Disconnected` comes
/// only once the sender is dropped.
#[test]
fn a_receiver_polling_while_its_sender_bounces_sees_no_false_end() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("bouncer") => {
            let (_dog, main) = ferry_testkit::child_pipe("bouncer", secs(60));
            for i in 0..POLLED_ROUNDS * POLLED_BOUNCES {
                let mut msg = main.receiver().recv_with().expect("the sender");
                let tx = msg.senders.pop().expect("a sender");
                tx.send(&(2 * (i % POLLED_BOUNCES) + 1).to_le_bytes())
                    .expect("send");
                main.sender()
                    .send_with(b"back", vec![Handle::from(tx)])
                    .expect("send the sender back");
            }
        }
        Some("poller") => {
            let (_dog, main) = ferry_testkit::child_pipe("poller", secs(60));
            for _ in 0..POLLED_ROUNDS {
                let mut msg = main.receiver().recv_with().expect("the receiver");
                let rx = msg.receivers.pop().expect("a receiver");
                main.send(poll_until_the_end(&rx).as_bytes())
                    .expect("report");
            }
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let (bouncer, there) =
                ferry_testkit::spawn_child(&dog, test, "bouncer", &PipeOptions::new());
            let (poller, watching) =
                ferry_testkit::spawn_child(&dog, test, "poller", &PipeOptions::new());
            for _ in 0..POLLED_ROUNDS {
                let (a, b) = ferry::pipe().expect("pipe");
                let (mut tx, _a_rx) = a.split();
                let (_b_tx, rx) = b.split();
                watching
                    .sender()
                    .send_with(b"poll this", vec![Handle::from(rx)])
                    .expect("send the receiver");
                for i in 0..POLLED_BOUNCES {
                    tx.send(&(2 * i).to_le_bytes()).expect("send");
                    there
                        .sender()
                        .send_with(b"there", vec![Handle::from(tx)])
                        .expect("send the sender there");
                    let mut msg = there.receiver().recv_with().expect("the sender back");
                    tx = msg.senders.pop().expect("a sender");
                }
                drop(tx);
                let report =
                    String::from_utf8(watching.recv().expect("the poller's report")).expect("text");
                assert_eq!(
                    report,
                    format!("{} Disconnected", 2 * POLLED_BOUNCES),
                    "every message, then the end"
                );
            }
            bouncer.wait_ok();
            poller.wait_ok();
        }
    }
}

/// Moves of the other side in [`a_side_that_stays_holds_few_links`]
/// (two forwards each).
const STAY_BOUNCES: u64 = 400;

/// A side that stays while the other side of its ring moves: each forward
/// through a third process joins the two holders by a new link (a socket
/// and a process handle), and the side that stays lets go of the old ones
/// once no frame still to be read can name them. After 400 moves of the
/// other side (800 forwards: 1,600 descriptors if none were let go of,
/// past the usual soft limit of 1,024) it holds at most three links more
/// than before the first; every message arrives in order, and the pipe
/// still ends as it should.
fn a_side_that_stays_holds_few_links(test: &str, receiver_stays: bool) {
    let report = |main: &Pipe| {
        let count = ferry_testkit::settled_fd_count() as u64;
        main.send(&count.to_le_bytes()).expect("report");
    };
    match ferry_testkit::role().as_deref() {
        Some("bouncer") => {
            let (_dog, main) = ferry_testkit::child_pipe("bouncer", secs(120));
            for _ in 0..STAY_BOUNCES {
                let msg = main.receiver().recv_with().expect("the end");
                main.sender()
                    .send_with(b"back", vec![the_end(msg)])
                    .expect("send the end back");
            }
        }
        Some("stays") if receiver_stays => {
            let (_dog, main) = ferry_testkit::child_pipe("stays", secs(120));
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let rx = msg.receivers.pop().expect("a receiver");
            report(&main);
            for i in 0..STAY_BOUNCES {
                assert_eq!(
                    rx.recv().expect("a message"),
                    i.to_le_bytes(),
                    "message {i}"
                );
            }
            assert!(matches!(rx.recv(), Err(RecvError::Disconnected)), "the end");
            report(&main);
        }
        Some("stays") => {
            let (_dog, main) = ferry_testkit::child_pipe("stays", secs(120));
            let mut msg = main.receiver().recv_with().expect("the sender");
            let tx = msg.senders.pop().expect("a sender");
            report(&main);
            for i in 0..STAY_BOUNCES {
                main.recv().expect("a go");
                tx.send(&i.to_le_bytes()).expect("send");
            }
            main.recv().expect("the last go");
            report(&main);
            main.recv().expect("the end");
            assert!(tx.send(b"late").is_err(), "the receiver is gone");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(120));
            let (bouncer, there) =
                ferry_testkit::spawn_child(&dog, test, "bouncer", &PipeOptions::new());
            let (stayer, stays) =
                ferry_testkit::spawn_child(&dog, test, "stays", &PipeOptions::new());
            let (a, b) = ferry::pipe().expect("pipe");
            let (tx, _a_rx) = a.split();
            let (_b_tx, rx) = b.split();
            let count = |report: Vec<u8>| u64::from_le_bytes(report.try_into().expect("a count"));
            let bounce = |end: Handle| -> Handle {
                there
                    .sender()
                    .send_with(b"there", vec![end])
                    .expect("send the end there");
                the_end(there.receiver().recv_with().expect("the end back"))
            };
            let (before, after);
            if receiver_stays {
                stays
                    .sender()
                    .send_with(b"stay", vec![Handle::from(rx)])
                    .expect("send the receiver");
                before = count(stays.recv().expect("a count"));
                let mut end = Handle::from(tx);
                for i in 0..STAY_BOUNCES {
                    let Handle::Sender(tx) = &end else {
                        panic!("a sender")
                    };
                    tx.send(&i.to_le_bytes()).expect("send");
                    end = bounce(end);
                }
                drop(end);
                after = count(stays.recv().expect("a count"));
            } else {
                stays
                    .sender()
                    .send_with(b"stay", vec![Handle::from(tx)])
                    .expect("send the sender");
                before = count(stays.recv().expect("a count"));
                let mut end = Handle::from(rx);
                for i in 0..STAY_BOUNCES {
                    stays.send(b"go").expect("go");
                    let Handle::Receiver(rx) = &end else {
                        panic!("a receiver")
                    };
                    assert_eq!(
                        rx.recv().expect("a message"),
                        i.to_le_bytes(),
                        "message {i}"
                    );
                    end = bounce(end);
                }
                stays.send(b"go").expect("the last go");
                after = count(stays.recv().expect("a count"));
                drop(end);
                stays.send(b"end").expect("the end");
            }
            assert!(
                after <= before + 6,
                "the side that stays holds descriptors per move of the other side: \
                 {before} before the first move, {after} after {STAY_BOUNCES}"
            );
            bouncer.wait_ok();
            stayer.wait_ok();
        }
    }
}

/// The one half a message carries.
fn the_end(mut msg: Message) -> Handle {
    match (msg.senders.pop(), msg.receivers.pop()) {
        (Some(tx), None) => Handle::from(tx),
        (None, Some(rx)) => Handle::from(rx),
        _ => panic!("one half"),
    }
}

#[test]
fn a_receiver_that_stays_lets_go_of_its_senders_old_links() {
    a_side_that_stays_holds_few_links(this_test!(), true);
}

#[test]
fn a_sender_that_stays_lets_go_of_its_receivers_old_links() {
    a_side_that_stays_holds_few_links(this_test!(), false);
}

/// Receives on `rx` without pause until it ends: `try_recv`, then (in
/// turns) a poll of its ready descriptor or a short timed wait. Says how
/// many messages came, in order, and how it ended.
fn poll_until_the_end(rx: &Receiver) -> String {
    rx.set_wait(ferry::Wait::Sleep);
    let ready = rx.ready_fd().expect("a ready descriptor");
    let mut next = 0u64;
    let end = loop {
        let got = match rx.try_recv() {
            Err(TryRecvError::Empty) if next.is_multiple_of(2) => {
                let mut fds = [rustix::event::PollFd::new(
                    &ready,
                    rustix::event::PollFlags::IN,
                )];
                rustix::event::poll(&mut fds, None).expect("poll");
                continue;
            }
            Err(TryRecvError::Empty) => match rx.recv_timeout(Duration::from_micros(300)) {
                Err(ferry::RecvTimeoutError::Timeout) => continue,
                other => other.map_err(|e| format!("{e:?}")),
            },
            other => other.map_err(|e| format!("{e:?}")),
        };
        match got {
            Ok(bytes) => {
                assert_eq!(bytes, next.to_le_bytes(), "message {next}");
                next += 1;
            }
            Err(end) => break end,
        }
    };
    format!("{next} {end}")
}

/// Messages the dead holder of [`ends_whose_other_side_died_go_on_with_what_they_hold`]
/// sends on each end before it dies (one of them a pool block).
const LAST_WORDS: u64 = 60;

/// An end whose other side's holder has died goes on all the same (its
/// ring cannot: no one is left to be told where it went, so it travels
/// as a fresh end holding what the old one held): a whole end, and the
/// two halves of another end, each with messages carrying descriptors
/// and a pool block that were sent before the death and never read. The
/// new holder receives them all, in order, then `Disconnected`, and its
/// sends say `Disconnected`, just as this process would have; the pipe
/// that carried them is not harmed, and this process holds no more
/// descriptors than before.
#[test]
fn ends_whose_other_side_died_go_on_with_what_they_hold() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("dies") => {
            let (_dog, main) = ferry_testkit::child_pipe("dies", secs(60));
            let mut msg = main.receiver().recv_with().expect("two ends");
            let (whole, halves) = (msg.pipes.remove(0), msg.pipes.remove(0));
            send_some(whole.sender(), 1, LAST_WORDS);
            send_some(halves.sender(), 2, LAST_WORDS);
            main.send(b"sent").expect("say so");
            // Gone with the ends held (nothing dropped, nothing closed).
            std::process::exit(0);
        }
        Some("carrier") => {
            let (_dog, main) = ferry_testkit::child_pipe("carrier", secs(60));
            let mut msg = main.receiver().recv_with().expect("the ends");
            let whole = msg.pipes.pop().expect("the whole end");
            let tx = msg.senders.pop().expect("the sending half");
            let rx = msg.receivers.pop().expect("the receiving half");
            receive_some(&whole, 1, LAST_WORDS);
            assert!(matches!(whole.recv(), Err(RecvError::Disconnected)));
            assert!(matches!(whole.send(b"x"), Err(SendError::Disconnected)));
            check_some(&mut || rx.recv_with().expect("a message"), 2, LAST_WORDS);
            assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
            assert!(matches!(tx.send(b"x"), Err(SendError::Disconnected)));
            assert_eq!(main.recv().expect("a message"), b"still here");
            main.send(b"all of it").expect("answer");
        }
        // The process that forwards, doing nothing else, so that its
        // descriptor count is its own.
        Some("holder") => {
            let (dog, _main) = ferry_testkit::child_pipe("holder", secs(60));
            let (dies, to_dies) =
                ferry_testkit::spawn_child(&dog, test, "dies", &PipeOptions::new());
            let (carrier, main) =
                ferry_testkit::spawn_child(&dog, test, "carrier", &PipeOptions::new());
            let (whole, whole_twin) = ferry::pipe().expect("pipe");
            let (halves, halves_twin) = ferry::pipe().expect("pipe");
            to_dies
                .sender()
                .send_with(b"yours", vec![whole_twin, halves_twin])
                .expect("send the ends");
            assert_eq!(to_dies.recv().expect("sent"), b"sent");
            dies.wait_ok();
            let before = ferry_testkit::fd_count();
            let (tx, rx) = halves.split();
            let ends = vec![Handle::from(whole), Handle::from(tx), Handle::from(rx)];
            main.sender()
                .send_with(b"take these ends", ends)
                .expect("ends whose other side died go on");
            main.send(b"still here").expect("the carrier works");
            assert_eq!(main.recv().expect("its answer"), b"all of it");
            carrier.wait_ok();
            assert!(
                ferry_testkit::fd_count() <= before,
                "descriptors: {} after, {before} before",
                ferry_testkit::fd_count()
            );
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let (holder, _main) =
                ferry_testkit::spawn_child(&dog, test, "holder", &PipeOptions::new());
            holder.wait_ok();
        }
    }
}

/// Trials of [`a_forward_killed_anywhere_ends_in_messages_or_disconnected`].
const KILL_TRIALS: u64 = 200;
/// Messages the last hop of each trial sends, if it lives.
const KILL_MESSAGES: u64 = 300;

/// The forwarder or the last hop is killed (SIGKILL) at a random point of
/// a forward and the stream after it, 200 times: the receiver takes the
/// messages sent, in order, then sees `Disconnected`, never a hang; its
/// process holds as many descriptors after every trial as before the
/// first. The trials run in a child that does nothing else, so its count
/// is theirs alone.
#[test]
fn a_forward_killed_anywhere_ends_in_messages_or_disconnected() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("trials") => return kill_trials(test),
        Some("kill-forwarder") => return kill_forwarder(test),
        Some("kill-sender") => return kill_sender(),
        Some(other) => panic!("no role {other}"),
        None => {}
    }
    let dog = ferry_testkit::Watchdog::start(test, secs(300));
    let (child, main) = ferry_testkit::spawn_child(&dog, test, "trials", &PipeOptions::new());
    let report = String::from_utf8(main.recv().expect("the trials' report")).expect("text");
    eprintln!("{report}");
    child.wait_ok();
}

/// The receiver's side: runs the trials and reports how they ended.
fn kill_trials(test: &str) {
    let (_dog, main) = ferry_testkit::child_pipe("trials", secs(280));
    let mut rng = ferry_testkit::XorShift::new(34);
    let mut baseline = None;
    let (mut forwarder_killed, mut sender_killed, mut complete) = (0, 0, 0);
    for trial in 0..KILL_TRIALS {
        let dog = ferry_testkit::Watchdog::start(format!("trial {trial}"), secs(20));
        let (mut forwarder, via) =
            ferry_testkit::spawn_child(&dog, test, "kill-forwarder", &PipeOptions::new());
        let sender_pid = u32::from_le_bytes(
            via.recv().expect("the sender's pid")[..4]
                .try_into()
                .expect("four bytes"),
        );
        if trial == 1 {
            // After one trial: what the first one opened for good (the
            // watcher, the closer) is counted in.
            baseline = Some(ferry_testkit::settled_fd_count());
        }
        let (a, b) = ferry::pipe().expect("pipe");
        let (a_tx, _a_rx) = a.split();
        let (_b_tx, rx) = b.split();
        via.sender()
            .send_with(b"take this sender", vec![a_tx])
            .expect("send the sender");
        // Kill one of the two at a random point: during the forward, or
        // while the stream flows.
        let delay = Duration::from_micros(rng.upto(4000) as u64);
        let kill_sender = rng.next_u64().is_multiple_of(2);
        std::thread::sleep(delay);
        if kill_sender {
            let pid = rustix::process::Pid::from_raw(sender_pid as i32).expect("a pid");
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        } else {
            forwarder.kill();
        }
        let mut next = 0u64;
        loop {
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok(bytes) => {
                    assert_eq!(bytes, next.to_le_bytes(), "trial {trial}: message {next}");
                    next += 1;
                }
                Err(ferry::RecvTimeoutError::Disconnected) => break,
                Err(e) => panic!("trial {trial}: after {next} messages: {e} (a hang)"),
            }
        }
        match (next == KILL_MESSAGES, kill_sender) {
            (true, _) => complete += 1,
            (false, true) => sender_killed += 1,
            (false, false) => forwarder_killed += 1,
        }
        drop(rx);
        drop(via);
        let _ = forwarder.reap();
        // The sender, if it lives, ends once its stream or its parent is
        // gone; its pid is not this process's child to reap.
        if let Some(base) = baseline {
            let now = ferry_testkit::fd_count_back_to(base);
            assert!(
                now <= base,
                "trial {trial}: {now} descriptors, {base} before (kept by a dead route)"
            );
        }
    }
    let report = format!(
        "{KILL_TRIALS} trials: {complete} streams whole, {sender_killed} cut by the sender's death, \
         {forwarder_killed} by the forwarder's; every one ended in Disconnected"
    );
    main.send(report.as_bytes()).expect("report");
}

/// The forwarder: spawns the last hop, says its pid, forwards the sender
/// to it, then waits to be killed or for the trial to end.
fn kill_forwarder(test: &str) {
    let (dog, main) = ferry_testkit::child_pipe("kill-forwarder", secs(20));
    let (mut sender, down) =
        ferry_testkit::spawn_child(&dog, test, "kill-sender", &PipeOptions::new());
    main.send(&sender.id().to_le_bytes())
        .expect("the sender's pid");
    let mut msg = main.receiver().recv_with().expect("the sender");
    let tx = msg.senders.pop().expect("a sender");
    // The last hop may be dead already: the sender then comes back, and
    // goes with this process.
    let _ = down
        .sender()
        .send_with(b"take this sender", vec![Handle::from(tx)]);
    let _ = main.recv();
    drop(down);
    let _ = sender.reap();
}

/// The last hop: takes the sender and streams numbered messages, until
/// it has sent them all or its receiver is gone.
fn kill_sender() {
    let _dog = ferry_testkit::Watchdog::start("kill-sender", secs(20));
    // The forwarder may have been killed before this process took its
    // pipe: ferry then refuses the bootstrap, and there is nothing to do.
    let Ok(main) = Pipe::from_parent() else {
        return;
    };
    let Ok(mut msg) = main.receiver().recv_with() else {
        return; // the forwarder died first
    };
    let tx = msg.senders.pop().expect("a sender");
    for i in 0..KILL_MESSAGES {
        if tx.send(&i.to_le_bytes()).is_err() {
            return;
        }
        // Paced, so a kill can land anywhere in the stream.
        if i % 16 == 15 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// A typed sender travels inside a typed value, and is forwarded the same
/// way: the parent keeps the receiver of a `ferry::channel::<u64>`, the
/// child takes the sender inside a message and sends it on inside another
/// to its own child, which sends the values.
#[test]
fn a_typed_sender_forwarded_reaches_its_receiver() {
    use ferry::typed::{Receiver as TypedReceiver, Sender as TypedSender};
    const VALUES: u64 = 1000;
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        let (dog, main) = ferry_testkit::child_pipe(&role, secs(60));
        let (_, from_parent) = main.split();
        let from_parent = TypedReceiver::<TypedSender<u64>>::from_bytes(from_parent);
        let tx = from_parent.recv().expect("the typed sender");
        if role == "typed-last" {
            for v in 0..VALUES {
                tx.send(v * 3).expect("send a value");
            }
            return;
        }
        let (child, down) =
            ferry_testkit::spawn_child(&dog, test, "typed-last", &PipeOptions::new());
        let (to_child, _) = down.split();
        TypedSender::<TypedSender<u64>>::from_bytes(to_child)
            .send(tx)
            .expect("forward the typed sender");
        child.wait_ok();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(test, secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, test, "typed-forwarder", &PipeOptions::new());
    let (to_child, _) = main.split();
    let (tx, rx) = ferry::channel::<u64>(64).expect("a typed channel");
    TypedSender::<TypedSender<u64>>::from_bytes(to_child)
        .send(tx)
        .expect("send the typed sender");
    for v in 0..VALUES {
        assert_eq!(rx.recv().expect("a value"), v * 3);
    }
    assert!(rx.recv().is_err(), "the last hop is gone: Disconnected");
    child.wait_ok();
}

/// The parent's side of the tests of messages in flight to a forwarded
/// receiver: starts `role`, hands it the receiving half of a new pipe,
/// and makes the pipe the last holder reports on. Returns the watchdog,
/// the child, the pipe to it, the sender, and the report pipe's two ends
/// (the second to send in flight).
fn hand_receiver_to(
    test: &str,
    role: &str,
) -> (
    ferry_testkit::Watchdog,
    ferry_testkit::ChildGuard,
    Pipe,
    Sender,
    (Pipe, Pipe),
) {
    let dog = ferry_testkit::Watchdog::start(test, secs(60));
    let (child, main) = ferry_testkit::spawn_child(&dog, test, role, &PipeOptions::new());
    let (a, b) = ferry::pipe().expect("pipe");
    let (tx, _a_rx) = a.split();
    let (_b_tx, rx) = b.split();
    let report = ferry::pipe().expect("pipe");
    main.sender()
        .send_with(b"take this receiver", vec![Handle::from(rx)])
        .expect("send the receiver");
    (dog, child, main, tx, report)
}

/// Sends `count` numbered messages from `from`, then the end to report
/// on, all in flight to a receiver about to be forwarded.
fn send_in_flight(tx: &Sender, from: u32, count: u64, report_there: Pipe) {
    send_some(tx, from, count);
    tx.send_with(b"report here", vec![Handle::from(report_there)])
        .expect("send the end to report on");
}

/// The end to report on, from the message `next` gives.
fn report_end(mut msg: Message) -> Pipe {
    assert_eq!(msg.bytes, b"report here");
    msg.pipes.pop().expect("a whole end")
}

/// Messages in flight to the receiver when it is forwarded in
/// [`a_receiver_forwarded_receives_from_its_sender`].
const IN_FLIGHT: u64 = 60;

/// A receiver forwarded with messages on their way to it: the parent
/// keeps the sender and hands the receiver to its child, then sends 60
/// messages (descriptors, pool blocks) and one carrying a whole pipe end,
/// none of them read, and the child forwards the receiver to its own
/// child and exits at once. The records of those messages went to the
/// forwarder, so it took them out of the ring and they went on with the
/// receiver, in its prefix. The last hop receives them all, in order,
/// then everything the parent sends after the forward (directly), reports
/// over the end that came in the prefix, and sees `Disconnected` once the
/// parent drops its sender; every message through a `Select` (its
/// doorbell wakes for the prefix's messages, then the ring's).
#[test]
fn a_receiver_forwarded_receives_from_its_sender() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("rx-forwarder") => {
            let (dog, main) = ferry_testkit::child_pipe("rx-forwarder", secs(60));
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let rx = msg.receivers.pop().expect("a receiver");
            let (_child, down) =
                ferry_testkit::spawn_child(&dog, test, "rx-last", &PipeOptions::new());
            assert_eq!(down.recv().expect("the child's start"), b"ready");
            main.send(b"spawned").expect("say so");
            assert_eq!(main.recv().expect("go"), b"sent");
            down.sender()
                .send_with(b"take this receiver", vec![Handle::from(rx)])
                .expect("forward the receiver, with what is on its way");
            // No destructor runs: the last hop lives on, and what this
            // process sent stays queued for it.
            std::process::exit(0);
        }
        Some("rx-last") => {
            let (_dog, main) = ferry_testkit::child_pipe("rx-last", secs(60));
            main.send(b"ready").expect("ready");
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let rx = msg.receivers.pop().expect("a receiver");
            // Each message received once the receiver's `Select` says one
            // is there: the prefix's first, then the ring's.
            let mut select = Select::new().expect("a select");
            let key = select.add(rx).map_err(|e| e.to_string()).expect("add");
            let mut got = 0;
            let mut next = || {
                got += 1;
                if let Err(e) = select.ready_timeout(Duration::from_secs(20)) {
                    panic!("no wake for message {got}: {e:?}");
                }
                let rx: &Receiver = select.get(key).expect("the receiver");
                rx.recv_with().expect("a message")
            };
            check_some(&mut next, 7, IN_FLIGHT);
            let report = report_end(next());
            check_some(&mut next, 0, ROUNDS);
            let rx: &Receiver = select.get(key).expect("the receiver");
            assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
            report.send(b"received").expect("report");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let (_dog, child, main, tx, (report, report_there)) =
                hand_receiver_to(test, "rx-forwarder");
            assert_eq!(main.recv().expect("spawned"), b"spawned");
            send_in_flight(&tx, 7, IN_FLIGHT, report_there);
            main.send(b"sent").expect("go");
            send_some(&tx, 0, ROUNDS);
            drop(tx);
            assert_eq!(report.recv().expect("the last hop's report"), b"received");
            child.wait_ok();
        }
    }
}

/// A whole pipe end forwarded with messages on their way to it: as
/// [`a_receiver_forwarded_receives_from_its_sender`], for a whole end
/// (its receiving side's prefix goes between its two `Routed` records).
/// The last holder receives the 60 messages, the end to report on, and
/// the rest in order, answers over the same end (its sending half went
/// too), and sees `Disconnected` once the parent drops its end.
#[test]
fn a_whole_end_forwarded_with_messages_on_their_way_takes_them_along() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("end-forwarder") => {
            let (dog, main) = ferry_testkit::child_pipe("end-forwarder", secs(60));
            let end = take_pipe(&main);
            let (_child, down) =
                ferry_testkit::spawn_child(&dog, test, "end-last", &PipeOptions::new());
            assert_eq!(down.recv().expect("the child's start"), b"ready");
            main.send(b"spawned").expect("say so");
            assert_eq!(main.recv().expect("go"), b"sent");
            down.sender()
                .send_with(b"take this end", vec![Handle::from(end)])
                .expect("forward the end, with what is on its way");
            std::process::exit(0);
        }
        Some("end-last") => {
            let (_dog, main) = ferry_testkit::child_pipe("end-last", secs(60));
            main.send(b"ready").expect("ready");
            let end = take_pipe(&main);
            check_some(
                &mut || end.receiver().recv_with().expect("a message"),
                7,
                IN_FLIGHT,
            );
            let report = report_end(end.receiver().recv_with().expect("the end to report on"));
            end.send(b"got them").expect("answer over the end");
            check_some(
                &mut || end.receiver().recv_with().expect("a message"),
                0,
                ROUNDS,
            );
            assert!(matches!(end.recv(), Err(RecvError::Disconnected)));
            report.send(b"received").expect("report");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let (child, main) =
                ferry_testkit::spawn_child(&dog, test, "end-forwarder", &PipeOptions::new());
            let (here, there) = ferry::pipe().expect("pipe");
            let (report, report_there) = ferry::pipe().expect("pipe");
            main.sender()
                .send_with(b"take this end", vec![Handle::from(there)])
                .expect("send the end");
            assert_eq!(main.recv().expect("spawned"), b"spawned");
            send_in_flight(here.sender(), 7, IN_FLIGHT, report_there);
            main.send(b"sent").expect("go");
            assert_eq!(here.recv().expect("the answer"), b"got them");
            send_some(here.sender(), 0, ROUNDS);
            drop(here);
            assert_eq!(report.recv().expect("the last hop's report"), b"received");
            child.wait_ok();
        }
    }
}

/// Messages per batch in [`a_receiver_forwarded_twice_unread_takes_its_prefix_along`].
const BATCH: u64 = 20;

/// A receiver forwarded twice without reading, messages streaming to it
/// all the while: the parent sends a batch (with descriptors, and a pipe
/// end to report on) to the receiver its child holds, which forwards it
/// unread to a grandchild and exits; a second batch goes to the
/// grandchild, which also forwards it unread (its prefix from the first
/// forward, then its ring) to a great-grandchild and exits; a third batch
/// races that forward. The last holder receives the three batches in
/// order, then `Disconnected`.
#[test]
fn a_receiver_forwarded_twice_unread_takes_its_prefix_along() {
    let test = this_test!();
    let take_rx = |main: &Pipe| {
        let mut msg = main.receiver().recv_with().expect("the receiver");
        msg.receivers.pop().expect("a receiver")
    };
    match ferry_testkit::role().as_deref() {
        Some("first") => {
            let (dog, main) = ferry_testkit::child_pipe("first", secs(60));
            let rx = take_rx(&main);
            let (_child, down) =
                ferry_testkit::spawn_child(&dog, test, "second", &PipeOptions::new());
            assert_eq!(down.recv().expect("the child's start"), b"ready");
            assert_eq!(main.recv().expect("go"), b"sent");
            down.sender()
                .send_with(b"take this receiver", vec![Handle::from(rx)])
                .expect("forward the receiver unread");
            main.send(b"forwarded").expect("say so");
            std::process::exit(0);
        }
        Some("second") => {
            let (dog, main) = ferry_testkit::child_pipe("second", secs(60));
            main.send(b"ready").expect("ready");
            let rx = take_rx(&main);
            let (_child, down) =
                ferry_testkit::spawn_child(&dog, test, "last", &PipeOptions::new());
            assert_eq!(down.recv().expect("the child's start"), b"ready");
            // The second batch arrives meanwhile, unread.
            std::thread::sleep(Duration::from_millis(200));
            down.sender()
                .send_with(b"take this receiver", vec![Handle::from(rx)])
                .expect("forward the receiver unread again");
            std::process::exit(0);
        }
        Some("last") => {
            let (_dog, main) = ferry_testkit::child_pipe("last", secs(60));
            main.send(b"ready").expect("ready");
            let rx = take_rx(&main);
            check_some(&mut || rx.recv_with().expect("a message"), 7, BATCH);
            let report = report_end(rx.recv_with().expect("the end to report on"));
            report.send(b"holding").expect("say so");
            check_some(&mut || rx.recv_with().expect("a message"), 8, BATCH);
            check_some(&mut || rx.recv_with().expect("a message"), 9, BATCH);
            assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
            report.send(b"received").expect("report");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let (_dog, child, main, tx, (report, report_there)) = hand_receiver_to(test, "first");
            send_in_flight(&tx, 7, BATCH, report_there);
            main.send(b"sent").expect("go");
            assert_eq!(main.recv().expect("forwarded"), b"forwarded");
            send_some(&tx, 8, BATCH);
            std::thread::sleep(Duration::from_millis(150));
            send_some(&tx, 9, BATCH);
            // Dropped once the receiver has come to its last holder (a
            // receiver whose sender has gone is not sent on).
            assert_eq!(report.recv().expect("the last holder's word"), b"holding");
            drop(tx);
            assert_eq!(
                report.recv().expect("the last holder's report"),
                b"received"
            );
            child.wait_ok();
        }
    }
}

/// Takes the one whole pipe end a message on `main` carries.
fn take_pipe(main: &Pipe) -> Pipe {
    let mut msg = main.receiver().recv_with().expect("a pipe end");
    assert_eq!(msg.pipes.len(), 1, "one whole end");
    msg.pipes.pop().expect("a pipe end")
}

/// Whole pipe ends: the two ends of one pipe go to two processes (the
/// second forwarded, its twin already in the first), which then talk
/// directly; and a whole end whose twin stays here is forwarded on by the
/// first to the second, exits at once, and this process and the second
/// talk directly, descriptors and pool blocks both ways, until the second
/// drops its end.
#[test]
fn whole_ends_go_to_two_processes_and_on() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("whole-b") => {
            let (_dog, main) = ferry_testkit::child_pipe("whole-b", secs(60));
            let x = take_pipe(&main);
            send_some(x.sender(), 3, 10);
            receive_some(&x, 4, 10);
            let b = take_pipe(&main);
            x.sender()
                .send_with(b"take this end", vec![Handle::from(b)])
                .expect("forward the whole end");
            // Gone at once: nothing passes through this process.
        }
        Some("whole-c") => {
            let (_dog, main) = ferry_testkit::child_pipe("whole-c", secs(60));
            let y = take_pipe(&main);
            receive_some(&y, 3, 10);
            send_some(y.sender(), 4, 10);
            let b = take_pipe(&y);
            receive_some(&b, 1, ROUNDS);
            send_some(b.sender(), 2, ROUNDS);
            assert_eq!(b.recv().expect("the last word"), b"done");
            drop(b);
            main.send(b"dropped").expect("report");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let (child_b, main_b) =
                ferry_testkit::spawn_child(&dog, test, "whole-b", &PipeOptions::new());
            let (child_c, main_c) =
                ferry_testkit::spawn_child(&dog, test, "whole-c", &PipeOptions::new());
            let (x, y) = ferry::pipe().expect("pipe");
            main_b.sender().send_with(b"x", vec![x]).expect("x to b");
            main_c
                .sender()
                .send_with(b"y", vec![y])
                .expect("y to c, its twin in b");
            let (a, b) = ferry::pipe().expect("pipe");
            main_b.sender().send_with(b"b", vec![b]).expect("b to b");
            child_b.wait_ok();
            send_some(a.sender(), 1, ROUNDS);
            receive_some(&a, 2, ROUNDS);
            a.send(b"done").expect("the last word");
            assert_eq!(main_c.recv().expect("c's report"), b"dropped");
            assert!(matches!(a.recv(), Err(RecvError::Disconnected)));
            child_c.wait_ok();
        }
    }
}

/// Pipes of [`both_ends_of_three_pipes_swapped_at_once_a_hundred_times`].
const PAIRS: usize = 3;
/// Its swaps.
const SWAPS: u64 = 100;

/// A socket pair's far end, carrying `n` (the descriptor every numbered
/// message takes along).
fn numbered_fd(n: u64) -> OwnedFd {
    let (mut mine, theirs) = UnixStream::pair().expect("socket pair");
    mine.write_all(&n.to_le_bytes()).expect("write the number");
    OwnedFd::from(theirs)
}

/// The number a socket from [`numbered_fd`] carries.
fn number_of(fd: OwnedFd) -> u64 {
    let mut number = [0u8; 8];
    UnixStream::from(fd)
        .read_exact(&mut number)
        .expect("read the number");
    u64::from_le_bytes(number)
}

/// One side of the swaps: each round, a message with a descriptor each way
/// over every pipe (sent, then the other side's read), then every end held
/// here goes to the other process in one message with a descriptor, sent
/// without waiting for the other side's, which crosses it; its ends are
/// the ones held next. Returns the descriptor count half way.
fn swap_rounds(main: &Pipe, mut ends: Vec<Pipe>, me: u8) -> usize {
    let mut half_way = 0;
    for round in 0..SWAPS {
        for (k, end) in ends.iter().enumerate() {
            end.sender()
                .send_with(&[me, k as u8], vec![numbered_fd(round)])
                .unwrap_or_else(|e| panic!("round {round}: send on pipe {k}: {e}"));
        }
        for (k, end) in ends.iter().enumerate() {
            let mut msg = end
                .receiver()
                .recv_with()
                .unwrap_or_else(|e| panic!("round {round}: receive on pipe {k}: {e}"));
            assert_eq!(msg.bytes, [1 - me, k as u8], "round {round}, pipe {k}");
            let fd = msg.fds.pop().expect("its descriptor");
            assert_eq!(number_of(fd), round, "round {round}, pipe {k}");
        }
        let mut handles: Vec<Handle> = ends.drain(..).map(Handle::from).collect();
        handles.push(Handle::from(numbered_fd(round)));
        main.sender()
            .send_with(b"swap", handles)
            .unwrap_or_else(|e| panic!("round {round}: send the ends: {e}"));
        let mut msg = main
            .receiver()
            .recv_with()
            .unwrap_or_else(|e| panic!("round {round}: the other's ends: {e}"));
        assert_eq!(msg.pipes.len(), PAIRS, "round {round}");
        assert_eq!(number_of(msg.fds.pop().expect("a descriptor")), round);
        ends = msg.pipes;
        if round == SWAPS / 2 {
            half_way = ferry_testkit::settled_fd_count();
        }
    }
    // A last exchange on the pipes as they ended up.
    for (k, end) in ends.iter().enumerate() {
        end.send(&[me, k as u8]).expect("the last send");
    }
    for (k, end) in ends.iter().enumerate() {
        assert_eq!(end.recv().expect("the last message"), [1 - me, k as u8]);
    }
    half_way
}

/// ipcz's `RoutingStressTest`: the two ends of each of three pipes are
/// swapped between this process and a child a hundred times, both moving
/// at once (each process sends its ends to the other without waiting for
/// the other's, so the two moves of one pipe cross), a descriptor with
/// every move and with every message on the pipes; nothing is lost,
/// duplicated or reordered, and the swaps leave no descriptor behind.
#[test]
fn both_ends_of_three_pipes_swapped_at_once_a_hundred_times() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, main) = ferry_testkit::child_pipe(&role, secs(120));
        let msg = main.receiver().recv_with().expect("the first ends");
        let half_way = swap_rounds(&main, msg.pipes, 1);
        let all = ferry_testkit::settled_fd_count();
        main.send(format!("{half_way} {all}").as_bytes())
            .expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "swapper", &PipeOptions::new());
    let (mine, theirs): (Vec<Pipe>, Vec<Pipe>) =
        (0..PAIRS).map(|_| ferry::pipe().expect("pipe")).unzip();
    main.sender()
        .send_with(b"yours", theirs.into_iter().map(Handle::from).collect())
        .expect("send the first ends");
    let half_way = swap_rounds(&main, mine, 0);
    let all = ferry_testkit::settled_fd_count();
    let report = String::from_utf8(main.recv().expect("the child's counts")).expect("text");
    let (child_half, child_all) = report.split_once(' ').expect("two counts");
    let (child_half, child_all): (usize, usize) = (
        child_half.parse().expect("a count"),
        child_all.parse().expect("a count"),
    );
    assert!(
        all <= half_way + 2 && child_all <= child_half + 2,
        "descriptors grew with swaps: here {half_way} half way, {all} after; the child {child_half}, {child_all}"
    );
    child.wait_ok();
}

/// Messages each sender of the clone-ring tests sends before the receiver
/// moves, and after.
const RING_BEFORE: u32 = 20;
const RING_AFTER: u32 = 200;

/// A message of the clone-ring tests: `[from, seq (4 bytes LE)]`, with a
/// numbered descriptor on every even `seq`.
fn send_ring_message(tx: &Sender, from: u8, seq: u32) {
    let mut bytes = vec![from];
    bytes.extend_from_slice(&seq.to_le_bytes());
    match seq % 2 {
        0 => tx.send_with(&bytes, vec![numbered_fd(u64::from(seq))]),
        _ => tx.send(&bytes).map_err(|e| ferry::SendWithError {
            error: e,
            handles: Vec::new(),
        }),
    }
    .unwrap_or_else(|e| panic!("send {seq} from {from}: {:?}", e.error));
}

/// The receiver's side: every message until `Disconnected`, each
/// sender's in order from `first[from]` (with its descriptor), as a
/// report of where each sender ended.
fn receive_ring_messages(rx: &Receiver, first: [u32; 3]) -> String {
    let mut next = first;
    loop {
        let mut msg = match rx.recv_with() {
            Ok(msg) => msg,
            Err(RecvError::Disconnected) => break,
            Err(e) => panic!("receive: {e:?} after {next:?}"),
        };
        let from = usize::from(msg.bytes[0]);
        let seq = u32::from_le_bytes(msg.bytes[1..5].try_into().unwrap());
        assert_eq!(seq, next[from], "sender {from} out of order");
        if seq % 2 == 0 {
            let fd = msg.fds.pop().expect("the descriptor");
            assert_eq!(
                number_of(fd),
                u64::from(seq),
                "descriptor of {seq} from {from}"
            );
        }
        next[from] += 1;
    }
    format!("{next:?}")
}

/// A receiver reading the rings of its sender's clones in two other
/// processes is sent to a third, with messages carrying descriptors
/// unread in every ring: its own ring and each clone's go with it, and the
/// new holder receives every sender's messages, each in order, then
/// `Disconnected` once the last sender anywhere is gone. With
/// `attached_here`, the clones' rings were attached here before (this
/// process read a message from each); otherwise their `Attach` frames are
/// still unread in the receiver's ring when it goes. With `sender_away`,
/// the original sender is in a fourth process (the receiver is forwarded);
/// otherwise it stays here.
/// With `hops` more than 0, the reader sends the receiver on at once,
/// unread, and so on `hops` times.
fn clone_rings_travel(test: &str, attached_here: bool, sender_away: bool, hops: u8) {
    match ferry_testkit::role().as_deref() {
        Some(role) if role.starts_with("clone") => {
            let (_dog, main) = ferry_testkit::child_pipe(role, secs(60));
            let mut msg = main.receiver().recv_with().expect("a sender");
            let from = msg.bytes[0];
            let tx = msg.senders.pop().expect("a sender");
            let hello = msg.bytes[1] == 1;
            let mut seq = 0;
            if hello {
                // A first message, which the parent reads: the ring is
                // attached there.
                tx.send(&[from, 0, 0, 0, 0]).expect("hello");
                seq = 1;
                main.send(b"hello").expect("say so");
                assert_eq!(main.recv().expect("more"), b"more");
            }
            for _ in 0..RING_BEFORE {
                send_ring_message(&tx, from, seq);
                seq += 1;
            }
            main.send(b"sent").expect("say so");
            assert_eq!(main.recv().expect("go"), b"go");
            for _ in 0..RING_AFTER {
                send_ring_message(&tx, from, seq);
                seq += 1;
            }
        }
        Some(role) if role.starts_with("reader") => {
            let (dog, main) = ferry_testkit::child_pipe(role, secs(60));
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let hello = u32::from(msg.bytes[0]);
            let first: [u32; 3] = [u32::from(msg.bytes[1]), hello, hello];
            let rx = msg.receivers.pop().expect("a receiver");
            let report = match msg.bytes[2] {
                // Sent on at once, unread, to a reader of this one's own.
                0 => {
                    main.send(b"have it").expect("say so");
                    receive_ring_messages(&rx, first)
                }
                hops => {
                    let next = format!("reader{hops}");
                    let (child, to_child) =
                        ferry_testkit::spawn_child(&dog, test, &next, &PipeOptions::new());
                    to_child
                        .sender()
                        .send_with(&[msg.bytes[0], msg.bytes[1], hops - 1], vec![rx])
                        .expect("the receiver goes on, with its clones' rings");
                    assert_eq!(to_child.recv().expect("have it"), b"have it");
                    main.send(b"have it").expect("say so");
                    let report = to_child.recv().expect("the report");
                    child.wait_ok();
                    String::from_utf8(report).unwrap()
                }
            };
            main.send(report.as_bytes()).expect("report");
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let hello = u8::from(attached_here);
            let (tx, rx) = ferry::bytes::channel(1024).expect("channel");
            let mut senders = Vec::new();
            let send_to = |senders: &mut Vec<_>, id: u8, end: Sender| {
                let role = format!("clone{id}");
                let (child, main) =
                    ferry_testkit::spawn_child(&dog, test, &role, &PipeOptions::new());
                let from = id % 3;
                main.sender()
                    .send_with(&[from, hello], vec![end])
                    .expect("send a sender");
                senders.push((child, main));
            };
            send_to(&mut senders, 1, tx.clone());
            send_to(&mut senders, 2, tx.clone());
            let hellos = |senders: &[(ferry_testkit::ChildGuard, Pipe)], count| {
                for (_, main) in &senders[senders.len() - count..] {
                    assert_eq!(main.recv().expect("hello"), b"hello");
                }
                for _ in 0..count {
                    let msg = rx.recv().expect("a hello");
                    assert_eq!(&msg[1..], [0, 0, 0, 0], "a hello");
                }
            };
            if attached_here {
                hellos(&senders, 2);
            }
            // The original stays here, or (its clones gone, and the rings
            // they left queued here taken in by the receives above) goes
            // too, as sender 0.
            let tx = match sender_away {
                true => {
                    send_to(&mut senders, 3, tx);
                    if attached_here {
                        hellos(&senders, 1);
                    }
                    None
                }
                false => Some(tx),
            };
            if attached_here {
                for (_, main) in &senders {
                    main.send(b"more").expect("more");
                }
            }
            for (_, main) in &senders {
                assert_eq!(main.recv().expect("sent"), b"sent");
            }
            let (reader, to_reader) =
                ferry_testkit::spawn_child(&dog, test, "reader0", &PipeOptions::new());
            let first_own = match sender_away {
                true => hello,
                false => 0,
            };
            to_reader
                .sender()
                .send_with(&[hello, first_own, hops], vec![Handle::from(rx)])
                .expect("the receiver goes, with its clones' rings");
            assert_eq!(to_reader.recv().expect("have it"), b"have it");
            for (_, main) in &senders {
                main.send(b"go").expect("go");
            }
            if let Some(tx) = tx {
                for seq in 0..RING_BEFORE + RING_AFTER {
                    send_ring_message(&tx, 0, seq);
                }
            }
            for (child, _) in senders {
                child.wait_ok();
            }
            let end = u32::from(hello) + RING_BEFORE + RING_AFTER;
            let own = u32::from(first_own) + RING_BEFORE + RING_AFTER;
            let report = String::from_utf8(to_reader.recv().expect("the report")).unwrap();
            assert_eq!(report, format!("{:?}", [own, end, end]));
            reader.wait_ok();
        }
    }
}

#[test]
fn a_receiver_reading_clones_rings_travels_with_them() {
    clone_rings_travel(this_test!(), true, false, 0);
}

#[test]
fn a_receiver_with_clones_attach_frames_unread_travels_with_them() {
    clone_rings_travel(this_test!(), false, false, 0);
}

#[test]
fn a_forwarded_receiver_reading_clones_rings_travels_with_them() {
    clone_rings_travel(this_test!(), true, true, 0);
}

#[test]
fn a_receiver_reading_clones_rings_forwarded_twice_unread_keeps_them() {
    clone_rings_travel(this_test!(), true, true, 2);
}
