//! What the peer sent over the control socket and no frame has used yet,
//! and how records are read into it.
//!
//! A record is first *peeked* (`MSG_PEEK`: its descriptor arrives as a
//! duplicate and the record stays queued), checked and mapped, and only
//! then taken off the socket. So a local failure (out of descriptors, out
//! of address space) leaves the record where it was, for a later call to
//! try again: the peer is never blamed and nothing is lost.
//!
//! Every descriptor read here is a [`PeerFd`] from the first line, so none
//! is ever closed on the reading thread (see [`crate::base::sys::PeerFd`]); one
//! sent with a message is charged to the link's [`LinkFds`] from when it is
//! filed until the application takes it or the closer has closed it.
//!
//! A pipe end whose region does not fit what is left of the link's map
//! budget is not the peer's fault either (it cannot know this process's
//! budget), and waiting would not help while the ends mapped before it
//! live: it is refused alone. Its sides are closed (so its other end sees
//! the pipe disconnected), its record is taken off the socket, and the
//! message that names it is delivered without it (see `Message::refused`).

use crate::base::wire::Violation;
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::{Arc, Mutex, Weak};

use super::Fault;
use super::fd_budget::{FdCharge, LinkFds};
use crate::base::sys::MapError;
use crate::base::sys::{ControlSocket, PeerFd, Received, Ringer};
use crate::base::wire::record::{Carried, RECORD_LEN, Record};
use crate::transport::pool::budget::{Charge, MapBudget};
use crate::transport::pool::per_link::PeerBlocks;
use crate::transport::ring::Region;
use crate::transport::ring::region::Part;

pub(super) use crate::base::wire::{MAX_PENDING, MAX_PENDING_FDS};

/// A descriptor the peer sent with a message, with its charge.
pub(crate) type PendingFd = PeerFd<FdCharge>;

/// A pipe end (or half) the peer sent: its mapped region, what of it is
/// ours, and its charge to the link's map budget.
#[derive(Debug)]
pub(crate) struct PeerEnd {
    /// The pipe's shared memory.
    pub region: Arc<Region>,
    /// What of the pipe this process now holds.
    pub end: Carried,
    /// Held for as long as the region is mapped here.
    pub charge: Charge,
}

/// What a message frame claimed by id: a pipe end or a descriptor.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// A pipe end (or half).
    Handle(PeerEnd),
    /// A descriptor the peer's application sent, still charged to the
    /// link until it is handed over ([`PeerFd::into_owned`]).
    Fd(PendingFd),
    /// A pipe end refused for the link's map budget, already closed.
    Refused,
}

/// Records read and not yet used.
#[derive(Debug, Default)]
pub(super) struct Inbox {
    /// Pipe ends, by id, until a message claims them.
    pub pipes: HashMap<u64, PeerEnd>,
    /// Descriptors, by id (shared with pipe ends), until a message claims them.
    pub fds: HashMap<u64, PendingFd>,
    /// Pipe ends refused for the map budget, by id, until a message
    /// claims them (counted with `pipes` against [`MAX_PENDING`]).
    pub refused: HashSet<u64>,
    /// The peer's blocks and release table.
    pub blocks: PeerBlocks,
}

impl Inbox {
    /// Whether a pipe end or descriptor with this id waits here.
    pub(super) fn knows(&self, id: u64) -> bool {
        self.pipes.contains_key(&id) || self.fds.contains_key(&id) || self.refused.contains(&id)
    }

    /// Takes what waits here under `id`.
    pub(super) fn take(&mut self, id: u64) -> Option<Claimed> {
        if self.refused.remove(&id) {
            return Some(Claimed::Refused);
        }
        match self.pipes.remove(&id) {
            Some(end) => Some(Claimed::Handle(end)),
            None => self.fds.remove(&id).map(Claimed::Fd),
        }
    }
}

/// What a look at the socket found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Queued {
    /// A record, now filed in the inbox.
    Read,
    /// Nothing queued.
    Nothing,
    /// Nothing queued, and the peer has closed its end.
    HungUp,
}

/// What reading a record needs from its link.
pub(super) struct Reader<'a> {
    pub socket: &'a ControlSocket,
    pub budget: &'a Arc<MapBudget>,
    pub pool_cap: usize,
    /// The descriptors held for this link.
    pub fds: &'a Arc<LinkFds>,
    /// The ring sides held here whose peer is across this link.
    pub rings: &'a Mutex<Vec<(Weak<Region>, Part)>>,
}

