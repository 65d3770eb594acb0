//! A link joins this process to one peer process: the control socket
//! (descriptor passing, and the peer's death seen as a hang-up) shared by
//! every pipe between the two.
//!
//! The peer's death is also seen through a handle on its process (a
//! pidfd), where the kernel gives one: the process that connected or
//! listened (`SO_PEERPIDFD`), or, for a spawned child and its parent, the
//! child or parent itself. The socket's hang-up alone cannot be trusted: a
//! peer can send its own end of the socket to this process as a descriptor
//! (or a socket whose queue holds it, or anything else that keeps it open),
//! and this process then keeps the peer's end open itself, so the hang-up
//! never comes. Refusing the link's own socket as a payload would close one
//! way of many and is not attempted; the process handle closes them all,
//! since no descriptor this process holds keeps the peer process alive. So
//! the link's peer *is* that process: if it hands its socket to another
//! process and exits, the link is down. Where no handle can be had (Linux
//! before 6.5 for a named server's links, before 5.3 for spawned ones, or
//! another OS), the hang-up alone tells, as before.
//!
//! Many pipes share one link, so descriptors grow with peers, not pipes: a
//! pipe's shared memory crosses the socket once, is mapped, and its
//! descriptor is closed at once on both sides.
//!
//! The socket is written without blocking past the caller's deadline. Pool
//! records (a new block, a retired one, the release table) are never
//! waited for at all: if the peer has not read its socket, a large message
//! goes through the ring instead, and a retire record waits in a queue for
//! the next chance. So a peer that stops reading its socket can delay only
//! the calls that move pipe ends to it, and those by their own deadlines.

mod deadline;
mod fd_budget;
mod inbox;
mod watcher;

pub(crate) use deadline::Deadline;
#[cfg(test)]
pub(crate) use deadline::GRACE;
pub(crate) use inbox::{Claimed, Moved, Path, PeerEnd, PendingFd, Route};

use crate::base::sync::{AtomicBool, AtomicU64, Ordering};
use crate::base::wire::Violation;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::base::sys::{ControlSocket, OffThread, PeerFd, Process, Ringer};
use crate::base::wire::frame::BlockRef;
use crate::base::wire::record::{Carried, Record};
use crate::base::wire::route::RouteRecord;
use crate::transport::pool::budget::MapBudget;
use crate::transport::pool::per_link::{Announce, Held, SendPool};
use crate::transport::ring::Region;
use crate::transport::ring::region::Part;
use crate::transport::ring::wake;
use fd_budget::LinkFds;
use inbox::{Inbox, Queued, Reader};

/// Most records one [`Link::drain`] reads.
const DRAIN_MOST: usize = 512;

/// Longest a doorbell waits for room on a full socket before its maker
/// gives up (`TimedOut`).
const DOORBELL_WAIT: Duration = Duration::from_secs(1);

/// Default cap on the bytes of pool blocks mapped per link direction.
pub(crate) const DEFAULT_POOL_CAP: usize = 64 << 20;

pub(crate) use crate::transport::pool::budget::DEFAULT_MAX_MAPPED;

/// Why a link is no longer usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The peer process closed its end or died.
    HungUp,
    /// The peer broke the wire rules; the link was shut down.
    Protocol(Violation),
}

/// Why reading what the peer sent over the link did not succeed.
#[derive(Debug)]
pub(crate) enum Fault {
    /// The peer broke the wire rules.
    Violation(Violation),
    /// This process could not take what the peer sent (out of descriptors
    /// or memory); the peer did nothing wrong, and nothing was lost.
    Local(io::Error),
    /// The caller's deadline passed first.
    Late,
}

impl From<Violation> for Fault {
    fn from(why: Violation) -> Self {
        Self::Violation(why)
    }
}

/// How a link is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkLimits {
    /// Most bytes of the peer's pool blocks mapped here.
    pub(crate) pool_cap: usize,
    /// Most bytes of the peer's memory (regions and blocks) mapped here.
    pub(crate) max_mapped: usize,
}

