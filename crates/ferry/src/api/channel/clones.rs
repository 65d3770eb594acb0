//! A receiver that reads the rings of its sender's clones in other
//! processes along with its own.
//!
//! Two processes cannot share the sending side of one ring (a lock in
//! shared memory would let a dead or hostile holder stop the others), so
//! a sender with clones travels as a clone of its own: the sending half of
//! a new ring, whose receiving half goes first, in an `Attach` frame over
//! the ring the clones share, to the receiver they all send to
//! (`Sender::clone_to_travel`). The receiver keeps the attached rings in a
//! set and, once it has one:
//!
//! - takes one message from each ring in turn (its own first in the
//!   first round, then where the last turn ended): a clone that floods its
//!   ring gets one message in each round, so it cannot starve the others;
//!   each clone's messages stay in order (each has its own ring);
//! - waits on one doorbell, its own, which every attached ring shares
//!   (`Half::install_doorbell`): one descriptor for `ready_fd`, `Select`
//!   and tokio, readable when any ring changes;
//! - drops a clone's ring once it has ended (its sender gone and the ring
//!   drained) or broke the rules (that clone alone is cut off), and says
//!   `Disconnected` once its own ring and every attached one have ended.
//!
//! A receiver forwarded while messages naming its forwarder's link were
//! unread comes with them in a pipe of their own, its **prefix** (see
//! `Half::begin_forward_receiver`): the set reads the prefix alone until
//! it ends, then its rings as above; once the prefix has ended and no
//! ring is attached, receives take the common path again.
//!
//! Such a receiver travels with its rings (each moved as a receiver is,
//! with its unread messages): sent on from where its sender is, a fresh
//! receiver goes in its place and the receiver and the rings follow it in
//! `Attach` frames ([`Gathered`]); forwarded, the rings follow its
//! prefix's messages in `Attach` frames in the prefix (`prefix.rs`), and
//! join the new holder's set once the prefix has ended. A ring may so
//! arrive with a prefix of its own, read first in its turns.
//!
//! Rings attached to an attached ring (a travelled clone cloned again and
//! sent on) join the same set: it stays flat. At most [`MOST_ATTACHED`]
//! rings join; one more is dropped (its clone sees `Disconnected`), so a
//! peer making clones costs this process a bounded amount. Each attached
//! ring's memory is charged to the link it came over, as any received end.

use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::error::RecvFault;
use super::prefix::Held;
use super::receiver::Delivery;
use super::{Arrived, Handle, Receiver};
use crate::base::sync::Ordering;
use crate::base::wire::Violation;
use crate::transport::ring::wake;

/// The most rings a receiver reads besides its own.
pub(super) const MOST_ATTACHED: usize = 1024;

/// How long a merged wait sleeps at a time while one of its rings has no
/// doorbell (handing it to the ring's sender failed: out of descriptors).
const UNBELLED_NAP: Duration = Duration::from_millis(10);

/// The rings attached to a receiver.
#[derive(Debug, Default)]
pub(super) struct Clones {
    /// Rings whose `Attach` frames were read (under the receive lock of
    /// the ring they came on) and not yet taken into the set.
    arrived: Mutex<Vec<Receiver>>,
    set: Mutex<Set>,
}

#[derive(Debug, Default)]
struct Set {
    rings: Vec<Receiver>,
    /// Whose turn is next: 0 the receiver's own ring, `i` `rings[i - 1]`.
    next: usize,
    /// The receiver's own ring has ended (its sender gone, drained).
    own_done: bool,
    /// Messages that came before every ring's: read to their end first.
    prefix: Option<Ahead>,
}

/// A receiver's prefix: messages held in memory (taken out by a forward
/// that did not go), then a pipe of its own (it came with the receiver).
#[derive(Debug, Default)]
struct Ahead {
    held: Held,
    ring: Option<Box<Receiver>>,
}