impl From<MapError> for Fault {
    fn from(e: MapError) -> Self {
        match e {
            MapError::Violation(why) => Fault::Violation(why),
            MapError::Local(e) => Fault::Local(e),
        }
    }
}

impl Reader<'_> {
    /// Reads one record into `inbox`. The peer sends every record before
    /// the frame that needs it, so an empty socket is a violation.
    pub(super) fn read_record(&self, inbox: &mut Inbox) -> Result<(), Fault> {
        match self.read_queued(inbox)? {
            Queued::Read => Ok(()),
            Queued::Nothing => Err(Fault::Violation(Violation::NeverSent)),
            Queued::HungUp => Err(Fault::Violation(Violation::ClosedBeforeArrival)),
        }
    }

    /// Reads one record into `inbox` if one is queued.
    pub(super) fn read_queued(&self, inbox: &mut Inbox) -> Result<Queued, Fault> {
        let mut buf = [0u8; RECORD_LEN + 1];
        let (record, fds) = match self.peek(&mut buf)? {
            Ok(read) => read,
            Err(nothing) => return Ok(nothing),
        };
        let kept = self.apply(inbox, record, fds)?;
        // The record is in the inbox: take it off the socket. Its
        // descriptors arrive a second time and are closed here at once,
        // never waiting: each file is still open through the peeked
        // duplicate, filed or mapped by `apply` (or through its mapping),
        // and a doorbell `apply` did not keep (`kept`) is dropped only
        // after them, so none of these closes is a file's last and none
        // runs its release. If they cannot be installed, the kernel drops
        // them, which is just as well, for the same reason.
        let taken = self.socket.try_recv(&mut buf);
        drop(kept);
        match taken {
            Ok(Received::Record { fds, .. }) => {
                drop(fds);
                Ok(Queued::Read)
            }
            Ok(Received::NoRoom) => Ok(Queued::Read),
            Ok(Received::Empty | Received::HungUp) => {
                Err(Fault::Violation(Violation::RecordVanished))
            }
            Err(e) => Err(Fault::Local(e)),
        }
    }

    /// The next record, decoded, with duplicates of its descriptors (the
    /// record stays queued), or why there is none.
    #[allow(clippy::type_complexity)]
    fn peek(&self, buf: &mut [u8]) -> Result<Result<(Record, Vec<PeerFd>), Queued>, Fault> {
        match self.socket.peek(buf) {
            Ok(Received::Record {
                len,
                fds,
                truncated,
            }) => {
                let fds: Vec<PeerFd> = fds.into_iter().map(PeerFd::new).collect();
                match (len, truncated) {
                    (RECORD_LEN, false) => Ok(Ok((Record::decode(&buf[..len])?, fds))),
                    _ => Err(Fault::Violation(Violation::MalformedRecord)),
                }
            }
            Ok(Received::Empty) => Ok(Err(Queued::Nothing)),
            Ok(Received::HungUp) => Ok(Err(Queued::HungUp)),
            Ok(Received::NoRoom) => Err(Fault::Local(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                "out of file descriptors: could not take a descriptor the peer sent (it stays queued)",
            ))),
            Err(e) => Err(Fault::Local(e)),
        }
    }

    /// Checks a record and files it in the inbox; returns a doorbell it
    /// did not keep, for the caller to drop once the record's second
    /// copies are closed (see [`Reader::read_queued`]).
    fn apply(
        &self,
        inbox: &mut Inbox,
        record: Record,
        mut fds: Vec<PeerFd>,
    ) -> Result<Option<Arc<Ringer>>, Fault> {
        if let Record::Retire { id } = record {
            return match fds.is_empty() {
                true => Ok(inbox.blocks.retire(id).map(|()| None)?),
                false => Err(Fault::Violation(Violation::RetireWithDescriptor)),
            };
        }
        let fd: PeerFd = fds
            .pop()
            .filter(|_| fds.is_empty())
            .ok_or(Fault::Violation(Violation::RecordDescriptorCount))?;
        match record {
            Record::PipeEnd { end, id } => self.file_pipe_end(inbox, fd, end, id).map(|()| None),
            Record::Block { class, id } => {
                inbox
                    .blocks
                    .insert(id, usize::from(class), fd, self.pool_cap, self.budget)?;
                Ok(None)
            }
            Record::ReleaseTable => {
                inbox.blocks.set_table(fd)?;
                Ok(None)
            }
            Record::Doorbell {
                ring,
                consumer,
                region,
            } => {
                let part = match consumer {
                    true => Part::Consumer(usize::from(ring)),
                    false => Part::Producer(usize::from(ring)),
                };
                self.file_doorbell(inbox, fd, part, region)
            }
            Record::Fd { id } => self.file_fd(inbox, fd, id).map(|()| None),
            Record::Retire { .. } => Ok(None),
        }
    }

    /// Keeps a descriptor until the message naming `id` claims it,
    /// charged to the link. Past the link's share, or the process's (see
    /// [`super::fd_budget`]), the record stays queued (the duplicate
    /// peeked here goes to the closer) and the shortage is reported as
    /// local: the messages of this link's other pipes hold them, and
    /// receiving those frees room.
    fn file_fd(&self, inbox: &mut Inbox, fd: PeerFd, id: u64) -> Result<(), Fault> {
        if inbox.knows(id) {
            return Err(Fault::Violation(Violation::PipeEndIdTwice));
        }
        let charge = self.fds.charge().map_err(Fault::Local)?;
        inbox.fds.insert(id, fd.holding(charge));
        Ok(())
    }

    /// Keeps the doorbell of the peer's side `part` of the region with
    /// inode `inode`, if this process holds (or has been sent and not yet
    /// claimed) the other side of that ring over this link; otherwise the
    /// side has gone since, and the doorbell is handed back, to be dropped
    /// by the caller (see [`Reader::read_queued`]).
    fn file_doorbell(
        &self,
        inbox: &Inbox,
        fd: PeerFd,
        part: Part,
        inode: u64,
    ) -> Result<Option<Arc<Ringer>>, Fault> {
        let bell = Arc::new(Ringer::from_peer(fd)?);
        let facing = part.twin();
        let held = {
            let rings = self.rings.lock().unwrap_or_else(|e| e.into_inner());
            rings
                .iter()
                .filter(|(_, p)| *p == facing)
                .filter_map(|(region, _)| region.upgrade())
                .find(|region| region.inode() == inode)
        };
        let pending = || {
            inbox
                .pipes
                .values()
                .find(|end| end.region.inode() == inode && carries(end.end, facing))
                .map(|end| Arc::clone(&end.region))
        };
        match held.or_else(pending) {
            Some(region) => {
                region.set_bell(part, Some(bell));
                Ok(None)
            }
            None => Ok(Some(bell)),
        }
    }

    fn file_pipe_end(
        &self,
        inbox: &mut Inbox,
        fd: PeerFd,
        end: Carried,
        id: u64,
    ) -> Result<(), Fault> {
        if inbox.pipes.len() + inbox.refused.len() >= MAX_PENDING {
            return Err(Fault::Violation(Violation::TooManyPendingEnds));
        }
        if inbox.knows(id) {
            return Err(Fault::Violation(Violation::PipeEndIdTwice));
        }
        let region = Region::from_peer(fd)?;
        // Records are read under the inbox lock, so nothing else charges
        // this budget between the look and the charge below.
        if region.len() > self.budget.remaining() {
            region.close_sides(&sides_of(end));
            inbox.refused.insert(id);
            return Ok(());
        }
        let charge = self.budget.charge(region.len())?;
        inbox.pipes.insert(
            id,
            PeerEnd {
                region,
                end,
                charge,
            },
        );
        Ok(())
    }
}

/// The ring sides a pipe end record of kind `end` hands over.
fn sides_of(end: Carried) -> Vec<Part> {
    match end {
        Carried::Pipe { role } => {
            let role = usize::from(role) & 1;
            vec![Part::Producer(role), Part::Consumer(1 - role)]
        }
        Carried::Sender { ring } => vec![Part::Producer(usize::from(ring) & 1)],
        Carried::Receiver { ring } => vec![Part::Consumer(usize::from(ring) & 1)],
    }
}

/// Whether a pipe end record of kind `end` hands over side `part`.
fn carries(end: Carried, part: Part) -> bool {
    match (end, part) {
        (Carried::Pipe { role }, Part::Producer(ring)) => usize::from(role) == ring,
        (Carried::Pipe { role }, Part::Consumer(ring)) => usize::from(role) != ring,
        (Carried::Sender { ring: r }, Part::Producer(ring)) => usize::from(r) == ring,
        (Carried::Receiver { ring: r }, Part::Consumer(ring)) => usize::from(r) == ring,
        _ => false,
    }
}
