//! The send and receive locks of a pipe end: one futex word, no poisoning.
//!
//! Why not `std::sync::Mutex`: ferry never uses its poisoning (a send or
//! receive interrupted by a panic leaves the ring consistent: a frame is
//! published whole or not at all, so the next holder simply goes on), yet
//! every lock and unlock of std's pays for it (two reads of the global
//! panic count and a flag check, ~10 instructions a pair, four pairs per
//! round trip: a tenth of ferry's budget beyond the floor's). The lock
//! itself is the same futex protocol: a compare-exchange to take it, a swap
//! to give it back that tells whether anyone sleeps on it, a private futex
//! wait and wake only then. Unlike `typed::lock::SpinLock`, a thread that
//! finds it held sleeps: a holder may wait for a full ring or an empty one
//! for as long as its deadline allows.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::time::{Duration, Instant};

use crate::sync::{AtomicU32, AtomicUsize, Ordering};
use crate::sys;

/// Nobody holds the lock.
const FREE: u32 = 0;
/// Held, and no thread sleeps on it.
const HELD: u32 = 1;
/// Held, and a thread may sleep on it: the holder wakes one when it gives
/// the lock back.
const CONTENDED: u32 = 2;
/// Polls of a held lock before sleeping on it (a holder that only pushes a
/// frame gives it back within these).
const SPINS: u32 = 100;

/// Longest nap of a `try_` call waiting for a working holder before it
/// looks whether the holder has begun to wait for the ring (see
/// [`Lock::lock_until`]): a holder pushing or reading one frame gives the
/// lock back well within it.
const TRY_NAP: Duration = Duration::from_micros(100);

/// A value behind the lock.
pub(super) struct Lock<T> {
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
pub(super) struct Lent<'a> {
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
unsafe impl<T: Send> Sync for Lock<T> {}

// As `std::sync::Mutex`: a panic while the lock is held cannot leave the
// value half-changed in a way a later holder misreads (see the module text),
// so the lock may cross `catch_unwind`.
impl<T> UnwindSafe for Lock<T> {}
impl<T> RefUnwindSafe for Lock<T> {}

impl<T> Lock<T> {
    pub(super) const fn new(value: T) -> Self {
        Self {
            state: AtomicU32::new(FREE),
            lent_to: AtomicUsize::new(0),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, sleeping while another thread holds it.
    #[cfg(test)]
    fn lock(&self) -> Guard<'_, T> {
        loop {
            if let Some(guard) = self.lock_until(None, &|| false) {
                return guard;
            }
        }
    }

    /// Takes the lock, sleeping while another thread holds it until
    /// `deadline` (`None`: as long as it takes). `None` if it was still
    /// held then.
    ///
    /// A deadline already past when the lock is found held is a `try_`
    /// call's. It waits for a holder that is working (pushing or reading a
    /// frame: microseconds), and gives up (`None`) once `idle` says the
    /// answer is known without the lock: for a receive, the ring is empty
    /// (`Empty` is then the truth, and any frame that comes is the
    /// holder's or rings an armed doorbell); for a send, the holder waits
    /// for room while the peer has frames to read (`Full`, and the peer's
    /// next read, which frees room, rings an armed doorbell). Giving up in
    /// any other state could strand a caller
    /// that then waits on its doorbell (an async half): a frame published
    /// before it armed the bell, and left in the ring by the holder, would
    /// ring nothing.
    ///
    /// `idle` is asked only on that path; it reads shared words, no lock.
    #[inline]
    pub(super) fn lock_until(
        &self,
        deadline: Option<Instant>,
        idle: &dyn Fn() -> bool,
    ) -> Option<Guard<'_, T>> {
        // Acquire: what the last holder wrote before giving it back is seen.
        if self
            .state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
            && !self.lock_contended(deadline, idle)
        {
            return None;
        }
        Some(Guard {
            lock: self,
            _value: PhantomData,
        })
    }

