//! Descriptors whose close blocks: TCP sockets on 127.0.0.1 with
//! `SO_LINGER {on, 2 s}` and data stuck unsent (the attacker holds the
//! accepting end and never reads it, both buffers small), so the close of
//! their last descriptor waits 2 s. The attacker sends them as descriptor
//! records that the victim drops: named by a message it receives as bytes
//! only, or left unclaimed when a malformed record (itself carrying one)
//! fails the link.

use std::io::{ErrorKind, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use super::RawPeer;
use super::region::sealed_memfd;
use super::wire::{self, RecordKind};
use ferry_testkit::secs;

/// How long a lingering socket's close waits.
pub const LINGER: Duration = Duration::from_secs(2);

/// The payloads of the messages, in order: each names one lingering
/// socket; the third comes after the victim's "go-c".
pub const FIRST: &[u8] = b"first";
/// See [`FIRST`].
pub const SECOND: &[u8] = b"second";
/// See [`FIRST`].
pub const THIRD: &[u8] = b"third";

/// A connected TCP socket whose close waits [`LINGER`], and the accepted
/// end that keeps it waiting while held (it is never read).
pub fn lingering(listener: &TcpListener) -> (OwnedFd, TcpStream) {
    let addr = listener.local_addr().expect("the listener's address");
    let mut client = TcpStream::connect(addr).expect("connect on 127.0.0.1");
    rustix::net::sockopt::set_socket_send_buffer_size(&client, 4096).expect("SO_SNDBUF");
    let (server, _) = listener.accept().expect("accept on 127.0.0.1");
    client.set_nonblocking(true).expect("O_NONBLOCK");
    let chunk = [0x5au8; 65536];
    loop {
        match client.write(&chunk) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) => panic!("fill the socket: {e}"),
        }
    }
    // The file status flags travel with the descriptor: the victim's
    // close must be a blocking one.
    client.set_nonblocking(false).expect("clear O_NONBLOCK");
    rustix::net::sockopt::set_socket_linger(&client, Some(LINGER)).expect("SO_LINGER");
    (OwnedFd::from(client), server)
}

/// A listener whose accepted sockets take in little (small receive buffer).
pub fn small_listener() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind on 127.0.0.1");
    rustix::net::sockopt::set_socket_recv_buffer_size(&listener, 4096).expect("SO_RCVBUF");
    listener
}

/// Sends `bytes` with `fd`, and closes the attacker's own copy at once, so
/// the victim's is the last.
fn send_record(peer: &RawPeer, bytes: &[u8], fd: OwnedFd) {
    peer.socket
        .send_record(bytes, &[fd.as_fd()])
        .expect("send a record");
}

/// The attack: two messages, each naming one lingering socket; after the
/// victim's "go-c", a lingering socket left unclaimed, a malformed record
/// carrying another, a memfd and a message naming it.
pub fn run() {
    let peer = RawPeer::from_bootstrap();
    let listener = small_listener();
    let mut held = Vec::new();
    for (id, payload) in [(1, FIRST), (2, SECOND)] {
        let (fd, server) = lingering(&listener);
        held.push(server);
        send_record(&peer, &wire::record(RecordKind::Fd, 0, id), fd);
        peer.send_message(&[id], payload);
    }
    let go = peer.wait_for_frame(secs(10));
    assert!(
        matches!(&go, Some((_, body)) if body == b"go-c"),
        "the victim never said go-c: {go:?}"
    );
    let (unclaimed, server) = lingering(&listener);
    held.push(server);
    let (inside, server) = lingering(&listener);
    held.push(server);
    send_record(&peer, &wire::record(RecordKind::Fd, 0, 4), unclaimed);
    let mut malformed = wire::record(RecordKind::Fd, 0, 5).to_vec();
    malformed.push(0);
    send_record(&peer, &malformed, inside);
    let memfd = sealed_memfd("linger-claimed", 3).expect("make a memfd");
    send_record(&peer, &wire::record(RecordKind::Fd, 0, 3), memfd);
    peer.send_message(&[3], THIRD);
    // The victim's closes linger while the accepting ends are held, and
    // they are held after the link fails too, until the victim kills this
    // process once its descriptors are closed.
    peer.wait_for_hangup(secs(20));
    std::thread::sleep(secs(20));
    drop(held);
}
