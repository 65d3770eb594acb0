//! Named control sockets: a listening `SOCK_SEQPACKET` socket that
//! unrelated processes connect to ([`bind(2)`](https://man7.org/linux/man-pages/man2/bind.2.html),
//! [`listen(2)`](https://man7.org/linux/man-pages/man2/listen.2.html),
//! [`accept4(2)`](https://man7.org/linux/man-pages/man2/accept4.2.html),
//! [`connect(2)`](https://man7.org/linux/man-pages/man2/connect.2.html)),
//! the peer's credentials (read in `peer.rs`),
//! random tokens ([`getrandom(2)`](https://man7.org/linux/man-pages/man2/getrandom.2.html)),
//! and the one-shot note a server hands a child it starts ([`pipe(2)`](https://man7.org/linux/man-pages/man2/pipe.2.html)).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{FileType, Mode};
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use crate::base::sys::{Credentials, SocketName};

use super::peer::credentials;

use super::socket::ControlSocket;

/// A listening socket, non-blocking; a socket file it made is removed on
/// drop (if it is still the one it made).
#[derive(Debug)]
pub(crate) struct Listener {
    fd: OwnedFd,
    /// The socket file and its inode, for a listener bound to a path.
    file: Option<(PathBuf, u64)>,
}

fn address(name: &SocketName<'_>) -> io::Result<SocketAddrUnix> {
    Ok(match name {
        SocketName::Abstract(bytes) => SocketAddrUnix::new_abstract_name(bytes)?,
        SocketName::Path(path) => SocketAddrUnix::new(*path)?,
    })
}

fn seqpacket(flags: SocketFlags) -> io::Result<OwnedFd> {
    Ok(rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC | flags,
        None,
    )?)
}

impl Listener {
    /// Listens on `name` with room for `backlog` connections not yet
    /// accepted. A socket file is made with mode 0600; one left by a
    /// listener that is gone (connecting to it is refused) is removed and
    /// bound again, while one that a live listener holds gives `AddrInUse`.
    pub(crate) fn bind(name: &SocketName<'_>, backlog: i32) -> io::Result<Self> {
        let fd = seqpacket(SocketFlags::NONBLOCK)?;
        let addr = address(name)?;
        match rustix::net::bind(&fd, &addr) {
            Ok(()) => {}
            Err(rustix::io::Errno::ADDRINUSE) => match name {
                SocketName::Path(path) if is_stale(&addr, path)? => {
                    rustix::fs::unlink(*path)?;
                    rustix::net::bind(&fd, &addr)?;
                }
                _ => return Err(in_use(name)),
            },
            Err(e) => return Err(e.into()),
        }
        let file = match name {
            SocketName::Path(path) => {
                rustix::fs::chmod(*path, Mode::RUSR | Mode::WUSR)?;
                let inode = rustix::fs::stat(*path)?.st_ino;
                Some((path.to_path_buf(), inode))
            }
            SocketName::Abstract(_) => None,
        };
        rustix::net::listen(&fd, backlog)?;
        Ok(Self { fd, file })
    }

    /// Takes one waiting connection, if any (never blocks), with the
    /// credentials its process had when it connected.
    pub(crate) fn accept(&self) -> io::Result<Option<(ControlSocket, Credentials)>> {
        match rustix::net::accept_with(&self.fd, SocketFlags::CLOEXEC) {
            Ok(fd) => {
                let peer = credentials(fd.as_fd())?;
                Ok(Some((ControlSocket::from_fd(fd), peer)))
            }
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Ok(None),
            // The client went before we took it: nothing to take.
            Err(rustix::io::Errno::CONNABORTED) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some((path, inode)) = &self.file {
            // Only the file this listener made: a later server may have
            // reclaimed the name since.
            if rustix::fs::stat(path).is_ok_and(|s| s.st_ino == *inode) {
                let _ = rustix::fs::unlink(path);
            }
        }
    }
}

/// Whether the socket file at `path` is left by a listener that is gone:
/// a socket whose connections are refused.
fn is_stale(addr: &SocketAddrUnix, path: &Path) -> io::Result<bool> {
    let stat = rustix::fs::lstat(path)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Socket {
        return Ok(false);
    }
    let probe = seqpacket(SocketFlags::NONBLOCK)?;
    Ok(match rustix::net::connect(&probe, addr) {
        Err(rustix::io::Errno::CONNREFUSED) => true,
        // Live (connected, or its backlog is full), or not ours to judge.
        _ => false,
    })
}

fn in_use(name: &SocketName<'_>) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("a server already listens at {name}"),
    )
}

