//! What users hold: byte pipes and channels (`channel`: `Pipe`, `Sender`,
//! `Receiver`, `Select`, the tokio types), the encoding of typed values
//! (`codec`), typed channels (`typed`), and how processes meet
//! (`bootstrap`: spawning, the named server, connecting).
//!
//! Declared in layer order: each module uses only those declared before
//! it, the transport and the base (`.ci/layers` checks it).

pub(crate) mod channel;

#[cfg(feature = "serde")]
pub(crate) mod codec;

#[cfg(feature = "serde")]
pub mod typed;

pub(crate) mod bootstrap;
