//! What a [`Sender`](super::Sender) and a [`Receiver`](super::Receiver)
//! have in common: one side of one ring of a pipe's region, the link to
//! the process holding the other side, and the flags that remember how
//! the pipe ended.

use std::sync::{Arc, OnceLock};

use super::PipeOptions;
use super::error::SendFault;
use super::route::{HOMES, LinkCell, LinkRef};
use super::wait::{self, Wait};
use crate::base::lock::Missed;
use crate::base::sync::{AtomicBool, AtomicU8, AtomicU32, Ordering};
use crate::base::sys::{ControlSocket, Doorbell, Ringer};
use crate::base::wire::Violation;
use crate::base::wire::route::{RouteRecord, Token};
use crate::transport::link::{Failure, Fault, Link, Moved, Path};
use crate::transport::pool::budget::Charge;
use crate::transport::ring::control::Side;
use crate::transport::ring::region::{EndHold, Part, SidesView};
use crate::transport::ring::{Corrupt, Region, wake};
use std::os::fd::AsFd;
use std::time::Instant;

/// One side of one ring, as a half of a pipe end holds it.
#[derive(Debug)]
pub(super) struct Half {
    pub(super) region: Arc<Region>,
    /// The control-block sides this half reads and writes on every call.
    view: SidesView,
    /// The side this half is: the producer or the consumer of its ring.
    pub(super) part: Part,
    /// The link to the process holding the ring's other side.
    pub(super) link: LinkCell,
    wait: AtomicU8,
    pub(super) limit: Setting,
    /// Whether this process holds the other half of the same pipe end too
    /// (then this thread's CPU is published on both, as a hint to the
    /// peer's waits). Atomic: a sender's clones share its half, and
    /// [`Pipe::split`](super::Pipe::split) clears it through any of them.
    pub(super) joined: AtomicBool,
    /// Set once this half has been sent away; its drop then closes nothing.
    moved: AtomicBool,
    /// A protocol failure seen on a pipe with no link.
    broken: OnceLock<Violation>,
    /// Set once any call on this half has seen the peer gone: every later
    /// call says so too (after the messages still queued are received).
    hung_up: AtomicBool,
    /// A receiving half: set once a ring was attached to it (see
    /// `clones.rs`).
    pub(super) attached: AtomicBool,
    /// For a half the peer sent: its region's charge to the link's map
    /// budget, given back when the last half of it (and its mapping) goes.
    pub(super) charge: Option<Arc<Charge>>,
    /// This half's doorbell, made on first use by a wait that needs a
    /// descriptor (select, async, a user's poll loop); see [`Half::doorbell`].
    bell: OnceLock<Arc<Doorbell>>,
    /// What rings this half's own doorbell, kept once it is made: for the
    /// holder of this half's lock to ring when a `try_` call gave up on
    /// the lock meanwhile (see [`Missed`]).
    own_ringer: OnceLock<Arc<Ringer>>,
    /// This process's claim on its side of the ring: held once at most.
    _hold: EndHold,
}

impl Half {
    pub(super) fn new(
        region: Arc<Region>,
        part: Part,
        link: LinkCell,
        options: &PipeOptions,
    ) -> Result<Self, Corrupt> {
        let hold = region.hold(part).ok_or(Corrupt(Violation::EndHeldTwice))?;
        if let Part::Consumer(ring) = part {
            let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
            homes.retain(|_, (region, _)| region.strong_count() > 0);
            let home = (Arc::downgrade(&region), Arc::downgrade(&link));
            homes.insert((region.identity(), ring), home);
        }
        Ok(Self {
            _hold: hold,
            view: region.sides(part),
            region,
            part,
            link,
            wait: AtomicU8::new(options.wait.to_u8()),
            limit: Setting::new(options.limit),
            joined: AtomicBool::new(false),
            moved: AtomicBool::new(false),
            broken: OnceLock::new(),
            hung_up: AtomicBool::new(false),
            attached: AtomicBool::new(false),
            own_ringer: OnceLock::new(),
            charge: None,
            bell: OnceLock::new(),
        })
    }

    /// This side's words and the other side's, in the ring's control block.
    #[inline]
    pub(super) fn sides(&self) -> (&Side, &Side) {
        (self.view.me(), self.view.peer())
    }

    /// A receiving half: whether it takes bytes only (its own word).
    pub(super) fn bytes_only(&self) -> bool {
        // Relaxed: a setting, as `Setting::get`; it orders nothing else.
        self.sides().0.bytes_only.load(Ordering::Relaxed) != 0
    }

    /// A receiving half: says whether it takes bytes only.
    pub(super) fn set_bytes_only(&self, on: bool) {
        // Relaxed: see `Half::bytes_only`. A sender that was handed out
        // after this (by any send, which orders it) sees it.
        let word = &self.sides().0.bytes_only;
        word.store(u32::from(on), Ordering::Relaxed);
    }

    /// A sending half: whether its receiver takes bytes only. The word is
    /// the peer's: any non-zero value counts (a peer that writes garbage
    /// there refuses only the handles sent to itself).
    pub(super) fn peer_bytes_only(&self) -> bool {
        // Relaxed: see `Half::bytes_only`.
        self.sides().1.bytes_only.load(Ordering::Relaxed) != 0
    }

    /// Tells the other side that this side changed the ring: wakes it if it
    /// sleeps, and rings its doorbell if it waits on one.
    #[inline]
    pub(super) fn ring_peer(&self) {
        let (me, peer) = self.sides();
        if wake::peer_listens(peer) {
            self.wake_peer(me, peer);
        }
    }

    /// [`Half::ring_peer`] once the peer sleeps or waits on its doorbell.
    #[cold]
    #[inline(never)]
    fn wake_peer(&self, me: &Side, peer: &Side) {
        wait::publish_waker_cpu(me);
        wake::wake_listener(me, peer);
        if wake::wants_doorbell(peer) {
            self.ring_peer_bell();
        }
    }

