//! The sleep/wake protocol over a ring's [`Control`](super::Control) block.
//!
//! A side that finds nothing to do (a consumer facing an empty ring, a
//! producer facing a full one) sleeps on the *other* side's `signal`
//! counter; the other side, after changing the ring, bumps its counter and
//! makes the `FUTEX_WAKE` system call only if the sleeper said it waits.
//!
//! Why a counter and not a flag the waker clears: a waker that clears the
//! sleeper's "waiting" flag can erase the flag the sleeper has just set for
//! its *next* wait, and the sleeper then sleeps forever. Here only the
//! sleeper writes its own `waiting` word, and it sleeps on a ticket (the
//! counter's value read before it announced itself): any bump after that
//! read makes the futex return at once.
//!
//! The two halves form a Dekker pair ordered by `SeqCst` fences:
//!
//! ```text
//! sleeper                          waker
//! ticket = peer.signal             change ring (Release store of pos)
//! me.waiting = 1                   fence(SeqCst)            <- (B)
//! fence(SeqCst)            (A)     if peer.waiting != 0 {
//! re-check ring; if still idle:        me.signal += 1; wake(me.signal)
//!     futex_wait(peer.signal, ticket)  }
//! me.waiting = 0
//! ```
//!
//! Of the two fences one comes first in the single total order of `SeqCst`
//! operations: if (A) does, the waker sees `waiting == 1` and wakes; if (B)
//! does, the sleeper's re-check sees the ring change and does not sleep.
//! `tests/loom_wake.rs` checks every interleaving with loom, running the
//! sleep loop below ([`sleep_until`]) itself, the one every blocking wait
//! of a pipe runs.
//!
//! # The seam
//!
//! How a sleeper is woken is a [`Bell`]: the kernel's futex on the side's
//! `signal` word today ([`SysFutex`]); a descriptor, or a doorbell shared by
//! many rings, for waiting on many pipes at once. The protocol above is the
//! same for any bell; which one a ring's sides use is chosen here, once
//! (`BELL`), and the crate rings and sleeps only through
//! [`peer_listens`] with `wake_listener` (the two halves of [`notify`]),
//! `ring_anyway`, `ring_all` and [`sleep_until`], never by naming a futex.

use std::time::{Duration, Instant};

use super::Corrupt;
use super::control::Side;
use crate::base::sync::{AtomicU32, Ordering, fence};

/// How a side sleeps on a shared word and wakes a sleeper.
pub trait Bell {
    /// Sleeps while `*word == expected`, at most `timeout`; may return
    /// early. Returns whether the sleep ended without a wake (the whole
    /// `timeout` passed, or a signal interrupted it).
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) -> bool;
    /// Wakes a sleeper on `word`.
    fn wake(&self, word: &AtomicU32);
    /// Wakes every sleeper on `word`.
    fn wake_all(&self, word: &AtomicU32) {
        self.wake(word);
    }
}

/// The kernel's futex, shared between processes.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy, Default)]
pub struct SysFutex;

/// The bell every ring of this process is woken by.
#[cfg(not(loom))]
pub(crate) const BELL: SysFutex = SysFutex;

#[cfg(not(loom))]
impl Bell for SysFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
        crate::base::sys::futex_wait(word, expected, timeout)
    }
    fn wake(&self, word: &AtomicU32) {
        crate::base::sys::futex_wake(word, 1);
    }
    fn wake_all(&self, word: &AtomicU32) {
        crate::base::sys::futex_wake(word, i32::MAX as u32);
    }
}

/// Announces that `me` is about to sleep until `peer` changes the ring.
/// Returns the ticket to pass to [`sleep`]. The caller must re-check the
/// ring after this and, whether it sleeps or not, call [`done`] afterwards.
pub fn prepare(me: &Side, peer: &Side) -> u32 {
    // Acquire: pairs with the waker's Release bump; read before announcing,
    // so any bump from now on changes the word and voids the sleep.
    let ticket = peer.signal.load(Ordering::Acquire);
    // Relaxed: ordered before the re-check by the fence below.
    me.waiting.store(1, Ordering::Relaxed);
    // (A) in the module comment: pairs with fence (B) in `notify`.
    fence(Ordering::SeqCst);
    ticket
}

/// Sleeps on `peer`'s counter unless it has moved past `ticket`; returns
/// whether the whole `timeout` passed.
pub fn sleep<B: Bell>(futex: &B, peer: &Side, ticket: u32, timeout: Duration) -> bool {
    futex.wait(&peer.signal, ticket, timeout)
}

