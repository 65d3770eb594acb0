//! A ring's route: how the side held here reaches the other side of its
//! ring wherever that is. No link while both sides are in this process
//! (then the ring's handle queue carries ends and descriptors), a link once
//! one of them leaves, and a later link each time the other side moves on
//! (or `None`, when it comes back here). Each later link takes over at a
//! ring position, its **boundary**: frames before it name handles on the
//! link before. See `docs/notes/2026-11-27-routing-design.md`.
//!
//! The route only grows, so a link a call borrowed stays valid for as long
//! as the ring is held here. The newest is found in one load (`latest`),
//! not by walking the route: a sender bounced between two processes a
//! thousand times leaves a route a thousand hops long.
#![allow(unsafe_code)] // one read through `latest`, argued at `RingLink::get`

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use super::Handle;
use crate::base::sync::{AtomicU32, AtomicUsize, Ordering};
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
    /// (see `get`).
    latest: AtomicUsize,
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

/// A later link of a route, and where on the ring it takes over: `None`
/// when the other side came back to this process (the handle queue then).
#[derive(Debug)]
struct Hop {
    boundary: u64,
    link: Option<Arc<Link>>,
    later: OnceLock<Box<Hop>>,
}

impl RingLink {
    /// The cell of a ring whose other side is held over `link`.
    pub(super) fn linked(link: &Arc<Link>) -> Arc<Self> {
        let cell = Self::default();
        let _ = cell.link.set(Arc::clone(link));
        Arc::new(cell)
    }

    /// The later links of the route, oldest first.
    fn hops(&self) -> impl Iterator<Item = &Hop> {
        std::iter::successors(self.later.get(), |hop| hop.later.get()).map(|hop| &**hop)
    }

    /// The link to the other side's holder now: `None` while both sides
    /// are in this process.
    #[inline]
    pub(super) fn get(&self) -> Option<&Arc<Link>> {
        // Acquire: pairs with the Release store in `push`, made once the
        // hop was in place.
        let latest = self.latest.load(Ordering::Acquire);
        if latest == 0 {
            return self.link.get();
        }
        let hop = std::ptr::with_exposed_provenance::<Hop>(latest);
        // SAFETY: `latest` is the exposed address of a hop boxed in this
        // route's chain (`push`), stored once that box was set in its
        // `OnceLock`. A hop is never taken out, moved or dropped before
        // the route (`&self`) is: the chain only grows. So the hop lives,
        // unmoved, for as long as the reference returned.
        unsafe { (*hop).link.as_ref() }
    }

    /// Routes the ring over `link` from `boundary` on: a side left this
    /// process while the other was here.
    pub(super) fn leave_over(&self, boundary: u64, link: &Arc<Link>) {
        let _following = self.following.lock().unwrap_or_else(|e| e.into_inner());
        if self.later.get().is_none() && self.link.set(Arc::clone(link)).is_ok() {
            return;
        }
        self.push(boundary, Some(Arc::clone(link)));
    }

    /// The link a frame at ring position `at` names its handles on (`None`:
    /// the handle queue).
    pub(super) fn at(&self, at: u64) -> Option<&Arc<Link>> {
        match self.hops().take_while(|hop| hop.boundary <= at).last() {
            Some(hop) => hop.link.as_ref(),
            None => self.link.get(),
        }
    }

    /// Where the latest link took over (0 for the first).
    pub(super) fn boundary(&self) -> u64 {
        self.newest().map_or(0, |hop| hop.boundary)
    }

    /// Adds a later link, taking over at `boundary` (`None`: the other
    /// side came back here). Called under `following`.
    pub(super) fn push(&self, boundary: u64, link: Option<Arc<Link>>) {
        let hop = Box::new(Hop {
            boundary,
            link,
            later: OnceLock::new(),
        });
        let slot = match self.newest() {
            Some(last) => &last.later,
            None => &self.later,
        };
        if slot.set(hop).is_ok()
            && let Some(hop) = slot.get()
        {
            let address = std::ptr::from_ref::<Hop>(hop).expose_provenance();
            // Release: pairs with the Acquire load in `get`.
            self.latest.store(address, Ordering::Release);
        }
    }

    /// The newest hop, if any.
    fn newest(&self) -> Option<&Hop> {
        self.hops().last()
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
        let _following = self.following.lock().unwrap_or_else(|e| e.into_inner());
        if self.get().is_none() {
            return Ok(());
        }
        if boundary < self.boundary() || boundary > tail {
            return Err(Violation::RouteBoundary);
        }
        self.push(boundary, None);
        Ok(())
    }
}
