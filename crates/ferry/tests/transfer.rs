//! Pipe ends moved between processes over one link (`send_with`).
//!
//! The tests here take [`ferry_testkit::serial`]: one of them counts this
//! process's descriptors, which a test running beside it would disturb.

use ferry::{Pipe, PipeOptions, RecvError, SendError, Wait};
use ferry_testkit::{msg_u64, secs, this_test, u64_msg};

const PIPES: usize = 1000;
/// Pipe ends per message, in turn; one message carries the most allowed.
const BATCHES: [usize; 6] = [1, 2, 5, 13, 40, 253];
/// The child sends a pipe end of its own back for every this many.
const BACK_EVERY: usize = 10;
/// How much the descriptor count of either process may grow, beyond the
/// memory objects kept so ends can be sent on.
const FD_SLACK: usize = 4;
/// The soft descriptor limit both processes of
/// [`thousand_pipes_over_one_link_keep_fds_bounded`] run at: a quarter of
/// it (256) is the most memory objects ferry keeps so that ends may be
/// sent on, far fewer than the pipes.
const LIMIT: u64 = 1024;

/// The soft descriptor limit to set back when dropped (on a panic too:
/// the tests that follow in this process need their room).
struct SoftLimit(Option<u64>);

impl Drop for SoftLimit {
    fn drop(&mut self) {
        if let Some(before) = self.0 {
            set_soft_limit(before);
        }
    }
}

/// Sets this process's soft descriptor limit; returns the one before.
fn set_soft_limit(soft: u64) -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let mut lowered = before;
    lowered.current = Some(soft);
    setrlimit(Resource::Nofile, lowered).expect("set the soft descriptor limit");
    before.current
}

/// Requests on the bootstrap pipe, parent to child.
const BATCH: u8 = b'P';
const FDS: u8 = b'F';
const AGAIN: u8 = b'A';

fn batch_header(first: usize, count: usize) -> Vec<u8> {
    let mut msg = vec![BATCH];
    msg.extend_from_slice(&(first as u64).to_le_bytes());
    msg.extend_from_slice(&(count as u64).to_le_bytes());
    msg
}

fn parse_batch(msg: &[u8]) -> (usize, usize) {
    assert_eq!(msg.len(), 17, "batch header");
    (msg_u64(&msg[1..9]) as usize, msg_u64(&msg[9..]) as usize)
}

/// Options of the `idx`th pipe: mostly small rings, every 100th the
/// default; the three wait strategies in turn.
fn options(idx: usize) -> PipeOptions {
    let capacity = if idx.is_multiple_of(100) {
        256 * 1024
    } else {
        4096
    };
    let wait = [Wait::Sleep, Wait::Adaptive, Wait::Spin][idx % 3];
    PipeOptions::new().ring_size(capacity).wait(wait)
}

fn round_trip(pipe: &Pipe, what: &str) {
    pipe.send(format!("ping {what}").as_bytes())
        .unwrap_or_else(|e| panic!("ping {what}: {e}"));
    let reply = pipe.recv().unwrap_or_else(|e| panic!("pong {what}: {e}"));
    assert_eq!(reply, format!("pong {what}").as_bytes());
}

fn answer(pipe: &Pipe) {
    let msg = pipe.recv().expect("ping");
    let text = String::from_utf8(msg).expect("text ping");
    let what = text.strip_prefix("ping ").expect("a ping");
    pipe.send(format!("pong {what}").as_bytes()).expect("pong");
}

/// Asks the child for its descriptor count.
fn child_fds(main: &Pipe) -> usize {
    main.send(&[FDS]).expect("ask for the child's fd count");
    msg_u64(&main.recv().expect("child's fd count")) as usize
}

