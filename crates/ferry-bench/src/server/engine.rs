//! The servers and clients of the connect and clients rows. Every server
//! answers a client's first request on the thread that accepted it, and
//! (connect rows) serves it there until it hangs up; only for the clients
//! rows does it then hand the client to a thread of its own. Handing over
//! at once put that thread's start inside the client's timed span whenever
//! the client did not take the CPU back at once (one CPU, or a client that
//! yields), so the connect rows timed a thread start for some engines only.

use std::fmt::Debug;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::Error;

/// A kind of server, and its clients: an engine's server capability
/// ([`crate::engine::Engine::server`]).
pub trait Server: Debug + Sync {
    /// The name on the command line and in reports.
    fn name(&self) -> &'static str;

    /// In the server's process: starts serving on threads of its own until
    /// the process ends. `clients` will come (ferry-select waits for all).
    fn serve(&self, clients: usize) -> Result<Listening, Error>;

    /// Connects to the server at `address` and makes the first round trip.
    fn connect(
        &self,
        address: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error>;

    /// Whether every client connects at one address (not ipc-channel's
    /// one-shot servers).
    fn one_address(&self) -> bool {
        true
    }

    /// Whether it has connect rows (not ferry-select, the same server as
    /// ferry's until a second client comes).
    fn connects(&self) -> bool {
        true
    }

    /// Whether it has clients rows (not the shared-memory connect floors).
    fn serves_many(&self) -> bool {
        true
    }
}

/// Whether a server's clients come one at a time (the connect rows), so
/// the accepting thread serves each until it hangs up.
pub fn one_at_a_time(clients: usize) -> bool {
    clients <= 1
}

/// A serving process's server: the address its next client should connect
/// to, the same every time ([`fixed`]) or (ipc-channel) made for that one.
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
/// return it to; the client waiting on it fails in turn.
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
