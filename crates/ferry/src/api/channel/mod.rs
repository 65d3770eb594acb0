//! The public pipe: a bidirectional, bounded message pipe between two ends,
//! in one process or across two. Each end is a [`Sender`] (`sender.rs`,
//! large messages out of line in `out_of_line.rs`) and a [`Receiver`]
//! (`receiver.rs`), each owning one side of one ring (`half.rs`); loans and
//! shared views are in `loan.rs`, waiting in `wait/` (the mechanism and
//! its policies are `crate::transport::wait`), the send and receive locks are `crate::base::lock`.

pub mod bytes;
mod clones;
mod error;
mod half;
mod loan;
mod options;
mod out_of_line;
mod prefix;
mod readiness;
mod receiver;
mod route;
mod select;
mod sender;
mod spare;
#[cfg(feature = "tokio")]
mod tokio;
mod wait;

// Public but hidden: reaching into a pipe's shared memory, for the fuzz
// targets (feature `fuzzing`).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;

#[cfg(feature = "tokio")]
pub use self::tokio::{AsyncReceiver, AsyncSender};
#[cfg(feature = "tokio")]
pub(crate) use self::tokio::{Bell, register};
pub use crate::base::wire::{HANDLE_WINDOW, MAX_HANDLES};
pub use error::{
    AddError, ProtocolError, ReadyTimeoutError, RecvError, RecvTimeoutError, SendError,
    SendTimeoutError, SendWithError, TryReadyError, TryRecvError, TrySendError,
};
#[cfg(feature = "serde")]
pub(crate) use error::{RecvFault, SendFault};
pub use loan::{LOAN_IN_PLACE, Loan, SharedBytes};
pub use options::PipeOptions;
pub use out_of_line::OUT_OF_LINE;
pub use receiver::{Message, Receiver};
pub(crate) use select::{Descriptor, sealed::Source};
pub use select::{Key, Select, Selectable};
pub use sender::Sender;
#[cfg(feature = "serde")]
pub(crate) use sender::Written;
pub use wait::Wait;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Instant;

use crate::base::wire::record::Carried;
use crate::transport::link::{Claimed, Link, PeerEnd, PendingFd, Route};
use crate::transport::ring::region::{MoveClaim, Part};
use crate::transport::ring::{Corrupt, Region};
use half::Half;
use route::LinkCell;

/// One end of a bidirectional message pipe: a [`Sender`] and a
/// [`Receiver`] together.
///
/// Messages are byte strings of any length from 0 up to the pipe's limit
/// (256 MiB unless set with [`PipeOptions::max_message`]). Each direction is
/// bounded by its ring's capacity; a message larger than the ring travels in
/// pieces. Messages arrive whole, in order, and never twice.
///
/// A `Pipe` may be shared between threads (`&Pipe` is enough to send and to
/// receive): sends are serialized with each other, and so are receives.
/// [`Pipe::split`] gives the two halves to own apart.
///
/// ```
/// let (a, b) = ferry::pipe()?;
/// a.send(b"ping")?;
/// assert_eq!(b.recv()?, b"ping");
/// b.send(b"pong")?;
/// assert_eq!(a.recv()?, b"pong");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Pipe {
    /// Writes ring `role`.
    tx: Sender,
    /// Reads ring `1 - role`.
    rx: Receiver,
}

/// Creates a pipe whose two ends are in this process, with default options.
///
/// Either end (or either half of one) can later be sent to another process
/// with [`Sender::send_with`]; the two ends keep talking through shared
/// memory.
///
/// # Errors
///
/// [`std::io::Error`] if the shared memory cannot be made (for example, out
/// of memory or descriptors).
///
/// ```
/// let (a, b) = ferry::pipe()?;
/// a.send(b"hi")?;
/// assert_eq!(b.recv()?, b"hi");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn pipe() -> std::io::Result<(Pipe, Pipe)> {
    PipeOptions::new().pipe()
}

