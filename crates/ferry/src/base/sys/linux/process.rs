//! Handing one socket to a spawned child across `exec`.
//!
//! Soundness: the only unsafe call is `CommandExt::pre_exec`, whose closure
//! runs in the forked child before `exec`; it calls `fcntl(F_SETFD)` alone,
//! which is async-signal-safe and allocates nothing.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Arranges for `fd` to stay open, under the same number, in the child that
/// `cmd` spawns, and returns that number for the child's environment.
pub(crate) fn inherit_in_child(cmd: &mut Command, fd: BorrowedFd<'_>) -> RawFd {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure only clears FD_CLOEXEC with one fcntl, an
    // async-signal-safe call (see the module comment); `raw` is open in the
    // parent at fork time because the caller keeps `fd` borrowed until spawn.
    unsafe {
        cmd.pre_exec(move || {
            let fd = BorrowedFd::borrow_raw(raw);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            Ok(())
        });
    }
    raw
}

/// Takes ownership of a descriptor number inherited from the parent, after
/// checking that it is open and is a socket.
pub(crate) fn adopt_inherited(raw: RawFd) -> io::Result<OwnedFd> {
    adopt_inherited_as(raw, rustix::fs::FileType::Socket, "a socket")
}

/// Takes ownership of the read end of a pipe inherited from the parent
/// (the note a server's invitation leaves), after checking it is one.
pub(crate) fn adopt_inherited_pipe(raw: RawFd) -> io::Result<OwnedFd> {
    adopt_inherited_as(raw, rustix::fs::FileType::Fifo, "a pipe")
}

fn adopt_inherited_as(raw: RawFd, kind: rustix::fs::FileType, what: &str) -> io::Result<OwnedFd> {
    if raw < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "negative descriptor",
        ));
    }
    // SAFETY: we only borrow `raw` for the duration of the checks; fstat on a
    // closed number fails with EBADF and we stop there.
    let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
    let stat = rustix::fs::fstat(borrowed)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != kind {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("inherited descriptor is not {what}"),
        ));
    }
    rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::CLOEXEC)?;
    // SAFETY: the descriptor is open (fstat succeeded) and was handed to this
    // process for ferry alone by the parent's environment variable; it is
    // adopted once, by the caller that consumed that variable.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// A new descriptor for the same open file as `fd` (close-on-exec).
// Used by typed descriptor fields and async clones only.
#[cfg_attr(not(any(feature = "serde", feature = "tokio")), allow(dead_code))]
pub(crate) fn duplicate(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    Ok(rustix::io::fcntl_dupfd_cloexec(fd, 0)?)
}

/// The parent's process id; `None` when the parent is outside this
/// process's pid namespace (this process is the first of a new one, or was
/// spawned into one), where the kernel reports 0. A parent that exited is
/// not seen here: the process was handed to a reaper, whose id this gives.
pub(crate) fn parent_pid() -> Option<u32> {
    rustix::process::getppid().map(|p| p.as_raw_nonzero().get() as u32)
}
