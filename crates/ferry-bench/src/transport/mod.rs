//! The engines that move messages between the benchmark's two processes:
//! each transport is one file here and one entry in [`ENGINES`], known to
//! the workloads only through the [`Transport`] and [`Endpoint`] traits. A
//! transport starts the child itself ([`Transport::spawn`]), as how the
//! child finds its end differs (an inherited socket, a path in the
//! environment, its standard streams).

mod ferry;
#[cfg(feature = "tokio")]
mod ferry_async;
mod ferry_c;
pub(crate) mod ferry_forwarded;
mod ferry_typed;
mod ferry_zero_copy;
mod framed;
mod guard;
#[cfg(feature = "iceoryx2")]
mod iceoryx2;
#[cfg(feature = "ipc-channel")]
pub(crate) mod ipc_channel;
mod pipe;
pub(crate) mod shm_floor;
pub(crate) mod unix_seqpacket;
mod unix_stream;
#[cfg(feature = "tokio")]
mod unix_stream_tokio;

use std::fmt::Debug;
use std::process::{Child, Command};

use crate::engine::{self, Engine};
use crate::error::Error;
use crate::server::{self, Carrier, Server};

pub use guard::{ChildGuard, finish};

/// A way to carry messages between a parent and the child it starts.
pub trait Transport: Debug + Sync {
    /// The name on the command line and in reports.
    fn name(&self) -> &'static str;

    /// How a waiting side waits: `adaptive`, `spin`, or `sleep` (which is
    /// also what the OS's own transports do, sleeping in the kernel, and
    /// so the default).
    fn wait(&self) -> &'static str {
        "sleep"
    }

    /// Starts `command` (this binary, re-run as the child) connected to the
    /// returned endpoint.
    fn spawn(&self, command: Command) -> Result<Connection, Error>;

    /// In the child: the endpoint connected to the parent.
    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error>;
}

/// A started child and the parent's end of the transport to it.
pub struct Connection {
    /// The child process, killed if dropped while running.
    pub child: ChildGuard,
    /// The parent's end.
    pub endpoint: Box<dyn Endpoint>,
}

impl Connection {
    /// A connection to `child` through `endpoint`.
    pub fn new(child: Child, endpoint: Box<dyn Endpoint>) -> Self {
        Self {
            child: ChildGuard::new(child),
            endpoint,
        }
    }
}

/// One end of a transport, moving whole messages.
///
/// Sending is in two steps so that a transport may hand out memory the
/// message is written in place into: [`prepare`](Endpoint::prepare) gives
/// the buffer of the next message and [`send`](Endpoint::send) sends it.
pub trait Endpoint {
    /// The buffer of the next message, exactly `len` bytes long, for the
    /// caller to write every byte of.
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error>;

    /// Sends the message last prepared.
    fn send(&mut self) -> Result<(), Error>;

    /// Sends a message of `len` bytes, every one written by `fill`: by
    /// default [`prepare`](Endpoint::prepare), `fill`, [`send`](Endpoint::send);
    /// a transport whose buffer lives only from its making to its sending
    /// (a loan written and sent in one scope) does it in one call instead.
    fn send_filled(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        fill(self.prepare(len)?);
        self.send()
    }

    /// Waits for the next message; `None` once the peer has closed its end
    /// between messages.
    fn recv(&mut self) -> Result<Option<&[u8]>, Error>;

    /// Whether this transport reads a message in a scope
    /// ([`recv_read`](Endpoint::recv_read)) rather than by
    /// [`recv`](Endpoint::recv); the workloads then use that (the other
    /// transports keep `recv`, whose harness costs fewer instructions than
    /// a call through a closure).
    fn reads_in_scope(&self) -> bool {
        false
    }

    /// Waits for the next message and lets `read` read it; `false` once the
    /// peer has closed its end between messages. By default
    /// [`recv`](Endpoint::recv), then `read`; a transport that lends a
    /// message only until a scope ends does it in one call instead.
    fn recv_read(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        Ok(self.recv()?.map(read).is_some())
    }
}

