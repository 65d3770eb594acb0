//! The attacks with descriptor records (kind 6, `Fd`): a flood that no
//! frame claims, records with the wrong number of descriptors, ids used
//! twice, and descriptors sent to a receive that takes bytes only. Each
//! waits for the victim's "go", which the victim sends once it has counted
//! its own descriptors, so its count holds none of the attack's.
//!
//! Every descriptor sent is a fresh memfd whose size is the id it is sent
//! under, so the victim can tell which one it got.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use super::RawPeer;
use super::attacks::{END_ID, FLOOD};
use super::region::{RawRegion, sealed_memfd};
use super::wire::{self, RecordKind};
use ferry_testkit::secs;

/// The attacks this file plays.
pub const ATTACKS: &[&str] = &[
    "fd-flood",
    "fd-none",
    "fd-two",
    "fd-five",
    "fd-eight",
    "fd-id-twice",
    "fd-id-of-pipe-end",
    "pipe-end-id-of-fd",
    "fd-named-twice",
    "fd-bytes-only",
];

/// Descriptor records the flood sends, none claimed by the frame the
/// victim reads first.
pub const FLOOD_FDS: u64 = 1000;
/// The id of the flood's first descriptor.
pub const FD_BASE: u64 = 100;
/// How many of the flood's first descriptors the side pipe's message claims.
pub const CLAIMED: u64 = 10;
/// The payload of the message `fd-bytes-only` sends with descriptors.
pub const BYTES_ONLY: &[u8] = b"bytes only";
/// The payload of the message that follows it.
pub const AFTER: &[u8] = b"after";

/// Plays `attack`, one of [`ATTACKS`].
pub fn run(attack: &str) {
    match attack {
        "fd-flood" => flood(),
        "fd-none" => wrong_count(0),
        "fd-two" => wrong_count(2),
        "fd-five" => wrong_count(5),
        "fd-eight" => wrong_count(8),
        "fd-id-twice" => id_twice(Twice::FdFd),
        "fd-id-of-pipe-end" => id_twice(Twice::PipeEndFd),
        "pipe-end-id-of-fd" => id_twice(Twice::FdPipeEnd),
        "fd-named-twice" => named_twice(),
        "fd-bytes-only" => bytes_only(),
        other => panic!("no descriptor attack named {other:?}"),
    }
}

/// A fresh descriptor for `id`: a memfd of `id` bytes.
pub fn fresh(id: u64) -> OwnedFd {
    sealed_memfd("hostile-fd", id).expect("make a memfd")
}

/// Sends an `Fd` record for `id` with `fds` attached (any number of them).
fn send_fd_record(peer: &RawPeer, id: u64, fds: &[OwnedFd]) {
    let fds: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
    let record = wire::record(RecordKind::Fd, 0, id);
    peer.socket
        .send_record(&record, &fds)
        .expect("send a descriptor record");
}

/// Waits for the victim's "go".
fn expect_go(peer: &RawPeer) {
    let go = peer.wait_for_frame(secs(10));
    assert!(
        matches!(&go, Some((_, body)) if body == b"go"),
        "the victim never said go: {go:?}"
    );
}

/// Takes the bootstrap pipe and waits for "go".
fn start() -> RawPeer {
    let peer = RawPeer::from_bootstrap();
    expect_go(&peer);
    peer
}