impl Set {
    /// The prefix, if it is a pipe of its own.
    fn ring_prefix(&self) -> Option<&Receiver> {
        self.prefix.as_ref()?.ring.as_deref()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Receiver {
    /// Whether a ring was attached: receives go over the set from then on.
    /// The flag is the half's, beside what every receive reads first (its
    /// failure flags), so the common receive touches no other cache line.
    #[inline]
    pub(super) fn attached(&self) -> bool {
        // Relaxed: set by this process under the receive lock; a receive
        // that misses it reads its own ring as before and sees it next time.
        self.half.attached.load(Ordering::Relaxed)
    }

    /// Takes what an `Attach` frame carried (`ends`, and `refused` ends
    /// this process did not map): one receiving half, read with this ring
    /// from now on. Anything else breaks the rules.
    pub(super) fn attach(&self, ends: Vec<Arrived>, refused: usize) -> Result<(), Violation> {
        let mut ends = ends.into_iter();
        let (end, more) = (ends.next(), ends.next());
        match (end, more, refused) {
            // The ring did not fit the link's map budget: dropped, its
            // clone sees `Disconnected`.
            (None, None, 1) => Ok(()),
            (Some(end), None, 0) => match end.into_end() {
                Handle::Receiver(rx) => {
                    rx.set_max_message(self.max_message());
                    rx.set_bytes_only(self.bytes_only());
                    lock(&self.clones.arrived).push(rx);
                    // Relaxed: see `Receiver::attached`.
                    self.half.attached.store(true, Ordering::Relaxed);
                    Ok(())
                }
                _ => Err(Violation::BadAttach),
            },
            _ => Err(Violation::BadAttach),
        }
    }

    /// Reads `prefix` to its end before any ring (see the module
    /// comment).
    pub(super) fn set_prefix(&self, prefix: Receiver) {
        prefix.set_max_message(self.max_message());
        prefix.set_bytes_only(self.bytes_only());
        lock(&self.clones.set).prefix.get_or_insert_default().ring = Some(Box::new(prefix));
        // Relaxed: see `Receiver::attached`.
        self.half.attached.store(true, Ordering::Relaxed);
    }

    /// Reads `held` before any ring (see `prefix.rs`).
    pub(super) fn set_held_prefix(&self, mut held: Held) {
        let mut set = lock(&self.clones.set);
        let ahead = set.prefix.get_or_insert_default();
        // Before what the prefix still holds: taken out of it first.
        held.append(&mut ahead.held);
        ahead.held = held;
        drop(set);
        // Relaxed: see `Receiver::attached`.
        self.half.attached.store(true, Ordering::Relaxed);
    }

    /// Says on every ring this receiver reads besides its own (its
    /// prefix, its clones' rings) whether it takes bytes only: their
    /// senders read it there (see [`Receiver::set_bytes_only`]).
    pub(super) fn set_bytes_only_attached(&self, on: bool) {
        let set = lock(&self.clones.set);
        let arrived = lock(&self.clones.arrived);
        let rings = set.rings.iter().chain(arrived.iter());
        for rx in set.ring_prefix().into_iter().chain(rings) {
            rx.set_bytes_only(on);
        }
    }

    /// Whether rings of clones are attached (a prefix alone is not).
    pub(super) fn reads_clone_rings(&self) -> bool {
        self.attached()
            && (!lock(&self.clones.set).rings.is_empty() || !lock(&self.clones.arrived).is_empty())
    }

    /// Takes this receiver's prefix out into `into`, every message it
    /// holds now, in order (a forward sends them on first, see
    /// `prefix.rs`); `false` if there is none. A prefix's messages were
    /// all written before the receiver was handed over, so none is still
    /// to come.
    pub(super) fn take_prefix_into(
        &self,
        into: &mut super::prefix::Prefix,
    ) -> Result<bool, RecvFault> {
        let mut set = lock(&self.clones.set);
        let Some(ahead) = set.prefix.take() else {
            return Ok(false);
        };
        into.extend(ahead.held);
        if let Some(ring) = ahead.ring {
            loop {
                let fault = match into.take(|out| ring.receive(out, Some(Instant::now()))) {
                    Ok(()) => continue,
                    Err(RecvFault::Disconnected) => break,
                    // An `Attach` read: its ring goes after the messages.
                    Err(RecvFault::Timeout) if !lock(&ring.clones.arrived).is_empty() => {
                        into.add_rings(std::mem::take(&mut *lock(&ring.clones.arrived)));
                        continue;
                    }
                    // Every message was written before the receiver was
                    // handed over: a wait means none is left, unless a
                    // frame still lies unread (a message it could not take
                    // now: kept, as for any other failure).
                    Err(RecvFault::Timeout) if !ring.ready_alone() => break,
                    Err(fault) => fault,
                };
                // What is left stays, after what was taken (which the
                // caller keeps ahead of it, `Prefix::keep`).
                set.prefix = Some(Ahead {
                    held: Held::new(),
                    ring: Some(ring),
                });
                return Err(fault);
            }
        }
        if set.rings.is_empty() {
            // Relaxed: as in `prefix_turn`.
            self.half.attached.store(false, Ordering::Relaxed);
            if !lock(&self.clones.arrived).is_empty() {
                self.half.attached.store(true, Ordering::Relaxed);
            }
        }
        Ok(true)
    }

    /// Whether this receiver has a prefix still to read.
    pub(super) fn has_prefix(&self) -> bool {
        self.attached() && lock(&self.clones.set).prefix.is_some()
    }

    /// The prefix's turn, while there is one: `Some` with what a receive
    /// from it gave, `None` once it has ended (dropped, and the common
    /// path taken again if no ring is attached either).
    fn prefix_turn(
        &self,
        set: &mut Set,
        out: &mut Delivery<'_>,
    ) -> Option<Result<bool, RecvFault>> {
        let ahead = set.prefix.as_mut()?;
        if let Some((bytes, handles)) = ahead.held.pop_front() {
            *out.bytes = bytes;
            if let Some(ends) = out.ends.as_deref_mut() {
                ends.clear();
                ends.extend(handles.into_iter().map(Arrived::Handle));
            }
            return Some(Ok(true));
        }
        if let Some(prefix) = &ahead.ring {
            loop {
                let got = prefix.receive(out, Some(Instant::now()));
                // Rings the forwarder attached after the messages (the
                // ones it read along with this ring's, see `prefix.rs`)
                // join this receiver's set, read once the prefix has
                // ended.
                let arrived = std::mem::take(&mut *lock(&prefix.clones.arrived));
                let attached = !arrived.is_empty();
                if attached {
                    lock(&self.clones.arrived).extend(arrived);
                    // Relaxed: see `Receiver::attached`.
                    self.half.attached.store(true, Ordering::Relaxed);
                }
                match got {
                    Ok(()) => return Some(Ok(true)),
                    // An `Attach` read: the prefix goes on.
                    Err(RecvFault::Timeout) if attached => {}
                    Err(RecvFault::Timeout) => return Some(Ok(false)),
                    Err(RecvFault::Disconnected) => break,
                    // The forwarder that wrote it broke the rules: so is
                    // this pipe.
                    Err(fault) => return Some(Err(fault)),
                }
            }
        }
        set.prefix = None;
        if set.rings.is_empty() && !set.own_done {
            // Relaxed: see `Receiver::attached`. Cleared first, then the
            // arrivals looked at: an `Attach` read meanwhile files its
            // ring, then sets the flag, so one of the two sees the other.
            self.half.attached.store(false, Ordering::Relaxed);
            if !lock(&self.clones.arrived).is_empty() {
                self.half.attached.store(true, Ordering::Relaxed);
            }
        }
        None
    }

    /// Moves the rings attached since into the set, sharing this
    /// receiver's doorbell with them if it has one; past the bound, drops
    /// them.
    fn take_arrived(&self, set: &mut Set) {
        let arrived = std::mem::take(&mut *lock(&self.clones.arrived));
        for rx in arrived {
            if set.rings.len() >= MOST_ATTACHED {
                continue;
            }
            if let Some((bell, ringer)) = self.half.doorbell_pair() {
                // A failure leaves the ring without it: waits then nap.
                let _ = rx.half.install_doorbell(bell, ringer);
            }
            set.rings.push(rx);
        }
    }

    /// One turn for each ring, from where the last turn ended, without
    /// waiting: `Ok(true)` once one gave a message into `out`.
    fn merged_round(&self, out: &mut Delivery<'_>) -> Result<bool, RecvFault> {
        let mut set = lock(&self.clones.set);
        if let Some(turn) = self.prefix_turn(&mut set, out) {
            return turn;
        }
        self.take_arrived(&mut set);
        let now = Some(Instant::now());
        let turns = set.rings.len() + 1;
        let mut ended = Vec::new();
        let mut got = false;
        for k in 0..turns {
            let i = (set.next + k) % turns;
            let result = match i {
                0 if set.own_done => continue,
                0 => self.receive(out, now),
                _ => set.rings[i - 1].receive_attached(out, now),
            };
            // A ring attached to an attached one joins this set.
            if i > 0 {
                let arrived = std::mem::take(&mut *lock(&set.rings[i - 1].clones.arrived));
                if !arrived.is_empty() {
                    lock(&self.clones.arrived).extend(arrived);
                }
            }
            match result {
                Ok(()) => {
                    set.next = i + 1;
                    got = true;
                    break;
                }
                Err(RecvFault::Timeout) => {}
                Err(RecvFault::Disconnected) if i == 0 => set.own_done = true,
                Err(fault @ RecvFault::Protocol(_)) if i == 0 => return Err(fault),
                // A clone's ring that ended, or broke the rules: dropped,
                // and that clone alone is cut off.
                Err(RecvFault::Disconnected | RecvFault::Protocol(_)) => ended.push(i - 1),
                Err(fault @ RecvFault::Io(_)) => return Err(fault),
            }
        }
        // Highest first, so each index still names its ring.
        ended.sort_unstable();
        for &i in ended.iter().rev() {
            set.rings.remove(i);
        }
        self.take_arrived(&mut set);
        if got {
            return Ok(true);
        }
        if set.own_done && set.rings.is_empty() {
            return Err(RecvFault::Disconnected);
        }
        Ok(false)
    }

    /// A receive once rings are attached: a round of turns, then (none
    /// having a message) every ring's doorbell armed, another round, and
    /// a wait on the doorbell until `deadline`.
    pub(super) fn recv_merged(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        let past = |deadline: Option<Instant>| deadline.is_some_and(|d| d <= Instant::now());
        loop {
            if self.merged_round(out)? {
                return Ok(());
            }
            // A `try_` call makes no descriptor; with one made (a poll
            // loop, `Select`, tokio), it arms it as a single ring's does.
            if self.half.armable_bell().is_none() && past(deadline) {
                return Err(RecvFault::Timeout);
            }
            let bell = Arc::clone(self.half.doorbell().map_err(RecvFault::Io)?);
            let belled = self.arm_all(true);
            if self.merged_round(out)? {
                return Ok(());
            }
            if past(deadline) {
                return Err(RecvFault::Timeout);
            }
            let until = match belled {
                true => deadline,
                false => {
                    let nap = Instant::now() + UNBELLED_NAP;
                    Some(deadline.map_or(nap, |d| d.min(nap)))
                }
            };
            crate::base::sys::wait_readable(&[bell.as_fd()], until).map_err(RecvFault::Io)?;
        }
    }

    /// Arms the doorbell of this ring and every attached one (clearing it
    /// first if `rung`), handing it to rings that lack it; whether every
    /// ring has it.
    pub(super) fn arm_all(&self, rung: bool) -> bool {
        let Some((bell, ringer)) = self.half.doorbell_pair() else {
            return false;
        };
        let mut set = lock(&self.clones.set);
        self.take_arrived(&mut set);
        if rung {
            bell.clear();
        }
        wake::announce_doorbell(self.half.sides().0);
        let mut belled = true;
        let mut arm = |rx: &Receiver| {
            if rx.half.armable_bell().is_none()
                && rx
                    .half
                    .install_doorbell(Arc::clone(&bell), Arc::clone(&ringer))
                    .is_err()
            {
                belled = false;
                return;
            }
            wake::announce_doorbell(rx.half.sides().0);
        };
        if let Some(prefix) = set.ring_prefix() {
            arm(prefix);
        }
        for rx in &set.rings {
            arm(rx);
            // An attached ring's own prefix is read in its turns.
            if let Some(prefix) = lock(&rx.clones.set).ring_prefix() {
                arm(prefix);
            }
        }
        wake::settle();
        belled
    }

    /// Says no ring of this receiver waits on the doorbell any more.
    pub(super) fn disarm_all(&self) {
        self.half.disarm_bell();
        let set = lock(&self.clones.set);
        for rx in set.ring_prefix().into_iter().chain(&set.rings) {
            rx.half.disarm_bell();
            if let Some(prefix) = lock(&rx.clones.set).ring_prefix() {
                prefix.half.disarm_bell();
            }
        }
    }

    /// Whether a receive would not wait now, over every ring.
    pub(super) fn merged_ready(&self) -> bool {
        let mut set = lock(&self.clones.set);
        if let Some(ahead) = &set.prefix {
            // Its messages come first (its end, too: the next receive
            // moves on from it).
            return !ahead.held.is_empty() || ahead.ring.as_ref().is_none_or(|p| p.ready_alone());
        }
        self.take_arrived(&mut set);
        if !set.own_done && self.ready_alone() {
            return true;
        }
        set.rings.iter().any(Receiver::ready_attached) || (set.own_done && set.rings.is_empty())
    }

    /// A turn of an attached ring: its own prefix first, if it came with
    /// one (it was forwarded to the process that attached it with messages
    /// naming that forwarder's link, see `prefix.rs`), then its ring.
    fn receive_attached(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        if self.attached() {
            let mut set = lock(&self.clones.set);
            if let Some(turn) = self.prefix_turn(&mut set, out) {
                return match turn {
                    Ok(true) => Ok(()),
                    Ok(false) => Err(RecvFault::Timeout),
                    Err(fault) => Err(fault),
                };
            }
        }
        self.receive(out, deadline)
    }

    /// Whether an attached ring's turn would give something now (see
    /// [`Receiver::receive_attached`]).
    fn ready_attached(&self) -> bool {
        if self.attached()
            && let Some(ahead) = &lock(&self.clones.set).prefix
        {
            return !ahead.held.is_empty() || ahead.ring.as_ref().is_none_or(|p| p.ready_alone());
        }
        self.ready_alone()
    }

    /// Takes the rings attached to this receiver out of its set, for it to
    /// travel without them (they follow it, see [`Gathered`] and
    /// `prefix.rs`).
    pub(super) fn take_rings(&self) -> Vec<Receiver> {
        let mut set = lock(&self.clones.set);
        let mut rings = std::mem::take(&mut set.rings);
        rings.append(&mut lock(&self.clones.arrived));
        set.next = 0;
        // Relaxed: see `Receiver::attached`. Its prefix, if any, is still
        // read first.
        self.half
            .attached
            .store(set.prefix.is_some(), Ordering::Relaxed);
        rings
    }

    /// Puts back rings taken out by [`Receiver::take_rings`] (the travel
    /// did not happen).
    pub(super) fn put_back_rings(&self, rings: Vec<Receiver>) {
        if rings.is_empty() {
            return;
        }
        lock(&self.clones.arrived).extend(rings);
        // Relaxed: see `Receiver::attached`.
        self.half.attached.store(true, Ordering::Relaxed);
    }
}

/// A receiver in the same process as its sender, reading the rings of
/// clones elsewhere, sent to another process. Its own ring moves as any
/// receiver's whose sender is here; the attached rings go after it, each
/// moved as a receiver is (its messages, and a prefix if it needs one,
/// with it). The new holder must read them all as one receiver, so what
/// travels in its place is a fresh receiver, whose ring (written here)
/// carries one `Attach` frame for the receiver and one for each ring, then
/// ends: the new holder reads them all in turns, as the clones' rings are
/// read here (see the module comment).
pub(super) struct Gathered {
    /// The receiver it stands for, once its stand-in has gone.
    end: Option<Receiver>,
    rings: Vec<Receiver>,
    /// The fresh ring's sender: writes the `Attach` frames, then ends.
    feed: super::Sender,
}

/// How often attaching one ring is tried while it is refused (its other
/// side's holder moving that side, each try waiting up to 5 s for it; a
/// message its sender was writing at the boundary).
const ATTACH_TRIES: usize = 3;

impl Gathered {
    /// The stand-in to send in `rx`'s place, and what is owed to it once
    /// it has gone ([`Gathered::deliver`]); `rx`'s rings are taken out (put
    /// back on failure, [`Gathered::keep_on`]).
    pub(super) fn of(rx: &Receiver) -> std::io::Result<(Receiver, Self)> {
        // One `Attach` frame per ring (and the receiver's), each well
        // within 64 bytes of ring: no wait while the new holder reads.
        let count = lock(&rx.clones.set).rings.len() + lock(&rx.clones.arrived).len() + 1;
        let size = (count * 64).next_power_of_two().max(4096);
        let (a, b) = super::PipeOptions::new().ring_size(size).pipe()?;
        let (feed, back) = a.split();
        let (back_tx, fresh) = b.split();
        drop((back, back_tx));
        fresh.set_max_message(rx.max_message());
        fresh.set_bytes_only(rx.bytes_only());
        fresh.set_wait(rx.wait());
        let rings = rx.take_rings();
        // Each goes on after the message, when it can no longer be handed
        // back: one that could not go then (a message half received) is
        // refused now.
        if rx.half_received() || rings.iter().any(Receiver::half_received) {
            rx.put_back_rings(rings);
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a message is half received on this receiver or a ring it reads",
            ));
        }
        Ok((
            fresh,
            Self {
                end: None,
                rings,
                feed,
            },
        ))
    }

