//! ferry's pipe with its parent-side end forwarded: the parent makes the
//! pipe and hands the child its far end, then sends its own (as a sender
//! half, or whole) to a forwarder process and takes it back, once (`-fwd1`)
//! or three times (`-fwd3`). Each trip is two forwards (parent to
//! forwarder, whose other side is in the child; and back), after which the
//! end talks to the child over links the forwarder introduced, and the
//! forwarder exits. Against the same pipe with no trip, these show what a
//! pipe costs in steady state once its ends have moved: the same, if the
//! route is direct.
//!
//! - `ferry-halves`, `ferry-fwd1`, `ferry-fwd3`: the parent's sending
//!   half travels; the replies come the way the pipe was made.
//! - `ferry-end`, `ferry-end-fwd1`, `ferry-end-fwd3`: the parent's whole
//!   end travels (both its halves forwarded each time).
//! - `ferry-select-end`, `ferry-select-end-fwd3`: the same, each side
//!   waiting for its messages in a `Select` (woken by the doorbell the
//!   other side rings, which travels with the end).
//! - `ferry-async-end`, `ferry-async-end-fwd3` (the `tokio` feature): the
//!   same, each side awaiting on a current-thread tokio runtime.

use std::process::Command;

use ::ferry::{Handle, Pipe, Receiver, RecvError, Select, Sender, TryRecvError, Wait};

use super::ferry::{pipe_from_parent, spawn_with_pipe};
use super::{Connection, Endpoint, Transport};
use crate::child;
use crate::error::{Context, Error};

/// A ferry pipe whose parent-side end went to a forwarder and back
/// `trips` times before the first message.
#[derive(Debug)]
pub struct FerryForwarded {
    name: &'static str,
    trips: u32,
    shape: Shape,
}

/// What of the parent's end travels, and how each side waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Its sending half; blocking calls.
    Halves,
    /// The whole end; blocking calls.
    Whole,
    /// The whole end; each side waits in a `Select`.
    WholeSelect,
    /// The whole end; each side awaits on tokio.
    #[cfg(feature = "tokio")]
    WholeAsync,
}

impl Shape {
    /// What of the parent's end travels, and how the two sides wait.
    fn travels(self) -> &'static str {
        match self {
            Self::Halves => "sending half",
            Self::Whole => "whole end",
            Self::WholeSelect => "whole end, Select",
            #[cfg(feature = "tokio")]
            Self::WholeAsync => "whole end, tokio",
        }
    }
}

/// One setup's trips of the parent's end, timed (see
/// [`FerryForwarded::travel`]).
#[derive(Debug, Clone, Copy)]
pub struct Travel {
    /// The row's transport.
    pub transport: &'static str,
    /// What travelled.
    pub what: &'static str,
    /// Forwards made (two a trip).
    pub forwards: u32,
    /// From the first send to the end's last arrival back.
    pub took: std::time::Duration,
}

/// Every setup's trips in this process so far, for the report.
static TRAVELS: std::sync::Mutex<Vec<Travel>> = std::sync::Mutex::new(Vec::new());

/// The trips timed so far in this process (see [`Travel`]).
pub fn travels() -> Vec<Travel> {
    TRAVELS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl FerryForwarded {
    const fn new(name: &'static str, trips: u32, shape: Shape) -> Self {
        Self { name, trips, shape }
    }

    /// No trip: the same halves, the pipe as made (the baseline of the two
    /// below: a pipe end used as two halves waits a little differently
    /// from a whole one, which knows where the peer's other half runs).
    pub const DIRECT: Self = Self::new("ferry-halves", 0, Shape::Halves);
    /// One trip through a forwarder (two forwards).
    pub const ONCE: Self = Self::new("ferry-fwd1", 1, Shape::Halves);
    /// Three trips (six forwards).
    pub const THRICE: Self = Self::new("ferry-fwd3", 3, Shape::Halves);
    /// A whole end, no trip: the baseline of the two below.
    pub const END: Self = Self::new("ferry-end", 0, Shape::Whole);
    /// A whole end, one trip.
    pub const END_ONCE: Self = Self::new("ferry-end-fwd1", 1, Shape::Whole);
    /// A whole end, three trips.
    pub const END_THRICE: Self = Self::new("ferry-end-fwd3", 3, Shape::Whole);
    /// A whole end waited on in a `Select`, no trip.
    pub const SELECT_END: Self = Self::new("ferry-select-end", 0, Shape::WholeSelect);
    /// A whole end waited on in a `Select`, three trips.
    pub const SELECT_END_THRICE: Self = Self::new("ferry-select-end-fwd3", 3, Shape::WholeSelect);
    /// A whole end awaited on tokio, no trip.
    #[cfg(feature = "tokio")]
    pub const ASYNC_END: Self = Self::new("ferry-async-end", 0, Shape::WholeAsync);
    /// A whole end awaited on tokio, three trips.
    #[cfg(feature = "tokio")]
    pub const ASYNC_END_THRICE: Self = Self::new("ferry-async-end-fwd3", 3, Shape::WholeAsync);

    /// Sends `end` to a forwarder and takes it back, `trips` times.
    fn travel(&self, mut end: Handle) -> Result<Handle, Error> {
        if self.trips == 0 {
            return Ok(end);
        }
        let forwarder = child::rerun("forwarder", &[])?;
        let (mut forwarder, via) = spawn_with_pipe(forwarder, Wait::Adaptive)?;
        let started = std::time::Instant::now();
        for _ in 0..self.trips {
            via.sender()
                .send_with(b"forward", vec![end])
                .context("sending the end to the forwarder")?;
            let mut back = via.receiver().recv_with().context("the end back")?;
            end = (back.senders.pop().map(Handle::from))
                .or_else(|| back.pipes.pop().map(Handle::from))
                .ok_or_else(|| Error::new("the forwarder sent no end back"))?;
        }
        // What one forward costs, the forwarder's start aside (the first
        // trip also makes the links; later ones make theirs too).
        let took = started.elapsed();
        let forwards = 2 * self.trips;
        TRAVELS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Travel {
                transport: self.name,
                what: self.shape.travels(),
                forwards,
                took,
            });
        eprintln!(
            "{}: {forwards} forwards of the parent's end (there and back) took {} µs, {} µs each",
            self.name,
            took.as_micros(),
            took.as_micros() / u128::from(forwards)
        );
        drop(via);
        forwarder.wait().context("waiting for the forwarder")?;
        Ok(end)
    }

    /// Either side's endpoint over a whole end.
    fn whole(&self, pipe: Pipe) -> Result<Box<dyn Endpoint>, Error> {
        Ok(match self.shape {
            Shape::Halves | Shape::Whole => {
                pipe.sender().set_wait(Wait::Adaptive);
                pipe.receiver().set_wait(Wait::Adaptive);
                super::ferry::Ferry::ADAPTIVE.endpoint(pipe)
            }
            Shape::WholeSelect => Box::new(SelectEndpoint::new(pipe)?),
            #[cfg(feature = "tokio")]
            Shape::WholeAsync => {
                pipe.sender().set_wait(Wait::Sleep);
                pipe.receiver().set_wait(Wait::Sleep);
                Box::new(super::ferry_async::AsyncEndpoint::new(pipe)?)
            }
        })
    }
}

