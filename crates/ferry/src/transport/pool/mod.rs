//! The block pool: shared-memory blocks that carry large messages out of
//! line, their classes, the ledger of who holds which, and the map budget.
//!
//! Inside shared memory everything is named by offsets or small ids, never
//! pointers, and everything read from it is checked before use.

#[cfg(not(loom))]
pub(crate) mod block;
#[cfg(not(loom))]
pub(crate) mod budget;
#[cfg(loom)]
pub mod ledger;
#[cfg(not(loom))]
pub(crate) mod ledger;
#[cfg(not(loom))]
pub(crate) mod per_link;
#[cfg(not(loom))]
pub(crate) mod release;
#[cfg(loom)]
pub mod reserve;
#[cfg(not(loom))]
pub(crate) mod reserve;
