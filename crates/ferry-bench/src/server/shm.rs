//! The floor of a shared-memory connect, hand-written with the pingpong
//! floor's slots and futex wait ([`crate::transport::shm_floor`]): the
//! client makes, sizes, seals and maps a memfd, connects a `SOCK_SEQPACKET`
//! socket and sends a hello with the memfd attached, as ferry's client
//! sends its region with its opening; the server checks the seals, maps the
//! region and welcomes the client; then the first request and its reply go
//! through the region. Each [`ShmConnect`] takes out or changes one step.

use std::os::fd::OwnedFd;
use std::sync::Mutex;
use std::thread;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::net::{self, AddressFamily, SendFlags, SocketAddrUnix, SocketFlags};

use super::engine::{self, Conn, Listening, Server};
use super::scm;
use crate::error::{Context, Error};
use crate::transport::Endpoint;
use crate::transport::shm_floor::{Layout, Mapping, Peer, Slots, Wait};

/// ferry's default pipe region: a page of header and ring controls, then
/// two rings of 256 KiB (ferry's `wire/region.rs`, `region_len` of
/// `channel/options.rs`'s default capacity).
pub const FERRY_REGION: usize = 4096 + 2 * 256 * 1024;
const PAGE_REGION: usize = 4096;
/// The largest region a server maps.
const MAX_REGION: usize = 1 << 30;
/// The seals a sealed region carries: its size never changes, and no seal
/// is added (ferry adds the first two, then the last, in two calls).
const SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);
/// The client's hello: as long as ferry's opening.
const HELLO: [u8; 40] = *b"ferry-bench shm-floor hello, 40 bytes...";
const WELCOME: [u8; 8] = *b"welcome!";
/// Connections the kernel queues before `accept`.
const BACKLOG: i32 = 128;

/// A shared-memory connect of one shape.
#[derive(Debug, Clone, Copy)]
pub struct ShmConnect {
    name: &'static str,
    /// Bytes of each connection's region.
    region: usize,
    /// The client seals the region's size and the server checks it.
    sealed: bool,
    /// The server answers the hello before the first request is written;
    /// otherwise the request is in the region before the hello goes.
    welcome: bool,
    /// The client makes its next region when it hangs up, outside the
    /// timed span, and connects with it.
    spare: bool,
}

impl ShmConnect {
    /// ferry's shape: a region of ferry's size, sealed, and a welcome.
    pub const FLOOR: Self = Self::new("shm-floor", FERRY_REGION, true, true, false);
    /// No seals: what sealing costs.
    pub const UNSEALED: Self = Self::new("shm-floor-unsealed", FERRY_REGION, false, true, false);
    /// A one-page region: what a region's size costs in mapping and faults.
    pub const PAGE: Self = Self::new("shm-floor-4k", PAGE_REGION, true, true, false);
    /// The request in the region before the hello, and no welcome: a
    /// welcome folded into the first reply.
    pub const EAGER: Self = Self::new("shm-floor-eager", FERRY_REGION, true, false, false);
    /// One page, no seals, no welcome: the least a connect with a fresh
    /// region can do.
    pub const MIN: Self = Self::new("shm-floor-min", PAGE_REGION, false, false, false);
    /// ferry's shape, with a region made at the last hang-up.
    pub const SPARE: Self = Self::new("shm-floor-spare", FERRY_REGION, true, true, true);
    /// `MIN` with a region made at the last hang-up.
    pub const MIN_SPARE: Self = Self::new("shm-floor-min-spare", PAGE_REGION, false, false, true);

    const fn new(
        name: &'static str,
        region: usize,
        sealed: bool,
        welcome: bool,
        spare: bool,
    ) -> Self {
        Self {
            name,
            region,
            sealed,
            welcome,
            spare,
        }
    }
}

