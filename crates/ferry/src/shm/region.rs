//! One pipe's region: a header, two ring control blocks, two data areas.
//!
//! ```text
//! 0       header (magic "FERRYPIP", version, ring capacity)   64 bytes
//! 256     Control of ring 0 (end 0 writes, end 1 reads)       256 bytes
//! 512     Control of ring 1 (end 1 writes, end 0 reads)       256 bytes
//! 4096    data of ring 0                                      capacity
//! 4096+c  data of ring 1                                      capacity
//! ```
//!
//! Soundness of the raw accesses: the mapping is exactly `4096 + 2c` bytes
//! (checked against the sealed object's size before mapping), the control
//! blocks are all atomics (valid for any bytes a peer writes) at 128-byte
//! aligned offsets of a page-aligned mapping, and the data areas are only
//! reached through the ring's checked raw-pointer copies.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use super::MapError;
use crate::ring::{CONTROL_SIZE, Control, Storage};
use crate::sys::{Mapping, SharedMemory};

const MAGIC: [u8; 8] = *b"FERRYPIP";
const VERSION: u32 = 1;
const CONTROL_AT: usize = 256;
const DATA_AT: usize = 4096;
/// Smallest ring capacity a region may have.
pub const MIN_CAPACITY: usize = 4096;
/// Largest ring capacity a region may have.
pub const MAX_CAPACITY: usize = 1 << 30;

/// The mapped memory of one pipe, shared by its two ends.
#[derive(Debug)]
pub struct Region {
    map: Mapping,
    capacity: usize,
    /// The memory object, kept only while this region may still be sent to
    /// another process; dropped once it has been, to keep descriptors few.
    object: Mutex<Option<SharedMemory>>,
}

impl Region {
    /// A new region whose two rings hold `capacity` bytes each.
    pub fn create(capacity: usize) -> io::Result<Arc<Self>> {
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "pipe capacity must be a power of two from {MIN_CAPACITY} to {MAX_CAPACITY} bytes, not {capacity}"
                ),
            ));
        }
        let object = SharedMemory::create("ferry-pipe", DATA_AT + 2 * capacity)?;
        let map = object.map()?;
        let mut header = [0u8; 16];
        header[..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[12..16].copy_from_slice(&(capacity as u32).to_le_bytes());
        // SAFETY: the mapping is at least 4096 bytes and fresh: no one else
        // sees it yet, and 16 bytes at offset 0 are inside it.
        unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), map.as_ptr(), header.len()) };
        Ok(Arc::new(Self {
            map,
            capacity,
            object: Mutex::new(Some(object)),
        }))
    }

    /// Maps a region a peer sent, checking its seals, size (at most
    /// `max_len` bytes: what the link's map budget has left) and header.
    /// The descriptor is closed before this returns. The ring positions
    /// inside are checked by the ring's sides when they adopt them
    /// (`Producer::new`, `Consumer::new`), on the values they then use.
    pub fn from_peer(fd: OwnedFd, max_len: usize) -> Result<Arc<Self>, MapError> {
        let largest = DATA_AT + 2 * MAX_CAPACITY;
        let smallest = DATA_AT + 2 * MIN_CAPACITY;
        let object = SharedMemory::from_peer(fd, smallest, largest)?;
        if object.len() > max_len {
            return Err(MapError::Violation(
                "peer's pipe regions exceed this link's map budget (PipeOptions::max_mapped)",
            ));
        }
        let map = object.map().map_err(MapError::Local)?;
        let mut header = [0u8; 16];
        // SAFETY: the mapping is at least DATA_AT bytes (size checked above,
        // and sealed so it cannot shrink); we copy 16 bytes out of it once.
        unsafe { std::ptr::copy_nonoverlapping(map.as_ptr(), header.as_mut_ptr(), header.len()) };
        let [m @ .., v0, v1, v2, v3, c0, c1, c2, c3] = header;
        if m != MAGIC || u32::from_le_bytes([v0, v1, v2, v3]) != VERSION {
            return Err("pipe region has a bad magic number or version".into());
        }
        let capacity = u32::from_le_bytes([c0, c1, c2, c3]) as usize;
        if !capacity.is_power_of_two()
            || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity)
            || object.len() != DATA_AT + 2 * capacity
        {
            return Err("pipe region's capacity does not match its size".into());
        }
        Ok(Arc::new(Self {
            map,
            capacity,
            object: Mutex::new(None),
        }))
    }

    /// Bytes mapped for this region.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Each ring's data capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Runs `f` with the region's memory object, if it may still be sent,
    /// and forgets the object afterwards (it can be sent once).
    pub fn take_object<R>(&self, f: impl FnOnce(BorrowedFd<'_>) -> R) -> Option<R> {
        let object = self
            .object
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        Some(f(object.fd()))
    }

    /// The control block of ring `index` (0 or 1).
    pub fn control(&self, index: usize) -> &Control {
        assert!(index < 2);
        let offset = CONTROL_AT + index * CONTROL_SIZE;
        debug_assert!(offset + CONTROL_SIZE <= DATA_AT && DATA_AT <= self.map.len());
        // SAFETY: in bounds, 128-byte aligned and valid for any bytes (see
        // the module comment); borrowed no longer than the mapping lives.
        unsafe { &*self.map.as_ptr().add(offset).cast::<Control>() }
    }

    /// Ring `index` (0 or 1) of this region.
    pub fn ring(self: &Arc<Self>, index: usize) -> RingView {
        assert!(index < 2);
        RingView {
            region: Arc::clone(self),
            index,
        }
    }
}

/// One of a region's two rings, as ring [`Storage`].
#[derive(Debug, Clone)]
pub struct RingView {
    region: Arc<Region>,
    index: usize,
}

// SAFETY: the control block sits at a 128-byte aligned offset inside the
// mapping (see the module comment) and is all atomics; the data area of
// `capacity` bytes lies inside the mapping, whose size was checked; both
// live as long as the `Arc<Region>` this view holds.
unsafe impl Storage for RingView {
    fn control(&self) -> &Control {
        self.region.control(self.index)
    }
    fn data(&self) -> *mut u8 {
        // SAFETY: DATA_AT + index * capacity + capacity <= the mapping's size.
        unsafe {
            self.region
                .map
                .as_ptr()
                .add(DATA_AT + self.index * self.region.capacity)
        }
    }
    fn capacity(&self) -> usize {
        self.region.capacity
    }
}
