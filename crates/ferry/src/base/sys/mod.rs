//! The platform layer: the only code in ferry that makes system calls.
//!
//! # What a backend provides
//!
//! Every OS backend is one folder below this one, chosen by file (`linux/`;
//! `shell/` on every other target, which compiles and fails each call with
//! `ErrorKind::Unsupported`), and must provide the same items, built on the
//! shared types defined here (`Access`, `PeerAccess`, `Received`, `MapError`).
//! Linux is the first; macOS would map them to Mach memory entries and
//! kqueue, Windows to sections and wait-on-address:
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
//!   `private_wait(word, expected)` and `private_wake(word, n)` do the same
//!   for a word of this process's own memory (a pipe end's locks).
//! - **Control socket** (`linux/socket.rs`): a connected, message-preserving
//!   socket pair; `try_send` (bytes plus borrowed handles, never blocking)
//!   and `wait_writable(deadline)`, `try_recv` (bytes plus owned handles,
//!   never blocking); `peek` reading a record
//!   without taking it off the socket, and telling apart a record whose
//!   handles this process had no room for; `peer_hung_up` telling, without
//!   blocking, whether the peer's end is closed (which is how the death of a
//!   peer process is seen); `shutdown`.
//! - **Polling** (`linux/poller.rs`): a `Poller` (`new`, `add(fd, key,
//!   Interest)`, `delete(fd)`, `wait(keys, timeout)`, and `AsFd` so a poller
//!   can itself be polled) watching many descriptors for
//!   `Interest::HangUp` (a socket's peer closed, reported once, and woken by
//!   nothing else: records arriving do not wake it) or
//!   `Interest::Readable`, or a process handle for `Interest::Exited`
//!   (reported once). One thread per process sleeps in one on every
//!   link's socket and peer process, so peer death is pushed to waiters
//!   and an idle process makes no periodic wakeups.
//! - **Doorbells** (`linux/doorbell.rs`): `Doorbell::new()` making a
//!   waiting end (`clear`, `AsFd`: readable once rung, until cleared) and
//!   the `Ringer` that rings it (`ring`, `AsFd`), which a ring side waiting
//!   in a poll loop hands the other side; `Ringer::from_peer(fd)` adopting
//!   one a peer sent, refusing a descriptor that is not one. Neither ring
//!   nor clear may ever wait, whatever the peer does with its own copy.
//! - **CPUs** (`linux/cpu.rs`): `current_cpu`, `online_cpus`, `pin_to_cpu`,
//!   `yield_cpu` (the default wait needs only these, `current_cpu` from
//!   the vDSO), and, for the opt-in `Wait::Tuned` alone, what the
//!   scheduler may do with this thread: `may_run_on` (a CPU), `may_move`
//!   (more than one).
//! - **Processes** (`linux/process.rs`): `inherit_in_child` (make one socket
//!   survive `exec` in a spawned child), `parent_pid` (`None` when the
//!   parent is outside this process's pid namespace), `adopt_inherited`
//!   (a socket) and `adopt_inherited_pipe`, `duplicate` (a descriptor).
//! - **Peer processes** (`linux/peer.rs`): a `Process` handle (a pidfd on
//!   Linux), `Process::open(pid)` and `Process::of_peer(socket)` (the
//!   process at the other end of a connected socket), each `Ok(None)` where
//!   the OS has no such handle and `NotFound` when the process has already
//!   gone; `exited()` without blocking, and `AsFd` for a `Poller`
//!   (`Interest::Exited`). A link watches its peer process this way, so a
//!   peer cannot hide its death by making this process hold its end of the
//!   socket; without it, death is the socket's hang-up alone.
//!   `credentials(socket)` of a connected socket's peer (pid `None` when
//!   the peer is outside this pid namespace).
//! - **Threads** (`linux/thread.rs`): `spawn_quiet(name, stack, f)`
//!   starting one of ferry's own threads with every signal blocked in it
//!   from its first instruction, so a program's signals (taken with
//!   `signalfd` or `sigwait` in its own threads) never land on ferry's.
//! - **Limits** (`linux/rlimit.rs`): `descriptor_limit`, the soft limit on
//!   this process's descriptors (`None` where unknown or unlimited).
//! - **Named sockets** (`linux/listener.rs`): a `Listener` (`bind(name,
//!   backlog)` on a `SocketName`, reclaiming a socket file left by a
//!   listener that is gone and making a new one readable by its owner
//!   only; non-blocking `accept` with the client's `Credentials`),
//!   `connect(name, timeout)`, `effective_uid`, `random_bytes`, `wait_readable` over many
//!   descriptors, and `note_pipe`/`read_note`: a few bytes a spawned child
//!   reads once from an inherited pipe (by a deadline: `TimedOut` if the
//!   writer holds its end open; `InvalidData` for a descriptor that is not
//!   a pipe or a note too long).
//!
//! Shared by every backend (`closer.rs`): a `PeerFd` is a descriptor a
//! peer sent, which is never closed on the caller's thread (closing some
//! files waits, for as long as their sender likes): its drop hands it to
//! `close_later`, this process's closer threads. Whatever adopts a peer's
//! descriptor (`SharedMemory::from_peer`, `Ringer::from_peer`) takes a
//! `PeerFd` and keeps it as one, or closes it itself only once it has
//! checked it is of a kind whose close cannot wait (a memfd). A value that
//! may hold a peer's descriptors inside it (a socket with the peer's
//! records queued) is held in an `OffThread`: dropped, it is emptied
//! (`Emptied::empty_out`, which a backend's `ControlSocket` provides:
//! shut both ways, every queued record taken, `linux/drain.rs`), and
//! closed on the caller's thread only if that left nothing of the peer's
//! in it, else on the closer.
//!
//! Handles are `OwnedFd`/`BorrowedFd` from the first line; no raw descriptor
//! number travels through the rest of the crate, except as the decimal string
//! a spawned child reads from its environment.
use crate::base::wire::Violation;