    fn ring_peer_bell(&self) {
        let twin = self.part.twin();
        if let Some(bell) = self.region.bell(twin) {
            return bell.ring();
        }
        // The peer sends its doorbell before it waits on it: the record is
        // on the link's socket (or, when the peer made it while this side
        // was being forwarded here, on its way: the peer sends it again
        // once it follows the move). Read in what is there; a later send
        // looks again, until it has come.
        let Some(link) = self.link() else { return };
        link.drain_all();
        if let Some(bell) = self.region.bell(twin) {
            bell.ring();
        }
    }

    /// This half's doorbell: made on first use, and handed to whoever
    /// holds the other side (over the link, or directly when that is this
    /// process). It becomes readable once the other side changes the ring
    /// while this half is armed ([`Half::arm_bell`]).
    pub(super) fn doorbell(&self) -> std::io::Result<&Arc<Doorbell>> {
        if let Some(bell) = self.bell.get() {
            return Ok(bell);
        }
        let (bell, ringer) = Doorbell::new()?;
        self.install_doorbell(Arc::new(bell), Arc::new(ringer))
    }

    /// This half's doorbell and what rings it, if it has one.
    pub(super) fn doorbell_pair(&self) -> Option<(Arc<Doorbell>, Arc<Ringer>)> {
        Some((
            Arc::clone(self.bell.get()?),
            Arc::clone(self.own_ringer.get()?),
        ))
    }