/// 1,000 pipe ends moved parent to child over one link (plus 100 moved
/// back), each used for round trips, all alive at once at the end: the
/// descriptors of neither process grow with the number of pipes. Each
/// grows at most by the memory objects kept so ends can be sent on (a
/// quarter of the descriptor limit), however many pipes there are.
#[test]
fn thousand_pipes_over_one_link_keep_fds_bounded() {
    if ferry_testkit::role().is_some() {
        set_soft_limit(LIMIT);
        return holder();
    }
    let _serial = ferry_testkit::serial();
    let _restore = SoftLimit(set_soft_limit(LIMIT));
    let kept = (LIMIT / 4) as usize;
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "holder", &PipeOptions::new());
    // Every end that stays here, in the order the child holds their twins.
    let mut ends: Vec<Pipe> = Vec::new();
    let mut sent = 0;
    let mut baseline = None;
    let mut history = Vec::new();
    for batch in 0.. {
        if sent == PIPES {
            break;
        }
        if batch == 10 {
            // After some pipes have moved, so lazily opened things count.
            baseline = Some((ferry_testkit::fd_count(), child_fds(&main)));
        }
        let count = if batch < 10 {
            1
        } else {
            BATCHES[batch % BATCHES.len()].min(PIPES - sent)
        };
        let (mut here, mut there) = (Vec::new(), Vec::new());
        for idx in sent..sent + count {
            let (a, b) = options(idx).pipe().expect("make a pipe");
            if idx % 7 == 0 {
                // Messages already queued travel with the moved end.
                a.send(format!("early {idx}").as_bytes()).expect("early");
                b.send(format!("early back {idx}").as_bytes())
                    .expect("early");
            }
            here.push(a);
            there.push(b);
        }
        main.sender()
            .send_with(&batch_header(sent, count), there)
            .unwrap_or_else(|e| panic!("send_with of {count} pipes after {sent}: {e}"));
        for (a, idx) in here.into_iter().zip(sent..) {
            if idx % 7 == 0 {
                assert_eq!(
                    a.recv().expect("early back"),
                    format!("early back {idx}").as_bytes()
                );
            }
            round_trip(&a, &idx.to_string());
            if idx % BACK_EVERY == 0 {
                let back = a.receiver().recv_with().expect("a pipe end moved back");
                assert_eq!(back.bytes, b"back");
                assert_eq!(back.pipes.len(), 1);
                let end = back.pipes.into_iter().next().expect("one pipe");
                round_trip(&end, &format!("back {idx}"));
                ends.push(a);
                ends.push(end);
            } else {
                ends.push(a);
            }
        }
        sent += count;
        if let Some(base) = baseline {
            history.push((sent, ferry_testkit::fd_count(), child_fds(&main)));
            let (_, parent, child) = *history.last().expect("just pushed");
            assert!(
                parent <= base.0 + kept + FD_SLACK && child <= base.1 + kept + FD_SLACK,
                "fds grew with pipes: baseline {base:?}, after {sent} pipes parent {parent}, \
                 child {child} (at most {kept} kept regions each)"
            );
        }
    }
    eprintln!("fd counts (pipes, parent, child) from baseline {baseline:?}: {history:?}");
    // The newest end came past the bound: it stays here, and says why.
    let newest = ends.pop().expect("an end");
    let refused = main
        .sender()
        .send_with(b"newest", vec![newest])
        .expect_err("an end past the kept regions");
    assert!(
        matches!(&refused.error, SendError::NotTransferable(why) if why.contains("RLIMIT_NOFILE")),
        "{refused}"
    );
    ends.extend(
        refused
            .handles
            .into_iter()
            .filter_map(ferry::Handle::into_pipe),
    );
    // All 1,100 pipes at once: every ping is out before any pong is read.
    main.send(&[AGAIN]).expect("again");
    for (n, end) in ends.iter().enumerate() {
        end.send(format!("ping again {n}").as_bytes())
            .expect("ping again");
    }
    for (n, end) in ends.iter().enumerate() {
        let reply = end.recv().expect("pong again");
        assert_eq!(reply, format!("pong again {n}").as_bytes());
    }
    // The child drops everything and exits: every end here hears of it.
    drop(main);
    child.wait_ok();
    for (n, end) in ends.iter().enumerate() {
        assert!(matches!(
            end.receiver().try_recv(),
            Err(ferry::TryRecvError::Disconnected)
        ));
        assert!(matches!(end.send(b"x"), Err(SendError::Disconnected)));
        // A blocking receive on a `Spin` end looks for a gone peer only
        // every 20 ms; a sample keeps the test quick.
        if n % 10 == 0 {
            assert!(matches!(end.recv(), Err(RecvError::Disconnected)));
        }
    }
}

