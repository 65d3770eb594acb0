//! ferry moves messages between processes on one machine, through shared
//! memory, and stays sound when the other process is buggy, dead or hostile.
//!
//! ```
//! let (a, b) = ferry::pipe()?;
//! a.send(b"hello")?;
//! assert_eq!(b.recv()?, b"hello");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Words
//!
//! Each word names one thing:
//!
//! | word | means |
//! |---|---|
//! | **channel** | one way: a [`Sender`] and a [`Receiver`], connected. [`channel`] for typed values, [`bytes::channel`] for byte messages |
//! | **pipe** | two ways: each [`Pipe`] (an *end*) is a sender and a receiver; [`pipe()`] makes both ends, [`spawn()`] and [`connect`] put one in another process |
//! | **sender**, **receiver** | the two halves; a pipe end has one of each ([`Pipe::sender`], [`Pipe::receiver`], [`Pipe::split`]). Senders clone |
//! | **capacity** | how many messages a sender may have in flight (sent, not yet received) before it waits |
//! | **ring size** | the bytes a direction's shared-memory ring holds ([`PipeOptions::ring_size`]), a second bound |
//! | **handle** | what travels inside a message besides its bytes: a pipe end, a half, a descriptor ([`Handle`]) |
//! | **link** | the one socket between two processes that all their pipes share |
//! | **loan** | a message written in place, then sent ([`Sender::loan`]) |
//! | **view** | a received message read where it lies ([`SharedBytes`], [`Receiver::recv_shared`]) |
//! | **disconnected** | the peer is gone (or broke the rules); every error says so with `is_disconnected()` |
//!
//! Every call comes in three forms: the plain one waits as long as it
//! takes, `try_` never waits, `_timeout` waits until a deadline. Setters
//! are `set_*(&self, …)` on a handle, and builder methods of the same name
//! without `set_` on [`PipeOptions`] and [`ServerOptions`].
//!
//! # Coming from crossbeam or ipc-channel
//!
//! | crossbeam-channel | ipc-channel | ferry |
//! |---|---|---|
//! | `bounded(n)` | `ipc::channel()` | [`channel::<T>(n)`](channel) (typed), [`bytes::channel(n)`](bytes::channel) |
//! | `Sender: Clone` | `IpcSender: Clone` | [`Sender: Clone`](typed::Sender) (clones in one process; each keeps its order) |
//! | `send`, `try_send`, `send_timeout` | `send` | the same three, and the value comes back in the error ([`typed::TrySendError::into_inner`]) |
//! | `recv`, `try_recv`, `recv_timeout`, `iter` | `recv`, `try_recv`, `try_recv_timeout` | `recv`, `try_recv`, `recv_timeout`, [`iter`](typed::Receiver::iter) |
//! | `Select` | `IpcReceiverSet` | [`Select`] (owns its members, by [`Key`]; `remove`) |
//! | — | `IpcOneShotServer` | [`Server`] and [`connect`] (by name, many clients, with credentials) |
//! | — | `IpcSharedMemory` | [`Sender::loan`] and [`SharedBytes`] (pool blocks, sealed) |
//! | — | a sender inside a message | a typed half inside a value, or [`Sender::send_with`] |
//! | `SendError(T)` | `IpcError::Disconnected` | [`typed::SendError::Disconnected`]`(T)`; `Protocol` when the peer broke the rules |
//!
//! Differences to know: a channel's halves may be in one process or two,
//! and move between them inside messages (a half whose other side is in
//! another process is forwarded: see [`Sender::send_with`]); a sender that has clones does
//! not travel yet (its clones would be left behind); a receive may say
//! `Protocol` (the peer broke the rules: that link is shut down) or `Io`
//! (this process is short of descriptors or memory: nothing was lost).
//!
//! # Concepts
//!
//! - A [`Pipe`] is one end of a bidirectional, bounded message pipe. Make
//!   both ends in one process with [`pipe()`], or start a child process that
//!   holds the other end with [`spawn()`] (the child calls
//!   [`Pipe::from_parent`]).
//! - Pipe ends travel to the peer process inside messages
//!   ([`Sender::send_with`], [`Receiver::recv_with`]); all pipes between two
//!   processes share one *link* (one socket), so descriptors grow with peer
//!   processes, not with pipes.
//! - File descriptors travel inside messages too ([`Handle::Fd`], received in
//!   [`Message::fds`]; in typed messages, [`typed::Fd`]). A receiver that
//!   cannot pass them on (a bridge to another machine) says it takes
//!   bytes only ([`Receiver::set_bytes_only`]): a send of handles to it
//!   then fails with `NotTransferable` and hands them back.
//! - Unrelated processes meet at a named [`Server`]: [`connect`] gives a
//!   pipe to it, [`Server::accept`] each client's pipe with its
//!   [`Credentials`]. Only the server's own user is accepted unless a
//!   policy says otherwise ([`ServerOptions::allow`]); a server may ask for
//!   a [`Token`], which it hands to the children it starts
//!   ([`Server::spawn`], [`connect_invited`]).
//! - Each end chooses how it waits ([`Wait`]): sleep at once, spin, or the
//!   default: spin while the peer works on another CPU, yield to it on
//!   this one, and sleep once it sleeps too.
//! - When the peer process exits or is killed, every call on its pipes
//!   returns [`RecvError::Disconnected`] or [`SendError::Disconnected`]
//!   within milliseconds, after every message it fully sent is delivered.
//!   The kernel pushes the death: one thread per process (`ferry-watch`)
//!   sleeps on every link's socket and peer process (a pidfd) and wakes
//!   only when a peer hangs up or exits, so a blocked wait sleeps without
//!   a timeout and an idle pipe makes no wakeups at all. Watching the
//!   process means a peer cannot hide its death by sending this process
//!   its own end of the socket; it also means the peer *is* that process:
//!   the child [`spawn()`] started (not a grandchild a wrapper leaves
//!   behind), the parent, the client that connected, the server process
//!   that listened. A server that binds, then forks and exits, is gone for
//!   its clients. (Without pidfds, before Linux 6.5 for a named server's
//!   links and 5.3 for spawned ones, the socket's hang-up alone tells.)
//! - Peers in different pid namespaces (a sandboxed client, a server in a
//!   container) connect as any others; a peer's pid that this process's
//!   namespace cannot name is `None` in its [`Credentials`].
//!
//! # Waiting on many pipes
//!
//! A [`Select`] owns a set of receivers (byte and typed alike) and
//! servers, each under a [`Key`] it keeps until it is removed, and waits
//! on all of them at once: [`Select::ready`] returns the key of one on
//! which a call would not wait (a *whole* message to receive, a client to
//! accept, or the peer gone: an event, reported until a receive has
//! returned it, then never again), in turn so none starves. Members come
//! and go ([`Select::add`], [`Select::remove`]), so one thread with one
//! set can serve clients from a [`Server`] and workers over typed
//! channels. [`Receiver::ready_fd`] (and
//! [`typed::Receiver::ready_fd`], [`Server::ready_fd`]) gives a
//! descriptor that becomes readable when a receiver may have a message,
//! for an epoll/mio/poll loop of your own ([`Sender::ready_fd`]: when a
//! full pipe may have room). With the `tokio` feature,
//! `Receiver::into_async` and `Sender::into_async` give an
//! `AsyncReceiver` (`recv().await`, a `Stream`) and an `AsyncSender`
//! (`send().await`, a `Sink`) that sleep in tokio's own reactor: no helper
//! thread, no unbounded queue. Each is a *doorbell*: a datagram socket the waiting
//! side hands the other side, which sends a byte through it after changing the ring only
//! while the waiter says it waits that way, so the sender pays nothing when
//! no one waits by descriptor.
//!
//! ```
//! let (a, b) = ferry::pipe()?;
//! let (tx, rx) = ferry::channel::<String>(16).unwrap();
//! let mut select = ferry::Select::new()?;
//! let (_, bytes) = b.split();
//! let from_a = select.add(bytes)?;
//! let from_tx = select.add(rx)?;
//! tx.send("typed".into())?;
//! assert_eq!(select.ready()?, from_tx);
//! let rx = select.get::<ferry::typed::Receiver<String>>(from_tx).expect("there");
//! assert_eq!(rx.try_recv()?, "typed");
//! drop(a);
//! assert_eq!(select.ready()?, from_a); // the peer went: an event
//! let bytes = select.remove::<ferry::Receiver>(from_a).expect("there");
//! assert!(matches!(bytes.try_recv(), Err(ferry::TryRecvError::Disconnected)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//! - A peer that breaks the wire rules gets its link shut down, and calls
//!   return a `Protocol` error; ferry never panics or reads out of bounds
//!   because of what a peer wrote.
//!
//! # Large messages
//!
//! Between processes, a message of at least [`OUT_OF_LINE`] bytes (64 KiB)
//! travels out of line: its payload goes into a shared-memory block from
//! the link's pool (mapped once, pre-faulted by a background helper, reused
//! for many messages) and the ring carries a 16-byte descriptor. Smaller
//! messages are copied through the ring. [`Sender::loan`] and
//! [`Receiver::recv_shared`] write and read such a block in place, without the
//! copies (a loan from [`LOAN_IN_PLACE`] bytes, 16 KiB: below that a copy
//! through the ring is cheaper than a block). [`Sender::send_in_place`] and
//! [`Receiver::recv_in_place`] lend a closure a message of any size where it
//! lies: in the ring below the out-of-line threshold (no copy, no buffer),
//! in a block above it. The threshold is where round trips through a block
//! stopped losing to round trips through the ring on the machines ferry is
//! built on (`docs/notes/2026-11-27-measurements.md`, "Out of line").
//!
//! A link direction keeps at most 8 MiB of one block size in flight (4 to
//! 64 blocks) and 64 MiB in all ([`PipeOptions::pool_cap`]): a sender that
//! runs further ahead of its receiver waits for a block to come back (at
//! most 2 ms, then it sends through the ring), since its blocks would only
//! leave the cache before they are read. [`pool_stats`] tells where blocks
//! came from (made in the background, made on a sender's path, or reused).
//!
//! # A hostile or failing peer
//!
//! ferry is built for a privileged process talking to processes it does not
//! trust (a browser and its renderers, a host and its plugins). A peer may
//! write anything into the shared memory of the pipes it holds and send
//! anything over its link's socket; the rule (ipcz's) is that this reaches
//! only those pipes: never this process's memory, its other links, its
//! liveness, or more than a bounded share of its CPU.
//!
//! - Every position, length, id and descriptor a peer sends is checked once,
//!   on a private copy, before use; a violation is a
//!   [`RecvError::Protocol`]/[`SendError::Protocol`] and closes that link.
//! - What a peer can make this process hold is bounded before anything is
//!   allocated or mapped: messages ([`PipeOptions::max_message`]), pipe ends
//!   and descriptors per message ([`MAX_HANDLES`], the kernel's limit),
//!   descriptors sent ahead of their message (for all peers together at
//!   most half of this process's soft `RLIMIT_NOFILE`, and per link a
//!   quarter of that, at most 256; past it a receive reports a local `Io`
//!   error and the rest waits on the socket), ends sent ahead of
//!   their message (4,096 per link; a sender keeps at most
//!   [`HANDLE_WINDOW`] per pipe in flight), mapped memory per link
//!   ([`PipeOptions::max_mapped`], regions and blocks together), pool
//!   blocks ([`PipeOptions::pool_cap`]).
//! - `try_` calls never wait and `_timeout` calls return by their deadline,
//!   whatever the peer publishes: a call handles a bounded number of frames
//!   and records past its deadline, and the control socket is written
//!   without blocking past it.
//! - A peer that rings this process's futex in a loop makes a sleeper back
//!   off (to at most a few hundred wakes per second), not spin.
//! - No call waits for the close of a descriptor a peer sent (closing a
//!   lingering socket or a FUSE file can take as long as the peer likes):
//!   those that are refused or never reach the application are closed by
//!   a few background threads (`ferry-close`).
//! - Pool blocks are sealed (`F_SEAL_FUTURE_WRITE`) once their sender has
//!   mapped them: a receiver can read a block, never write it. A sender can
//!   still change its own block while the receiver reads it (see
//!   [`SharedBytes`]).
//! - This process's own shortages (out of descriptors or address space) are
//!   [`RecvError::Io`]/[`SendError::Io`], never blamed on the peer; the
//!   record that could not be taken stays queued for a later call.
//! - Once a call has seen the peer gone, every later call on that end says
//!   [`RecvError::Disconnected`]/[`SendError::Disconnected`] (after the
//!   messages already queued are received).
//!
//! # Threads, signals and sandboxes
//!
//! ferry starts a few threads of its own, each once it is first needed,
//! each with every signal blocked from its first instruction (so a
//! program that takes its signals with `signalfd` or `sigwait`, blocking
//! them in its own threads, never has one land on ferry's):
//!
//! | thread | how many | started | does |
//! |---|---|---|---|
//! | `ferry-watch` | one per process | by the first link (a spawn, a connect, an accept, a pipe end received) | sleeps in `epoll_pwait` on every link's socket and peer process (a pidfd), and wakes only when a peer hangs up or exits |
//! | `ferry-pool` | one per process, where more than one CPU is online | by the first large message | maps and pre-faults pool blocks ahead of need, and sleeps while there are enough |
//! | `ferry-close` | at most 4 per process | when a descriptor a peer sent must be closed (refused, or never reaching the application) | closes it (a close may wait as long as the peer likes), then sleeps |
//! | `ferry-forward` | one per typed half that leaves this process with values still queued for it | by that move | encodes and sends the queued values after it, then ends |
//!
//! No user code runs on these threads, except the `Serialize` of the
//! values a `ferry-forward` thread sends.
//!
//! **Under a seccomp filter**, a process using ferry makes these system
//! calls (x86-64 names; glibc's and the standard library's own, such as
//! thread start, are not listed): `memfd_create`, `ftruncate`, `fcntl`
//! (seals, `FD_CLOEXEC`, duplicating), `fstat`, `fstatfs`, `mmap`,
//! `munmap`, `mprotect`, `madvise`, `futex`, `socketpair`, `sendmsg`,
//! `recvmsg`, `sendto`, `recvfrom`, `getsockopt`, `setsockopt`,
//! `shutdown`, `close`, `ppoll`, `epoll_create1`, `epoll_ctl`,
//! `epoll_pwait`, `pidfd_open`, `sched_yield`, `sched_getaffinity`,
//! `clock_nanosleep`, `prlimit64`, `getrandom`, `rt_sigprocmask`; a named
//! server and its clients add `socket`, `bind`, `listen`, `accept4`,
//! `connect`, `statx`/`newfstatat`, `unlink`, `fchmodat`, `geteuid`;
//! [`spawn()`] and an invited child add `pipe2`, `read`, `write`,
//! `getppid` (and the process start itself: `clone`, `execve`). The list
//! was taken with `strace -f` over the transfer, server, pool, select and
//! descriptor tests. A waiting thread itself makes only `futex`,
//! `sched_yield` and (every 20 ms of spinning) a look at the peer
//! (`tests/wait_syscalls.rs` holds the default wait to that); it reads this
//! thread's CPU through the vDSO. `sched_getaffinity` is asked only by
//! the opt-in `Wait::Tuned`.
//!
//! # Errors
//!
//! One error type per call (`SendError`, `TrySendError`, `SendTimeoutError`
//! and the receive forms, for byte pipes at the crate root and for typed
//! channels in [`typed`]), each naming what went wrong:
//!
//! - **A typed send hands its value back** on every failure:
//!   [`typed::TrySendError::Full`], `Disconnected` and `Failed` each hold
//!   it, and `into_inner()` returns it (a byte send borrows its bytes, so
//!   the caller has them still). A typed sender inside the value that was
//!   taken to travel is put back, so it still sends (a typed receiver
//!   inside it is not yet: it comes back moved, and reports
//!   `Disconnected`).
//! - **`is_disconnected()` on every error answers "is the peer gone?"**:
//!   true for `Disconnected`, and for `Protocol` too (the peer broke the
//!   rules and the link it used is shut down, so nothing more goes through
//!   it; match the variant to tell the two apart); false for everything
//!   else (`Full`, `Timeout`, `Empty`, a local `Io` shortage, a value that
//!   does not encode or decode). [`ConnectError`] answers it for a server
//!   that is not there or went away, [`BootstrapError`] for a parent that
//!   broke the rules.
//! - **The peer's fault and this process's are told apart**: `Protocol`
//!   blames the peer, `Io` is this process's own shortage.
//!
//! ```
//! let (tx, rx) = ferry::channel::<String>(16).unwrap();
//! drop(rx);
//! let e = tx.try_send("not lost".to_string()).unwrap_err();
//! assert!(e.is_disconnected());
//! assert_eq!(e.into_inner(), "not lost");
//! ```
//!
//! # Layers
//!
//! The source is three tiers of folders, each a stack of layers:
//! `src/base` (what everything stands on: the wire format, atomics,
//! system calls, the lock), `src/transport` (how bytes cross: the wait,
//! the ring, the pool, the link) and `src/api` (what users hold: pipes
//! and channels, typed channels, spawning and the named server). The
//! order is written once, in the code: this file declares the tiers and
//! each tier's `mod.rs` its layers, bottom first; a layer uses only those
//! declared before it, always by its full path (`crate::base::wire`),
//! and `.ci/layers` checks it from those declarations.
//!
//! # Portability
//!
//! Linux only for now: memfd, futex, `SOCK_SEQPACKET` and `SCM_RIGHTS`.
//! `src/base/sys` documents what another OS backend must provide.
#![warn(missing_docs, unreachable_pub, missing_debug_implementations)]

