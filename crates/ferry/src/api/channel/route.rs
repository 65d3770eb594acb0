//! A ring's route: how the side held here reaches the other side of its
//! ring wherever that is. No link while both sides are in this process
//! (then the ring's handle queue carries ends and descriptors), a link once
//! one of them leaves, and a later link each time the other side moves on
//! (or `None`, when it comes back here). Each later link takes over at a
//! ring position, its **boundary**: frames before it name handles on the
//! link before. See `docs/notes/2026-11-27-routing-design.md`.
//!
//! The chain of hops only grows, so a hop a call found stays in place for
//! as long as the ring is held here; the newest is found in one load
//! (`latest`), not by walking the route. A hop's *link* is let go of once
//! no frame still to be read can name it (`RingLink::retire`), so a side
//! that stays put while the other side moves a thousand times holds the
//! links of the last few moves, not a thousand sockets. So no call borrows
//! a later hop's link: it takes a counted reference (`LinkRef::Held`), and
//! the hot path reads only the hop's copy of the link's down flag.
#![allow(unsafe_code)] // reads through `latest` and `kept`, argued at `RingLink::hop_at`

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use super::Handle;
use crate::base::sync::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::base::wire::Violation;
use crate::transport::link::Link;
use crate::transport::ring::Region;

/// The route a ring's two sides talk over: no link while both are in this
/// process, a link once one of them moves to another, and a later one
/// each time the other side moves on. Shared by the two sides while they
/// are both here.
pub(super) type LinkCell = Arc<RingLink>;

/// What the two sides of one ring share in this process: the route to the
/// process holding the other side once there is one, and until then the
/// ring's handle queue.
///
/// The route only grows. Its first link is set once, when a side leaves
/// (or arrives); each later one, when the other side moved on to another
/// process, comes with a **boundary**: the ring position from which frames
/// name handles sent over it (frames before it name handles on the link
/// before). So a frame's handles are always looked for on the one link its
/// writer sent them on, however the side moved meanwhile, and a link
/// borrowed by a call stays valid for as long as the ring is held (see
/// `docs/notes/2026-11-27-routing-design.md`).
#[derive(Debug, Default)]
pub(super) struct RingLink {
    link: OnceLock<Arc<Link>>,
    later: OnceLock<Box<Hop>>,
    /// The address of the newest hop (0 while there is none), exposed
    /// (see `hop_at`).
    latest: AtomicUsize,
    /// The address of the oldest hop whose link is still kept (0: from
    /// the first hop), exposed; changed under `following`. Hops before it
    /// have let go of their links, and no frame still to be read names
    /// them (nor the first link).
    kept: AtomicUsize,
    /// The ring position a consumer reading past lets go of one more link
    /// (`RingLink::retire`; never, while there is none to let go of).
    pub(super) retire_at: Threshold,
    /// Later hops whose links are kept (see [`RingLink::most_kept`]).
    kept_links: AtomicUsize,
    /// Later hops, kept or not (see [`MOST_HOPS`]).
    hop_count: AtomicUsize,
    /// The other side's `moved` count this route has followed up to.
    pub(super) seen: AtomicU32,
    /// Held by the one thread changing the route.
    pub(super) following: Mutex<()>,
    /// Ends and descriptors sent over the ring while both its sides are in
    /// this process, not yet claimed by the receiver: they never leave the
    /// process, so no socket carries them. Each frame that names handles
    /// names them by the id given here, in the order they were queued.
    local: Mutex<LocalHandles>,
}

/// A ring position, `u64::MAX` (never reached) until set.
#[derive(Debug)]
pub(super) struct Threshold(pub(super) AtomicU64);

impl Default for Threshold {
    fn default() -> Self {
        Self(AtomicU64::new(u64::MAX))
    }
}

/// The handle queue of a ring whose two sides are in this process.
#[derive(Debug, Default)]
pub(super) struct LocalHandles {
    /// The id the next queued handle gets (wrapping).
    next: u64,
    queued: VecDeque<(u64, Handle)>,
}