/// Ends a wait begun with [`prepare`].
pub fn done(me: &Side) {
    // Relaxed: only this side reads its own flag's meaning; a waker seeing a
    // stale 1 makes one harmless extra wake.
    me.waiting.store(0, Ordering::Relaxed);
}

/// Tells `peer` that `me` changed the ring, waking it if it sleeps.
/// Returns whether a wake system call was made.
#[cfg(any(loom, feature = "internals"))]
pub fn notify<B: Bell>(futex: &B, me: &Side, peer: &Side) -> bool {
    // (B) in the module comment: pairs with fence (A) in `prepare`, ordering
    // our ring change before the read of the peer's flag.
    fence(Ordering::SeqCst);
    wake_if_waiting(futex, me, peer)
}

/// What [`notify`] does after its fence.
fn wake_if_waiting<B: Bell>(futex: &B, me: &Side, peer: &Side) -> bool {
    // Relaxed: the caller's fence (B) gives the ordering this read needs.
    if peer.waiting.load(Ordering::Relaxed) == 0 {
        return false;
    }
    // Release: pairs with the sleeper's Acquire ticket load.
    me.signal.fetch_add(1, Ordering::Release);
    futex.wake(&me.signal);
    true
}

/// The first half of [`notify`], for a caller that keeps the rest out of
/// line: after the fence (B), whether `peer` sleeps or waits on its
/// doorbell. If so the caller calls `wake_listener` (and rings the
/// doorbell if [`wants_doorbell`]).
#[inline]
pub fn peer_listens(peer: &Side) -> bool {
    // (B) in the module comment, as in `notify`.
    fence(Ordering::SeqCst);
    // Relaxed (both): the fence above gives the ordering these reads need.
    peer.waiting.load(Ordering::Relaxed) != 0 || peer.doorbell.load(Ordering::Relaxed) != 0
}

/// The second half of [`notify`], after [`peer_listens`] said yes, with
/// this process's [`BELL`]: wakes `peer` if it sleeps. Returns whether a
/// wake system call was made.
#[cfg(not(loom))]
pub(crate) fn wake_listener(me: &Side, peer: &Side) -> bool {
    wake_if_waiting(&BELL, me, peer)
}

/// Whether `peer` waits on its doorbell, so the side that just called
/// [`notify`] must ring it too. The fence (B) in `notify` orders this read
/// after the ring change, as for `waiting`; the doorbell waiter's side of
/// the pair is [`arm_doorbell`].
pub fn wants_doorbell(peer: &Side) -> bool {
    // Relaxed: ordered by fence (B) in `notify`, which the caller ran.
    peer.doorbell.load(Ordering::Relaxed) != 0
}

/// Says that `me` now waits on its doorbell: from here on, the other side
/// rings it after every change. The caller re-checks the ring after this
/// (fence (A) again: a change the other side made before reading the flag
/// is seen by that re-check).
pub fn arm_doorbell(me: &Side) {
    announce_doorbell(me);
    settle();
}

/// [`arm_doorbell`] without its fence, for a waiter arming many sides at
/// once: it must call [`settle`] before re-checking any of them.
pub fn announce_doorbell(me: &Side) {
    // Relaxed: ordered before the re-check by the caller's `settle`.
    me.doorbell.store(1, Ordering::Relaxed);
}

/// The fence that ends announcing doorbells: (A) for doorbells, pairing
/// with fence (B) in `notify`.
pub fn settle() {
    fence(Ordering::SeqCst);
}

/// Says that `me` no longer waits on its doorbell, so the other side stops
/// paying for it.
pub fn disarm_doorbell(me: &Side) {
    // Relaxed: a stale 1 seen by the other side costs one harmless ring.
    me.doorbell.store(0, Ordering::Relaxed);
}

/// Bumps `me`'s counter and wakes whoever sleeps on it, whether or not it
/// said it waits: for a side that needs the other side's attention for
/// something outside the ring (its link's socket is full).
pub fn nudge<B: Bell>(futex: &B, me: &Side) {
    // Release: pairs with the sleeper's Acquire ticket load, as in `notify`.
    me.signal.fetch_add(1, Ordering::Release);
    futex.wake(&me.signal);
}

/// Wakes every thread asleep on `side`'s counter (all of them sleep on
/// it for the other side of the ring), whether or not anything changed:
/// for news from outside the ring that each of them must see, such as the
/// peer's death (the caller publishes that news first).
pub fn rouse_all<B: Bell>(bell: &B, side: &Side) {
    // Release: pairs with each sleeper's Acquire ticket load, so a sleeper
    // that read the new count also sees the news published before it.
    side.signal.fetch_add(1, Ordering::Release);
    bell.wake_all(&side.signal);
}