// The three tiers, in layer order (see "Layers" above): each module
// uses only what is declared before it.
// What the transport stands on: the wire format, atomics, system calls,
// the lock, byte copies.
mod base;

// How bytes cross: the wait, the ring, the pool, the link.
mod transport;

// What users hold: pipes and channels, typed channels, spawning and the
// named server.
#[cfg(not(loom))]
mod api;

// Modules public for the fuzz targets, loom and the benchmark (hidden).
#[cfg(all(feature = "fuzzing", not(loom)))]
pub use api::channel::fuzzing;
#[cfg(all(feature = "serde", not(loom)))]
pub use api::typed;
pub use base::wire;
#[cfg(any(loom, feature = "internals"))]
pub use transport::ring;
#[cfg(loom)]
pub use transport::{pool, wait};

/// Hidden, behind the `internals` feature: what the benchmark and the
/// bindings need of the layers below the public surface (which CPU a
/// thread runs on, pinning it there, a thread that takes no signals).
#[cfg(all(feature = "internals", not(loom)))]
#[doc(hidden)]
pub mod internals {
    pub use crate::base::sys::{current_cpu, online_cpus, pin_to_cpu};

    /// Starts a thread with every signal blocked in it, as ferry's own
    /// threads are: a binding's helper thread (the Python package's) must
    /// not take a signal its interpreter's main thread waits for.
    ///
    /// # Errors
    ///
    /// The system refusing the thread (or the signal mask).
    pub fn spawn_quiet_thread<F>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        crate::base::sys::spawn_quiet(name, None, f)
    }
}

