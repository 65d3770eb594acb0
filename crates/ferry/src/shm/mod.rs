//! Shared memory: pipe regions, and the block pool for large messages.
//!
//! Inside shared memory everything is named by offsets or small ids, never
//! pointers, and everything read from it is checked before use.

#[cfg(not(loom))]
pub mod block;
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
