//! The platform layer: the only code in ferry that makes system calls.
//!
//! # What a backend provides
//!
//! Every OS backend is one folder below this one, chosen by file, and must
//! provide the same items (Linux is the first; macOS would map them to Mach
//! memory entries and kqueue, Windows to sections and wait-on-address):
//!
//! - **Memory** (`linux/memory.rs`): `SharedMemory::create(len)` making an
//!   anonymous, sealed (fixed-size) shared-memory object; `Mapping` mapping it
//!   read-write into this process and unmapping on drop; `validate_sealed`
//!   checking an object received from a peer.
//! - **Wait words** (`linux/futex.rs`): `futex_wait(word, expected, timeout)`
//!   sleeping while a shared 32-bit word holds `expected`, and
//!   `futex_wake(word, n)`. Both must work across processes.
//! - **Control socket** (`linux/socket.rs`): a connected, message-preserving
//!   socket pair; `send_with_fds`/`recv_with_fds` carrying bytes plus owned
//!   handles, never blocking past a deadline; `peek` reading a record
//!   without taking it off the socket, and telling apart a record whose
//!   handles this process had no room for; `peer_hung_up` telling, without
//!   blocking, whether the peer's end is closed (which is how the death of a
//!   peer process is seen); `shutdown`.
//! - **CPUs** (`linux/cpu.rs`): `current_cpu`, `online_cpus`, `pin_to_cpu`,
//!   `yield_cpu`.
//! - **Processes** (`linux/process.rs`): `inherit_in_child` (make one socket
//!   survive `exec` in a spawned child), `parent_pid`, `adopt_inherited`.
//!
//! Handles are `OwnedFd`/`BorrowedFd` from the first line; no raw descriptor
//! number travels through the rest of the crate, except as the decimal string
//! a spawned child reads from its environment.

pub(crate) mod linux;

pub(crate) use linux::cpu::yield_cpu;
pub use linux::cpu::{current_cpu, online_cpus, pin_to_cpu};
pub(crate) use linux::futex::{futex_wait, futex_wake};
pub(crate) use linux::memory::{Access, Mapping, SharedMemory};
pub(crate) use linux::process::{adopt_inherited, inherit_in_child, parent_pid};
pub(crate) use linux::socket::{ControlSocket, Received, socket_pair};