/// One end of the connection to a peer process.
#[derive(Debug)]
pub(crate) struct Link {
    /// Closed off the dropping thread: its queue may hold descriptors the
    /// peer sent, released when it closes.
    socket: OffThread<ControlSocket>,
    /// The peer's descriptors held here for this link.
    fds: Arc<LinkFds>,
    /// What the peer sent over the socket, as far as read.
    inbox: Mutex<Inbox>,
    /// The blocks this side sends large messages through (made on first use).
    pool: Mutex<Option<SendPool>>,
    /// Most bytes of blocks mapped per direction.
    pool_cap: usize,
    /// As the link was set up (links it introduces get the same).
    limits: LinkLimits,
    /// Bytes of the peer's memory this process may map for this link.
    budget: Arc<MapBudget>,
    /// Retire records the socket had no room for yet.
    unsent_retires: Mutex<Vec<u32>>,
    /// The ends of this link's pipes held here: their rings are where the
    /// peer's threads sleep.
    rings: Mutex<Vec<(Weak<Region>, Part)>>,
    next_id: AtomicU64,
    failed: OnceLock<Failure>,
    /// Set together with `failed`, for a cheap check on the hot path.
    down: AtomicBool,
    /// Set with `down`, in a flag the routes keep (see [`Link::down_flag`]).
    down_shared: Arc<AtomicBool>,
    born: Instant,
    /// Nanoseconds after `born` of the last `poll` for a hang-up.
    checked_at: AtomicU64,
    /// The key of this link in the process's hang-up watcher, if it is
    /// watched (see [`Link::watched`]).
    watch_key: OnceLock<u64>,
    /// The peer process, where a handle on it could be had (see the
    /// module comment).
    peer: OnceLock<Process>,
}

impl Link {
    pub(crate) fn new(socket: ControlSocket, limits: LinkLimits) -> Arc<Self> {
        let link = Arc::new(Self {
            socket: OffThread::new(socket),
            fds: LinkFds::new(),
            inbox: Mutex::new(Inbox::default()),
            pool: Mutex::new(None),
            pool_cap: limits.pool_cap,
            limits,
            budget: MapBudget::new(limits.max_mapped),
            unsent_retires: Mutex::new(Vec::new()),
            rings: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(crate::base::wire::FIRST_PIPE_ID),
            failed: OnceLock::new(),
            down: AtomicBool::new(false),
            down_shared: Arc::new(AtomicBool::new(false)),
            born: Instant::now(),
            checked_at: AtomicU64::new(0),
            watch_key: OnceLock::new(),
            peer: OnceLock::new(),
        });
        if let Some(key) = watcher::watch(&link) {
            let _ = link.watch_key.set(key);
        }
        link
    }

    /// A link over a socket connected to a named server (or accepted from
    /// one), whose peer is the process at the other end of `socket` (see
    /// [`Link::watch_peer`]). Fails only for a local reason (out of
    /// descriptors or memory).
    pub(crate) fn connected(socket: ControlSocket, limits: LinkLimits) -> io::Result<Arc<Self>> {
        let peer = Process::of_peer(socket.as_fd());
        let link = Self::new(socket, limits);
        link.watch_peer(peer)?;
        Ok(link)
    }

