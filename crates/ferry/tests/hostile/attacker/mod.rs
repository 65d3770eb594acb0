//! A hand-written ferry peer for the hostile tests: it speaks the wire
//! protocol by hand (raw socket records, raw shared memory), never through
//! ferry's API, so it can say anything an attacker could.
//!
//! - [`wire`]: the encodings (region header, frame tags, records).
//! - [`socket`]: the control socket, `sendmsg`/`recvmsg` with `SCM_RIGHTS`.
//! - [`region`]: mapping the victim's region, making the attacker's own.
//! - [`ring`]: positions, frames and futex wakes on one ring.
//! - [`report`]: how a victim process reports to the test that runs it.
//! - [`named`]: raw clients and listeners at a ferry server's name.
//! - [`fd_records`]: the attacks with descriptor records.
//! - [`hide_death`]: a peer that sends its own control socket, then dies.
//! - [`linger`]: descriptors whose close blocks.
//! - [`routes`]: a forwarder that lies in its routing records.
//!
//! [`RawPeer::from_bootstrap`] starts an attacker the way `Pipe::from_parent`
//! starts an honest child: it takes the socket named in `FERRY_BOOTSTRAP`,
//! receives the pipe end its parent (the victim) sent as record id 0, role 1,
//! and maps it. As role 1 it writes ring 1 and reads ring 0.
#![allow(dead_code)] // each test uses its own subset

pub mod attacks;
pub mod fd_records;
pub mod hide_death;
pub mod linger;
pub mod named;
pub mod region;
pub mod report;
pub mod ring;
pub mod routes;
pub mod socket;
pub mod wire;

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use region::RawRegion;
use ring::RawRing;
use socket::RawSocket;
use wire::RecordKind;

/// The attacker's side of the bootstrap pipe: its socket and region.
#[derive(Debug)]
pub struct RawPeer {
    /// The control socket to the victim.
    pub socket: RawSocket,
    /// The bootstrap pipe's region, made by the victim (or, for a named
    /// server's client, by this side).
    pub region: RawRegion,
    /// The ring this side writes (the other it reads).
    pub writes: usize,
}

impl RawPeer {
    /// Starts the attacker: dies with its parent (the victim), adopts the
    /// inherited socket, and maps the pipe end the victim sent first.
    pub fn from_bootstrap() -> Self {
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
        Self::from_socket(RawSocket::from_bootstrap())
    }

    /// Opens a named server's `socket` as a ferry client does: a region
    /// of its own (rings of 64 KiB) sent with the opening, of which the
    /// server takes end 1; then waits for the welcome.
    pub fn open_to_server(socket: RawSocket) -> Self {
        let region = RawRegion::create(64 << 10).expect("make the pipe's region");
        let hello = wire::hello(wire::HANDSHAKE_VERSION, None);
        socket
            .send_record(&hello, &[region.fd()])
            .expect("send the opening");
        let answer = socket
            .recv(true)
            .expect("receive the server's answer")
            .expect("the server answered");
        assert_eq!(answer.bytes, wire::welcome(), "the server's welcome");
        Self {
            socket,
            region,
            writes: 0,
        }
    }

    /// Starts on `socket`, a bootstrap socket: maps the pipe end the other
    /// side sent first.
    pub fn from_socket(socket: RawSocket) -> Self {
        let first = socket
            .recv(true)
            .expect("receive the bootstrap record")
            .expect("the victim sent the bootstrap pipe end");
        let record = wire::parse_record(&first.bytes).expect("a control record");
        assert_eq!(
            (record.kind, record.arg, record.id),
            (RecordKind::PipeEnd as u16, 1, 0),
            "the bootstrap record is pipe end id 0, role 1"
        );
        let fd = first.fds.into_iter().next().expect("the region descriptor");
        let region = RawRegion::map(fd).expect("map the bootstrap region");
        Self {
            socket,
            region,
            writes: 1,
        }
    }

    /// The ring this side writes (ring 1 of a bootstrap pipe).
    pub fn outbound(&self) -> RawRing<'_> {
        self.region.ring(self.writes)
    }

    /// The ring this side reads (ring 0 of a bootstrap pipe).
    pub fn inbound(&self) -> RawRing<'_> {
        self.region.ring(1 - self.writes)
    }

    /// Sends `region` as pipe end `id`, the victim to hold end `role`.
    pub fn send_pipe_end(&self, region: BorrowedFd<'_>, role: u16, id: u64) {
        let record = wire::record(RecordKind::PipeEnd, role, id);
        self.socket
            .send_record(&record, &[region])
            .expect("send a pipe end record");
    }

    /// Publishes a `Whole` message on the outbound ring, waiting for room.
    pub fn send_message(&self, ids: &[u64], payload: &[u8]) {
        let handles = u16::try_from(ids.len()).expect("at most 65,535 handles");
        let published = self.outbound().publish_frame_within(
            wire::tag(wire::Kind::Whole, handles),
            &wire::whole_body(ids, payload),
            Duration::from_secs(10),
        );
        assert!(published, "the victim left no room for a message");
    }

    /// Waits for the next frame the victim publishes on the inbound ring,
    /// at most `limit`; its tag and body.
    pub fn wait_for_frame(&self, limit: Duration) -> Option<(u32, Vec<u8>)> {
        let start = Instant::now();
        loop {
            if let Some(frame) = self.inbound().take_frame() {
                return Some(frame);
            }
            if self.done(start, limit) {
                return None;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits until the victim hangs up, at most `limit`.
    pub fn wait_for_hangup(&self, limit: Duration) {
        let start = Instant::now();
        while !self.socket.hung_up() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Whether the attack should stop: the victim hung up, or `limit`
    /// passed since `start`.
    pub fn done(&self, start: Instant, limit: Duration) -> bool {
        start.elapsed() >= limit || self.socket.hung_up()
    }
}
