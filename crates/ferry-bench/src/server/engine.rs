//! The servers and clients of the connect and clients rows: ferry's named
//! server ([`super::ferry`]), a Unix `SOCK_SEQPACKET` listener and
//! ipc-channel's one-shot servers (beside their pingpong transports, in
//! `transport/unix_seqpacket.rs` and `transport/ipc_channel.rs`),
//! and (connect rows only) the hand-written shared-memory connect floor
//! ([`super::shm`]).
//!
//! Every server answers a client's first request on the thread that
//! accepted it, so the first round trip waits for no thread to start. For
//! the connect rows (clients come one at a time) it serves the client
//! there until it hangs up; for the clients rows it then hands the client
//! to a thread of its own (ferry-select: to one thread serving every
//! client through a `ferry::Select`). Handing over right after the first
//! reply put the start of that thread inside the client's timed span
//! whenever the client did not take the CPU back at once (both processes
//! on one CPU, a client that yields rather than sleeps), so the connect
//! rows timed a thread start for some transports and not others.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

/// A kind of server, and its clients: an engine's server capability
/// ([`crate::engine::Engine::server`]).
pub trait Server: Debug + Sync {
    /// The name on the command line and in reports.
    fn name(&self) -> &'static str;

    /// In the server's process: starts listening, and serving clients on
    /// threads of its own until the process ends. `clients` is how many
    /// will come (only a server that waits for all of them uses it).
    fn serve(&self, clients: usize) -> Result<Listening, Error>;

    /// Connects to the server at `address` and makes the first round trip:
    /// `request` out, its echo into `reply`.
    fn connect(
        &self,
        address: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error>;

    /// Whether the server takes every client at one address (all but
    /// ipc-channel's one-shot servers, one per client).
    fn one_address(&self) -> bool {
        true
    }

    /// Whether it has connect rows (all but ferry-select, the same server
    /// as ferry's until a second client comes).
    fn connects(&self) -> bool {
        true
    }

    /// Whether it has clients rows (all but the shared-memory connect
    /// floors, which time connects only).
    fn serves_many(&self) -> bool {
        true
    }
}

/// Whether a server's clients come one at a time (the connect rows), so
/// the accepting thread serves each until it hangs up.
pub fn one_at_a_time(clients: usize) -> bool {
    clients <= 1
}

/// A server, as the process running it holds it: where the next client
/// should connect, the same address every time ([`fixed`]), or
/// (ipc-channel) a server made for that one client.
pub type Listening = Box<dyn FnMut() -> Result<String, Error>>;

/// A client's connection.
pub trait Conn: Send {
    /// One round trip: `request` out, its echo into `reply`.
    fn round_trip(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), Error>;
}

/// A server that takes every client at `address`.
pub fn fixed(address: String) -> Listening {
    Box::new(move || Ok(address.clone()))
}

/// The servers of the connect rows, in report order.
pub fn connecting() -> Vec<&'static dyn Server> {
    let servers = crate::engine::servers().into_iter();
    servers.filter(|s| s.connects()).collect()
}

/// The servers of the clients rows, in report order.
pub fn serving_many() -> Vec<&'static dyn Server> {
    let servers = crate::engine::servers().into_iter();
    servers.filter(|s| s.serves_many()).collect()
}

/// The server called `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Server, Error> {
    let found = crate::engine::servers()
        .into_iter()
        .find(|e| e.name() == name);
    found.ok_or_else(|| Error::new(format!("no server engine is called `{name}`")))
}

/// An abstract socket name no other server has: this process's id and a
/// count.
pub fn fresh_name(kind: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: only uniqueness matters.
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("ferry-bench.{kind}.{}.{n}", std::process::id())
}

/// Reports a server thread's failure on stderr: it has no caller to
/// return it to, and the client waiting on it fails in turn, which the
/// parent reports.
pub fn report(what: &str, e: impl std::fmt::Display) {
    eprintln!("ferry-bench server-child: {what}: {e}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_engine_is_found_by_its_name() {
        for engine in crate::engine::servers() {
            assert_eq!(by_name(engine.name()).unwrap().name(), engine.name());
        }
        assert!(by_name("carrier-pigeon").is_err());
    }

    #[test]
    fn fresh_names_differ() {
        assert_ne!(fresh_name("x"), fresh_name("x"));
    }
}
