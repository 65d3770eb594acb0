//! `SIGKILL` of the child: blocked and later calls return `Disconnected`
//! within the detection bound (100 ms specified; asserted generously, and
//! printed), after every message the child fully committed; a half-written
//! message is never delivered.
//!
//! The tests take [`ferry_testkit::serial`] so each measures latency alone.

use std::io::{BufRead, BufReader};
use std::thread;
use std::time::{Duration, Instant};

use ferry::{Pipe, PipeOptions, RecvError, SendError, Wait};
use ferry_testkit::{ChildGuard, XorShift, secs, this_test};

/// What the tests assert of the time from `SIGKILL` to `Disconnected`.
const BOUND: Duration = Duration::from_secs(1);
/// How long a test lets a blocking call settle before the kill.
const SETTLE: Duration = Duration::from_millis(150);

/// A child that announces itself and then sleeps until it is killed.
fn sleeper() {
    let (_dog, pipe) = ferry_testkit::child_pipe("sleeper", secs(30));
    pipe.send(b"ready").expect("ready");
    thread::sleep(secs(60));
}

/// Kills `child` after `SETTLE` from another thread while `blocked` runs on
/// this one; returns what `blocked` returned and how long after the kill.
fn kill_during<R: Send>(child: &mut ChildGuard, blocked: impl FnOnce() -> R) -> (R, Duration) {
    thread::scope(|s| {
        let killer = s.spawn(|| {
            thread::sleep(SETTLE);
            let at = Instant::now();
            child.kill();
            at
        });
        let result = blocked();
        let done = Instant::now();
        let killed_at = killer.join().expect("killer thread");
        (result, done.saturating_duration_since(killed_at))
    })
}

/// Every later call on a pipe whose peer is gone fails at once.
fn assert_all_calls_disconnected(pipe: &Pipe) {
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
    assert!(matches!(
        pipe.receiver().try_recv(),
        Err(ferry::TryRecvError::Disconnected)
    ));
    let started = Instant::now();
    assert!(matches!(
        pipe.receiver().recv_timeout(secs(5)),
        Err(ferry::RecvTimeoutError::Disconnected)
    ));
    assert!(
        started.elapsed() < BOUND,
        "recv_timeout waited on a dead peer"
    );
    assert!(matches!(pipe.send(b"x"), Err(SendError::Disconnected)));
    assert!(matches!(
        pipe.sender().try_send(b"x"),
        Err(ferry::TrySendError::Disconnected)
    ));
    assert!(matches!(
        pipe.sender().send_timeout(b"x", secs(5)),
        Err(ferry::SendTimeoutError::Disconnected)
    ));
    assert!(matches!(
        pipe.send(&vec![7; 1 << 20]),
        Err(SendError::Disconnected)
    ));
}

/// The parent is asleep in `recv` (or `recv_timeout`) when the child is
/// killed, for each wait strategy.
#[test]
fn sigkill_wakes_a_blocked_recv() {
    if ferry_testkit::role().is_some() {
        return sleeper();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    for wait in [Wait::Sleep, Wait::Adaptive, Wait::Spin] {
        for timed in [false, true] {
            let options = PipeOptions::new().wait(wait);
            let (mut child, pipe) =
                ferry_testkit::spawn_child(&dog, this_test!(), "sleeper", &options);
            assert_eq!(pipe.recv().expect("ready"), b"ready");
            let (result, latency) = kill_during(&mut child, || {
                if timed {
                    pipe.receiver().recv_timeout(secs(10))
                } else {
                    pipe.recv().map_err(Into::into)
                }
            });
            let call = if timed { "recv_timeout" } else { "recv" };
            eprintln!("{wait:?} {call}: Disconnected {latency:?} after SIGKILL");
            assert!(
                matches!(result, Err(ferry::RecvTimeoutError::Disconnected)),
                "{wait:?} {call}: {result:?}"
            );
            assert!(
                latency < BOUND,
                "{wait:?} {call}: {latency:?} after SIGKILL"
            );
            assert_all_calls_disconnected(&pipe);
            assert!(!child.wait().success(), "the child was killed");
        }
    }
}

/// The same for a pipe whose end was moved to the child, not the one the
/// child was spawned with.
#[test]
fn sigkill_wakes_a_blocked_recv_on_a_moved_pipe() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("holder", secs(30));
        let moved = main.receiver().recv_with().expect("a pipe").pipes;
        moved[0].send(b"ready").expect("ready");
        thread::sleep(secs(60));
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (mut child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "holder", &PipeOptions::new());
    let (a, b) = PipeOptions::new().wait(Wait::Sleep).pipe().expect("pipe");
    main.sender()
        .send_with(b"pipe", vec![b])
        .expect("send_with");
    assert_eq!(a.recv().expect("ready"), b"ready");
    let (result, latency) = kill_during(&mut child, || a.recv());
    eprintln!("moved pipe: Disconnected {latency:?} after SIGKILL");
    assert!(matches!(result, Err(RecvError::Disconnected)), "{result:?}");
    assert!(latency < BOUND, "{latency:?} after SIGKILL");
    assert_all_calls_disconnected(&a);
    assert_all_calls_disconnected(&main);
    child.wait();
}