/// Every engine, in the order rows are run and reported; a rival's only
/// with its feature (see [`crate::engine`]).
pub const ENGINES: &[&dyn Engine] = &[
    &ferry::Ferry::ADAPTIVE,
    &ferry::Ferry::TUNED,
    &ferry::Ferry::SPIN,
    &ferry::Ferry::BLOCK,
    &ferry::Ferry::LOAN,
    &ferry::Ferry::LOAN_BORROWED,
    &ferry::Ferry::IN_PLACE,
    &server::ferry::Ferry::SELECT,
    &ferry::Ferry::TYPED,
    &ferry_c::FerryC::ADAPTIVE,
    &ferry_forwarded::FerryForwarded::DIRECT,
    &ferry_forwarded::FerryForwarded::ONCE,
    &ferry_forwarded::FerryForwarded::THRICE,
    &ferry_forwarded::FerryForwarded::END,
    &ferry_forwarded::FerryForwarded::END_ONCE,
    &ferry_forwarded::FerryForwarded::END_THRICE,
    &ferry_forwarded::FerryForwarded::SELECT_END,
    &ferry_forwarded::FerryForwarded::SELECT_END_THRICE,
    #[cfg(feature = "tokio")]
    &ferry_forwarded::FerryForwarded::ASYNC_END,
    #[cfg(feature = "tokio")]
    &ferry_forwarded::FerryForwarded::ASYNC_END_THRICE,
    #[cfg(feature = "tokio")]
    &ferry_async::FerryAsync,
    &unix_stream::UnixStream,
    #[cfg(feature = "tokio")]
    &unix_stream_tokio::UnixStreamTokio,
    &pipe::Pipe,
    &unix_seqpacket::UnixSeqpacket,
    &shm_floor::ShmFloor::FUTEX,
    &shm_floor::ShmFloor::SPIN,
    &shm_floor::ShmFloor::IN_PLACE,
    #[cfg(feature = "ipc-channel")]
    &ipc_channel::IpcChannel::BYTES,
    #[cfg(feature = "ipc-channel")]
    &ipc_channel::IpcChannel::TYPED,
    #[cfg(feature = "ipc-channel")]
    &ipc_channel::OneShotServers,
    #[cfg(feature = "iceoryx2")]
    &iceoryx2::Iceoryx2::EVENT,
    #[cfg(feature = "iceoryx2")]
    &iceoryx2::Iceoryx2::SPIN,
    &server::shm::ShmConnect::FLOOR,
    &server::shm::ShmConnect::UNSEALED,
    &server::shm::ShmConnect::PAGE,
    &server::shm::ShmConnect::EAGER,
    &server::shm::ShmConnect::MIN,
    &server::shm::ShmConnect::SPARE,
    &server::shm::ShmConnect::MIN_SPARE,
];

/// Engines that are one thing only: a pipe (`pipe -> Transport`) or a
/// server (`server -> Server`).
macro_rules! engines_that_are {
    ($method:ident -> $what:ident: $($(#[$cfg:meta])* $engine:ty),* $(,)?) => {$(
        $(#[$cfg])*
        impl Engine for $engine {
            fn $method(&self) -> Option<&dyn $what> {
                Some(self)
            }
        }
    )*};
}

engines_that_are!(
    pipe -> Transport:
    ferry_forwarded::FerryForwarded,
    ferry_c::FerryC,
    #[cfg(feature = "tokio")]
    ferry_async::FerryAsync,
    unix_stream::UnixStream,
    #[cfg(feature = "tokio")]
    unix_stream_tokio::UnixStreamTokio,
    pipe::Pipe,
    shm_floor::ShmFloor,
    #[cfg(feature = "ipc-channel")]
    ipc_channel::IpcChannel,
    #[cfg(feature = "iceoryx2")]
    iceoryx2::Iceoryx2,
);

engines_that_are!(
    server -> Server:
    server::ferry::Ferry,
    server::shm::ShmConnect,
    #[cfg(feature = "ipc-channel")]
    ipc_channel::OneShotServers,
);

/// ferry: every way of waiting and writing is a pipe; the plain one
/// (`ferry`) is also the named server (a thread per client) and carries
/// descriptors.
impl Engine for ferry::Ferry {
    fn pipe(&self) -> Option<&dyn Transport> {
        Some(self)
    }

    fn server(&self) -> Option<&dyn Server> {
        let plain = Transport::name(self) == "ferry";
        plain.then_some(&server::ferry::Ferry::THREADS)
    }

    fn fds(&self) -> Option<&dyn Carrier> {
        let plain = Transport::name(self) == "ferry";
        plain.then_some(&server::fds::FerryCarrier)
    }
}

/// A seqpacket socket: a pipe, a named server and the floor of carrying
/// descriptors.
impl Engine for unix_seqpacket::UnixSeqpacket {
    fn pipe(&self) -> Option<&dyn Transport> {
        Some(self)
    }

    fn server(&self) -> Option<&dyn Server> {
        Some(&unix_seqpacket::Listener)
    }

    fn fds(&self) -> Option<&dyn Carrier> {
        Some(&unix_seqpacket::FdCarrier)
    }
}

/// In the child: the environment variable `var`, which the parent set.
pub(crate) fn from_parent(var: &str) -> Result<String, Error> {
    std::env::var(var)
        .map_err(|_| Error::new(format!("{var} is not set: not started by ferry-bench")))
}

/// Whether the transport `name` is one a build without default features
/// lacks (the rivals', and those that run on tokio).
pub fn needs_default_features(name: &str) -> bool {
    [
        "ipc-channel",
        "iceoryx2",
        "ferry-async",
        "unix-stream-tokio",
    ]
    .iter()
    .any(|feature| name.starts_with(feature))
}

/// The transport called `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Transport, String> {
    let found = engine::pipes().into_iter().find(|t| t.name() == name);
    found.ok_or_else(|| format!("unknown transport `{name}`; known: {}", names().join(", ")))
}

/// The names of every transport.
pub fn names() -> Vec<&'static str> {
    engine::pipes().iter().map(|t| t.name()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let names = names();
        for (i, name) in names.iter().enumerate() {
            assert!(!names[..i].contains(name), "{name} twice");
            assert_eq!(by_name(name).unwrap().name(), *name);
        }
        assert!(
            by_name("carrier-pigeon")
                .unwrap_err()
                .contains("unix-stream")
        );
    }
}
