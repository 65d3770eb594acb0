//! Pool blocks: one sealed memory object per block, in power-of-two size
//! classes, and the mappings of them on either side of a link.
//!
//! A block's sender is its only writer. It maps the block read-write once,
//! then seals it (`SharedMemory::create_sole_writer`) before its descriptor
//! can leave this process, so the receiver it is sent to cannot write it:
//! not through its read-only mapping (`mprotect` to writable fails), nor
//! through the descriptor (`write(2)` and a new writable shared mapping
//! fail, however it reopens it, e.g. by `/proc/self/map_files`). A hostile
//! receiver can still read the block (every message ever sent through it
//! on this link), keep it mapped, or map it privately copy-on-write, which
//! changes only its own copy; none of that reaches this process, which
//! reuses the block and reads back what it wrote ([`Block::bytes`]). Where
//! the kernel cannot seal so (before Linux 5.1), [`Block::create`] fails
//! with a local error and large messages travel through the ring instead.
//!
//! The other way round, a hostile *sender* keeps write access to its own
//! blocks and can change a message while the receiver reads it in place:
//! [`PeerBlock::bytes`] and the public `SharedBytes` say so, and everything
//! ferry parses out of a block is copied out first.
//!
//! Soundness of the raw accesses: every mapping covers exactly the sealed
//! object's size, so `ptr..ptr + len` stays mapped for the mapping's life;
//! the bytes are only reached through raw pointers or through slices whose
//! ownership the pool protocol gives to one side at a time (the sender
//! between allocation and commit, the receiver until it releases).
#![allow(unsafe_code)]

use crate::base::sync::{AtomicBool, Ordering};
use crate::base::wire::Violation;
use std::io;

use crate::base::sys::{Access, Mapping, PeerAccess, SharedMemory};

pub(crate) use crate::base::wire::pool::{CLASSES, class_for, class_size};

/// Set once the kernel has refused to seal a block: later blocks fail at
/// once instead of each making and mapping an object first.
static SEALING_REFUSED: AtomicBool = AtomicBool::new(false);

/// A block this process made: mapped read-write and pre-faulted, the only
/// mapping through which it can be written.
#[derive(Debug)]
pub(crate) struct Block {
    map: Mapping,
    /// Kept until the block is sent to the peer of the link that uses it.
    object: Option<SharedMemory>,
}

impl Block {
    /// Makes a block of `class`, every page faulted in, sealed so that no
    /// one else can write it. Fails with [`io::ErrorKind::Unsupported`]
    /// where the kernel cannot seal it so.
    pub(crate) fn create(class: usize) -> io::Result<Self> {
        // Relaxed (load and store): a latch on its own; a thread that misses
        // it only tries the seal once more.
        if SEALING_REFUSED.load(Ordering::Relaxed) {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "pool blocks are disabled: this kernel cannot seal them against the receiver's writes",
            ));
        }
        let made = SharedMemory::create_sole_writer("ferry-block", class_size(class));
        if made
            .as_ref()
            .is_err_and(|e| e.kind() == io::ErrorKind::Unsupported)
        {
            SEALING_REFUSED.store(true, Ordering::Relaxed);
        }
        let (object, map) = made?;
        Ok(Self {
            map,
            object: Some(object),
        })
    }

    /// The block's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The memory object, to send to the peer once; `None` afterwards.
    pub(crate) fn take_object(&mut self) -> Option<SharedMemory> {
        self.object.take()
    }

    /// The block's bytes, to read back what this side wrote (no peer can
    /// have changed them: see the module comment).
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes alive as long as
        // `self`; no `&mut` slice of it exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.map.len()) }
    }

    /// The block's bytes, for the sender to write.
    ///
    /// The receiver may still read a block the sender has reallocated only if
    /// it broke the protocol (released it early); what it then sees is its
    /// own problem, never ours: it cannot write what we read back.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, alive as
        // long as `self`; `&mut self` makes this the only slice in this
        // process (see the module comment for the peer).
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr(), self.map.len()) }
    }
}

/// A block the peer made, mapped read-only here.
#[derive(Debug)]
pub(crate) struct PeerBlock {
    map: Mapping,
    /// Whether a view of it is alive here (so the peer may not reuse it).
    pub(crate) held: AtomicBool,
}

impl PeerBlock {
    /// Maps a block the peer sent, checking it is sealed and of its class's size.
    pub(crate) fn from_peer(
        fd: crate::base::sys::PeerFd,
        class: usize,
    ) -> Result<Self, crate::base::sys::MapError> {
        if class >= CLASSES {
            return Err(Violation::BlockClassOutOfRange.into());
        }
        let size = class_size(class);
        let object = SharedMemory::from_peer(fd, size, size, PeerAccess::ReadOnly)?;
        let map = object
            .map_with(Access::ReadOnlyView)
            .map_err(crate::base::sys::MapError::from_map_failure)?;
        Ok(Self {
            map,
            held: AtomicBool::new(false),
        })
    }

    /// The block's size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The first `len` bytes (`len <= self.len()`, checked).
    ///
    /// A hostile peer can change these bytes while they are read: callers
    /// that parse them copy them out first.
    pub(crate) fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= self.map.len(), "view past the end of a block");
        // SAFETY: `len` is within the mapping (asserted), which is readable
        // and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block's descriptor, as the peer would receive it, cannot be
    /// mapped writable; the sender's own mapping still writes, and what it
    /// writes is what a read-only view of the object shows.
    #[test]
    fn a_block_is_writable_only_by_its_maker() {
        let mut block = Block::create(0).expect("make a block");
        let object = block.take_object().expect("a new block's object");
        let refused = object
            .map_with(Access::Lazy)
            .expect_err("a writable mapping");
        // EPERM (the exact errno is checked in `sys`).
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied, "{refused}");
        block.bytes_mut()[..4].copy_from_slice(b"mine");
        let fd = crate::base::sys::PeerFd::new(object.fd().try_clone_to_owned().expect("dup"));
        let view = PeerBlock::from_peer(fd, 0).expect("the peer's read-only view");
        assert_eq!(view.bytes(4), b"mine");
        assert_eq!(block.bytes()[..4], *b"mine");
    }
}