    /// Watches `peer`, the handle on the peer process found by the caller,
    /// beside the socket: once it exits, the link is down (as on a
    /// hang-up: what the peer committed is still delivered). `Ok(None)`:
    /// no handle here, the hang-up alone tells. A `NotFound` error: the
    /// peer process has already gone, so the link is down now. Other
    /// errors are this process's own shortages, returned as they are.
    pub(crate) fn watch_peer(&self, peer: io::Result<Option<Process>>) -> io::Result<()> {
        let process = match peer {
            Ok(Some(process)) => process,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.hung_up();
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let already = || io::Error::other("the link's peer process is already set");
        self.peer.set(process).map_err(|_| already())?;
        let process = self.peer.get().ok_or_else(already)?;
        match self.watch_key.get() {
            // A pidfd already readable (the peer has exited) is reported
            // by the watcher's next wait as soon as it is added.
            Some(&key) => watcher::watch_process(key, process)?,
            None if process.exited() => self.hung_up(),
            None => {}
        }
        Ok(())
    }

    /// A link to a third process over `path`, which this link's peer
    /// introduced (see `docs/notes/2026-11-27-routing-design.md`), set up as
    /// this one. Its peer is the process the introducer named: its death is
    /// watched through the handle the introducer sent, where it sent one,
    /// and through the socket's hang-up. A handle that cannot be watched
    /// leaves the hang-up alone to tell.
    pub(crate) fn introduced(&self, path: Path) -> Arc<Self> {
        let link = Self::new(path.socket, self.limits);
        if let Some(process) = path.process {
            let _ = link.watch_peer(Ok(Some(process)));
        }
        link
    }

    /// The handle on the peer process, where there is one (to vouch for it
    /// to a third process).
    pub(crate) fn peer_process(&self) -> Option<&Process> {
        self.peer.get()
    }

    /// A fresh id for a record a frame will claim.
    pub(crate) fn next_id(&self) -> u64 {
        // Relaxed: ids need only be unique, not ordered with anything.
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a routing record with its descriptors, waiting for room until
    /// `deadline`.
    pub(crate) fn send_route(
        &self,
        record: RouteRecord,
        fds: &[BorrowedFd<'_>],
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        self.send_record(&record.encode(), fds, deadline)
    }

    /// Takes the move of side `part` of the region with inode `region`, if
    /// the peer sent one: reads every record the socket holds first (the
    /// peer sends the move's record before it says, in the ring, that the
    /// side moved). `Err` for a local failure (the records stay queued) or
    /// a violation (the link is failed).
    pub(crate) fn take_move(&self, region: u64, part: Part) -> Result<Option<Moved>, Fault> {
        let mut inbox = self.lock_inbox();
        loop {
            match self.reader().read_queued(&mut inbox) {
                Ok(Queued::Read) => {}
                Ok(Queued::Nothing) => break,
                Ok(Queued::HungUp) => {
                    self.fail(Failure::HungUp);
                    break;
                }
                Err(Fault::Violation(why)) => {
                    inbox.forget_pending();
                    self.fail(Failure::Protocol(why));
                    return Err(Fault::Violation(why));
                }
                Err(e) => return Err(e),
            }
        }
        let found = inbox
            .moves
            .iter()
            .position(|m| m.region == region && m.part == part);
        Ok(found.map(|i| inbox.moves.remove(i)))
    }

    /// Whether the peer's hang-up is pushed to this link's waiters by the
    /// process's watcher, so they may sleep without a timeout. If not, a
    /// waiter must ask [`Link::check_peer`] now and then itself.
    pub(crate) fn watched(&self) -> bool {
        self.watch_key.get().is_some()
    }

    /// The watcher saw the peer hang up or its process exit: marks the
    /// link down, then wakes
    /// every thread of this process asleep on one of its rings, so each
    /// finds it down.
    fn hung_up(&self) {
        self.fail(Failure::HungUp);
        let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        for (region, part) in rings.iter() {
            if let Some(region) = region.upgrade() {
                // A side held here sleeps on the other side's counter, or
                // waits on its own doorbell.
                match *part {
                    Part::Producer(ring) => wake::ring_all(&region.control(ring).consumer),
                    Part::Consumer(ring) => wake::ring_all(&region.control(ring).producer),
                }
                if let Some(bell) = region.bell(*part) {
                    bell.ring();
                }
            }
        }
    }

    /// Why the link is down, if it is, without a system call.
    pub(crate) fn failure(&self) -> Option<Failure> {
        // Acquire: pairs with the Release store in `fail`, after `failed` was set.
        if self.down.load(Ordering::Acquire) {
            self.failed.get().copied()
        } else {
            None
        }
    }

    /// Whether the link is down, as one load: for the hot path's check.
    #[inline]
    pub(crate) fn is_down(&self) -> bool {
        // Acquire: as in `failure`.
        self.down.load(Ordering::Acquire)
    }

    /// A flag set once this link is down, shared with whoever keeps it: a
    /// route reads it on its hot path without borrowing the link, which it
    /// may let go of meanwhile (see `api/channel/route.rs`).
    pub(crate) fn down_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.down_shared)
    }

    /// Asks the kernel whether the peer has gone (a `poll` of the socket,
    /// and one of the peer process's handle if there is one), and records
    /// it.
    pub(crate) fn check_peer(&self) -> Option<Failure> {
        if let Some(failure) = self.failure() {
            return Some(failure);
        }
        if self.socket.peer_hung_up() || self.peer.get().is_some_and(Process::exited) {
            self.fail(Failure::HungUp);
        }
        self.failure()
    }

    /// Like [`Link::check_peer`], but makes the system call at most once per
    /// `interval` across all callers, for paths that must not pay it often.
    pub(crate) fn check_peer_every(&self, interval: Duration) -> Option<Failure> {
        let now = self.born.elapsed().as_nanos() as u64;
        // Relaxed: a rate limit only; a race costs one extra `poll`.
        let last = self.checked_at.load(Ordering::Relaxed);
        if now != 0 && last != 0 && now.saturating_sub(last) < interval.as_nanos() as u64 {
            return self.failure();
        }
        self.checked_at.store(now.max(1), Ordering::Relaxed);
        self.check_peer()
    }

    /// Marks the link down. A protocol failure also shuts the socket, so
    /// the peer sees the hang-up at once.
    ///
    /// On a protocol failure, descriptors the peer sent that no message has
    /// claimed go to the closer (none can be claimed any more), unless a thread
    /// is reading the inbox right now: that thread closes them when it is
    /// done. A hang-up keeps them for the messages still queued.
    pub(crate) fn fail(&self, failure: Failure) {
        let _ = self.failed.set(failure);
        // Release (both): orders `failed` (which `OnceLock` also
        // publishes) before the flags.
        self.down_shared.store(true, Ordering::Release);
        self.down.store(true, Ordering::Release);
        if let Failure::Protocol(_) = failure {
            self.socket.shutdown();
            if let Ok(mut inbox) = self.inbox.try_lock() {
                inbox.forget_pending();
            }
        }
    }

    /// Records what a failed socket write says about the peer: a closed
    /// socket means the peer process is gone.
    pub(crate) fn note_io(&self, e: &io::Error) {
        if matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            self.fail(Failure::HungUp);
        }
    }

