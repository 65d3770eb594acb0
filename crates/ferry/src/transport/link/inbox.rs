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
use crate::base::sys::{ControlSocket, PeerFd, Process, Received, Ringer};
use crate::base::wire::record::{Carried, RECORD_LEN, Record};
use crate::base::wire::route::{ROUTE_RECORD_LEN, RouteRecord};
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
    /// For a side sent on by a process that did not hold its other side
    /// (a `Routed` record): where that other side is. For a whole end
    /// sent on so (two `Routed` records): where its sending side's other
    /// side is.
    pub route: Option<Route>,
    /// For a whole end sent on as two `Routed` records: where its
    /// receiving side's other side is.
    pub rx_route: Option<Route>,
    /// For a receiving side sent on with its prefix (see
    /// `wire/route.rs`): the prefix's receiving half, read to its end
    /// first.
    pub prefix: Option<Box<PeerEnd>>,
}

/// Where the other side of a forwarded side is.
#[derive(Debug)]
pub(crate) enum Route {
    /// In a third process, over this path.
    Via(Path),
    /// In this process: the side came home, and the two make a pipe
    /// within this process again, from the ring position `boundary` on.
    Home {
        /// Where the handle queue takes over from the link.
        boundary: u64,
    },
}

/// A socket to a process this link's peer introduced, and that process's
/// handle where the peer had one: the makings of a link to it.
#[derive(Debug)]
pub(crate) struct Path {
    pub socket: ControlSocket,
    pub process: Option<Process>,
}

/// Where the other side of one of this process's rings went (a `Moved`
/// record), kept until the holder of this side follows it.
#[derive(Debug)]
pub(crate) struct Moved {
    /// The pipe region's inode.
    pub region: u64,
    /// The side that moved.
    pub part: Part,
    /// The ring position from which frames name handles sent over `path`.
    pub boundary: u64,
    /// The path to the side's new holder; `None` when it is this process.
    pub path: Option<Path>,
}

/// A record as read off the socket: a plain one or a routing one.
enum AnyRecord {
    Plain(Record),
    Route(RouteRecord),
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
    /// Moves of the other sides of this process's rings, not yet
    /// followed (at most [`MAX_PENDING`]).
    pub moves: Vec<Moved>,
    /// The receiving sides of whole ends sent as two `Routed` records, by
    /// id, until the sending side's record completes the end (`None`: it
    /// was refused for the map budget; the end will be). Counted with
    /// `pipes` against [`MAX_PENDING`]; no message claims them.
    pub joining: HashMap<u64, Option<PeerEnd>>,
    /// Receiving sides sent with a prefix, by id, until the prefix's
    /// `PipeEnd` record completes them (as `joining`).
    /// With each, whether it is the receiving side of a whole end (its
    /// sending side's `Routed` follows the prefix, into `joining`).
    pub prefixing: HashMap<u64, (Option<PeerEnd>, bool)>,
}

impl Inbox {
    /// Drops everything filed and not yet claimed: the link broke the
    /// rules, and nothing more of it will be taken. Descriptors go to the
    /// closer; pipe ends unmap (their memory objects are sealed memfds,
    /// whose close never waits).
    pub(super) fn forget_pending(&mut self) {
        self.fds.clear();
        self.pipes.clear();
        self.moves.clear();
        self.joining.clear();
        self.prefixing.clear();
    }

    /// Whether a pipe end or descriptor with this id waits here, for a
    /// message to claim.
    pub(super) fn has(&self, id: u64) -> bool {
        self.pipes.contains_key(&id) || self.fds.contains_key(&id) || self.refused.contains(&id)
    }

    /// Whether this id is taken: claimable, or half of a whole end.
    fn knows(&self, id: u64) -> bool {
        self.has(id) || self.joining.contains_key(&id) || self.prefixing.contains_key(&id)
    }

