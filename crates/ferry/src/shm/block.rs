//! Pool blocks: one sealed memory object per block, in power-of-two size
//! classes, and the mappings of them on either side of a link.
//!
//! Soundness of the raw accesses: every mapping covers exactly the sealed
//! object's size, so `ptr..ptr + len` stays mapped for the mapping's life;
//! the bytes are only reached through raw pointers or through slices whose
//! ownership the pool protocol gives to one side at a time (the sender
//! between allocation and commit, the receiver until it releases).
#![allow(unsafe_code)]

use std::io;

use crate::sys::{Access, Mapping, SharedMemory};

/// Number of size classes: 4 KiB << 0 ..= 4 KiB << 16 (256 MiB).
pub const CLASSES: usize = 17;
/// The smallest block.
pub const MIN_BLOCK: usize = 4096;

/// Bytes in a block of `class`.
pub const fn class_size(class: usize) -> usize {
    MIN_BLOCK << class
}

/// The smallest class holding `len` bytes, if any does.
pub fn class_for(len: usize) -> Option<usize> {
    let class = len.max(MIN_BLOCK).next_power_of_two().trailing_zeros() as usize - 12;
    (class < CLASSES).then_some(class)
}

/// A block this process made: mapped read-write and pre-faulted.
#[derive(Debug)]
pub struct Block {
    map: Mapping,
    /// Kept until the block is sent to the peer of the link that uses it.
    object: Option<SharedMemory>,
}

impl Block {
    /// Makes a block of `class`, every page faulted in.
    pub fn create(class: usize) -> io::Result<Self> {
        let object = SharedMemory::create("ferry-block", class_size(class))?;
        let map = object.map_with(Access::Prefaulted)?;
        Ok(Self {
            map,
            object: Some(object),
        })
    }

    /// The block's size in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The memory object, to send to the peer once; `None` afterwards.
    pub fn take_object(&mut self) -> Option<SharedMemory> {
        self.object.take()
    }

    /// The block's bytes, to read back what this side wrote.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is `len` readable bytes alive as long as
        // `self`; no `&mut` slice of it exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), self.map.len()) }
    }

    /// The block's bytes, for the sender to write.
    ///
    /// The receiver may still read a block the sender has reallocated only if
    /// it broke the protocol (released it early); what it then sees is its
    /// own problem, never ours, as we never read back what we wrote.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is `len` bytes, readable and writable, alive as
        // long as `self`; `&mut self` makes this the only slice in this
        // process (see the module comment for the peer).
        unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr(), self.map.len()) }
    }
}

/// A block the peer made, mapped read-only here.
#[derive(Debug)]
pub struct PeerBlock {
    map: Mapping,
    /// Whether a view of it is alive here (so the peer may not reuse it).
    pub(crate) held: std::sync::atomic::AtomicBool,
}

impl PeerBlock {
    /// Maps a block the peer sent, checking it is sealed and of its class's size.
    pub fn from_peer(fd: std::os::fd::OwnedFd, class: usize) -> Result<Self, super::MapError> {
        if class >= CLASSES {
            return Err("block class out of range".into());
        }
        let size = class_size(class);
        let object = SharedMemory::from_peer(fd, size, size)?;
        let map = object
            .map_with(Access::ReadOnlyView)
            .map_err(super::MapError::Local)?;
        Ok(Self {
            map,
            held: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The block's size in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The first `len` bytes (`len <= self.len()`, checked).
    ///
    /// A hostile peer can change these bytes while they are read: callers
    /// that parse them copy them out first.
    pub fn bytes(&self, len: usize) -> &[u8] {
        assert!(len <= self.map.len(), "view past the end of a block");
        // SAFETY: `len` is within the mapping (asserted), which is readable
        // and lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.as_ptr(), len) }
    }
}