/// The parent is blocked in `send` on a full pipe when the child is killed.
#[test]
fn sigkill_wakes_a_blocked_send() {
    if ferry_testkit::role().is_some() {
        return sleeper();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    for wait in [Wait::Sleep, Wait::Adaptive, Wait::Spin] {
        let options = PipeOptions::new().ring_size(4096).wait(wait);
        let (mut child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "sleeper", &options);
        assert_eq!(pipe.recv().expect("ready"), b"ready");
        while pipe.sender().try_send(&[1; 100]).is_ok() {}
        let (result, latency) = kill_during(&mut child, || pipe.send(&[2; 100]));
        eprintln!("{wait:?} send: Disconnected {latency:?} after SIGKILL");
        assert!(
            matches!(result, Err(SendError::Disconnected)),
            "{wait:?}: {result:?}"
        );
        assert!(latency < BOUND, "{wait:?}: {latency:?} after SIGKILL");
        child.wait();
    }
}

/// Message `seq` of a stream, `len` bytes: a slice of a random pool at a
/// per-message offset, stamped with `seq`.
fn message(pool: &[u8], seq: u64, len: usize) -> Vec<u8> {
    let offset = (seq as usize * 4099) % (pool.len() - len + 1);
    let mut msg = pool[offset..offset + len].to_vec();
    let n = len.min(8);
    msg[..n].copy_from_slice(&seq.to_le_bytes()[..n]);
    msg
}

fn pool() -> Vec<u8> {
    XorShift::new(0xdead).bytes(3 << 20)
}

/// How the child's large messages travel: in pieces through the ring, or
/// out of line in a pool block with a descriptor in the ring (the default
/// between processes for 64 KiB and up).
#[derive(Debug, Clone, Copy)]
enum Path {
    Pieces,
    OutOfLine,
}

impl Path {
    fn role(self) -> &'static str {
        match self {
            Self::Pieces => "pieces",
            Self::OutOfLine => "out-of-line",
        }
    }

    fn from_role(role: &str) -> Self {
        match role {
            "pieces" => Self::Pieces,
            "out-of-line" => Self::OutOfLine,
            other => panic!("unknown role {other}"),
        }
    }

    /// In the child: the pipe from the parent, sending large messages this
    /// way.
    fn child_pipe(self) -> (ferry_testkit::Watchdog, Pipe) {
        let (dog, pipe) = ferry_testkit::child_pipe(self.role(), secs(30));
        if let Self::Pieces = self {
            pipe.sender().set_out_of_line(usize::MAX);
        }
        (dog, pipe)
    }
}

/// Sizes the child commits before it begins the 1 MiB message; together
/// they fit the 64 KiB ring, and one of them travels in pieces (the largest
/// single frame there is 32,764 bytes).
const COMMITTED: [usize; 5] = [0, 1, 1000, 40_000, 5_000];
const BIG: usize = 1 << 20;
const MARK: &str = "ferry-test: sending the big message after";

