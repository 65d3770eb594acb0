//! The process at the other end of a link: its credentials
//! (`SO_PEERCRED`, [`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)),
//! and a pidfd that becomes readable when it exits
//! ([`pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html),
//! or `SO_PEERPIDFD` on a connected socket, Linux 6.5 and later).
//!
//! Both socket options are read with a raw `getsockopt`: rustix offers no
//! `SO_PEERPIDFD`, and its `SO_PEERCRED` builds a non-zero `Pid` from the
//! pid the kernel reports, which is 0 for a peer outside this process's pid
//! namespace.
//!
//! Soundness: each `getsockopt` writes into a local of the exact type the
//! kernel fills for that option (`struct ucred`, an `int`), given with its
//! size; the returned length is checked before the value is used, and a
//! descriptor the kernel installed is owned at once.
#![allow(unsafe_code)]

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags};

use crate::base::sys::Credentials;

/// `SO_PEERPIDFD` (`asm-generic/socket.h`; SPARC numbers it apart).
#[cfg(any(target_arch = "sparc", target_arch = "sparc64"))]
const SO_PEERPIDFD: libc::c_int = 0x0056;
#[cfg(not(any(target_arch = "sparc", target_arch = "sparc64")))]
const SO_PEERPIDFD: libc::c_int = 77;

/// A handle on a process (a pidfd): it names that process and no other,
/// even after its id is reused, and is readable once the process has
/// exited (dead or a zombie).
#[derive(Debug)]
pub(crate) struct Process {
    fd: OwnedFd,
}

impl Process {
    /// A handle on process `pid` (close-on-exec); `Ok(None)` where the
    /// kernel has no pidfds (before 5.3) or `pid` is 0 (not visible in
    /// this pid namespace); `NotFound` if no such process lives.
    ///
    /// A process that is not this one's child may exit and have its id
    /// reused before this call: the caller checks afterwards that the
    /// process it meant is still the one with that id.
    pub(crate) fn open(pid: u32) -> io::Result<Option<Self>> {
        let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
            return Ok(None);
        };
        match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => Ok(Some(Self { fd })),
            Err(Errno::NOSYS) => Ok(None),
            Err(Errno::SRCH) => Err(gone()),
            Err(e) => Err(e.into()),
        }
    }

    /// A handle on the process at the other end of the connected Unix
    /// socket `socket`: the one that connected (for a server's socket),
    /// listened (for a client's), or made the socket pair (`SO_PEERPIDFD`,
    /// close-on-exec). `Ok(None)` where the kernel has no such option
    /// (before 6.5) or recorded no peer; `NotFound` if that process has
    /// already exited and the kernel cannot name it any more (kernels
    /// before 6.16 refuse a pidfd for a reaped process).
    pub(crate) fn of_peer(socket: BorrowedFd<'_>) -> io::Result<Option<Self>> {
        let mut raw: libc::c_int = -1;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `raw` is an `int`, the type `SO_PEERPIDFD` writes, and
        // `len` gives its size (see the module comment); `socket` is open
        // for the call.
        let done = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_PEERPIDFD,
                (&raw mut raw).cast(),
                &mut len,
            )
        };
        if done != 0 {
            let e = io::Error::last_os_error();
            return match Errno::from_io_error(&e) {
                Some(Errno::NOPROTOOPT | Errno::NOSYS | Errno::NODATA) => Ok(None),
                Some(Errno::SRCH | Errno::INVAL) => Err(gone()),
                _ => Err(e),
            };
        }
        if len as usize != size_of::<libc::c_int>() || raw < 0 {
            return Err(io::Error::other("SO_PEERPIDFD gave no descriptor"));
        }
        // SAFETY: the kernel installed `raw` in this process for this call
        // (it returned 0 with an `int` of a non-negative number), and no
        // one else knows it: it is owned here once.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Some(Self { fd }))
    }

    /// The handle a peer sent on a process it vouches for (an
    /// introduction). Not checked to be a pidfd: whatever it is, it is
    /// watched once (one-shot) and polled, so a false one can only make the
    /// links it stands for look down, and those are the sender's own.
    pub(crate) fn from_peer(fd: crate::base::sys::PeerFd) -> Self {
        Self {
            fd: fd.into_owned(),
        }
    }

    /// Whether the process has exited, without blocking (one `poll`).
    pub(crate) fn exited(&self) -> bool {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let now = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match rustix::event::poll(&mut fds, Some(&now)) {
            Ok(_) => !fds[0].revents().is_empty(),
            Err(_) => false,
        }
    }
}

impl AsFd for Process {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "the peer process has exited")
}

/// The credentials of the process at the other end of a connected Unix
/// socket, as they were when it connected (or, for a client's socket, when
/// the server listened); its pid is `None` when that process is outside
/// this one's pid namespace (the kernel reports 0).
pub(crate) fn credentials(fd: BorrowedFd<'_>) -> io::Result<Credentials> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is a `struct ucred`, the type `SO_PEERCRED` writes,
    // and `len` gives its size (see the module comment); `fd` is open for
    // the call.
    let done = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    if len as usize != size_of::<libc::ucred>() {
        return Err(io::Error::other("SO_PEERCRED gave a short answer"));
    }
    Ok(Credentials {
        pid: u32::try_from(cred.pid).ok().filter(|&pid| pid != 0),
        uid: cred.uid,
        gid: cred.gid,
    })
}