/// Connects to the listener at `name`, waiting at most `timeout` for room
/// in its backlog.
pub(crate) fn connect(name: &SocketName<'_>, timeout: Duration) -> io::Result<ControlSocket> {
    let fd = seqpacket(SocketFlags::empty())?;
    let addr = address(name)?;
    // A blocking connect waits for room in the listener's backlog at most
    // this long (`SO_SNDTIMEO`); every later send is non-blocking anyway.
    let wait = Some(timeout.max(Duration::from_millis(1)));
    rustix::net::sockopt::set_socket_timeout(&fd, rustix::net::sockopt::Timeout::Send, wait)?;
    match rustix::net::connect(&fd, &addr) {
        Ok(()) => Ok(ControlSocket::from_fd(fd)),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::CONNREFUSED) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no server listens at {name}"),
        )),
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INPROGRESS) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the server at {name} took no new connection within {timeout:?}"),
        )),
        Err(e) => Err(e.into()),
    }
}

/// This process's effective user id.
pub(crate) fn effective_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Fills `buf` with bytes from the kernel's random number generator.
pub(crate) fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::rand::getrandom(&mut buf[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Waits until one of `fds` is readable (or hung up), or `deadline`
/// passes; returns which are.
pub(crate) fn wait_readable(
    fds: &[BorrowedFd<'_>],
    deadline: Option<Instant>,
) -> io::Result<Vec<bool>> {
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .collect();
    let timeout =
        deadline.map(|d| super::socket::timespec(d.saturating_duration_since(Instant::now())));
    match rustix::event::poll(&mut polled, timeout.as_ref()) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(polled.iter().map(|p| !p.revents().is_empty()).collect())
}

/// A pipe holding `note` (at most 4,096 bytes, written whole), of which
/// the read end is returned: a child that inherits it reads the note once,
/// and no other process can.
pub(crate) fn note_pipe(note: &[u8]) -> io::Result<OwnedFd> {
    if note.len() > 4096 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "note over 4,096 bytes",
        ));
    }
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let written = rustix::io::write(&write, note)?;
    if written != note.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "note written in part",
        ));
    }
    Ok(read)
}

/// Reads the note from the read end of a [`note_pipe`] (at most `most`
/// bytes, up to the end of the pipe), waiting at most until `deadline`.
///
/// The writer closed its end before the reader started, so an honest note
/// is there whole at once; a writer that holds its end open (or writes
/// slowly) gets `TimedOut` at the deadline. A descriptor that is not a
/// pipe, or a note over `most` bytes, is `InvalidData`: what the writer
/// handed over is wrong.
pub(crate) fn read_note(fd: &OwnedFd, most: usize, deadline: Instant) -> io::Result<Vec<u8>> {
    let stat = rustix::fs::fstat(fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Fifo {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the inherited descriptor is not a pipe",
        ));
    }
    let mut note = vec![0u8; most + 1];
    let mut len = 0;
    loop {
        if !wait_readable(&[fd.as_fd()], Some(deadline))?[0] {
            if Instant::now() < deadline {
                continue; // interrupted
            }
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the note's writer kept its pipe open with {len} bytes written"),
            ));
        }
        match rustix::io::read(fd, &mut note[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(rustix::io::Errno::INTR | rustix::io::Errno::AGAIN) => {}
            Err(e) => return Err(e.into()),
        }
        if len > most {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the note is over {most} bytes"),
            ));
        }
    }
    note.truncate(len);
    Ok(note)
}
