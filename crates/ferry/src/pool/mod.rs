//! The block pool: shared-memory blocks that carry large messages out of
//! line, their classes, the ledger of who holds which, and the map budget.
//!
//! Inside shared memory everything is named by offsets or small ids, never
//! pointers, and everything read from it is checked before use.

#[cfg(not(loom))]
pub mod block;
#[cfg(not(loom))]
pub mod budget;
pub mod ledger;
#[cfg(not(loom))]
pub mod per_link;
#[cfg(not(loom))]
pub mod release;
pub mod reserve;
