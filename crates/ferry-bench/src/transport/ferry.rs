//! ferry's pipes: each wait strategy with the payload copied in and out,
//! each zero-copy form (see [`super::ferry_zero_copy`]), and the typed
//! channels (see [`super::ferry_typed`]).
//!
//! The child takes its end with [`::ferry::Pipe::from_parent`] and sets the
//! same wait strategy on it, since an end adopted from the parent starts
//! with the default.

use std::process::{Child, Command};

use ::ferry::{Pipe, PipeOptions, RecvError, Wait};

use super::ferry_typed::TypedEndpoint;
use super::ferry_zero_copy::{BorrowedLoanEndpoint, InPlaceEndpoint, LoanEndpoint};
use super::{Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// ferry with one wait strategy on both ends.
#[derive(Debug)]
pub struct Ferry {
    name: &'static str,
    wait: Wait,
    payload: Payload,
}

/// How a message's bytes meet the pipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// Copied in by [`::ferry::Pipe::send`] and out by
    /// [`::ferry::Receiver::recv_into`].
    Copied,
    /// [`LoanEndpoint`].
    Loan,
    /// [`BorrowedLoanEndpoint`].
    BorrowedLoan,
    /// [`InPlaceEndpoint`].
    InPlace,
    /// [`TypedEndpoint`].
    Typed,
}

impl Ferry {
    const fn new(name: &'static str, wait: Wait, payload: Payload) -> Self {
        Self {
            name,
            wait,
            payload,
        }
    }

    /// The default: spin only while the peer works on another CPU.
    pub const ADAPTIVE: Self = Self::new("ferry", Wait::Adaptive, Payload::Copied);
    /// The opt-in policy: the default's rules plus the older heuristics.
    pub const TUNED: Self = Self::new("ferry-tuned", Wait::Tuned, Payload::Copied);
    /// Busy-poll, never sleep.
    pub const SPIN: Self = Self::new("ferry-spin", Wait::Spin, Payload::Copied);
    /// Sleep on the futex at once.
    pub const BLOCK: Self = Self::new("ferry-sleep", Wait::Sleep, Payload::Copied);
    /// The default wait, each message written into an owned loan and
    /// received as a view.
    pub const LOAN: Self = Self::new("ferry-loan", Wait::Adaptive, Payload::Loan);
    /// `ferry-loan` with a loan that borrows the sender.
    pub const LOAN_BORROWED: Self =
        Self::new("ferry-loan-borrowed", Wait::Adaptive, Payload::BorrowedLoan);
    /// The default wait, each message written where it goes and read where
    /// it lies, by a closure.
    pub const IN_PLACE: Self = Self::new("ferry-in-place", Wait::Adaptive, Payload::InPlace);
    /// The typed channels, default wait.
    pub const TYPED: Self = Self::new("ferry-typed", Wait::Adaptive, Payload::Typed);

    pub(super) fn endpoint(&self, pipe: Pipe) -> Box<dyn Endpoint> {
        match self.payload {
            Payload::Copied => Box::new(FerryEndpoint {
                pipe,
                out: Vec::new(),
                inbox: Vec::new(),
            }),
            Payload::Loan => Box::new(LoanEndpoint::new(pipe)),
            Payload::BorrowedLoan => Box::new(BorrowedLoanEndpoint::new(pipe)),
            Payload::InPlace => Box::new(InPlaceEndpoint::new(pipe)),
            Payload::Typed => Box::new(TypedEndpoint::new(pipe)),
        }
    }
}

impl Transport for Ferry {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        match self.wait {
            Wait::Sleep => "sleep",
            Wait::Spin => "spin",
            Wait::Adaptive => "adaptive",
            Wait::Tuned => "tuned",
        }
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, pipe) = spawn_with_pipe(command, self.wait)?;
        Ok(Connection::new(child, self.endpoint(pipe)))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let pipe = pipe_from_parent()?;
        pipe.sender().set_wait(self.wait);
        pipe.receiver().set_wait(self.wait);
        Ok(self.endpoint(pipe))
    }
}

/// Starts `command` with a ferry pipe to it, waiting by `wait`.
pub(super) fn spawn_with_pipe(command: Command, wait: Wait) -> Result<(Child, Pipe), Error> {
    let spawned = PipeOptions::new().wait(wait).spawn(command);
    spawned.context("spawning the child with a ferry pipe")
}

/// In the child: its end of the pipe the parent spawned it with.
pub(super) fn pipe_from_parent() -> Result<Pipe, Error> {
    Pipe::from_parent().context("taking the ferry pipe from the parent")
}

/// A ferry pipe end with reused send and receive buffers.
struct FerryEndpoint {
    pipe: Pipe,
    out: Vec<u8>,
    inbox: Vec<u8>,
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
        match self.pipe.receiver().recv_into(&mut self.inbox) {
            Ok(()) => Ok(Some(&self.inbox)),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on the ferry pipe"),
        }
    }
}
