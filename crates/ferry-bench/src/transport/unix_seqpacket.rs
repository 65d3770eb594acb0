//! A Unix `SOCK_SEQPACKET` socket: the kernel keeps record boundaries, so a
//! message that fits in one record is one `send` and one `recv`. Set up as
//! `unix-stream` is, with rustix, as std has no seqpacket sockets.
//!
//! A record may be at most the sender's `SO_SNDBUF` less 32 bytes (the
//! kernel's `unix_dgram_sendmsg`), and the default buffer (208 KiB) is
//! smaller than the protocol's largest messages: each side asks for one that
//! takes 1 MiB in one record, and a message still too large goes as several
//! records, after a 4-byte length as on the byte streams.
//!
//! The same sockets serve the server workload: a named server ([`Listener`],
//! at an abstract address, a thread per client) and the floor of passing a
//! descriptor ([`FdCarrier`], `SCM_RIGHTS` on a socket pair).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

use ::ferry::Pipe;

use rustix::io::Errno;
use rustix::net::{
    self, AddressFamily, RecvFlags, SendFlags, SocketAddrUnix, SocketFlags, SocketType, sockopt,
};

use super::framed::{self, HEADER};
use super::unix_stream::spawn_listening;
use super::{Connection, Endpoint, Transport};
use crate::error::{Context, Error};
use crate::server::engine::{self, Conn, Listening, Server};
use crate::server::fds::{Carrier, Trip};
use crate::server::scm;

/// The environment variable naming the socket's path to the child.
const ENV: &str = "FERRY_BENCH_SEQPACKET";
/// The send buffer each side asks for: room for a 1 MiB message and its
/// header in one record (the kernel doubles what is asked, within its cap).
const SEND_BUFFER: usize = (1 << 20) + 4096;
/// What the kernel keeps of the send buffer for itself, per record.
const RECORD_OVERHEAD: usize = 32;

/// A `SOCK_SEQPACKET` Unix socket, one socket both ways.
#[derive(Debug)]
pub struct UnixSeqpacket;

impl Transport for UnixSeqpacket {
    fn name(&self) -> &'static str {
        "unix-seqpacket"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, socket) = spawn_listening(command, ENV, "seqpacket", listen, try_accept)?;
        let endpoint = Box::new(Seqpacket::new(socket)?);
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let path = PathBuf::from(super::from_parent(ENV)?);
        let socket = seqpacket_socket(SocketFlags::CLOEXEC)?;
        let address = SocketAddrUnix::new(&path).context("naming the socket")?;
        net::connect(&socket, &address).context(format!("connecting to {}", path.display()))?;
        Ok(Box::new(Seqpacket::new(socket)?))
    }
}

fn seqpacket_socket(flags: SocketFlags) -> Result<OwnedFd, Error> {
    net::socket_with(AddressFamily::UNIX, SocketType::SEQPACKET, flags, None)
        .context("creating a seqpacket socket")
}

/// A non-blocking socket listening at `path`.
fn listen(path: &Path) -> Result<OwnedFd, Error> {
    let listener = seqpacket_socket(SocketFlags::CLOEXEC | SocketFlags::NONBLOCK)?;
    let address = SocketAddrUnix::new(path).context("naming the socket")?;
    net::bind(&listener, &address).context(format!("binding to {}", path.display()))?;
    net::listen(&listener, 1).context(format!("listening at {}", path.display()))?;
    Ok(listener)
}

/// The child's connection, if it is waiting.
fn try_accept(listener: &OwnedFd) -> Result<Option<OwnedFd>, Error> {
    // Without NONBLOCK the accepted socket blocks, whatever the listener.
    match net::accept_with(listener, SocketFlags::CLOEXEC) {
        Ok(socket) => Ok(Some(socket)),
        Err(Errno::AGAIN | Errno::INTR) => Ok(None),
        Err(e) => Err(e).context("accepting the child's connection"),
    }
}

/// A connected seqpacket socket moving length-prefixed messages, each in
/// as few records as the send buffer allows.
struct Seqpacket {
    socket: OwnedFd,
    /// The largest record this side may send.
    record: usize,
    /// The next message: header, then payload.
    out: Vec<u8>,
    /// The last message received, header first; never shorter than one
    /// record, so any record fits the first `recv`.
    inbox: Vec<u8>,
}

