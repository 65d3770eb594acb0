//! The control socket: a `SOCK_SEQPACKET` pair ([`socketpair(2)`](https://man7.org/linux/man-pages/man2/socketpair.2.html))
//! carrying small records plus descriptors via `SCM_RIGHTS`
//! ([`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)), and
//! hang-up detection with [`poll(2)`](https://man7.org/linux/man-pages/man2/poll.2.html).

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

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

/// What [`ControlSocket::recv`] got.
#[derive(Debug)]
pub(crate) enum Received {
    /// A record of `len` bytes and the descriptors that came with it.
    Record {
        len: usize,
        fds: Vec<OwnedFd>,
        truncated: bool,
    },
    /// Nothing queued (non-blocking receive).
    Empty,
    /// The peer closed its end and everything it sent has been read.
    HungUp,
}

impl ControlSocket {
    pub(crate) fn from_fd(fd: OwnedFd) -> Self {
        Self { fd }
    }

    pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Sends one record with `fds` attached. Never blocks for long: records
    /// are tiny and the peer drains them as it receives handles.
    pub(crate) fn send(&self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
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
            SendFlags::NOSIGNAL,
        )?;
        if sent != bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "control record sent in part",
            ));
        }
        Ok(())
    }

    /// Receives one record into `buf`, without blocking.
    pub(crate) fn try_recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC;
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
        if msg.bytes == 0 && fds.is_empty() {
            return Ok(Received::HungUp);
        }
        let truncated = msg
            .flags
            .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC);
        Ok(Received::Record {
            len: msg.bytes,
            fds,
            truncated,
        })
    }

    /// Whether the peer has closed its end (or its process died), without
    /// blocking. Records still queued do not hide the hang-up.
    pub(crate) fn peer_hung_up(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        match rustix::event::poll(
            &mut fds,
            Some(&rustix::time::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }),
        ) {
            Ok(_) => fds[0]
                .revents()
                .intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL),
            Err(_) => false,
        }
    }
}