/// Sends the victim a side pipe (its own region, id [`END_ID`]), then
/// [`FLOOD_FDS`] descriptor records (ids from [`FD_BASE`]) as fast as the
/// socket takes them. Once the socket is full (or all are sent) it
/// publishes a message on the side pipe claiming the first [`CLAIMED`]
/// descriptors, then one on the bootstrap pipe naming the flood's last
/// id, which the victim cannot reach without holding them all; then it
/// sends the rest as the victim reads.
fn flood() {
    let peer = RawPeer::from_bootstrap();
    peer.socket.grow_send_buffer();
    let side = RawRegion::create(4096).expect("make a region");
    peer.send_pipe_end(side.fd(), 1, END_ID);
    peer.send_message(&[END_ID], b"side");
    expect_go(&peer);
    let (start, mut sent, mut published) = (Instant::now(), 0, false);
    let mut next = fresh(FD_BASE);
    while sent < FLOOD_FDS && !peer.done(start, FLOOD) {
        let id = FD_BASE + sent;
        let record = wire::record(RecordKind::Fd, 0, id);
        match peer.socket.try_send_record(&record, &[next.as_fd()]) {
            Ok(true) => {
                sent += 1;
                next = fresh(FD_BASE + sent);
            }
            Ok(false) if !published => {
                publish_claims(&peer, &side);
                published = true;
            }
            Ok(false) => std::thread::sleep(Duration::from_micros(200)),
            Err(_) => break,
        }
    }
    if !published {
        publish_claims(&peer, &side);
    }
    peer.wait_for_hangup(secs(20));
}

/// The side pipe's message claiming the flood's first descriptors, then
/// the bootstrap pipe's naming its last.
fn publish_claims(peer: &RawPeer, side: &RawRegion) {
    let ids: Vec<u64> = (FD_BASE..FD_BASE + CLAIMED).collect();
    let handles = u16::try_from(ids.len()).expect("a few handles");
    let published = side.ring(0).publish_frame_within(
        wire::tag(wire::Kind::Whole, handles),
        &wire::whole_body(&ids, b"claim"),
        secs(10),
    );
    assert!(published, "the side pipe had no room");
    peer.send_message(&[FD_BASE + FLOOD_FDS - 1], b"flood");
}

/// Three valid descriptor records (left pending), then one for id 4 with
/// `count` descriptors, and a message naming id 4.
fn wrong_count(count: u64) {
    let peer = start();
    for id in 1..=3 {
        send_fd_record(&peer, id, &[fresh(id)]);
    }
    let fds: Vec<OwnedFd> = (0..count).map(|_| fresh(4)).collect();
    send_fd_record(&peer, 4, &fds);
    peer.send_message(&[4], b"claim");
    peer.wait_for_hangup(secs(20));
}

/// Which two records share id 1.
#[derive(Debug, Clone, Copy)]
enum Twice {
    /// Two descriptors.
    FdFd,
    /// A pipe end, then a descriptor.
    PipeEndFd,
    /// A descriptor, then a pipe end.
    FdPipeEnd,
}

/// Two records under id 1 (see [`Twice`]), then a descriptor record for
/// id 2, and a message naming id 2: the victim reads all three.
fn id_twice(twice: Twice) {
    let peer = start();
    let own = RawRegion::create(4096).expect("make a region");
    let pipe_end = || peer.send_pipe_end(own.fd(), 1, 1);
    match twice {
        Twice::FdFd => {
            send_fd_record(&peer, 1, &[fresh(1)]);
            send_fd_record(&peer, 1, &[fresh(1)]);
        }
        Twice::PipeEndFd => {
            pipe_end();
            send_fd_record(&peer, 1, &[fresh(1)]);
        }
        Twice::FdPipeEnd => {
            send_fd_record(&peer, 1, &[fresh(1)]);
            pipe_end();
        }
    }
    send_fd_record(&peer, 2, &[fresh(2)]);
    peer.send_message(&[2], b"claim");
    peer.wait_for_hangup(secs(20));
}

/// One descriptor record, and a message naming its id twice.
fn named_twice() {
    let peer = start();
    send_fd_record(&peer, 1, &[fresh(1)]);
    peer.send_message(&[1, 1], b"claim");
    peer.wait_for_hangup(secs(20));
}

/// Three descriptors and a pipe end, all named by one message, then a
/// message with nothing attached: the victim receives both as bytes only.
fn bytes_only() {
    let peer = start();
    for id in 1..=3 {
        send_fd_record(&peer, id, &[fresh(id)]);
    }
    let own = RawRegion::create(4096).expect("make a region");
    peer.send_pipe_end(own.fd(), 1, 4);
    peer.send_message(&[1, 2, 3, 4], BYTES_ONLY);
    peer.send_message(&[], AFTER);
    peer.wait_for_hangup(secs(20));
}