/// Takes pipe ends, answers round trips on them, sends some of its own
/// back, and reports its descriptor count when asked.
fn holder() {
    let (_dog, main) = ferry_testkit::child_pipe("holder", secs(60));
    let mut held: Vec<Pipe> = Vec::new();
    loop {
        let msg = match main.receiver().recv_with() {
            Ok(msg) => msg,
            Err(RecvError::Disconnected) => break,
            Err(e) => panic!("holder: {e}"),
        };
        match msg.bytes.first() {
            Some(&BATCH) => {
                let (first, count) = parse_batch(&msg.bytes);
                assert_eq!(msg.pipes.len(), count, "pipes in batch at {first}");
                for (pipe, idx) in msg.pipes.into_iter().zip(first..) {
                    take_pipe(pipe, idx, &mut held);
                }
            }
            // Settled: an end past the kept regions' bound has its
            // descriptor closed by ferry's closer thread, a moment later.
            Some(&FDS) => main
                .send(&u64_msg(ferry_testkit::fd_count() as u64))
                .expect("fd count"),
            Some(&AGAIN) => held.iter().for_each(answer),
            _ => panic!("holder: unknown request {:?}", msg.bytes),
        }
    }
}

fn take_pipe(pipe: Pipe, idx: usize, held: &mut Vec<Pipe>) {
    if idx.is_multiple_of(7) {
        assert_eq!(
            pipe.recv().expect("early"),
            format!("early {idx}").as_bytes()
        );
    }
    answer(&pipe);
    if idx.is_multiple_of(BACK_EVERY) {
        let (mine, theirs) = PipeOptions::new().ring_size(4096).pipe().expect("pipe");
        pipe.sender()
            .send_with(b"back", vec![theirs])
            .expect("send a pipe end back");
        answer(&mine);
        held.push(pipe);
        held.push(mine);
    } else {
        held.push(pipe);
    }
}

/// A child that answers every message on the bootstrap pipe with the
/// number of pipe ends it carried, then a round trip on each of them, and
/// keeps them; `again` asks for one more round trip on every one it keeps.
fn counter() {
    let (_dog, main) = ferry_testkit::child_pipe("counter", secs(30));
    let mut held = Vec::new();
    while let Ok(msg) = main.receiver().recv_with() {
        if msg.bytes == b"again" {
            held.iter().for_each(answer);
            continue;
        }
        main.send(&u64_msg(msg.pipes.len() as u64)).expect("count");
        msg.pipes.iter().for_each(answer);
        held.extend(msg.pipes);
    }
}

/// Sends `pipes` with `send_with` to a `counter` child and checks that all
/// of them arrived and work.
fn send_to_counter(main: &Pipe, label: &str, pipes: Vec<(Pipe, Pipe)>) {
    let (here, there): (Vec<Pipe>, Vec<Pipe>) = pipes.into_iter().unzip();
    main.sender()
        .send_with(label.as_bytes(), there)
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(msg_u64(&main.recv().expect("count")), here.len() as u64);
    for (n, end) in here.iter().enumerate() {
        round_trip(end, &format!("{label} {n}"));
    }
}

fn pipes(n: usize) -> Vec<(Pipe, Pipe)> {
    (0..n).map(|_| ferry::pipe().expect("pipe")).collect()
}

