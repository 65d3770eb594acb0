//! The crate's one lock: a futex word, no poisoning. A pipe end's send
//! and receive locks, and a typed channel's in-process queue, use it.
//!
//! Why not `std::sync::Mutex`: ferry never uses its poisoning (a send or
//! receive interrupted by a panic leaves the ring consistent: a frame is
//! published whole or not at all, so the next holder simply goes on), yet
//! every lock and unlock of std's pays for it (two reads of the global
//! panic count and a flag check, ~10 instructions a pair, four pairs per
//! round trip: a tenth of ferry's budget beyond the floor's). The lock
//! itself is the same futex protocol: a compare-exchange to take it, a swap
//! to give it back that tells whether anyone sleeps on it, a private futex
//! wait and wake only then. A thread that finds it held spins briefly,
//! then sleeps: a pipe's holder may wait for a full ring or an empty one
//! for as long as its deadline allows. The lock knows nothing of how pipes
//! wait; a `try_` call that gives up tells the holder's [`Missed`].
//!
//! Fair in the end, as Go's `sync.Mutex`: a released lock is free to
//! whoever takes it first, usually the thread that gave it back and
//! loops to send again (no hand-over, no context switch per message), so
//! a sleeper woken by the release may find it taken again, and again: one
//! thread of eight sending through clones of one sender could keep the
//! lock for all its messages. A sleeper that has waited [`STARVE_AFTER`]
//! marks the word [`STARVING`]; the next release then keeps the lock held
//! and hands it to a sleeper it wakes ([`HANDED`]), which only a thread
//! that slept may take. Should the wake find no one asleep (the waiters
//! left at their deadlines), the releaser gives the lock back as free.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

use crate::base::sync::{AtomicU32, AtomicUsize, Ordering};
use crate::base::sys;

/// Nobody holds the lock.
const FREE: u32 = 0;
/// Bit: the lock is held.
const LOCKED: u32 = 1;
/// Bit: a thread may sleep on the word; the holder wakes one when it
/// gives the lock back.
const SLEEPERS: u32 = 2;
/// Bit: a `try_` call gave up on the held lock; the holder tells its
/// [`Missed`] once it gives the lock back.
const MISSED: u32 = 4;
/// Bit: a sleeper has waited [`STARVE_AFTER`]; releases hand the lock
/// over (only ever set while [`LOCKED`] is).
const STARVING: u32 = 8;
/// Bit: the releaser handed the lock to a sleeper: it stays [`LOCKED`],
/// and only a thread that slept on it may take it (clearing this bit and
/// [`STARVING`]).
const HANDED: u32 = 16;
/// How long a sleeper waits for the lock before releases hand it over
/// (Go's `sync.Mutex` uses the same bound): a bound on unfairness, not on
/// speed; short holds never reach it.
const STARVE_AFTER: Duration = Duration::from_millis(1);
/// Polls of a held lock before sleeping on it (a holder that only pushes a
/// frame gives it back within these).
const SPINS: u32 = 100;

/// Longest a `try_` call naps on a held lock before it gives up (see
/// [`Lock::lock_until`]): a holder pushing or reading one frame gives it
/// back well within it; one that waits (for the ring, for the socket) may
/// keep it for as long as its own deadline allows, and no `try_` call
/// waits for that.
const TRY_NAP: Duration = Duration::from_micros(100);

/// Who hears that a `try_` call gave up on the lock while it was held:
/// told once the holder has given it back, so a caller that then waits on
/// a doorbell looks again (what the holder did, or left undone, may be
/// what it waits for).
pub(crate) trait Missed {
    /// A `try_` call gave up on the lock, which is free now.
    fn missed(&self);
}

/// A value behind the lock.
pub(crate) struct Lock<T, const BRIEF: bool = false> {
    state: AtomicU32,
    /// The thread (its [`thread_token`]) running a caller's closure while
    /// it holds the lock (`send_in_place`, `recv_in_place`), else 0: that
    /// thread taking the lock again would wait for itself for good.
    lent_to: AtomicUsize,
    value: UnsafeCell<T>,
}

thread_local! {
    /// One byte per thread, whose address names the thread.
    static TOKEN: u8 = const { 0 };
}

/// This thread's name among the live ones: the address of its [`TOKEN`]
/// (never 0).
#[inline]
fn thread_token() -> usize {
    TOKEN.with(|token| std::ptr::from_ref(token) as usize)
}

/// A lock's holder running a caller's closure (see [`Lock::lend`]); the
/// mark goes when this drops, on a panic too.
pub(crate) struct Lent<'a> {
    lent_to: &'a AtomicUsize,
}

