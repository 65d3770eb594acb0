//! The transport: how bytes cross between two processes. The wait
//! (`wait`: one mechanism, the policies that steer it), the ring (`ring`:
//! frames in shared memory, the wait/wake protocol), the pool (`pool`:
//! shared blocks for large messages) and the link (`link`: the one
//! control socket two processes share, and the watcher of its peer).
//!
//! Declared in layer order: each module uses only those declared before
//! it and the base (`.ci/layers` checks it). The ring and the pool use
//! neither the other today, but the check allows the pool, declared
//! after it, to use the ring.

// The wait's mechanism and policies: public, hidden, only for loom.
#[cfg(loom)]
#[doc(hidden)]
pub mod wait;
#[cfg(not(loom))]
pub(crate) mod wait;

// The ring is public, hidden, only for loom, the fuzz targets and the
// ring's own benchmarks (feature `internals`).
#[cfg(any(loom, feature = "internals"))]
#[doc(hidden)]
pub mod ring;
#[cfg(not(any(loom, feature = "internals")))]
pub(crate) mod ring;

#[cfg(loom)]
pub mod pool;
#[cfg(not(loom))]
pub(crate) mod pool;

#[cfg(not(loom))]
pub(crate) mod link;
