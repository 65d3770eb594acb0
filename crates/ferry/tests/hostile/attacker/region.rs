//! Pipe regions as the attacker sees them: the victim's, mapped from the
//! descriptor it sent, and the attacker's own, made from a sealed memfd.
//!
//! Soundness: a [`RawRegion`] owns one `MAP_SHARED` read-write mapping of
//! exactly its object's size (from `fstat`, or the size this process gave
//! it and sealed), unmapped once on drop; every access the kit makes is
//! bounds-checked against that length first (see `ring.rs`). The peer may
//! write the same memory concurrently: the kit reads and writes it only
//! through atomics or raw-pointer copies, never through references to plain
//! bytes.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use super::ring::RawRing;
use super::wire;

/// A memfd of `len` bytes, zero-filled and sealed against growing and
/// shrinking, as ferry requires of any object a peer sends it.
pub fn sealed_memfd(name: &str, len: u64) -> io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::ftruncate(&fd, len)?;
    rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
    Ok(fd)
}

/// One whole shared object, mapped read-write.
#[derive(Debug)]
pub struct RawRegion {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
}

impl RawRegion {
    /// Maps the object `fd` (all of it, as `fstat` sizes it) read-write.
    pub fn map(fd: OwnedFd) -> io::Result<Self> {
        let size = rustix::fs::fstat(&fd)?.st_size;
        let len = usize::try_from(size).map_err(|_| io::Error::other("negative size"))?;
        if len < wire::DATA_AT {
            return Err(io::Error::other("object smaller than a region header"));
        }
        // SAFETY: a null hint lets the kernel pick a fresh range, so nothing
        // of this process is overlapped; `fd` is open and `len` its size.
        let ptr = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )?
        };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("null map"))?;
        Ok(Self { ptr, len, fd })
    }

    /// Makes a region of two rings of `capacity` bytes (sparse: untouched
    /// pages cost nothing), with a valid header and every position zero.
    pub fn create(capacity: usize) -> io::Result<Self> {
        let len = wire::region_len(capacity) as u64;
        let region = Self::map(sealed_memfd("hostile-region", len)?)?;
        let capacity = u32::try_from(capacity).map_err(|_| io::Error::other("capacity"))?;
        region.write(0, &wire::region_header(capacity));
        Ok(region)
    }

    /// The object's descriptor, to send to the victim.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The ring capacity the header states.
    pub fn capacity(&self) -> usize {
        let header = self.read(0, 16);
        u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as usize
    }

    /// Ring `index` (0 or 1), checked to lie inside the mapping.
    pub fn ring(&self, index: usize) -> RawRing<'_> {
        assert!(index < 2, "a region has two rings");
        let capacity = self.capacity();
        assert!(
            capacity.is_power_of_two() && wire::region_len(capacity) <= self.len,
            "region header states a capacity its size cannot hold"
        );
        let control = wire::CONTROL_AT + index * wire::CONTROL_SIZE;
        let data = wire::DATA_AT + index * capacity;
        // SAFETY: both offsets are inside the mapping: the control block
        // ends before DATA_AT <= len, and `data + capacity <= len` (asserted).
        let (control, data) = unsafe { (self.ptr.add(control), self.ptr.add(data)) };
        RawRing::new(control, data, capacity)
    }

    /// Copies `bytes` into the mapping at `offset`.
    pub fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(
            offset
                .checked_add(bytes.len())
                .is_some_and(|end| end <= self.len)
        );
        // SAFETY: the range lies inside the mapping (asserted); writes go
        // through a raw pointer, so no reference aliases shared memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ptr.as_ptr().add(offset),
                bytes.len(),
            )
        };
    }

    /// Copies `len` bytes out of the mapping at `offset`.
    pub fn read(&self, offset: usize, len: usize) -> Vec<u8> {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len));
        let mut out = vec![0u8; len];
        // SAFETY: the range lies inside the mapping (asserted); `out` holds
        // `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), len)
        };
        out
    }
}

impl Drop for RawRegion {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned, unmapped only here; the
        // rings borrowed from it cannot outlive `self`.
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
