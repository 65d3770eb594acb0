//! One pipe's region: a header, two ring control blocks, two data areas.
//!
//! ```text
//! 0       header (magic "FERRYPIP", version, ring capacity)   16 bytes
//! 256     Control of ring 0 (end 0 writes, end 1 reads)       256 bytes
//! 512     Control of ring 1 (end 1 writes, end 0 reads)       256 bytes
//! 4096    data of ring 0                                      capacity
//! 4096+c  data of ring 1                                      capacity
//! ```
//!
//! The layout's constants and the header's encoding are in
//! [`crate::base::wire::region`], which asserts the layout at compile time.
//!
//! Soundness of the raw accesses: the mapping is exactly `4096 + 2c` bytes
//! (a mapping is the sealed object's size, which `RegionHeader::decode`
//! checks against the capacity before the region is used), the control
//! blocks are all atomics (valid for any bytes a peer writes) at 128-byte
//! aligned offsets of a page-aligned mapping, and the data areas are only
//! reached through the ring's checked raw-pointer copies.
#![allow(unsafe_code)]

use crate::base::wire::Violation;
use std::collections::BTreeSet;
use std::io;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::base::sync::{AtomicU8, AtomicUsize, Ordering};
use crate::base::sys::MapError;
use crate::base::sys::{Mapping, PeerAccess, PeerFd, Ringer, SharedMemory};
use crate::base::wire::region::{
    CONTROL_AT, DATA_AT, HEADER_LEN, MAX_CAPACITY, MAX_REGION_LEN, MIN_CAPACITY, MIN_REGION_LEN,
    RegionHeader,
};
use crate::transport::ring::control::Side;
use crate::transport::ring::{CONTROL_SIZE, Control, Storage};

/// The mapped memory of one pipe, shared by its two ends.
#[derive(Debug)]
pub(crate) struct Region {
    map: Mapping,
    capacity: usize,
    /// The memory object, kept while this region may still be sent to
    /// another process. A pipe made here keeps it until an end has been
    /// sent whole; past that (an end that arrived, or the end left here),
    /// it is kept only within [`kept_regions`]' bound, so an end can be sent
    /// on (see `Half::forward`) without the descriptors of a process growing
    /// with the number of pipe ends it holds.
    object: Mutex<Option<Object>>,
    /// The memory object's identity (device, inode).
    identity: (u64, u64),
    /// What rings the doorbell of each side of each ring
    /// (`[ring][consumer as usize]`) whose waiter waits on one: in the
    /// waiter's process its own ringer (for a peer in this process, and for
    /// the hang-up watcher), elsewhere the copy it sent. Local to this
    /// process, never in the shared memory.
    bells: [[Mutex<Option<Arc<Ringer>>>; 2]; 2],
    /// One bit per ring, set while a half of this process moves a side of
    /// that ring to another process (see [`Region::claim_move`]). Local to
    /// this process, never in the shared memory.
    moving: AtomicU8,
}

/// A claim on moving a side of one of a region's rings, given back when
/// dropped.
#[derive(Debug)]
pub(crate) struct MoveClaim {
    region: Arc<Region>,
    bit: u8,
}

impl Drop for MoveClaim {
    fn drop(&mut self) {
        // Release: the claim's holder's writes (the ring's link cell, set
        // by a move that succeeded) are seen by the next claimer.
        self.region.moving.fetch_and(!self.bit, Ordering::Release);
    }
}

/// A side of one of a region's rings: its producer or its consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    /// Writes ring `.0`.
    Producer(usize),
    /// Reads ring `.0`.
    Consumer(usize),
}

impl Part {
    /// The ring's other side.
    pub(crate) fn twin(self) -> Self {
        match self {
            Self::Producer(ring) => Self::Consumer(ring),
            Self::Consumer(ring) => Self::Producer(ring),
        }
    }
}

/// A region's memory object, and whether it counts against
/// [`kept_regions`]' bound.
#[derive(Debug)]
struct Object {
    memory: SharedMemory,
    counted: bool,
}