impl Drop for Lent<'_> {
    #[inline]
    fn drop(&mut self) {
        self.lent_to.store(0, Ordering::Relaxed);
    }
}

// SAFETY: the value is reached only through a `Guard`, and at most one
// guard exists at a time (`lock` takes the word from FREE with an acquiring
// compare-exchange or swap, which only one thread can win; the guard's drop
// makes it FREE again). Sharing the lock between threads thus hands the
// value from one thread to another, never to two at once: `T: Send` is
// what that needs.
unsafe impl<T: Send, const BRIEF: bool> Sync for Lock<T, BRIEF> {}

// As `std::sync::Mutex`: a panic while the lock is held cannot leave the
// value half-changed in a way a later holder misreads (see the module text),
// so the lock may cross `catch_unwind`.
impl<T, const BRIEF: bool> UnwindSafe for Lock<T, BRIEF> {}
impl<T, const BRIEF: bool> RefUnwindSafe for Lock<T, BRIEF> {}

/// A lock whose holder runs a few instructions and never waits: see
/// [`Lock::brief`].
pub(crate) type Brief<T> = Lock<T, true>;

impl<T> Lock<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self {
            state: AtomicU32::new(FREE),
            lent_to: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }
}

impl<T> Brief<T> {
    /// A lock for critical sections of a few instructions (a typed
    /// queue's push or pop), never held across a wait: a thread that finds
    /// it held spins, then yields its CPU (a preempted holder runs), and
    /// never sleeps, so giving it back is a plain store, not a swap (a
    /// one-thread typed call takes four locks: the swaps were most of its
    /// cost). Only [`Lock::lock`] may take it.
    // Used by the typed queue (and tests): none without serde.
    #[cfg_attr(not(any(feature = "serde", test)), allow(dead_code))]
    pub(crate) fn brief(value: T) -> Self {
        Self {
            state: AtomicU32::new(FREE),
            lent_to: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }
}

impl<T, const BRIEF: bool> Lock<T, BRIEF> {
    /// Takes the lock, sleeping while another thread holds it.
    #[inline]
    // Used by the typed queue (and tests): none without serde.
    #[cfg_attr(not(any(feature = "serde", test)), allow(dead_code))]
    pub(crate) fn lock(&self) -> Guard<'_, T, BRIEF> {
        if BRIEF {
            self.lock_brief();
            return Guard {
                lock: self,
                missed: &(),
                _value: PhantomData,
            };
        }
        // Acquire: what the last holder wrote before giving it back is seen.
        if self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Guard {
                lock: self,
                missed: &(),
                _value: PhantomData,
            };
        }
        self.lock_slow()
    }

    /// Takes a brief lock: spins while it is held, then yields its CPU (a
    /// preempted holder runs); never sleeps.
    #[inline]
    fn lock_brief(&self) {
        // Acquire: what the last holder wrote before giving it back is seen.
        while self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            let mut spins = 0;
            while self.state.load(Ordering::Relaxed) != FREE {
                match spins < SPINS {
                    true => crate::base::sync::spin_hint(),
                    false => sys::yield_cpu(),
                }
                spins += 1;
            }
        }
    }

    /// [`Lock::lock`] once the lock was found held.
    #[cold]
    #[inline(never)]
    // Used by the typed queue (and tests): none without serde.
    #[cfg_attr(not(any(feature = "serde", test)), allow(dead_code))]
    fn lock_slow(&self) -> Guard<'_, T, BRIEF> {
        loop {
            if let Some(guard) = self.lock_until(None, &()) {
                return guard;
            }
        }
    }

    /// Takes the lock, sleeping while another thread holds it until
    /// `deadline` (`None`: as long as it takes). `None` if it was still
    /// held then.
    ///
    /// A deadline already past when the lock is found held is a `try_`
    /// call's: it naps at most [`TRY_NAP`] (a holder pushing or reading a
    /// frame gives the lock back within it), then gives up (`None`)
    /// whatever the holder does: a holder may wait for the ring or the
    /// socket for as long as its own deadline allows, and a `try_` call
    /// never waits for that. Giving up marks the lock: once the holder
    /// gives it back it tells `missed` (the half rings its own doorbell),
    /// so a caller that gave up and then waits on its doorbell (an async
    /// half, a select) looks again: a frame (or room) the holder left
    /// untaken would otherwise ring nothing.
    #[inline]
    pub(crate) fn lock_until<'a>(
        &'a self,
        deadline: Option<Instant>,
        missed: &'a dyn Missed,
    ) -> Option<Guard<'a, T, BRIEF>> {
        // A brief lock's release wakes no one: only `lock` may take it.
        debug_assert!(!BRIEF, "lock_until on a brief lock");
        // Acquire: what the last holder wrote before giving it back is seen.
        if self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
            && !self.lock_contended(deadline)
        {
            return None;
        }
        Some(Guard {
            lock: self,
            missed,
            _value: PhantomData,
        })
    }

    /// Marks this thread, which holds the lock, as running a caller's
    /// closure until the mark drops: should the closure call on the same
    /// half again, its lock call panics, naming the mistake, instead of
    /// waiting for this thread for good. Only the lock's holder calls it.
    #[inline]
    pub(crate) fn lend(&self) -> Lent<'_> {
        // Relaxed: only this thread compares the word with its own token
        // (another thread never sees its own token there, stale or not).
        self.lent_to.store(thread_token(), Ordering::Relaxed);
        Lent {
            lent_to: &self.lent_to,
        }
    }

    /// Whether the lock was taken before `deadline`.
    #[cold]
    #[inline(never)]
    fn lock_contended(&self, deadline: Option<Instant>) -> bool {
        // Relaxed: see `lend`.
        assert!(
            self.lent_to.load(Ordering::Relaxed) != thread_token(),
            "a ferry call inside the closure of `send_in_place` or `recv_in_place` \
             used the same half of the pipe end (it would wait for itself for good)"
        );
        let now = Instant::now();
        let try_call = deadline.is_some_and(|deadline| deadline <= now);
        let deadline = deadline.filter(|&deadline| deadline > now);
        let mut spins = 0;
        while self.state.load(Ordering::Relaxed) == LOCKED && spins < SPINS {
            spins += 1;
            crate::base::sync::spin_hint();
        }
        if self
            .state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        // From here the word has SLEEPERS whenever this thread may sleep,
        // or has slept and leaves (a wake it took may have been another
        // sleeper's), so the holder's release wakes a sleeper. Taking the
        // lock with SLEEPERS may cost one needless wake later, never a
        // lost one; so may giving up with SLEEPERS left set.
        if try_call {
            return self.lock_or_mark();
        }
        let mut slept = false;
        loop {
            let state = self.state.load(Ordering::Relaxed);
            if let Some(taken) = self.take(state, slept) {
                match taken {
                    true => return true,
                    false => continue,
                }
            }
            let starving = now.elapsed() >= STARVE_AFTER;
            let asleep = state | SLEEPERS | if starving { STARVING } else { 0 };
            if asleep != state
                && (self.state)
                    .compare_exchange(state, asleep, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            let timeout = match deadline {
                None => Duration::MAX,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return false,
                },
            };
            sys::private_wait(&self.state, asleep, timeout);
            slept = true;
        }
    }

    /// Takes the lock if `state` lets this thread: free, or handed over
    /// and this thread `slept` on it. `None`: it may not (the lock is
    /// held); `Some(false)`: the word changed under the attempt (look
    /// again); `Some(true)`: taken.
    #[inline]
    fn take(&self, state: u32, slept: bool) -> Option<bool> {
        let taken = if state & LOCKED == 0 {
            // Free (so neither STARVING nor HANDED): keep SLEEPERS, as
            // the word may have other sleepers.
            state | LOCKED | SLEEPERS
        } else if state & HANDED != 0 && slept {
            // Handed over: this sleeper is served; the lock stays held.
            state & !(HANDED | STARVING)
        } else {
            return None;
        };
        // Acquire: what the last holder wrote before giving it back (or
        // handing it over) is seen.
        Some(
            (self.state)
                .compare_exchange(state, taken, Ordering::Acquire, Ordering::Relaxed)
                .is_ok(),
        )
    }

    /// A `try_` call's wait for a held lock (see [`Lock::lock_until`]):
    /// one nap of at most [`TRY_NAP`]; then the lock is taken if free (or
    /// handed over: the nap may have taken the release's wake), or marked
    /// [`MISSED`] (in one step, so the holder's release either finds the
    /// mark or came first and left the lock free to take).
    fn lock_or_mark(&self) -> bool {
        let before = self.state.fetch_or(SLEEPERS, Ordering::Relaxed);
        if before & LOCKED == 0 {
            // Freed meanwhile: take it as any waiter would.
            let mut state = before | SLEEPERS;
            loop {
                match self.take(state, false) {
                    Some(true) => return true,
                    Some(false) => state = self.state.load(Ordering::Relaxed),
                    None => break,
                }
            }
        } else {
            sys::private_wait(&self.state, before | SLEEPERS, TRY_NAP);
        }
        loop {
            let state = self.state.load(Ordering::Relaxed);
            match self.take(state, true) {
                Some(true) => return true,
                Some(false) => continue,
                None => {}
            }
            if (self.state)
                .compare_exchange(
                    state,
                    state | MISSED | SLEEPERS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
            {
                return false;
            }
        }
    }

    /// The value, without locking: `&mut self` says no guard exists.
    #[cfg(test)]
    fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T, const BRIEF: bool> std::fmt::Debug for Lock<T, BRIEF> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The value is not shown: reading it would mean taking the lock,
        // which a `Debug` call must never wait for.
        f.debug_struct("Lock").finish_non_exhaustive()
    }
}

