//! The control socket: a `SOCK_SEQPACKET` pair ([`socketpair(2)`](https://man7.org/linux/man-pages/man2/socketpair.2.html))
//! carrying small records plus descriptors via `SCM_RIGHTS`
//! ([`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)), and
//! hang-up detection with [`poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::base::sys::{PeerFd, Received};

use rustix::event::{PollFd, PollFlags};
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// Most descriptors accepted in one control record.
pub(crate) const MAX_FDS: usize = 4;

/// One end of a connected, record-preserving Unix socket pair.
#[derive(Debug)]
pub(crate) struct ControlSocket {
    fd: OwnedFd,
}

/// Creates a connected pair of control sockets (close-on-exec).
pub(crate) fn socket_pair() -> io::Result<(ControlSocket, ControlSocket)> {
    let (a, b) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    Ok((ControlSocket { fd: a }, ControlSocket { fd: b }))
}

impl ControlSocket {
    pub(crate) fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// A control socket a peer sent (to a third process it introduces),
    /// if it is one: a Unix `SOCK_SEQPACKET` socket; else handed back.
    pub(crate) fn from_peer(fd: PeerFd) -> Result<Self, PeerFd> {
        let unix = rustix::net::sockopt::socket_domain(&fd).ok() == Some(AddressFamily::UNIX);
        let packets = rustix::net::sockopt::socket_type(&fd).ok() == Some(SocketType::SEQPACKET);
        match unix && packets {
            true => Ok(Self {
                fd: fd.into_owned(),
            }),
            false => Err(fd),
        }
    }

    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sends one record with `fds` attached if the socket has room for it
    /// now (one `sendmsg` with `MSG_DONTWAIT`): `WouldBlock` if not, and
    /// `BrokenPipe` once the peer has closed its end.
    pub(crate) fn try_send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "too many descriptors in one record",
            ));
        }
        let sent = rustix::net::sendmsg(
            &self.fd,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
        )?;
        if sent != bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "control record sent in part",
            ));
        }
        Ok(())
    }

    /// Waits until the socket may take a record, the peer hangs up
    /// (`BrokenPipe`), or `deadline` passes (`TimedOut`; at once if it has
    /// passed), with `poll`.
    pub(crate) fn wait_writable(&self, deadline: Option<Instant>) -> io::Result<()> {
        let timeout = match deadline {
            None => None,
            Some(d) => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(timed_out());
                }
                Some(timespec(left))
            }
        };
        let mut fds = [PollFd::new(&self.fd, PollFlags::OUT)];
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(0) => Err(timed_out()),
            Ok(_) if hung_up(fds[0].revents()) => Err(io::ErrorKind::BrokenPipe.into()),
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Receives one record into `buf`, without blocking.
    pub(crate) fn try_recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        self.recv_with(buf, RecvFlags::empty())
    }

    /// Reads the next record into `buf` without taking it off the socket
    /// (`MSG_PEEK`): its descriptors arrive as duplicates, and the record
    /// stays queued for [`ControlSocket::try_recv`]. A record whose
    /// descriptors could not be installed here (`EMFILE`) comes back as
    /// [`Received::NoRoom`] and stays queued, so nothing is lost.
    pub(crate) fn peek(&self, buf: &mut [u8]) -> io::Result<Received> {
        self.recv_with(buf, RecvFlags::PEEK)
    }

    fn recv_with(&self, buf: &mut [u8], extra: RecvFlags) -> io::Result<Received> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC | extra;
        let msg = match rustix::net::recvmsg(
            &self.fd,
            &mut [IoSliceMut::new(buf)],
            &mut control,
            flags,
        ) {
            Ok(msg) => msg,
            Err(rustix::io::Errno::AGAIN) => return Ok(Received::Empty),
            Err(rustix::io::Errno::CONNRESET) => return Ok(Received::HungUp),
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(rights) = message {
                fds.extend(rights);
            }
        }
        // Nothing read is the end of the stream, unless the peer is still
        // there: then it sent an empty record (which no reader accepts).
        if msg.bytes == 0
            && fds.is_empty()
            && !msg.flags.contains(ReturnFlags::CTRUNC)
            && self.peer_hung_up()
        {
            return Ok(Received::HungUp);
        }
        // The kernel truncates the descriptors it could not install here
        // (out of descriptors) as well as those past our buffer (a peer
        // sending more than a record may carry): a full buffer is the
        // peer's doing, a short one is ours.
        let ctrunc = msg.flags.contains(ReturnFlags::CTRUNC);
        if ctrunc && fds.len() < MAX_FDS {
            return Ok(Received::NoRoom);
        }
        let truncated = ctrunc || msg.flags.contains(ReturnFlags::TRUNC);
        Ok(Received::Record {
            len: msg.bytes,
            fds,
            truncated,
        })
    }

    /// Shuts the socket both ways: the peer sees a hang-up at once.
    pub(crate) fn shutdown(&self) {
        let _ = rustix::net::shutdown(&self.fd, rustix::net::Shutdown::Both);
    }

    /// Whether the peer has closed its end (or its process died), without
    /// blocking. Records still queued do not hide the hang-up.
    pub(crate) fn peer_hung_up(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timespec(Duration::ZERO))) {
            Ok(_) => hung_up(fds[0].revents()),
            Err(_) => false,
        }
    }
}

fn hung_up(revents: PollFlags) -> bool {
    revents.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL)
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the peer did not read its control socket before the deadline",
    )
}

pub(super) fn timespec(d: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec {
        tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(d.subsec_nanos()),
    }
}

impl crate::base::sys::Emptied for ControlSocket {
    /// Shuts the socket both ways and takes every record still queued
    /// (see `drain.rs`).
    fn empty_out(&self) -> (Vec<OwnedFd>, bool) {
        let drained = super::drain::drain(self.fd.as_fd());
        (drained.fds, drained.empty)
    }
}
