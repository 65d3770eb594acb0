//! The attacker's end of the control socket: raw `sendmsg`/`recvmsg` with
//! `SCM_RIGHTS`, no ferry code.
//!
//! Soundness: the only unsafe operation adopts the descriptor number that
//! `ferry::spawn` named in `FERRY_BOOTSTRAP`, after `fstat` showed it open
//! and a socket; this process adopts it once, at start.
#![allow(unsafe_code)]

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// Most descriptors the kit sends or accepts in one record.
const MAX_FDS: usize = 8;

/// One record as received: its bytes and the descriptors that came with it.
#[derive(Debug)]
pub struct Incoming {
    /// The record's bytes.
    pub bytes: Vec<u8>,
    /// The attached descriptors, now owned here.
    pub fds: Vec<OwnedFd>,
}

/// A connected control socket pair for a raw parent: its own end
/// (close-on-exec) and the end a child it spawns inherits (not
/// close-on-exec: the caller spawns that child at once, while no other
/// thread of this process spawns, and then closes it).
pub fn inheritable_pair() -> io::Result<(RawSocket, OwnedFd)> {
    let (ours, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::empty(),
        None,
    )?;
    rustix::io::fcntl_setfd(&ours, rustix::io::FdFlags::CLOEXEC)?;
    Ok((RawSocket::from_fd(ours), theirs))
}

/// The control socket a ferry parent left open in this process.
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
}

impl RawSocket {
    /// A socket this process made (a raw parent's end of a pair, or a
    /// named connection).
    pub fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// The socket's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Adopts the inherited socket: its number is the `fd=` field that
    /// opens `FERRY_BOOTSTRAP` (`fd=<n>,parent=<pid>,...`).
    pub fn from_bootstrap() -> Self {
        let value = std::env::var(ferry_testkit::BOOTSTRAP_ENV)
            .expect("the attacker runs with FERRY_BOOTSTRAP set by ferry::spawn");
        let raw: i32 = value
            .split(',')
            .next()
            .and_then(|field| field.strip_prefix("fd="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("FERRY_BOOTSTRAP={value:?} names no descriptor"));
        // SAFETY: borrowed only for the `fstat` below, which fails with
        // EBADF (and we stop) if the number is not open.
        let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
        let stat = rustix::fs::fstat(borrowed).expect("the inherited descriptor is open");
        assert_eq!(
            rustix::fs::FileType::from_raw_mode(stat.st_mode),
            rustix::fs::FileType::Socket,
            "the inherited descriptor is a socket"
        );
        // SAFETY: open and a socket (checked above), left to this process
        // by its parent for this use alone, and adopted only here, once.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC).expect("set close-on-exec");
        Self { fd }
    }

    /// Receives one record; with `wait`, blocks until one comes. `Ok(None)`
    /// if nothing is queued (without `wait`) or the peer hung up.
    pub fn recv(&self, wait: bool) -> io::Result<Option<Incoming>> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let mut buf = [0u8; 64];
        let mut flags = RecvFlags::CMSG_CLOEXEC;
        if !wait {
            flags |= RecvFlags::DONTWAIT;
        }
        let msg = match rustix::net::recvmsg(
            &self.fd,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            flags,
        ) {
            Ok(msg) => msg,
            Err(Errno::AGAIN) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                fds.extend(rights);
            }
        }
        if msg.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        Ok(Some(Incoming {
            bytes: buf[..msg.bytes].to_vec(),
            fds,
        }))
    }

    /// Receives one record, waiting at most `limit` for it; `Ok(None)` if
    /// none came in time or the peer hung up.
    pub fn recv_within(&self, limit: Duration) -> io::Result<Option<Incoming>> {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let timeout = rustix::time::Timespec {
            tv_sec: limit.as_secs() as i64,
            tv_nsec: i64::from(limit.subsec_nanos()),
        };
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) => Ok(None),
            Ok(_) | Err(Errno::INTR) => self.recv(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Sends one record with `fds` attached, waiting for room.
    pub fn send_record(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.sendmsg(bytes, fds, SendFlags::NOSIGNAL).map(|_| ())
    }

    /// Sends one record if the socket has room now; `Ok(false)` if it is full.
    pub fn try_send_record(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<bool> {
        match self.sendmsg(bytes, fds, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn sendmsg(&self, bytes: &[u8], fds: &[BorrowedFd<'_>], flags: SendFlags) -> io::Result<()> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("too many descriptors for one record"));
        }
        let sent = rustix::net::sendmsg(&self.fd, &[IoSlice::new(bytes)], &mut control, flags)?;
        if sent != bytes.len() {
            return Err(io::Error::other("record sent in part"));
        }
        Ok(())
    }

    /// Asks for the largest send buffer an unprivileged process may have
    /// (`net.core.wmem_max`), so more records wait in the socket at once.
    pub fn grow_send_buffer(&self) {
        let max = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(212_992);
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(&self.fd, max);
    }

    /// Whether the victim has closed its end (or shut the link down).
    pub fn hung_up(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&zero)) {
            Ok(_) => fds[0]
                .revents()
                .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
            Err(_) => true,
        }
    }
}
