//! The attacks: one function per attacker role, each run in the attacker
//! process (spawned by the victim with `ferry::spawn`) under its own
//! watchdog. None of them uses ferry's API.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::RawPeer;
use super::region::{RawRegion, sealed_memfd};
use super::ring::{RawRing, Side};
use super::wire::{self, Kind, RecordKind, tag};
use ferry_testkit::{Watchdog, monotonic_ns, secs};

/// The id under which attacks send their own pipe end.
pub const END_ID: u64 = 7;
/// A handle id the attacker never sends.
pub const NEVER_SENT: u64 = 1 << 40;
/// How long a flood lasts at most (the victim hangs up sooner if it can).
pub const FLOOD: Duration = Duration::from_secs(3);
/// How long the wake storm lasts.
pub const STORM: Duration = Duration::from_secs(2);

/// Plays attacker `role` (the part after `attacker-`).
pub fn run(role: &str) {
    let _dog = Watchdog::start(format!("attacker `{role}`"), secs(30));
    let attack = role.strip_prefix("attacker-").unwrap_or(role);
    match attack {
        "positions-a" => bad_positions(4093, 4093, false),
        "positions-b" => bad_positions(u64::MAX - 3, 0, false),
        "positions-c" => bad_positions(u64::MAX - 7, u64::MAX - 7, true),
        "handles-254" => pipe_ends_ahead(254, true),
        "handles-32767" => pipe_ends_ahead(32_767, true),
        "regions-ahead" => pipe_ends_ahead(4096, false),
        "first-abort" => first_abort_forever(),
        "first-more" => first_then_more_forever(),
        "records" => records_forever(),
        "silent" => silent(),
        "wake-storm" => wake_storm(),
        "doorbell-pipe" => doorbells(false),
        "doorbell-flood" => doorbells(true),
        "clone-flood" => clone_flood(),
        fd if super::fd_records::ATTACKS.contains(&fd) => super::fd_records::run(fd),
        route if super::routes::ATTACKS.contains(&route) => super::routes::run(route),
        other => panic!("no attack named {other:?}"),
    }
}

/// Sends a pipe end of the attacker's own 4 KiB region whose rings both
/// claim `tail` and `head`, in a `Whole` frame with one handle; then, with
/// `echo`, sends back every message the victim writes into it.
fn bad_positions(tail: u64, head: u64, echo: bool) {
    let peer = RawPeer::from_bootstrap();
    let own = RawRegion::create(4096).expect("make a region");
    for index in 0..2 {
        let ring = own.ring(index);
        ring.set_tail(tail);
        ring.set_head(head);
    }
    // The victim holds end 1: it writes ring 1 and reads ring 0.
    peer.send_pipe_end(own.fd(), 1, END_ID);
    peer.send_message(&[END_ID], b"end");
    if echo {
        echo_frames(&peer, own.ring(1), own.ring(0));
    } else {
        peer.wait_for_hangup(secs(20));
    }
}

