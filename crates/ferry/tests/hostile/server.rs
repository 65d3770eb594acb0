//! Hostile peers of a named server's handshake, both ways, written by
//! hand (`attacker/named.rs`, `attacker/wire.rs`: no ferry code on the
//! attacking side):
//!
//! 1. [`bad_openings_are_refused_and_cost_nothing`]: raw clients open with
//!    garbage against a `ferry::Server` in this process.
//! 2. [`a_raw_server_cannot_hurt_a_client`]: a raw listener answers
//!    `ferry::connect` with garbage, or not at all.
//! 3. [`a_flood_of_silent_connections_evicts_no_honest_client`]. Raw
//!    clients connect and say nothing, as fast as they can, while honest
//!    clients connect.
//!
//! The tests take [`ferry_testkit::serial`]: they count this process's
//! descriptors, which a test running beside them would disturb. Server,
//! client and attacker share this process, so once the attacker's side is
//! dropped the count must be back where it began.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::attacker::named::{self, RawListener};
use crate::attacker::region::{RawRegion, sealed_memfd};
use crate::attacker::report::{Verdict, outcome};
use crate::attacker::socket::RawSocket;
use crate::attacker::wire::{self, RecordKind};
use ferry::{AcceptError, ConnectError, ConnectOptions, Refusal, ServerOptions};
use ferry_testkit::{Watchdog, secs, this_test};

/// A name no other test (or run) uses.
fn unique(what: &str) -> String {
    format!("test-{}-hostile-{what}", std::process::id())
}

/// `count` fresh memfds, and borrows of them to send.
fn memfds(count: usize) -> Vec<OwnedFd> {
    (0..count)
        .map(|_| sealed_memfd("hostile-opening", 4096).expect("make a memfd"))
        .collect()
}

fn borrow(fds: &[OwnedFd]) -> Vec<BorrowedFd<'_>> {
    fds.iter().map(AsFd::as_fd).collect()
}

// ---------------------------------------------------------------------
// 1. Bad openings.

/// A client's opening: what it is, its bytes, how many descriptors it
/// carries.
struct Opening {
    what: &'static str,
    bytes: Vec<u8>,
    fds: usize,
}

/// Every malformed opening the raw clients send.
fn bad_openings() -> Vec<Opening> {
    let good = wire::hello(wire::HANDSHAKE_VERSION, None).to_vec();
    let with = |what, at: usize, byte: u8| {
        let mut bytes = good.clone();
        bytes[at] = byte;
        Opening {
            what,
            bytes,
            fds: 0,
        }
    };
    let mut long = good.clone();
    long.push(0);
    vec![
        Opening {
            what: "garbage",
            bytes: vec![0xa5; wire::HELLO_LEN],
            fds: 0,
        },
        Opening {
            what: "one byte short",
            bytes: good[..wire::HELLO_LEN - 1].to_vec(),
            fds: 0,
        },
        Opening {
            what: "one byte long",
            bytes: long,
            fds: 0,
        },
        Opening {
            what: "64 KiB",
            bytes: vec![0x5a; 64 << 10],
            fds: 0,
        },
        Opening {
            what: "a control record",
            bytes: wire::record(RecordKind::PipeEnd, 1, 0).to_vec(),
            fds: 0,
        },
        with("version 0", 4, 0),
        with("version 2", 4, 2),
        with("token flag 2", 5, 2),
        with("padding not zero", 6, 1),
        with("token bytes without the flag", 20, 1),
        Opening {
            what: "a descriptor",
            bytes: good.clone(),
            fds: 1,
        },
        Opening {
            what: "eight descriptors",
            bytes: good,
            fds: 8,
        },
    ]
}