/// `send_with` refuses what cannot travel, hands every pipe end back
/// unharmed, and the link keeps working.
#[test]
fn send_with_refusals_hand_the_pipes_back() {
    if ferry_testkit::role().is_some() {
        return counter();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));

    // Over a pipe inside one process: delivered there.
    let (x, y) = ferry::pipe().expect("pipe");
    let (p, q) = ferry::pipe().expect("pipe");
    x.sender()
        .send_with(b"in process", vec![p])
        .expect("in-process");
    let p = y
        .receiver()
        .recv_with()
        .expect("recv")
        .pipes
        .pop()
        .expect("delivered");
    p.send(b"still works").expect("send");
    assert_eq!(q.recv().expect("recv"), b"still works");

    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "counter", &PipeOptions::new());
    // An end whose twin lives in the child (it could follow it there: see
    // `tests/routing.rs`; the child here would wait on both for good).
    let (a, b) = ferry::pipe().expect("pipe");
    main.sender().send_with(b"b", vec![b]).expect("send b");
    assert_eq!(msg_u64(&main.recv().expect("count")), 1);
    round_trip(&a, "a before");
    main.send(b"again").expect("again");
    round_trip(&a, "a after");
    // The bootstrap pipe itself (its twin is in the child) travels within
    // this process too, and goes on working.
    let (spare, keep) = ferry::pipe().expect("pipe");
    spare
        .sender()
        .send_with(b"main", vec![main])
        .expect("within the process");
    let main = keep
        .receiver()
        .recv_with()
        .expect("the bootstrap pipe")
        .pipes
        .pop()
        .expect("the bootstrap pipe");
    // One more end than a message may carry.
    let (here, there): (Vec<Pipe>, Vec<Pipe>) = pipes(254).into_iter().unzip();
    let refused = main
        .sender()
        .send_with(b"too many", there)
        .expect_err("254 ends");
    assert!(
        matches!(refused.error, SendError::NotTransferable(_)),
        "{refused}"
    );
    assert_eq!(refused.handles.len(), 254);
    let back = refused
        .handles
        .into_iter()
        .map(|end| end.into_pipe().expect("a pipe end"))
        .zip(here)
        .collect();
    // The most a message may carry, made of the ends just handed back.
    let mut back: Vec<(Pipe, Pipe)> = back;
    back.truncate(253);
    send_to_counter(&main, "the most", back);
    send_to_counter(&main, "none", Vec::new());
    drop(main);
    child.wait_ok();
}

/// Both ends of one pipe in one message: they reach the child together (or
/// the send is refused up front with both handed back), and the link keeps
/// working either way.
#[test]
fn send_with_both_ends_of_one_pipe() {
    if ferry_testkit::role().is_some() {
        return counter();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "counter", &PipeOptions::new());
    let (c, d) = ferry::pipe().expect("pipe");
    match main.sender().send_with(b"both", vec![c, d]) {
        Ok(()) => {
            assert_eq!(msg_u64(&main.recv().expect("count")), 2);
        }
        Err(refused) => {
            assert!(
                matches!(refused.error, SendError::NotTransferable(_)),
                "refused with {:?}, {} of 2 ends handed back",
                refused.error,
                refused.handles.len()
            );
            assert_eq!(refused.handles.len(), 2, "both ends handed back");
        }
    }
    send_to_counter(&main, "after both", pipes(3));
    drop(main);
    child.wait_ok();
}

/// Takes one end per message, says so, then answers a round trip on it or
/// makes one (with its twin in the other racer), as told.
fn racer() {
    let (_dog, main) = ferry_testkit::child_pipe("racer", secs(60));
    loop {
        let mut msg = match main.receiver().recv_with() {
            Ok(msg) => msg,
            Err(RecvError::Disconnected) => return,
            Err(e) => panic!("racer: {e}"),
        };
        let end = msg.pipes.pop().expect("an end");
        main.send(&u64_msg(1)).expect("count");
        match main.recv().expect("what to do").as_slice() {
            b"answer" => answer(&end),
            b"ping" => round_trip(&end, "between the children"),
            other => panic!("racer: told {other:?}"),
        }
        main.send(b"done").expect("done");
    }
}

