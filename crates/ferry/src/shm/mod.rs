//! Shared memory: pipe regions, and the block pool for large messages.
//!
//! Inside shared memory everything is named by offsets or small ids, never
//! pointers, and everything read from it is checked before use.

pub mod block;
pub mod ledger;
pub mod pool;
pub mod region;
pub mod release;
pub mod reserve;

pub use region::{Region, RingView};
