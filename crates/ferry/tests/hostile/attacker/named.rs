//! Named sockets by hand, for the server handshake attacks: a raw client
//! that connects to a ferry server's abstract name, and a raw listener
//! that ferry clients connect to. No ferry code: the address is ferry's
//! documented prefix and the name (`bootstrap/address.rs`).

use std::io;
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::socket::RawSocket;

/// The abstract address of the ferry server named `name`.
pub fn address(name: &str) -> SocketAddrUnix {
    SocketAddrUnix::new_abstract_name(format!("ferry.{name}").as_bytes())
        .expect("an abstract address")
}

fn seqpacket() -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Connects to the ferry server named `name`, as a client that will say
/// whatever it likes.
pub fn connect(name: &str) -> io::Result<RawSocket> {
    let fd = seqpacket()?;
    rustix::net::connect(&fd, &address(name))?;
    Ok(RawSocket::from_fd(fd))
}

/// A listening socket at the address a ferry client looks for a server
/// named `name` at, answering as it likes.
#[derive(Debug)]
pub struct RawListener {
    fd: OwnedFd,
}

impl RawListener {
    /// Listens as the server named `name`.
    pub fn bind(name: &str) -> io::Result<Self> {
        let fd = seqpacket()?;
        rustix::net::bind(&fd, &address(name))?;
        rustix::net::listen(&fd, 8)?;
        Ok(Self { fd })
    }

    /// Takes the next connection, waiting at most `limit` for one.
    pub fn accept_within(&self, limit: Duration) -> io::Result<Option<RawSocket>> {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let timeout = rustix::time::Timespec {
            tv_sec: limit.as_secs() as i64,
            tv_nsec: i64::from(limit.subsec_nanos()),
        };
        if rustix::event::poll(&mut fds, Some(&timeout))? == 0 {
            return Ok(None);
        }
        let fd = rustix::net::accept_with(&self.fd, SocketFlags::CLOEXEC)?;
        Ok(Some(RawSocket::from_fd(fd)))
    }
}
