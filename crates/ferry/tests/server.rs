//! A named server and the unrelated processes that connect to it: many
//! clients at once, each authenticated (user, token), refusals told to
//! both sides, stale socket files reclaimed, stalled handshakes that delay
//! no one, and the death of either side seen by the other.
//!
//! Clients and servers run in child processes of the test binary, started
//! with plain `std::process::Command` (they inherit nothing of ferry's),
//! except the invited child, which `Server::spawn` starts.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry::{
    AcceptError, Address, ConnectError, ConnectOptions, Refusal, Server, ServerOptions, Token,
};
use ferry_testkit::{ChildGuard, Watchdog, secs, this_test};

/// Client processes, and connections each makes at once.
const PROCESSES: usize = 4;
const PER_PROCESS: usize = 25;
/// Round trips per connection.
const ROUNDS: usize = 20;

/// The variable naming the address a child connects to or serves.
const ADDRESS_ENV: &str = "FERRY_TEST_ADDRESS";

/// A name no other test (or run) uses.
fn unique(what: &str) -> String {
    format!("test-{}-{what}", std::process::id())
}

/// A child playing `role` in `test`, told `address`, its standard output
/// piped (for "ready" lines).
fn child(dog: &Watchdog, test: &str, role: &str, address: &str) -> ChildGuard {
    let mut cmd = ferry_testkit::child_command(test, role);
    cmd.env(ADDRESS_ENV, address).stdout(Stdio::piped());
    dog.watch(cmd.spawn().expect("spawn a child"))
}

fn child_address() -> String {
    std::env::var(ADDRESS_ENV).expect("the address from the parent")
}

/// Waits for the child to print `line` on its standard output.
fn wait_for_line(child: &mut ChildGuard, line: &str) {
    let mut out = BufReader::new(child.take_stdout());
    let mut got = String::new();
    loop {
        got.clear();
        assert!(
            out.read_line(&mut got).expect("child output") > 0,
            "child exited before {line:?}"
        );
        // libtest may have begun the line ("test name ... ").
        if got.trim_end().ends_with(line) {
            return;
        }
    }
}

/// In a child: says `line` on standard output (libtest's own chatter goes
/// there too; the parent skips it).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").expect("write to the parent");
    out.flush().expect("flush");
}

fn echo(pipe: ferry::Pipe) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut served = 0;
        while let Ok(msg) = pipe.recv() {
            if pipe.send(&msg).is_err() {
                break;
            }
            served += 1;
        }
        served
    })
}

