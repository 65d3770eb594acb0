//! Peers in different pid namespaces: a sandboxed client and its server,
//! a server in a container and the host's clients, a child spawned into
//! a namespace of its own. The kernel names a process outside the reader's
//! pid namespace as pid 0; ferry reports it as unknown (`None`) and
//! connects anyway, and still sees each peer's death.
//!
//! The other side runs under `unshare --pid --fork` (util-linux; it needs
//! the privilege to make a pid namespace). Where that cannot be done, each
//! test says why and passes without checking anything.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use ferry::{ConnectError, Pipe, PipeOptions, RecvError, Server};
use ferry_testkit::{Watchdog, secs, this_test};

/// The environment variable naming the server to the other side.
const ADDRESS_ENV: &str = "FERRY_TEST_PIDNS_ADDRESS";

/// Why no pid namespace can be made here, if none can.
fn no_namespace() -> Option<String> {
    let status = Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match status {
        Ok(s) if s.success() => None,
        Ok(s) => Some(format!("`unshare --pid --fork true` failed ({s})")),
        Err(e) => Some(format!("`unshare` could not be run: {e}")),
    }
}

/// Whether the test must be skipped (and says so).
fn skipped() -> bool {
    match no_namespace() {
        Some(why) => {
            println!("skipped: cannot make a pid namespace here: {why}");
            true
        }
        None => false,
    }
}

/// `cmd` run as the first process of a new pid namespace (its parent,
/// `unshare`, stays outside; `--kill-child` kills it if `unshare` dies).
fn inside(cmd: &Command) -> Command {
    let mut out = Command::new("unshare");
    out.args(["--pid", "--fork", "--kill-child", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => out.env(key, value),
            None => out.env_remove(key),
        };
    }
    out
}

/// A name no other test run uses.
fn unique(what: &str) -> String {
    format!("pidns-{what}-{}", std::process::id())
}

/// Connects to `address`, retrying while no server listens there yet.
fn connect_when_up(address: &str, limit: Duration) -> Pipe {
    let start = Instant::now();
    loop {
        match ferry::connect(address) {
            Ok(pipe) => return pipe,
            Err(ConnectError::NoServer(_)) if start.elapsed() < limit => {
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("connect to the server in the other namespace: {e}"),
        }
    }
}

/// Plays `role` on the far side of a namespace.
fn play(role: &str) {
    let _dog = Watchdog::start(format!("`{role}` in a pid namespace"), secs(30));
    let address = || std::env::var(ADDRESS_ENV).expect("the address");
    match role {
        "client" => {
            let pipe = ferry::connect(address()).expect("connect from another pid namespace");
            pipe.send(b"ping").expect("send");
            assert_eq!(pipe.recv().expect("the reply"), b"pong");
        }
        "server" => {
            let server = Server::bind(address()).expect("bind in a pid namespace");
            let client = server
                .accept_timeout(secs(20))
                .expect("a client from outside");
            assert_eq!(client.pipe.recv().expect("the question"), b"who am I?");
            let answer = format!("{:?}", client.peer.pid);
            client.pipe.send(answer.as_bytes()).expect("answer");
            // Until the client goes: its death is seen from in here too.
            assert!(matches!(client.pipe.recv(), Err(RecvError::Disconnected)));
        }
        "child" => {
            let pipe = Pipe::from_parent().expect("the pipe from a parent outside");
            assert_eq!(pipe.recv().expect("ping"), b"ping");
            pipe.send(b"pong").expect("send");
        }
        other => panic!("no role {other:?}"),
    }
}

/// A client in a new pid namespace connects to a server outside it (which
/// sees the client's pid: the namespace is a child of its own), makes a
/// round trip, and its death is seen.
#[test]
fn a_client_in_another_pid_namespace_connects() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(&role);
    }
    if skipped() {
        return;
    }
    let dog = Watchdog::start(test, secs(60));
    let address = unique("client");
    let server = Server::bind(address.as_str()).expect("bind");
    let mut cmd = ferry_testkit::child_command(test, "client");
    cmd.env(ADDRESS_ENV, &address);
    let mut child = dog.watch(inside(&cmd).spawn().expect("spawn unshare"));
    let client = server
        .accept_timeout(secs(10))
        .expect("the client in another pid namespace");
    assert!(
        client.peer.pid.is_some(),
        "a client in a child namespace has a pid here: {}",
        client.peer
    );
    assert_eq!(client.pipe.recv().expect("ping"), b"ping");
    client.pipe.send(b"pong").expect("pong");
    assert!(child.wait().success(), "the client in the namespace failed");
    assert!(matches!(client.pipe.recv(), Err(RecvError::Disconnected)));
}

/// A server in a new pid namespace takes a client from outside it, whose
/// pid it cannot see: its `Credentials` say `None`.
#[test]
fn a_server_in_another_pid_namespace_takes_clients() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(&role);
    }
    if skipped() {
        return;
    }
    let dog = Watchdog::start(test, secs(60));
    let address = unique("server");
    let mut cmd = ferry_testkit::child_command(test, "server");
    cmd.env(ADDRESS_ENV, &address);
    let mut child = dog.watch(inside(&cmd).spawn().expect("spawn unshare"));
    let pipe = connect_when_up(&address, secs(10));
    pipe.send(b"who am I?").expect("ask");
    let answer = pipe.recv().expect("the server's answer");
    assert_eq!(
        String::from_utf8_lossy(&answer),
        "None",
        "the server in the namespace cannot see this client's pid"
    );
    drop(pipe);
    assert!(child.wait().success(), "the server in the namespace failed");
}

/// A child spawned into a new pid namespace (its parent's pid is not
/// visible to it) takes its pipe and makes a round trip; its exit is seen.
#[test]
fn a_child_spawned_into_a_pid_namespace_takes_its_pipe() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(&role);
    }
    if skipped() {
        return;
    }
    let dog = Watchdog::start(test, secs(60));
    let cmd = inside(&ferry_testkit::child_command(test, "child"));
    assert_eq!(cmd.get_program(), OsStr::new("unshare"));
    let (mut child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new());
    pipe.send(b"ping").expect("ping");
    assert_eq!(pipe.recv().expect("the child's reply"), b"pong");
    assert!(child.wait().success(), "the child in the namespace failed");
    assert!(matches!(pipe.recv(), Err(RecvError::Disconnected)));
}
