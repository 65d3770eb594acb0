//! A Unix stream socket, length-prefixed. The parent listens at a fresh path
//! in the temporary directory, names it to the child in the environment, and
//! removes it as soon as the child has connected.

use std::io::ErrorKind;
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
        stream
            .set_nonblocking(false)
            .context("making the socket blocking")?;
        let endpoint = endpoint(stream)?;
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        endpoint(connect_to_parent(ENV)?)
    }
}

fn endpoint(stream: Stream) -> Result<Box<dyn Endpoint>, Error> {
    let reader = stream.try_clone().context("cloning the socket")?;
    Ok(Box::new(Framed::new(reader, stream)))
}

/// In the child: a stream connected to the path the parent named in the
/// environment variable `env`.
pub(super) fn connect_to_parent(env: &str) -> Result<Stream, Error> {
    let path = PathBuf::from(super::from_parent(env)?);
    Stream::connect(&path).context(format!("connecting to {}", path.display()))
}

/// Starts `command` and waits for it to connect to a stream socket, as
/// [`spawn_listening`] does; the stream is non-blocking.
pub(super) fn spawn_connected(
    command: Command,
    env: &str,
    extension: &str,
) -> Result<(ChildGuard, Stream), Error> {
    let listen = |path: &Path| {
        let listener =
            UnixListener::bind(path).context(format!("listening at {}", path.display()))?;
        listener
            .set_nonblocking(true)
            .context("making the listener non-blocking")?;
        Ok(listener)
    };
    let accept = |listener: &UnixListener| match listener.accept() {
        Ok((stream, _)) => Ok(Some(stream)),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e).context("accepting the child's connection"),
    };
    spawn_listening(command, env, extension, listen, accept)
}

/// Starts `command` and waits for it to connect to the listener `listen`
/// makes at a fresh path ending `.{extension}`, named to the child in the
/// environment variable `env`; the path is removed once it has connected.
/// `try_accept` is the connection, or `None` while none is waiting.
pub(super) fn spawn_listening<L, T>(
    mut command: Command,
    env: &str,
    extension: &str,
    listen: impl FnOnce(&Path) -> Result<L, Error>,
    mut try_accept: impl FnMut(&L) -> Result<Option<T>, Error>,
) -> Result<(ChildGuard, T), Error> {
    let path = SocketPath::fresh(extension);
    let listener = listen(&path.0)?;
    command.env(env, &path.0);
    let mut child = ChildGuard::new(command.spawn().context("spawning the child")?);
    let connection = accept_within(&mut child, || try_accept(&listener))?;
    Ok((child, connection))
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
        let status = child.try_status();
        if let Some(status) = status.context("asking whether the child exited")? {
            let why = format!("the child exited ({status}) before connecting");
            return Err(Error::new(why));
        }
        if Instant::now() > deadline {
            let why = format!("the child did not connect within {CONNECT_TIMEOUT:?}");
            return Err(Error::new(why));
        }
        sleep(Duration::from_millis(1));
    }
}

/// A socket path unique to this process and call, ending `.{extension}`,
/// removed when dropped.
struct SocketPath(PathBuf);

impl SocketPath {
    fn fresh(extension: &str) -> Self {
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
