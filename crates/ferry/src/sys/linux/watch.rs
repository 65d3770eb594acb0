//! Hang-up watching with [`epoll(7)`](https://man7.org/linux/man-pages/man7/epoll.7.html):
//! one epoll instance on which many control sockets are registered for
//! `EPOLLRDHUP` alone (`EPOLLHUP` and `EPOLLERR` are always reported), one
//! shot each. A thread blocked in [`HangUpWatch::wait`] is woken by the
//! kernel when a peer's end closes (its process exited or was killed) and
//! by nothing else: records arriving on a socket do not wake it.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};

use super::socket::ControlSocket;

/// Most hang-ups taken from the kernel in one wait.
const BATCH: usize = 32;

/// An epoll instance watching control sockets for their peer's hang-up.
#[derive(Debug)]
pub(crate) struct HangUpWatch {
    epoll: OwnedFd,
}

impl HangUpWatch {
    /// A new, empty watch ([`epoll_create1(2)`](https://man7.org/linux/man-pages/man2/epoll_create1.2.html), close-on-exec).
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            epoll: epoll::create(CreateFlags::CLOEXEC)?,
        })
    }

    /// Watches `socket` for its peer's hang-up, reported once under `key`
    /// ([`epoll_ctl(2)`](https://man7.org/linux/man-pages/man2/epoll_ctl.2.html)).
    pub(crate) fn add(&self, socket: &ControlSocket, key: u64) -> io::Result<()> {
        let flags = EventFlags::RDHUP | EventFlags::ONESHOT;
        Ok(epoll::add(
            &self.epoll,
            socket.as_fd(),
            EventData::new_u64(key),
            flags,
        )?)
    }

    /// Stops watching `socket` (before it is closed). A socket that was
    /// never added, or already closed, is no error worth reporting.
    pub(crate) fn remove(&self, socket: &ControlSocket) {
        let _ = epoll::delete(&self.epoll, socket.as_fd());
    }

    /// Blocks, without a timeout, until at least one watched socket's peer
    /// has hung up, and appends their keys to `keys` ([`epoll_wait(2)`](https://man7.org/linux/man-pages/man2/epoll_wait.2.html)).
    /// A signal ends the wait with no keys.
    pub(crate) fn wait(&self, keys: &mut Vec<u64>) -> io::Result<()> {
        let mut events = [MaybeUninit::<Event>::uninit(); BATCH];
        match epoll::wait(&self.epoll, &mut events, None) {
            Ok((ready, _)) => {
                keys.extend(ready.iter().map(|e| e.data.u64()));
                Ok(())
            }
            Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