impl LocalHandles {
    /// Queues `end`; returns the id a frame names it by.
    pub(super) fn push(&mut self, end: Handle) -> u64 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        self.queued.push_back((id, end));
        id
    }

    /// Takes the oldest queued handle, if it is the one `id` names.
    pub(super) fn take(&mut self, id: u64) -> Option<Handle> {
        match self.queued.front() {
            Some((first, _)) if *first == id => self.queued.pop_front().map(|(_, end)| end),
            _ => None,
        }
    }

    /// Takes back the newest queued handle (one whose frame was not sent).
    pub(super) fn take_back(&mut self) -> Option<Handle> {
        self.queued.pop_back().map(|(_, end)| end)
    }

    /// Whether handles are queued and not yet claimed.
    pub(super) fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

/// The most hops a route takes: moves of the other side past it break the
/// pipe (`RouteTooLong`). Each hop is about 80 bytes kept until the pipe
/// is dropped (a call may still read a hop the route has moved past; they
/// are not reclaimed), so a peer moving its side without end costs this
/// process at most some 5 MiB per pipe; an honest end moved 65,536 times
/// past one that stays meets it.
pub(super) const MOST_HOPS: usize = 1 << 16;

/// A later link of a route, and where on the ring it takes over: `None`
/// when the other side came back to this process (the handle queue then).
#[derive(Debug)]
struct Hop {
    boundary: u64,
    /// Whether the hop is a link (not the handle queue), whether or not it
    /// was let go of since.
    linked: bool,
    /// The link until it is let go of (`RingLink::retire`).
    link: Mutex<Option<Arc<Link>>>,
    /// The link's down flag, kept for the hot path (`RingLink::is_down`).
    down: Option<Arc<AtomicBool>>,
    later: OnceLock<Box<Hop>>,
}

impl Hop {
    fn link(&self) -> Option<Arc<Link>> {
        self.link.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A link a call uses: the route's first link, borrowed (it is kept for as
/// long as the route), or a later one, counted (the route may let go of
/// it meanwhile).
#[derive(Debug)]
pub(super) enum LinkRef<'a> {
    Shared(&'a Arc<Link>),
    Held(Arc<Link>),
}

impl std::ops::Deref for LinkRef<'_> {
    type Target = Arc<Link>;
    fn deref(&self) -> &Arc<Link> {
        match self {
            Self::Shared(link) => link,
            Self::Held(link) => link,
        }
    }
}

/// Where a frame's handles are, as its position says.
#[derive(Debug)]
pub(super) enum Named<'a> {
    /// In the ring's handle queue (both sides were here).
    Queue,
    /// Over this link.
    Over(LinkRef<'a>),
    /// On a link the route let go of: no frame still to be read can be
    /// there, so a frame that says so lies about its position.
    Gone,
}

impl RingLink {
    /// The cell of a ring whose other side is held over `link`.
    pub(super) fn linked(link: &Arc<Link>) -> Arc<Self> {
        let cell = Self::default();
        let _ = cell.link.set(Arc::clone(link));
        Arc::new(cell)
    }

    /// The hop whose exposed address `word` holds (`None` for 0).
    #[inline]
    fn hop_at(&self, word: &AtomicUsize) -> Option<&Hop> {
        // Acquire: pairs with the Release stores in `push` and `retire`,
        // made once the hop was in place.
        let address = word.load(Ordering::Acquire);
        if address == 0 {
            return None;
        }
        let hop = std::ptr::with_exposed_provenance::<Hop>(address);
        // SAFETY: `latest` and `kept` hold only the exposed addresses of
        // hops boxed in this route's chain (`push`), stored once that box
        // was set in its `OnceLock`. A hop is never taken out, moved or
        // dropped before the route (`&self`) is: the chain only grows
        // (only a hop's link is let go of). So the hop lives, unmoved, for
        // as long as the reference returned.
        Some(unsafe { &*hop })
    }

    /// The later links of the route from `first` on, oldest first.
    fn hops_from<'a>(&'a self, first: Option<&'a Hop>) -> impl Iterator<Item = &'a Hop> {
        std::iter::successors(first, |hop| hop.later.get().map(|h| &**h))
    }

    /// The link to the other side's holder now: `None` while both sides
    /// are in this process.
    #[inline]
    pub(super) fn get(&self) -> Option<LinkRef<'_>> {
        loop {
            let Some(hop) = self.hop_at(&self.latest) else {
                return self.link.get().map(LinkRef::Shared);
            };
            match hop.link() {
                Some(link) => return Some(LinkRef::Held(link)),
                // The newest hop's link is never let go of: this one was
                // the newest when loaded, and a later one has come since.
                None if hop.linked => {}
                None => return None,
            }
        }
    }