    /// Sends the shared memory of a pipe with what of it (`end`) the peer
    /// now holds, waiting for room in the socket until `deadline`, and
    /// returns the id a message frame must name to claim it. `whole`: a
    /// whole end goes (see [`Region::send_object`]).
    pub(crate) fn send_pipe_end(
        &self,
        region: &Region,
        end: Carried,
        whole: bool,
        id: Option<u64>,
        deadline: Option<Instant>,
    ) -> io::Result<u64> {
        // Relaxed: ids need only be unique, not ordered with anything.
        let id = id.unwrap_or_else(|| self.next_id.fetch_add(1, Ordering::Relaxed));
        let record = Record::PipeEnd { end, id }.encode();
        region
            .send_object(whole, |fd| self.send_record(&record, &[fd], deadline))
            .inspect_err(|e| self.note_io(e))?;
        // The receiver will ring the doorbells of the sides it faces: hand
        // over those known here (ours, or ones a peer sent us).
        for part in carried_parts(end) {
            let facing = part.twin();
            if let Some(bell) = region.bell(facing) {
                self.send_doorbell(region, facing, &bell)?;
            }
        }
        Ok(id)
    }

    /// Sends a client's opening of a server's handshake (`opening`, a
    /// `Hello`) with the shared memory of a fresh pipe whose end 1 the
    /// server takes (see [`crate::base::wire::handshake`]), waiting for room in
    /// the socket until `deadline`. A fresh pipe has no doorbells to hand
    /// over with it.
    pub(crate) fn send_opening(
        &self,
        region: &Region,
        opening: &[u8],
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        region
            .send_object(true, |fd| self.send_record(opening, &[fd], deadline))
            .inspect_err(|e| self.note_io(e))
    }

    /// Takes the pipe a client sent with its opening (its end 1): maps the
    /// region, checked as any peer's, and charges it to this link's
    /// budget.
    pub(crate) fn adopt_opening(&self, fd: PeerFd) -> Result<Claimed, Fault> {
        let region = Region::from_peer(fd, true)?;
        let charge = self.budget.charge(region.len())?;
        Ok(Claimed::Handle(PeerEnd {
            region,
            end: Carried::Pipe { role: 1 },
            charge,
            route: None,
            rx_route: None,
            prefix: None,
        }))
    }

    /// The control socket, for a handshake's answer read before any
    /// record (no other thread reads it until the handshake is done).
    pub(crate) fn socket(&self) -> &ControlSocket {
        &self.socket
    }

    /// Sends a descriptor the application attached to a message, waiting
    /// for room in the socket until `deadline`, and returns the id a
    /// message frame must name to claim it.
    pub(crate) fn send_fd(&self, fd: BorrowedFd<'_>, deadline: Option<Instant>) -> io::Result<u64> {
        // Relaxed: ids need only be unique, not ordered with anything.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let record = Record::Fd { id }.encode();
        self.send_record(&record, &[fd], deadline)?;
        Ok(id)
    }

