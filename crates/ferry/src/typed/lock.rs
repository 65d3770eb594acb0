//! The in-process queue's lock: one atomic swap to take, a plain store to
//! release.
//!
//! Why not `std::sync::Mutex`: its release is a second atomic swap (it
//! must learn whether a thread sleeps on the lock), and a one-thread typed
//! call takes four locks, so the swaps are most of its cost: 55 ns per
//! `add(i32, i32)` call with std's mutex against the 50 ns the call is
//! allowed. Nobody sleeps on this lock: every critical section is a few
//! instructions (a push or a pop, a flag), and a thread that finds it held
//! spins briefly, then yields its CPU, which lets a preempted holder run.
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

use crate::sync::{AtomicBool, Ordering};

/// A value behind the lock.
#[derive(Debug)]
pub(super) struct SpinLock<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, and at most one
// guard exists at a time (`lock` takes `held` with an acquiring swap that
// only one thread can win; the guard's drop releases it). So sharing the
// lock between threads hands the value from one thread to another, never
// to two at once: `T: Send` is what that needs.
unsafe impl<T: Send> Sync for SpinLock<T> {}

/// Spins polled before yielding, when the lock is held.
const SPINS: u32 = 64;

impl<T> SpinLock<T> {
    pub(super) fn new(value: T) -> Self {
        Self {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting while another thread holds it.
    #[inline]
    pub(super) fn lock(&self) -> Guard<'_, T> {
        // Acquire: what the last holder wrote before releasing is seen.
        while self.held.swap(true, Ordering::Acquire) {
            let mut spins = 0;
            while self.held.load(Ordering::Relaxed) {
                if spins < SPINS {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    crate::sys::yield_cpu();
                }
            }
        }
        Guard {
            lock: self,
            _value: std::marker::PhantomData,
        }
    }
}

/// Access to the value while the lock is held.
#[derive(Debug)]
pub(super) struct Guard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Sent or shared as a `&mut T` would be (a bare `&SpinLock<T>` would
    /// let two threads share a guard of a `T` that is `Send` but not `Sync`).
    _value: std::marker::PhantomData<&'a mut T>,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `Sync` above), so no
        // `&mut T` exists while this `&T` lives (it borrows the guard).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one, and `&mut self` makes this the
        // only reference made through it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // Release: this holder's writes are seen by the next one.
        self.lock.held.store(false, Ordering::Release);
    }
}
