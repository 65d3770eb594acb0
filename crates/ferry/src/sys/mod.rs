//! The platform layer: the only code in ferry that makes system calls.
//!
//! # What a backend provides
//!
//! Every OS backend is one folder below this one, chosen by file, and must
//! provide the same items (Linux is the first; macOS would map them to Mach
//! memory entries and kqueue, Windows to sections and wait-on-address):
//!
//! - **Memory** (`linux/memory.rs`): `SharedMemory::create(name, len)`
//!   making an anonymous shared-memory object of fixed size that every holder
//!   may map writable (pipe regions, release tables);
//!   `SharedMemory::create_sole_writer(name, len)` making one together with
//!   the only mapping through which it can ever be written (pool blocks):
//!   whoever the handle is given to, this process included, can read and map
//!   it but not write it, nor map it writable and shared, nor make a
//!   read-only mapping of it writable; a private copy-on-write mapping may be
//!   allowed, as its writes never reach the object. A backend that cannot
//!   promise this must fail with `ErrorKind::Unsupported` (Linux seals with
//!   `F_SEAL_FUTURE_WRITE`, 5.1 and later; Mach and Windows would hand the
//!   peer a read-only memory entry or section handle instead).
//!   `SharedMemory::from_peer` adopting an object received from a peer after
//!   checking it is of fixed size within bounds; `map_with(Access)` mapping
//!   it (read-write, pre-faulted, or read-only), a `Mapping` unmapping on
//!   drop. What a sole-writer object does *not* protect against: its maker
//!   may change it at any time while a peer reads it, so a receiver copies
//!   before it validates.
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
pub(crate) use linux::memory::{Access, Mapping, PeerAccess, SharedMemory, is_shortage};
pub(crate) use linux::process::{adopt_inherited, inherit_in_child, parent_pid};
pub(crate) use linux::socket::{ControlSocket, Received, socket_pair};

/// Why memory a peer sent could not be mapped.
#[derive(Debug)]
pub(crate) enum MapError {
    /// The peer sent something it must not (wrong size, unsealed, over budget).
    Violation(&'static str),
    /// This process could not map it (out of memory or address space); the
    /// peer did nothing wrong.
    Local(std::io::Error),
}

impl MapError {
    /// What a failed `mmap` of a peer's (checked) object says: this
    /// process's shortage of memory, address space or mappings is local;
    /// anything else (a mapping the object refuses) is the peer's doing.
    pub(crate) fn from_map_failure(e: std::io::Error) -> Self {
        if is_shortage(&e) {
            Self::Local(e)
        } else {
            Self::Violation("the peer's shared memory could not be mapped")
        }
    }
}

impl From<&'static str> for MapError {
    fn from(why: &'static str) -> Self {
        Self::Violation(why)
    }
}
