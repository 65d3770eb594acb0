//! The wire format: what the bytes in a ring frame, in a pipe region's
//! header and on the control socket mean. Everything is little-endian and
//! versioned, and every decoder here is a pure function that treats its
//! input as written by a hostile peer: it reads each field once, into
//! locals, checks it before anyone uses it, and never panics. Each decoder
//! has a fuzz target in `crates/ferry/fuzz/`.
//!
//! | file | what |
//! |---|---|
//! | `ring.rs` | a ring's frame header, and its control block's layout |
//! | `frame.rs` | a frame's tag, block reference, first-piece total, handle ids |
//! | `region.rs` | a pipe region's header and layout |
//! | `record.rs` | control-socket records |
//! | `route.rs` | control-socket records that move a pipe end's route (forwarding) |
//! | `pool.rs` | pool block classes and the release table |
//! | `bootstrap.rs` | the string a spawned child reads from its environment |
//! | `handshake.rs` | a client's opening to a named server, its refusal, and the note inviting a spawned child |
//! | `limits.rs` | what a sender never exceeds and a receiver refuses past |
//!
//! Shared-memory layouts are asserted at compile time where their structs
//! are declared (`ring/control.rs` against `ring.rs`).

pub mod bootstrap;
pub mod frame;
pub mod handshake;
pub mod limits;
pub mod pool;
pub mod record;
pub mod region;
pub mod ring;
pub mod route;
pub mod violation;

/// The version written into every frame tag and control record.
pub const VERSION: u8 = 1;

pub use limits::{FIRST_PIPE_ID, HANDLE_WINDOW, MAX_HANDLES, MAX_PENDING, MAX_PENDING_FDS};
pub use violation::Violation;
