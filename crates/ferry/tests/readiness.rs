//! One readiness story: an owned `Select` over byte receivers, typed
//! receivers and a `Server`, with members added and removed by key;
//! ready means a call would not wait (a whole message, a client, or an
//! end not yet returned); typed receivers' descriptors armed by every
//! receive form; and a supervisor serving clients and workers, in other
//! processes, from one thread.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::thread;
use std::time::{Duration, Instant};

use ferry::{Key, PipeOptions, ReadyTimeoutError, Receiver, Select, Server, TryRecvError, typed};
use ferry_testkit::{Watchdog, secs, this_test};

/// A ring this small makes a message of [`LARGE`] bytes travel in pieces.
const RING: usize = 4096;
/// Four rings' worth.
const LARGE: usize = 4 * RING;
/// Large messages the child sends.
const LARGE_COUNT: usize = 50;

/// Whether `fd` turns readable within `ms` milliseconds.
fn readable(fd: impl AsFd, ms: i64) -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    let timeout = rustix::time::Timespec {
        tv_sec: ms / 1000,
        tv_nsec: (ms % 1000) * 1_000_000,
    };
    poll(&mut fds, Some(&timeout)).expect("poll") == 1
}

/// Members come and go by key: `remove` hands back the member (by its
/// type), keys stay with their members, and a removed one is never
/// returned again.
#[test]
fn select_owns_its_members_and_removes_them() {
    let (a, b) = ferry::pipe().expect("a pipe");
    let (tx, rx) = ferry::channel::<String>(16).unwrap();
    let (c, d) = ferry::pipe().expect("a pipe");
    let mut select = Select::new().expect("a select");
    let bytes = select.add(b.split().1).expect("add bytes");
    let typed = select.add(rx).expect("add typed");
    let other = select.add(d.split().1).expect("add bytes");
    assert_eq!(select.len(), 3);
    a.send(b"one").expect("send");
    tx.send("two".into()).expect("send");
    c.send(b"three").expect("send");
    // The wrong type leaves the member where it is.
    assert!(select.remove::<Receiver>(typed).is_none());
    assert!(select.get::<typed::Receiver<u32>>(typed).is_none());
    let rx = select
        .remove::<typed::Receiver<String>>(typed)
        .expect("the typed receiver back");
    assert_eq!(rx.try_recv().expect("its value"), "two");
    assert!(select.get::<typed::Receiver<String>>(typed).is_none());
    let mut seen = Vec::new();
    for _ in 0..2 {
        let key = select.try_ready().expect("two ready");
        let got = select.get::<Receiver>(key).expect("bytes").try_recv();
        seen.push((key, got.expect("a message")));
    }
    seen.sort();
    assert_eq!(
        seen,
        [(bytes, b"one".to_vec()), (other, b"three".to_vec())],
        "keys stay with their members after a removal"
    );
    // A new member gets a key no member had.
    let (_tx2, rx2) = ferry::channel::<String>(16).unwrap();
    let new = select.add(rx2).expect("add");
    assert!(![bytes, typed, other].contains(&new));
    assert!(matches!(
        select.try_ready(),
        Err(ferry::TryReadyError::Empty)
    ));
}

/// A receiver whose peer is gone is an event until a receive returns
/// `Disconnected`, then never again: a loop over the set times out
/// instead of spinning on it.
#[test]
fn a_gone_peer_is_reported_once() {
    let dog = Watchdog::start(this_test!(), secs(30));
    let (a, b) = ferry::pipe().expect("a pipe");
    let (_live, quiet) = ferry::pipe().expect("a pipe");
    let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    let mut select = Select::new().expect("a select");
    let gone = select.add(b.split().1).expect("add");
    select.add(quiet.split().1).expect("add");
    let typed_gone = select.add(rx).expect("add");
    drop(a);
    drop(tx);
    let mut ended = Vec::new();
    while ended.len() < 2 {
        let key = select
            .ready_timeout(Duration::from_secs(5))
            .expect("the ends are events");
        let end = match select.get::<Receiver>(key) {
            Some(rx) => matches!(rx.try_recv(), Err(TryRecvError::Disconnected)),
            None => {
                let rx = select.get::<typed::Receiver<u32>>(key).expect("typed");
                matches!(rx.try_recv(), Err(ferry::typed::TryRecvError::Disconnected))
            }
        };
        assert!(end, "the event was not the end");
        ended.push(key);
    }
    ended.sort();
    assert_eq!(ended, [gone, typed_gone]);
    for round in 0..5 {
        let started = Instant::now();
        match select.ready_timeout(Duration::from_millis(50)) {
            Err(ReadyTimeoutError::Timeout) => {}
            other => panic!("round {round}: an ended receiver came back: {other:?}"),
        }
        assert!(started.elapsed() >= Duration::from_millis(45));
    }
    // The ended ones are still there until removed.
    assert_eq!(select.len(), 3);
    assert!(select.remove::<Receiver>(gone).is_some());
    drop(dog);
}

