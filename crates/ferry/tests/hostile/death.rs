//! A peer that hides its own death: a raw attacker (`attacker/hide_death.rs`)
//! sends its own end of the control socket to the victim as a descriptor
//! record, so the victim holds it open and the socket never hangs up, then
//! exits or is killed. The victim must see it gone anyway (ferry watches
//! the peer process, not only the socket): a blocking `recv` returns
//! `Disconnected` within a few seconds, and `recv_timeout` says
//! `Disconnected`, not `Timeout`; what the attacker sent before it died is
//! delivered first.
//!
//! The victim is this test; the attacker is a child it spawned with
//! `ferry::spawn`, or a raw client of its named server.

use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::attacker::hide_death::{ATTACKS, LAST, NAMING};
use ferry::{Pipe, PipeOptions, Server};
use ferry_testkit::{Watchdog, secs, this_test};

/// How long a victim may take to see the attacker gone: it is pushed by
/// the kernel within a millisecond or so; the margin is for a busy machine.
const GONE_WITHIN: Duration = Duration::from_secs(3);
/// The timeout of a `recv_timeout` call, longer than [`GONE_WITHIN`].
const TIMEOUT: Duration = Duration::from_secs(5);
/// The environment variable naming the server to the raw client.
const SERVER_ENV: &str = "FERRY_TEST_HIDE_SERVER";

/// How a victim waits for the next message.
#[derive(Debug, Clone, Copy)]
enum Call {
    Blocking,
    Timeout,
}

/// Receives the attacker's message: with `named`, the one that carries
/// its socket (kept open, returned); otherwise its last words.
fn take_message(pipe: &Pipe, attack: &str) -> Vec<OwnedFd> {
    if attack.contains("-named-") {
        let message = pipe
            .receiver()
            .recv_with()
            .expect("the message naming the socket");
        assert_eq!(
            message.bytes, NAMING,
            "{attack}: the message naming the socket"
        );
        assert_eq!(
            message.fds.len(),
            1,
            "{attack}: the attacker's socket arrives"
        );
        message.fds
    } else {
        let bytes = pipe.recv().expect("the last words");
        assert_eq!(bytes, LAST, "{attack}: the attacker's last words");
        Vec::new()
    }
}

/// Checks that `call` on `pipe` says `Disconnected` within [`GONE_WITHIN`]
/// (the call runs on a thread of its own, so a call that never returns
/// fails the test instead of hanging it); the failure, if not.
fn expect_gone(pipe: Pipe, call: Call, what: &str) -> Result<(), String> {
    let pipe = Arc::new(pipe);
    let (tx, rx) = mpsc::channel();
    let receiver = Arc::clone(&pipe);
    let start = Instant::now();
    thread::spawn(move || {
        let got = match call {
            Call::Blocking => receiver.recv().map_err(|e| format!("{e:?}")),
            Call::Timeout => receiver
                .receiver()
                .recv_timeout(TIMEOUT)
                .map_err(|e| format!("{e:?}")),
        };
        let _ = tx.send((got, start.elapsed()));
    });
    let (got, took) = rx.recv_timeout(TIMEOUT + secs(2)).map_err(|_| {
        format!(
            "{what}: a {call:?} recv still waits {:?} after the peer died",
            start.elapsed()
        )
    })?;
    println!("{what}, {call:?}: {got:?} after {took:?}");
    if got != Err("Disconnected".to_string()) {
        return Err(format!(
            "{what}: a {call:?} recv gave {got:?} after {took:?}, not Disconnected"
        ));
    }
    match took < GONE_WITHIN {
        true => Ok(()),
        false => Err(format!(
            "{what}: a {call:?} recv took {took:?} to see the peer gone"
        )),
    }
}

/// Fails the test with every failure found, if any.
fn finish(failures: Vec<String>) {
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A spawned child sends its own control socket and dies: its parent's
/// receives see it gone (each attack, with a blocking `recv` and with
/// `recv_timeout`).
#[test]
fn spawned_peer_cannot_hide_its_death() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        crate::attacker::hide_death::run(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(120));
    let mut failures = Vec::new();
    for attack in ATTACKS {
        for call in [Call::Blocking, Call::Timeout] {
            let cmd = ferry_testkit::child_command(test, attack);
            let (mut child, pipe) = ferry_testkit::spawn_command(&dog, cmd, &PipeOptions::new());
            let held = take_message(&pipe, attack);
            failures.extend(expect_gone(pipe, call, attack).err());
            drop(held);
            child.wait();
        }
    }
    finish(failures);
}

/// A raw client of a named server sends its own control socket and dies:
/// the server's end of its pipe sees it gone.
#[test]
fn client_cannot_hide_its_death_from_a_server() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        let name = std::env::var(SERVER_ENV).expect("the server's name");
        crate::attacker::hide_death::client(&name, &role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(120));
    let mut failures = Vec::new();
    let name = format!("hidden-death-{}", std::process::id());
    let server = Server::bind(name.as_str()).expect("bind the server");
    for attack in ATTACKS {
        for call in [Call::Blocking, Call::Timeout] {
            let mut cmd = ferry_testkit::child_command(test, attack);
            cmd.env(SERVER_ENV, &name).stdout(Stdio::null());
            let mut child = dog.watch(cmd.spawn().expect("spawn the raw client"));
            let client = server.accept_timeout(secs(10)).expect("the raw client");
            let held = take_message(&client.pipe, attack);
            let what = format!("server, {attack}");
            failures.extend(expect_gone(client.pipe, call, &what).err());
            drop(held);
            child.wait();
        }
    }
    finish(failures);
}