/// Two threads racing to send the two ends of one pipe to two different
/// children: either both go (the second forwarded to its twin, already in
/// the other child, and the two children then talk directly), or one is
/// refused (both were claimed at once) and comes back in the error, still
/// talking to its twin in the child that took it; never a double move.
#[test]
fn two_threads_racing_to_send_the_two_ends_of_one_pipe() {
    if ferry_testkit::role().is_some() {
        return racer();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new();
    let (first, main_a) = ferry_testkit::spawn_child(&dog, this_test!(), "racer", &options);
    let (second, main_b) = ferry_testkit::spawn_child(&dog, this_test!(), "racer", &options);
    let mains = [&main_a, &main_b];
    let mut outcomes = [0; 3];
    for round in 0..300 {
        let (a, b) = ferry::pipe().expect("pipe");
        let start = std::sync::Barrier::new(2);
        let race = |main: &Pipe, end: Pipe| {
            start.wait();
            main.sender().send_with(b"race", vec![end])
        };
        let (sent_a, sent_b) = std::thread::scope(|s| {
            let a = s.spawn(|| race(&main_a, a));
            let b = s.spawn(|| race(&main_b, b));
            (a.join().expect("thread a"), b.join().expect("thread b"))
        });
        let (winner, refused) = match (sent_a, sent_b) {
            (Ok(()), Ok(())) => {
                outcomes[2] += 1;
                for main in mains {
                    assert_eq!(msg_u64(&main.recv().expect("count")), 1);
                }
                main_a.send(b"ping").expect("tell a");
                main_b.send(b"answer").expect("tell b");
                for main in mains {
                    assert_eq!(main.recv().expect("done"), b"done", "round {round}");
                }
                continue;
            }
            (Ok(()), Err(refused)) => (0, refused),
            (Err(refused), Ok(())) => (1, refused),
            (Err(a), Err(b)) => {
                // Both refused (allowed, if unlikely): both come back.
                let mut ends = a.handles.into_iter().chain(b.handles);
                let a = ends
                    .next()
                    .and_then(ferry::Handle::into_pipe)
                    .expect("a back");
                let b = ends
                    .next()
                    .and_then(ferry::Handle::into_pipe)
                    .expect("b back");
                a.send(b"both back").expect("send");
                assert_eq!(b.recv().expect("recv"), b"both back");
                continue;
            }
        };
        assert!(
            matches!(refused.error, SendError::NotTransferable(_)),
            "round {round}: refused with {}",
            refused.error
        );
        outcomes[winner] += 1;
        assert_eq!(msg_u64(&mains[winner].recv().expect("count")), 1);
        let back = refused
            .handles
            .into_iter()
            .next()
            .and_then(ferry::Handle::into_pipe)
            .unwrap_or_else(|| panic!("round {round}: the refused end was not handed back"));
        mains[winner].send(b"answer").expect("tell the winner");
        round_trip(&back, &format!("round {round}"));
        assert_eq!(mains[winner].recv().expect("done"), b"done");
    }
    eprintln!("a alone, b alone, both: {outcomes:?}");
    assert!(outcomes.iter().sum::<u32>() > 0, "no end was ever sent");
    drop((main_a, main_b));
    first.wait_ok();
    second.wait_ok();
}

/// A pipe end that arrives with a message read by `recv` (not
/// `recv_with`) is dropped: its twin hears `Disconnected`, and the link
/// and its other pipes carry on.
#[test]
fn ends_discarded_by_recv_disconnect_their_twins() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("discarder", secs(30));
        assert_eq!(main.recv().expect("message with a pipe"), b"take this");
        let kept = main.receiver().recv_with().expect("message with a pipe");
        answer(&kept.pipes[0]);
        answer(&main);
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "discarder", &PipeOptions::new());
    let (a, b) = ferry::pipe().expect("pipe");
    let (k, l) = ferry::pipe().expect("pipe");
    main.sender()
        .send_with(b"take this", vec![b])
        .expect("send b");
    main.sender()
        .send_with(b"keep this", vec![l])
        .expect("send l");
    assert!(matches!(a.recv(), Err(RecvError::Disconnected)));
    assert!(matches!(a.send(b"x"), Err(SendError::Disconnected)));
    round_trip(&k, "kept");
    round_trip(&main, "main");
    child.wait_ok();
}

