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

impl From<&'static str> for MapError {
    fn from(why: &'static str) -> Self {
        Self::Violation(why)
    }
}
