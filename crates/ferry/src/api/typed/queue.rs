//! The in-process queue of a typed channel whose two halves are both in
//! this process: values are moved, never encoded (Mojo's lazy
//! serialization). When a half leaves, the queue turns into a byte pipe:
//! `moving.rs` does that; this file is the queue and its waiting, which
//! goes through the same mechanism and default policy as a pipe's
//! (`crate::transport::wait`).

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::base::lock::{Brief, Guard as LockGuard};

/// The queue's state, held.
pub(super) type Guard<'a, T> = LockGuard<'a, T, true>;
use crate::base::sync::{AtomicU32, Ordering};
use crate::base::sys::{Doorbell, Ringer, futex_wait, futex_wake};
use crate::transport::wait::{self, Memory, Peer, Place};

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
    /// Whether the receiver waits (spinning, yielding or asleep): the
    /// next change says where its thread runs (`Queue::waker_cpu`).
    looking: bool,
    /// Whether a sender sleeps on `Queue::room`, waiting for room.
    senders_waiting: bool,
    /// After the sender moved: the byte receiver its messages arrive on,
    /// once `items` is drained.
    pub(super) incoming: Option<crate::api::channel::Receiver>,
    /// The receiver moved with values queued, and forwarding them waits
    /// for the message carrying it to be sent.
    pub(super) forward_pending: bool,
    /// After the receiver moved: the byte sender that reaches it, once the
    /// values queued before the move have been forwarded (`None` while they
    /// are being forwarded, when new values join `items`).
    pub(super) forward: Option<crate::api::channel::Sender>,
    /// The receiver waits on the queue's doorbell: the next change rings
    /// it (once; the receiver arms it again when it looks and finds
    /// nothing).
    bell_armed: bool,
    /// What the receiver's waits remember from one to the next (whether
    /// its thread lost the CPU lately): kept here, under the lock it waits
    /// around, since only the receiver waits.
    memory: Memory,
}

/// What a change asks of [`Queue::wake`] once the lock is released.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub(super) struct Wake {
    /// The receiver sleeps on `Queue::seq`.
    sleeping: bool,
    /// The receiver waits: say where this thread runs.
    looking: bool,
    /// The receiver waits on the doorbell.
    ring: bool,
}

/// The queue's doorbell, for a receiver that waits by descriptor (a
/// `Select`, `ready_fd`, async): made on first use, rung by a change only
/// while armed, so a plain send pays nothing for it.
#[derive(Debug)]
struct Bell {
    bell: Arc<Doorbell>,
    ringer: Ringer,
}

/// A typed channel's queue while its halves are in this process.
#[derive(Debug)]
pub(super) struct Queue<T> {
    state: Brief<State<T>>,
    /// 1 + the CPU of the thread that last changed the queue while the
    /// receiver waited (0: none yet), so its wait knows where the sender
    /// runs.
    waker_cpu: AtomicU32,
    /// Most values `items` holds while the receiver is here (`usize::MAX`:
    /// unbounded).
    capacity: usize,
    /// Bumped under the lock when a value is taken (or the receiver
    /// leaves) while a sender waits for room; senders sleep on it.
    room: AtomicU32,
    /// Bumped under the lock by every change the receiver waits for (and
    /// by a forward finishing); the receiver sleeps on it.
    seq: AtomicU32,
    bell: OnceLock<Bell>,
}