/// The region the next connect of a spare-making shape takes, with the
/// name of the shape that made it (rows of two such shapes alternate).
static SPARE: Mutex<Option<(&'static str, Slots)>> = Mutex::new(None);

impl Server for ShmConnect {
    fn name(&self) -> &'static str {
        self.name
    }

    fn serves_many(&self) -> bool {
        false
    }

    fn serve(&self, _clients: usize) -> Result<Listening, Error> {
        let name = engine::fresh_name("shm-floor");
        let listener = socket()?;
        net::bind(&listener, &address(&name)?).context(format!("binding to @{name}"))?;
        net::listen(&listener, BACKLOG).context(format!("listening at @{name}"))?;
        let shape = *self;
        thread::spawn(move || shape.accept_each(&listener));
        Ok(engine::fixed(name))
    }

    fn connect(
        &self,
        address_name: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error> {
        let spare = match self.spare {
            true => SPARE
                .lock()
                .map_err(|_| Error::new("a poisoned spare"))?
                .take(),
            false => None,
        };
        let spare = spare.and_then(|(maker, slots)| (maker == self.name).then_some(slots));
        let mut slots = match spare {
            Some(slots) => slots,
            None => self.region()?,
        };
        if !self.welcome {
            write(&mut slots, request)?;
        }
        let socket = slots.socket().expect("a client watches its server");
        net::connect(socket, &address(address_name)?)
            .context(format!("connecting to @{address_name}"))?;
        scm::send(socket, &HELLO, Some(slots.file()))?;
        let mut conn = ShmConn {
            slots: Some(slots),
            shape: *self,
        };
        match self.welcome {
            true => {
                let mut welcome = [0; WELCOME.len() + 1];
                let socket = conn.slots().socket().expect("a client watches its server");
                let (n, fd) = scm::recv(socket, &mut welcome)?;
                if welcome[..n] != WELCOME || fd.is_some() {
                    return Err(Error::new("the server did not welcome this client"));
                }
                conn.round_trip(request, reply)?;
            }
            false => read(conn.slots(), reply)?,
        }
        Ok(Box::new(conn))
    }
}

impl ShmConnect {
    /// The client's region: made, sized, sealed and mapped, with a socket
    /// (not yet connected) to watch the server through.
    fn region(&self) -> Result<Slots, Error> {
        let flags = match self.sealed {
            true => MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
            false => MemfdFlags::CLOEXEC,
        };
        let memfd = rustix::fs::memfd_create("ferry-bench-floor", flags).context("memfd_create")?;
        rustix::fs::ftruncate(&memfd, self.region as u64).context("sizing the region")?;
        if self.sealed {
            rustix::fs::fcntl_add_seals(&memfd, SEALS).context("sealing the region")?;
        }
        let layout = Layout::of_region(self.region)
            .ok_or_else(|| Error::new(format!("no layout for {} bytes", self.region)))?;
        let mapping = Mapping::made(memfd, self.region, layout)?;
        Ok(Slots::new(mapping, 0, Wait::Futex, Peer::Socket(socket()?)))
    }

    /// Accepts clients forever, each served on this thread until it hangs
    /// up (a floor has connect rows only: its clients come one at a time).
    fn accept_each(self, listener: &OwnedFd) {
        loop {
            match net::accept_with(listener, SocketFlags::CLOEXEC) {
                Ok(socket) => {
                    if let Err(e) = self.serve_one(socket) {
                        engine::report("serving a shm-floor client", e);
                    }
                }
                Err(Errno::INTR | Errno::CONNABORTED) => {}
                Err(e) => return engine::report("accepting a shm-floor client", e),
            }
        }
    }

    /// Takes a client's hello and region, welcomes it, and echoes its
    /// requests until it hangs up.
    fn serve_one(self, socket: OwnedFd) -> Result<(), Error> {
        let mut hello = [0; HELLO.len() + 1];
        let (n, fd) = scm::recv(&socket, &mut hello)?;
        let fd = match (hello[..n] == HELLO, fd) {
            (true, Some(fd)) => fd,
            (false, _) if n == 0 => return Ok(()),
            _ => return Err(Error::new("a hello without its region")),
        };
        if self.sealed {
            let seals = rustix::fs::fcntl_get_seals(&fd).context("reading the region's seals")?;
            if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
                return Err(Error::new("a region whose size may change"));
            }
        }
        let shape = |len| match len <= MAX_REGION {
            true => Layout::of_region(len),
            false => None,
        };
        let mapping = Mapping::received(fd, shape)?;
        if self.welcome {
            send_welcome(&socket)?;
        }
        let mut slots = Slots::new(mapping, 1, Wait::Futex, Peer::Socket(socket));
        let mut buf = Vec::new();
        while let Some(request) = slots.recv()? {
            buf.clear();
            buf.extend_from_slice(request);
            write(&mut slots, &buf)?;
        }
        Ok(())
    }
}