    /// Whether the other side is in another process (no link is borrowed).
    #[inline]
    pub(super) fn is_linked(&self) -> bool {
        match self.hop_at(&self.latest) {
            None => self.link.get().is_some(),
            Some(hop) => hop.linked,
        }
    }

    /// Whether the link to the other side's holder now is down, in two
    /// loads and without borrowing it: the hot path's check.
    #[inline]
    pub(super) fn is_down(&self) -> bool {
        match self.hop_at(&self.latest) {
            None => self.link.get().is_some_and(|link| link.is_down()),
            // Acquire: as every read of a link's down flag.
            Some(hop) => hop.down.as_ref().is_some_and(|d| d.load(Ordering::Acquire)),
        }
    }

    /// Routes the ring over `link` from `boundary` on: a side left this
    /// process while the other was here.
    pub(super) fn leave_over(&self, boundary: u64, link: &Arc<Link>) {
        let _following = self.follow_lock();
        if self.later.get().is_none() && self.link.set(Arc::clone(link)).is_ok() {
            return;
        }
        self.push(boundary, Some(Arc::clone(link)));
    }

    /// Where the handles of a frame at ring position `at` are.
    pub(super) fn at(&self, at: u64) -> Named<'_> {
        let kept = self.hop_at(&self.kept);
        if kept.is_some_and(|hop| at < hop.boundary) {
            return Named::Gone;
        }
        let first = kept.or_else(|| self.later.get().map(|h| &**h));
        match self
            .hops_from(first)
            .take_while(|hop| hop.boundary <= at)
            .last()
        {
            Some(hop) if !hop.linked => Named::Queue,
            Some(hop) => hop
                .link()
                .map_or(Named::Gone, |l| Named::Over(LinkRef::Held(l))),
            None => self
                .link
                .get()
                .map_or(Named::Queue, |l| Named::Over(LinkRef::Shared(l))),
        }
    }

    /// Whether the route keeps as many later links as it may: one more
    /// move of the other side is then refused (`RouteTooLong`). A link is
    /// kept while frames not yet read may name it (see [`RingLink::retire`]);
    /// moves with nothing written between them cost nothing, but a peer
    /// that writes a frame before each move, to a reader that reads none
    /// of them, would make it keep a socket and a process handle per
    /// move. So a route keeps at most a sixteenth of the soft
    /// `RLIMIT_NOFILE` (read each time, at least 64): 64 links, 128
    /// descriptors, at the usual 1,024. And a hop itself (a boundary, a
    /// lock, a flag) stays until the pipe is dropped, since a call may be
    /// reading it: at most [`MOST_HOPS`]. Called under `following`.
    pub(super) fn most_kept(&self) -> bool {
        let limit = crate::base::sys::descriptor_limit().unwrap_or(u64::MAX);
        let most = usize::try_from(limit / 16).unwrap_or(usize::MAX).max(64);
        // Relaxed (both): changed under `following` only.
        self.kept_links.load(Ordering::Relaxed) >= most
            || self.hop_count.load(Ordering::Relaxed) >= MOST_HOPS
    }

    /// Where the latest link took over (0 for the first).
    pub(super) fn boundary(&self) -> u64 {
        self.hop_at(&self.latest).map_or(0, |hop| hop.boundary)
    }

    /// Adds a later link, taking over at `boundary` (`None`: the other
    /// side came back here). Called under `following`.
    pub(super) fn push(&self, boundary: u64, link: Option<Arc<Link>>) {
        if link.is_some() {
            // Relaxed: changed under `following` only.
            self.kept_links.fetch_add(1, Ordering::Relaxed);
        }
        // Relaxed: as above.
        self.hop_count.fetch_add(1, Ordering::Relaxed);
        let hop = Box::new(Hop {
            boundary,
            linked: link.is_some(),
            down: link.as_ref().map(|link| link.down_flag()),
            link: Mutex::new(link),
            later: OnceLock::new(),
        });
        let slot = match self.hop_at(&self.latest) {
            Some(last) => &last.later,
            None => &self.later,
        };
        if slot.set(hop).is_ok()
            && let Some(hop) = slot.get()
        {
            let address = std::ptr::from_ref::<Hop>(hop).expose_provenance();
            // Release: pairs with the Acquire load in `hop_at`.
            self.latest.store(address, Ordering::Release);
        }
    }

    /// Lets go of the later links no frame still to be read can name
    /// (never the newest, nor the first, which is kept for as long as the
    /// route): for a consumer that has read up to `read_to`, a hop whose
    /// next one took over at or below it, or at its own boundary (no frame
    /// between); for a producer (`None`), every hop but the newest, as its
    /// frames name only the newest (a call that chose an older one holds
    /// it counted until it is done). Called under `following`, after a
    /// hop was added. A link's descriptors close once no pipe uses it.
    pub(super) fn retire(&self, read_to: Option<u64>) {
        let mut kept = self
            .hop_at(&self.kept)
            .or_else(|| self.later.get().map(|h| &**h));
        let mut gone = Vec::new();
        let mut advanced = false;
        while let Some(hop) = kept {
            let Some(next) = hop.later.get() else { break };
            let done =
                read_to.is_none_or(|read| next.boundary <= read || next.boundary == hop.boundary);
            if !done {
                break;
            }
            gone.extend(hop.link.lock().unwrap_or_else(|e| e.into_inner()).take());
            kept = Some(&**next);
            advanced = true;
        }
        if let Some(hop) = kept.filter(|_| advanced) {
            let address = std::ptr::from_ref::<Hop>(hop).expose_provenance();
            // Release: pairs with the Acquire load in `hop_at`.
            self.kept.store(address, Ordering::Release);
        }
        // Where a consumer reading on lets go of the next one.
        let next = kept
            .and_then(|hop| hop.later.get())
            .filter(|_| read_to.is_some());
        // Relaxed: a hint read by this ring's consumer, acted on under
        // `following`.
        (self.retire_at.0).store(next.map_or(u64::MAX, |hop| hop.boundary), Ordering::Relaxed);
        // Relaxed: changed under `following` only.
        self.kept_links.fetch_sub(gone.len(), Ordering::Relaxed);
        // Dropped outside the hops' locks: a link's last drop unwatches it.
        drop(gone);
    }

    /// `following`, held: the one thread changing the route.
    pub(super) fn follow_lock(&self) -> MutexGuard<'_, ()> {
        self.following.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ring's handle queue, locked.
    pub(super) fn local(&self) -> MutexGuard<'_, LocalHandles> {
        self.local.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Drops every handle still queued (its receiver is gone): the twins
    /// of the ends see them gone, as when a peer drops what it never
    /// received. Dropped outside the lock: an end may hold rings of its own.
    pub(super) fn drop_queued(&self) {
        let queued = std::mem::take(&mut self.local().queued);
        drop(queued);
    }
}

