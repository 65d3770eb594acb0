//! A link joins this process to one peer process: the control socket
//! (descriptor passing, and the peer's death seen as a hang-up) shared by
//! every pipe between the two.
//!
//! Many pipes share one link, so descriptors grow with peers, not pipes: a
//! pipe's shared memory crosses the socket once, is mapped, and its
//! descriptor is closed at once on both sides.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::shm::Region;
use crate::sys::ControlSocket;
use crate::sys::linux::socket::Received;
use crate::wire::record::{PipeEnd, RECORD_LEN};

/// The id of the pipe a spawned child receives from its parent.
pub(crate) const BOOTSTRAP_ID: u64 = 0;

/// Most pipe ends a peer may send ahead of the messages that claim them.
const MAX_PENDING: usize = 4096;

/// Why a link is no longer usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The peer process closed its end or died.
    HungUp,
    /// The peer broke the wire rules; the link was shut down.
    Protocol(&'static str),
}

/// One end of the connection to a peer process.
#[derive(Debug)]
pub struct Link {
    socket: ControlSocket,
    /// Pipe ends the peer sent that no message has claimed yet, by id.
    pending: Mutex<HashMap<u64, (Arc<Region>, usize)>>,
    next_id: AtomicU64,
    failed: OnceLock<Failure>,
    /// Set together with `failed`, for a cheap check on the hot path.
    down: AtomicBool,
    born: Instant,
    /// Nanoseconds after `born` of the last `poll` for a hang-up.
    checked_at: AtomicU64,
}

impl Link {
    pub(crate) fn new(socket: ControlSocket) -> Arc<Self> {
        Arc::new(Self {
            socket,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(BOOTSTRAP_ID + 1),
            failed: OnceLock::new(),
            down: AtomicBool::new(false),
            born: Instant::now(),
            checked_at: AtomicU64::new(0),
        })
    }

    /// Why the link is down, if it is, without a system call.
    pub fn failure(&self) -> Option<Failure> {
        // Relaxed: a hint only; `failed` itself is read with its own ordering.
        if self.down.load(Ordering::Relaxed) {
            self.failed.get().copied()
        } else {
            None
        }
    }

    /// Asks the kernel whether the peer has gone (one `poll`), and records it.
    pub fn check_peer(&self) -> Option<Failure> {
        if let Some(failure) = self.failure() {
            return Some(failure);
        }
        if self.socket.peer_hung_up() {
            self.fail(Failure::HungUp);
        }
        self.failure()
    }

    /// Like [`Link::check_peer`], but makes the system call at most once per
    /// `interval` across all callers, for paths that must not pay it often.
    pub fn check_peer_every(&self, interval: Duration) -> Option<Failure> {
        let now = self.born.elapsed().as_nanos() as u64;
        // Relaxed: a rate limit only; a race costs one extra `poll`.
        let last = self.checked_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) < interval.as_nanos() as u64 {
            return self.failure();
        }
        self.checked_at.store(now, Ordering::Relaxed);
        self.check_peer()
    }

    /// Marks the link down. A protocol failure also shuts the socket, so
    /// the peer sees the hang-up at once.
    pub fn fail(&self, failure: Failure) {
        let _ = self.failed.set(failure);
        // Release: orders `failed` (which `OnceLock` also publishes) before the flag.
        self.down.store(true, Ordering::Release);
        if let Failure::Protocol(_) = failure {
            let _ = rustix::net::shutdown(self.socket.as_fd(), rustix::net::Shutdown::Both);
        }
    }

    /// Sends the shared memory of a pipe end (`role` 0 or 1) to the peer and
    /// returns the id a message frame must name to claim it.
    pub(crate) fn send_pipe_end(
        &self,
        region: &Region,
        role: usize,
        id: Option<u64>,
    ) -> io::Result<u64> {
        // Relaxed: ids need only be unique, not ordered with anything.
        let id = id.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed));
        let record = PipeEnd {
            role: role as u8,
            id,
        }
        .encode();
        region
            .take_object(|fd| self.socket.send(&record, &[fd]))
            .unwrap_or_else(|| Err(io::Error::other("pipe region was already sent")))?;
        Ok(id)
    }

    /// Claims the pipe end `id` that the peer sent before the frame naming it.
    pub(crate) fn claim(&self, id: u64) -> Result<(Arc<Region>, usize), &'static str> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(end) = pending.remove(&id) {
                return Ok(end);
            }
            let (end_id, end) = self.read_record()?;
            if pending.len() >= MAX_PENDING || pending.insert(end_id, end).is_some() {
                return Err("peer sent too many unclaimed or duplicate pipe ends");
            }
        }
    }

    /// Reads one pipe-end record; the peer sent it before the frame that
    /// claims it, so it is already queued: an empty socket is a violation.
    fn read_record(&self) -> Result<(u64, (Arc<Region>, usize)), &'static str> {
        let mut buf = [0u8; RECORD_LEN + 1];
        let (len, mut fds, truncated) = match self.socket.try_recv(&mut buf) {
            Ok(Received::Record {
                len,
                fds,
                truncated,
            }) => (len, fds, truncated),
            Ok(Received::Empty) => return Err("message names a pipe end that was never sent"),
            Ok(Received::HungUp) | Err(_) => {
                return Err("link closed before a named pipe end arrived");
            }
        };
        if truncated || len != RECORD_LEN || fds.len() != 1 {
            return Err("malformed control record");
        }
        let record = PipeEnd::decode(&buf[..len])?;
        let fd: OwnedFd = fds.pop().ok_or("control record without a descriptor")?;
        let region = Region::from_peer(fd)?;
        Ok((record.id, (region, usize::from(record.role))))
    }
}