/// Raw clients open with each of [`bad_openings`] in turn: the server's
/// `accept` must give `Refused { reason: Handshake }` naming this
/// process, the client must read the 8-byte refusal ("FRYN", version,
/// code 3), and once the client is gone this process's descriptor count
/// must be back at its baseline. A client that sends an empty datagram
/// (which reads as a hang-up), or a valid opening and hangs up at once,
/// must cost nothing either. Then an honest `ferry::connect` from another
/// thread still gets in and round-trips.
#[test]
fn bad_openings_are_refused_and_cost_nothing() {
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("openings");
    let server = ServerOptions::new()
        .handshake_timeout(secs(2))
        .bind(name.as_str())
        .expect("bind");
    let baseline = ferry_testkit::fd_count();
    let mut verdict = Verdict::new();
    for opening in bad_openings() {
        refused(&server, &name, &opening, &mut verdict);
        let now = ferry_testkit::fd_count_back_to(baseline);
        verdict.check(now <= baseline, || {
            format!(
                "{}: descriptors grew from {baseline} to {now}",
                opening.what
            )
        });
    }
    for what in ["an empty datagram", "hello then hang up"] {
        not_accepted(&server, &name, what, &mut verdict);
        let now = ferry_testkit::fd_count_back_to(baseline);
        verdict.check(now <= baseline, || {
            format!("{what}: descriptors grew from {baseline} to {now}")
        });
    }
    honest_client(&server, &name, &mut verdict);
    let now = ferry_testkit::fd_count_back_to(baseline);
    verdict.check(now <= baseline, || {
        format!("the honest client: descriptors grew from {baseline} to {now}")
    });
    verdict.finish();
}

/// One raw client sends `opening`; checks both sides' view of the refusal.
fn refused(server: &ferry::Server, name: &str, opening: &Opening, verdict: &mut Verdict) {
    let what = opening.what;
    let client = named::connect(name).expect("connect a raw client");
    let fds = memfds(opening.fds);
    client
        .send_record(&opening.bytes, &borrow(&fds))
        .expect("send the opening");
    drop(fds);
    let accepted = server.accept_timeout(secs(2));
    let answer = client.recv_within(secs(2));
    match &accepted {
        Err(AcceptError::Refused { peer, reason }) => {
            verdict.check(*reason == Refusal::Handshake, || {
                format!("{what}: refused for {reason:?}, not Handshake")
            });
            verdict.check(peer.pid == Some(std::process::id()), || {
                format!("{what}: the refusal names {peer}")
            });
        }
        other => verdict.fail(format!("{what}: accept gave {other:?}, not a refusal")),
    }
    let refusal = wire::refusal(wire::REFUSED_HANDSHAKE);
    match &answer {
        Ok(Some(got)) => verdict.check(got.bytes == refusal && got.fds.is_empty(), || {
            format!(
                "{what}: the client read {:?} with {} fds, not the refusal",
                got.bytes,
                got.fds.len()
            )
        }),
        other => verdict.fail(format!(
            "{what}: the client read {other:?}, not the refusal"
        )),
    }
}

/// A raw client that sends an empty datagram, or a valid opening and
/// hangs up at once: the server may welcome it or drop it, but never
/// hands back anything but a pipe to a peer that is gone.
fn not_accepted(server: &ferry::Server, name: &str, what: &str, verdict: &mut Verdict) {
    let client = named::connect(name).expect("connect a raw client");
    let hello = wire::hello(wire::HANDSHAKE_VERSION, None);
    let bytes: &[u8] = match what {
        "an empty datagram" => &[],
        _ => &hello,
    };
    client.send_record(bytes, &[]).expect("send the opening");
    // The empty datagram's client stays to read; the other hangs up now.
    let client = match what {
        "an empty datagram" => Some(client),
        _ => {
            drop(client);
            None
        }
    };
    let accepted = server.accept_timeout(Duration::from_millis(500));
    let answer = client.map(|c| {
        c.recv_within(Duration::from_millis(500))
            .map(|got| got.map(|g| g.bytes))
    });
    verdict.note(format!(
        "{what}: accept gave {}, the client read {answer:?}",
        outcome(&accepted)
    ));
    match accepted {
        Ok(connection) => {
            let got = connection.pipe.receiver().recv_timeout(secs(2));
            verdict.check(
                matches!(got, Err(ferry::RecvTimeoutError::Disconnected)),
                || format!("{what}: the welcomed client's pipe gave {got:?}, not Disconnected"),
            );
        }
        Err(AcceptError::Timeout | AcceptError::Refused { .. }) => {}
        Err(e) => verdict.fail(format!("{what}: accept gave {e:?}")),
    }
}

