//! ferry's zero-copy forms, one row each: `ferry-loan` (an owned loan,
//! [`::ferry::Sender::loan_owned`], received as a view,
//! [`::ferry::Receiver::recv_shared`]), `ferry-loan-borrowed` (a loan that
//! borrows the sender, [`::ferry::Sender::loan`]) and `ferry-in-place`
//! ([`::ferry::Sender::send_in_place`], [`::ferry::Receiver::recv_in_place`]).
//!
//! Where the [`Endpoint`] trait asks for more than a form allows (a buffer
//! held from `prepare` to `send`, a message returned by `recv`), the
//! endpoint copies through a buffer of its own; only the untimed control
//! messages take those paths.

use ::ferry::{Loan, Pipe, RecvError, SharedBytes};

use super::Endpoint;
use crate::error::{Context, Error};

/// The last message received as a view, held until the caller is done
/// with it (its next send or receive), then dropped: a view of a block
/// gives the block back to the sender's pool.
#[derive(Default)]
struct View(Option<SharedBytes>);

impl View {
    /// The caller has read the last message: its block goes back now, as
    /// an application drops a request's view once it has read it.
    fn release(&mut self) {
        self.0 = None;
    }

    /// The next message, as a view held here.
    fn recv(&mut self, pipe: &Pipe) -> Result<Option<&[u8]>, Error> {
        self.release();
        match pipe.receiver().recv_shared() {
            Ok(view) => Ok(Some(self.0.insert(view))),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving a shared view"),
        }
    }
}

/// `ferry-loan`: the loan is kept from `prepare` to `send` next to the
/// pipe, which only an owned loan can be (it holds a handle of its own on
/// the sender's ring).
pub(super) struct LoanEndpoint {
    pipe: Pipe,
    /// The message being written, from `prepare` to `send`.
    loan: Option<Loan<'static>>,
    view: View,
}

impl LoanEndpoint {
    pub(super) fn new(pipe: Pipe) -> Self {
        Self {
            pipe,
            loan: None,
            view: View::default(),
        }
    }
}

impl Endpoint for LoanEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        // A loan not sent goes back to the pool here, before taking another.
        self.loan = None;
        self.view.release();
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

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        self.view.recv(&self.pipe)
    }
}

/// `ferry-loan-borrowed`: a loan made, filled and sent in
/// [`Endpoint::send_filled`]; it cannot be kept from `prepare` to `send`,
/// as the endpoint owns the pipe the loan would borrow.
pub(super) struct BorrowedLoanEndpoint {
    pipe: Pipe,
    /// The prepared message, copied into a loan by `send`.
    out: Vec<u8>,
    view: View,
}

impl BorrowedLoanEndpoint {
    pub(super) fn new(pipe: Pipe) -> Self {
        Self {
            pipe,
            out: Vec::new(),
            view: View::default(),
        }
    }
}

impl Endpoint for BorrowedLoanEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.view.release();
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        let sender = self.pipe.sender();
        let mut loan = sender.loan(self.out.len()).context("loaning a slot")?;
        loan.copy_from_slice(&self.out);
        loan.send().context("sending a loaned slot")
    }

    fn send_filled(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        self.view.release();
        let mut loan = self.pipe.sender().loan(len).context("loaning a slot")?;
        fill(&mut loan);
        loan.send().context("sending a loaned slot")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        self.view.recv(&self.pipe)
    }
}

/// `ferry-in-place`: each message written where it goes and read where it
/// lies (in the ring below the out-of-line threshold, in a block above it).
pub(super) struct InPlaceEndpoint {
    pipe: Pipe,
    /// The prepared message, copied in place by `send`.
    out: Vec<u8>,
    /// The last message `recv` returned.
    inbox: Vec<u8>,
}

impl InPlaceEndpoint {
    pub(super) fn new(pipe: Pipe) -> Self {
        Self {
            pipe,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Endpoint for InPlaceEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        let out = &self.out;
        self.pipe
            .sender()
            .send_in_place(out.len(), |slot| slot.copy_from_slice(out))
            .context("sending a message written in place")
    }

    fn send_filled(&mut self, len: usize, fill: &mut dyn FnMut(&mut [u8])) -> Result<(), Error> {
        self.pipe
            .sender()
            .send_in_place(len, fill)
            .context("sending a message written in place")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        let inbox = &mut self.inbox;
        let copy = |bytes: &[u8]| {
            inbox.clear();
            inbox.extend_from_slice(bytes);
        };
        match self.pipe.receiver().recv_in_place(copy) {
            Ok(()) => Ok(Some(&self.inbox)),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving a message in place"),
        }
    }

    fn reads_in_scope(&self) -> bool {
        true
    }

    fn recv_read(&mut self, read: &mut dyn FnMut(&[u8])) -> Result<bool, Error> {
        match self.pipe.receiver().recv_in_place(read) {
            Ok(()) => Ok(true),
            Err(RecvError::Disconnected) => Ok(false),
            Err(e) => Err(e).context("receiving a message in place"),
        }
    }
}
