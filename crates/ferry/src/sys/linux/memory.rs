//! Sealed shared memory: [`memfd_create(2)`](https://man7.org/linux/man-pages/man2/memfd_create.2.html),
//! file seals ([`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), `F_ADD_SEALS`),
//! and [`mmap(2)`](https://man7.org/linux/man-pages/man2/mmap.2.html).
//!
//! Soundness: a [`Mapping`] owns one `MAP_SHARED` mapping of exactly the
//! object's size. The object is sealed against shrinking before anyone maps
//! it (and a received object is refused unless it is), so no access inside
//! `len` can fault with `SIGBUS`. The mapping is unmapped once, on drop.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

/// The seals every shared object must carry: its size can never change.
const SIZE_SEALS: SealFlags = SealFlags::SHRINK.union(SealFlags::GROW);

/// An anonymous shared-memory object of fixed size.
#[derive(Debug)]
pub(crate) struct SharedMemory {
    fd: OwnedFd,
    len: usize,
}

impl SharedMemory {
    /// Creates a zero-filled object of `len` bytes, sealed against resizing.
    pub(crate) fn create(name: &str, len: usize) -> io::Result<Self> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SIZE_SEALS | SealFlags::SEAL)?;
        Ok(Self { fd, len })
    }

    /// Adopts an object received from a peer, after checking that it is
    /// sealed against resizing and that its size lies in `min..=max`.
    pub(crate) fn from_peer(fd: OwnedFd, min: usize, max: usize) -> Result<Self, &'static str> {
        let seals =
            rustix::fs::fcntl_get_seals(&fd).map_err(|_| "object is not sealable shared memory")?;
        if !seals.contains(SIZE_SEALS) {
            return Err("shared memory is not sealed against resizing");
        }
        let stat = rustix::fs::fstat(&fd).map_err(|_| "fstat failed on shared memory")?;
        let len = usize::try_from(stat.st_size).map_err(|_| "shared memory size is negative")?;
        if len < min || len > max {
            return Err("shared memory size out of range");
        }
        Ok(Self { fd, len })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Maps the whole object read-write and shared.
    pub(crate) fn map(&self) -> io::Result<Mapping> {
        self.map_with(Access::Lazy)
    }

    /// Maps the whole object, shared, with the given access.
    pub(crate) fn map_with(&self, access: Access) -> io::Result<Mapping> {
        let (prot, flags) = match access {
            Access::Lazy => (ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED),
            Access::Prefaulted => (
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::POPULATE,
            ),
            Access::ReadOnlyView => (ProtFlags::READ, MapFlags::SHARED),
        };
        // SAFETY: a null hint lets the kernel choose a fresh range, so no
        // existing Rust object is overlapped; `fd` is valid and sized `len`.
        let ptr =
            unsafe { rustix::mm::mmap(std::ptr::null_mut(), self.len, prot, flags, &self.fd, 0)? };
        let ptr =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mapping { ptr, len: self.len })
    }
}

/// How a [`SharedMemory`] object is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Readable and writable; pages are faulted in on first touch.
    Lazy,
    /// Readable and writable, every page faulted in now (`MAP_POPULATE`).
    Prefaulted,
    /// Read-only: writes through this mapping fault.
    ReadOnlyView,
}

/// One shared mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory with no thread affinity; all
// concurrent access to its bytes goes through atomics or through ranges that
// the ring protocol hands to one side at a time.
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only exposes the base pointer and length.
unsafe impl Sync for Mapping {}

impl Mapping {
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped only here.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