// The backend, chosen by file: Linux, or a shell that compiles anywhere
// else and fails every call with `ErrorKind::Unsupported`.
#[cfg(target_os = "linux")]
#[path = "linux/mod.rs"]
mod backend;
#[cfg(not(target_os = "linux"))]
#[path = "shell/mod.rs"]
mod backend;

// Public for the benchmark (`crate::internals`); crate-private otherwise.
#[cfg(feature = "internals")]
pub use backend::cpu::pin_to_cpu;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub use backend::cpu::{current_cpu, online_cpus};
pub(crate) use backend::cpu::{may_move, may_run_on, yield_cpu};
pub(crate) use backend::doorbell::{Doorbell, Ringer};
pub(crate) use backend::futex::{futex_wait, futex_wake, private_wait, private_wake};
pub(crate) use backend::listener::{
    Listener, connect, effective_uid, note_pipe, random_bytes, read_note, wait_readable,
};
pub(crate) use backend::memory::{Mapping, SharedMemory, is_shortage};
pub(crate) use backend::peer::{Process, credentials};
pub(crate) use backend::poller::{Interest, Poller};
// Duplicating a descriptor: a typed descriptor field, a doorbell shared
// by async clones.
#[cfg(any(feature = "serde", feature = "tokio"))]
pub(crate) use backend::process::duplicate;
pub(crate) use backend::process::{
    adopt_inherited, adopt_inherited_pipe, inherit_in_child, parent_pid,
};
pub(crate) use backend::rlimit::descriptor_limit;
pub(crate) use backend::socket::{ControlSocket, socket_pair};
pub(crate) use backend::thread::spawn_quiet;
pub(crate) use closer::{Emptied, OffThread, PeerFd, close_all_later};

mod closer;

/// Who is at the other end of a connection, as the kernel saw it when the
/// connection was made (`SO_PEERCRED` on Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Credentials {
    /// The peer's process id, as this process's pid namespace numbers it;
    /// `None` when the peer is outside that namespace (a server in a
    /// container seeing a client of the host, a sandboxed client seeing
    /// its server), where the kernel cannot name it.
    pub pid: Option<u32>,
    /// The peer's effective user id.
    pub uid: u32,
    /// The peer's effective group id.
    pub gid: u32,
}

impl std::fmt::Display for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}")?,
            None => f.write_str("pid unknown (another pid namespace)")?,
        }
        write!(f, ", uid {}, gid {}", self.uid, self.gid)
    }
}

/// Where a listening socket is found.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SocketName<'a> {
    /// A name in the abstract namespace (Linux): no file, gone with its
    /// listener.
    Abstract(&'a [u8]),
    /// A socket file.
    Path(&'a std::path::Path),
}

impl std::fmt::Display for SocketName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Abstract(name) => write!(f, "@{}", String::from_utf8_lossy(name)),
            Self::Path(path) => write!(f, "{}", path.display()),
        }
    }
}

/// How a received object will be mapped, for the checks that keep the
/// mapping from failing for a reason the peer chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerAccess {
    /// Both sides write it (a pipe region, a release table): it must not be
    /// sealed against writes.
    Shared,
    /// This side only reads it (a pool block).
    ReadOnly,
}

/// How a `SharedMemory` object is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the shell makes none
pub(crate) enum Access {
    /// Readable and writable; pages are faulted in on first touch.
    Lazy,
    /// Readable and writable, every page faulted in now (`MAP_POPULATE`).
    Prefaulted,
    /// Read-only: writes through this mapping fault.
    ReadOnlyView,
}

/// What `ControlSocket::try_recv` or `peek` got.
#[derive(Debug)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))] // the shell makes none
pub(crate) enum Received {
    /// A record of `len` bytes and the descriptors that came with it.
    Record {
        len: usize,
        fds: Vec<std::os::fd::OwnedFd>,
        truncated: bool,
    },
    /// Nothing queued (non-blocking receive).
    Empty,
    /// A record is queued, but this process could not take its descriptors
    /// (it has run out of them); the record stays queued when peeked.
    NoRoom,
    /// The peer closed its end and everything it sent has been read.
    HungUp,
}

/// Why memory a peer sent could not be mapped.
#[derive(Debug)]
pub(crate) enum MapError {
    /// The peer sent something it must not (wrong size, unsealed, over budget).
    Violation(Violation),
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
            Self::Violation(Violation::Unmappable)
        }
    }
}

impl From<Violation> for MapError {
    fn from(why: Violation) -> Self {
        Self::Violation(why)
    }
}