/// An honest client on another thread connects and round-trips.
fn honest_client(server: &ferry::Server, name: &str, verdict: &mut Verdict) {
    let address = name.to_string();
    let client = thread::spawn(move || {
        let pipe = ConnectOptions::new()
            .timeout(secs(5))
            .connect(address.as_str())
            .map_err(|e| format!("connect: {e:?}"))?;
        pipe.send(b"ping").map_err(|e| format!("send: {e:?}"))?;
        pipe.receiver()
            .recv_timeout(secs(5))
            .map_err(|e| format!("recv: {e:?}"))
    });
    let accepted = server.accept_timeout(secs(5));
    if let Ok(connection) = &accepted {
        match connection.pipe.receiver().recv_timeout(secs(5)) {
            Ok(msg) => {
                let _ = connection.pipe.send(&msg);
            }
            Err(e) => verdict.fail(format!("the honest client's ping: {e:?}")),
        }
    }
    let got = client.join().expect("the honest client thread");
    verdict.check(
        accepted.is_ok() && matches!(&got, Ok(reply) if reply == b"ping"),
        || {
            format!(
                "an honest client after the attacks: accept gave {}, the client {got:?}",
                outcome(&accepted)
            )
        },
    );
}

// ---------------------------------------------------------------------
// 2. A raw server.

/// How long the client gives the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How much later than its timeout the client may return.
const LATE: Duration = Duration::from_millis(500);

/// How the raw server answers a client's opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// A 12-byte datagram: neither a refusal nor a record.
    WrongLength,
    /// A 100-byte datagram.
    Long,
    /// A refusal with an unknown code.
    UnknownRefusal,
    /// A refusal carrying a descriptor.
    RefusalWithFd,
    /// A true refusal (the control: the client reports it).
    Refusal,
    /// 16 bytes that are no record.
    GarbageRecord,
    /// The pipe end record, whose descriptor is a pipe, not a memfd.
    NotAMemfd,
    /// A descriptor record (kind 6) where the pipe end should be.
    FdRecord,
    /// The pipe end record with two descriptors.
    TwoFds,
    /// A valid pipe end under another id than 0, and nothing else.
    OtherId,
    /// Reads the opening and hangs up.
    HangUp,
    /// Hangs up without reading the opening.
    HangUpUnread,
    /// Reads the opening and never answers.
    Silent,
    /// Never takes the connection off its backlog.
    NeverAccept,
}

impl Answer {
    const ALL: [Answer; 14] = [
        Answer::WrongLength,
        Answer::Long,
        Answer::UnknownRefusal,
        Answer::RefusalWithFd,
        Answer::Refusal,
        Answer::GarbageRecord,
        Answer::NotAMemfd,
        Answer::FdRecord,
        Answer::TwoFds,
        Answer::OtherId,
        Answer::HangUp,
        Answer::HangUpUnread,
        Answer::Silent,
        Answer::NeverAccept,
    ];

    /// The `ConnectError` variant the client must report.
    fn expected(self) -> &'static str {
        match self {
            Answer::Refusal => "Refused",
            Answer::HangUp | Answer::HangUpUnread => "Closed",
            Answer::Silent | Answer::NeverAccept => "Timeout",
            _ => "Protocol",
        }
    }
}