/// Something that can travel inside a message: a whole pipe end, one half
/// of one, or any file descriptor.
#[derive(Debug)]
#[non_exhaustive]
// An end is moved once per transfer; boxing the whole pipe would cost an
// allocation for every end sent or received.
#[allow(clippy::large_enum_variant)]
pub enum Handle {
    /// A whole pipe end.
    Pipe(Pipe),
    /// A sending half.
    Sender(Sender),
    /// A receiving half.
    Receiver(Receiver),
    /// A file descriptor (a file, a socket, a memfd, an eventfd...): the
    /// receiver gets its own descriptor for the same open file, and this
    /// one is closed once the message is sent.
    Fd(OwnedFd),
}

impl From<Pipe> for Handle {
    fn from(pipe: Pipe) -> Self {
        Self::Pipe(pipe)
    }
}

impl From<Sender> for Handle {
    fn from(sender: Sender) -> Self {
        Self::Sender(sender)
    }
}

impl From<Receiver> for Handle {
    fn from(receiver: Receiver) -> Self {
        Self::Receiver(receiver)
    }
}

impl From<OwnedFd> for Handle {
    fn from(fd: OwnedFd) -> Self {
        Self::Fd(fd)
    }
}

impl From<std::fs::File> for Handle {
    fn from(file: std::fs::File) -> Self {
        Self::Fd(file.into())
    }
}

impl Handle {
    /// The halves this end is made of.
    fn halves(&self) -> impl Iterator<Item = &Half> {
        let (a, b) = match self {
            Self::Pipe(pipe) => (Some(&pipe.tx.core.half), Some(&pipe.rx.half)),
            Self::Sender(sender) => (Some(&sender.core.half), None),
            Self::Receiver(receiver) => (Some(&receiver.half), None),
            Self::Fd(_) => (None, None),
        };
        a.into_iter().chain(b)
    }

    /// Whether it is a sender (or a pipe end whose sender is) that has
    /// clones: such a sender cannot travel (see [`Sender#clones`]).
    fn has_clones(&self) -> bool {
        match self {
            Self::Pipe(pipe) => pipe.tx.has_clones(),
            Self::Sender(sender) => sender.has_clones(),
            Self::Receiver(_) | Self::Fd(_) => false,
        }
    }

    /// Whether it is a receiver (or a pipe end whose receiver is) that
    /// reads rings its sender's clones attached (see `clones.rs`), or, for
    /// a whole end, a prefix not yet read to its end.
    fn reads_clones(&self) -> bool {
        match self {
            Self::Pipe(pipe) => pipe.rx.reads_clone_rings(),
            Self::Receiver(receiver) => receiver.reads_clone_rings(),
            Self::Sender(_) | Self::Fd(_) => false,
        }
    }

    /// Whether the other side of each of its rings is in this process.
    fn is_local(&self) -> bool {
        self.halves().all(|h| h.link.get().is_none())
    }

