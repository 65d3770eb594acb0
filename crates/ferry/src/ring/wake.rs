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
//! `tests/loom_wake.rs` checks every interleaving with loom.

use std::time::Duration;

use super::control::Side;
use crate::sync::{AtomicU32, Ordering, fence};

/// How a side sleeps on a shared word and wakes a sleeper.
pub trait Futex {
    /// Sleeps while `*word == expected`, at most `timeout`; may return
    /// early. Returns whether the sleep ended without a wake (the whole
    /// `timeout` passed, or a signal interrupted it).
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) -> bool;
    /// Wakes the sleepers on `word`.
    fn wake(&self, word: &AtomicU32);
}

/// The kernel's futex, shared between processes.
#[cfg(not(loom))]
#[derive(Debug, Clone, Copy, Default)]
pub struct SysFutex;

#[cfg(not(loom))]
impl Futex for SysFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
        crate::sys::futex_wait(word, expected, timeout)
    }
    fn wake(&self, word: &AtomicU32) {
        crate::sys::futex_wake(word, 1);
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
pub fn sleep<F: Futex>(futex: &F, peer: &Side, ticket: u32, timeout: Duration) -> bool {
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
pub fn notify<F: Futex>(futex: &F, me: &Side, peer: &Side) -> bool {
    // (B) in the module comment: pairs with fence (A) in `prepare`, ordering
    // our ring change before the read of the peer's flag.
    fence(Ordering::SeqCst);
    // Relaxed: the fence above gives the ordering this read needs.
    if peer.waiting.load(Ordering::Relaxed) == 0 {
        return false;
    }
    // Release: pairs with the sleeper's Acquire ticket load.
    me.signal.fetch_add(1, Ordering::Release);
    futex.wake(&me.signal);
    true
}

/// Bumps `me`'s counter and wakes whoever sleeps on it, whether or not it
/// said it waits: for a side that needs the other side's attention for
/// something outside the ring (its link's socket is full).
pub fn nudge<F: Futex>(futex: &F, me: &Side) {
    // Release: pairs with the sleeper's Acquire ticket load, as in `notify`.
    me.signal.fetch_add(1, Ordering::Release);
    futex.wake(&me.signal);
}
