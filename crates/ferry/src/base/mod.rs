//! The base: what the transport stands on, none of it shared with a peer
//! as state. The wire format (`wire`: layouts, records, their checks),
//! atomics (`sync`), the operating system (`sys`: every system call and
//! every unsafe contact with the kernel), the crate's one lock (`lock`,
//! sleeping through `sys`'s futex), and byte copies (`memcopy`).
//!
//! Declared in layer order, as the crate root declares the tiers: each
//! module uses only those declared before it (`.ci/layers` checks it).

// Public but hidden: pure functions over bytes, for the fuzz targets.
#[doc(hidden)]
pub mod wire;

pub(crate) mod sync;

#[cfg(not(loom))]
pub(crate) mod sys;

#[cfg(not(loom))]
pub(crate) mod lock;

pub(crate) mod memcopy;