/// The lock, held; giving it back on drop.
pub(crate) struct Guard<'a, T, const BRIEF: bool = false> {
    lock: &'a Lock<T, BRIEF>,
    /// Told if a `try_` call gave up while this guard held the lock.
    missed: &'a dyn Missed,
    /// Sent or shared as a `&mut T` would be (a bare `&Lock<T>` would let
    /// two threads share a guard of a `T` that is `Send` but not `Sync`).
    _value: PhantomData<&'a mut T>,
}

impl<T, const BRIEF: bool> Deref for Guard<'_, T, BRIEF> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `Sync` above), so no
        // `&mut T` exists while this borrow of it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T, const BRIEF: bool> DerefMut for Guard<'_, T, BRIEF> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`; `&mut self` makes this borrow the only one.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T, const BRIEF: bool> Drop for Guard<'_, T, BRIEF> {
    #[inline]
    fn drop(&mut self) {
        // Release: this holder's writes are seen by the next.
        if BRIEF {
            // Nobody sleeps on a brief lock: nothing to learn by a swap.
            self.lock.state.store(FREE, Ordering::Release);
            return;
        }
        if (self.lock.state)
            .compare_exchange(LOCKED, FREE, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            release_contended(&self.lock.state, self.missed);
        }
    }
}

/// A release that finds sleepers, a starving one, or a `try_` call's mark
/// on the word: hands the lock over to a sleeper if one starves, else
/// frees it, wakes a sleeper, tells `missed`.
#[cold]
#[inline(never)]
fn release_contended(word: &AtomicU32, missed: &dyn Missed) {
    let mut state = word.load(Ordering::Relaxed);
    loop {
        if state & STARVING != 0 {
            // Release: this holder's writes are seen by the sleeper that
            // takes the lock over. MISSED stays for the next release
            // that frees it: the lock is not free to a `try_` call now.
            if let Err(now) =
                word.compare_exchange(state, state | HANDED, Ordering::Release, Ordering::Relaxed)
            {
                state = now;
                continue;
            }
            if sys::private_wake(word, 1) > 0 {
                // The woken sleeper takes it (or another that slept does,
                // and the woken one sleeps again).
                return;
            }
            // No one was asleep (the starving waiter left at its
            // deadline): free it, unless a sleeper just took it.
            state |= HANDED;
            loop {
                if state & HANDED == 0 {
                    return;
                }
                match word.compare_exchange(state, FREE, Ordering::Release, Ordering::Relaxed) {
                    Ok(_) => return released(word, state, missed),
                    Err(now) => state = now,
                }
            }
        }
        match word.compare_exchange(state, FREE, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return released(word, state, missed),
            Err(now) => state = now,
        }
    }
}