    /// Why it may not move now (`None`: it may): it moves if its rings'
    /// other sides are here, or all are elsewhere and this process kept the
    /// region's memory object (it is forwarded; see [`Half::forward`]).
    pub(super) fn why_unmovable(&self) -> Option<&'static str> {
        if self.is_local() || self.is_forwarded() {
            return None;
        }
        let elsewhere = |half: &Half| half.link.get().is_some();
        Some(match self.halves().all(elsewhere) {
            true => sender::NOT_KEPT,
            false => sender::NOT_YET_MOVABLE,
        })
    }

    /// Whether each of its rings' other sides was held by a process that
    /// has gone (its link hung up): no one is left to be told where the
    /// end went, so it travels as a fresh end instead (see
    /// `prefix::Orphan`).
    fn is_orphaned(&self) -> bool {
        let gone = |half: &Half| {
            matches!(
                half.failure(),
                Some(crate::transport::link::Failure::HungUp)
            )
        };
        !matches!(self, Self::Fd(_)) && self.halves().all(gone)
    }

    /// Whether it is an end or a half each of whose rings has its other
    /// side in another process, and whose region this process kept (it
    /// arrived with a message, or was made here; not a spawned child's
    /// bootstrap pipe or a server's connection).
    fn is_forwarded(&self) -> bool {
        let forwardable = |half: &Half| half.link.get().is_some() && half.region.may_send();
        match self {
            Self::Fd(_) => false,
            end => end.halves().all(forwardable),
        }
    }

    /// Claims the move of each of its rings' sides (in ring order, so two
    /// threads claiming the same rings cannot each stop the other), adding
    /// the claims to `claims`; `false`, with the claims it took given
    /// back, if another thread holds one.
    fn claim_move(&self, claims: &mut Vec<MoveClaim>) -> bool {
        let mut halves: Vec<&Half> = self.halves().collect();
        halves.sort_by_key(|h| h.ring());
        let before = claims.len();
        for half in halves {
            match half.region.claim_move(half.ring()) {
                Some(claim) => claims.push(claim),
                None => {
                    claims.truncate(before);
                    return false;
                }
            }
        }
        true
    }

    /// Whether `self` and `other` hold sides of one ring.
    fn shares_a_ring(&self, other: &Self) -> bool {
        self.halves().any(|a| {
            other
                .halves()
                .any(|b| Arc::ptr_eq(&a.region, &b.region) && a.ring() == b.ring())
        })
    }

    /// What of its pipe this end is, as the wire names it, and the pipe's
    /// shared memory; `None` for a descriptor.
    fn carried(&self) -> Option<(Carried, &Arc<Region>)> {
        // Rings are 0 or 1, so the casts are exact.
        let (carried, half) = match self {
            Self::Pipe(pipe) => (
                Carried::Pipe {
                    role: pipe.tx.core.half.ring() as u8,
                },
                &pipe.tx.core.half,
            ),
            Self::Sender(sender) => (
                Carried::Sender {
                    ring: sender.core.half.ring() as u8,
                },
                &sender.core.half,
            ),
            Self::Receiver(receiver) => (
                Carried::Receiver {
                    ring: receiver.half.ring() as u8,
                },
                &receiver.half,
            ),
            Self::Fd(_) => return None,
        };
        Some((carried, &half.region))
    }

    /// Where each of its halves stands as it leaves (see
    /// [`Half::leaving_at`]), in the order of [`Handle::halves`].
    fn leaving_at(&self) -> [u64; 2] {
        let mut at = [0; 2];
        for (slot, half) in at.iter_mut().zip(self.halves()) {
            *slot = half.leaving_at();
        }
        at
    }

    /// Sends this end's shared memory (or descriptor) over `link` (the
    /// first step of moving it), waiting for room until `deadline`;
    /// returns the id the peer claims it by.
    fn send_region(&self, link: &Arc<Link>, deadline: Option<Instant>) -> std::io::Result<u64> {
        if let Self::Fd(fd) = self {
            return link.send_fd(fd.as_fd(), deadline);
        }
        match self {
            Self::Sender(sender) if self.is_forwarded() => {
                return sender.core.half.forward(link, deadline);
            }
            Self::Receiver(receiver) if self.is_forwarded() => {
                return receiver.forward(link, deadline);
            }
            Self::Pipe(pipe) if self.is_forwarded() => return pipe.forward(link, deadline),
            _ => {}
        }
        let (carried, region) = self.carried().expect("a pipe end has a region");
        // Past a whole end, the object stays only within its bound.
        let whole = matches!(self, Self::Pipe(_));
        link.send_pipe_end(region, carried, whole, None, deadline)
    }

    /// Moves this end, whose twin is in this process, over `link` under
    /// `id` (a prefix's receiver, see `prefix.rs`).
    fn send_region_as(
        self,
        link: &Arc<Link>,
        id: u64,
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let (carried, region) = self.carried().expect("a pipe end has a region");
        let whole = matches!(self, Self::Pipe(_));
        let at = self.leaving_at();
        link.send_pipe_end(region, carried, whole, Some(id), deadline)?;
        self.moved_over(link, at);
        Ok(())
    }

    /// Completes a move: the sides left here now answer to `link`, and this
    /// end is forgotten without closing anything.
    fn moved_over(self, link: &Arc<Link>, boundaries: [u64; 2]) {
        for (half, boundary) in self.halves().zip(boundaries) {
            half.moved_over(link, boundary);
        }
    }

    /// An end (or half) whose shared memory arrived over `link`.
    pub(crate) fn adopt(
        link: &Arc<Link>,
        end: PeerEnd,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let PeerEnd {
            region,
            end,
            charge,
            route,
            rx_route,
            prefix,
        } = end;
        // A receiving side's prefix: a receiver of its own, read first.
        let prefix = match prefix {
            Some(prefix) => match Self::adopt(link, *prefix, options)? {
                Self::Receiver(rx) => Some(rx),
                _ => return Err(Corrupt(crate::base::wire::Violation::RouteJoin)),
            },
            None => None,
        };
        // A side whose other side is held by a third process came with a
        // path to it: its route starts there. One that came home joins its
        // receiver here.
        let route = match (route, end) {
            (Some(Route::Home { boundary }), Carried::Sender { ring }) => {
                return Self::come_home(region, usize::from(ring), boundary, options);
            }
            (Some(Route::Via(path)), _) => Some(link.introduced(path)),
            (_, _) => None,
        };
        // A whole end sent on: its receiving side's own path (the inbox
        // takes no other route for it).
        let rx_route = match rx_route {
            Some(Route::Via(path)) => Some(link.introduced(path)),
            _ => None,
        };
        let charge = Arc::new(charge);
        let half = |part| {
            let via = match part {
                Part::Consumer(_) => rx_route.as_ref().or(route.as_ref()),
                Part::Producer(_) => route.as_ref(),
            };
            let via = via.unwrap_or(link);
            via.watch(&region, part);
            // One route per ring: the two rings of an end may part.
            let cell: LinkCell = route::RingLink::linked(via);
            let mut half = Half::new(Arc::clone(&region), part, cell, options)?;
            half.charge = Some(Arc::clone(&charge));
            Ok::<_, Corrupt>(half)
        };
        Ok(match end {
            Carried::Pipe { role } => {
                let role = usize::from(role);
                let tx = half(Part::Producer(role))?;
                let rx = half(Part::Consumer(1 - role))?;
                let pipe = Pipe::join(tx, rx, options)?;
                if let Some(prefix) = prefix {
                    pipe.rx.set_prefix(prefix);
                }
                Self::Pipe(pipe)
            }
            Carried::Sender { ring } => Self::Sender(Sender::new(
                half(Part::Producer(usize::from(ring)))?,
                options,
            )?),
            Carried::Receiver { ring } => {
                let rx = Receiver::new(half(Part::Consumer(usize::from(ring)))?)?;
                if let Some(prefix) = prefix {
                    rx.set_prefix(prefix);
                }
                Self::Receiver(rx)
            }
        })
    }

    /// A sender forwarded back to the process holding its receiver (a
    /// `Routed` record with no path): it joins the receiver's region and
    /// route, and from `boundary` on the two make a pipe within this
    /// process (its handles through the ring's queue). If the receiver is
    /// gone meanwhile, the sender has no one to send to: every send says
    /// `Disconnected`.
    fn come_home(
        region: Arc<Region>,
        ring: usize,
        boundary: u64,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let (region, cell) = match route::home(&region, ring) {
            Some((home, cell)) => {
                // Acquire: the producer's published tail, as every read of it.
                let tail = home
                    .control(ring & 1)
                    .producer
                    .pos
                    .load(crate::base::sync::Ordering::Acquire);
                cell.come_home(boundary, tail).map_err(Corrupt)?;
                home.keep_object_of(&region);
                (home, cell)
            }
            None => (region, LinkCell::default()),
        };
        let half = Half::new(region, Part::Producer(ring), cell, options)?;
        Ok(Self::Sender(Sender::new(half, options)?))
    }

    /// The whole pipe end, if this is one.
    pub fn into_pipe(self) -> Option<Pipe> {
        match self {
            Self::Pipe(pipe) => Some(pipe),
            _ => None,
        }
    }

    /// The descriptor, if this is one.
    pub fn into_fd(self) -> Option<OwnedFd> {
        match self {
            Self::Fd(fd) => Some(fd),
            _ => None,
        }
    }
}