impl Transport for FerryForwarded {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        match self.shape {
            Shape::Halves | Shape::Whole => "adaptive",
            Shape::WholeSelect => "select",
            #[cfg(feature = "tokio")]
            Shape::WholeAsync => "tokio",
        }
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, boot) = spawn_with_pipe(command, Wait::Adaptive)?;
        let (near, far) = ::ferry::pipe().context("making the pipe to forward")?;
        if self.shape == Shape::Halves {
            let (far_tx, far_rx) = far.split();
            boot.sender()
                .send_with(b"halves", vec![Handle::from(far_tx), Handle::from(far_rx)])
                .context("handing the child its halves")?;
            let (tx, rx) = near.split();
            let Handle::Sender(tx) = self.travel(Handle::from(tx))? else {
                return Err(Error::new("the forwarder sent back no sender"));
            };
            return Ok(Connection::new(child, Box::new(Halves::new(tx, rx))));
        }
        boot.sender()
            .send_with(b"end", vec![far])
            .context("handing the child its end")?;
        let Handle::Pipe(near) = self.travel(Handle::from(near))? else {
            return Err(Error::new("the forwarder sent back no pipe end"));
        };
        Ok(Connection::new(child, self.whole(near)?))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let boot = pipe_from_parent()?;
        let mut sent = boot
            .receiver()
            .recv_with()
            .context("receiving the pipe's end")?;
        if self.shape != Shape::Halves {
            let far = (sent.pipes.pop()).ok_or_else(|| Error::new("the parent sent no end"))?;
            return self.whole(far);
        }
        let tx = sent.senders.pop();
        let rx = sent.receivers.pop();
        let (Some(tx), Some(rx)) = (tx, rx) else {
            return Err(Error::new("the parent sent no halves"));
        };
        Ok(Box::new(Halves::new(tx, rx)))
    }
}

/// The forwarder: sends back every end it is sent, until the parent
/// hangs up.
pub fn serve_forwarder() -> Result<(), Error> {
    let via: Pipe = pipe_from_parent()?;
    loop {
        match via.receiver().recv_with() {
            Ok(msg) => {
                let mut back: Vec<Handle> = msg.senders.into_iter().map(Handle::from).collect();
                back.extend(msg.pipes.into_iter().map(Handle::from));
                via.sender()
                    .send_with(b"back", back)
                    .context("forwarding the end back")?;
            }
            Err(RecvError::Disconnected) => return Ok(()),
            Err(e) => return Err(e).context("receiving an end to forward"),
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

/// A whole end whose receiving half waits in a `Select` (alone in it), with
/// reused buffers: what a service waiting on many pipes pays per message.
struct SelectEndpoint {
    tx: Sender,
    select: Select,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl SelectEndpoint {
    fn new(pipe: Pipe) -> Result<Self, Error> {
        let (tx, rx) = pipe.split();
        tx.set_wait(Wait::Adaptive);
        let mut select = Select::new().context("making a select")?;
        select
            .add(rx)
            .map_err(|e| Error::new(format!("adding the receiver to the select: {e}")))?;
        Ok(Self {
            tx,
            select,
            out: Vec::new(),
            inbox: Vec::new(),
        })
    }
}

impl Endpoint for SelectEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.tx.send(&self.out).context("sending on the pipe")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        loop {
            let key = self.select.ready().context("waiting in the select")?;
            let rx: &Receiver =
                (self.select.get(key)).ok_or_else(|| Error::new("the select named no receiver"))?;
            match rx.try_recv_into(&mut self.inbox) {
                Ok(()) => return Ok(Some(&self.inbox)),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return Ok(None),
                Err(e) => return Err(e).context("receiving on the pipe"),
            }
        }
    }
}