/// Pipes moved over a link keep working after the bootstrap pipe that
/// carried them is dropped.
#[test]
fn moved_pipes_outlive_the_bootstrap_pipe() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("survivor", secs(30));
        let moved = main.receiver().recv_with().expect("a pipe").pipes;
        assert!(matches!(main.recv(), Err(RecvError::Disconnected)));
        drop(main);
        moved.iter().for_each(answer);
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "survivor", &PipeOptions::new());
    let (here, there): (Vec<Pipe>, Vec<Pipe>) = pipes(3).into_iter().unzip();
    main.sender()
        .send_with(b"pipes", there)
        .expect("send pipes");
    drop(main);
    for (n, end) in here.iter().enumerate() {
        round_trip(end, &n.to_string());
    }
    child.wait_ok();
    for end in &here {
        assert!(matches!(end.recv(), Err(RecvError::Disconnected)));
    }
}

/// Pipes moved in the 10,000-pipe test.
const MANY: usize = 10_000;
/// Pipe ends per message in it.
const MANY_BATCH: usize = 100;

/// 10,000 pipes made with default options, their far ends sent over one
/// link (100 a message) to a child that holds them all: every one arrives
/// (none refused for the child's default map budget, and the link lives:
/// before, the child's link failed with `Protocol(RegionsOverBudget)`
/// after ~8,127), each then carries one round trip, and the bootstrap
/// pipe still works. Prints the address space each held end costs the
/// child.
#[test]
fn ten_thousand_default_pipes_over_one_link() {
    if ferry_testkit::role().is_some() {
        return many_holder();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, main) = ferry_testkit::spawn_child(&dog, this_test!(), "many", &PipeOptions::new());
    let mut here = Vec::with_capacity(MANY);
    for first in (0..MANY).step_by(MANY_BATCH) {
        let (near, far): (Vec<Pipe>, Vec<Pipe>) = (0..MANY_BATCH)
            .map(|_| ferry::pipe().expect("make a default pipe"))
            .unzip();
        main.sender()
            .send_with(&batch_header(first, MANY_BATCH), far)
            .unwrap_or_else(|e| panic!("send_with of the pipes after {first}: {e}"));
        here.extend(near);
    }
    main.send(&[AGAIN]).expect("again");
    let report = main.recv().expect("the child's count");
    let (held, refused, vm_per_pipe) = (
        msg_u64(&report[..8]),
        msg_u64(&report[8..16]),
        msg_u64(&report[16..]),
    );
    eprintln!(
        "{MANY} default pipes: the child holds {held}, refused {refused}; \
         {vm_per_pipe} bytes of address space per held end"
    );
    assert_eq!((held, refused), (MANY as u64, 0), "ends held and refused");
    for (n, end) in here.iter().enumerate() {
        end.send(format!("ping {n}").as_bytes()).expect("ping");
    }
    for (n, end) in here.iter().enumerate() {
        let reply = end.recv().expect("pong");
        assert_eq!(reply, format!("pong {n}").as_bytes());
    }
    main.send(b"ping main")
        .expect("the bootstrap pipe after all");
    assert_eq!(main.recv().expect("pong main"), b"pong main");
    drop(main);
    child.wait_ok();
}