    /// Makes `bell` this half's doorbell (unless it has one already), and
    /// hands `ringer` to whoever holds the other side. A receiver shares
    /// its own with the rings it reads along with its own (see `Attach`),
    /// so one descriptor says any of them changed.
    pub(super) fn install_doorbell(
        &self,
        bell: Arc<Doorbell>,
        ringer: Arc<Ringer>,
    ) -> std::io::Result<&Arc<Doorbell>> {
        let mut slot = self.region.bell_slot(self.part);
        if let Some(bell) = self.bell.get() {
            return Ok(bell);
        }
        while let Some(link) = self.link() {
            let Err(e) = link.send_doorbell(&self.region, self.part, &ringer) else {
                break;
            };
            if !matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) {
                return Err(doorbell_error(self.io_error(e)));
            }
            // The holder there is gone. If the other side moved on first
            // (its `Moved` went before that holder did), follow it and hand
            // the doorbell on there; if not, the pipe is over, which the
            // doorbell says (the hang-up watcher rings it).
            match self.link() {
                Some(now) if !Arc::ptr_eq(&now, &link) => {}
                _ => {
                    link.note_io(&e);
                    break;
                }
            }
        }
        // Kept here too: a peer in this process, and the hang-up watcher,
        // ring it; and this half's lock holders (see `Missed`), before the
        // doorbell can be armed.
        let _ = self.own_ringer.set(Arc::clone(&ringer));
        *slot = Some(ringer);
        Ok(self.bell.get_or_init(|| bell))
    }

    /// This half's doorbell, if it has made one.
    pub(super) fn armable_bell(&self) -> Option<&Doorbell> {
        self.bell.get().map(|b| &**b)
    }

    /// Clears this half's doorbell and says it waits on it; the caller
    /// then re-checks its condition (a change made before the other side
    /// saw the flag is seen by that check; one made after rings the bell).
    pub(super) fn arm_bell(&self, bell: &Doorbell) {
        bell.clear();
        wake::arm_doorbell(self.sides().0);
    }

    /// Says this half no longer waits on its doorbell.
    pub(super) fn disarm_bell(&self) {
        if self.bell.get().is_some() {
            wake::disarm_doorbell(self.sides().0);
        }
    }

    /// The ring this half writes or reads.
    #[inline]
    pub(super) fn ring(&self) -> usize {
        match self.part {
            Part::Producer(ring) | Part::Consumer(ring) => ring,
        }
    }

    #[inline]
    fn is_producer(&self) -> bool {
        matches!(self.part, Part::Producer(_))
    }

    pub(super) fn wait_strategy(&self) -> Wait {
        // Relaxed: a setting, read on its own.
        Wait::from_u8(self.wait.load(Ordering::Relaxed))
    }

    pub(super) fn set_wait(&self, wait: Wait) {
        // Relaxed: a setting, read on its own.
        self.wait.store(wait.to_u8(), Ordering::Relaxed);
    }

    /// The link to the process holding the other side of this half's
    /// ring now (after following it wherever it moved); `None` while it is
    /// in this process.
    #[inline]
    pub(super) fn link(&self) -> Option<LinkRef<'_>> {
        self.follow_moves();
        self.link.get()
    }

    /// Follows the other side of this half's ring to wherever it moved
    /// since this half last looked: two loads while it has not.
    #[inline]
    pub(super) fn follow_moves(&self) {
        // Acquire: pairs with the mover's Release bump, made once its
        // `Moved` record was on the link's socket.
        let moved = self.sides().1.moved.load(Ordering::Acquire);
        // Relaxed: written under `following`, and read again under it.
        if moved != self.link.seen.load(Ordering::Relaxed) {
            self.follow(moved);
        }
    }

    /// Reads the link for the record saying where the other side went (the
    /// mover sends it before bumping `moved`), and takes the new path; so
    /// on until the last link has no move for it. A local failure leaves
    /// the count unseen, to look again on the next call; a move that
    /// breaks the rules breaks the link it came on.
    #[cold]
    #[inline(never)]
    fn follow(&self, moved: u32) {
        let _following = self.link.follow_lock();
        // Relaxed: under `following`.
        if moved == self.link.seen.load(Ordering::Relaxed) {
            return;
        }
        let (region, twin) = (self.region.inode(), self.part.twin());
        while let Some(link) = self.link.get() {
            match link.take_move(region, twin) {
                Ok(Some(route)) => {
                    let taken = match self.link.most_kept() {
                        true => Err(Violation::RouteTooLong),
                        false => self.take_route(&link, route),
                    };
                    if let Err(why) = taken {
                        let _ = self.broken.set(why);
                        link.fail(Failure::Protocol(why));
                        break;
                    }
                    // Links no frame still to be read names are let go of
                    // at each step (a chain of moves is followed in one
                    // call): a receiving side's, once it has read past
                    // them; a sending side's, all but the newest (its
                    // frames name only that one).
                    self.link.retire(self.read_to());
                }
                Ok(None) | Err(Fault::Violation(_)) => break,
                Err(Fault::Local(_) | Fault::Late) => return,
            }
        }
        self.link.seen.store(moved, Ordering::Relaxed);
    }

    /// How far a receiving half has read (`None` for a sending half).
    fn read_to(&self) -> Option<u64> {
        // Relaxed: this side's own position.
        (!self.is_producer()).then(|| self.sides().0.pos.load(Ordering::Relaxed))
    }

    /// A receiving half that found nothing to read: it has read every
    /// frame its sender's earlier holders wrote, so the links to them may
    /// go (see `RingLink::retire`). Two loads while there are none.
    #[inline]
    pub(super) fn caught_up(&self) {
        // Relaxed: this side's own position, and a hint (see `retire_at`).
        let head = self.sides().0.pos.load(Ordering::Relaxed);
        if head >= self.link.retire_at.0.load(Ordering::Relaxed) {
            self.retire_read(head);
        }
    }

    #[cold]
    #[inline(never)]
    fn retire_read(&self, head: u64) {
        let _following = self.link.follow_lock();
        self.link.retire(Some(head));
    }

    /// Begins a naming section of this sending half: it is about to name
    /// its link (handles, a block) in a frame. Says so in the ring, then
    /// follows the receiving side to wherever it moved: a mover that bumped
    /// `moved` before the store below waits for the section to end and then
    /// reads the tail (see [`Half::begin_forward_receiver`]), so every frame past
    /// that tail names the link chosen after this.
    pub(super) fn begin_naming(&self) -> Naming<'_> {
        let me = self.sides().0;
        // Relaxed, then the fence: see below.
        me.naming.store(1, Ordering::Relaxed);
        // SeqCst: orders the store above before the load of the consumer's
        // `moved` in `follow_moves`; the mover bumps `moved`, fences, and
        // loads `naming`: one of the two sees the other.
        crate::base::sync::fence(Ordering::SeqCst);
        self.follow_moves();
        // The link this section names and the moves followed, read
        // together: another thread following a move pushes its hop and
        // then counts it, both under `following`.
        let _following = self.link.follow_lock();
        let link = self.link.get();
        // The first section on the receiving side's newest link says where
        // its frames begin to name it: sections are one at a time (under
        // the send lock), so every frame before this position named an
        // older link. Relaxed: `seen` is this process's own.
        let seen = self.link.seen.load(Ordering::Relaxed);
        if me.followed.load(Ordering::Relaxed) != seen {
            // Acquire: this side's own position, as every read of it.
            let at = me.pos.load(Ordering::Acquire);
            me.followed_at.store(at, Ordering::Relaxed);
            // SeqCst, then the fence: a mover that reads the tail, fences
            // and does not see this count reads no frame of this section
            // below that tail (see `begin_forward_receiver`).
            me.followed.store(seen, Ordering::SeqCst);
            crate::base::sync::fence(Ordering::SeqCst);
        }
        Naming { side: me, link }
    }

    /// Takes the path a move of the other side names. A receiving half's
    /// frames from the boundary on name handles on it; a sending half
    /// names its link on it from now on (its receiver moved: the mover
    /// fixed the boundary, see [`Half::begin_forward_receiver`]).
    fn take_route(&self, link: &Link, route: Moved) -> Result<(), Violation> {
        if self.is_producer() {
            let Some(path) = route.path else {
                return Ok(());
            };
            let new = link.introduced(path);
            new.watch(&self.region, self.part);
            // Acquire: this side's own tail (the hop's boundary is not read
            // by a sending half; it keeps the route in ring order).
            let tail = self.sides().0.pos.load(Ordering::Acquire);
            self.link
                .push(tail.max(self.link.boundary()), Some(Arc::clone(&new)));
            if let Some(bell) = self.own_ringer.get() {
                let _ = new.send_doorbell(&self.region, self.part, bell);
            }
            return Ok(());
        }
        // Acquire: the producer's published tail, as every read of it.
        let tail = self.sides().1.pos.load(Ordering::Acquire);
        if route.boundary < self.link.boundary() || route.boundary > tail {
            return Err(Violation::RouteBoundary);
        }
        // No path: the other side came to this process. The route turns
        // to the handle queue only when the side itself is taken here
        // (`RingLink::come_home`): a record alone, which a peer could send
        // without the side, changes nothing (the link still watches it).
        let Some(path) = route.path else {
            return Ok(());
        };
        let new = link.introduced(path);
        new.watch(&self.region, self.part);
        self.link.push(route.boundary, Some(Arc::clone(&new)));
        // This side's doorbell, if it made one, went to the old holder:
        // hand it on.
        if let Some(bell) = self.own_ringer.get() {
            let _ = new.send_doorbell(&self.region, self.part, bell);
        }
        Ok(())
    }

    #[inline]
    pub(super) fn failure(&self) -> Option<Failure> {
        if let Some(why) = self.broken.get() {
            return Some(Failure::Protocol(*why));
        }
        // The link's down flag alone (no link borrowed): the hot path.
        self.follow_moves();
        if self.link.is_down() {
            return self.link_down();
        }
        // Relaxed: a sticky flag; what it stands for was seen by this
        // process already.
        self.hung_up
            .load(Ordering::Relaxed)
            .then_some(Failure::HungUp)
    }

    /// [`Half::failure`] once the link's flag said down: why, asked of
    /// the link (past any move the other side made meanwhile).
    #[cold]
    #[inline(never)]
    fn link_down(&self) -> Option<Failure> {
        match (
            self.link_failure(Link::failure),
            self.hung_up.load(Ordering::Relaxed),
        ) {
            (None, true) => Some(Failure::HungUp),
            (link, _) => link,
        }
    }

    /// Why the link to the other side's holder is down, if it is, as
    /// `check` says (a flag's load, or a question to the kernel). A
    /// hang-up of a link the other side has moved off is not the pipe's:
    /// the mover sends its `Moved` on that link and bumps `moved` before
    /// it lets the link go, so a hang-up seen here with a move not yet
    /// followed is a side gone on. Follow it, and ask again of the new
    /// link (each turn needs a move the peer made: bounded by its moves).
    #[inline]
    pub(super) fn link_failure(&self, check: impl Fn(&Link) -> Option<Failure>) -> Option<Failure> {
        let link = self.link()?;
        let failure = check(&link)?;
        self.failure_past_moves(link, failure, check)
    }

    /// [`Half::link_failure`] once `link` said `failure`: a hang-up of a
    /// link the other side has since moved off is asked again of the new.
    #[cold]
    #[inline(never)]
    fn failure_past_moves<'a>(
        &'a self,
        mut link: LinkRef<'a>,
        mut failure: Failure,
        check: impl Fn(&Link) -> Option<Failure>,
    ) -> Option<Failure> {
        loop {
            match self.link() {
                Some(now) if failure == Failure::HungUp && !Arc::ptr_eq(&now, &link) => {
                    link = now;
                    failure = check(&link)?;
                }
                _ => return Some(failure),
            }
        }
    }

    /// Whether nothing stands in a call's way: no failure recorded on this
    /// half or its link, and the peer's side not closed (the fast paths'
    /// one check; the general paths tell which failure it is).
    #[inline]
    pub(super) fn in_good_order(&self) -> bool {
        // Acquire: pairs with the Release store of `closed` in the peer's
        // drop, after its last frame.
        self.failure().is_none() && self.sides().1.closed.load(Ordering::Acquire) == 0
    }

    /// Records that a call saw the peer gone, so every later call says so.
    pub(super) fn gone(&self, failure: Failure) -> Failure {
        if failure == Failure::HungUp {
            // Relaxed: see `failure`.
            self.hung_up.store(true, Ordering::Relaxed);
        }
        failure
    }

    /// Turns a failed socket write into the error it stands for: the peer
    /// gone (recorded on the link and this half), or a local failure.
    pub(super) fn io_error(&self, e: std::io::Error) -> SendFault {
        if let Some(link) = self.link() {
            link.note_io(&e);
        }
        match e.kind() {
            std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset => {
                self.gone(Failure::HungUp).into()
            }
            std::io::ErrorKind::TimedOut => SendFault::Timeout,
            _ => SendFault::Io(e),
        }
    }

    /// Records a violation by the peer and shuts the link.
    pub(super) fn corrupt(&self, why: Violation) -> Failure {
        let _ = self.broken.set(why);
        if let Some(link) = self.link() {
            link.fail(Failure::Protocol(why));
        }
        Failure::Protocol(why)
    }

    /// What a wait of this half looks at.
    pub(super) fn scope(&self) -> wait::Scope<'_> {
        wait::Scope {
            wait: self.wait_strategy(),
            sides: &self.view,
            // Relaxed: a hint, set before the half is shared.
            joined: self.joined.load(Ordering::Relaxed),
            producer: self.is_producer(),
            half: self,
            hung_up: &self.hung_up,
            taken: None,
        }
    }

    /// Sends this sending half, whose ring's other side is held by another
    /// process, on to the process at the other end of `dest` (a forward;
    /// see `docs/notes/2026-11-27-routing-design.md`), waiting for room on
    /// the sockets until `deadline`; returns the id the message frame
    /// names it by. Nothing passes through this process afterwards, and it
    /// may exit as soon as the message is sent:
    ///
    /// 1. A socket pair joins the two holders. The other side's holder is
    ///    sent one socket in a `Moved` record, with the ring position from
    ///    which frames name handles sent over it (this side's tail: it
    ///    writes no more), and `dest`'s process handle to watch.
    /// 2. It says so in the ring (`moved`, bumped after the record is on
    ///    the socket, with a wake).
    /// 3. `dest` is sent the region with the other socket and the other
    ///    holder's process handle in a `Routed` record, then the other
    ///    side's doorbell if this process has it. If that fails, this half
    ///    stays here, answering over the socket it kept.
    pub(super) fn forward(&self, dest: &Link, deadline: Option<Instant>) -> std::io::Result<u64> {
        let step = Move::start(self, dest, deadline)?;
        if std::ptr::eq(dest, &*step.twin) {
            // Acquire: this side's own tail, published by its last frame.
            let boundary = self.sides().0.pos.load(Ordering::Acquire);
            return step.home(boundary, deadline);
        }
        self.begin_forward(step, deadline)?.finish(deadline)
    }

    /// Steps 1 and 2 of [`Half::forward`], to any process (one holding
    /// the other side too: the two then talk over a socket pair).
    fn begin_forward<'a>(
        &'a self,
        mut step: Move<'a>,
        deadline: Option<Instant>,
    ) -> std::io::Result<Begun<'a>> {
        // Acquire: this side's own tail, published by its last frame.
        let boundary = self.sides().0.pos.load(Ordering::Acquire);
        let (to_twin, to_dest) = crate::base::sys::socket_pair()?;
        step.send_moved(boundary, Some(&to_twin), deadline)?;
        drop(to_twin);
        // Release: after the record went; pairs with `follow_moves`.
        self.sides().0.moved.fetch_add(1, Ordering::Release);
        step.unmark();
        self.ring_peer();
        Ok(Begun {
            step,
            to_dest,
            boundary,
        })
    }

    /// Sends this receiving half, whose sender is in another process (over
    /// its current link), on to the process at the other end of `dest`;
    /// returns the id the message frame names it by. As
    /// [`Half::forward`], with one step more, since here the old holder is
    /// the one the sender's records went to:
    ///
    /// 1. `Moved` (this side, a socket, `dest`'s process handle) goes to the
    ///    sender's holder, and `moved` is bumped (SeqCst) with a wake.
    /// 2. This waits until the sender is in no naming section (see
    ///    [`Half::begin_naming`]), reading the old link meanwhile (the
    ///    sender may wait for room on it), then reads the tail: every frame
    ///    below it names the old link or nothing, every frame from it on
    ///    names the new one.
    /// 3. If a frame between this side's position and the tail names
    ///    handles or a block (`names_link`), their records are on the old
    ///    link: the caller takes those messages out into the receiver's
    ///    prefix (`Unread::Relay`, see `prefix.rs`), or, where it cannot
    ///    (`Unread::Refuse`: a whole end, a message not yet complete), the
    ///    move is refused (`InvalidInput`: receive them first).
    /// 4. `Routed` goes to `dest` with the region, the other socket and the
    ///    sender's holder's process handle, then the sender's doorbell.
    ///
    /// If 2 runs out of time (the caller's deadline, or [`NAMING_WAIT`]:
    /// a sender that never leaves its section stops only its own pipe) or
    /// 3 or 4 fails, this half stays here, answering over the socket it
    /// kept from the tail on, which the sender follows: nothing is lost.
    ///
    /// This does steps 1 to 3; [`Begun::finish`] does 4.
    pub(super) fn begin_forward_receiver<'a>(
        &'a self,
        dest: &'a Link,
        deadline: Option<Instant>,
        names_link: impl FnOnce(u64) -> Result<Unread, Corrupt>,
    ) -> std::io::Result<Begun<'a>> {
        let mut step = Move::start(self, dest, deadline)?;
        let (to_twin, to_dest) = crate::base::sys::socket_pair()?;
        // Boundary 0: fixed below, and sent to the new holder.
        step.send_moved(0, Some(&to_twin), deadline)?;
        drop(to_twin);
        let (me, peer) = self.sides();
        // SeqCst: pairs with `begin_naming`'s fence (see there).
        let count = me.moved.fetch_add(1, Ordering::SeqCst).wrapping_add(1);
        crate::base::sync::fence(Ordering::SeqCst);
        self.ring_peer();
        let ended = wait_for_clear(&peer.naming, deadline, Some(&*step.twin));
        if !ended {
            // The sender's section goes on: its frames past the tail may
            // still name the old link, so no boundary is known here.
            let _ = self.broken.set(Violation::RouteBoundary);
            // `InvalidData`: the send refuses this end, broken by its peer
            // (see `sender::NAMING_NEVER_ENDED`).
            return Err(std::io::ErrorKind::InvalidData.into());
        }
        // The boundary: where the sender's frames begin to name the new
        // link. A section that began after the bump above saw it, and its
        // frames name the new link; it may have published them before the
        // tail is read here, so the tail alone is not the boundary. The
        // sender says where it switched (`followed_at`, once `followed` is
        // this move's count); if it has not yet, no frame below the tail
        // read first names the new link. SeqCst (both) with the fence
        // between: pairs with `begin_naming`'s.
        let tail = peer.pos.load(Ordering::SeqCst);
        crate::base::sync::fence(Ordering::SeqCst);
        let tail = match peer.followed.load(Ordering::SeqCst) == count {
            true => {
                // Relaxed: written before `followed`, read after it.
                let at = peer.followed_at.load(Ordering::Relaxed);
                // Checked as any position a peer names: between what this
                // side has read and the tail, read again (plain frames may
                // have come between the section's start and the tail read
                // above). `names_link` checks the frames below it.
                let head = me.pos.load(Ordering::Acquire);
                // Acquire: the producer's published tail.
                let fresh = peer.pos.load(Ordering::Acquire);
                if at.wrapping_sub(head) > fresh.wrapping_sub(head) {
                    let _ = self.broken.set(Violation::RouteBoundary);
                    // As for a section that never ends (see above).
                    return Err(std::io::ErrorKind::InvalidData.into());
                }
                at
            }
            false => tail,
        };
        match names_link(tail) {
            Ok(Unread::Nothing | Unread::Relay) => {}
            Ok(Unread::Refuse) => {
                step.stay(tail, to_dest);
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "messages naming the old link are on their way to this receiver",
                ));
            }
            Err(Corrupt(why)) => {
                let _ = self.broken.set(why);
                return Err(std::io::Error::other(why.to_string()));
            }
        }
        step.unmark();
        Ok(Begun {
            step,
            to_dest,
            boundary: tail,
        })
    }

    /// Forwards a whole pipe end, both of whose rings have their other
    /// sides in other processes: its receiving half `rx` (begun by the
    /// caller, under its receive lock: [`Half::begin_forward_receiver`])
    /// and its sending half `tx`, each as a half is, over a socket pair
    /// of its own. `Routed` goes for the receiving side first, marked as
    /// joined, then for the sending side under the same id: the new holder
    /// files the end whole once the second arrives. If either record
    /// cannot go, both halves stay here, over the sockets they kept.
    pub(super) fn forward_pair(
        rx: Begun<'_>,
        tx: &Half,
        dest: &Link,
        then: impl FnOnce(u64) -> std::io::Result<()>,
        prefixed: bool,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        let tx = match Move::start(tx, dest, deadline)
            .and_then(|step| tx.begin_forward(step, deadline))
        {
            Ok(tx) => tx,
            Err(e) => {
                rx.stay();
                return Err(e);
            }
        };
        // The receiving side first (with its prefix, if it has one),
        // then the sending side, which completes the end.
        let first = Follows {
            other_side: true,
            prefix: prefixed,
        };
        let sent = rx.routed(None, first, deadline).and_then(|id| {
            then(id)?;
            tx.routed(Some(id), Follows::NOTHING, deadline)?;
            Ok(id)
        });
        match sent {
            Ok(id) => {
                rx.step.hand_on_doorbell(dest)?;
                tx.step.hand_on_doorbell(dest)?;
                Ok(id)
            }
            Err(e) => {
                rx.stay();
                tx.stay();
                Err(e)
            }
        }
    }

    /// Marks this side as moving (its `moving` word), so the other side's
    /// holder does not move its side at the same time: two moves of one
    /// ring that cross would each follow the other to where it left. Of two
    /// sides that would move at once, the producer's goes first; the
    /// consumer's mover stands back until the producer's has said where
    /// it went, then marks again (and, in [`Move::start`], follows it
    /// first). Dekker's pair of SeqCst fences: of two marks, at least one
    /// sees the other. Gives up (`ResourceBusy`, nothing sent, this side
    /// unchanged) if the other side stays marked past `deadline` or
    /// [`NAMING_WAIT`]: a peer can stop the moves of its own pipes, no other.
    fn mark_moving(&self, deadline: Option<Instant>) -> std::io::Result<Marked<'_>> {
        let (me, peer) = self.sides();
        let give_up = give_up_at(deadline);
        loop {
            me.moving.store(1, Ordering::SeqCst);
            crate::base::sync::fence(Ordering::SeqCst);
            let marked = Marked(me);
            if peer.moving.load(Ordering::SeqCst) == 0 {
                return Ok(marked);
            }
            // The consumer's mover stands back (its mark goes with
            // `marked`, dropped here); the producer's keeps its mark.
            let kept = self.is_producer().then_some(marked);
            // The other mover may wait for room on the socket: drained
            // meanwhile.
            if !wait_for_clear(
                &peer.moving,
                Some(give_up),
                self.link.get().as_deref().map(|l| &**l),
            ) {
                // `ResourceBusy`: the send refuses this end (see
                // `sender::OTHER_SIDE_MOVING`), which stays here.
                return Err(std::io::ErrorKind::ResourceBusy.into());
            }
            if let Some(marked) = kept {
                return Ok(marked);
            }
        }
    }

    /// Where this side stands as it leaves: taken before its record goes,
    /// since its new holder may write (or read) the ring as soon as it has
    /// it, before [`Half::moved_over`] runs here.
    pub(super) fn leaving_at(&self) -> u64 {
        // Acquire: this side's own position, as every read of it.
        self.sides().0.pos.load(Ordering::Acquire)
    }

    /// Completes a move: this half is forgotten without closing anything,
    /// and the side left here (if its twin is here) answers to `link`
    /// from `boundary` on (its position as it left, [`Half::leaving_at`]).
    pub(super) fn moved_over(&self, link: &Arc<Link>, boundary: u64) {
        if self.link.get().is_none() {
            self.link.leave_over(boundary, link);
            link.watch(&self.region, self.part.twin());
        }
        // The new holder makes its own doorbell if it needs one.
        if self.bell.get().is_some() {
            wake::disarm_doorbell(self.sides().0);
            self.region.set_bell(self.part, None);
        }
        // Relaxed: read only by this half's own drop.
        self.moved.store(true, Ordering::Relaxed);
    }
}