/// The child of the large-message test: sends `LARGE_COUNT` messages of
/// `LARGE` bytes (each in pieces through a `RING`-byte ring), pausing
/// between some.
fn send_large(main: &ferry::Pipe) {
    for i in 0..LARGE_COUNT {
        let m = vec![i as u8; LARGE];
        main.send(&m).expect("a large message");
        if i % 3 == 0 {
            thread::sleep(Duration::from_millis(2));
        }
    }
    assert_eq!(main.recv().expect("the parent's done"), b"done");
}

/// A message four times the ring's size is ready only once the last of
/// its pieces is in: `ready()` then `try_recv()` never says `Empty`.
#[test]
fn a_large_message_is_ready_only_when_whole() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, main) = ferry_testkit::child_pipe(&role, secs(60));
        return send_large(&main);
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().ring_size(RING).out_of_line(usize::MAX);
    let (child, main) = ferry_testkit::spawn_child(&dog, this_test!(), "large", &options);
    let (tx, rx) = main.split();
    let mut select = Select::new().expect("a select");
    let key = select.add(rx).expect("add");
    let mut empties = 0;
    let mut got = 0;
    while got < LARGE_COUNT {
        assert_eq!(select.ready().expect("ready"), key);
        match select.get::<Receiver>(key).expect("there").try_recv() {
            Ok(m) => {
                assert_eq!(m, vec![got as u8; LARGE], "message {got}");
                got += 1;
            }
            Err(TryRecvError::Empty) => empties += 1,
            Err(e) => panic!("message {got}: {e}"),
        }
    }
    assert_eq!(empties, 0, "ready() then try_recv() said Empty");
    tx.send(b"done").expect("done");
    child.wait_ok();
}

/// The child of the typed poll-loop tests: sends `count` typed values,
/// some large enough to go in pieces, pausing between them so the
/// parent's loop waits on the descriptor.
fn send_typed(main: ferry::Pipe, count: u64) {
    let (tx, rx) = main.split();
    let tx = typed::Sender::<(u64, Vec<u8>)>::from_bytes(tx);
    for i in 0..count {
        let len = if i % 4 == 0 { LARGE } else { 8 };
        tx.send((i, vec![i as u8; len])).expect("a typed send");
        thread::sleep(Duration::from_millis(1));
    }
    let _ = rx.recv(); // until the parent is done
}

/// Receives `count` values with `try_recv`, waiting only on `ready_fd`
/// (asked for before the first `try_recv`, and again after each `Empty`);
/// fails if the descriptor stays quiet for 2 s with a value on its way
/// (the loop would stall there for good without a timeout).
fn poll_loop(rx: &typed::Receiver<(u64, Vec<u8>)>, count: u64) {
    rx.ready_fd()
        .expect("a descriptor, before the first try_recv");
    let mut next = 0;
    while next < count {
        match rx.try_recv() {
            Ok((i, body)) => {
                assert_eq!(i, next, "in order");
                assert!(body.iter().all(|&b| b == i as u8));
                next += 1;
            }
            Err(ferry::typed::TryRecvError::Empty) => {
                let fd = rx.ready_fd().expect("a descriptor");
                assert!(
                    readable(fd, 2000),
                    "stalled: the descriptor stayed quiet with value {next} on its way"
                );
            }
            Err(e) => panic!("value {next}: {e}"),
        }
    }
}