    fn lock_inbox(&self) -> MutexGuard<'_, Inbox> {
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reader(&self) -> Reader<'_> {
        Reader {
            socket: &self.socket,
            budget: &self.budget,
            pool_cap: self.pool_cap,
            fds: &self.fds,
            rings: &self.rings,
        }
    }

    /// Takes what a frame names and the peer sent before it: the pipe ends
    /// and descriptors `ids` and, for an out-of-line message, its block (checked, see
    /// [`crate::transport::pool::per_link::PeerBlocks::take`]). All or nothing: on any
    /// error (a late deadline, a local failure) everything read so far
    /// stays filed for the next try.
    pub(crate) fn collect(
        &self,
        ids: &[u64],
        block: Option<BlockRef>,
        deadline: &mut Deadline,
    ) -> Result<(Vec<Claimed>, Option<Held>), Fault> {
        let mut inbox = self.lock_inbox();
        if !self.read_until_named(&mut inbox, ids, block, deadline)? {
            return Err(Fault::Late);
        }
        let held = match block {
            Some(b) => {
                let len = usize::try_from(b.len).map_err(|_| Violation::BlockLengthOutOfRange)?;
                Some(inbox.blocks.take(b.id, b.generation, len)?)
            }
            None => None,
        };
        let ends = ids
            .iter()
            .map(|&id| {
                inbox
                    .take(id)
                    .ok_or(Fault::Violation(Violation::PipeEndNamedTwice))
            })
            .collect::<Result<_, _>>()?;
        // A thread that failed the link while this one read could not
        // drop what was pending: hand it to the closer now.
        if let Some(Failure::Protocol(_)) = self.failure() {
            inbox.forget_pending();
        }
        Ok((ends, held))
    }

    /// Whether the handles `ids` (and `block`) a message names have all
    /// arrived, reading the records waiting on the socket within
    /// `deadline`'s steps; takes nothing (a readiness check: a `Select`
    /// must not call a message ready while its handles are still to come).
    pub(crate) fn has_arrived(
        &self,
        ids: &[u64],
        block: Option<BlockRef>,
        deadline: &mut Deadline,
    ) -> Result<bool, Fault> {
        let mut inbox = self.lock_inbox();
        self.read_until_named(&mut inbox, ids, block, deadline)
    }

    /// Reads records into `inbox` until it knows every one of `ids` (and
    /// `block`): `Ok(false)` if `deadline` ran out of steps first.
    fn read_until_named(
        &self,
        inbox: &mut Inbox,
        ids: &[u64],
        block: Option<BlockRef>,
        deadline: &mut Deadline,
    ) -> Result<bool, Fault> {
        let named = |inbox: &Inbox| {
            ids.iter().all(|&id| inbox.has(id)) && block.is_none_or(|b| inbox.blocks.knows(b.id))
        };
        while !named(inbox) {
            if !deadline.step() {
                return Ok(false);
            }
            self.reader().read_record(inbox)?;
        }
        Ok(true)
    }

    /// Runs `f` on this side's send pool, making it (and announcing its
    /// release table) on first use. The link itself is the pool's
    /// [`Announce`]r. Fails with `TimedOut` if the peer has not read its
    /// socket and the table cannot be announced now.
    pub(crate) fn with_pool<R>(&self, f: impl FnOnce(&mut SendPool) -> R) -> io::Result<R> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.is_none() {
            let table = Record::ReleaseTable.encode();
            *pool = Some(SendPool::new(self.pool_cap, |fd| {
                self.send_now(&table, &[fd])
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

    /// Sends a record only if the socket has room now.
    fn send_now(&self, record: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_record(record, fds, Some(Instant::now()))
    }

    /// Sends a record, waiting for room until `deadline`. A full socket
    /// means the peer has not read records it has not needed yet: its
    /// threads asleep on this link's rings are nudged awake to read them
    /// (see [`Link::drain`]), so a sender never waits on a peer that only
    /// waits on a ring.
    fn send_record(
        &self,
        record: &[u8],
        fds: &[BorrowedFd<'_>],
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        loop {
            match self.socket.try_send(record, fds) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                done => return done.inspect_err(|e| self.note_io(e)),
            }
            self.nudge_peer();
            self.socket
                .wait_writable(deadline)
                .inspect_err(|e| self.note_io(e))?;
        }
    }

    /// Remembers side `part` of `region`'s rings, held here, as one whose
    /// peer is across this link, for [`Link::nudge_peer`].
    pub(crate) fn watch(&self, region: &Arc<Region>, part: Part) {
        let mut rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        rings.retain(|(region, _)| region.strong_count() > 0);
        rings.push((Arc::downgrade(region), part));
    }

    /// Wakes every peer thread asleep on this link's rings, whatever it
    /// waits for, so it reads the socket.
    fn nudge_peer(&self) {
        let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
        for (region, part) in rings.iter() {
            if let Some(region) = region.upgrade() {
                match *part {
                    Part::Producer(ring) => wake::ring_anyway(&region.control(ring).producer),
                    Part::Consumer(ring) => wake::ring_anyway(&region.control(ring).consumer),
                }
            }
        }
    }

    /// Reads, without waiting, the records the peer has sent and no frame
    /// has named yet, so its sends never wait on a full socket for long.
    /// Called by a waiter that was woken for nothing (a nudge) and on its
    /// periodic liveness checks; a waiter of another thread already
    /// reading the inbox makes this return at once. A violation found here
    /// fails the link; a local shortage just stops the reading.
    pub(crate) fn drain(&self) {
        let Ok(mut inbox) = self.inbox.try_lock() else {
            return;
        };
        self.read_queued(&mut inbox, DRAIN_MOST, inbox::MAX_PENDING / 2);
    }

    /// Reads every record the peer has sent so far, waiting for a thread
    /// already reading to finish first: for a side that must find the
    /// peer's doorbell, which the peer sent before it began to wait on it.
    /// Bounded by what the socket holds (a peer sending more unclaimed pipe
    /// ends than allowed breaks the rules and fails the link).
    pub(crate) fn drain_all(&self) {
        let mut inbox = self.lock_inbox();
        self.read_queued(&mut inbox, usize::MAX, usize::MAX);
    }

    /// Reads at most `most` queued records, stopping early with `pending`
    /// pipe ends unclaimed (held or refused).
    fn read_queued(&self, inbox: &mut Inbox, most: usize, pending: usize) {
        for _ in 0..most {
            if inbox.pending_ends() >= pending || inbox.fds.len() >= inbox::MAX_PENDING_FDS / 2 {
                return;
            }
            match self.reader().read_queued(inbox) {
                Ok(Queued::Read) => {}
                Ok(Queued::Nothing) | Err(Fault::Local(_) | Fault::Late) => return,
                Ok(Queued::HungUp) => return self.fail(Failure::HungUp),
                Err(Fault::Violation(why)) => {
                    inbox.forget_pending();
                    return self.fail(Failure::Protocol(why));
                }
            }
        }
    }

    /// Hands what rings the doorbell of side `part` of `region`'s rings,
    /// held here, to the peer (which holds the other side), waiting at most
    /// [`DOORBELL_WAIT`] for room on the socket.
    pub(crate) fn send_doorbell(
        &self,
        region: &Region,
        part: Part,
        bell: &Ringer,
    ) -> io::Result<()> {
        let (ring, consumer) = match part {
            Part::Producer(ring) => (ring, false),
            Part::Consumer(ring) => (ring, true),
        };
        let record = Record::Doorbell {
            ring: ring as u8,
            consumer,
            region: region.inode(),
        }
        .encode();
        let deadline = Instant::now() + DOORBELL_WAIT;
        self.send_record(&record, &[bell.as_fd()], Some(deadline))
    }

    /// Sends the retire records that found no room before; `TimedOut` if
    /// some still do not fit.
    fn flush_retires(&self) -> io::Result<()> {
        let mut unsent = self
            .unsent_retires
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while let Some(&id) = unsent.first() {
            self.send_now(&Record::Retire { id: u64::from(id) }.encode(), &[])?;
            unsent.remove(0);
        }
        Ok(())
    }
}

/// The ring sides a pipe end record hands over.
fn carried_parts(end: Carried) -> Vec<Part> {
    match end {
        Carried::Pipe { role } => vec![
            Part::Producer(usize::from(role)),
            Part::Consumer(1 - usize::from(role & 1)),
        ],
        Carried::Sender { ring } => vec![Part::Producer(usize::from(ring))],
        Carried::Receiver { ring } => vec![Part::Consumer(usize::from(ring))],
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(&key) = self.watch_key.get() {
            watcher::unwatch(key);
        }
    }
}

impl Announce for Link {
    fn announce(&self, id: u32, class: usize, fd: BorrowedFd<'_>) -> io::Result<()> {
        // Retires first, so the peer's count of our blocks never passes
        // its cap because of blocks we have already unmapped.
        self.flush_retires()?;
        let record = Record::Block {
            class: class as u8,
            id: u64::from(id),
        }
        .encode();
        self.send_now(&record, &[fd])
    }

    fn retire(&self, id: u32) -> io::Result<()> {
        self.unsent_retires
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
        match self.flush_retires() {
            Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(()),
            other => other,
        }
    }
}