impl<T> Queue<T> {
    /// A queue holding at most `capacity` values (`usize::MAX`: unbounded).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            room: AtomicU32::new(0),
            waker_cpu: AtomicU32::new(0),
            state: Brief::brief(State {
                items: VecDeque::new(),
                sender: Presence::Here,
                receiver: Presence::Here,
                sleeping: false,
                looking: false,
                senders_waiting: false,
                incoming: None,
                forward_pending: false,
                forward: None,
                bell_armed: false,
                memory: Memory::default(),
            }),
            seq: AtomicU32::new(0),
            bell: OnceLock::new(),
        }
    }

    pub(super) fn lock(&self) -> Guard<'_, State<T>> {
        self.state.lock()
    }

    /// The most values the queue holds (`usize::MAX`: unbounded), which is
    /// also the message capacity of the byte pipe it turns into.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether the queue holds as many values as it may.
    pub(super) fn is_full(&self, state: &State<T>) -> bool {
        state.items.len() >= self.capacity
    }

    /// Waits, with the lock given back, until a receive (or the
    /// receiver's leaving) makes room, or until `deadline`; the caller
    /// then looks again. A sender that finds the queue full calls it.
    pub(super) fn wait_for_room(&self, mut state: Guard<'_, State<T>>, deadline: Option<Instant>) {
        state.senders_waiting = true;
        // Under the lock: `room_made` bumps it under the lock too, so a
        // bump after this read ends the sleep below at once.
        let seen = self.room.load(Ordering::Relaxed);
        drop(state);
        let timeout = match deadline {
            None => Duration::MAX,
            Some(d) => d.saturating_duration_since(Instant::now()),
        };
        if !timeout.is_zero() {
            futex_wait(&self.room, seen, timeout);
        }
    }

    /// Wakes the senders waiting for room, if any; call with the lock
    /// held, after taking a value or as the receiver leaves. (The wake is
    /// made under the spin lock: only a sender that found the queue full
    /// waits, so the common receive pays one flag test.)
    pub(super) fn room_made(&self, state: &mut State<T>) {
        if std::mem::take(&mut state.senders_waiting) {
            self.room.store(
                self.room.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Release,
            );
            futex_wake(&self.room, u32::MAX);
        }
    }

    /// Tells the receiver something changed; call with the lock held, then
    /// [`Queue::wake`] with what this returns once it is released.
    pub(super) fn changed(&self, state: &mut State<T>) -> Wake {
        // Under the lock: the receiver read `seq` under it before sleeping.
        self.seq.store(
            self.seq.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        Wake {
            sleeping: std::mem::take(&mut state.sleeping),
            looking: std::mem::take(&mut state.looking),
            ring: std::mem::take(&mut state.bell_armed),
        }
    }

    pub(super) fn wake(&self, wake: Wake) {
        if wake.looking {
            let mine = wait::my_cpu();
            // Relaxed (both): a scheduling hint, written only on a change.
            if self.waker_cpu.load(Ordering::Relaxed) != mine {
                self.waker_cpu.store(mine, Ordering::Relaxed);
            }
        }
        if wake.sleeping {
            futex_wake(&self.seq, 1);
        }
        if wake.ring
            && let Some(bell) = self.bell.get()
        {
            bell.ringer.ring();
        }
    }

    /// The queue's doorbell, made now if need be: readable once a change
    /// comes while it is armed ([`Queue::arm`]).
    pub(super) fn doorbell(&self) -> std::io::Result<Arc<Doorbell>> {
        if let Some(bell) = self.bell.get() {
            return Ok(Arc::clone(&bell.bell));
        }
        let (bell, ringer) = Doorbell::new()?;
        let made = self.bell.get_or_init(|| Bell {
            bell: Arc::new(bell),
            ringer,
        });
        Ok(Arc::clone(&made.bell))
    }

    /// Says the receiver waits on the doorbell, if it has one (clearing it
    /// first if `clear`); under the lock, so a change after this rings it
    /// and a change before it is seen by the caller's look at `state`.
    /// Whether it had one.
    pub(super) fn arm(&self, state: &mut State<T>, clear: bool) -> bool {
        let Some(bell) = self.bell.get() else {
            return false;
        };
        if clear {
            bell.bell.clear();
        }
        state.bell_armed = true;
        true
    }

    /// Says the receiver no longer waits on the doorbell.
    pub(super) fn disarm(&self) {
        if self.bell.get().is_some() {
            self.lock().bell_armed = false;
        }
    }

    /// Waits until `ready` holds of the state (checked under the lock), or
    /// until `deadline`; returns the guard either way.
    ///
    /// Between looks under the lock it watches `seq` alone, so a waiting
    /// receiver does not take the lock the sender needs until something
    /// changed; it spins, yields or sleeps as the default policy says (see
    /// `crate::transport::wait`).
    #[inline]
    pub(super) fn wait_until(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut(&mut State<T>) -> bool,
    ) -> Guard<'_, State<T>> {
        let mut state = self.lock();
        if ready(&mut state) {
            return state;
        }
        self.wait_missed(state, deadline, ready)
    }

    /// [`Queue::wait_until`] once its first look found nothing: kept out
    /// of line, so the look that finds a value stays a few instructions.
    #[inline(never)]
    fn wait_missed<'q>(
        &'q self,
        mut state: Guard<'q, State<T>>,
        deadline: Option<Instant>,
        ready: impl FnMut(&mut State<T>) -> bool,
    ) -> Guard<'q, State<T>> {
        // Under the lock: every change bumps `seq` under it.
        let seen = self.seq.load(Ordering::Relaxed);
        state.looking = true;
        let mut memory = state.memory;
        drop(state);
        let mut target = Looking {
            queue: self,
            ready,
            seen,
            mine: wait::my_cpu(),
        };
        let mut state = wait::run(wait::policy::adaptive, &mut memory, &mut target, deadline)
            .unwrap_or_else(|state| state);
        state.memory = memory;
        state
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