impl Seqpacket {
    fn new(socket: OwnedFd) -> Result<Self, Error> {
        let record = grow_send_buffer(&socket)?;
        Ok(Self {
            socket,
            record,
            out: Vec::new(),
            inbox: vec![0; record],
        })
    }
}

/// Asks for [`SEND_BUFFER`] and returns the largest record the buffer
/// granted allows.
fn grow_send_buffer(socket: &OwnedFd) -> Result<usize, Error> {
    sockopt::set_socket_send_buffer_size(socket, SEND_BUFFER).context("setting SO_SNDBUF")?;
    let granted = sockopt::socket_send_buffer_size(socket).context("reading SO_SNDBUF")?;
    granted
        .checked_sub(RECORD_OVERHEAD)
        .filter(|&record| record > HEADER)
        .ok_or_else(|| Error::new(format!("SO_SNDBUF is only {granted} bytes")))
}

impl Endpoint for Seqpacket {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        framed::frame(&mut self.out, len)
    }

    fn send(&mut self) -> Result<(), Error> {
        for record in self.out.chunks(self.record) {
            send_record(&self.socket, record)?;
        }
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        let first = recv_record(&self.socket, &mut self.inbox)?;
        if first == 0 {
            // Every record carries at least one byte: this is the end.
            return Ok(None);
        }
        let end = HEADER + message_len(&self.inbox[..first])?;
        if first > end {
            return Err(Error::new(format!(
                "a {first}-byte record holds a {end}-byte message"
            )));
        }
        if self.inbox.len() < end {
            self.inbox.resize(end, 0);
        }
        let mut got = first;
        while got < end {
            match recv_record(&self.socket, &mut self.inbox[got..end])? {
                0 => return Err(Error::new("the peer closed in the middle of a message")),
                n => got += n,
            }
        }
        Ok(Some(&self.inbox[HEADER..end]))
    }
}

/// The length in a message's first record.
fn message_len(first: &[u8]) -> Result<usize, Error> {
    let header = first
        .first_chunk::<HEADER>()
        .ok_or_else(|| Error::new(format!("a {}-byte record has no header", first.len())))?;
    framed::header_len(*header)
}

/// Sends one record, whole.
fn send_record(socket: &OwnedFd, record: &[u8]) -> Result<(), Error> {
    loop {
        match net::send(socket, record, SendFlags::NOSIGNAL) {
            Ok(n) if n == record.len() => return Ok(()),
            Ok(n) => {
                return Err(Error::new(format!(
                    "sent {n} bytes of a {}-byte record",
                    record.len()
                )));
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e).context(format!("sending a {}-byte record", record.len())),
        }
    }
}

/// Receives one record into `buf`, failing if it does not fit; 0 means the
/// peer closed (or reset the connection).
fn recv_record(socket: &OwnedFd, buf: &mut [u8]) -> Result<usize, Error> {
    loop {
        // TRUNC: the record's whole length, even if `buf` took less.
        match net::recv(socket, &mut *buf, RecvFlags::TRUNC) {
            Ok((_, len)) if len <= buf.len() => return Ok(len),
            Ok((_, len)) => {
                return Err(Error::new(format!(
                    "a {len}-byte record was cut to the {}-byte buffer",
                    buf.len()
                )));
            }
            Err(Errno::INTR) => {}
            Err(Errno::CONNRESET) => return Ok(0),
            Err(e) => return Err(e).context("receiving a record"),
        }
    }
}

/// Connections the kernel queues before `accept`.
const BACKLOG: i32 = 128;
/// The server's receive buffer: any record the clients send fits.
const RECORD: usize = 64 * 1024;

/// A seqpacket listener and its clients, for the server workload.
#[derive(Debug)]
pub struct Listener;

impl Server for Listener {
    fn name(&self) -> &'static str {
        "unix-seqpacket"
    }

    fn serve(&self, clients: usize) -> Result<Listening, Error> {
        let name = engine::fresh_name("seqpacket");
        let listener = seqpacket_socket(SocketFlags::CLOEXEC)?;
        net::bind(&listener, &abstract_address(&name)?).context(format!("binding to @{name}"))?;
        net::listen(&listener, BACKLOG).context(format!("listening at @{name}"))?;
        thread::spawn(move || accept_each(&listener, clients));
        Ok(engine::fixed(name))
    }

    fn connect(
        &self,
        name: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error> {
        let socket = seqpacket_socket(SocketFlags::CLOEXEC)?;
        net::connect(&socket, &abstract_address(name)?)
            .context(format!("connecting to @{name}"))?;
        let mut conn = ServerConn(socket);
        conn.round_trip(request, reply)?;
        Ok(Box::new(conn))
    }
}