fn send_welcome(socket: &OwnedFd) -> Result<(), Error> {
    match net::send(socket, &WELCOME, SendFlags::NOSIGNAL) {
        Ok(n) if n == WELCOME.len() => Ok(()),
        Ok(n) => Err(Error::new(format!("sent {n} bytes of the welcome"))),
        Err(e) => Err(e).context("sending the welcome"),
    }
}

/// Writes `message` into this end's slot and publishes it.
fn write(slots: &mut Slots, message: &[u8]) -> Result<(), Error> {
    slots.prepare(message.len())?.copy_from_slice(message);
    slots.send()
}

/// Waits for the next message into `into`.
fn read(slots: &mut Slots, into: &mut Vec<u8>) -> Result<(), Error> {
    let message = slots
        .recv()?
        .ok_or_else(|| Error::new("the server hung up"))?;
    into.clear();
    into.extend_from_slice(message);
    Ok(())
}

fn socket() -> Result<OwnedFd, Error> {
    net::socket_with(
        AddressFamily::UNIX,
        net::SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .context("creating a seqpacket socket")
}

fn address(name: &str) -> Result<SocketAddrUnix, Error> {
    SocketAddrUnix::new_abstract_name(name.as_bytes()).context(format!("naming @{name}"))
}

/// A client's connection: its end of the region's slots.
struct ShmConn {
    /// Taken only when it hangs up.
    slots: Option<Slots>,
    shape: ShmConnect,
}

impl ShmConn {
    fn slots(&mut self) -> &mut Slots {
        self.slots.as_mut().expect("slots are taken only on drop")
    }
}

impl Conn for ShmConn {
    fn round_trip(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), Error> {
        write(self.slots(), request)?;
        read(self.slots(), reply)
    }
}

impl Drop for ShmConn {
    /// Hangs up, then (`shm-floor-spare`) makes the next connect's region.
    fn drop(&mut self) {
        drop(self.slots.take());
        if self.shape.spare {
            match (self.shape.region(), SPARE.lock()) {
                (Ok(region), Ok(mut spare)) => *spare = Some((self.shape.name, region)),
                (Err(e), _) => engine::report("making a spare region", e),
                (_, Err(_)) => engine::report("making a spare region", "a poisoned spare"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_shaped_like_ferrys() {
        assert!(Layout::of_region(FERRY_REGION).is_some());
        assert!(Layout::of_region(PAGE_REGION).is_some());
        assert!(Layout::of_region(1024).is_none());
    }

    #[test]
    fn every_shape_connects_and_echoes_until_the_client_hangs_up() {
        for shape in [
            ShmConnect::FLOOR,
            ShmConnect::UNSEALED,
            ShmConnect::PAGE,
            ShmConnect::EAGER,
            ShmConnect::MIN,
            ShmConnect::SPARE,
            ShmConnect::MIN_SPARE,
            ShmConnect::SPARE,
        ] {
            let address = shape.serve(1).unwrap()().unwrap();
            for round in 0..3u8 {
                let request = [round; 144];
                let mut reply = Vec::new();
                let mut conn = shape.connect(&address, &request, &mut reply).unwrap();
                assert_eq!(reply, request, "{}", shape.name);
                conn.round_trip(&[7; 12], &mut reply).unwrap();
                assert_eq!(reply, [7; 12], "{}", shape.name);
            }
        }
    }
}
