//! ferry's pipe with its parent-to-child sender forwarded: the parent makes
//! the pipe, hands the child its two halves, then sends its own sender to a
//! forwarder process and takes it back, once (`ferry-fwd1`) or three times
//! (`ferry-fwd3`). Each trip is two forwards (parent to forwarder, whose
//! receiver is in the child; and back), after which the sender talks to
//! the child over a link the forwarder introduced, and the forwarder
//! exits. The replies' direction is the pipe as made. Against
//! `ferry-halves` (the same halves, no trip), these show what a pipe costs
//! in steady state once its sender has moved: the same, if the route is
//! direct.

use std::process::Command;

use ::ferry::{Handle, Pipe, Receiver, RecvError, Sender, Wait};

use super::ferry::{pipe_from_parent, spawn_with_pipe};
use super::{Connection, Endpoint, Transport};
use crate::child;
use crate::error::{Context, Error};

/// A ferry pipe whose parent-side sender went to a forwarder and back
/// `trips` times before the first message.
#[derive(Debug)]
pub struct FerryForwarded {
    name: &'static str,
    trips: u32,
}

impl FerryForwarded {
    /// No trip: the same halves, the pipe as made (the baseline of the two
    /// below: a pipe end used as two halves waits a little differently
    /// from a whole one, which knows where the peer's other half runs).
    pub const DIRECT: Self = Self {
        name: "ferry-halves",
        trips: 0,
    };
    /// One trip through a forwarder (two forwards).
    pub const ONCE: Self = Self {
        name: "ferry-fwd1",
        trips: 1,
    };
    /// Three trips (six forwards).
    pub const THRICE: Self = Self {
        name: "ferry-fwd3",
        trips: 3,
    };
}

impl Transport for FerryForwarded {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        "adaptive"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, boot) = spawn_with_pipe(command, Wait::Adaptive)?;
        let (near, far) = ::ferry::pipe().context("making the pipe to forward")?;
        let (far_tx, far_rx) = far.split();
        boot.sender()
            .send_with(b"halves", vec![Handle::from(far_tx), Handle::from(far_rx)])
            .context("handing the child its halves")?;
        let (mut tx, rx) = near.split();
        if self.trips == 0 {
            return Ok(Connection::new(child, Box::new(Halves::new(tx, rx))));
        }
        let forwarder = child::rerun("forwarder", &[])?;
        let (mut forwarder, via) = spawn_with_pipe(forwarder, Wait::Adaptive)?;
        for _ in 0..self.trips {
            via.sender()
                .send_with(b"forward", vec![tx])
                .context("sending the sender to the forwarder")?;
            let mut back = via.receiver().recv_with().context("the sender back")?;
            tx = back
                .senders
                .pop()
                .ok_or_else(|| Error::new("the forwarder sent no sender back"))?;
        }
        drop(via);
        forwarder.wait().context("waiting for the forwarder")?;
        Ok(Connection::new(child, Box::new(Halves::new(tx, rx))))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let boot = pipe_from_parent()?;
        let mut halves = boot
            .receiver()
            .recv_with()
            .context("receiving the halves")?;
        let tx = halves.senders.pop();
        let rx = halves.receivers.pop();
        let (Some(tx), Some(rx)) = (tx, rx) else {
            return Err(Error::new("the parent sent no halves"));
        };
        Ok(Box::new(Halves::new(tx, rx)))
    }
}

/// The forwarder: sends back every sender it is sent, until the parent
/// hangs up.
pub fn serve_forwarder() -> Result<(), Error> {
    let via: Pipe = pipe_from_parent()?;
    loop {
        match via.receiver().recv_with() {
            Ok(msg) => via
                .sender()
                .send_with(b"back", msg.senders)
                .context("forwarding the sender back")?,
            Err(RecvError::Disconnected) => return Ok(()),
            Err(e) => return Err(e).context("receiving a sender to forward"),
        }
    }
}

/// A pipe end as its two halves, with reused send and receive buffers.
struct Halves {
    tx: Sender,
    rx: Receiver,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl Halves {
    fn new(tx: Sender, rx: Receiver) -> Self {
        tx.set_wait(Wait::Adaptive);
        rx.set_wait(Wait::Adaptive);
        Self {
            tx,
            rx,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Endpoint for Halves {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.tx
            .send(&self.out)
            .context("sending through the forwarded sender")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.rx.recv_into(&mut self.inbox) {
            Ok(()) => Ok(Some(&self.inbox)),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on the pipe"),
        }
    }
}