    /// The receiver this stands for, kept until it is attached.
    pub(super) fn with_end(mut self, end: Receiver) -> Self {
        self.end = Some(end);
        self
    }

    /// The stand-in could not go: the rings go back to `rx`.
    pub(super) fn keep_on(self, rx: &Receiver) {
        rx.put_back_rings(self.rings);
    }

    /// The message naming the stand-in did not go: the receiver as it
    /// was, its rings back in it, to hand back.
    pub(super) fn take_back(self) -> Option<Receiver> {
        let Self { end, rings, .. } = self;
        let rx = end?;
        rx.put_back_rings(rings);
        Some(rx)
    }

    /// The stand-in has gone: the receiver, then each ring, follow it in
    /// `Attach` frames (see [`attach_all`]), and its ring ends.
    pub(super) fn deliver(self, deadline: Option<Instant>) {
        let Self { end, rings, feed } = self;
        attach_all(&feed, end.into_iter().chain(rings), deadline);
    }
}

/// Sends each of `rings` in an `Attach` frame over `feed`'s ring. A ring
/// that cannot go on (refused past [`ATTACH_TRIES`] tries, or out of
/// descriptors here) is dropped: its clone sees `Disconnected`.
pub(super) fn attach_all(
    feed: &super::Sender,
    rings: impl IntoIterator<Item = Receiver>,
    deadline: Option<Instant>,
) {
    for ring in rings {
        let mut ring = Some(ring);
        for attempt in 0..ATTACH_TRIES {
            let Some(rx) = ring.take() else { break };
            if attempt > 0 {
                // Not past the caller's deadline.
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                // A message its sender was writing at the boundary: done
                // soon.
                std::thread::sleep(Duration::from_millis(10));
            }
            if let Err(refused) = feed.attach_until(rx, deadline)
                && matches!(refused.error, super::error::SendFault::NotTransferable(_))
            {
                ring = refused.handles.into_iter().find_map(|end| match end {
                    Handle::Receiver(rx) => Some(rx),
                    _ => None,
                });
            }
        }
    }
}
