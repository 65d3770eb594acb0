//! Doorbells: an [`eventfd(2)`](https://man7.org/linux/man-pages/man2/eventfd.2.html)
//! that a waiting side of a ring hands the other side, which writes it
//! after changing the ring while the waiter says it waits that way. The
//! waiter (a `Select`, an async task, a user's own poll loop) waits for it
//! to become readable together with anything else.
//!
//! Non-blocking on both sides: a write that would overflow the counter
//! means it is readable already, and a read of an empty one has nothing to
//! clear.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::event::{EventfdFlags, eventfd};
use rustix::fs::OFlags;

use crate::wire::Violation;

/// An eventfd used as a doorbell.
#[derive(Debug)]
pub(crate) struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell, not rung (non-blocking, close-on-exec).
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            fd: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        })
    }

    /// Adopts a doorbell a peer sent: it must be an eventfd (anything else,
    /// a pipe or a file, could block or be harmed by our writes); it is
    /// made non-blocking (the peer's copy shares that flag, as it should).
    pub(crate) fn from_peer(fd: OwnedFd) -> Result<Self, Violation> {
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        match std::fs::read_link(path) {
            Ok(target) if target.as_os_str() == "anon_inode:[eventfd]" => {}
            _ => return Err(Violation::DoorbellNotEventfd),
        }
        let flags = rustix::fs::fcntl_getfl(&fd).map_err(|_| Violation::DoorbellNotEventfd)?;
        rustix::fs::fcntl_setfl(&fd, flags | OFlags::NONBLOCK)
            .map_err(|_| Violation::DoorbellNotEventfd)?;
        Ok(Self { fd })
    }

    /// Rings: makes the descriptor readable.
    pub(crate) fn ring(&self) {
        // EAGAIN: the counter is full, so it is readable already.
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Clears: the descriptor is no longer readable until rung again.
    pub(crate) fn clear(&self) {
        let mut buf = [0u8; 8];
        // EAGAIN: it was not rung.
        let _ = rustix::io::read(&self.fd, &mut buf);
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