/// Copies each frame published on `from` onto `to` until the victim hangs up.
fn echo_frames(peer: &RawPeer, from: RawRing<'_>, to: RawRing<'_>) {
    let start = Instant::now();
    while !peer.done(start, secs(20)) {
        match from.take_frame() {
            Some((tag, body)) => {
                if !to.publish_frame_within(tag, &body, secs(5)) {
                    return;
                }
            }
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}

/// Sends pipe ends `1..=count` of one maximal region (rings of 1 GiB: a
/// sparse 2 GiB + 4 KiB memfd) as fast as the socket takes them, and a
/// `Whole` frame claiming all of them (`claim_all`) or only the last; then
/// keeps sending the rest as the victim drains the socket.
fn pipe_ends_ahead(count: u64, claim_all: bool) {
    let peer = RawPeer::from_bootstrap();
    peer.socket.grow_send_buffer();
    let big = RawRegion::create(1 << 30).expect("make a maximal region");
    let send = |id: u64| {
        let record = wire::record(RecordKind::PipeEnd, 0, id);
        peer.socket.try_send_record(&record, &[big.fd()])
    };
    let mut next = 1;
    while next <= count && matches!(send(next), Ok(true)) {
        next += 1;
    }
    let ids: Vec<u64> = match claim_all {
        true => (1..=count).collect(),
        false => vec![count],
    };
    peer.send_message(&ids, b"");
    let start = Instant::now();
    while next <= count && !peer.done(start, secs(10)) {
        match send(next) {
            Ok(true) => next += 1,
            Ok(false) => std::thread::sleep(Duration::from_micros(20)),
            Err(_) => break,
        }
    }
    peer.wait_for_hangup(secs(20));
}

/// Ring bytes of the "go" message, the first frame of a fresh ring.
const GO: u64 = wire::frame_size(2);

/// Sends "go" and waits until the victim has read it.
fn go(peer: &RawPeer) {
    peer.send_message(&[], b"go");
    let ring = peer.outbound();
    let start = Instant::now();
    while ring.head() != ring.tail() {
        assert!(start.elapsed() < secs(10), "the victim never read \"go\"");
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A ring's data area, prepared in private memory: frames placed at ring
/// positions (wrapping), to be copied into the ring at once.
struct Image {
    bytes: Vec<u8>,
}

impl Image {
    /// An image of a ring of `capacity` bytes, all zero.
    fn new(capacity: usize) -> Self {
        Self {
            bytes: vec![0; capacity],
        }
    }

    /// Places a frame at ring position `pos`; returns the position after it.
    fn frame(&mut self, pos: u64, tag: u32, body: &[u8]) -> u64 {
        let len = u32::try_from(body.len()).expect("a small body");
        let mut frame = wire::frame_header(len, tag).to_vec();
        frame.extend_from_slice(body);
        frame.resize(wire::frame_size(body.len()) as usize, 0);
        let mask = self.bytes.len() as u64 - 1;
        for (i, byte) in frame.iter().enumerate() {
            self.bytes[(pos.wrapping_add(i as u64) & mask) as usize] = *byte;
        }
        pos.wrapping_add(frame.len() as u64)
    }
}

/// Copies `image` into the fresh outbound ring, except where "go" goes;
/// sends "go", waits until the victim has read it, and copies the rest.
/// The ring then holds the image, and the victim's head is at [`GO`].
fn go_over(peer: &RawPeer, image: &Image) {
    let ring = peer.outbound();
    assert_eq!(ring.tail(), 0, "a fresh ring");
    ring.write_at(GO, &image.bytes[GO as usize..]);
    go(peer);
    ring.write_at(0, &image.bytes[..GO as usize]);
}

/// Keeps the victim's ring full of the frames already written there (a
/// pattern that repeats every ring capacity): each time the victim reads,
/// the tail moves to one capacity past its head. No copying, so the
/// victim can never catch up.
fn flood(peer: &RawPeer, ring: RawRing<'_>) {
    let cap = ring.capacity() as u64;
    let start = Instant::now();
    loop {
        for _ in 0..1024 {
            let target = ring.head().wrapping_add(cap);
            if target != ring.tail() {
                ring.set_tail(target);
                ring.notify(Side::Producer);
            }
        }
        if peer.done(start, FLOOD) {
            return;
        }
    }
}

/// Floods the victim with `First` + `Abort` pairs (32 bytes, so the
/// pattern repeats every ring capacity): messages begun and dropped, none
/// ever complete.
fn first_abort_forever() {
    let peer = RawPeer::from_bootstrap();
    let ring = peer.outbound();
    let mut first = 64u64.to_le_bytes().to_vec();
    first.extend_from_slice(&[0xab; 8]);
    let mut image = Image::new(ring.capacity());
    let mut pos = GO;
    while pos < GO + ring.capacity() as u64 {
        pos = image.frame(pos, tag(Kind::First, 0), &first);
        pos = image.frame(pos, tag(Kind::Abort, 0), &[]);
    }
    go_over(&peer, &image);
    flood(&peer, ring);
    peer.wait_for_hangup(secs(20));
}

/// Floods the victim with one `First` (of a 1 MiB message) and then empty
/// `More` frames forever.
fn first_then_more_forever() {
    let peer = RawPeer::from_bootstrap();
    let ring = peer.outbound();
    let cap = ring.capacity() as u64;
    let mut image = Image::new(ring.capacity());
    let mut pos = image.frame(GO, tag(Kind::First, 0), &(1u64 << 20).to_le_bytes());
    let first = pos - GO;
    while pos < GO + cap {
        pos = image.frame(pos, tag(Kind::More, 0), &[]);
    }
    go_over(&peer, &image);
    ring.set_tail(GO + cap);
    ring.notify(Side::Producer);
    // Once the victim has read the `First`, its slot becomes `More` too,
    // and the whole ring repeats.
    let began = Instant::now();
    while ring.head().wrapping_sub(GO) < first {
        if peer.done(began, FLOOD) {
            return;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    let more = tag(Kind::More, 0);
    ring.write_frame_at(GO, more, &[]);
    ring.write_frame_at(GO + 8, more, &[]);
    flood(&peer, ring);
    peer.wait_for_hangup(secs(20));
}

/// A `Whole` frame with one handle that is never sent, while valid
/// `Block` (4 KiB, class 0) and `Retire` records for fresh ids keep the
/// victim's socket busy forever: the socket is filled first, then "go"
/// and the frame are published, and two threads keep the socket full,
/// each announcing and retiring its own ids.
fn records_forever() {
    let peer = RawPeer::from_bootstrap();
    peer.socket.grow_send_buffer();
    let block = sealed_memfd("hostile-block", 4096).expect("make a block");
    let mut counts = [0u64; 2];
    fill_with_blocks(&peer.socket, &block, 0, &mut counts[0], None);
    peer.send_message(&[], b"go");
    peer.send_message(&[NEVER_SENT], b"");
    let start = Instant::now();
    std::thread::scope(|s| {
        for (lane, count) in counts.iter_mut().enumerate() {
            let (socket, block) = (&peer.socket, &block);
            s.spawn(move || fill_with_blocks(socket, block, lane as u64, count, Some(start)));
        }
    });
    peer.wait_for_hangup(secs(20));
}

/// Sends `Block` + `Retire` record pairs on `socket` for ids of `lane`
/// (ids `2k + lane`, below 65,536), from pair `*count` on. Without
/// `since`, until the socket is full; with it, for [`FLOOD`] after
/// `since`, or until the victim hangs up.
fn fill_with_blocks(
    socket: &super::socket::RawSocket,
    block: &std::os::fd::OwnedFd,
    lane: u64,
    count: &mut u64,
    since: Option<Instant>,
) {
    loop {
        let id = (2 * (*count / 2) + lane) % 65_536;
        let sent = match *count % 2 {
            0 => {
                let record = wire::record(RecordKind::Block, 0, id);
                socket.try_send_record(&record, &[block.as_fd()])
            }
            _ => socket.try_send_record(&wire::record(RecordKind::Retire, 0, id), &[]),
        };
        match (sent, since) {
            (Ok(true), _) => *count += 1,
            (Ok(false), None) | (Err(_), _) => return,
            (Ok(false), Some(_)) => std::thread::yield_now(),
        }
        if let Some(since) = since
            && count.is_multiple_of(256)
            && (since.elapsed() >= FLOOD || socket.hung_up())
        {
            return;
        }
    }
}

/// Takes the pipe end, then never reads the socket or the ring again.
fn silent() {
    let _peer = RawPeer::from_bootstrap();
    std::thread::sleep(secs(25));
}

/// Waits until the victim sleeps in `recv`, then bumps the word it sleeps
/// on and wakes it, over and over, for [`STORM`], publishing nothing;
/// then publishes one real message: the monotonic time it was sent and the
/// number of wakes.
fn wake_storm() {
    let peer = RawPeer::from_bootstrap();
    let ring = peer.outbound();
    let start = Instant::now();
    while !ring.waiting(Side::Consumer) {
        assert!(start.elapsed() < secs(10), "the victim never slept");
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = Instant::now();
    let mut wakes = 0u64;
    while start.elapsed() < STORM {
        for _ in 0..64 {
            ring.wake(Side::Producer);
        }
        wakes += 64;
    }
    let mut payload = monotonic_ns().to_le_bytes().to_vec();
    payload.extend_from_slice(&wakes.to_le_bytes());
    peer.send_message(&[], &payload);
    peer.wait_for_hangup(secs(20));
}

/// Rounds of the doorbell flood, each a message with one pipe end.
pub const DOORBELL_ROUNDS: u64 = 3;

/// Doorbell records ahead of a pipe end and the message that claims it:
/// with `flood`, as many as the socket takes per round, each with a fresh
/// (valid) datagram socket and naming every side of the bootstrap region
/// and regions that do not exist; without, one whose descriptor is a pipe.
fn doorbells(flood: bool) {
    let peer = RawPeer::from_bootstrap();
    peer.socket.grow_send_buffer();
    let own = RawRegion::create(4096).expect("make a region");
    let inode = rustix::fs::fstat(peer.region.fd()).map_or(0, |s| s.st_ino);
    if !flood {
        let (_reader, writer) = std::io::pipe().expect("a pipe");
        let record = wire::record(RecordKind::Doorbell, 1, inode);
        peer.socket
            .send_record(&record, &[writer.as_fd()])
            .expect("send the doorbell");
        peer.send_pipe_end(own.fd(), 1, END_ID);
        peer.send_message(&[END_ID], b"end");
        return peer.wait_for_hangup(secs(20));
    }
    for round in 0..DOORBELL_ROUNDS {
        let mut sent = 0u64;
        loop {
            let (a, _b) = std::os::unix::net::UnixDatagram::pair().expect("a socket pair");
            let region = if sent.is_multiple_of(2) { inode } else { sent };
            let record = wire::record(RecordKind::Doorbell, (sent % 4) as u16, region);
            // Room for the pipe end and its message after the flood.
            if sent >= 200
                || !matches!(peer.socket.try_send_record(&record, &[a.as_fd()]), Ok(true))
            {
                break;
            }
            sent += 1;
        }
        let id = END_ID + round;
        let end = RawRegion::create(4096).expect("make a region");
        peer.send_pipe_end(end.fd(), 1, id);
        peer.send_message(&[id], &sent.to_le_bytes());
    }
    peer.wait_for_hangup(secs(20));
}

/// Messages on the victim's own ring in the clone flood.
pub const OWN_MESSAGES: u64 = 10;

/// Attaches a ring of its own to the victim's receiver (a receiving half
/// sent with an `Attach` frame, as a travelled clone of the sender is),
/// floods it with messages as fast as the victim makes room, and puts
/// [`OWN_MESSAGES`] messages on the bootstrap ring itself meanwhile; until
/// the victim hangs up.
fn clone_flood() {
    let peer = RawPeer::from_bootstrap();
    let clone = RawRegion::create(4096).expect("make the clone's region");
    // The victim reads ring 0 of it: a receiving half (`arg` 4 + ring).
    let record = wire::record(RecordKind::PipeEnd, 4, END_ID);
    peer.socket
        .send_record(&record, &[clone.fd()])
        .expect("send the clone's ring");
    let attach = END_ID.to_le_bytes();
    assert!(
        peer.outbound()
            .publish_frame_within(tag(Kind::Attach, 1), &attach, secs(5)),
        "no room for the attach frame"
    );
    let ring = clone.ring(0);
    let mut sent = 0u64;
    let publish_clone = |sent: &mut u64| {
        let body = format!("clone {sent}");
        if ring.publish_frame(tag(Kind::Whole, 0), body.as_bytes()) {
            *sent += 1;
        }
    };
    // The clone's ring full first, then the victim's own messages.
    for _ in 0..512 {
        publish_clone(&mut sent);
    }
    for i in 0..OWN_MESSAGES {
        peer.send_message(&[], format!("own {i}").as_bytes());
    }
    let start = Instant::now();
    while !peer.done(start, FLOOD) {
        publish_clone(&mut sent);
        std::hint::spin_loop();
    }
    peer.wait_for_hangup(secs(20));
}