/// 100 clients in 4 processes connect at once, each doing round trips on
/// its own pipe; each is accepted with its process's credentials.
#[test]
fn hundred_clients_at_once() {
    if let Some(role) = ferry_testkit::role() {
        assert_eq!(role, "clients");
        return many_clients();
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("hundred");
    let server = Server::bind(name.as_str()).expect("bind");
    let test = this_test!();
    let mut children: Vec<ChildGuard> = (0..PROCESSES)
        .map(|_| child(&dog, test, "clients", &name))
        .collect();
    let pids: Vec<u32> = children.iter().map(ChildGuard::id).collect();
    let mut servers = Vec::new();
    for _ in 0..PROCESSES * PER_PROCESS {
        let client = server.accept_timeout(secs(20)).expect("a client");
        assert!(
            client.peer.pid.is_some_and(|pid| pids.contains(&pid)),
            "peer {:?} is one of {pids:?}",
            client.peer
        );
        assert_eq!(client.peer.uid, rustix::process::geteuid().as_raw());
        servers.push(echo(client.pipe));
    }
    for child in &mut children {
        assert!(child.wait().success(), "a client process failed");
    }
    let served: usize = servers
        .into_iter()
        .map(|t| t.join().expect("echo thread"))
        .sum();
    assert_eq!(served, PROCESSES * PER_PROCESS * ROUNDS);
}

fn many_clients() {
    let _dog = Watchdog::start("clients", secs(30));
    let address = child_address();
    let threads: Vec<_> = (0..PER_PROCESS)
        .map(|k| {
            let address = address.clone();
            std::thread::spawn(move || {
                let pipe = ferry::connect(address.as_str()).expect("connect");
                for i in 0..ROUNDS {
                    let msg = format!("{} {k} {i}", std::process::id());
                    pipe.send(msg.as_bytes()).expect("send");
                    assert_eq!(pipe.recv().expect("echo"), msg.as_bytes());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a client thread");
    }
}

/// A token: no token and a wrong one are refused, and both sides say so;
/// a child the server spawned connects with the token it was handed
/// through a pipe, which nothing else can read.
#[test]
fn tokens_are_checked_and_handed_to_invited_children() {
    if let Some(role) = ferry_testkit::role() {
        return token_client(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("token");
    let server = ServerOptions::new()
        .token(Token::random().expect("a token"))
        .bind(name.as_str())
        .expect("bind");
    for role in ["no-token", "wrong-token"] {
        let mut client = child(&dog, this_test!(), role, &name);
        match server.accept_timeout(secs(10)) {
            Err(AcceptError::Refused { peer, reason }) => {
                assert_eq!(reason, Refusal::Token);
                assert_eq!(peer.pid, Some(client.id()));
            }
            other => panic!("{role}: expected a refusal, got {other:?}"),
        }
        assert!(
            client.wait().success(),
            "{role}: the client saw its refusal"
        );
    }
    let mut cmd = ferry_testkit::child_command(this_test!(), "invited");
    cmd.stdout(Stdio::null());
    let invited = dog.watch(server.spawn(cmd).expect("spawn an invited child"));
    let client = server.accept_timeout(secs(10)).expect("the invited child");
    assert_eq!(client.peer.pid, Some(invited.id()));
    client.pipe.send(b"hello").expect("send");
    assert_eq!(client.pipe.recv().expect("reply"), b"hello back");
    invited.wait_ok();
}

fn token_client(role: &str) {
    let _dog = Watchdog::start(role, secs(30));
    let result = match role {
        "no-token" => ferry::connect(child_address().as_str()),
        "wrong-token" => ConnectOptions::new()
            .token(Token::from_bytes([7; 32]))
            .connect(child_address().as_str()),
        "invited" => {
            let pipe = ferry::connect_invited().expect("connect as invited");
            assert_eq!(pipe.recv().expect("hello"), b"hello");
            pipe.send(b"hello back").expect("reply");
            // A second use of the invitation is refused.
            assert!(matches!(
                ferry::connect_invited(),
                Err(ConnectError::NotInvited(_))
            ));
            return;
        }
        other => panic!("unknown role {other}"),
    };
    match result {
        Err(ConnectError::Refused(Refusal::Token)) => {}
        other => panic!("{role}: expected a token refusal, got {other:?}"),
    }
}

/// The user check, both ways: a server whose policy refuses the client's
/// user says so to both; a client refuses a server of a user it does not
/// trust; and (when the test runs as root) a client running as another
/// user is refused by the default policy.
#[test]
fn users_are_checked_both_ways() {
    if let Some(role) = ferry_testkit::role() {
        return user_client(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("users");
    let server = ServerOptions::new()
        .allow(|peer| peer.uid == u32::MAX - 1)
        .bind(name.as_str())
        .expect("bind");
    let mut client = child(&dog, this_test!(), "refused-user", &name);
    match server.accept_timeout(secs(10)) {
        Err(AcceptError::Refused { peer, reason }) => {
            assert_eq!(
                (peer.pid, reason),
                (Some(client.id()), Refusal::Credentials)
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(client.wait().success());
    drop(server);
    let server = Server::bind(name.as_str()).expect("bind");
    let mut client = child(&dog, this_test!(), "distrusting", &name);
    assert!(
        client.wait().success(),
        "the client refused to talk to the server"
    );
    assert!(matches!(
        server.accept_timeout(Duration::from_millis(200)),
        Err(AcceptError::Timeout)
    ));
    if !rustix::process::geteuid().is_root() {
        eprintln!("not root: the test of a client of another user is left out");
        return;
    }
    let mut cmd = ferry_testkit::child_command(this_test!(), "nobody");
    cmd.env(ADDRESS_ENV, &name);
    std::os::unix::process::CommandExt::uid(&mut cmd, 65534);
    let mut nobody = match cmd.spawn() {
        Ok(child) => dog.watch(child),
        // The test binary lies where uid 65534 may not enter (a home
        // directory of mode 0700): nothing to test there.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("uid 65534 cannot run this test binary ({e}): that part is left out");
            return;
        }
        Err(e) => panic!("spawn as uid 65534: {e}"),
    };
    match server.accept_timeout(secs(10)) {
        Err(AcceptError::Refused { peer, reason }) => {
            assert_eq!((peer.uid, reason), (65534, Refusal::Credentials));
        }
        other => panic!("expected a refusal of uid 65534, got {other:?}"),
    }
    assert!(
        nobody.wait().success(),
        "the client of uid 65534 saw its refusal"
    );
}

fn user_client(role: &str) {
    let _dog = Watchdog::start(role, secs(30));
    let address = child_address();
    match role {
        "refused-user" => match ferry::connect(address.as_str()) {
            Err(ConnectError::Refused(Refusal::Credentials)) => {}
            other => panic!("{role}: expected a refusal, got {other:?}"),
        },
        // Trusts the root server it is told of, which does not trust it.
        "nobody" => match ConnectOptions::new()
            .server_uid(0)
            .connect(address.as_str())
        {
            Err(ConnectError::Refused(Refusal::Credentials)) => {}
            other => panic!("{role}: expected a refusal, got {other:?}"),
        },
        "distrusting" => {
            match ConnectOptions::new()
                .server_uid(u32::MAX - 1)
                .connect(address.as_str())
            {
                Err(ConnectError::UntrustedServer { uid, expected }) => {
                    assert_eq!(uid, rustix::process::geteuid().as_raw());
                    assert_eq!(expected, u32::MAX - 1);
                }
                other => panic!("expected an untrusted server, got {other:?}"),
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// A server killed while it listens on a socket file leaves the file; the
/// next server reclaims it, while a live server's file is not taken.
#[test]
fn stale_socket_files_are_reclaimed() {
    if ferry_testkit::role().is_some() {
        let _dog = Watchdog::start("file server", secs(30));
        let server = Server::bind(Address::file(child_address())).expect("bind the file");
        say("ready");
        let client = server.accept().expect("a client");
        let _ = echo(client.pipe).join();
        std::thread::sleep(secs(30));
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let path = std::env::temp_dir().join(format!("{}.sock", unique("stale")));
    let path_text = path.to_str().expect("a UTF-8 path").to_string();
    let mut server = child(&dog, this_test!(), "file-server", &path_text);
    wait_for_line(&mut server, "ready");
    let meta = std::fs::metadata(&path).expect("the socket file");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600,
        "the socket file is its owner's only"
    );
    match Server::bind(Address::file(&path)) {
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}"),
        Ok(_) => panic!("took a live server's socket file"),
    }
    let pipe = ferry::connect(Address::file(&path)).expect("connect to the live server");
    pipe.send(b"ping").expect("send");
    assert_eq!(pipe.recv().expect("echo"), b"ping");
    server.kill();
    server.wait();
    assert!(path.exists(), "SIGKILL leaves the socket file behind");
    assert!(matches!(
        ferry::connect(Address::file(&path)),
        Err(ConnectError::NoServer(_))
    ));
    let reclaimed = Server::bind(Address::file(&path)).expect("reclaim the stale file");
    let client = std::thread::spawn(move || {
        let pipe = ferry::connect(Address::file(&path)).expect("connect to the new server");
        pipe.send(b"again").expect("send");
        pipe.recv().expect("echo")
    });
    let accepted = reclaimed.accept_timeout(secs(10)).expect("a client");
    let server_thread = echo(accepted.pipe);
    assert_eq!(client.join().expect("client"), b"again");
    assert_eq!(server_thread.join().expect("echo"), 1);
    let path = std::path::PathBuf::from(&path_text);
    drop(reclaimed);
    assert!(
        !path.exists(),
        "a server removes its socket file when it goes"
    );
}

/// Raw connections to `name` that never send their opening.
fn stall(name: &str, count: usize) -> Vec<std::os::fd::OwnedFd> {
    let addr = rustix::net::SocketAddrUnix::new_abstract_name(format!("ferry.{name}").as_bytes())
        .expect("an abstract address");
    (0..count)
        .map(|_| {
            let fd = rustix::net::socket(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                None,
            )
            .expect("a socket");
            rustix::net::connect(&fd, &addr).expect("connect");
            fd
        })
        .collect()
}

/// Connections that never complete their handshake delay no one: an
/// honest client is accepted at once; they cost the server a bounded
/// number of descriptors, and nothing once they time out or die.
#[test]
fn stalled_handshakes_delay_no_one() {
    if let Some(role) = ferry_testkit::role() {
        return stall_roles(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("stall");
    let server = Arc::new(
        ServerOptions::new()
            .max_pending(8)
            .handshake_timeout(Duration::from_millis(1500))
            .bind(name.as_str())
            .expect("bind"),
    );
    let baseline = ferry_testkit::fd_count();
    let accepting = {
        let server = Arc::clone(&server);
        std::thread::spawn(move || server.accept_timeout(secs(20)))
    };
    let test = this_test!();
    let mut staller = child(&dog, test, "staller", &name);
    wait_for_line(&mut staller, "stalled");
    // The honest client times its own connect (see `stall_roles`).
    let mut honest = child(&dog, test, "honest", &name);
    let client = accepting
        .join()
        .expect("accept")
        .expect("the honest client");
    assert_eq!(client.peer.pid, Some(honest.id()));
    let served = echo(client.pipe);
    assert!(
        honest.wait().success(),
        "the honest client was delayed or failed"
    );
    assert_eq!(served.join().expect("echo"), 1);
    let during = ferry_testkit::fd_count();
    assert!(
        during <= baseline + 8 + 4,
        "20 stalled connections hold {} descriptors, more than the 8 pending allowed",
        during - baseline
    );
    // Their handshake time runs out while the server waits for others.
    assert!(matches!(
        server.accept_timeout(Duration::from_millis(1600)),
        Err(AcceptError::Timeout)
    ));
    assert!(
        ferry_testkit::fd_count() <= baseline + 1,
        "timed-out handshakes were closed"
    );
    staller.kill();
    staller.wait();
    // Stalled again, then killed mid-handshake: nothing is left.
    let mut staller = child(&dog, test, "staller", &name);
    let again = {
        let server = Arc::clone(&server);
        std::thread::spawn(move || server.accept_timeout(Duration::from_millis(800)))
    };
    wait_for_line(&mut staller, "stalled");
    staller.kill();
    staller.wait();
    assert!(matches!(
        again.join().expect("accept"),
        Err(AcceptError::Timeout)
    ));
    let _ = server.accept_timeout(Duration::from_millis(50));
    assert!(
        ferry_testkit::fd_count() <= baseline + 1,
        "connections of a dead client were closed"
    );
}

fn stall_roles(role: &str) {
    let _dog = Watchdog::start(role, secs(30));
    let address = child_address();
    if role == "staller" {
        let _held = stall(&address, 20);
        say("stalled");
        std::thread::sleep(secs(30));
        return;
    }
    let started = Instant::now();
    let pipe = ferry::connect(address.as_str()).expect("connect past the stallers");
    let waited = started.elapsed();
    pipe.send(b"ping").expect("send");
    assert_eq!(pipe.recv().expect("echo"), b"ping");
    assert!(
        waited < Duration::from_millis(1000),
        "connecting took {waited:?}, as long as a stalled handshake may last"
    );
}

/// The server process is killed: every client's pipe says `Disconnected`
/// promptly. A client process is killed: the server's pipes to it say so.
#[test]
fn either_side_dying_is_seen_by_the_other() {
    if let Some(role) = ferry_testkit::role() {
        let _dog = Watchdog::start(role.clone(), secs(30));
        let address = child_address();
        if role == "server" {
            let server = Server::bind(address.as_str()).expect("bind");
            say("ready");
            let echoes: Vec<_> = (0..5)
                .map(|_| echo(server.accept().expect("a client").pipe))
                .collect();
            drop(echoes);
            std::thread::sleep(secs(30));
        } else {
            let pipes: Vec<_> = (0..5)
                .map(|_| ferry::connect(address.as_str()).expect("connect"))
                .collect();
            say("connected");
            std::thread::sleep(secs(30));
            drop(pipes);
        }
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(this_test!(), secs(60));
    let name = unique("death");
    let mut server = child(&dog, this_test!(), "server", &name);
    wait_for_line(&mut server, "ready");
    let pipes: Vec<_> = (0..5)
        .map(|_| ferry::connect(name.as_str()).expect("connect"))
        .collect();
    for pipe in &pipes {
        pipe.send(b"x").expect("send");
        assert_eq!(pipe.recv().expect("echo"), b"x");
    }
    server.kill();
    let killed = Instant::now();
    for pipe in &pipes {
        assert!(matches!(pipe.recv(), Err(ferry::RecvError::Disconnected)));
    }
    assert!(
        killed.elapsed() < secs(2),
        "clients saw the server's death after {:?}",
        killed.elapsed()
    );
    server.wait();

    let name = unique("death-2");
    let listener = Server::bind(name.as_str()).expect("bind");
    let mut clients = child(&dog, this_test!(), "client", &name);
    let accepted: Vec<_> = (0..5)
        .map(|_| listener.accept_timeout(secs(10)).expect("a client").pipe)
        .collect();
    wait_for_line(&mut clients, "connected");
    clients.kill();
    let killed = Instant::now();
    for pipe in &accepted {
        assert!(matches!(pipe.recv(), Err(ferry::RecvError::Disconnected)));
    }
    assert!(
        killed.elapsed() < secs(2),
        "the server saw the client's death after {:?}",
        killed.elapsed()
    );
    clients.wait();
}