/// The lock was freed from `before`: wakes a sleeper, tells `missed`.
fn released(word: &AtomicU32, before: u32, missed: &dyn Missed) {
    if before & SLEEPERS != 0 {
        sys::private_wake(word, 1);
    }
    if before & MISSED != 0 {
        missed.missed();
    }
}

/// Nobody to tell (a lock whose `try_` calls need no doorbell).
impl Missed for () {
    fn missed(&self) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn threads_take_turns_and_nothing_is_lost() {
        // Each thread adds with a read, a pause and a write: two holders at
        // once would lose increments. The pause makes the others find the
        // lock held, spin out and sleep, so the wake path is taken.
        // Watchdog: a lost wake would leave a thread asleep for good; the
        // test then fails after a minute instead of hanging.
        let (done, finished) = std::sync::mpsc::channel();
        let lock = Arc::new(Lock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let lock = Arc::clone(&lock);
                let done = done.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let mut value = lock.lock();
                        let seen = *value;
                        if i % 500 == 0 {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        *value = seen + 1;
                    }
                    done.send(()).unwrap();
                })
            })
            .collect();
        for _ in 0..threads.len() {
            finished
                .recv_timeout(Duration::from_secs(60))
                .expect("a thread never got the lock back: a lost wake");
        }
        for thread in threads {
            thread.join().unwrap();
        }
        let mut lock = Arc::into_inner(lock).unwrap();
        assert_eq!(*lock.get_mut(), 8_000);
    }

    #[test]
    fn a_deadline_gives_up_on_a_holder_that_keeps_it() {
        let lock = Arc::new(Lock::new(0u32));
        let (held, holding) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                let _guard = lock.lock();
                held.send(()).unwrap();
                let _ = released.recv_timeout(Duration::from_secs(60));
            })
        };
        holding.recv().unwrap();
        // Past the spin: asleep on the word until the deadline.
        assert!(
            lock.lock_until(Some(Instant::now() + Duration::from_millis(20)), &())
                .is_none()
        );
        // A blocking caller sleeps until the holder gives the lock back.
        let late = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || *lock.lock() += 1)
        };
        std::thread::sleep(Duration::from_millis(20));
        release.send(()).unwrap();
        // Given back: taken, and SLEEPERS left by the timed-out waiter
        // costs nothing but a needless wake.
        *lock
            .lock_until(Some(Instant::now() + Duration::from_secs(60)), &())
            .unwrap() += 1;
        holder.join().unwrap();
        late.join().unwrap();
        assert_eq!(*lock.lock_until(Some(Instant::now()), &()).unwrap(), 2);
    }

    /// Counts the `try_` calls that gave up, as the holder reports them.
    #[derive(Default)]
    struct Count(AtomicU32);

    impl Missed for Count {
        fn missed(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_try_call_never_waits_for_a_holder_and_the_holder_says_it_missed_one() {
        let lock = Arc::new(Lock::new(0u32));
        let count = Arc::new(Count::default());
        let (held, holding) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = {
            let (lock, count) = (Arc::clone(&lock), Arc::clone(&count));
            std::thread::spawn(move || {
                // A holder that keeps the lock (as one waiting for a full
                // socket would) until released.
                let _guard = lock.lock_until(None, &*count).unwrap();
                held.send(()).unwrap();
                let _ = released.recv_timeout(Duration::from_secs(60));
            })
        };
        holding.recv().unwrap();
        for _ in 0..3 {
            let start = Instant::now();
            let taken = lock.lock_until(Some(start), &()).is_some();
            let waited = start.elapsed();
            assert!(!taken, "the lock was taken while held");
            assert!(
                waited < Duration::from_millis(200),
                "a try_ call waited {waited:?} behind a holder"
            );
        }
        assert_eq!(count.0.load(Ordering::Relaxed), 0, "told before release");
        release.send(()).unwrap();
        holder.join().unwrap();
        // Told once, for the calls that gave up while it held the lock.
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        // Given back: a `try_` call takes it, and a release with no call
        // missed tells nothing.
        drop(lock.lock_until(Some(Instant::now()), &*count).unwrap());
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_panic_while_held_gives_the_lock_back() {
        let lock = Lock::new(vec![1]);
        let caught = std::panic::catch_unwind(|| {
            let mut value = lock.lock();
            value.push(2);
            panic!("inside");
        });
        assert!(caught.is_err());
        assert_eq!(*lock.lock(), [1, 2]);
        assert_eq!(format!("{lock:?}"), "Lock { .. }");
    }

    #[test]
    fn a_holder_lending_its_lock_to_a_closure_cannot_wait_for_itself() {
        let lock = Arc::new(Lock::new(0u32));
        let guard = lock.lock();
        let lent = lock.lend();
        // Another thread waits as for any holder, and gets it afterwards.
        let other = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || *lock.lock() + 1)
        };
        // This thread's own call is a mistake, named at once.
        let again = std::panic::catch_unwind(|| {
            drop(lock.lock_until(None, &()));
        });
        let message = again.expect_err("a panic, not a wait");
        let message = (message.downcast_ref::<&str>().copied())
            .or_else(|| message.downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        assert!(message.contains("inside the closure"), "{message}");
        drop(lent);
        drop(guard);
        assert_eq!(other.join().unwrap(), 1);
        // The mark went with `lent`: held again, this thread just waits
        // (a `try_` call here: it gives up).
        let _guard = lock.lock();
        assert!(lock.lock_until(Some(Instant::now()), &()).is_none());
    }
}
