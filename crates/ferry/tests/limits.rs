//! Bounds: a full pipe (`try_send` gives `Full`, `send_timeout` gives
//! `Timeout`, and nothing is lost or half-delivered) and an oversize message
//! (`TooLarge`, with nothing sent).

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry::{
    Pipe, PipeOptions, RecvError, SendError, SendTimeoutError, TryRecvError, TrySendError, Wait,
};
use ferry_testkit::{msg_u64, secs, this_test, u64_msg};

/// Message `seq` of a stream: 1 to 2,000 bytes, stamped with `seq`.
fn small(seq: u64) -> Vec<u8> {
    let len = 8 + (seq as usize * 131) % 1993;
    let mut msg = vec![(seq % 253) as u8; len];
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg
}

/// A message too large to fit a small ring at once, so it travels in
/// pieces; it is never meant to arrive.
fn doomed() -> Vec<u8> {
    vec![0xdd; 20_000]
}

const SHORT: Duration = Duration::from_millis(50);

fn assert_timed_out(result: Result<(), SendTimeoutError>, started: Instant, what: &str) {
    assert!(
        matches!(result, Err(SendTimeoutError::Timeout)),
        "{what}: {result:?}"
    );
    assert!(started.elapsed() >= SHORT, "{what}: gave up early");
}

/// One process: fill the pipe, be refused, drain, and send again.
#[test]
fn full_pipe_in_process() {
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    for wait in [Wait::Sleep, Wait::Adaptive, Wait::Spin] {
        let (a, b) = PipeOptions::new()
            .ring_size(4096)
            .wait(wait)
            .pipe()
            .expect("pipe");
        // A message in pieces, refused part way: nothing of it arrives.
        assert!(matches!(
            a.sender().try_send(&doomed()),
            Err(TrySendError::Full)
        ));
        let mut sent = 0;
        while a.sender().try_send(&small(sent)).is_ok() {
            sent += 1;
        }
        assert!(sent > 0, "{wait:?}: nothing fit an empty ring");
        assert!(matches!(
            a.sender().try_send(&small(sent)),
            Err(TrySendError::Full)
        ));
        let started = Instant::now();
        assert_timed_out(
            a.sender().send_timeout(&small(sent), SHORT),
            started,
            "small",
        );
        let started = Instant::now();
        assert_timed_out(
            a.sender().send_timeout(&doomed(), SHORT),
            started,
            "in pieces",
        );
        for seq in 0..sent {
            assert_eq!(
                b.receiver().try_recv().expect("queued message"),
                small(seq),
                "{seq}"
            );
        }
        assert!(matches!(b.receiver().try_recv(), Err(TryRecvError::Empty)));
        a.sender()
            .try_send(&small(sent))
            .expect("room after draining");
        a.sender()
            .send_timeout(&small(sent + 1), SHORT)
            .expect("room");
        assert_eq!(b.recv().expect("recv"), small(sent));
        assert_eq!(b.recv().expect("recv"), small(sent + 1));
        assert!(matches!(b.receiver().try_recv(), Err(TryRecvError::Empty)));
    }
    drop(dog);
}