impl Missed for Half {
    /// A `try_` call on this half gave up on its lock while another thread
    /// held it: rings this half's own doorbell (if it has one), so a
    /// caller waiting on it looks again now that the lock is free.
    fn missed(&self) {
        if let Some(ringer) = self.own_ringer.get() {
            ringer.ring();
        }
    }
}

impl Drop for Half {
    fn drop(&mut self) {
        if let Part::Consumer(ring) = self.part {
            let mut homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
            let key = (self.region.identity(), ring);
            if homes
                .get(&key)
                .is_some_and(|(_, link)| std::ptr::eq(link.as_ptr(), Arc::as_ptr(&self.link)))
            {
                homes.remove(&key);
            }
        }
        // Relaxed: `moved` is only written through `&self` by this half's owner.
        if self.moved.load(Ordering::Relaxed) {
            return;
        }
        // Release (both): pairs with the peer's Acquire load of `closed`,
        // after our last frame was published (or our last frame was read).
        self.sides().0.closed.store(1, Ordering::Release);
        // Relaxed: as in `scope`.
        if self.joined.load(Ordering::Relaxed) && self.is_producer() {
            // The other half of this pipe end goes with this one: say so
            // before waking the peer, so a peer woken now finds the whole
            // end gone, whether it receives or sends first. (Said by the
            // sending half, which a pipe drops first: a receiving half
            // dropped while clones of its sender live closes only itself.)
            self.view.my_other().closed.store(1, Ordering::Release);
        }
        self.ring_peer();
        if self.bell.get().is_some() {
            self.region.set_bell(self.part, None);
        }
        if !self.is_producer() {
            self.link.drop_queued();
        }
    }
}

