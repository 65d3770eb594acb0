//! ferry's C ABI: `libferry.so.0`/`libferry.a` and `include/ferry.h`.
//!
//! - `abi.rs`: every exported function (the header is made from it);
//! - `raw.rs`: the caller's pointers made safe to use (all the crate's
//!   unsafe code but the exports themselves);
//! - `status.rs`: the status namespace, the thread's last error, and the
//!   guard that keeps panics on this side;
//! - `pipe.rs`, `message.rs`, `loan.rs`, `server.rs`, `child.rs`: what
//!   the handles are and do;
//! - `options.rs`: the versioned option structs.
//!
//! Build and install: `crates/ferry-c/install.sh PREFIX`; the C tests and
//! examples are in `tests/c/` and `examples/`, run by `cargo test`
//! (`tests/c.rs`).

pub mod abi;
mod child;
mod loan;
mod message;
mod options;
mod pipe;
mod raw;
mod server;
mod status;

pub use child::ferry_child;
pub use loan::ferry_loan;
pub use message::ferry_message;
pub use options::ferry_pipe_options;
pub use pipe::ferry_pipe;
pub use server::{ferry_credentials, ferry_server};
pub use status::ferry_status;

/// A handle for a pipe end made in Rust, for a Rust program that hands it
/// to C code (or drives the C ABI itself, as the benchmark does): freed by
/// `ferry_pipe_close`.
pub fn ferry_pipe_from(pipe: ferry::Pipe) -> *mut ferry_pipe {
    raw::into_handle(ferry_pipe::new(pipe))
}
