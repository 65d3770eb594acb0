//! Shared memory: pipe regions, and the block pool for large messages.
//!
//! Inside shared memory everything is named by offsets or small ids, never
//! pointers, and everything read from it is checked before use.

#[cfg(not(loom))]
pub mod block;
#[cfg(not(loom))]
pub mod budget;
pub mod ledger;
#[cfg(not(loom))]
pub mod pool;
#[cfg(not(loom))]
pub mod region;
#[cfg(not(loom))]
pub mod release;
pub mod reserve;

#[cfg(not(loom))]
pub use region::{Region, RingView};

/// Why memory a peer sent could not be mapped.
#[derive(Debug)]
pub enum MapError {
    /// The peer sent something it must not (wrong size, unsealed, over budget).
    Violation(&'static str),
    /// This process could not map it (out of memory or address space); the
    /// peer did nothing wrong.
    Local(std::io::Error),
}

impl MapError {
    /// What a failed `mmap` of a peer's (checked) object says: this
    /// process's shortage of memory, address space or mappings is local;
    /// anything else (a mapping the object refuses) is the peer's doing.
    pub fn from_map_failure(e: std::io::Error) -> Self {
        if crate::sys::is_shortage(&e) {
            Self::Local(e)
        } else {
            Self::Violation("the peer's shared memory could not be mapped")
        }
    }
}

impl From<&'static str> for MapError {
    fn from(why: &'static str) -> Self {
        Self::Violation(why)
    }
}