/// A raw listener answers `ferry::connect` (with a 500 ms timeout) in
/// each way of [`Answer`]: the client must return the matching error
/// (`Protocol` for anything malformed, `Refused` for a true refusal,
/// `Closed` for a hang-up, `Timeout` for silence) within its timeout and
/// 500 ms, never panic, and once the raw server's side is closed this
/// process's descriptor count must be back at its baseline.
#[test]
fn a_raw_server_cannot_hurt_a_client() {
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("raw-server");
    let listener = RawListener::bind(&name).expect("bind a raw listener");
    let baseline = ferry_testkit::fd_count();
    let mut verdict = Verdict::new();
    for answer in Answer::ALL {
        let (result, took) = connect_to_raw(&listener, &name, answer);
        let got = outcome(&result);
        drop(result);
        verdict.note(format!("{answer:?}: connect gave {got} in {took:?}"));
        let variant = got.split('(').next().unwrap_or(&got);
        verdict.check(variant == answer.expected(), || {
            format!("{answer:?}: expected {}, got {got}", answer.expected())
        });
        verdict.check(took <= CONNECT_TIMEOUT + LATE, || {
            format!("{answer:?}: connect took {took:?}")
        });
        let now = ferry_testkit::fd_count_back_to(baseline);
        verdict.check(now <= baseline, || {
            format!("{answer:?}: descriptors grew from {baseline} to {now}")
        });
    }
    verdict.finish();
}

/// Connects to the raw server, which answers as `answer` on a thread of
/// its own; returns what `connect` gave and how long it took.
fn connect_to_raw(
    listener: &RawListener,
    name: &str,
    answer: Answer,
) -> (Result<ferry::Pipe, ConnectError>, Duration) {
    thread::scope(|s| {
        let (done, client_done) = mpsc::channel();
        let server = s.spawn(move || serve(listener, answer, &client_done));
        let start = Instant::now();
        let got = ConnectOptions::new().timeout(CONNECT_TIMEOUT).connect(name);
        let took = start.elapsed();
        let _ = done.send(());
        server.join().expect("the raw server thread");
        (got, took)
    })
}

/// Answers one connection as `answer`, then holds it until the client is
/// done (`client_done`), so the client sees only what it was sent.
fn serve(listener: &RawListener, answer: Answer, client_done: &mpsc::Receiver<()>) {
    if answer == Answer::NeverAccept {
        let _ = client_done.recv_timeout(secs(5));
        // Take the connection the client left in the backlog.
        let _ = listener.accept_within(Duration::ZERO);
        return;
    }
    let socket = listener
        .accept_within(secs(5))
        .expect("accept")
        .expect("a client within 5 s");
    if answer == Answer::HangUpUnread {
        return;
    }
    let hello = socket.recv_within(secs(5)).expect("the opening");
    assert!(
        hello.is_some_and(|h| h.bytes.len() == wire::HELLO_LEN),
        "the client opens with a hello"
    );
    if answer == Answer::HangUp {
        return;
    }
    send_answer(&socket, answer);
    let _ = client_done.recv_timeout(secs(5));
}