/// Takes [`MANY`] pipe ends, reports how many it holds and refused and the
/// address space per end, answers a ping on each, then on the main pipe.
fn many_holder() {
    let (_dog, main) = ferry_testkit::child_pipe("many", secs(120));
    let vm_before = ferry_testkit::vm_peak();
    let (mut held, mut refused) = (Vec::with_capacity(MANY), 0);
    loop {
        let msg = main.receiver().recv_with().expect("a batch");
        if msg.bytes == [AGAIN] {
            break;
        }
        parse_batch(&msg.bytes);
        refused += msg.refused;
        held.extend(msg.pipes);
    }
    let per_pipe = (ferry_testkit::vm_peak() - vm_before) / held.len().max(1) as u64;
    let mut report = u64_msg(held.len() as u64).to_vec();
    report.extend_from_slice(&u64_msg(refused as u64));
    report.extend_from_slice(&u64_msg(per_pipe));
    main.send(&report).expect("report");
    held.iter().for_each(answer);
    answer(&main);
    let _ = main.recv();
}

/// Pipes sent in the refused-ends test, and the child's map budget: room
/// for about half of their regions (4 KiB rings: 12 KiB each).
const OVER: usize = 200;
const OVER_BUDGET: usize = 100 * 12 * 1024;

/// A child whose link may map 1.2 MiB of its parent's memory is sent 200
/// small pipe ends, one a message: those that do not fit are refused one
/// by one (the message arrives without its end, `refused` says so, and
/// the parent's end of that pipe sees it disconnected), while the link,
/// the ends that fit and the bootstrap pipe go on working. (Before, the
/// first end over the budget failed the whole link with
/// `Protocol(RegionsOverBudget)`.)
#[test]
fn an_end_over_the_map_budget_is_refused_alone() {
    if ferry_testkit::role().is_some() {
        return budget_holder();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().max_mapped(OVER_BUDGET);
    let (child, main) = ferry_testkit::spawn_child(&dog, this_test!(), "budget", &options);
    let mut here = Vec::with_capacity(OVER);
    for idx in 0..OVER {
        let (near, far) = PipeOptions::new()
            .ring_size(4096)
            .pipe()
            .expect("make a pipe");
        main.sender()
            .send_with(&batch_header(idx, 1), vec![far])
            .unwrap_or_else(|e| panic!("send_with of pipe {idx}: {e}"));
        here.push(near);
    }
    main.send(&[AGAIN]).expect("again");
    let verdicts = main.recv().expect("which ends the child took");
    assert_eq!(verdicts.len(), OVER);
    let took = verdicts.iter().filter(|&&v| v == 1).count();
    eprintln!("the child took {took} of {OVER} ends, refused the rest");
    assert!(took > 0 && took < OVER, "took {took} of {OVER}");
    for (idx, end) in here.iter().enumerate() {
        match verdicts[idx] {
            1 => round_trip(end, &idx.to_string()),
            _ => assert!(
                matches!(
                    end.receiver().recv_timeout(secs(5)),
                    Err(ferry::RecvTimeoutError::Disconnected)
                ),
                "pipe {idx}: refused there, but not disconnected here"
            ),
        }
    }
    round_trip(&main, "main");
    drop(main);
    child.wait_ok();
}

/// Takes the pipe ends one a message, says which it took (1) and which
/// were refused (0), then answers round trips on those it took and on
/// the main pipe.
fn budget_holder() {
    let (_dog, main) = ferry_testkit::child_pipe("budget", secs(60));
    let (mut held, mut verdicts) = (Vec::new(), Vec::new());
    loop {
        let msg = main.receiver().recv_with().expect("a pipe end's message");
        if msg.bytes == [AGAIN] {
            break;
        }
        parse_batch(&msg.bytes);
        assert_eq!(msg.pipes.len() + msg.refused, 1, "one end a message");
        verdicts.push(u8::from(msg.refused == 0));
        held.extend(msg.pipes);
    }
    main.send(&verdicts).expect("verdicts");
    held.iter().for_each(answer);
    answer(&main);
    let _ = main.recv();
}
