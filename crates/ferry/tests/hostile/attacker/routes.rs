//! The attacks with routing records: a forwarder that lies about where the
//! sending side of the bootstrap pipe's ring 1 went (the attacker holds it;
//! the victim reads that ring). Each waits for the victim's "go" (its
//! descriptors counted), sends its records, bumps the side's `moved` count
//! as a mover does, then publishes a message after them.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::RawPeer;
use super::ring::Side;
use super::wire;
use ferry_testkit::secs;

/// The attacks this file plays.
pub const ATTACKS: &[&str] = &[
    "route-boundary",
    "route-no-socket",
    "route-pipe-not-socket",
    "route-routed-consumer",
    "route-bump-only",
    "route-dead-end",
    "route-moved-flood",
    "route-naming-forever",
    "route-moving-forever",
    "route-join-same-ring",
    "route-join-unfinished",
    "route-move-churn",
    "route-move-frames",
    "route-prefix-not-receiver",
    "route-prefix-never",
    "route-followed-lie",
];

/// The payload of the message published after the records.
pub const AFTER: &[u8] = b"after the move";
/// Moves the flood sends: past the most a link keeps unfollowed (4096).
pub const FLOOD_MOVES: u64 = 4200;
/// Moves the churn makes, each to a new socket, with nothing written
/// between them.
pub const CHURN_MOVES: usize = 3000;
/// Moves made with a message written before each (past the most links a
/// route keeps for unread frames at a soft limit of 1,024: 64).
pub const FRAMED_MOVES: usize = 200;
/// The payload of each message written between moves.
pub const BETWEEN: &[u8] = b"x";
/// Kinds of routing record.
const MOVED: u16 = 2;
const ROUTED: u16 = 6;
/// `2 * ring + side` for the producer side of ring 1 (the attacker's).
const RING1_PRODUCER: u16 = 2;
/// `2 * ring + side` for the consumer side of ring 0 (the victim's).
const RING0_CONSUMER: u16 = 1;
/// Added to a `Routed` record's `arg`: the other side of a whole end
/// follows under the same id.
const JOINS: u16 = 4;
/// Added to a receiving side's `Routed` record's `arg`: its prefix
/// follows as a `PipeEnd` record under the same id.
const PREFIXED: u16 = 8;
/// A plain `PipeEnd` record's `arg` for a sending half of ring 0.
const SENDER_RING0: u16 = 2;

