//! The one place atomics come from, so loom can stand in for them (and
//! `clippy.toml` refuses `std::sync::atomic`'s types anywhere else).
//!
//! Under `--cfg loom` the ring's shared words are loom's model atomics and
//! the futex is modelled with a loom mutex and condition variable (see
//! `ring::wake`); otherwise they are `std`'s and the kernel's.

#[cfg(loom)]
#[allow(unused_imports)] // what the loom build compiles uses a few
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{Ordering, fence};

/// Wraps one of `std`'s atomic types, with the operations ferry uses: the
/// one place they are named (`clippy.toml` refuses them anywhere else, so
/// no atomic escapes loom's model by being imported from `std` directly).
/// `repr(transparent)`: a wrapped atomic in shared memory has the layout
/// of the `std` one, which is the layout of its integer.
#[cfg(not(loom))]
macro_rules! atomic {
    ($name:ident, $int:ty $(, $arith:ident)?) => {
        // `pub`, not `pub(crate)`: the public ring's control block has
        // fields of these types (reachable, though not by name).
        #[allow(clippy::disallowed_types, unreachable_pub)]
        #[repr(transparent)]
        #[derive(Debug, Default)]
        pub struct $name(std::sync::atomic::$name);

        #[allow(dead_code, clippy::disallowed_types, unreachable_pub)]
        impl $name {
            pub const fn new(value: $int) -> Self {
                Self(std::sync::atomic::$name::new(value))
            }
            #[inline]
            pub fn load(&self, order: Ordering) -> $int {
                self.0.load(order)
            }
            #[inline]
            pub fn store(&self, value: $int, order: Ordering) {
                self.0.store(value, order)
            }
            #[inline]
            pub fn swap(&self, value: $int, order: Ordering) -> $int {
                self.0.swap(value, order)
            }
            #[inline]
            pub fn compare_exchange(
                &self,
                current: $int,
                new: $int,
                success: Ordering,
                failure: Ordering,
            ) -> Result<$int, $int> {
                self.0.compare_exchange(current, new, success, failure)
            }
            #[inline]
            pub fn get_mut(&mut self) -> &mut $int {
                self.0.get_mut()
            }
            #[inline]
            pub fn into_inner(self) -> $int {
                self.0.into_inner()
            }
            /// The `std` atomic itself, for the system layer's calls that
            /// take one (a futex word).
            #[inline]
            pub(crate) fn as_std(&self) -> &std::sync::atomic::$name {
                &self.0
            }
        }
        $(atomic!(@$arith $name, $int);)?
    };
    (@arith $name:ident, $int:ty) => {
        #[allow(dead_code, unreachable_pub)]
        impl $name {
            #[inline]
            pub fn fetch_add(&self, value: $int, order: Ordering) -> $int {
                self.0.fetch_add(value, order)
            }
            #[inline]
            pub fn fetch_sub(&self, value: $int, order: Ordering) -> $int {
                self.0.fetch_sub(value, order)
            }
            #[inline]
            pub fn fetch_or(&self, value: $int, order: Ordering) -> $int {
                self.0.fetch_or(value, order)
            }
            #[inline]
            pub fn fetch_and(&self, value: $int, order: Ordering) -> $int {
                self.0.fetch_and(value, order)
            }
        }
    };
}

#[cfg(not(loom))]
atomic!(AtomicBool, bool);
#[cfg(not(loom))]
atomic!(AtomicU8, u8, arith);
#[cfg(not(loom))]
atomic!(AtomicU32, u32, arith);
#[cfg(not(loom))]
atomic!(AtomicU64, u64, arith);
#[cfg(not(loom))]
atomic!(AtomicUsize, usize, arith);
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