#[cfg(all(not(loom), feature = "tokio"))]
pub use api::bootstrap::AsyncServer;
#[cfg(not(loom))]
pub use api::bootstrap::{
    AcceptError, Address, BootstrapError, CONNECT_TIMEOUT, ConnectError, ConnectOptions,
    Connection, EVICTION_GRACE, HANDSHAKE_TIMEOUT, MAX_PENDING_HANDSHAKES, Server, ServerOptions,
    Token, connect, connect_invited, connect_invited_with, spawn,
};
#[cfg(not(loom))]
pub use api::channel::bytes;
#[cfg(not(loom))]
pub use api::channel::{
    AddError, HANDLE_WINDOW, Handle, Key, LOAN_IN_PLACE, Loan, MAX_HANDLES, Message, OUT_OF_LINE,
    Pipe, PipeOptions, ProtocolError, ReadyTimeoutError, Receiver, RecvError, RecvTimeoutError,
    Select, Selectable, SendError, SendTimeoutError, SendWithError, Sender, SharedBytes,
    TryReadyError, TryRecvError, TrySendError, Wait, pipe,
};
#[cfg(all(not(loom), feature = "tokio"))]
pub use api::channel::{AsyncReceiver, AsyncSender};
#[cfg(all(feature = "serde", not(loom)))]
pub use api::typed::channel;
#[cfg(not(loom))]
pub use base::sys::Credentials;
#[cfg(not(loom))]
pub use base::wire::Violation;
#[cfg(not(loom))]
pub use base::wire::handshake::Refusal;
#[cfg(not(loom))]
pub use transport::pool::reserve::PoolStats;

/// Where this process's pool blocks came from: made by the background
/// helper, made on a sender's path, or reused. See [`PoolStats`].
#[cfg(not(loom))]
pub fn pool_stats() -> PoolStats {
    transport::pool::reserve::blocks().stats()
}