/// What a receiving half's forward finds unread below the boundary (see
/// [`Half::begin_forward_receiver`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unread {
    /// No frame names the old link: the ring goes as it is.
    Nothing,
    /// Some do: the caller takes the messages out, into the receiver's
    /// prefix (see `prefix.rs`).
    Relay,
    /// Some do, and cannot be taken out: the forward is refused.
    Refuse,
}

/// What follows a `Routed` record under its id (see
/// [`RouteRecord::Routed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Follows {
    /// The other side of a whole end.
    other_side: bool,
    /// A receiving side's prefix (before the other side, for a whole end).
    prefix: bool,
}

impl Follows {
    const NOTHING: Self = Self {
        other_side: false,
        prefix: false,
    };
}

/// A forward whose `Moved` went and whose boundary is fixed: `Routed` to
/// the new holder is what is left (see [`Half::forward`]).
pub(super) struct Begun<'a> {
    step: Move<'a>,
    /// The new holder's socket to the other side's holder.
    to_dest: ControlSocket,
    /// Where the new path takes over.
    boundary: u64,
}

impl Begun<'_> {
    /// Sends `Routed` and the doorbell; if the record cannot go, the half
    /// stays here. Returns the id the message frame names it by.
    pub(super) fn finish(self, deadline: Option<Instant>) -> std::io::Result<u64> {
        self.finish_then(false, |_| Ok(()), deadline)
    }

    /// `Routed` to the new holder (under `id`, or a new one), with
    /// `joins` (see [`RouteRecord::Routed`]).
    fn routed(
        &self,
        id: Option<u64>,
        follows: Follows,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        (self.step).send_routed(self.boundary, Some(&self.to_dest), id, follows, deadline)
    }

    /// Where the new path takes over: frames below it were read here.
    pub(super) fn boundary(&self) -> u64 {
        self.boundary
    }

    /// As [`Begun::finish`], with the receiving side's prefix following
    /// its `Routed` record if `prefixed`: `then` sends it, under the id
    /// given.
    pub(super) fn finish_then(
        self,
        prefixed: bool,
        then: impl FnOnce(u64) -> std::io::Result<()>,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        let follows = Follows {
            other_side: false,
            prefix: prefixed,
        };
        match self.routed(None, follows, deadline) {
            Ok(id) => {
                then(id)?;
                self.step.hand_on_doorbell(self.step.dest)?;
                Ok(id)
            }
            Err(e) => {
                self.stay();
                Err(e)
            }
        }
    }

    /// The forward does not complete: the half stays here (see
    /// [`Move::stay`]).
    pub(super) fn stay(self) {
        self.step.stay(self.boundary, self.to_dest);
    }
}

