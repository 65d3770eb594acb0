//! One record with at most one descriptor attached, over a
//! `SOCK_SEQPACKET` socket: [`sendmsg(2)`](https://man7.org/linux/man-pages/man2/sendmsg.2.html)
//! and [`recvmsg(2)`](https://man7.org/linux/man-pages/man2/recvmsg.2.html)
//! with `SCM_RIGHTS` ([`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)),
//! as ferry's own control socket does: the floor of passing a descriptor.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

use crate::error::{Context, Error};

/// Sends `bytes` as one record, with `fd` attached if there is one.
pub fn send(socket: &OwnedFd, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> Result<(), Error> {
    let fds = fd.map(|fd| [fd]);
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if let Some(fds) = &fds
        && !control.push(SendAncillaryMessage::ScmRights(fds))
    {
        return Err(Error::new("no room for a descriptor in the control buffer"));
    }
    loop {
        let iov = [IoSlice::new(bytes)];
        match rustix::net::sendmsg(socket, &iov, &mut control, SendFlags::NOSIGNAL) {
            Ok(n) if n == bytes.len() => return Ok(()),
            Ok(n) => return Err(Error::new(format!("sent {n} bytes of {}", bytes.len()))),
            Err(Errno::INTR) => {}
            Err(e) => return Err(e).context("sendmsg"),
        }
    }
}

/// Receives one record into `buf`: its length (0 once the peer has
/// closed) and the descriptor that came with it, if one did.
pub fn recv(socket: &OwnedFd, buf: &mut [u8]) -> Result<(usize, Option<OwnedFd>), Error> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = loop {
        let mut iov = [IoSliceMut::new(buf)];
        match rustix::net::recvmsg(socket, &mut iov, &mut control, RecvFlags::CMSG_CLOEXEC) {
            Ok(msg) => break msg,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e).context("recvmsg"),
        }
    };
    if msg
        .flags
        .intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC)
    {
        return Err(Error::new("a record or its descriptors were cut short"));
    }
    let mut fds = control.drain().flat_map(|message| match message {
        RecvAncillaryMessage::ScmRights(rights) => rights.collect(),
        _ => Vec::new(),
    });
    let fd = fds.next();
    match fds.next() {
        None => Ok((msg.bytes, fd)),
        Some(_) => Err(Error::new("more than one descriptor came with a record")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_goes_there_and_back() {
        let (a, b) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        let (r, _w) = rustix::pipe::pipe().unwrap();
        send(&a, b"hi", Some(r.as_fd())).unwrap();
        let mut buf = [0; 16];
        let (n, fd) = recv(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hi");
        let ino = |fd: BorrowedFd<'_>| rustix::fs::fstat(fd).unwrap().st_ino;
        assert_eq!(ino(fd.unwrap().as_fd()), ino(r.as_fd()));
        send(&b, b"no fd", None).unwrap();
        let (n, fd) = recv(&a, &mut buf).unwrap();
        assert_eq!((&buf[..n], fd.is_none()), (&b"no fd"[..], true));
        drop(b);
        assert_eq!(recv(&a, &mut buf).unwrap().0, 0);
    }
}