/// Plays `attack`, one of [`ATTACKS`].
pub fn run(attack: &str) {
    let peer = RawPeer::from_bootstrap();
    let go = peer.wait_for_frame(secs(10));
    assert!(
        matches!(&go, Some((_, body)) if body == b"go"),
        "the victim never said go: {go:?}"
    );
    let inode = rustix::fs::fstat(peer.region.fd())
        .expect("fstat the region")
        .st_ino;
    let tail = peer.outbound().tail();
    let (kept, theirs) = seqpacket_pair();
    match attack {
        // A boundary past everything the ring holds.
        "route-boundary" => moved(&peer, inode, tail + 4096, &[theirs.as_fd()]),
        "route-no-socket" => moved(&peer, inode, tail, &[]),
        "route-pipe-not-socket" => {
            let (read, _write) = rustix::pipe::pipe().expect("a pipe");
            moved(&peer, inode, tail, &[read.as_fd()]);
        }
        // A receiving side routed to the victim with no socket (as if it
        // came home, which only a sending side does), named by the message
        // after it.
        "route-routed-consumer" => {
            let record = wire::route_record(ROUTED, 1, 9, tail);
            peer.socket
                .send_record(&record, &[peer.region.fd()])
                .expect("send a routed record");
            peer.send_message(&[9], AFTER);
            peer.wait_for_hangup(secs(20));
            return;
        }
        // A whole end whose two routed sides are the same side twice, or
        // whose second side never comes, named by the message after them.
        "route-join-same-ring" | "route-join-unfinished" => {
            let first = wire::route_record(ROUTED, RING0_CONSUMER + JOINS, 9, 0);
            peer.socket
                .send_record(&first, &[peer.region.fd(), theirs.as_fd()])
                .expect("send the first side");
            if attack == "route-join-same-ring" {
                let second = wire::route_record(ROUTED, RING0_CONSUMER, 9, 0);
                peer.socket
                    .send_record(&second, &[peer.region.fd(), theirs.as_fd()])
                    .expect("send the same side again");
            }
            peer.send_message(&[9], AFTER);
            peer.wait_for_hangup(secs(20));
            return;
        }
        // The count bumped with no record behind it.
        "route-bump-only" => {}
        // A receiving side said to come with a prefix, whose prefix is a
        // sending half, or never comes: named by the message after it.
        "route-prefix-not-receiver" | "route-prefix-never" => {
            let first = wire::route_record(ROUTED, RING0_CONSUMER + PREFIXED, 9, 0);
            peer.socket
                .send_record(&first, &[peer.region.fd(), theirs.as_fd()])
                .expect("send the receiving side");
            if attack == "route-prefix-not-receiver" {
                let region = super::region::RawRegion::create(4096).expect("a region");
                let prefix = wire::record(wire::RecordKind::PipeEnd, SENDER_RING0, 9);
                peer.socket
                    .send_record(&prefix, &[region.fd()])
                    .expect("send a sending half as the prefix");
            }
            peer.send_message(&[9], AFTER);
            peer.wait_for_hangup(secs(20));
            return;
        }
        // A chain of moves, each to a new socket and told over the one
        // before (which is then closed), with nothing written between
        // them (or a message before each): the victim follows them all.
        "route-move-churn" | "route-move-frames" => {
            let framed = attack == "route-move-frames";
            let moves = if framed { FRAMED_MOVES } else { CHURN_MOVES };
            let mut current: Option<super::socket::RawSocket> = None;
            for _ in 0..moves {
                if framed {
                    peer.send_message(&[], BETWEEN);
                }
                let boundary = peer.outbound().tail();
                let (next, sent) = seqpacket_pair();
                let record = wire::route_record(MOVED, RING1_PRODUCER, inode, boundary);
                current
                    .as_ref()
                    .unwrap_or(&peer.socket)
                    .send_record(&record, &[sent.as_fd()])
                    .expect("send a moved record");
                current = Some(super::socket::RawSocket::from_fd(next));
                if framed {
                    peer.outbound().bump_moved(Side::Producer);
                }
            }
            drop(kept);
            if !framed {
                peer.outbound().bump_moved(Side::Producer);
            }
            peer.send_message(&[], AFTER);
            peer.wait_for_hangup(secs(20));
            drop(current);
            return;
        }
        // A sender that never leaves its naming section, so the victim's
        // forward of its receiver can never fix its boundary.
        "route-naming-forever" | "route-moving-forever" | "route-followed-lie" => {
            // The victim sends the sending half of a pipe of its own; this
            // side then says, in that pipe's ring 1, that it names its
            // link, and never stops; then tells the victim so.
            let sent = peer
                .socket
                .recv_within(secs(10))
                .expect("read the socket")
                .expect("the sending half's record");
            let fd = sent.fds.into_iter().next().expect("its region");
            let region = super::region::RawRegion::map(fd).expect("map its region");
            match attack {
                "route-naming-forever" => region.ring(1).set_naming(true),
                // The victim's first move of its receiving side will be
                // count 1: a switch past anything the ring holds.
                "route-followed-lie" => region.ring(1).set_followed(1, 1 << 40),
                _ => region.ring(1).set_moving(true),
            }
            peer.send_message(&[], b"naming");
            peer.wait_for_hangup(secs(20));
            drop(region);
            return;
        }
        // An introduction to nowhere: the other end of the socket is
        // closed at once.
        "route-dead-end" => moved(&peer, inode, tail, &[theirs.as_fd()]),
        "route-moved-flood" => {
            peer.socket.grow_send_buffer();
            for n in 0..FLOOD_MOVES {
                let record = wire::route_record(MOVED, RING1_PRODUCER, n + 1, tail);
                if !peer
                    .socket
                    .try_send_record(&record, &[theirs.as_fd()])
                    .unwrap_or(false)
                {
                    break;
                }
            }
        }
        other => panic!("no routing attack named {other:?}"),
    }
    // The socket's other end closes here, so a victim that followed the
    // move finds the new path gone, while this process lives on: its own
    // death is not what tells.
    drop(kept);
    peer.outbound().bump_moved(Side::Producer);
    peer.send_message(&[], AFTER);
    peer.wait_for_hangup(secs(20));
}

/// Sends a `Moved` record for ring 1's producer side of the region with
/// `inode`, from `boundary`, with `fds`.
fn moved(peer: &RawPeer, inode: u64, boundary: u64, fds: &[BorrowedFd<'_>]) {
    let record = wire::route_record(MOVED, RING1_PRODUCER, inode, boundary);
    peer.socket
        .send_record(&record, fds)
        .expect("send a moved record");
}

/// A Unix packet socket pair: the end kept here and the end sent.
fn seqpacket_pair() -> (OwnedFd, OwnedFd) {
    rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .expect("a socket pair")
}