/// The child commits some messages, then starts a 1 MiB message that
/// cannot complete while the parent does not read, and is killed:
/// - in pieces: the first piece is in the 64 KiB ring, the rest cannot be;
/// - out of line: the block is written, but the child first filled the
///   ring to the last byte (with 100-byte, then empty messages), so the
///   descriptor naming the block cannot be.
///
/// The parent then gets every committed message and `Disconnected`, never
/// any of the big one.
#[test]
fn sigkill_mid_message_delivers_only_committed_messages() {
    if let Some(role) = ferry_testkit::role() {
        return committer(Path::from_role(&role));
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    for path in [Path::Pieces, Path::OutOfLine] {
        let mut cmd = ferry_testkit::child_command(this_test!(), path.role());
        cmd.stdout(std::process::Stdio::piped());
        let options = PipeOptions::new().ring_size(64 * 1024);
        let (mut child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &options);
        let lines = BufReader::new(child.take_stdout()).lines();
        // libtest may print "test <name> ... " on the same line first.
        let mark = lines
            .map_while(Result::ok)
            .find_map(|line| Some(line.split_once(MARK)?.1.to_string()))
            .unwrap_or_else(|| panic!("{path:?}: the child never reached the big message"));
        let counts: Vec<usize> = mark
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        let (fillers, hundreds) = (counts[0], counts[1]);
        // The child is now blocked part way into the big message.
        thread::sleep(Duration::from_millis(300));
        child.kill();
        child.wait();
        let pool = pool();
        let sizes = COMMITTED
            .iter()
            .copied()
            .chain((0..fillers).map(|i| if i < hundreds { 100 } else { 0 }));
        for (seq, len) in sizes.enumerate() {
            let got = pipe
                .recv()
                .unwrap_or_else(|e| panic!("{path:?}: committed message {seq}: {e}"));
            assert_eq!(
                got.len(),
                len,
                "{path:?}: length of committed message {seq}"
            );
            assert!(
                got == message(&pool, seq as u64, len),
                "{path:?}: message {seq}"
            );
        }
        match pipe.recv() {
            Err(RecvError::Disconnected) => {}
            Ok(msg) => panic!("{path:?}: a {}-byte message after the last one", msg.len()),
            Err(e) => panic!("{path:?}: {e}"),
        }
        assert_all_calls_disconnected(&pipe);
        eprintln!(
            "{path:?}: {} committed messages, then Disconnected",
            COMMITTED.len() + fillers
        );
    }
}

fn committer(path: Path) {
    let (_dog, pipe) = path.child_pipe();
    let pool = pool();
    for (seq, &len) in COMMITTED.iter().enumerate() {
        pipe.send(&message(&pool, seq as u64, len)).expect("send");
    }
    let (mut seq, mut hundreds) = (COMMITTED.len() as u64, 0);
    if let Path::OutOfLine = path {
        for len in [100, 0] {
            while pipe.sender().try_send(&message(&pool, seq, len)).is_ok() {
                seq += 1;
                hundreds += usize::from(len == 100);
            }
        }
    }
    let fillers = seq as usize - COMMITTED.len();
    println!("{MARK} {fillers} {hundreds}");
    pipe.send(&message(&pool, seq, BIG))
        .expect("the parent never reads this");
    unreachable!("the big message cannot have gone through");
}

/// The child streams 1 MiB messages (in pieces through a 64 KiB ring, or
/// out of line) while the parent reads them, and is killed at a random
/// moment. Every message the parent gets is whole and in order, and then
/// it gets `Disconnected`.
#[test]
fn sigkill_while_streaming_large_messages() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, pipe) = Path::from_role(&role).child_pipe();
        let pool = pool();
        for seq in 0.. {
            if pipe.send(&message(&pool, seq, BIG)).is_err() {
                break;
            }
        }
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let pool = pool();
    let mut rng = XorShift::new(42);
    for round in 0..8 {
        let path = [Path::Pieces, Path::OutOfLine][round % 2];
        let options = PipeOptions::new().ring_size(64 * 1024);
        let (mut child, pipe) =
            ferry_testkit::spawn_child(&dog, this_test!(), path.role(), &options);
        // Wait for a first message, so the stream is flowing.
        let mut buf = Vec::new();
        pipe.receiver().recv_into(&mut buf).expect("first message");
        assert!(buf == message(&pool, 0, BIG), "round {round}: message 0");
        let delay = Duration::from_micros(rng.upto(30_000) as u64);
        let received = thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut seq = 1;
                loop {
                    match pipe.receiver().recv_into(&mut buf) {
                        Ok(()) => {
                            assert_eq!(buf.len(), BIG, "round {round}: length of {seq}");
                            assert!(buf == message(&pool, seq, BIG), "round {round}: {seq}");
                            seq += 1;
                        }
                        Err(RecvError::Disconnected) => return seq,
                        Err(e) => panic!("round {round}: message {seq}: {e}"),
                    }
                }
            });
            thread::sleep(delay);
            child.kill();
            reader.join().expect("reader thread")
        });
        eprintln!("round {round}, {path:?}: killed after {delay:?}, {received} whole messages");
        assert_all_calls_disconnected(&pipe);
        child.wait();
    }
}
