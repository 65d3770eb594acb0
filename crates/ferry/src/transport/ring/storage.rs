//! Where a ring's control block and bytes live: heap memory for tests under
//! Miri and loom, a shared mapping in real use.
#![allow(unsafe_code)]

#[cfg(any(test, loom, feature = "internals"))]
use std::cell::UnsafeCell;
use std::sync::Arc;

use super::control::Control;

/// Backing memory of one ring.
///
/// The ring's sides adopt a storage only inside this crate (safe code
/// outside it makes rings with [`super::heap`]), since whoever else holds
/// the storage could move a position under them.
///
/// # Safety
///
/// An implementation promises that, for as long as it lives:
/// - `control()` refers to a [`Control`] block shared by both ring sides;
/// - `data()` points to `capacity()` bytes, valid for reads and writes
///   through raw pointers, that no Rust reference covers but the slices
///   the ring's sides lend of bytes the protocol gives them (a published
///   body, free space being written) while they are borrowed;
/// - `capacity()` never changes, is a power of two and at least 64.
pub unsafe trait Storage {
    /// The shared control block.
    fn control(&self) -> &Control;
    /// The first byte of the data area.
    fn data(&self) -> *mut u8;
    /// The data area's size in bytes.
    fn capacity(&self) -> usize;
}

/// A ring on the heap, for tests and in-process use (see [`super::heap`]).
#[cfg(any(test, loom, feature = "internals"))]
#[derive(Debug)]
pub struct HeapStorage {
    control: Control,
    data: Box<[UnsafeCell<u8>]>,
}

// SAFETY: the bytes are only touched through raw pointers, in ranges the
// ring protocol gives to exactly one side at a time; the control block is
// atomics only.
#[cfg(any(test, loom, feature = "internals"))]
unsafe impl Sync for HeapStorage {}
// SAFETY: as above; nothing in it is tied to a thread.
#[cfg(any(test, loom, feature = "internals"))]
unsafe impl Send for HeapStorage {}

#[cfg(any(test, loom, feature = "internals"))]
impl HeapStorage {
    /// A ring of `capacity` bytes (a power of two, at least 64).
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        assert!(
            capacity.is_power_of_two() && capacity >= 64,
            "ring capacity must be a power of two >= 64"
        );
        let data = (0..capacity).map(|_| UnsafeCell::new(0)).collect();
        Arc::new(Self {
            control: Control::default(),
            data,
        })
    }
}

// SAFETY: `data` is a boxed slice of `UnsafeCell`s owned for the storage's
// life, so raw-pointer access needs no reference; the capacity was checked
// in `new` and the slice is never resized.
#[cfg(any(test, loom, feature = "internals"))]
unsafe impl Storage for HeapStorage {
    fn control(&self) -> &Control {
        &self.control
    }
    fn data(&self) -> *mut u8 {
        UnsafeCell::raw_get(self.data.as_ptr())
    }
    fn capacity(&self) -> usize {
        self.data.len()
    }
}

// SAFETY: forwards to `S`, whose promises hold while the `Arc` keeps it alive.
unsafe impl<S: Storage> Storage for Arc<S> {
    fn control(&self) -> &Control {
        (**self).control()
    }
    fn data(&self) -> *mut u8 {
        (**self).data()
    }
    fn capacity(&self) -> usize {
        (**self).capacity()
    }
}