/// Sends the datagram (and descriptors) `answer` stands for.
fn send_answer(socket: &RawSocket, answer: Answer) {
    let region = RawRegion::create(4096).expect("make a region");
    let (pipe_read, _pipe_write) = std::io::pipe().expect("a pipe");
    let pipe_end = |id| wire::record(RecordKind::PipeEnd, 1, id).to_vec();
    let memfd = memfds(1);
    let (bytes, fds): (Vec<u8>, Vec<BorrowedFd<'_>>) = match answer {
        Answer::WrongLength => (vec![0x42; 12], vec![]),
        Answer::Long => (vec![0x42; 100], vec![]),
        Answer::UnknownRefusal => (wire::refusal(9).to_vec(), vec![]),
        Answer::RefusalWithFd => (
            wire::refusal(wire::REFUSED_HANDSHAKE).to_vec(),
            borrow(&memfd),
        ),
        Answer::Refusal => (wire::refusal(wire::REFUSED_HANDSHAKE).to_vec(), vec![]),
        Answer::GarbageRecord => (vec![0x5a; 16], vec![]),
        Answer::NotAMemfd => (pipe_end(0), vec![pipe_read.as_fd()]),
        Answer::FdRecord => (
            wire::record(RecordKind::Fd, 0, 0).to_vec(),
            vec![region.fd()],
        ),
        Answer::TwoFds => (pipe_end(0), vec![region.fd(), region.fd()]),
        Answer::OtherId => (pipe_end(5), vec![region.fd()]),
        Answer::HangUp | Answer::HangUpUnread | Answer::Silent | Answer::NeverAccept => return,
    };
    // The client may have given up already: what it does then is checked.
    let _ = socket.send_record(&bytes, &fds);
}

// ---------------------------------------------------------------------
// 3. A flood of silent connections.

/// Threads that flood the server with silent connections.
const FLOODERS: usize = 4;
/// Connections each flooder keeps open (it closes its oldest to make
/// another): together far more than the server's pending slots.
const FLOOD_HELD: usize = 96;
/// Honest clients that connect during the flood.
const HONEST: usize = 36;
/// Of those, how many speak [`SLOW_SPEAKER`] after connecting, as a
/// client preempted between its `connect` and its opening on a loaded
/// machine does (the others are `ferry::connect`).
const SLOW: usize = 12;
/// How long after connecting a slow honest client sends its opening.
const SLOW_SPEAKER: Duration = Duration::from_millis(20);

/// Raw clients connect and never speak, from several threads, as fast as
/// the server's backlog lets them (each keeps its last [`FLOOD_HELD`]
/// open), while [`HONEST`] honest clients connect from threads of their
/// own, [`SLOW`] of them speaking [`SLOW_SPEAKER`] late: every honest
/// client must get in (and a `ferry::connect` one round-trip), in each of
/// three rounds. (Before, a full table of pending connections closed its
/// oldest for each newcomer, so an honest client whose opening came a
/// little after its connection was taken was closed unread.)
#[test]
fn a_flood_of_silent_connections_evicts_no_honest_client() {
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start(this_test!(), secs(150));
    let mut verdict = Verdict::new();
    for round in 0..3 {
        let name = unique(&format!("flood-{round}"));
        let server = Arc::new(ServerOptions::new().bind(name.as_str()).expect("bind"));
        let (served, flooded, took) = flood_round(server, &name);
        let failed: Vec<&String> = served.iter().filter_map(|r| r.as_ref().err()).collect();
        verdict.note(format!(
            "round {round}: {} of {HONEST} honest clients in within {took:?}, \
             beside {flooded} silent connections",
            HONEST - failed.len()
        ));
        verdict.check(failed.is_empty(), || {
            format!(
                "round {round}: {} of {HONEST} honest clients failed: {failed:?}",
                failed.len()
            )
        });
    }
    verdict.finish();
}

/// One round: the flood, the honest clients, and the server's accept loop
/// echoing once to each client it takes. Returns each honest client's
/// outcome, how many silent connections were made, and how long the
/// honest clients took.
fn flood_round(
    server: Arc<ferry::Server>,
    name: &str,
) -> (Vec<Result<(), String>>, usize, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let made = Arc::new(AtomicUsize::new(0));
    let accepting = {
        let (server, stop) = (Arc::clone(&server), Arc::clone(&stop));
        thread::spawn(move || accept_and_echo(&server, &stop))
    };
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let (name, stop, made) = (name.to_string(), Arc::clone(&stop), Arc::clone(&made));
            thread::spawn(move || flood(&name, &stop, &made))
        })
        .collect();
    // Let the flood fill the server's table first.
    while made.load(Ordering::Relaxed) < 2 * ferry::MAX_PENDING_HANDSHAKES {
        thread::sleep(Duration::from_millis(5));
    }
    let start = Instant::now();
    let honest: Vec<_> = (0..HONEST)
        .map(|i| {
            let address = name.to_string();
            match i < SLOW {
                true => thread::spawn(move || slow_speaker(&address, i)),
                false => thread::spawn(move || honest_round_trip(&address, i)),
            }
        })
        .collect();
    let served: Vec<_> = honest
        .into_iter()
        .map(|h| h.join().expect("an honest client thread"))
        .collect();
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    accepting.join().expect("the accept loop");
    // Flooders waiting for room in the backlog are let go by its close.
    drop(server);
    for f in flooders {
        f.join().expect("a flooder");
    }
    (served, made.load(Ordering::Relaxed), took)
}

