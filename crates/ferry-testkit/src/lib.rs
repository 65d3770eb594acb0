//! What ferry's tests across processes share (not published).
//!
//! A test re-runs its own test binary as the peer process (`--exact <test>`,
//! with [`ROLE_ENV`] naming the part the child plays), as ipc-channel's
//! `src/test.rs` does. Every blocking test runs under a [`Watchdog`], so a
//! hang fails in seconds instead of at CI's time limit; every child is held
//! by a [`ChildGuard`], so a failing test leaves no process behind.
//!
//! - [`guard`]: [`Watchdog`], [`ChildGuard`] and how a child ended ([`Exit`]).
//! - [`role`](mod@role): the child's part, the command that re-runs the test binary,
//!   spawning it with a ferry pipe ([`this_test!`] names the running test).
//! - [`fds`]: counting this process's descriptors.
//! - [`data`]: seeded messages and checksums a parent and child agree on.
//! - [`clock`]: clocks that compare across processes, CPU time, peak memory.

pub mod clock;
pub mod data;
pub mod fds;
pub mod guard;
pub mod role;

pub use clock::{monotonic_ns, thread_cpu_time, vm_peak};
pub use data::{XorShift, checksum, mix, msg_u64, u64_msg};
pub use fds::{fd_count, fd_count_back_to, settled_fd_count};
pub use guard::{ChildGuard, Exit, Watchdog};
pub use role::{BOOTSTRAP_ENV, ROLE_ENV, child_command, role};
#[cfg(not(loom))]
pub use role::{child_pipe, spawn_child, spawn_command};

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

/// Whole seconds, for readable limits.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Serializes the tests of one binary that must not share the machine with
/// each other (descriptor counts, latency measurements).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