/// What a message brought over a link, until the application takes it:
/// an end, or a descriptor the peer sent, which stays charged to the link
/// and, if the message is never delivered (refused, dropped, abandoned),
/// is closed off the caller's thread (see [`crate::transport::link::PendingFd`]).
#[derive(Debug)]
// As `Handle`: an end is moved once per transfer, not worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Arrived {
    /// A pipe end (or half), adopted.
    Handle(Handle),
    /// A descriptor, not yet the application's.
    Fd(PendingFd),
}

impl Arrived {
    /// What a message claimed over `link`: a descriptor as it is, a pipe
    /// end (or half) adopted with `options`; `None` for an end this
    /// process refused (it did not fit the link's map budget).
    pub(crate) fn claimed(
        link: &Arc<Link>,
        claimed: Claimed,
        options: &PipeOptions,
    ) -> Result<Option<Self>, Corrupt> {
        match claimed {
            Claimed::Handle(end) => Ok(Some(Self::Handle(Handle::adopt(link, end, options)?))),
            Claimed::Fd(fd) => Ok(Some(Self::Fd(fd))),
            Claimed::Refused => Ok(None),
        }
    }

    /// Hands it to the application: a descriptor becomes its own (and no
    /// longer counts against the link's share).
    pub(crate) fn into_end(self) -> Handle {
        match self {
            Self::Handle(end) => end,
            Self::Fd(fd) => Handle::Fd(fd.into_owned()),
        }
    }
}

