//! A link joins this process to one peer process: the control socket
//! (descriptor passing, and the peer's death seen as a hang-up) shared by
//! every pipe between the two.
//!
//! Many pipes share one link, so descriptors grow with peers, not pipes: a
//! pipe's shared memory crosses the socket once, is mapped, and its
//! descriptor is closed at once on both sides.

use std::collections::HashMap;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::shm::Region;
use crate::shm::pool::{Announce, Held, PeerBlocks, SendPool};
use crate::sys::ControlSocket;
use crate::sys::linux::socket::Received;
use crate::wire::record::{RECORD_LEN, Record};

/// The id of the pipe a spawned child receives from its parent.
pub(crate) const BOOTSTRAP_ID: u64 = 0;

/// Default cap on the bytes of pool blocks mapped per link direction.
pub const DEFAULT_POOL_CAP: usize = 64 << 20;

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
    /// What the peer sent over the socket, as far as read.
    inbox: Mutex<Inbox>,
    /// The blocks this side sends large messages through (made on first use).
    pool: Mutex<Option<SendPool>>,
    /// Most bytes of blocks mapped per direction.
    pool_cap: usize,
    next_id: AtomicU64,
    failed: OnceLock<Failure>,
    /// Set together with `failed`, for a cheap check on the hot path.
    down: AtomicBool,
    born: Instant,
    /// Nanoseconds after `born` of the last `poll` for a hang-up.
    checked_at: AtomicU64,
}

impl Link {
    pub(crate) fn new(socket: ControlSocket, pool_cap: usize) -> Arc<Self> {
        Arc::new(Self {
            socket,
            inbox: Mutex::new(Inbox::default()),
            pool: Mutex::new(None),
            pool_cap,
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
        let record = Record::PipeEnd {
            role: role as u8,
            id,
        }
        .encode();
        region
            .take_object(|fd| self.socket.send(&record, &[fd]))
            .unwrap_or_else(|| Err(io::Error::other("pipe region was already sent")))?;
        Ok(id)
    }

    fn lock_inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims the pipe end `id` that the peer sent before the frame naming it.
    pub(crate) fn claim(&self, id: u64) -> Result<(Arc<Region>, usize), &'static str> {
        let mut inbox = self.lock_inbox();
        loop {
            if let Some(end) = inbox.pipes.remove(&id) {
                return Ok(end);
            }
            self.read_record(&mut inbox)?;
        }
    }

    /// Takes the peer's block `id` named by a frame, checked (see
    /// [`PeerBlocks::take`]); the block was announced before the frame.
    pub(crate) fn take_block(
        &self,
        id: u32,
        generation: u32,
        len: usize,
    ) -> Result<Held, &'static str> {
        let mut inbox = self.lock_inbox();
        while !inbox.blocks.knows(id) {
            self.read_record(&mut inbox)?;
        }
        inbox.blocks.take(id, generation, len)
    }

    /// Reads one record into the inbox. The peer sends every record before
    /// the frame that needs it, so an empty socket is a violation.
    fn read_record(&self, inbox: &mut Inbox) -> Result<(), &'static str> {
        let mut buf = [0u8; RECORD_LEN + 1];
        let (len, mut fds, truncated) = match self.socket.try_recv(&mut buf) {
            Ok(Received::Record {
                len,
                fds,
                truncated,
            }) => (len, fds, truncated),
            Ok(Received::Empty) => {
                return Err("frame names a pipe end or block that was never sent");
            }
            Ok(Received::HungUp) | Err(_) => {
                return Err("link closed before a named pipe end or block arrived");
            }
        };
        if truncated || len != RECORD_LEN {
            return Err("malformed control record");
        }
        let record = Record::decode(&buf[..len])?;
        if let Record::Retire { id } = record {
            return match fds.is_empty() {
                true => inbox.blocks.retire(id),
                false => Err("retire record with a descriptor"),
            };
        }
        let fd: OwnedFd = fds
            .pop()
            .filter(|_| fds.is_empty())
            .ok_or("control record without exactly one descriptor")?;
        match record {
            Record::PipeEnd { role, id } => {
                if inbox.pipes.len() >= MAX_PENDING {
                    return Err("peer sent too many unclaimed pipe ends");
                }
                let region = Region::from_peer(fd)?;
                if inbox
                    .pipes
                    .insert(id, (region, usize::from(role)))
                    .is_some()
                {
                    return Err("peer sent a pipe end id twice");
                }
                Ok(())
            }
            Record::Block { class, id } => {
                inbox
                    .blocks
                    .insert(id, usize::from(class), fd, self.pool_cap)
            }
            Record::Retire { .. } => Ok(()),
            Record::ReleaseTable => inbox.blocks.set_table(fd),
        }
    }

    /// Runs `f` on this side's send pool, making it (and announcing its
    /// release table) on first use. The link itself is the pool's
    /// [`Announce`]r.
    pub(crate) fn with_pool<R>(&self, f: impl FnOnce(&mut SendPool) -> R) -> io::Result<R> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.is_none() {
            let table = Record::ReleaseTable.encode();
            *pool = Some(SendPool::new(self.pool_cap, |fd| {
                self.socket.send(&table, &[fd])
            })?);
        }
        let pool = pool
            .as_mut()
            .ok_or_else(|| io::Error::other("send pool missing"))?;
        if self.failure().is_some() {
            pool.reclaim_all();
        }
        Ok(f(pool))
    }
}

impl Announce for Link {
    fn announce(&self, id: u32, class: usize, fd: BorrowedFd<'_>) -> io::Result<()> {
        let record = Record::Block {
            class: class as u8,
            id: u64::from(id),
        }
        .encode();
        self.socket.send(&record, &[fd])
    }

    fn retire(&self, id: u32) -> io::Result<()> {
        let record = Record::Retire { id: u64::from(id) }.encode();
        self.socket.send(&record, &[])
    }
}

/// What the peer has sent over the socket and no frame has used yet.
#[derive(Debug, Default)]
struct Inbox {
    /// Pipe ends, by id, until a message claims them.
    pipes: HashMap<u64, (Arc<Region>, usize)>,
    /// The peer's blocks and release table.
    blocks: PeerBlocks,
}
