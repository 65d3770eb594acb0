//! ferry's pipes, with each of its wait strategies.
//!
//! The parent spawns the child with [`::ferry::PipeOptions::spawn`]; the
//! child takes its end with [`::ferry::Pipe::from_parent`] and sets the same
//! wait strategy on it, since an end adopted from the parent starts with the
//! default.

use std::process::Command;

use ::ferry::{PipeOptions, RecvError, Wait};

use super::{Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// ferry with one wait strategy on both ends.
#[derive(Debug)]
pub struct Ferry {
    name: &'static str,
    wait: Wait,
}

impl Ferry {
    /// The default: spin only while the peer runs on another CPU.
    pub const ADAPTIVE: Self = Self {
        name: "ferry",
        wait: Wait::Adaptive,
    };
    /// Busy-poll, never sleep.
    pub const SPIN: Self = Self {
        name: "ferry-spin",
        wait: Wait::Spin,
    };
    /// Sleep on the futex at once.
    pub const BLOCK: Self = Self {
        name: "ferry-block",
        wait: Wait::Block,
    };
}

impl Transport for Ferry {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        match self.wait {
            Wait::Block => "block",
            Wait::Spin => "spin",
            Wait::Adaptive => "adaptive",
        }
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, pipe) = PipeOptions::new()
            .wait(self.wait)
            .spawn(command)
            .context("spawning the child with a ferry pipe")?;
        Ok(Connection::new(child, Box::new(FerryEndpoint::new(pipe))))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let pipe = ::ferry::Pipe::from_parent().context("taking the ferry pipe from the parent")?;
        pipe.set_wait(self.wait);
        Ok(Box::new(FerryEndpoint::new(pipe)))
    }
}

/// A ferry pipe end with reused send and receive buffers.
struct FerryEndpoint {
    pipe: ::ferry::Pipe,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl FerryEndpoint {
    fn new(pipe: ::ferry::Pipe) -> Self {
        Self {
            pipe,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Endpoint for FerryEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.pipe
            .send(&self.out)
            .context("sending on the ferry pipe")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.pipe.recv_into(&mut self.inbox) {
            Ok(()) => Ok(Some(&self.inbox)),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on the ferry pipe"),
        }
    }
}