/// One forward of a half (see [`Half::forward`] and
/// [`Half::begin_forward_receiver`]): the half, the link to the other side's
/// holder, the link to the new holder, and the records' common fields.
struct Move<'a> {
    half: &'a Half,
    /// This side marked as moving, until the boundary is fixed and the
    /// other side may follow (see [`Half::mark_moving`]).
    marked: Option<Marked<'a>>,
    twin: Arc<Link>,
    dest: &'a Link,
    token: Token,
    ring: u8,
    consumer: bool,
}

impl<'a> Move<'a> {
    /// A forward of `half` to the process at the other end of `dest`: the
    /// side marked as moving, and any move of the other side followed
    /// first (see [`Half::mark_moving`]).
    fn start(half: &'a Half, dest: &'a Link, deadline: Option<Instant>) -> std::io::Result<Self> {
        let marked = half.mark_moving(deadline)?;
        half.follow_moves();
        let twin = half
            .link
            .get()
            .map(|link| Arc::clone(&link))
            .ok_or_else(|| std::io::Error::other("the other side is in this process"))?;
        let mut token = Token([0; 16]);
        while token.0 == [0; 16] {
            crate::base::sys::random_bytes(&mut token.0)?;
        }
        let (ring, consumer) = match half.part {
            Part::Producer(ring) => (ring as u8, false),
            Part::Consumer(ring) => (ring as u8, true),
        };
        Ok(Self {
            half,
            marked: Some(marked),
            twin,
            dest,
            token,
            ring,
            consumer,
        })
    }

