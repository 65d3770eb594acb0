//! The release table: where a receiver hands pool blocks back.
//!
//! One table per link direction, made by the sending side and mapped by
//! both: slot `i` holds the generation of block `i` that the receiver last
//! released. The sender keeps its free list in its own private memory and
//! only *compares* a slot with the generation it expects, so whatever a
//! hostile receiver writes here can at worst keep a block from coming back;
//! it can never free a block twice or name memory out of bounds.
//!
//! Soundness: the mapping is exactly `SLOTS * 4` bytes of a sealed object,
//! page-aligned, and every slot is an `AtomicU32` (valid for any bytes).
#![allow(unsafe_code)]

use crate::base::sync::{AtomicU32, Ordering};
use std::io;

use crate::base::sys::{Mapping, PeerAccess, SharedMemory};

use crate::base::wire::pool::RELEASE_TABLE_LEN as TABLE_LEN;
pub(crate) use crate::base::wire::pool::SLOTS;
const _: () = assert!(TABLE_LEN == SLOTS * size_of::<AtomicU32>());

/// A release table, on either side.
#[derive(Debug)]
pub(crate) struct ReleaseTable {
    map: Mapping,
}

impl ReleaseTable {
    /// Makes a table; returns it and the object to send to the peer.
    pub(crate) fn create() -> io::Result<(Self, SharedMemory)> {
        let object = SharedMemory::create("ferry-release", TABLE_LEN)?;
        let map = object.map()?;
        Ok((Self { map }, object))
    }

    /// Maps a table the peer sent.
    pub(crate) fn from_peer(
        fd: crate::base::sys::PeerFd,
    ) -> Result<Self, crate::base::sys::MapError> {
        let object = SharedMemory::from_peer(fd, TABLE_LEN, TABLE_LEN, PeerAccess::Shared)?;
        let map = object
            .map()
            .map_err(crate::base::sys::MapError::from_map_failure)?;
        Ok(Self { map })
    }

    fn slot(&self, id: u32) -> Option<&AtomicU32> {
        let id = id as usize;
        if id >= SLOTS {
            return None;
        }
        // SAFETY: `id < SLOTS`, so the 4 bytes at `id * 4` lie inside the
        // mapping, 4-aligned (page-aligned base); any bytes are a valid
        // `AtomicU32`; the borrow lasts no longer than `self`'s mapping.
        Some(unsafe { &*self.map.as_ptr().cast::<AtomicU32>().add(id) })
    }

    /// Receiver: hands block `id` of generation `generation` back.
    pub(crate) fn release(&self, id: u32, generation: u32) {
        if let Some(slot) = self.slot(id) {
            // Release: pairs with the sender's Acquire in `is_released`; our
            // reads of the block happen before it may be rewritten.
            slot.store(generation, Ordering::Release);
        }
    }

    /// Sender: whether block `id` has been released at `generation`.
    pub(crate) fn is_released(&self, id: u32, generation: u32) -> bool {
        // Acquire: pairs with the receiver's Release store in `release`.
        self.slot(id)
            .is_some_and(|s| s.load(Ordering::Acquire) == generation)
    }
}
