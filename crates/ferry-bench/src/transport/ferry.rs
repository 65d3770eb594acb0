//! ferry's pipes, with each of its wait strategies, and with the payload
//! copied in and out or written and read in place (`ferry-loan`).
//!
//! The parent spawns the child with [`::ferry::PipeOptions::spawn`]; the
//! child takes its end with [`::ferry::Pipe::from_parent`] and sets the same
//! wait strategy on it, since an end adopted from the parent starts with the
//! default.

use std::process::Command;
use std::sync::Arc;

use ::ferry::{Loan, PipeOptions, RecvError, SharedBytes, Wait};

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
    /// Written in place into a [`Loan`] and read in place from
    /// [`SharedBytes`].
    InPlace,
}

impl Ferry {
    /// The default: spin only while the peer runs on another CPU.
    pub const ADAPTIVE: Self = Self {
        name: "ferry",
        wait: Wait::Adaptive,
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
    /// The default wait, each message written once in place and read in
    /// place (`send_in_place`, `recv_in_place`: in the ring when small, in
    /// a pool block when large).
    pub const LOAN: Self = Self {
        name: "ferry-loan",
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
            Payload::InPlace => Box::new(LoanEndpoint::new(pipe)),
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

/// A ferry pipe end that writes each message in place and reads each in
/// place: in the ring for a small message, in a pool block for a large one
/// (the scoped calls in the workloads; the owned loan and view where a
/// message is held across calls).
///
/// [`Endpoint::prepare`] hands out a loan's bytes until [`Endpoint::send`],
/// so the endpoint keeps the loan next to its pipe: an owned loan
/// ([`::ferry::Sender::loan_owned`]), which holds a handle of its own.
struct LoanEndpoint {
    pipe: Arc<::ferry::Pipe>,
    /// The slot of the message being written, from `prepare` to `send`.
    loan: Option<Loan<'static>>,
    /// The last message received, held (its block lent to us) until the
    /// next `prepare` or `recv`.
    view: Option<SharedBytes>,
}

impl LoanEndpoint {
    fn new(pipe: ::ferry::Pipe) -> Self {
        Self {
            pipe: Arc::new(pipe),
            loan: None,
            view: None,
        }
    }
}

impl Endpoint for LoanEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        // A loan not sent goes back to the pool here, before taking another.
        self.loan = None;
        // The caller is done with the last message received (its bytes
        // borrowed this endpoint, which `prepare` borrows again), so its
        // block goes back to the peer's pool now, as an application drops a
        // request's view once it has read it, rather than at the next
        // `recv`.
        self.view = None;
        let loan = self
            .pipe
            .sender()
            .loan_owned(len)
            .context("loaning a slot")?;
        Ok(self.loan.insert(loan))
    }

    fn send(&mut self) -> Result<(), Error> {
        let loan = self
            .loan
            .take()
            .ok_or_else(|| Error::new("send without prepare"))?;
        loan.send().context("sending a loaned slot")
    }

    /// A message written in place and sent in one scope
    /// ([`::ferry::Sender::send_in_place`]: straight into the ring, or into a
    /// block), as an application writing a message where it goes does (the
    /// owned loan of [`prepare`](Endpoint::prepare) is for holding one
    /// across calls).
    fn send_filled(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        // As in `prepare`: the last message received has been read.
        self.view = None;
        match self.pipe.sender().send_in_place(len, fill) {
            Ok(()) => Ok(()),
            Err(e) => Err(e).context("sending a message written in place"),
        }
    }

    fn reads_in_scope(&self) -> bool {
        true
    }

    /// The next message read where it lies, in one scope
    /// ([`::ferry::Receiver::recv_in_place`]: in the ring, or in its block).
    fn recv_read(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        self.view = None;
        match self.pipe.receiver().recv_in_place(read) {
            Ok(()) => Ok(true),
            Err(RecvError::Disconnected) => Ok(false),
            Err(e) => Err(e).context("receiving a message in place"),
        }
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        // The last view's block goes back to the sender's pool first.
        self.view = None;
        match self.pipe.receiver().recv_shared() {
            Ok(view) => Ok(Some(self.view.insert(view))),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving a shared view"),
        }
    }
}