/// A poll loop over a typed receiver from another process (`try_recv`
/// until `Empty`, then wait on `ready_fd`) never stalls: `try_recv` arms
/// the descriptor as the byte one does.
#[test]
fn typed_try_recv_arms_the_descriptor_across_processes() {
    const COUNT: u64 = 60;
    if let Some(role) = ferry_testkit::role() {
        let (_dog, main) = ferry_testkit::child_pipe(&role, secs(60));
        return send_typed(main, COUNT);
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let options = PipeOptions::new().ring_size(RING);
    let (child, main) = ferry_testkit::spawn_child(&dog, this_test!(), "typed", &options);
    let (tx, rx) = main.split();
    let rx = typed::Receiver::<(u64, Vec<u8>)>::from_bytes(rx);
    poll_loop(&rx, COUNT);
    tx.send(b"done").expect("done");
    child.wait_ok();
}

/// The same poll loop in one process: the in-process queue has a
/// descriptor of its own, rung by a send while the receiver waits on it.
#[test]
fn typed_try_recv_arms_the_descriptor_in_one_process() {
    const COUNT: u64 = 200;
    let dog = Watchdog::start(this_test!(), secs(60));
    let (tx, rx) = ferry::channel::<(u64, Vec<u8>)>(16).unwrap();
    let sender = thread::spawn(move || {
        for i in 0..COUNT {
            tx.send((i, vec![i as u8; 8])).expect("send");
            if i % 8 == 0 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    });
    poll_loop(&rx, COUNT);
    sender.join().expect("the sender");
    assert!(matches!(
        rx.try_recv(),
        Err(ferry::typed::TryRecvError::Disconnected)
    ));
    drop(dog);
}

/// A request from a client, as a worker gets it: which client, and the
/// number to work on.
type Job = (u32, u64);
/// A worker's answer: the client, the number, and the result.
type Done = (u32, u64, u64);
/// Clients of the supervisor test, and requests each makes.
const CLIENTS: usize = 3;
const REQUESTS: u64 = 30;
/// Workers that answer, and one that dies at once.
const WORKERS: usize = 2;
/// The server's name in the supervisor test, read by its clients.
const SERVER_ENV: &str = "FERRY_TEST_SERVER";

/// The work: what a worker answers for `n`.
fn work(n: u64) -> u64 {
    n * 3 + 1
}

fn worker(role: &str) {
    let (_dog, main) = ferry_testkit::child_pipe(role, secs(60));
    if role == "doomed" {
        std::process::exit(0);
    }
    let (tx, rx) = main.split();
    let (tx, rx) = (
        typed::Sender::<Done>::from_bytes(tx),
        typed::Receiver::<Job>::from_bytes(rx),
    );
    for (client, n) in rx.iter() {
        tx.send((client, n, work(n))).expect("an answer");
    }
}

fn client() {
    let _dog = Watchdog::start("client", secs(60));
    let name = std::env::var(SERVER_ENV).expect("the server's name");
    let pipe = ferry::connect(name.as_str()).expect("connect to the supervisor");
    for i in 0..REQUESTS {
        let n = u64::from(std::process::id()) * 1000 + i;
        pipe.send(&n.to_le_bytes()).expect("a request");
        let reply = pipe.recv().expect("an answer");
        assert_eq!(reply, work(n).to_le_bytes(), "request {i}");
    }
}

/// What the supervisor holds for each member of its set.
enum Peer {
    Listening,
    Client(ferry::Sender),
    Worker(typed::Sender<Job>),
    Doomed,
}

/// Which of [`Peer`] a member is.
#[derive(Clone, Copy)]
enum Role {
    Listening,
    Client,
    Worker,
    Doomed,
}

/// A supervisor: one thread, one `Select` over a `Server` (clients in
/// other processes connect by name), the answers of workers (spawned
/// children, typed pipes) and the requests of clients. Every request is
/// answered (client → supervisor → worker → supervisor → client), a
/// worker that dies is seen, and each client that leaves is removed.
#[test]
fn a_supervisor_serves_clients_and_workers_from_one_select() {
    match ferry_testkit::role().as_deref() {
        Some("client") => return client(),
        Some(role) => return worker(role),
        None => {}
    }
    let dog = Watchdog::start(this_test!(), secs(90));
    let name = format!("ferry-readiness-{}", std::process::id());
    let mut select = Select::new().expect("a select");
    let mut peers = HashMap::new();
    let server = Server::bind(name.as_str()).expect("bind");
    peers.insert(select.add(server).expect("add the server"), Peer::Listening);
    let mut workers = Vec::new();
    let mut children = Vec::new();
    for role in std::iter::repeat_n("worker", WORKERS).chain(["doomed"]) {
        let (child, pipe) =
            ferry_testkit::spawn_child(&dog, this_test!(), role, &PipeOptions::new());
        let (tx, rx) = pipe.split();
        let key = select
            .add(typed::Receiver::<Done>::from_bytes(rx))
            .expect("add a worker");
        let tx = typed::Sender::<Job>::from_bytes(tx);
        match role {
            "doomed" => peers.insert(key, Peer::Doomed),
            _ => {
                workers.push(key);
                peers.insert(key, Peer::Worker(tx))
            }
        };
        children.push(child);
    }
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let mut cmd = ferry_testkit::child_command(this_test!(), "client");
        cmd.env(SERVER_ENV, &name);
        clients.push(dog.watch(cmd.spawn().expect("spawn a client")));
    }
    let mut by_client: HashMap<u32, Key> = HashMap::new();
    let (mut accepted, mut answered, mut left, mut doomed_seen) = (0u32, 0u64, 0, false);
    let mut turn = 0;
    while left < CLIENTS || !doomed_seen {
        let key = select.ready().expect("ready");
        let role = match peers.get(&key).expect("a key of ours") {
            Peer::Listening => Role::Listening,
            Peer::Client(_) => Role::Client,
            Peer::Worker(_) => Role::Worker,
            Peer::Doomed => Role::Doomed,
        };
        match role {
            Role::Listening => {
                let server = select.get::<Server>(key).expect("the server");
                match server.try_accept() {
                    Ok(conn) => {
                        let (tx, rx) = conn.pipe.split();
                        let client = select.add(rx).expect("add a client");
                        accepted += 1;
                        by_client.insert(accepted, client);
                        peers.insert(client, Peer::Client(tx));
                    }
                    Err(ferry::AcceptError::Empty) => {}
                    Err(e) => panic!("accept: {e}"),
                }
            }
            Role::Client => {
                let rx = select.get::<Receiver>(key).expect("a client");
                match rx.try_recv() {
                    Ok(request) => {
                        let n = u64::from_le_bytes(request[..].try_into().expect("8 bytes"));
                        let id = by_client
                            .iter()
                            .find_map(|(&id, &k)| (k == key).then_some(id))
                            .expect("a known client");
                        turn = (turn + 1) % WORKERS;
                        let Some(Peer::Worker(worker)) = peers.get(&workers[turn]) else {
                            panic!("not a worker")
                        };
                        worker.send((id, n)).expect("a job");
                    }
                    Err(TryRecvError::Disconnected) => {
                        select.remove::<Receiver>(key).expect("the client");
                        peers.remove(&key);
                        left += 1;
                    }
                    Err(e) => panic!("a client: {e}"),
                }
            }
            Role::Worker => {
                let rx = select.get::<typed::Receiver<Done>>(key).expect("a worker");
                let (id, n, result) = rx.try_recv().expect("an answer");
                assert_eq!(result, work(n));
                let Some(Peer::Client(client)) = by_client.get(&id).and_then(|k| peers.get(k))
                else {
                    panic!("an answer for a client that left")
                };
                client.send(&result.to_le_bytes()).expect("the answer");
                answered += 1;
            }
            Role::Doomed => {
                let rx = select.get::<typed::Receiver<Done>>(key).expect("doomed");
                assert!(matches!(
                    rx.try_recv(),
                    Err(ferry::typed::TryRecvError::Disconnected)
                ));
                select.remove::<typed::Receiver<Done>>(key);
                peers.remove(&key);
                doomed_seen = true;
            }
        }
    }
    assert_eq!(answered, CLIENTS as u64 * REQUESTS);
    for client in clients {
        client.wait_ok();
    }
    drop(peers); // the workers' senders: they finish
    for child in children {
        child.wait_ok();
    }
}

/// The async form of the supervisor, on one tokio thread with a task per
/// peer: an async server accepts clients (other processes connecting by
/// name), each served by a task awaiting its requests; a typed worker's
/// answers are awaited on its async typed receiver, and its stream ends
/// when the worker goes. No helper thread.
#[cfg(feature = "tokio")]
#[test]
fn an_async_supervisor_serves_clients_and_a_worker() {
    match ferry_testkit::role().as_deref() {
        Some("client") => return client(),
        Some(role) => return worker(role),
        None => {}
    }
    let dog = Watchdog::start(this_test!(), secs(90));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let name = format!("ferry-readiness-async-{}", std::process::id());
    // Named here: inside the async block the macro would name the block.
    let test = this_test!();
    let (worker_child, worker) =
        ferry_testkit::spawn_child(&dog, test, "worker", &PipeOptions::new());
    let mut clients = Vec::new();
    runtime.block_on(async {
        let server = Server::bind(name.as_str())
            .expect("bind")
            .into_async()
            .expect("an async server");
        for _ in 0..CLIENTS {
            let mut cmd = ferry_testkit::child_command(test, "client");
            cmd.env(SERVER_ENV, &name);
            clients.push(dog.watch(cmd.spawn().expect("spawn a client")));
        }
        // The worker: jobs out, answers awaited on its typed receiver.
        let (tx, rx) = worker.split();
        let jobs = typed::Sender::<Job>::from_bytes(tx);
        let mut answers = typed::Receiver::<Done>::from_bytes(rx)
            .into_async()
            .expect("an async typed receiver");
        let awaited = tokio::spawn(async move {
            let mut sum = 0;
            for i in 0..REQUESTS {
                let (id, n, result) = answers.recv().await.expect("an answer");
                assert_eq!((id, n, result), (7, i, work(i)));
                sum += result;
            }
            // The worker goes once its jobs' sender is dropped.
            assert!(matches!(
                answers.recv().await,
                Err(ferry::typed::RecvError::Disconnected)
            ));
            sum
        });
        for i in 0..REQUESTS {
            jobs.send((7, i)).expect("a job");
        }
        drop(jobs);
        // The clients: a task each.
        let mut served = Vec::new();
        for _ in 0..CLIENTS {
            let client = server.accept().await.expect("a client");
            let (tx, rx) = client.pipe.split();
            let rx = rx.into_async().expect("an async receiver");
            served.push(tokio::spawn(async move {
                let mut count = 0;
                while let Ok(request) = rx.recv().await {
                    let n = u64::from_le_bytes(request[..].try_into().expect("8 bytes"));
                    tx.send(&work(n).to_le_bytes()).expect("an answer");
                    count += 1;
                }
                count
            }));
        }
        for task in served {
            assert_eq!(task.await.expect("a client task"), REQUESTS);
        }
        let expected: u64 = (0..REQUESTS).map(work).sum();
        assert_eq!(awaited.await.expect("the worker task"), expected);
    });
    for client in clients {
        client.wait_ok();
    }
    worker_child.wait_ok();
}

/// A server's readiness descriptor turns readable for a client connecting
/// (in a poll loop of the caller's: `try_accept` until `Empty`, then
/// wait), and `try_accept` then gives the client.
#[test]
fn server_ready_fd_turns_readable_for_a_client() {
    let dog = Watchdog::start(this_test!(), secs(30));
    let name = format!("ferry-readiness-fd-{}", std::process::id());
    let server = Server::bind(name.as_str()).expect("bind");
    let fd = server.ready_fd().expect("a descriptor");
    assert!(matches!(
        server.try_accept(),
        Err(ferry::AcceptError::Empty)
    ));
    assert!(!readable(fd, 50), "readable with no client");
    let connecting = thread::spawn(move || {
        let pipe = ferry::connect(name.as_str()).expect("connect");
        pipe.send(b"hi").expect("send");
        pipe.recv().expect("the server's answer")
    });
    let client = loop {
        match server.try_accept() {
            Ok(client) => break client,
            Err(ferry::AcceptError::Empty) => {
                assert!(readable(fd, 5000), "the descriptor stayed quiet");
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    assert_eq!(client.pipe.recv().expect("hi"), b"hi");
    client.pipe.send(b"welcome").expect("answer");
    assert_eq!(connecting.join().expect("the client"), b"welcome");
    drop(dog);
}

/// An async server's `accept` wakes for a client that connects while it
/// waits.
#[cfg(feature = "tokio")]
#[test]
fn an_async_accept_wakes_for_a_client() {
    let dog = Watchdog::start(this_test!(), secs(30));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let name = format!("ferry-readiness-wake-{}", std::process::id());
    let server = runtime.block_on(async {
        Server::bind(name.as_str())
            .expect("bind")
            .into_async()
            .expect("async")
    });
    let connecting = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        let pipe = ferry::connect(name.as_str()).expect("connect");
        pipe.send(b"hi").expect("send");
        pipe.recv().expect("the server's answer")
    });
    runtime.block_on(async {
        let client = server.accept().await.expect("a client");
        assert_eq!(client.pipe.recv().expect("hi"), b"hi");
        client.pipe.send(b"welcome").expect("answer");
    });
    assert_eq!(connecting.join().expect("the client"), b"welcome");
    drop(dog);
}

/// Connects to the server named `name` by hand and says nothing.
fn silent_connection(name: &str) -> std::os::fd::OwnedFd {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let fd = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .expect("a socket");
    let address = SocketAddrUnix::new_abstract_name(format!("ferry.{name}").as_bytes())
        .expect("an abstract address");
    rustix::net::connect(&fd, &address).expect("connect");
    fd
}

/// A flood of silent connections that fills every handshake slot does
/// not keep a `Select` over the server busy: while every slot is in its
/// grace the server's descriptor does not watch the listening socket, and
/// the set sleeps until a grace ends (then the oldest silent one makes
/// room for the next).
#[test]
fn a_flood_of_silent_connections_does_not_spin_a_select() {
    let dog = Watchdog::start(this_test!(), secs(30));
    let name = format!("ferry-readiness-flood-{}", std::process::id());
    let server = ferry::ServerOptions::new()
        .max_pending(2)
        .bind(name.as_str())
        .expect("bind");
    let mut select = Select::new().expect("a select");
    let key = select.add(server).expect("add");
    let mut silent: Vec<_> = (0..2).map(|_| silent_connection(&name)).collect();
    // Take connections until both slots hold silent ones; then more wait
    // in the backlog (as many as it holds: a connect past it would block).
    while let Ok(k) = select.try_ready() {
        assert_eq!(k, key);
        let server = select.get::<Server>(key).expect("the server");
        assert!(matches!(
            server.try_accept(),
            Err(ferry::AcceptError::Empty)
        ));
    }
    silent.extend((0..2).map(|_| silent_connection(&name)));
    let cpu = ferry_testkit::thread_cpu_time();
    let started = Instant::now();
    let mut woke = 0;
    while started.elapsed() < Duration::from_millis(150) {
        let left = Duration::from_millis(150).saturating_sub(started.elapsed());
        match select.ready_timeout(left) {
            Ok(_) => {
                woke += 1;
                let server = select.get::<Server>(key).expect("the server");
                let _ = server.try_accept();
            }
            Err(ReadyTimeoutError::Timeout) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let used = ferry_testkit::thread_cpu_time() - cpu;
    eprintln!("150 ms of a full server: {woke} wakes, {used:?} of CPU");
    assert!(
        used < Duration::from_millis(30),
        "spun: {used:?}, {woke} wakes"
    );
    // A grace's end wakes the set by itself: the silent make room, and an
    // honest client behind them is accepted.
    let honest = thread::spawn(move || {
        let pipe = ferry::connect(name.as_str()).expect("an honest connect");
        pipe.send(b"hi").expect("send");
    });
    let client = loop {
        match select.ready_timeout(Duration::from_secs(5)) {
            Ok(_) => match select.get::<Server>(key).expect("the server").try_accept() {
                Ok(client) => break client,
                Err(ferry::AcceptError::Empty) => {}
                Err(e) => panic!("{e}"),
            },
            Err(e) => panic!("the honest client was not accepted: {e}"),
        }
    };
    assert_eq!(client.pipe.recv().expect("its message"), b"hi");
    honest.join().expect("the honest client");
    drop(silent);
    drop(dog);
}

/// A member the set cannot take (this process is out of descriptors for
/// its doorbell) comes back in the error, whole: nothing is lost.
#[test]
fn a_member_the_set_cannot_take_is_handed_back() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

    if ferry_testkit::role().is_some() {
        let _dog = Watchdog::start("out-of-descriptors child", secs(30));
        let (a, b) = ferry::pipe().expect("a pipe");
        let (_tx, rx) = b.split();
        let mut select = Select::new().expect("a select");
        // No new descriptor at all: the doorbell cannot be made.
        let before = getrlimit(Resource::Nofile);
        // The lowest free number is the next one the kernel would give.
        let lowest_free = {
            use std::os::fd::AsRawFd;
            let probe = std::fs::File::open("/dev/null").expect("open /dev/null");
            probe.as_raw_fd() as u64
        };
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(lowest_free),
                maximum: before.maximum,
            },
        )
        .expect("lower the descriptor limit");
        let refused = select.add(rx).expect_err("no descriptor for the doorbell");
        setrlimit(Resource::Nofile, before).expect("restore the descriptor limit");
        assert!(refused.to_string().contains("handed back"), "{refused}");
        let rx: Receiver = refused.into_inner();
        a.send(b"still here").expect("send");
        assert_eq!(rx.recv().expect("the member still receives"), b"still here");
        let key = select.add(rx).expect("added once descriptors are back");
        assert!(select.get::<Receiver>(key).is_some());
        return;
    }
    let dog = Watchdog::start(this_test!(), secs(60));
    let mut child = dog.watch(
        ferry_testkit::child_command(this_test!(), "child")
            .spawn()
            .expect("start the child"),
    );
    assert!(child.wait().success(), "the child's checks failed");
}
