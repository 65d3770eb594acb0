//! A Unix stream socket driven by tokio (`unix-stream-tokio`): each side
//! runs a current-thread runtime and awaits length-prefixed reads and
//! writes, as an async service would. The baseline for `ferry-async`: the
//! same runtime and reactor, the OS's socket instead of ferry's ring.

use std::os::unix::net::UnixStream as StdStream;
use std::process::Command;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::runtime::Runtime;

use super::ferry_async::runtime;
use super::framed::{HEADER, MAX_MESSAGE};
use super::unix_stream::{connect_to_parent, spawn_connected};
use super::{Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// The environment variable naming the socket's path to the child.
const ENV: &str = "FERRY_BENCH_TOKIO_SOCKET";

/// tokio's `UnixStream`, one socket both ways.
#[derive(Debug)]
pub struct UnixStreamTokio;

impl Transport for UnixStreamTokio {
    fn name(&self) -> &'static str {
        "unix-stream-tokio"
    }

    fn wait(&self) -> &'static str {
        "tokio"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, stream) = spawn_connected(command, ENV, "tsock")?;
        let endpoint = Box::new(TokioEndpoint::new(stream)?);
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        Ok(Box::new(TokioEndpoint::new(connect_to_parent(ENV)?)?))
    }
}

/// The socket's two halves on a current-thread runtime.
struct TokioEndpoint {
    runtime: Runtime,
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// The next message: header, then payload.
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl TokioEndpoint {
    fn new(stream: StdStream) -> Result<Self, Error> {
        let runtime = runtime()?;
        stream
            .set_nonblocking(true)
            .context("making the socket non-blocking")?;
        let stream = {
            let _inside = runtime.enter();
            UnixStream::from_std(stream).context("handing the socket to tokio")?
        };
        let (reader, writer) = stream.into_split();
        Ok(Self {
            runtime,
            reader: BufReader::with_capacity(64 * 1024, reader),
            writer,
            out: Vec::new(),
            inbox: Vec::new(),
        })
    }
}

impl Endpoint for TokioEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        let header = u32::try_from(len).context("a message longer than 4 GiB")?;
        self.out.clear();
        self.out.extend_from_slice(&header.to_le_bytes());
        self.out.resize(HEADER + len, 0);
        Ok(&mut self.out[HEADER..])
    }

    fn send(&mut self) -> Result<(), Error> {
        let (writer, out) = (&mut self.writer, &self.out);
        self.runtime
            .block_on(writer.write_all(out))
            .context("writing to the socket")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        let (reader, inbox) = (&mut self.reader, &mut self.inbox);
        let got = self.runtime.block_on(async {
            let mut header = [0u8; HEADER];
            match reader.read_exact(&mut header).await {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
                Err(e) => return Err(e),
            }
            let len = u32::from_le_bytes(header) as usize;
            if len > MAX_MESSAGE {
                return Err(std::io::Error::other("message length past the limit"));
            }
            inbox.resize(len, 0);
            reader.read_exact(inbox).await.map(|_| true)
        });
        match got.context("reading from the socket")? {
            true => Ok(Some(&self.inbox)),
            false => Ok(None),
        }
    }
}