impl Pipe {
    /// Sends this whole end, each of whose rings has its other side in
    /// another process, on to the process at the other end of `dest`: its
    /// receiving half as [`Receiver::forward`] (refused the same way), then
    /// its sending half, joined on the wire (see [`Half::forward_pair`]);
    /// returns the id the message frame names it by.
    fn forward(&self, dest: &Arc<Link>, deadline: Option<Instant>) -> std::io::Result<u64> {
        let (rx, prefix) = self.rx.begin_forward(dest, deadline, true)?;
        prefix::Prefix::forward_with(prefix, &self.rx, dest, deadline, |prefixed, then| {
            Half::forward_pair(rx, &self.tx.core.half, dest, then, prefixed, deadline)
        })
    }

    /// End `role` of the pipe in `region`, whose rings' link cells are
    /// `links`.
    fn new(
        region: &Arc<Region>,
        role: usize,
        links: &[LinkCell; 2],
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let tx = Half::new(
            Arc::clone(region),
            Part::Producer(role),
            Arc::clone(&links[role]),
            options,
        )?;
        let rx = Half::new(
            Arc::clone(region),
            Part::Consumer(1 - role),
            Arc::clone(&links[1 - role]),
            options,
        )?;
        Self::join(tx, rx, options)
    }

    fn join(mut tx: Half, mut rx: Half, options: &PipeOptions) -> Result<Self, Corrupt> {
        *tx.joined.get_mut() = true;
        *rx.joined.get_mut() = true;
        Ok(Self {
            tx: Sender::new(tx, options)?,
            rx: Receiver::new(rx)?,
        })
    }

    /// An end whose shared memory arrived over `link` (the pipe a spawned
    /// child gets from its parent).
    pub(crate) fn adopt(
        link: &Arc<Link>,
        end: Claimed,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        match Arrived::claimed(link, end, options)? {
            Some(Arrived::Handle(Handle::Pipe(pipe))) => Ok(pipe),
            // The other side set this end's budget (a spawned child's
            // options come from its parent) and sent more than it.
            None => Err(Corrupt(crate::base::wire::Violation::RegionsOverBudget)),
            Some(_) => Err(Corrupt(crate::base::wire::Violation::BadPipeEndRole)),
        }
    }