    /// The boundary is fixed and `Moved` is out (and `moved` bumped): the
    /// other side may move now, following this one first.
    fn unmark(&mut self) {
        self.marked = None;
    }

    /// `Moved` to the other side's holder: the socket to the new holder
    /// and its process handle (none: the side comes to that holder).
    fn send_moved(
        &self,
        boundary: u64,
        socket: Option<&ControlSocket>,
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let moved = RouteRecord::Moved {
            token: self.token,
            ring: self.ring,
            consumer: self.consumer,
            region: self.half.region.inode(),
            boundary,
        };
        let mut fds = Vec::new();
        if let Some(socket) = socket {
            fds.push(socket.as_fd());
            fds.extend(self.dest.peer_process().map(AsFd::as_fd));
        }
        self.twin.send_route(moved, &fds, deadline)
    }

    /// `Routed` to the new holder, with the region, and the socket to the
    /// other side's holder and its process handle (none: the side comes
    /// home); returns the id the message frame names it by.
    fn send_routed(
        &self,
        boundary: u64,
        socket: Option<&ControlSocket>,
        id: Option<u64>,
        follows: Follows,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        let id = id.unwrap_or_else(|| self.dest.next_id());
        let routed = RouteRecord::Routed {
            token: self.token,
            ring: self.ring,
            consumer: self.consumer,
            id,
            boundary,
            joins: follows.other_side,
            prefixed: follows.prefix,
        };
        self.half.region.send_object(false, |region| {
            let mut fds = vec![region];
            if let Some(socket) = socket {
                fds.push(socket.as_fd());
                fds.extend(self.twin.peer_process().map(AsFd::as_fd));
            }
            self.dest.send_route(routed, &fds, deadline)
        })?;
        Ok(id)
    }

    /// The other side's doorbell, handed on to the new holder: it came
    /// with the side (its record right after the end's), or since.
    fn hand_on_doorbell(&self, dest: &Link) -> std::io::Result<()> {
        self.twin.drain_all();
        let facing = self.half.part.twin();
        match self.half.region.bell(facing) {
            Some(bell) => dest.send_doorbell(&self.half.region, facing, &bell),
            None => Ok(()),
        }
    }

