//! Doorbells: a connected pair of Unix datagram sockets
//! ([`socketpair(2)`](https://man7.org/linux/man-pages/man2/socketpair.2.html),
//! `SOCK_DGRAM`). The side of a ring that waits in a poll loop (a `Select`,
//! an async task, a user's own epoll) keeps one end, the [`Doorbell`],
//! which is readable once rung; the other end, a [`Ringer`], goes to
//! whoever changes the ring, which sends a one-byte datagram through it
//! while the waiter says it waits that way.
//!
//! Why sockets and not an eventfd: a descriptor shared with a peer shares
//! its file status flags, so a peer could clear `O_NONBLOCK` on an eventfd
//! and then make our write block by filling its counter. A socket call
//! takes `MSG_DONTWAIT` per call instead, so no setting of the peer's can
//! make a ring (or a clear) wait; and the two ends of a pair are separate
//! files, so the waiter's end is the waiter's alone.

use crate::base::sync::{AtomicU64, Ordering};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

use crate::base::sys::PeerFd;
use crate::base::wire::Violation;

/// Datagrams a clear takes at most: a peer ringing faster than that leaves
/// the doorbell readable, so the waiter looks at its ring once more.
const CLEAR_MOST: usize = 64;

/// The waiting end: readable once rung, until cleared.
#[derive(Debug)]
pub(crate) struct Doorbell {
    fd: OwnedFd,
    /// Clears so far, counted once each has taken its datagrams.
    clears: AtomicU64,
    /// The count of clears when [`Doorbell::ring_known`] last rang it:
    /// equal to `clears` while that ring is still there to read.
    rung_at: AtomicU64,
}

/// The ringing end.
#[derive(Debug)]
pub(crate) struct Ringer {
    fd: RingerFd,
}

/// A ringer's descriptor: made here, or sent by a peer (then closed off
/// this thread, as its queue may hold descriptors whose close waits).
#[derive(Debug)]
enum RingerFd {
    Own(OwnedFd),
    Peer(PeerFd),
}

impl AsFd for RingerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Self::Own(fd) => fd.as_fd(),
            Self::Peer(fd) => fd.as_fd(),
        }
    }
}

impl Doorbell {
    /// A new doorbell, not rung, and the end that rings it.
    pub(crate) fn new() -> io::Result<(Self, Ringer)> {
        let (a, b) = rustix::net::socketpair(
            AddressFamily::UNIX,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
            None,
        )?;
        Ok((
            Self {
                fd: a,
                clears: AtomicU64::new(0),
                rung_at: AtomicU64::new(u64::MAX),
            },
            Ringer {
                fd: RingerFd::Own(b),
            },
        ))
    }

    /// Clears: takes the datagrams rung so far (at most [`CLEAR_MOST`]),
    /// never waiting.
    pub(crate) fn clear(&self) {
        let mut byte = [0u8; 1];
        for _ in 0..CLEAR_MOST {
            if rustix::net::recv(&self.fd, &mut byte, RecvFlags::DONTWAIT).is_err() {
                break;
            }
        }
        // Counted after the datagrams are taken: a `ring_known` that read
        // the count before this clear finished sees it change.
        self.clears.fetch_add(1, Ordering::SeqCst);
    }

    /// Rings this doorbell through `ringer` (its own ringing end) and
    /// remembers that it is readable until the next clear.
    pub(crate) fn ring_known(&self, ringer: &Ringer) {
        let clears = self.clears.load(Ordering::SeqCst);
        if ringer.ring_queued() {
            self.rung_at.store(clears, Ordering::SeqCst);
        }
    }

    /// Whether this doorbell is surely readable: [`Doorbell::ring_known`]
    /// rang it and no clear has run since (only a clear reads it). False
    /// says nothing.
    pub(crate) fn known_readable(&self) -> bool {
        self.rung_at.load(Ordering::SeqCst) == self.clears.load(Ordering::SeqCst)
    }
}

impl Ringer {
    /// Adopts the ringing end a peer sent: it must be a Unix datagram
    /// socket (anything else is refused: a pipe or a file could be harmed
    /// by our writes).
    pub(crate) fn from_peer(fd: PeerFd) -> Result<Self, Violation> {
        let unix = rustix::net::sockopt::socket_domain(&fd).ok() == Some(AddressFamily::UNIX);
        let dgram = rustix::net::sockopt::socket_type(&fd).ok() == Some(SocketType::DGRAM);
        match unix && dgram {
            true => Ok(Self {
                fd: RingerFd::Peer(fd),
            }),
            false => Err(Violation::DoorbellNotDatagramSocket),
        }
    }

    /// Rings, never waiting: a full queue means it is readable already, and
    /// a peer that closed its end has no one to wake.
    pub(crate) fn ring(&self) {
        let _ = self.ring_queued();
    }

    /// Rings, never waiting; whether the doorbell is now readable (the
    /// datagram queued, or the queue full of earlier ones).
    pub(crate) fn ring_queued(&self) -> bool {
        match rustix::net::send(&self.fd, &[1], SendFlags::DONTWAIT | SendFlags::NOSIGNAL) {
            Ok(_) => true,
            Err(e) => e == rustix::io::Errno::AGAIN,
        }
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for Ringer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
