//! ferry's pipes, with each of its wait strategies, and with the payload
//! copied in and out or in each of the zero-copy forms (`ferry-loan`,
//! `ferry-loan-borrowed`, `ferry-in-place`: see [`super::ferry_zero_copy`]).
//!
//! The parent spawns the child with [`::ferry::PipeOptions::spawn`]; the
//! child takes its end with [`::ferry::Pipe::from_parent`] and sets the same
//! wait strategy on it, since an end adopted from the parent starts with the
//! default.

use std::process::Command;

use ::ferry::{PipeOptions, RecvError, Wait};

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
    /// Written into an owned loan ([`::ferry::Sender::loan_owned`]) and
    /// received as a view ([`::ferry::Receiver::recv_shared`]).
    Loan,
    /// As `Loan`, with a loan that borrows the sender
    /// ([`::ferry::Sender::loan`]).
    BorrowedLoan,
    /// Written and read where the message lies, in one call each
    /// ([`::ferry::Sender::send_in_place`],
    /// [`::ferry::Receiver::recv_in_place`]).
    InPlace,
}

impl Ferry {
    /// The default: spin only while the peer works on another CPU.
    pub const ADAPTIVE: Self = Self {
        name: "ferry",
        wait: Wait::Adaptive,
        payload: Payload::Copied,
    };
    /// The opt-in policy: the default's rules plus the older heuristics.
    pub const TUNED: Self = Self {
        name: "ferry-tuned",
        wait: Wait::Tuned,
        payload: Payload::Copied,
    };
    /// Busy-poll, never sleep.
    pub const SPIN: Self = Self {
        name: "ferry-spin",
        wait: Wait::Spin,
        payload: Payload::Copied,
    };
    /// Sleep on the futex at once.
    pub const BLOCK: Self = Self {
        name: "ferry-sleep",
        wait: Wait::Sleep,
        payload: Payload::Copied,
    };
    /// The default wait, each message written into an owned loan and sent,
    /// and received as a view (a pool block, read where it lies, from 16
    /// KiB; a heap buffer copied through the ring below).
    pub const LOAN: Self = Self {
        name: "ferry-loan",
        wait: Wait::Adaptive,
        payload: Payload::Loan,
    };
    /// `ferry-loan` with a loan that borrows the sender, made, written and
    /// sent in one call.
    pub const LOAN_BORROWED: Self = Self {
        name: "ferry-loan-borrowed",
        wait: Wait::Adaptive,
        payload: Payload::BorrowedLoan,
    };
    /// The default wait, each message written where it goes and read where
    /// it lies, by a closure (in the ring below the out-of-line threshold,
    /// in a pool block above it).
    pub const IN_PLACE: Self = Self {
        name: "ferry-in-place",
        wait: Wait::Adaptive,
        payload: Payload::InPlace,
    };
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
        let (child, pipe) = PipeOptions::new()
            .wait(self.wait)
            .spawn(command)
            .context("spawning the child with a ferry pipe")?;
        Ok(Connection::new(child, self.endpoint(pipe)))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let pipe = ::ferry::Pipe::from_parent().context("taking the ferry pipe from the parent")?;
        pipe.sender().set_wait(self.wait);
        pipe.receiver().set_wait(self.wait);
        Ok(self.endpoint(pipe))
    }
}

impl Ferry {
    fn endpoint(&self, pipe: ::ferry::Pipe) -> Box<dyn Endpoint> {
        match self.payload {
            Payload::Copied => Box::new(FerryEndpoint::new(pipe)),
            Payload::Loan => Box::new(LoanEndpoint::new(pipe)),
            Payload::BorrowedLoan => Box::new(BorrowedLoanEndpoint::new(pipe)),
            Payload::InPlace => Box::new(InPlaceEndpoint::new(pipe)),
        }
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
        match self.pipe.receiver().recv_into(&mut self.inbox) {
            Ok(()) => Ok(Some(&self.inbox)),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on the ferry pipe"),
        }
    }
}