    /// Pipe ends filed here (claimable, refused, or half of a whole one).
    pub(super) fn pending_ends(&self) -> usize {
        self.pipes.len() + self.refused.len() + self.joining.len() + self.prefixing.len()
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
        let mut buf = [0u8; ROUTE_RECORD_LEN + 1];
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
    fn peek(&self, buf: &mut [u8]) -> Result<Result<(AnyRecord, Vec<PeerFd>), Queued>, Fault> {
        match self.socket.peek(buf) {
            Ok(Received::Record {
                len,
                fds,
                truncated,
            }) => {
                let fds: Vec<PeerFd> = fds.into_iter().map(PeerFd::new).collect();
                match (len, truncated) {
                    (RECORD_LEN, false) => {
                        Ok(Ok((AnyRecord::Plain(Record::decode(&buf[..len])?), fds)))
                    }
                    (ROUTE_RECORD_LEN, false) => Ok(Ok((
                        AnyRecord::Route(RouteRecord::decode(&buf[..len])?),
                        fds,
                    ))),
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
        record: AnyRecord,
        mut fds: Vec<PeerFd>,
    ) -> Result<Option<Arc<Ringer>>, Fault> {
        let record = match record {
            AnyRecord::Plain(record) => record,
            AnyRecord::Route(record) => return self.apply_route(inbox, record, fds).map(|()| None),
        };
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
            Record::PipeEnd { end, id } if inbox.prefixing.contains_key(&id) => {
                self.complete_prefixed(inbox, fd, end, id).map(|()| None)
            }
            Record::PipeEnd { end, id } => {
                self.file_pipe_end(inbox, fd, end, id, None).map(|()| None)
            }
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

    /// Checks a routing record and files what it says: a move to follow,
    /// or a pipe end that travels with a path to its other side's holder.
    /// Only the records a move sends today are accepted (see
    /// `wire/route.rs`); the rest break the rules.
    fn apply_route(
        &self,
        inbox: &mut Inbox,
        record: RouteRecord,
        fds: Vec<PeerFd>,
    ) -> Result<(), Fault> {
        match record {
            RouteRecord::Moved {
                ring,
                consumer,
                region,
                boundary,
                ..
            } => {
                if inbox.moves.len() >= MAX_PENDING {
                    return Err(Fault::Violation(Violation::TooManyPendingEnds));
                }
                let ring = usize::from(ring);
                inbox.moves.push(Moved {
                    region,
                    part: match consumer {
                        true => Part::Consumer(ring),
                        false => Part::Producer(ring),
                    },
                    boundary,
                    path: match fds.is_empty() {
                        true => None,
                        false => Some(path_of(fds)?),
                    },
                });
                Ok(())
            }
            RouteRecord::Routed {
                ring,
                consumer,
                id,
                boundary,
                joins,
                prefixed,
                ..
            } => {
                let mut fds = fds.into_iter();
                let region = fds
                    .next()
                    .ok_or(Fault::Violation(Violation::RouteDescriptors))?;
                let rest: Vec<PeerFd> = fds.collect();
                let second = inbox.joining.contains_key(&id);
                // The sides of a whole end each come with a socket.
                if (joins || second) && rest.is_empty() {
                    return Err(Fault::Violation(Violation::RouteJoin));
                }
                let (end, route) = match (consumer, rest.is_empty()) {
                    (false, true) => (Carried::Sender { ring }, Route::Home { boundary }),
                    (false, false) => (Carried::Sender { ring }, Route::Via(path_of(rest)?)),
                    // A receiving side comes home over a socket pair of its
                    // own (not within the process yet): never without one.
                    (true, true) => return Err(Fault::Violation(Violation::RouteDescriptors)),
                    (true, false) => (Carried::Receiver { ring }, Route::Via(path_of(rest)?)),
                };
                if prefixed {
                    // Decoded only for a receiving side (alone, or the
                    // first side of a whole end).
                    if second {
                        return Err(Fault::Violation(Violation::RouteJoin));
                    }
                    self.check_new(inbox, id)?;
                    let first = self.map_end(region, end, Some(route))?;
                    inbox.prefixing.insert(id, (first, joins));
                    return Ok(());
                }
                match (joins, second) {
                    // The first side of a whole end: its receiving one.
                    (true, false) if consumer => self.file_joining(inbox, region, end, id, route),
                    (true, _) => Err(Fault::Violation(Violation::RouteJoin)),
                    (false, true) => self.join(inbox, region, ring, consumer, id, route),
                    (false, false) => self.file_pipe_end(inbox, region, end, id, Some(route)),
                }
            }
            RouteRecord::Introduce { .. }
            | RouteRecord::Attach { .. }
            | RouteRecord::StopProxying { .. }
            | RouteRecord::Done { .. } => Err(Fault::Violation(Violation::RouteUnexpected)),
        }
    }

    /// Files a pipe end (or half) a record sent under `id`, for the
    /// message that names it.
    fn file_pipe_end(
        &self,
        inbox: &mut Inbox,
        fd: PeerFd,
        end: Carried,
        id: u64,
        route: Option<Route>,
    ) -> Result<(), Fault> {
        self.check_new(inbox, id)?;
        match self.map_end(fd, end, route)? {
            Some(end) => {
                inbox.pipes.insert(id, end);
            }
            None => {
                inbox.refused.insert(id);
            }
        }
        Ok(())
    }

    /// Files the receiving side of a whole end sent as two `Routed`
    /// records, until its sending side's record completes it.
    fn file_joining(
        &self,
        inbox: &mut Inbox,
        fd: PeerFd,
        end: Carried,
        id: u64,
        route: Route,
    ) -> Result<(), Fault> {
        self.check_new(inbox, id)?;
        let first = self.map_end(fd, end, Some(route))?;
        inbox.joining.insert(id, first);
        Ok(())
    }

    /// The sending side of a whole end whose receiving side waits under
    /// `id` in `joining`: the other ring of the same region, with a path of
    /// its own. Files the whole end for the message that names it.
    fn join(
        &self,
        inbox: &mut Inbox,
        fd: PeerFd,
        ring: u8,
        consumer: bool,
        id: u64,
        route: Route,
    ) -> Result<(), Fault> {
        let Some(first) = inbox.joining.remove(&id) else {
            return Err(Fault::Violation(Violation::RouteJoin));
        };
        // Mapped only to see it is the same memory object; unmapped here.
        let second = Region::from_peer(fd, false)?;
        let Some(mut first) = first else {
            // The receiving side was refused: so is the end.
            second.close_sides(&sides_of(Carried::Sender { ring }));
            inbox.refused.insert(id);
            return Ok(());
        };
        let same = second.identity();
        let Carried::Receiver { ring: rx_ring } = first.end else {
            return Err(Fault::Violation(Violation::RouteJoin));
        };
        if consumer || ring == rx_ring || same != first.region.identity() {
            return Err(Fault::Violation(Violation::RouteJoin));
        }
        first.end = Carried::Pipe { role: ring };
        first.rx_route = first.route.replace(route);
        inbox.pipes.insert(id, first);
        Ok(())
    }

    /// The prefix of a receiving side waiting under `id` in `prefixing`:
    /// a receiving half of another pipe, whose sender the peer holds. Files
    /// the side, with it, for the message that names it (or, the first side
    /// of a whole end, for its sending side's record). Either refused
    /// for the map budget, both are (the side's messages would be lost
    /// without its prefix).
    fn complete_prefixed(
        &self,
        inbox: &mut Inbox,
        fd: PeerFd,
        end: Carried,
        id: u64,
    ) -> Result<(), Fault> {
        let Some((first, whole)) = inbox.prefixing.remove(&id) else {
            return Err(Fault::Violation(Violation::RouteJoin));
        };
        if !matches!(end, Carried::Receiver { .. }) {
            return Err(Fault::Violation(Violation::RouteJoin));
        }
        let prefix = self.map_end(fd, end, None)?;
        match (first, prefix) {
            (Some(mut first), Some(prefix)) => {
                if prefix.region.identity() == first.region.identity() {
                    return Err(Fault::Violation(Violation::RouteJoin));
                }
                first.prefix = Some(Box::new(prefix));
                if whole {
                    // The sending side's `Routed` completes it.
                    inbox.joining.insert(id, Some(first));
                } else {
                    inbox.pipes.insert(id, first);
                }
            }
            (first, prefix) => {
                for refused in [first, prefix].into_iter().flatten() {
                    refused.region.close_sides(&sides_of(refused.end));
                }
                // A whole end's sending side is refused as it comes.
                match whole {
                    true => {
                        inbox.joining.insert(id, None);
                    }
                    false => {
                        inbox.refused.insert(id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Checks a new pipe end may be filed under `id`.
    fn check_new(&self, inbox: &Inbox, id: u64) -> Result<(), Fault> {
        if inbox.pending_ends() >= MAX_PENDING {
            return Err(Fault::Violation(Violation::TooManyPendingEnds));
        }
        if inbox.knows(id) {
            return Err(Fault::Violation(Violation::PipeEndIdTwice));
        }
        Ok(())
    }

    /// Maps a pipe end's region, charged to the link; `None` if it does not
    /// fit the map budget (its sides are closed: the end is refused).
    fn map_end(
        &self,
        fd: PeerFd,
        end: Carried,
        route: Option<Route>,
    ) -> Result<Option<PeerEnd>, Fault> {
        // An end keeps its region's descriptor, to be sent on, within the
        // process's bound for them (see `Region::object`).
        let region = Region::from_peer(fd, true)?;
        // Records are read under the inbox lock, so nothing else charges
        // this budget between the look and the charge below.
        if region.len() > self.budget.remaining() {
            region.close_sides(&sides_of(end));
            return Ok(None);
        }
        let charge = self.budget.charge(region.len())?;
        Ok(Some(PeerEnd {
            region,
            end,
            charge,
            route,
            rx_route: None,
            prefix: None,
        }))
    }
}

/// The path a routing record's descriptors make: a control socket, and the
/// handle on the process at its other end if the sender had one.
fn path_of(fds: Vec<PeerFd>) -> Result<Path, Fault> {
    if !(1..=2).contains(&fds.len()) {
        return Err(Fault::Violation(Violation::RouteDescriptors));
    }
    let mut fds = fds.into_iter();
    let socket = fds
        .next()
        .map(ControlSocket::from_peer)
        .and_then(Result::ok)
        .ok_or(Fault::Violation(Violation::RouteDescriptors))?;
    Ok(Path {
        socket,
        process: fds.next().map(Process::from_peer),
    })
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