impl Drop for RingLink {
    /// Drops the chain of hops one by one: dropped as it is nested, a long
    /// route would overflow the stack.
    fn drop(&mut self) {
        let mut next = self.later.take();
        while let Some(mut hop) = next {
            next = hop.later.take();
        }
    }
}

/// The receiving sides held in this process, by their region's identity
/// and ring: where a sender that comes back to this process finds its
/// receiver's region and route (see [`home`]).
type Homes = BTreeMap<((u64, u64), usize), (Weak<Region>, Weak<RingLink>)>;
pub(super) static HOMES: Mutex<Homes> = Mutex::new(BTreeMap::new());

/// The region and route of the receiving side of `region`'s ring `ring`,
/// if this process holds it: a forwarded sender arriving here joins them,
/// and the two make a pipe within this process again.
pub(super) fn home(region: &Region, ring: usize) -> Option<(Arc<Region>, Arc<RingLink>)> {
    let homes = HOMES.lock().unwrap_or_else(|e| e.into_inner());
    let (region, link) = homes.get(&(region.identity(), ring))?;
    Some((region.upgrade()?, link.upgrade()?))
}

impl RingLink {
    /// The other side came back to this process: from `boundary` on, the
    /// ring's handles go through the handle queue. Checked first, as any
    /// boundary a peer names: between the route's last one and `tail`, what
    /// the ring holds (`RouteBoundary` otherwise).
    pub(super) fn come_home(&self, boundary: u64, tail: u64) -> Result<(), Violation> {
        let _following = self.follow_lock();
        if !self.is_linked() {
            return Ok(());
        }
        if boundary < self.boundary() || boundary > tail {
            return Err(Violation::RouteBoundary);
        }
        self.push(boundary, None);
        Ok(())
    }
}