    /// Sends this whole end's shared memory over `link` under `id` (how a
    /// spawned child, or a server's client, gets its pipe). The end is
    /// forgotten here before its record leaves, so a receiver in this same
    /// process (a client of its own server) may take its sides at once; on
    /// failure the caller drops the pipe's other end too. Waits for room on
    /// the socket until `deadline`.
    pub(crate) fn send_whole(
        self,
        link: &Arc<Link>,
        id: u64,
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let end = Handle::Pipe(self);
        let (carried, region) = end.carried().expect("a pipe end has a region");
        let region = Arc::clone(region);
        let at = end.leaving_at();
        end.moved_over(link, at);
        link.send_pipe_end(&region, carried, true, Some(id), deadline)?;
        Ok(())
    }

    /// Says on both rings where this thread runs, before any wait (see
    /// [`wait::say_cpu`]): for the two ends of a server's connection.
    pub(crate) fn say_cpu(&self) {
        wait::say_cpu(self.tx.core.half.sides().0);
        wait::say_cpu(self.rx.half.sides().0);
    }

    /// Sends this end, the second of a fresh pipe, with a client's
    /// opening of a server's handshake (see [`Link::send_opening`]); the
    /// end is forgotten here before it leaves, as in [`Pipe::send_whole`].
    pub(crate) fn send_opening(
        self,
        link: &Arc<Link>,
        opening: &[u8],
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let end = Handle::Pipe(self);
        let region = match end.carried() {
            Some((Carried::Pipe { role: 1 }, region)) => Arc::clone(region),
            _ => {
                return Err(std::io::Error::other(
                    "only the second end of a fresh pipe goes with an opening",
                ));
            }
        };
        let at = end.leaving_at();
        end.moved_over(link, at);
        link.send_opening(&region, opening, deadline)
    }

    /// The two halves, to own apart: sending and receiving no longer share
    /// a value (one thread may own each, or one may travel to another
    /// process with [`Sender::send_with`]).
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let (a_tx, a_rx) = a.split();
    /// std::thread::spawn(move || a_tx.send(b"from a thread"));
    /// assert_eq!(b.recv()?, b"from a thread");
    /// b.send(b"back")?;
    /// assert_eq!(a_rx.recv()?, b"back");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn split(self) -> (Sender, Receiver) {
        let Self { tx, mut rx } = self;
        // Relaxed: a hint (see `Half::joined`); clones of the sender see
        // it on their next wait.
        tx.core
            .half
            .joined
            .store(false, crate::base::sync::Ordering::Relaxed);
        *rx.half.joined.get_mut() = false;
        (tx, rx)
    }

    /// The two halves, still joined: their waits assume one thread uses
    /// both (this thread's CPU is published on both rings, so a peer on
    /// the same CPU yields to it rather than spinning), and dropping one
    /// closes the other's ring too. For the typed layer's two-way end;
    /// [`Sender::unjoin`] and [`Receiver::unjoin`] undo it.
    #[cfg(feature = "serde")]
    pub(crate) fn split_joined(self) -> (Sender, Receiver) {
        (self.tx, self.rx)
    }

    /// This end's sending half.
    pub fn sender(&self) -> &Sender {
        &self.tx
    }

    /// This end's receiving half.
    pub fn receiver(&self) -> &Receiver {
        &self.rx
    }

    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn region(&self) -> &Arc<Region> {
        &self.tx.core.half.region
    }

    /// The ring this end writes (it reads the other).
    #[cfg(test)]
    pub(crate) fn role(&self) -> usize {
        self.tx.core.half.ring()
    }

    // ---- sending: see `Sender` ----

    /// Sends a message, waiting while the pipe is full ([`Sender::send`]).
    ///
    /// # Errors
    ///
    /// See [`Sender::send`].
    #[inline]
    pub fn send(&self, bytes: &[u8]) -> Result<(), SendError> {
        self.tx.send(bytes)
    }

    // ---- receiving: see `Receiver` ----

    /// Receives the next message, waiting for it ([`Receiver::recv`]).
    ///
    /// # Errors
    ///
    /// See [`Receiver::recv`].
    pub fn recv(&self) -> Result<Vec<u8>, RecvError> {
        self.rx.recv()
    }
}

