//! The wire format: what the bytes in a ring frame, in a pipe region's
//! header and on the control socket mean. Everything is little-endian and
//! versioned, and every decoder here is a pure function that treats its
//! input as written by a hostile peer: it reads each field once, into
//! locals, checks it before anyone uses it, and never panics. Each decoder
//! has a fuzz target in `crates/ferry/fuzz/`.

pub mod bootstrap;
pub mod frame;
pub mod limits;
pub mod record;
pub mod region;

/// The version written into every frame tag and control record.
pub const VERSION: u8 = 1;

pub use limits::{FIRST_PIPE_ID, HANDLE_WINDOW, MAX_HANDLES, MAX_PENDING};
