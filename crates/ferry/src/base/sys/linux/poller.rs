//! Waiting on many descriptors at once with [`epoll(7)`](https://man7.org/linux/man-pages/man7/epoll.7.html).
//!
//! Two uses. The process's hang-up watcher registers every link's control
//! socket for [`Interest::HangUp`] alone (`EPOLLRDHUP`, one shot;
//! `EPOLLHUP` and `EPOLLERR` are always reported), so it is woken when a
//! peer's end closes and by nothing else: records arriving do not wake it;
//! and the peer process's pidfd, where there is one, for
//! [`Interest::Exited`] (`EPOLLIN`, one shot: readable once it exits).
//! A set of receivers waited on together registers their doorbells for
//! [`Interest::Readable`].

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};

/// Most events taken from the kernel in one wait.
const BATCH: usize = 32;

/// What a registered descriptor is watched for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interest {
    /// Its peer's hang-up, reported once.
    HangUp,
    /// Readable (level-triggered: reported while it stays readable).
    Readable,
    /// A process handle's process exited (readable), reported once.
    Exited,
}

/// An epoll instance.
#[derive(Debug)]
pub(crate) struct Poller {
    epoll: OwnedFd,
}

impl Poller {
    /// A new, empty poller ([`epoll_create1(2)`](https://man7.org/linux/man-pages/man2/epoll_create1.2.html), close-on-exec).
    pub(crate) fn new() -> io::Result<Self> {
        Ok(Self {
            epoll: epoll::create(CreateFlags::CLOEXEC)?,
        })
    }

    /// Watches `fd` for `interest`, reported under `key`
    /// ([`epoll_ctl(2)`](https://man7.org/linux/man-pages/man2/epoll_ctl.2.html)).
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, key: u64, interest: Interest) -> io::Result<()> {
        Ok(epoll::add(
            &self.epoll,
            fd,
            EventData::new_u64(key),
            flags(interest),
        )?)
    }

    /// [`Poller::add`], taking over a registration of the same descriptor
    /// number and file left by a watch that ended without removing it. The
    /// kernel keeps a registration until the file's last descriptor is
    /// closed, not the one registered: a process handle received again
    /// (the same file) may land on the number an old one had, and `add`
    /// would fail with `EEXIST` while the old watch, keyed to a link that
    /// is gone, stays. Only the hang-up watcher uses this, whose
    /// registrations are never removed one by one (see its `unwatch`).
    pub(crate) fn add_or_take_over(
        &self,
        fd: BorrowedFd<'_>,
        key: u64,
        interest: Interest,
    ) -> io::Result<()> {
        let data = EventData::new_u64(key);
        match epoll::add(&self.epoll, fd, data, flags(interest)) {
            Err(rustix::io::Errno::EXIST) => {
                Ok(epoll::modify(&self.epoll, fd, data, flags(interest))?)
            }
            done => Ok(done?),
        }
    }

    /// Stops watching `fd` ([`epoll_ctl(2)`](https://man7.org/linux/man-pages/man2/epoll_ctl.2.html),
    /// `EPOLL_CTL_DEL`); `NotFound` if it was not watched.
    pub(crate) fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        Ok(epoll::delete(&self.epoll, fd)?)
    }

    /// Waits until a watched descriptor is ready, or `timeout` passes
    /// (`None`: no timeout), and appends the ready keys to `keys`
    /// ([`epoll_wait(2)`](https://man7.org/linux/man-pages/man2/epoll_wait.2.html)).
    /// A signal ends the wait with no keys.
    pub(crate) fn wait(&self, keys: &mut Vec<u64>, timeout: Option<Duration>) -> io::Result<()> {
        let mut events = [MaybeUninit::<Event>::uninit(); BATCH];
        let timeout = timeout.map(|t| rustix::time::Timespec {
            tv_sec: i64::try_from(t.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        match epoll::wait(&self.epoll, &mut events, timeout.as_ref()) {
            Ok((ready, _)) => {
                keys.extend(ready.iter().map(|e| e.data.u64()));
                Ok(())
            }
            Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// The epoll flags for `interest`.
fn flags(interest: Interest) -> EventFlags {
    match interest {
        Interest::HangUp => EventFlags::RDHUP | EventFlags::ONESHOT,
        Interest::Readable => EventFlags::IN,
        Interest::Exited => EventFlags::IN | EventFlags::ONESHOT,
    }
}

impl AsFd for Poller {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A registration of the same descriptor and file (as a process
    /// handle received again on the number an old one had leaves it) is
    /// taken over under the new key, and reports there; a plain `add` is
    /// refused.
    #[test]
    fn a_stale_registration_is_taken_over_under_the_new_key() {
        let poller = Poller::new().unwrap();
        let (a, b) = rustix::net::socketpair(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::SEQPACKET,
            rustix::net::SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        poller.add(a.as_fd(), 1, Interest::HangUp).unwrap();
        assert!(poller.add(a.as_fd(), 2, Interest::HangUp).is_err());
        poller
            .add_or_take_over(a.as_fd(), 2, Interest::HangUp)
            .unwrap();
        drop(b);
        let mut keys = Vec::new();
        poller
            .wait(&mut keys, Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(keys, [2]);
    }
}