    /// Marks this thread, which holds the lock, as running a caller's
    /// closure until the mark drops: should the closure call on the same
    /// half again, its lock call panics, naming the mistake, instead of
    /// waiting for this thread for good. Only the lock's holder calls it.
    #[inline]
    pub(super) fn lend(&self) -> Lent<'_> {
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
    fn lock_contended(&self, deadline: Option<Instant>, idle: &dyn Fn() -> bool) -> bool {
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
        while self.state.load(Ordering::Relaxed) == HELD && spins < SPINS {
            spins += 1;
            crate::sync::spin_hint();
        }
        if self
            .state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return true;
        }
        // From here the word says CONTENDED whenever this thread may sleep,
        // so the holder's release wakes it. Taking the lock as CONTENDED
        // may cost one needless wake later, never a lost one; so may giving
        // up at the deadline with the word left CONTENDED.
        if try_call {
            return self.lock_unless_idle(idle);
        }
        while self.state.swap(CONTENDED, Ordering::Acquire) != FREE {
            let timeout = match deadline {
                None => Duration::MAX,
                Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return false,
                },
            };
            sys::private_wait(&self.state, CONTENDED, timeout);
        }
        true
    }

    /// A `try_` call's wait for a held lock (see [`Lock::lock_until`]):
    /// until it is given back, or `idle` says the holder waits for the
    /// ring. Naps of [`TRY_NAP`] at most: a holder that starts to wait
    /// gives nothing back, so it is looked at again after each.
    fn lock_unless_idle(&self, idle: &dyn Fn() -> bool) -> bool {
        while self.state.swap(CONTENDED, Ordering::Acquire) != FREE {
            if idle() {
                return false;
            }
            sys::private_wait(&self.state, CONTENDED, TRY_NAP);
        }
        true
    }

    /// The value, without locking: `&mut self` says no guard exists.
    #[cfg(test)]
    fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

impl<T> std::fmt::Debug for Lock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The value is not shown: reading it would mean taking the lock,
        // which a `Debug` call must never wait for.
        f.debug_struct("Lock").finish_non_exhaustive()
    }
}

/// The lock, held; giving it back on drop.
pub(super) struct Guard<'a, T> {
    lock: &'a Lock<T>,
    /// Sent or shared as a `&mut T` would be (a bare `&Lock<T>` would let
    /// two threads share a guard of a `T` that is `Send` but not `Sync`).
    _value: PhantomData<&'a mut T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `Sync` above), so no
        // `&mut T` exists while this borrow of it lives.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as `deref`; `&mut self` makes this borrow the only one.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: this holder's writes are seen by the next.
        if self.lock.state.swap(FREE, Ordering::Release) == CONTENDED {
            sys::private_wake(&self.lock.state, 1);
        }
    }
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
            lock.lock_until(Some(Instant::now() + Duration::from_millis(20)), &|| true)
                .is_none()
        );
        // A deadline already past (a `try_` call's) waits for a holder
        // that is not idle.
        let late = {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                *lock.lock_until(Some(Instant::now()), &|| false).unwrap() += 1
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        release.send(()).unwrap();
        // Given back: taken, and the word left CONTENDED by the timed-out
        // waiter costs nothing but a needless wake.
        *lock
            .lock_until(Some(Instant::now() + Duration::from_secs(60)), &|| true)
            .unwrap() += 1;
        holder.join().unwrap();
        late.join().unwrap();
        assert_eq!(*lock.lock_until(Some(Instant::now()), &|| true).unwrap(), 2);
    }

    #[test]
    fn a_try_call_gives_up_once_the_holder_waits_idle() {
        use crate::sync::AtomicBool;
        let lock = Arc::new(Lock::new(0u32));
        let idle = Arc::new(AtomicBool::new(false));
        let (held, holding) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let holder = {
            let (lock, idle) = (Arc::clone(&lock), Arc::clone(&idle));
            std::thread::spawn(move || {
                let _guard = lock.lock();
                held.send(()).unwrap();
                // Working a while, then waiting idle until released.
                std::thread::sleep(Duration::from_millis(50));
                idle.store(true, Ordering::Relaxed);
                let _ = released.recv_timeout(Duration::from_secs(60));
                idle.store(false, Ordering::Relaxed);
            })
        };
        holding.recv().unwrap();
        // Behind the working holder the `try_` call waits; once the holder
        // says it waits idle, the call gives up without the lock.
        let start = Instant::now();
        let taken = lock
            .lock_until(Some(start), &|| idle.load(Ordering::Relaxed))
            .is_some();
        let waited = start.elapsed();
        assert!(!taken, "the lock was taken while held");
        assert!(
            waited >= Duration::from_millis(40),
            "gave up on a working holder after {waited:?}"
        );
        assert!(
            waited < Duration::from_secs(30),
            "waited {waited:?} behind an idle holder"
        );
        release.send(()).unwrap();
        holder.join().unwrap();
        // Given back: a `try_` call takes it whatever `idle` says.
        assert!(lock.lock_until(Some(Instant::now()), &|| true).is_some());
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
            drop(lock.lock_until(None, &|| false));
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
        // (a `try_` call here: it gives up once `idle` says so).
        let _guard = lock.lock();
        assert!(lock.lock_until(Some(Instant::now()), &|| true).is_none());
    }
}
