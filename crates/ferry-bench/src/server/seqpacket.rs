//! A Unix `SOCK_SEQPACKET` server ([`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)):
//! a listener at an abstract address (as ferry's named server uses), one
//! thread per client, each message one record.

use crate::transport::recv_record;
use std::os::fd::OwnedFd;
use std::thread;

use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SendFlags, SocketAddrUnix, SocketFlags, SocketType};

use super::engine::{self, Conn, Engine, Fixed, Listening};
use crate::error::{Context, Error};

/// Connections the kernel queues before `accept`.
const BACKLOG: i32 = 128;
/// The server's receive buffer: any record the clients send fits.
const RECORD: usize = 64 * 1024;

/// A seqpacket listener and its clients.
#[derive(Debug)]
pub struct Seqpacket;

impl Engine for Seqpacket {
    fn name(&self) -> &'static str {
        "unix-seqpacket"
    }

    fn serve(&self, clients: usize) -> Result<Box<dyn Listening>, Error> {
        let name = engine::fresh_name("seqpacket");
        let listener = socket()?;
        net::bind(&listener, &address(&name)?).context(format!("binding to @{name}"))?;
        net::listen(&listener, BACKLOG).context(format!("listening at @{name}"))?;
        thread::spawn(move || accept_each(&listener, clients));
        Ok(Box::new(Fixed(name)))
    }

    fn connect(
        &self,
        address_name: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error> {
        let socket = socket()?;
        net::connect(&socket, &address(address_name)?)
            .context(format!("connecting to @{address_name}"))?;
        let mut conn = SeqpacketConn(socket);
        conn.round_trip(request, reply)?;
        Ok(Box::new(conn))
    }
}

fn socket() -> Result<OwnedFd, Error> {
    net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .context("creating a seqpacket socket")
}

fn address(name: &str) -> Result<SocketAddrUnix, Error> {
    SocketAddrUnix::new_abstract_name(name.as_bytes()).context(format!("naming @{name}"))
}

struct SeqpacketConn(OwnedFd);

impl Conn for SeqpacketConn {
    fn round_trip(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), Error> {
        send_record(&self.0, request)?;
        // The echo is as long as the request: a buffer of that length,
        // and TRUNC to catch a longer record.
        reply.resize(request.len(), 0);
        match recv_record(&self.0, reply)? {
            n if n == request.len() => Ok(()),
            n => Err(Error::new(format!(
                "a {n}-byte reply to a {}-byte request",
                request.len()
            ))),
        }
    }
}

/// Accepts clients forever: the first request of each here, the rest on
/// a thread of its own, or here too when they come one at a time (see
/// [`engine::one_at_a_time`]).
fn accept_each(listener: &OwnedFd, clients: usize) {
    let mut buf = vec![0; RECORD];
    loop {
        match net::accept_with(listener, SocketFlags::CLOEXEC) {
            Ok(socket) if engine::one_at_a_time(clients) => while echo_one(&socket, &mut buf) {},
            Ok(socket) if echo_one(&socket, &mut buf) => {
                thread::spawn(move || {
                    let mut buf = vec![0; RECORD];
                    while echo_one(&socket, &mut buf) {}
                });
            }
            Ok(_) | Err(Errno::INTR | Errno::CONNABORTED) => {}
            Err(e) => return engine::report("accepting a seqpacket client", e),
        }
    }
}

/// Receives one record and sends it back; false once the client has gone.
fn echo_one(socket: &OwnedFd, buf: &mut [u8]) -> bool {
    match recv_record(socket, buf) {
        Ok(0) => false,
        Ok(n) => match send_record(socket, &buf[..n]) {
            Ok(()) => true,
            Err(e) => {
                engine::report("replying to a seqpacket client", e);
                false
            }
        },
        Err(e) => {
            engine::report("receiving from a seqpacket client", e);
            false
        }
    }
}

/// Sends `record` whole.
fn send_record(socket: &OwnedFd, record: &[u8]) -> Result<(), Error> {
    loop {
        match net::send(socket, record, SendFlags::NOSIGNAL) {
            Ok(n) if n == record.len() => return Ok(()),
            Ok(n) => return Err(Error::new(format!("sent {n} bytes of {}", record.len()))),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e).context("sending a record"),
        }
    }
}
