//! The in-process queue of a typed channel whose two halves are both in
//! this process: values are moved, never encoded (Mojo's lazy
//! serialization). When a half leaves, the queue turns into a byte pipe:
//! `moving.rs` does that; this file is the queue and its waiting.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::lock::{Guard, SpinLock};
use crate::sync::{AtomicU32, Ordering};
use crate::sys::{futex_wait, futex_wake};

/// Where a half of the channel is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Presence {
    Here,
    Dropped,
    /// Gone to another process; the queue's other half now talks to it
    /// through a byte pipe.
    Moved,
}

/// The state both halves share, behind the lock.
#[derive(Debug)]
pub(super) struct State<T> {
    /// Values sent and not yet received; after the receiver moved, values
    /// waiting to be forwarded to it, in order.
    pub(super) items: VecDeque<T>,
    pub(super) sender: Presence,
    pub(super) receiver: Presence,
    /// Whether the receiver sleeps on `Queue::seq`.
    sleeping: bool,
    /// After the sender moved: the byte receiver its messages arrive on,
    /// once `items` is drained.
    pub(super) incoming: Option<crate::Receiver>,
    /// After the receiver moved: the byte sender that reaches it, once the
    /// values queued before the move have been forwarded (`None` while they
    /// are being forwarded, when new values join `items`).
    pub(super) forward: Option<crate::Sender>,
}

/// A typed channel's queue while its halves are in this process.
#[derive(Debug)]
pub(super) struct Queue<T> {
    state: SpinLock<State<T>>,
    /// Bumped under the lock by every change the receiver waits for (and
    /// by a forward finishing); the receiver sleeps on it.
    seq: AtomicU32,
}

/// How a receiver waits before it sleeps: spin rounds of 2^0…2^3 polls
/// (crossbeam's backoff), then yield its CPU between polls (which lets a
/// peer sharing the CPU run) for up to `YIELD_FOR`, then sleep on the
/// futex. A reply on another thread comes within a few microseconds; a
/// sleep and its wake cost several.
const SPIN_ROUNDS: u32 = 4;
const YIELD_FOR: Duration = Duration::from_micros(50);

impl<T> Queue<T> {
    pub(super) fn new() -> Self {
        Self {
            state: SpinLock::new(State {
                items: VecDeque::new(),
                sender: Presence::Here,
                receiver: Presence::Here,
                sleeping: false,
                incoming: None,
                forward: None,
            }),
            seq: AtomicU32::new(0),
        }
    }

    pub(super) fn lock(&self) -> Guard<'_, State<T>> {
        self.state.lock()
    }

    /// Tells the receiver something changed; call with the lock held, then
    /// [`Queue::wake`] with what this returns once it is released.
    pub(super) fn changed(&self, state: &mut State<T>) -> bool {
        // Under the lock: the receiver read `seq` under it before sleeping.
        self.seq.store(
            self.seq.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        std::mem::take(&mut state.sleeping)
    }

    pub(super) fn wake(&self, sleeping: bool) {
        if sleeping {
            futex_wake(&self.seq, 1);
        }
    }

    /// Waits until `ready` holds of the state (checked under the lock), or
    /// until `deadline`; returns the guard either way.
    pub(super) fn wait_until(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut(&mut State<T>) -> bool,
    ) -> Guard<'_, State<T>> {
        let mut round = 0;
        let mut yielding_since = None;
        loop {
            let mut state = self.lock();
            if ready(&mut state) {
                return state;
            }
            let now = (deadline.is_some() || round >= SPIN_ROUNDS).then(Instant::now);
            if let (Some(deadline), Some(now)) = (deadline, now)
                && now >= deadline
            {
                return state;
            }
            let yielding = match (round < SPIN_ROUNDS, now) {
                (true, _) => true,
                (false, Some(now)) => now < *yielding_since.get_or_insert(now) + YIELD_FOR,
                (false, None) => false,
            };
            if yielding {
                let seen = self.seq.load(Ordering::Relaxed);
                drop(state);
                self.backoff(round, seen);
                round += 1;
                continue;
            }
            state.sleeping = true;
            let seen = self.seq.load(Ordering::Relaxed);
            drop(state);
            let timeout = match (deadline, now) {
                (Some(deadline), Some(now)) => deadline - now,
                _ => Duration::MAX,
            };
            futex_wait(&self.seq, seen, timeout);
        }
    }

    /// Spins (then yields) while nothing changes.
    fn backoff(&self, round: u32, seen: u32) {
        if round < SPIN_ROUNDS {
            for _ in 0..1u32 << round {
                if self.seq.load(Ordering::Acquire) != seen {
                    return;
                }
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
    }

    /// Wakes threads waiting for a forward to finish (`moving.rs`).
    pub(super) fn forward_done(&self) {
        self.seq.store(
            self.seq.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        futex_wake(&self.seq, u32::MAX);
    }

    /// Waits until the values queued before the receiver moved have been
    /// forwarded; returns the guard with `forward` set.
    pub(super) fn wait_forwarded<'a>(
        &'a self,
        mut state: Guard<'a, State<T>>,
    ) -> Guard<'a, State<T>> {
        while state.forward.is_none() {
            let seen = self.seq.load(Ordering::Acquire);
            drop(state);
            // `forward_done` bumps the word after setting `forward`, so the
            // sleep ends; the timeout only bounds a missed wake.
            futex_wait(&self.seq, seen, Duration::from_millis(1));
            state = self.lock();
        }
        state
    }
}