/// A receiver's wait on the queue, as the mechanism sees it: it ends with
/// the guard, the condition true (`Ok`) or the deadline past (`Err`).
struct Looking<'q, T, F> {
    queue: &'q Queue<T>,
    ready: F,
    /// `seq` at the last look under the lock.
    seen: u32,
    /// 1 + this thread's CPU.
    mine: u32,
}

impl<'q, T, F: FnMut(&mut State<T>) -> bool> Looking<'q, T, F> {
    /// Takes the lock and checks: the guard if ready, else `None` with
    /// `seen` brought up to date.
    fn check(&mut self) -> Result<Guard<'q, State<T>>, Guard<'q, State<T>>> {
        let mut state = self.queue.lock();
        if (self.ready)(&mut state) {
            return Ok(state);
        }
        self.seen = self.queue.seq.load(Ordering::Relaxed);
        Err(state)
    }
}

impl<'q, T, F: FnMut(&mut State<T>) -> bool> wait::Target for Looking<'q, T, F> {
    type Ready = Guard<'q, State<T>>;
    type Stop = Guard<'q, State<T>>;

    #[inline]
    fn poll(&mut self) -> Result<Option<Self::Ready>, Self::Stop> {
        // Acquire: pairs with the Release bump of a change.
        if self.queue.seq.load(Ordering::Acquire) == self.seen {
            return Ok(None);
        }
        Ok(self.check().ok())
    }

    fn place(&self) -> Place {
        // Relaxed: a scheduling hint.
        match self.queue.waker_cpu.load(Ordering::Relaxed) {
            0 => Place::Unknown,
            cpu if cpu == self.mine => Place::Here,
            _ => Place::Elsewhere,
        }
    }

    fn peer(&self) -> Peer {
        Peer::Unseen
    }

    fn ended(&mut self, _ask: bool) -> Option<Result<Self::Ready, Self::Stop>> {
        None
    }

    fn timed_out(&mut self) -> Result<Self::Ready, Self::Stop> {
        self.check()
    }

    fn sleep(&mut self, deadline: Option<Instant>) -> Result<Self::Ready, Self::Stop> {
        loop {
            let mut state = match self.check() {
                Ok(ready) => return Ok(ready),
                Err(state) => state,
            };
            let timeout = match deadline {
                None => Duration::MAX,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Err(state),
                },
            };
            state.sleeping = true;
            state.looking = true;
            let seen = self.seen;
            drop(state);
            futex_wait(&self.queue.seq, seen, timeout);
        }
    }
}
