//! A Unix stream socket, length-prefixed. The parent listens at a fresh path
//! in the temporary directory, names it to the child in the environment, and
//! removes it as soon as the child has connected.

use std::os::unix::net::{UnixListener, UnixStream as Stream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use super::framed::Framed;
use super::{ChildGuard, Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// The environment variable naming the socket's path to the child.
const ENV: &str = "FERRY_BENCH_SOCKET";
/// How long the child has to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `std::os::unix::net::UnixStream`, one socket both ways.
#[derive(Debug)]
pub struct UnixStream;

impl Transport for UnixStream {
    fn name(&self) -> &'static str {
        "unix-stream"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, stream) = spawn_connected(command, ENV, "sock")?;
        let endpoint = endpoint(blocking(stream)?)?;
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let path = super::from_parent(ENV)?;
        let stream = Stream::connect(Path::new(&path))
            .context(format!("connecting to {}", Path::new(&path).display()))?;
        endpoint(stream)
    }
}

fn endpoint(stream: Stream) -> Result<Box<dyn Endpoint>, Error> {
    let reader = stream.try_clone().context("cloning the socket")?;
    Ok(Box::new(Framed::new(reader, stream)))
}

/// Starts `command` and waits for it to connect to a socket at a fresh
/// path ending `.{extension}`, named to it in the environment variable
/// `env`; gives up if it exits or takes too long.
pub(super) fn spawn_connected(
    mut command: Command,
    env: &str,
    extension: &str,
) -> Result<(ChildGuard, Stream), Error> {
    let path = SocketPath::fresh(extension);
    let listener =
        UnixListener::bind(&path.0).context(format!("listening at {}", path.0.display()))?;
    listener
        .set_nonblocking(true)
        .context("making the listener non-blocking")?;
    command.env(env, &path.0);
    let child = command.spawn().context("spawning the child")?;
    let mut child = ChildGuard::new(child);
    let stream = accept_within(&mut child, || match listener.accept() {
        Ok((stream, _)) => Ok(Some(stream)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e).context("accepting the child's connection"),
    })?;
    Ok((child, stream))
}

/// Waits for the child to connect: `try_accept` is the connection, or
/// `None` while none is waiting. Gives up if the child exits or takes too
/// long.
pub(super) fn accept_within<T>(
    child: &mut ChildGuard,
    mut try_accept: impl FnMut() -> Result<Option<T>, Error>,
) -> Result<T, Error> {
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    loop {
        if let Some(connection) = try_accept()? {
            return Ok(connection);
        }
        if let Some(status) = child
            .try_status()
            .context("asking whether the child exited")?
        {
            return Err(Error::new(format!(
                "the child exited ({status}) before connecting"
            )));
        }
        if Instant::now() > deadline {
            return Err(Error::new(format!(
                "the child did not connect within {CONNECT_TIMEOUT:?}"
            )));
        }
        sleep(Duration::from_millis(1));
    }
}

fn blocking(stream: Stream) -> Result<Stream, Error> {
    stream
        .set_nonblocking(false)
        .context("making the socket blocking")?;
    Ok(stream)
}

/// A socket path unique to this process and call, ending `.{extension}`,
/// removed when dropped.
pub(super) struct SocketPath(pub(super) PathBuf);

impl SocketPath {
    pub(super) fn fresh(extension: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        // Relaxed: only uniqueness matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("ferry-bench-{}-{n}.{extension}", std::process::id());
        let path = std::env::temp_dir().join(name);
        // A socket left by an earlier process with this id would make
        // binding fail; nothing else would have this name.
        let _ = std::fs::remove_file(&path);
        Self(path)
    }
}

impl Drop for SocketPath {
    fn drop(&mut self) {
        // It may not exist if binding failed.
        let _ = std::fs::remove_file(&self.0);
    }
}