/// Connects silent raw clients until `stop`, keeping the last
/// [`FLOOD_HELD`] open.
fn flood(name: &str, stop: &AtomicBool, made: &AtomicUsize) {
    let mut held = VecDeque::with_capacity(FLOOD_HELD);
    while !stop.load(Ordering::Relaxed) {
        // A full backlog, or a connection the server closed: try again.
        if let Ok(client) = named::connect(name) {
            made.fetch_add(1, Ordering::Relaxed);
            if held.len() == FLOOD_HELD {
                held.pop_front();
            }
            held.push_back(client);
        }
    }
}

/// Accepts clients until `stop`, echoing one message to each on a thread
/// of its own.
fn accept_and_echo(server: &ferry::Server, stop: &AtomicBool) {
    let mut echoes = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        if let Ok(client) = server.accept_timeout(Duration::from_millis(50)) {
            echoes.push(thread::spawn(move || {
                if let Ok(msg) = client.pipe.receiver().recv_timeout(secs(20)) {
                    let _ = client.pipe.send(&msg);
                }
            }));
        }
    }
    for e in echoes {
        let _ = e.join();
    }
}

/// An honest client: connects (giving the server 30 s, as the flood may
/// slow it, but not close it) and round-trips its number.
fn honest_round_trip(address: &str, i: usize) -> Result<(), String> {
    let pipe = ConnectOptions::new()
        .timeout(secs(30))
        .connect(address)
        .map_err(|e| format!("client {i}: connect: {e}"))?;
    let msg = (i as u64).to_le_bytes();
    pipe.send(&msg)
        .map_err(|e| format!("client {i}: send: {e:?}"))?;
    match pipe.receiver().recv_timeout(secs(20)) {
        Ok(got) if got == msg => Ok(()),
        other => Err(format!("client {i}: the echo gave {other:?}")),
    }
}

/// An honest client that speaks [`SLOW_SPEAKER`] after connecting, by
/// hand (its opening carries a pipe's region, as a ferry client's does):
/// it must be welcomed, not closed.
fn slow_speaker(address: &str, i: usize) -> Result<(), String> {
    let client = named::connect(address).map_err(|e| format!("slow {i}: connect: {e}"))?;
    let region = RawRegion::create(4096).map_err(|e| format!("slow {i}: region: {e}"))?;
    thread::sleep(SLOW_SPEAKER);
    client
        .send_record(&wire::hello(wire::HANDSHAKE_VERSION, None), &[region.fd()])
        .map_err(|e| format!("slow {i}: send the opening: {e}"))?;
    match client.recv_within(secs(30)) {
        Ok(Some(got)) if got.bytes == wire::welcome() && got.fds.is_empty() => Ok(()),
        Ok(Some(got)) => Err(format!(
            "slow {i}: read {:?} with {} fds, not its welcome",
            got.bytes,
            got.fds.len()
        )),
        Ok(None) => Err(format!("slow {i}: no answer within 30 s")),
        Err(e) => Err(format!("slow {i}: closed before its pipe end came: {e}")),
    }
}