fn abstract_address(name: &str) -> Result<SocketAddrUnix, Error> {
    SocketAddrUnix::new_abstract_name(name.as_bytes()).context(format!("naming @{name}"))
}

struct ServerConn(OwnedFd);

impl Conn for ServerConn {
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
    let echoed = recv_record(socket, buf).and_then(|n| match n {
        0 => Ok(false),
        n => send_record(socket, &buf[..n]).map(|()| true),
    });
    echoed.unwrap_or_else(|e| {
        engine::report("echoing to a seqpacket client", e);
        false
    })
}

/// The floor of the fd rows: a `SOCK_SEQPACKET` socket pair, the child's
/// end handed over the control pipe, each message one `sendmsg` and one
/// `recvmsg`.
#[derive(Debug)]
pub struct FdCarrier;

impl Carrier for FdCarrier {
    fn name(&self) -> &'static str {
        "unix-seqpacket"
    }

    fn open<'a>(&self, ctl: &'a Pipe) -> Result<Box<dyn Trip + 'a>, Error> {
        let flags = SocketFlags::CLOEXEC;
        let (mine, theirs) =
            net::socketpair(AddressFamily::UNIX, SocketType::SEQPACKET, flags, None)
                .context("socketpair")?;
        ctl.sender()
            .send_with(b"socket", vec![theirs])
            .context("handing the child its socket")?;
        Ok(Box::new(FdTrip {
            socket: mine,
            inbox: vec![0; RECORD],
        }))
    }

    fn echo(&self, ctl: &Pipe) -> Result<(), Error> {
        let mut message = ctl
            .receiver()
            .recv_with()
            .context("waiting for the socket")?;
        let socket = message
            .fds
            .pop()
            .ok_or_else(|| Error::new("the parent sent no socket"))?;
        let mut buf = vec![0; RECORD];
        loop {
            match scm::recv(&socket, &mut buf)? {
                (0, None) => return Ok(()),
                (n, fd) => scm::send(&socket, &buf[..n], fd.as_ref().map(AsFd::as_fd))?,
            }
        }
    }
}

struct FdTrip {
    socket: OwnedFd,
    inbox: Vec<u8>,
}

impl Trip for FdTrip {
    fn round_trip(
        &mut self,
        request: &[u8],
        fd: Option<OwnedFd>,
        reply: &mut Vec<u8>,
    ) -> Result<Option<OwnedFd>, Error> {
        scm::send(&self.socket, request, fd.as_ref().map(AsFd::as_fd))?;
        // Closed once sent, as ferry closes an `Handle::Fd` it has sent.
        drop(fd);
        let (n, back) = scm::recv(&self.socket, &mut self.inbox)?;
        reply.clear();
        reply.extend_from_slice(&self.inbox[..n]);
        Ok(back)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Seqpacket, Seqpacket) {
        let (a, b) = net::socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        (Seqpacket::new(a).unwrap(), Seqpacket::new(b).unwrap())
    }

    #[test]
    fn the_record_limit_is_the_kernels() {
        let (a, b) = pair();
        let record = vec![7; a.record];
        send_record(&a.socket, &record).unwrap();
        assert_eq!(
            recv_record(&b.socket, &mut vec![0; a.record]).unwrap(),
            a.record
        );
        let over = vec![7; a.record + 1];
        let error = net::send(&a.socket, &over, SendFlags::NOSIGNAL).unwrap_err();
        assert_eq!(error, Errno::MSGSIZE);
    }

    #[test]
    fn messages_of_several_records_round_trip() {
        let (mut a, mut b) = pair();
        // Small records, so a message spans several of them.
        a.record = 1000;
        let sizes = [1, 995, 996, 997, 5000, 1 << 20];
        let sender = std::thread::spawn(move || {
            for (i, &len) in sizes.iter().enumerate() {
                a.prepare(len).unwrap().fill(i as u8);
                a.send().unwrap();
            }
        });
        for (i, &len) in sizes.iter().enumerate() {
            let msg = b.recv().unwrap().unwrap();
            assert_eq!(msg.len(), len);
            assert!(msg.iter().all(|&x| x == i as u8));
        }
        sender.join().unwrap();
        assert!(b.recv().unwrap().is_none());
    }
}
