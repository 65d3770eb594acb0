//! The one place atomics come from, so loom can stand in for them.
//!
//! Under `--cfg loom` the ring's shared words are loom's model atomics and
//! the futex is modelled with a loom mutex and condition variable (see
//! [`crate::ring::wake`]); otherwise they are `std`'s and the kernel's.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex, MutexGuard};

#[cfg_attr(loom, allow(dead_code))]
/// Spin-loop hint (`pause` on x86); a yield point under loom.
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