/// Across processes: the parent fills a 16 KiB pipe to a child that does
/// not read, is refused by `try_send` and `send_timeout` (also part way
/// through messages sent in pieces), then tells the child (on its standard
/// input) to drain, and sends more. The child checks it got exactly the
/// accepted messages, in order.
#[test]
fn full_pipe_across_processes() {
    if ferry_testkit::role().is_some() {
        return drainer();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let mut cmd = ferry_testkit::child_command(this_test!(), "drainer");
    cmd.stdin(Stdio::piped());
    let options = PipeOptions::new().ring_size(16 * 1024);
    let (mut child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &options);
    let mut stdin = child.take_stdin();
    assert_eq!(pipe.recv().expect("ready"), b"ready");

    assert!(matches!(
        pipe.sender().try_send(&doomed()),
        Err(TrySendError::Full)
    ));
    let mut sent = 0;
    while pipe.sender().try_send(&small(sent)).is_ok() {
        sent += 1;
    }
    assert!(sent > 0, "nothing fit an empty ring");
    let started = Instant::now();
    assert_timed_out(
        pipe.sender().send_timeout(&small(sent), SHORT),
        started,
        "small",
    );
    let started = Instant::now();
    assert_timed_out(
        pipe.sender().send_timeout(&doomed(), SHORT),
        started,
        "pieces",
    );
    assert!(matches!(
        pipe.sender().try_send(&small(sent)),
        Err(TrySendError::Full)
    ));

    writeln!(stdin, "drain").expect("tell the child to drain");
    // Blocking sends now succeed as the child drains, pieces and all.
    let total = sent + 500;
    for seq in sent..total {
        pipe.send(&small(seq)).expect("send while the child drains");
        if seq % 100 == 0 {
            pipe.send(&[seq as u8; 100_000]).expect("send in pieces");
        }
    }
    pipe.send(b"end").expect("end");
    assert_eq!(
        msg_u64(&pipe.recv().expect("count")),
        total,
        "child's count"
    );
    drop(pipe);
    child.wait_ok();
}

fn drainer() {
    let (_dog, pipe) = ferry_testkit::child_pipe("drainer", secs(30));
    pipe.send(b"ready").expect("ready");
    let mut line = String::new();
    BufReader::new(std::io::stdin())
        .read_line(&mut line)
        .expect("stdin");
    assert_eq!(line.trim(), "drain");
    let mut seq = 0;
    loop {
        let msg = pipe.recv().unwrap_or_else(|e| panic!("message {seq}: {e}"));
        if msg == b"end" {
            break;
        }
        if msg.len() == 100_000 {
            assert!(seq > 0 && msg == [(seq - 1) as u8; 100_000], "after {seq}");
            continue;
        }
        assert!(msg == small(seq), "message {seq} ({} bytes)", msg.len());
        seq += 1;
    }
    pipe.send(&u64_msg(seq)).expect("count");
}

/// A message one byte over the limit is refused by every send call, with
/// nothing sent; the next message arrives as the first.
#[test]
fn oversize_message_in_process() {
    let (a, b) = PipeOptions::new().max_message(1000).pipe().expect("pipe");
    assert_eq!(a.sender().max_message(), 1000);
    assert_eq!(b.sender().max_message(), 1000);
    assert_too_large(&a, 1000);
    a.send(&[1; 1000]).expect("exactly the limit");
    assert_eq!(b.recv().expect("recv"), [1; 1000]);
    assert!(matches!(b.receiver().try_recv(), Err(TryRecvError::Empty)));
}

/// Every send call refuses `limit + 1` bytes.
fn assert_too_large(pipe: &Pipe, limit: usize) {
    let over = vec![0; limit + 1];
    let too_large = |r: Result<(), SendError>| matches!(r, Err(SendError::TooLarge { len, limit: l }) if len == limit + 1 && l == limit);
    assert!(too_large(pipe.send(&over)));
    assert!(
        matches!(pipe.sender().try_send(&over), Err(TrySendError::TooLarge { len, limit: l }) if len == limit + 1 && l == limit)
    );
    assert!(
        matches!(pipe.sender().send_timeout(&over, secs(1)), Err(SendTimeoutError::TooLarge { len, limit: l }) if len == limit + 1 && l == limit)
    );
}

/// The default limit is 256 MiB. The oversize buffer is never touched, so
/// it costs no memory.
#[test]
fn oversize_message_default_limit() {
    let (a, b) = ferry::pipe().expect("pipe");
    const LIMIT: usize = 256 << 20;
    assert_eq!(a.sender().max_message(), LIMIT);
    assert_too_large(&a, LIMIT);
    a.send(b"next").expect("send");
    assert_eq!(b.recv().expect("recv"), b"next");
}

/// Across processes, with pipe ends attached too: refused, nothing sent,
/// the pipe ends handed back, and the child receives the next message.
#[test]
fn oversize_message_across_processes() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("receiver", secs(30));
        let msg = pipe.receiver().recv_with().expect("recv");
        assert_eq!(msg.bytes, b"next");
        assert_eq!(msg.pipes.len(), 1);
        msg.pipes[0].send(b"hello").expect("send");
        assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let options = PipeOptions::new().max_message(1000);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "receiver", &options);
    assert_too_large(&pipe, 1000);
    let (a, b) = ferry::pipe().expect("pipe");
    let refused = pipe
        .sender()
        .send_with(&[0; 1001], vec![b])
        .expect_err("oversize with a pipe");
    assert!(
        matches!(
            refused.error,
            SendError::TooLarge {
                len: 1001,
                limit: 1000
            }
        ),
        "{refused}"
    );
    assert_eq!(refused.handles.len(), 1, "the pipe end handed back");
    pipe.sender()
        .send_with(b"next", refused.handles)
        .expect("send_with");
    assert_eq!(a.recv().expect("recv"), b"hello");
    drop(pipe);
    child.wait_ok();
}