    /// A forward that did not complete after `Moved` went: the other side
    /// follows to `kept`'s peer, so the half stays here and answers over
    /// `kept` from `boundary` on; nothing is lost.
    fn stay(&self, boundary: u64, kept: ControlSocket) {
        let interim = self.twin.introduced(Path {
            socket: kept,
            process: None,
        });
        interim.watch(&self.half.region, self.half.part);
        let route = &self.half.link;
        let _following = route.follow_lock();
        route.push(boundary.max(route.boundary()), Some(interim));
        // The other side may have moved meanwhile (it may, once this
        // side's `Moved` is out), its record sent over the socket kept
        // here, and a look during the forward may have counted that move
        // as followed: the next look reads the links again. Relaxed: under
        // `following`.
        let seen = route.seen.load(Ordering::Relaxed);
        route.seen.store(seen.wrapping_sub(1), Ordering::Relaxed);
    }

    /// The forward to the process holding the other side (the new holder
    /// is the other side's holder): a sending side comes home, and the two
    /// make a pipe within that process again. No socket: `Routed` goes with
    /// the region alone, then `Moved` with nothing, then the count is
    /// bumped. In that order, a failure leaves nothing changed: `Moved` is
    /// what switches the receiver, and the end `Routed` names lies
    /// unclaimed there until the link goes (a failed send names no frame
    /// for it).
    fn home(mut self, boundary: u64, deadline: Option<Instant>) -> std::io::Result<u64> {
        if self.consumer {
            return Err(std::io::Error::other("only a sending half comes home"));
        }
        let id = self.send_routed(boundary, None, None, Follows::NOTHING, deadline)?;
        self.send_moved(boundary, None, deadline)?;
        // Release: after the record went; pairs with `follow_moves`.
        self.half.sides().0.moved.fetch_add(1, Ordering::Release);
        self.unmark();
        self.half.ring_peer();
        Ok(id)
    }
}

/// A side marked as moving (see [`Half::mark_moving`]); the mark goes
/// when this drops.
struct Marked<'a>(&'a Side);

impl Drop for Marked<'_> {
    fn drop(&mut self) {
        // Release: after this side's `Moved` went and `moved` was bumped
        // (or nothing was sent); pairs with `mark_moving`'s Acquire.
        self.0.moving.store(0, Ordering::Release);
    }
}

/// Longest a receiving half's forward waits for its sender to leave a
/// naming section (see [`Half::begin_forward_receiver`]).
const NAMING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a mover polls a word of the other side: until `deadline` or
/// [`NAMING_WAIT`] from now, whichever comes first.
fn give_up_at(deadline: Option<Instant>) -> Instant {
    let bound = Instant::now() + NAMING_WAIT;
    deadline.map_or(bound, |d| d.min(bound))
}

/// Waits until the other side's `word` (its `naming` or `moving`) is 0,
/// reading `link` meanwhile (its holder may wait for room on the socket
/// before it can clear the word); `false` if it is still set at
/// [`give_up_at`]`(deadline)`. Polls every 50 µs: a move's wait, not a
/// message's, and one a peer that never clears its word bounds.
fn wait_for_clear(word: &AtomicU32, deadline: Option<Instant>, link: Option<&Link>) -> bool {
    let give_up = give_up_at(deadline);
    // Acquire: pairs with the Release clear after the other side's frame,
    // or after its `Moved` went and its `moved` was bumped.
    while word.load(Ordering::Acquire) != 0 {
        if Instant::now() >= give_up {
            return false;
        }
        if let Some(link) = link {
            link.drain();
        }
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
    true
}

/// A sending half's naming section (see [`Half::begin_naming`]), ended
/// when dropped, after the frame naming the link was published.
#[must_use]
pub(super) struct Naming<'a> {
    side: &'a Side,
    /// The link this section names: the route's newest as the section
    /// began, read together with the moves followed (see
    /// [`Half::begin_naming`]).
    link: Option<LinkRef<'a>>,
}

impl Naming<'_> {
    /// The link this section names (`None`: the receiving side is in this
    /// process).
    pub(super) fn link(&self) -> Option<&Arc<Link>> {
        self.link.as_deref()
    }
}

impl Drop for Naming<'_> {
    fn drop(&mut self) {
        // Release: after the frame that names the link was published.
        self.side.naming.store(0, Ordering::Release);
    }
}

/// A failure to hand a doorbell to the peer, as the `io::Error` that
/// [`super::Receiver::ready_fd`] reports.
fn doorbell_error(fault: SendFault) -> std::io::Error {
    use std::io::{Error, ErrorKind};
    match fault {
        SendFault::Io(e) => e,
        SendFault::Timeout => Error::new(
            ErrorKind::TimedOut,
            "the peer has not read its socket for a second: no room for the doorbell",
        ),
        SendFault::Disconnected => Error::new(ErrorKind::BrokenPipe, "the peer is gone"),
        other => Error::other(format!("handing the doorbell to the peer: {other:?}")),
    }
}

/// A size setting of one handle (its message limit, its out-of-line
/// size): read on every call, changed through `&self` by a setter, as
/// every setting of a pipe's handles is (`set_wait` too).
#[derive(Debug)]
pub(super) struct Setting(crate::base::sync::AtomicUsize);

impl Setting {
    pub(super) fn new(value: usize) -> Self {
        Self(crate::base::sync::AtomicUsize::new(value))
    }

    /// Relaxed: a setting orders nothing else; a call sees it or the one
    /// before.
    #[inline]
    pub(super) fn get(&self) -> usize {
        self.0.load(crate::base::sync::Ordering::Relaxed)
    }

    pub(super) fn set(&self, value: usize) {
        self.0.store(value, crate::base::sync::Ordering::Relaxed);
    }
}

impl Clone for Setting {
    fn clone(&self) -> Self {
        Self::new(self.get())
    }
}
