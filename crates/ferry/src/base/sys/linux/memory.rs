//! Sealed shared memory: [`memfd_create(2)`](https://man7.org/linux/man-pages/man2/memfd_create.2.html),
//! file seals ([`fcntl(2)`](https://man7.org/linux/man-pages/man2/fcntl.2.html), `F_ADD_SEALS`),
//! and [`mmap(2)`](https://man7.org/linux/man-pages/man2/mmap.2.html).
//!
//! Two kinds of object. [`SharedMemory::create`] makes one that every
//! holder may map writable (pipe regions and release tables, which both
//! sides write). [`SharedMemory::create_sole_writer`] makes one whose only
//! writable mapping is the one made with it (pool blocks): it then adds
//! `F_SEAL_FUTURE_WRITE`, after which the kernel refuses, to whoever holds
//! the descriptor (this process, or a peer it is sent to), `write(2)` and
//! `fallocate(2)` hole punching with `EPERM`, a new `PROT_WRITE`
//! `MAP_SHARED` mapping with `EPERM`, and `mprotect(2)` making a read-only
//! shared mapping writable with `EACCES` (such mappings lose `VM_MAYWRITE`);
//! mappings that existed before the seal keep working. A private
//! (copy-on-write) mapping may still be written, but its pages are the
//! mapper's own copies: they never reach the object.
//!
//! Soundness: a [`Mapping`] owns one `MAP_SHARED` mapping of exactly the
//! object's size. The object is sealed against shrinking before anyone maps
//! it (and a received object is refused unless it is), so no access inside
//! `len` can fault with `SIGBUS`. The mapping is unmapped once, on drop.
#![allow(unsafe_code)]

use crate::base::wire::Violation;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use crate::base::sys::{Access, PeerAccess, PeerFd};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

/// The seals every shared object must carry: its size can never change.
const SIZE_SEALS: SealFlags = SealFlags::SHRINK.union(SealFlags::GROW);

/// The seals that make an object's existing mappings its only writers, and
/// close its seals.
const SOLE_WRITER_SEALS: SealFlags = SealFlags::FUTURE_WRITE.union(SealFlags::SEAL);

/// `statfs(2)`'s `f_type` of tmpfs/shmem, where `memfd_create` objects live
/// (hugetlbfs ones, which may fail to map for lack of huge pages, do not).
const TMPFS_MAGIC: u64 = 0x0102_1994;

/// An anonymous shared-memory object of fixed size.
#[derive(Debug)]
pub(crate) struct SharedMemory {
    fd: OwnedFd,
    len: usize,
}

impl SharedMemory {
    /// Creates a zero-filled object of `len` bytes, sealed against resizing
    /// (and against any further seal). Every holder may map it writable.
    pub(crate) fn create(name: &str, len: usize) -> io::Result<Self> {
        let object = Self::create_fixed_size(name, len)?;
        rustix::fs::fcntl_add_seals(&object.fd, SealFlags::SEAL)?;
        Ok(object)
    }