/// The limit set with `PipeOptions::max_message` binds "either end", so
/// the spawned child's end must refuse what the parent's would not accept.
#[test]
fn spawned_child_end_keeps_the_options() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("child", secs(30));
        let report = format!("{} {:?}", pipe.sender().max_message(), pipe.sender().wait());
        pipe.send(report.as_bytes()).expect("report");
        let over = pipe.send(&[0; 1001]);
        assert!(
            matches!(over, Err(SendError::TooLarge { .. })),
            "child sent 1001 bytes over a 1000-byte pipe: {over:?}"
        );
        pipe.send(b"after").expect("send");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let options = PipeOptions::new().max_message(1000).wait(Wait::Sleep);
    let (mut child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "child", &options);
    let report = pipe.recv().expect("report");
    let after = pipe.recv();
    let status = child.wait();
    assert_eq!(
        String::from_utf8_lossy(&report),
        "1000 Sleep",
        "the child end's limit and wait strategy"
    );
    // The child's end refused the 1001 bytes itself, so the link is intact.
    assert_eq!(after.expect("the message after the refused one"), b"after");
    assert!(status.success(), "child: {status}");
}

const MIB: usize = 1 << 20;

/// A link's pool maps blocks in power-of-two size classes up to its cap.
/// Once blocks of one size fill the cap, all of them free again, a message
/// needing a block of another size must still go through (by reusing or
/// unmapping free blocks, or by the ring), not wait for ever.
#[test]
fn a_full_pool_of_one_block_size_does_not_starve_another() {
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("viewer", secs(30));
        // Holding each view makes the parent map a new block for the next.
        let views: Vec<_> = (0..4)
            .map(|_| pipe.receiver().recv_shared().expect("1 MiB"))
            .collect();
        assert!(views.iter().all(|v| v.is_in_place() && v.len() == MIB));
        drop(views);
        pipe.send(b"released").expect("released");
        let big = pipe.recv().expect("2 MiB");
        pipe.send(&u64_msg(big.len() as u64)).expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let options = PipeOptions::new().pool_cap(4 * MIB);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "viewer", &options);
    for _ in 0..4 {
        pipe.send(&vec![1; MIB]).expect("1 MiB");
    }
    assert_eq!(pipe.recv().expect("released"), b"released");
    let sent = pipe.sender().send_timeout(&vec![2; 2 * MIB], secs(3));
    assert!(
        sent.is_ok(),
        "2 MiB after four freed 1 MiB blocks under a 4 MiB cap: {sent:?}"
    );
    assert_eq!(msg_u64(&pipe.recv().expect("report")), 2 * MIB as u64);
    drop(pipe);
    child.wait_ok();
}

/// With the limit raised past 256 MiB, a message over 256 MiB (the largest
/// pool block) is still a message within the limit, not `TooLarge`.
#[test]
fn a_raised_limit_holds_across_processes() {
    const LEN: usize = (256 << 20) + 1;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("receiver", secs(60));
        assert_eq!(pipe.sender().max_message(), 512 << 20, "the parent's limit");
        let big = pipe.recv().expect("the big message");
        pipe.send(&u64_msg(big.len() as u64)).expect("report");
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().max_message(512 << 20);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "receiver", &options);
    // Zeroed by the allocator and never written: it costs no memory here.
    let sent = pipe.sender().send_timeout(&vec![0; LEN], secs(30));
    assert!(sent.is_ok(), "{LEN} bytes under a 512 MiB limit: {sent:?}");
    assert_eq!(msg_u64(&pipe.recv().expect("report")), LEN as u64);
    drop(pipe);
    child.wait_ok();
}