/// [`rouse_all`] with this process's [`BELL`].
#[cfg(not(loom))]
pub(crate) fn ring_all(side: &Side) {
    rouse_all(&BELL, side);
}

/// [`nudge`] with this process's [`BELL`].
#[cfg(not(loom))]
pub(crate) fn ring_anyway(me: &Side) {
    nudge(&BELL, me);
}

/// What a sleeping wait asks of its caller, between sleeps.
pub trait Sleeper {
    /// What the wait waits for.
    type Ready;
    /// Why it can end without it; a broken ring is one reason.
    type Stop: From<Corrupt>;
    /// Whether the condition holds now (called after announcing the sleep,
    /// so a change from now on rings the bell).
    fn poll(&mut self) -> Result<Option<Self::Ready>, Corrupt>;
    /// Called before each sleep: how long to sleep at most, or why not to
    /// (the peer is gone, the deadline passed). `ran_out` says the last
    /// sleep ended without a wake.
    fn before_sleep(&mut self, ran_out: bool) -> Result<Duration, Self::Stop>;
    /// Woken without the condition and without the peer moving: a nudge
    /// (see [`nudge`]) or a storm.
    fn woken_for_nothing(&mut self) {}
    /// The deadline a storm's back-off must not pass.
    fn deadline(&self) -> Option<Instant> {
        None
    }
}

/// Wakes in a row that changed nothing after which a sleeper backs off: an
/// honest peer rings only after moving its position (or claiming handles),
/// so a run of wakes that moved nothing is a peer ringing in a loop.
const STORM: u32 = 8;
/// The first and the longest pause of a sleeper backing off from a storm.
const BACKOFF: (Duration, Duration) = (Duration::from_micros(50), Duration::from_millis(2));

/// Sleeps as `me` on `peer`'s bell until the sleeper's condition holds or
/// it says stop: announce, poll, sleep, repeat. Every blocking wait of a
/// pipe is this loop; `tests/loom_wake.rs` model-checks it.
pub fn sleep_until<B: Bell, S: Sleeper>(
    bell: &B,
    me: &Side,
    peer: &Side,
    sleeper: &mut S,
) -> Result<S::Ready, S::Stop> {
    // Wakes in a row that ended early, without the condition or progress.
    let mut empty_wakes = 0u32;
    let mut ran_out = false;
    loop {
        back_off(empty_wakes, sleeper.deadline());
        let ticket = prepare(me, peer);
        let outcome = match sleeper.poll() {
            Ok(Some(ready)) => Some(Ok(ready)),
            Err(e) => Some(Err(e.into())),
            Ok(None) => {
                let mark = progress(peer);
                match sleeper.before_sleep(ran_out) {
                    Err(stop) => Some(Err(stop)),
                    Ok(nap) => {
                        ran_out = sleep(bell, peer, ticket, nap);
                        // A wake after which the peer moved is no storm.
                        empty_wakes = match ran_out || progress(peer) != mark {
                            true => 0,
                            false => empty_wakes.saturating_add(1),
                        };
                        if empty_wakes > 0 {
                            sleeper.woken_for_nothing();
                        }
                        None
                    }
                }
            }
        };
        done(me);
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

/// What the peer side has done so far: its position, and (for a consumer)
/// the handles it has claimed. A wake that changed neither changed nothing.
fn progress(peer: &Side) -> (u64, u32) {
    // Relaxed (both): compared only with earlier reads of the same words.
    (
        peer.pos.load(Ordering::Relaxed),
        peer.handles.load(Ordering::Relaxed),
    )
}

/// Pauses a sleeper woken `empty_wakes` times in a row for nothing, once
/// that looks like a storm: 50 µs, doubling up to 2 ms, never past the
/// deadline. Bounds what a peer ringing in a loop costs this process (a few
/// hundred wakes per second) at the price of delaying a real message by at
/// most one pause while the storm lasts.
fn back_off(empty_wakes: u32, deadline: Option<Instant>) {
    let Some(extra) = empty_wakes.checked_sub(STORM) else {
        return;
    };
    let (first, longest) = BACKOFF;
    let mut pause = first.saturating_mul(1 << extra.min(16)).min(longest);
    if let Some(d) = deadline {
        pause = pause.min(d.saturating_duration_since(Instant::now()));
    }
    std::thread::sleep(pause);
}