impl Drop for Object {
    fn drop(&mut self) {
        if self.counted {
            KEPT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Memory objects kept past what sending a pipe's ends needs (see
/// `Region::object`), in this process.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// The most memory objects kept for ends to be sent on: a quarter of the
/// soft descriptor limit, read each time (a process that raises it gets
/// the room at once; a read costs less than the mapping it goes with).
/// With the usual limit of 1,024, 256 ends may be sent on; one more stays
/// where it is (`NotTransferable`) until others are dropped or sent. A
/// peer's ends count as this process's own: a peer sending many can make
/// ends here stay where they are, never break one.
pub(crate) fn kept_regions() -> usize {
    let limit = crate::base::sys::descriptor_limit().unwrap_or(1 << 20);
    usize::try_from(limit / 4).unwrap_or(usize::MAX)
}

/// Counts one more kept memory object, if [`kept_regions`] allows.
fn count_kept() -> bool {
    // Relaxed: a count, ordering nothing else.
    if KEPT.fetch_add(1, Ordering::Relaxed) < kept_regions() {
        return true;
    }
    KEPT.fetch_sub(1, Ordering::Relaxed);
    false
}

/// The ring sides held in this process: (object identity, side). A ring
/// has one producer and one consumer; a peer that sends back a pipe end or
/// half whose side this process already holds (under another id, or the
/// twin of one that lives here) would give this process a second producer
/// or consumer of one ring, so each side is held at most once.
static HELD: Mutex<BTreeSet<(u64, u64, Part)>> = Mutex::new(BTreeSet::new());

/// A ring side's place in [`HELD`], given up when dropped.
#[derive(Debug)]
pub(crate) struct EndHold((u64, u64, Part));

impl Drop for EndHold {
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
    }
}

impl Region {
    /// A new region whose two rings hold `capacity` bytes each.
    pub(crate) fn create(capacity: usize) -> io::Result<Arc<Self>> {
        let header = RegionHeader::new(capacity).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pipe capacity must be a power of two from {MIN_CAPACITY} to {MAX_CAPACITY} bytes, not {capacity}"
                ),
            )
        })?;
        let object = SharedMemory::create("ferry-pipe", DATA_AT + 2 * capacity)?;
        let identity = object.identity()?;
        let map = object.map()?;
        let header = header.encode();
        // SAFETY: the mapping is DATA_AT + 2 * capacity bytes, more than
        // HEADER_LEN, and fresh: no one else sees it yet.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), map.as_ptr(), HEADER_LEN) };
        Ok(Arc::new(Self {
            map,
            capacity,
            object: Mutex::new(Some(Object {
                memory: object,
                counted: false,
            })),
            identity,
            bells: Default::default(),
            moving: AtomicU8::new(0),
        }))
    }

    /// Maps a region a peer sent, checking its seals, size and header.
    /// The descriptor is closed before this returns. The ring positions
    /// inside are checked by the ring's sides when they adopt them
    /// (`Producer::new`, `Consumer::new`), on the values they then use.
    ///
    /// The size is not checked against a link's map budget here: a region
    /// that does not fit is still mapped (for a moment, at most
    /// `MAX_REGION_LEN` of address space and never touched beyond its
    /// control blocks), so that its holder can close the sides it was sent
    /// ([`Region::close_sides`]) and the pipe's other end sees it gone.
    pub(crate) fn from_peer(fd: PeerFd, keep: bool) -> Result<Arc<Self>, MapError> {
        let object =
            SharedMemory::from_peer(fd, MIN_REGION_LEN, MAX_REGION_LEN, PeerAccess::Shared)?;
        let identity = object.identity().map_err(|_| Violation::StatFailed)?;
        let map = object.map().map_err(MapError::from_map_failure)?;
        let mut header = [0u8; HEADER_LEN];
        // SAFETY: the mapping is at least MIN_REGION_LEN > HEADER_LEN bytes
        // (size checked above, and sealed so it cannot shrink); we copy the
        // header out of it once.
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), header.as_mut_ptr(), HEADER_LEN) };
        let header = RegionHeader::decode(&header, object.len())?;
        Ok(Arc::new(Self {
            map,
            capacity: header.ring_capacity(),
            // Lazily: an `Object` made and dropped would uncount itself.
            object: Mutex::new((keep && count_kept()).then(|| Object {
                memory: object,
                counted: true,
            })),
            identity,
            bells: Default::default(),
            moving: AtomicU8::new(0),
        }))
    }

    /// The memory object's inode: the same in every process that maps it,
    /// and unforgeable (the kernel's), so records can name the region by it.
    pub(crate) fn inode(&self) -> u64 {
        self.identity.1
    }

    /// Sets (or clears) what rings the doorbell of side `part`.
    pub(crate) fn set_bell(&self, part: Part, ringer: Option<Arc<Ringer>>) {
        *self.bell_slot(part) = ringer;
    }

    /// What rings the doorbell of side `part`, if it has one here.
    pub(crate) fn bell(&self, part: Part) -> Option<Arc<Ringer>> {
        self.bell_slot(part).clone()
    }

    /// The locked slot of side `part`'s ringer, for a waiter making its
    /// doorbell once.
    pub(crate) fn bell_slot(&self, part: Part) -> MutexGuard<'_, Option<Arc<Ringer>>> {
        let slot = match part {
            Part::Producer(ring) => &self.bells[ring & 1][0],
            Part::Consumer(ring) => &self.bells[ring & 1][1],
        };
        slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Claims side `part` of one of this pipe's rings for a half of this
    /// process; `None` if this process holds that side already.
    pub(crate) fn hold(&self, part: Part) -> Option<EndHold> {
        let (dev, ino) = self.identity;
        let key = (dev, ino, part);
        let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
        // Not `then_some(EndHold(..))`: that builds the hold even when the
        // end is taken, and its drop would take the lock held here.
        if held.insert(key) {
            Some(EndHold(key))
        } else {
            None
        }
    }

    /// Claims the move of a side of ring `ring` for one thread of this
    /// process: `None` while another thread holds the claim (it is moving
    /// that ring's other side, or this one). The twin check and the move
    /// are thus one step: two threads cannot each find the other side of
    /// a ring here and both send their side away.
    pub(crate) fn claim_move(self: &Arc<Self>, ring: usize) -> Option<MoveClaim> {
        let bit = 1u8 << (ring & 1);
        // Acquire: pairs with the Release in `MoveClaim::drop`.
        let before = self.moving.fetch_or(bit, Ordering::Acquire);
        (before & bit == 0).then(|| MoveClaim {
            region: Arc::clone(self),
            bit,
        })
    }

    /// Bytes mapped for this region.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// Each ring's data capacity in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Sends the region's memory object with `send`, if it may still be
    /// sent. Once `send` succeeds and `whole` says a whole end went, the
    /// object is kept only within [`kept_regions`]' bound (so the end left
    /// here may be sent on), else forgotten. On failure the object is kept,
    /// so the region can still be sent later.
    pub(crate) fn send_object(
        &self,
        whole: bool,
        send: impl FnOnce(BorrowedFd<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut object = self.object.lock().unwrap_or_else(|e| e.into_inner());
        let kept = object
            .as_mut()
            .ok_or_else(|| io::Error::other("pipe region was already sent"))?;
        send(kept.memory.fd())?;
        if whole && !kept.counted {
            match count_kept() {
                true => kept.counted = true,
                false => *object = None,
            }
        }
        Ok(())
    }

    /// The memory object's identity (device, inode).
    pub(crate) fn identity(&self) -> (u64, u64) {
        self.identity
    }

    /// Keeps `other`'s memory object (another mapping of the same region)
    /// if this one has none: a side that came home brings it, so the pipe
    /// can be sent on again.
    pub(crate) fn keep_object_of(&self, other: &Self) {
        let mut mine = self.object.lock().unwrap_or_else(|e| e.into_inner());
        if mine.is_none() && self.identity == other.identity {
            *mine = other
                .object
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
        }
    }

    /// Whether this process still has the memory object, so the region can
    /// be sent (see `object`).
    pub(crate) fn may_send(&self) -> bool {
        self.object
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The control block of ring `index` (0 or 1).
    #[inline]
    pub(crate) fn control(&self, index: usize) -> &Control {
        debug_assert!(index < 2);
        // Masked, not asserted: the index is a ring's (0 or 1) on every
        // call, and the mask keeps even a wrong one in bounds at no cost.
        let offset = CONTROL_AT + (index & 1) * CONTROL_SIZE;
        debug_assert!(offset + CONTROL_SIZE <= DATA_AT && DATA_AT <= self.map.len());
        // SAFETY: in bounds, 128-byte aligned and valid for any bytes (see
        // the module comment); borrowed no longer than the mapping lives.
        unsafe { &*self.map.as_ptr().add(offset).cast::<Control>() }
    }

    /// Ring `index` (0 or 1) of this region.
    pub(crate) fn ring(self: &Arc<Self>, index: usize) -> RingView {
        assert!(index < 2);
        let control = NonNull::from(self.control(index));
        // SAFETY: DATA_AT + index * capacity + capacity <= the mapping's size
        // (see the module comment).
        let data = unsafe { self.map.as_ptr().add(DATA_AT + index * self.capacity) };
        RingView {
            _region: Arc::clone(self),
            control,
            data: NonNull::new(data).expect("a mapping is never at address 0"),
            capacity: self.capacity,
        }
    }

    /// Closes sides `parts` of this pipe without ever holding them, as
    /// dropping their halves would (our side says closed, then whoever
    /// sleeps on it for the other side is woken): for an end this process
    /// was sent and refused. A peer waiting only on its doorbell is not
    /// rung (the doorbell is not known here); it sees the close on its next
    /// look.
    pub(crate) fn close_sides(self: &Arc<Self>, parts: &[Part]) {
        for &part in parts {
            let sides = self.sides(part);
            // Release: pairs with the other side's Acquire load of
            // `closed`, as a dropped half's store does.
            sides.me().closed.store(1, Ordering::Release);
            crate::transport::ring::wake::ring_all(sides.me());
        }
    }

    /// The control-block sides the holder of `part` looks at, found once.
    pub(crate) fn sides(self: &Arc<Self>, part: Part) -> SidesView {
        let (ring, producer) = match part {
            Part::Producer(ring) => (ring, true),
            Part::Consumer(ring) => (ring, false),
        };
        let (this, other) = (self.control(ring), self.control(1 - (ring & 1)));
        let (me, peer, my_other) = match producer {
            true => (&this.producer, &this.consumer, &other.consumer),
            false => (&this.consumer, &this.producer, &other.producer),
        };
        // The peer's receiving side: of this ring if this is its producer,
        // else of the other ring (which the peer reads while its end is whole).
        let peer_rx = match producer {
            true => &this.consumer,
            false => &other.consumer,
        };
        SidesView {
            _region: Arc::clone(self),
            me: NonNull::from(me),
            peer: NonNull::from(peer),
            my_other: NonNull::from(my_other),
            peer_rx: NonNull::from(peer_rx),
        }
    }
}

/// The four control-block sides one half of a pipe end looks at on every
/// call (its own, its ring's other side, its end's side of the other ring,
/// and the peer's receiving side), worked out once.
#[derive(Debug)]
pub(crate) struct SidesView {
    /// Keeps the mapping the addresses point into (never read: held).
    _region: Arc<Region>,
    me: NonNull<Side>,
    peer: NonNull<Side>,
    my_other: NonNull<Side>,
    peer_rx: NonNull<Side>,
}

// SAFETY: the addresses point into control blocks of the mapping `_region`
// keeps alive; a `Side` is atomics only, usable from any thread.
unsafe impl Send for SidesView {}
// SAFETY: as above.
unsafe impl Sync for SidesView {}

impl SidesView {
    /// This half's side.
    #[inline]
    pub(crate) fn me(&self) -> &Side {
        // SAFETY: (so for the three below) a `Side` inside the mapping
        // this view keeps (see `Region::control`), borrowed no longer than
        // the view.
        unsafe { self.me.as_ref() }
    }
    /// The other side of this half's ring.
    #[inline]
    pub(crate) fn peer(&self) -> &Side {
        // SAFETY: see `me`.
        unsafe { self.peer.as_ref() }
    }
    /// This end's side of the other ring.
    #[inline]
    pub(crate) fn my_other(&self) -> &Side {
        // SAFETY: see `me`.
        unsafe { self.my_other.as_ref() }
    }
    /// The peer's receiving side (see [`Region::sides`]).
    #[inline]
    pub(crate) fn peer_rx(&self) -> &Side {
        // SAFETY: see `me`.
        unsafe { self.peer_rx.as_ref() }
    }
}

/// One of a region's two rings, as ring [`Storage`]: where its control
/// block and data area are, worked out once (the hot path reads them on
/// every frame).
#[derive(Debug, Clone)]
pub(crate) struct RingView {
    /// Keeps the mapping the two addresses point into (never read: held).
    _region: Arc<Region>,
    control: NonNull<Control>,
    data: NonNull<u8>,
    capacity: usize,
}

// SAFETY: the two addresses point into the mapping `region` keeps alive,
// which every thread may use (the control block is atomics, the data area
// is only reached through the ring's raw-pointer copies); nothing in a
// view is tied to a thread.
unsafe impl Send for RingView {}
// SAFETY: as above; `&RingView` hands out only what `&Region` does.
unsafe impl Sync for RingView {}

// SAFETY: the control block sits at a 128-byte aligned offset inside the
// mapping (see the module comment) and is all atomics; the data area of
// `capacity` bytes lies inside the mapping, whose size was checked; both
// live as long as the `Arc<Region>` this view holds.
unsafe impl Storage for RingView {
    #[inline]
    fn control(&self) -> &Control {
        // SAFETY: see the impl's comment; borrowed no longer than `self`,
        // which keeps the mapping.
        unsafe { self.control.as_ref() }
    }
    #[inline]
    fn data(&self) -> *mut u8 {
        self.data.as_ptr()
    }
    #[inline]
    fn capacity(&self) -> usize {
        self.capacity
    }
}

// Not under Miri: these make memfds and map them.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    /// A peer's copy of `region`'s memory object, as if received from a
    /// process that made it: `region` itself is gone from this one.
    fn as_received(region: Arc<Region>) -> PeerFd {
        let mut copy = None;
        region
            .send_object(true, |fd| {
                copy = Some(fd.try_clone_to_owned()?);
                Ok(())
            })
            .expect("object still held");
        PeerFd::new(copy.expect("dup"))
    }

    #[test]
    fn a_peer_region_is_mapped_with_the_capacity_its_header_names() {
        let region = Region::create(8192).unwrap();
        let peer = Region::from_peer(as_received(region), false).unwrap();
        assert_eq!(peer.capacity(), 8192);
    }

    #[test]
    fn each_end_is_held_once_in_a_process() {
        let region = Region::create(8192).unwrap();
        let mut copy = None;
        region
            .send_object(true, |fd| {
                copy = Some(fd.try_clone_to_owned()?);
                Ok(())
            })
            .unwrap();
        let again = Region::from_peer(PeerFd::new(copy.unwrap()), false).unwrap();
        let end = region.hold(Part::Producer(0)).expect("producer 0 is free");
        assert!(
            again.hold(Part::Producer(0)).is_none(),
            "producer 0 through a second mapping"
        );
        let other = again.hold(Part::Consumer(0)).expect("consumer 0 is free");
        drop(end);
        assert!(
            again.hold(Part::Producer(0)).is_some(),
            "given up with its hold"
        );
        drop(other);
    }

    #[test]
    fn a_peer_region_whose_header_lies_about_its_capacity_is_refused() {
        let region = Region::create(MIN_CAPACITY).unwrap();
        let forged = RegionHeader::new(2 * MIN_CAPACITY).unwrap().encode();
        // SAFETY: the mapping is more than HEADER_LEN bytes, and this test
        // alone uses it.
        unsafe { std::ptr::copy_nonoverlapping(forged.as_ptr(), region.map.as_ptr(), HEADER_LEN) };
        let refused = Region::from_peer(as_received(region), false);
        assert!(
            matches!(refused, Err(MapError::Violation(why)) if why == Violation::RegionCapacityMismatch),
            "{refused:?}"
        );
    }
}