    /// Creates a zero-filled object of `len` bytes, sealed against resizing,
    /// with the one mapping through which it can ever be written: read-write
    /// and pre-faulted. Once this returns, no holder of the descriptor (this
    /// process, or a peer it is sent to) can write it by `write(2)`, a new
    /// writable shared mapping, or a read-only shared mapping made writable
    /// (see the module comment).
    ///
    /// Fails with [`io::ErrorKind::Unsupported`] where the kernel refuses
    /// `F_SEAL_FUTURE_WRITE` (before Linux 5.1) rather than hand out an
    /// object a peer could write.
    pub(crate) fn create_sole_writer(name: &str, len: usize) -> io::Result<(Self, Mapping)> {
        let object = Self::create_fixed_size(name, len)?;
        let map = object.map_with(Access::Prefaulted)?;
        match rustix::fs::fcntl_add_seals(&object.fd, SOLE_WRITER_SEALS) {
            Ok(()) => Ok((object, map)),
            Err(Errno::INVAL) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this kernel refuses F_SEAL_FUTURE_WRITE (Linux 5.1 or later is needed), \
                 so a peer could write into shared memory it should only read",
            )),
            Err(e) => Err(e.into()),
        }
    }

    /// A zero-filled object of `len` bytes whose size is sealed, its other
    /// seals still open.
    fn create_fixed_size(name: &str, len: usize) -> io::Result<Self> {
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SIZE_SEALS)?;
        Ok(Self { fd, len })
    }

    /// Adopts an object received from a peer, after checking that it is
    /// plain shared memory (tmpfs), sealed against resizing, writable if it
    /// must be (`access`), and that its size lies in `min..=max`. A
    /// refused descriptor goes to the closer with `fd`; an adopted one is
    /// a memfd, whose close never waits, so it is closed here from then on.
    pub(crate) fn from_peer(
        fd: PeerFd,
        min: usize,
        max: usize,
        access: PeerAccess,
    ) -> Result<Self, Violation> {
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|_| Violation::NotSealable)?;
        if !seals.contains(SIZE_SEALS) {
            return Err(Violation::NotSealedAgainstResize);
        }
        let write_seals = SealFlags::WRITE | SealFlags::FUTURE_WRITE;
        if access == PeerAccess::Shared && seals.intersects(write_seals) {
            return Err(Violation::SealedAgainstWrites);
        }
        let fs = rustix::fs::fstatfs(&fd).map_err(|_| Violation::StatfsFailed)?;
        #[allow(clippy::unnecessary_cast)] // `f_type`'s width differs by target
        if fs.f_type as u64 != TMPFS_MAGIC {
            return Err(Violation::NotTmpfs);
        }
        let stat = rustix::fs::fstat(&fd).map_err(|_| Violation::StatFailed)?;
        let len = usize::try_from(stat.st_size).map_err(|_| Violation::NegativeSize)?;
        if len < min || len > max {
            return Err(Violation::SizeOutOfRange);
        }
        Ok(Self {
            fd: fd.into_owned(),
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The object's identity (device and inode): two descriptors of one
    /// object have the same.
    pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
        let stat = rustix::fs::fstat(&self.fd)?;
        #[allow(clippy::unnecessary_cast)] // the fields' widths differ by target
        Ok((stat.st_dev as u64, stat.st_ino as u64))
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

/// Whether `e` is this process running short (of memory, address space,
/// mappings or descriptors), as opposed to something refused.
pub(crate) fn is_shortage(e: &io::Error) -> bool {
    let shortages = [Errno::NOMEM, Errno::AGAIN, Errno::MFILE, Errno::NFILE];
    e.raw_os_error()
        .is_some_and(|code| shortages.iter().any(|s| s.raw_os_error() == code))
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

#[cfg(test)]
mod tests {
    //! The kernel's promises that make a block's sender its only writer,
    //! checked on this machine's kernel.

    use super::*;

    const LEN: usize = 2 * 4096;

    fn sole_writer() -> (SharedMemory, Mapping) {
        SharedMemory::create_sole_writer("ferry-test", LEN).expect("create a sole-writer object")
    }

    /// `raw_os_error` of an error that must be `errno`.
    fn assert_errno(result: io::Result<impl std::fmt::Debug>, errno: Errno, what: &str) {
        match result {
            Err(e) => assert_eq!(e.raw_os_error(), Some(errno.raw_os_error()), "{what}: {e}"),
            Ok(v) => panic!("{what} succeeded ({v:?}) on a sole-writer object"),
        }
    }

    #[test]
    fn the_first_mapping_still_writes() {
        let (object, map) = sole_writer();
        // SAFETY: `map` is LEN writable bytes, used by this thread alone.
        let bytes = unsafe { std::slice::from_raw_parts_mut(map.as_ptr(), map.len()) };
        bytes[..5].copy_from_slice(b"hello");
        bytes[LEN - 1] = 7;
        let mut back = [0u8; 5];
        rustix::io::pread(&object.fd, &mut back, 0).expect("pread");
        assert_eq!(&back, b"hello");
        let view = object
            .map_with(Access::ReadOnlyView)
            .expect("read-only view");
        // SAFETY: `view` is LEN readable bytes.
        assert_eq!(unsafe { *view.as_ptr().add(LEN - 1) }, 7);
    }

    #[test]
    fn a_new_writable_shared_mapping_is_refused() {
        let (object, _map) = sole_writer();
        assert_errno(object.map_with(Access::Lazy), Errno::PERM, "mmap RW shared");
        assert_errno(
            object.map_with(Access::Prefaulted),
            Errno::PERM,
            "mmap RW populate",
        );
    }

    #[test]
    fn write_and_hole_punching_are_refused() {
        let (object, _map) = sole_writer();
        let pwrite = rustix::io::pwrite(&object.fd, b"x", 0);
        assert_errno(pwrite.map_err(io::Error::from), Errno::PERM, "pwrite");
        let punch = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        let fallocate = rustix::fs::fallocate(&object.fd, punch, 0, 4096);
        assert_errno(
            fallocate.map_err(io::Error::from),
            Errno::PERM,
            "punch a hole",
        );
    }

    #[test]
    fn a_read_only_view_cannot_become_writable() {
        let (object, _map) = sole_writer();
        let view = object
            .map_with(Access::ReadOnlyView)
            .expect("read-only view");
        let rw = rustix::mm::MprotectFlags::READ | rustix::mm::MprotectFlags::WRITE;
        // SAFETY: `view` is a mapping of exactly `view.len()` bytes that no
        // Rust reference points into; if the call wrongly succeeded, nothing
        // writes through it before it is unmapped.
        let result = unsafe { rustix::mm::mprotect(view.as_ptr().cast(), view.len(), rw) };
        assert_errno(
            result.map_err(io::Error::from),
            Errno::ACCESS,
            "mprotect RW",
        );
    }

    #[test]
    fn the_seals_are_closed() {
        let (object, _map) = sole_writer();
        let seals = rustix::fs::fcntl_get_seals(&object.fd).expect("get seals");
        assert!(seals.contains(SIZE_SEALS | SOLE_WRITER_SEALS), "{seals:?}");
        let more = rustix::fs::fcntl_add_seals(&object.fd, SealFlags::WRITE);
        assert_errno(more.map_err(io::Error::from), Errno::PERM, "add a seal");
    }

    /// What a receiver may still do: a private copy-on-write mapping, whose
    /// writes stay in its own pages.
    #[test]
    fn a_private_mapping_does_not_reach_the_object() {
        let (object, map) = sole_writer();
        let rw = ProtFlags::READ | ProtFlags::WRITE;
        // SAFETY: a null hint maps a fresh range; `object.fd` is LEN bytes.
        let private = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                LEN,
                rw,
                MapFlags::PRIVATE,
                &object.fd,
                0,
            )
        }
        .expect("private mapping");
        // SAFETY: `private` is LEN writable bytes of this process alone.
        unsafe { private.cast::<u8>().write(0xEE) };
        // SAFETY: `map` is LEN readable bytes.
        let shared = unsafe { *map.as_ptr() };
        assert_eq!(shared, 0, "a private write reached the object");
        // SAFETY: exactly the range mmap returned, unmapped once.
        unsafe { rustix::mm::munmap(private, LEN) }.expect("munmap");
    }

    /// Pipe regions stay writable by every holder.
    #[test]
    fn a_plain_object_maps_writable_twice() {
        let object = SharedMemory::create("ferry-test", LEN).expect("create");
        let first = object.map().expect("first RW mapping");
        let second = object.map().expect("second RW mapping");
        // SAFETY: both are LEN-byte RW mappings of one object, used by this
        // thread alone.
        unsafe {
            first.as_ptr().write(9);
            assert_eq!(*second.as_ptr(), 9);
        }
    }
}
