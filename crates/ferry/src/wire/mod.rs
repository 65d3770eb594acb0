//! The wire format: what the bytes in a ring frame and on the control
//! socket mean. Everything is little-endian and versioned, and every decoder
//! here treats its input as written by a hostile peer: it reads each field
//! once, into locals, and checks it before anyone uses it.

pub mod bootstrap;
pub mod frame;
pub mod record;

/// The version written into every frame tag and control record.
pub const VERSION: u8 = 1;
