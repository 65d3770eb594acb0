//! ferry through tokio (`ferry-async`): each side runs a current-thread
//! tokio runtime and awaits `AsyncSender::send` and `AsyncReceiver::recv`,
//! so a waiting side sleeps in the runtime's epoll on the pipe's doorbell
//! and is woken by the peer ringing it: the cost an async service pays
//! over the blocking `ferry` rows.

use std::process::Command;

use ::ferry::{AsyncReceiver, AsyncSender, RecvError, Wait};
use tokio::runtime::Runtime;

use super::ferry::{pipe_from_parent, spawn_with_pipe};
use super::{Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// ferry awaited on tokio.
#[derive(Debug)]
pub struct FerryAsync;

impl Transport for FerryAsync {
    fn name(&self) -> &'static str {
        "ferry-async"
    }

    fn wait(&self) -> &'static str {
        "tokio"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, pipe) = spawn_with_pipe(command, Wait::Sleep)?;
        Ok(Connection::new(child, Box::new(AsyncEndpoint::new(pipe)?)))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        Ok(Box::new(AsyncEndpoint::new(pipe_from_parent()?)?))
    }
}

/// A pipe end split into its async halves, with the runtime that drives
/// them.
pub(super) struct AsyncEndpoint {
    runtime: Runtime,
    tx: AsyncSender,
    rx: AsyncReceiver,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl AsyncEndpoint {
    pub(super) fn new(pipe: ::ferry::Pipe) -> Result<Self, Error> {
        let runtime = runtime()?;
        let (tx, rx) = pipe.split();
        let (tx, rx) = {
            let _inside = runtime.enter();
            let tx = tx.into_async().context("the async sender")?;
            let rx = rx.into_async().context("the async receiver")?;
            (tx, rx)
        };
        Ok(Self {
            runtime,
            tx,
            rx,
            out: Vec::new(),
            inbox: Vec::new(),
        })
    }
}

impl Endpoint for AsyncEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.runtime
            .block_on(self.tx.send(&self.out))
            .context("sending on the async ferry pipe")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.runtime.block_on(self.rx.recv()) {
            Ok(message) => {
                self.inbox = message;
                Ok(Some(&self.inbox))
            }
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on the async ferry pipe"),
        }
    }
}

/// A current-thread tokio runtime with its I/O driver, as each side of the
/// tokio rows runs.
pub(super) fn runtime() -> Result<Runtime, Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build();
    runtime.context("starting a tokio runtime")
}