/// Settings both halves have.
macro_rules! half_settings {
    ($half:ty, $($field:ident).+) => {
        impl $half {
            /// How this half waits.
            pub fn wait(&self) -> Wait {
                self.$($field).+.wait_strategy()
            }

            /// Changes how this half waits, from the next wait on.
            pub fn set_wait(&self, wait: Wait) {
                self.$($field).+.set_wait(wait);
            }

            /// The ring's size in bytes (see [`PipeOptions::ring_size`]).
            pub fn ring_size(&self) -> usize {
                self.$($field).+.region.capacity()
            }
        }
    };
}

half_settings!(Sender, core.half);
half_settings!(Receiver, half);

impl Sender {
    /// The largest message this sender sends.
    pub fn max_message(&self) -> usize {
        self.limit.get()
    }

    /// Sets the largest message this sender sends (this clone only).
    pub fn set_max_message(&self, limit: usize) {
        self.limit.set(limit);
    }

    /// Sets the size from which messages to another process travel out of
    /// line, in a shared-memory block ([`OUT_OF_LINE`] by default;
    /// `usize::MAX` never).
    pub fn set_out_of_line(&self, bytes: usize) {
        self.out_of_line.set(bytes);
    }
}

impl Receiver {
    /// The largest message this receiver accepts.
    pub fn max_message(&self) -> usize {
        self.half.limit.get()
    }

    /// Sets the largest message this receiver accepts.
    pub fn set_max_message(&self, limit: usize) {
        self.half.limit.set(limit);
    }

    /// Whether this receiver takes bytes only (see
    /// [`Receiver::set_bytes_only`]).
    pub fn bytes_only(&self) -> bool {
        self.half.bytes_only()
    }

    /// Declares that this receiver takes bytes only (`true`), or handles
    /// too (`false`, as every receiver starts). While it does, a send to
    /// it that attaches handles (pipe ends, halves, descriptors:
    /// [`Sender::send_with`] and its `try_` and `_timeout` forms, and a
    /// typed value holding a half or an [`Fd`](crate::typed::Fd)) fails
    /// with `NotTransferable`, its text naming the reason, and hands every
    /// handle back before anything is written; plain sends go on as
    /// before. For a bridge that forwards bytes where descriptors and pipe
    /// ends cannot go (another machine): a sender of a descriptor gets a
    /// clear error, not a message that lost it on the way.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// b.receiver().set_bytes_only(true);
    /// let (x, _y) = ferry::pipe()?;
    /// let err = a.sender().send_with(b"x", vec![x]).unwrap_err();
    /// assert!(matches!(err.error, ferry::SendError::NotTransferable(_)));
    /// assert!(err.to_string().contains("takes bytes only"));
    /// let Some(ferry::Handle::Pipe(x)) = err.handles.into_iter().next() else {
    ///     panic!("the end comes back");
    /// };
    /// a.send(b"ok")?; // bytes go on
    /// assert_eq!(b.recv()?, b"ok");
    /// # drop(x);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// The declaration lives in the ring's shared memory, where the sender
    /// reads it, in whatever process it is; it goes with this receiver
    /// when the receiver is sent on, and holds for the rings of its
    /// sender's clones in other processes too. A send checks it as it
    /// begins: a message with handles sent before the sender saw it
    /// arrives as before, handles and all. So set it before the sender is
    /// handed out (or before the first message can be sent). It is a
    /// declaration that ferry's senders honour, not a filter: a hostile
    /// sender can ignore it, so a bridge still receives with
    /// [`Receiver::recv`], which drops (closes) anything that came with a
    /// message, or checks what [`Receiver::recv_with`] gives.
    pub fn set_bytes_only(&self, on: bool) {
        self.half.set_bytes_only(on);
        self.set_bytes_only_attached(on);
    }
}

#[cfg(test)]
mod tests;
