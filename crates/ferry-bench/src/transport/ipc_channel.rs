//! Servo's ipc-channel: a Unix `SOCK_SEQPACKET` socket per channel, large
//! messages sent in fragments. `ipc-channel-bytes` sends raw bytes;
//! `ipc-channel-typed` a serde struct holding the payload, marked
//! `#[serde(with = "serde_bytes")]` as a user who cares about speed would
//! (without it serde walks a `Vec<u8>` one element at a time).
//!
//! Bootstrap as ipc-channel's documentation shows it: the parent names an
//! `IpcOneShotServer` to the child, which makes both channels, connects,
//! and sends the parent its two ends. The server workload's rows
//! ([`OneShotServers`]) make one such server per client ahead of time, each
//! with a thread waiting in its `accept`; the client's first request carries
//! the sending end of a byte channel for the replies (the channel to a
//! one-shot server goes one way), so the connect rows' timing includes it.

use std::mem;
use std::process::Command;
use std::sync::mpsc::{self, TryRecvError};
use std::thread;

use ::ipc_channel::IpcError;
use ::ipc_channel::ipc::{
    self, IpcBytesReceiver, IpcBytesSender, IpcOneShotServer, IpcReceiver, IpcSender,
};
use serde::{Deserialize, Serialize};

use super::unix_stream::accept_within;
use super::{ChildGuard, Connection, Endpoint, Transport};
use crate::error::{Context, Error};
use crate::server::engine::{self, Conn, Listening, Server};

/// The environment variable naming the one-shot server to the child.
const ENV: &str = "FERRY_BENCH_IPC_CHANNEL_SERVER";

/// ipc-channel, with raw bytes or with a typed message.
#[derive(Debug)]
pub struct IpcChannel {
    typed: bool,
}

impl IpcChannel {
    /// `IpcBytesSender`/`IpcBytesReceiver`.
    pub const BYTES: Self = Self { typed: false };
    /// `IpcSender<Msg>`/`IpcReceiver<Msg>`.
    pub const TYPED: Self = Self { typed: true };
}

impl Transport for IpcChannel {
    fn name(&self) -> &'static str {
        if self.typed {
            "ipc-channel-typed"
        } else {
            "ipc-channel-bytes"
        }
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        if self.typed {
            spawn::<TypedEndpoint>(command)
        } else {
            spawn::<BytesEndpoint>(command)
        }
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let name = super::from_parent(ENV)?;
        if self.typed {
            connect::<TypedEndpoint>(name)
        } else {
            connect::<BytesEndpoint>(name)
        }
    }
}

/// The parent's ends of the two channels the child makes and sends it.
#[derive(Serialize, Deserialize)]
struct Ends<S, R> {
    to_child: S,
    from_child: R,
}

/// What the one-shot server hands the parent for endpoint `C`.
type EndsOf<C> = Ends<<C as Channels>::Tx, <C as Channels>::Rx>;

/// An endpoint over a channel each way.
trait Channels: Endpoint + Sized + 'static {
    type Tx: Serialize + for<'de> Deserialize<'de> + Send + 'static;
    type Rx: Serialize + for<'de> Deserialize<'de> + Send + 'static;

    /// A new channel.
    fn channel() -> Result<(Self::Tx, Self::Rx), Error>;

    /// The endpoint sending on `tx` and receiving on `rx`.
    fn new(tx: Self::Tx, rx: Self::Rx) -> Self;
}

fn spawn<C: Channels>(mut command: Command) -> Result<Connection, Error> {
    let (server, name) =
        IpcOneShotServer::<EndsOf<C>>::new().context("creating ipc-channel's one-shot server")?;
    command.env(ENV, &name);
    let mut child = ChildGuard::new(command.spawn().context("spawning the child")?);
    let endpoint = Box::new(accept::<C>(server, &name, &mut child)?);
    Ok(Connection { child, endpoint })
}

/// Waits for the child's ends, giving up if it exits or takes too long.
///
/// `IpcOneShotServer::accept` blocks with no timeout, so it runs on a thread
/// of its own; on giving up, the parent connects to the server itself and
/// hangs up, which makes that `accept` fail and the thread end.
fn accept<C: Channels>(
    server: IpcOneShotServer<EndsOf<C>>,
    name: &str,
    child: &mut ChildGuard,
) -> Result<C, Error> {
    let (done, outcome) = mpsc::channel();
    thread::spawn(move || {
        // The receiver is gone only if the parent gave up already.
        let _ = done.send(server.accept());
    });
    let accepted = accept_within(child, || match outcome.try_recv() {
        Ok(Ok((_, ends))) => Ok(Some(C::new(ends.to_child, ends.from_child))),
        Ok(Err(e)) => Err(e).context("accepting the child's channels"),
        Err(TryRecvError::Empty) => Ok(None),
        Err(TryRecvError::Disconnected) => Err(Error::new(
            "the thread accepting the child's channels panicked",
        )),
    });
    if accepted.is_err() {
        // Dropped at once: the accepting thread gets a hang-up and ends. If
        // even connecting fails, that thread stays blocked until the
        // process exits.
        let _ = IpcSender::<EndsOf<C>>::connect(name.to_owned());
    }
    accepted
}

/// In the child: makes both channels, sends the parent its ends over the
/// server `name`, and keeps its own.
fn connect<C: Channels>(name: String) -> Result<Box<dyn Endpoint>, Error> {
    let (to_child, from_parent) = C::channel()?;
    let (to_parent, from_child) = C::channel()?;
    let server =
        IpcSender::<EndsOf<C>>::connect(name).context("connecting to the parent's server")?;
    let ends = Ends {
        to_child,
        from_child,
    };
    server
        .send(ends)
        .context("sending the parent its channel ends")?;
    Ok(Box::new(C::new(to_parent, from_parent)))
}

/// A byte channel each way. The send buffer is reused; `recv` returns a
/// new `Vec` per message, which is ipc-channel's API.
struct BytesEndpoint {
    tx: IpcBytesSender,
    rx: IpcBytesReceiver,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl Channels for BytesEndpoint {
    type Tx = IpcBytesSender;
    type Rx = IpcBytesReceiver;

    fn channel() -> Result<(Self::Tx, Self::Rx), Error> {
        ipc::bytes_channel().context("making a byte channel")
    }

    fn new(tx: IpcBytesSender, rx: IpcBytesReceiver) -> Self {
        Self {
            tx,
            rx,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Endpoint for BytesEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.tx
            .send(&self.out)
            .context("sending on an ipc-channel byte channel")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.rx.recv() {
            Ok(bytes) => {
                self.inbox = bytes;
                Ok(Some(&self.inbox))
            }
            Err(IpcError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on an ipc-channel byte channel"),
        }
    }
}

/// The typed row's message: a sequence number and the payload.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Msg {
    seq: u64,
    #[serde(with = "serde_bytes")]
    payload: Vec<u8>,
}

/// A typed channel each way. `send` takes the message by value, so each
/// message's payload buffer is the last received one's, recycled: the only
/// allocations per message are ipc-channel's own.
struct TypedEndpoint {
    tx: IpcSender<Msg>,
    rx: IpcReceiver<Msg>,
    /// The next message's payload.
    out: Vec<u8>,
    /// The last message received.
    inbox: Msg,
    sent: u64,
    received: u64,
}

impl Channels for TypedEndpoint {
    type Tx = IpcSender<Msg>;
    type Rx = IpcReceiver<Msg>;

    fn channel() -> Result<(Self::Tx, Self::Rx), Error> {
        ipc::channel().context("making a typed channel")
    }

    fn new(tx: IpcSender<Msg>, rx: IpcReceiver<Msg>) -> Self {
        Self {
            tx,
            rx,
            out: Vec::new(),
            inbox: Msg::default(),
            sent: 0,
            received: 0,
        }
    }
}

impl Endpoint for TypedEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        if self.out.capacity() < len {
            mem::swap(&mut self.out, &mut self.inbox.payload);
        }
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        let msg = Msg {
            seq: self.sent,
            payload: mem::take(&mut self.out),
        };
        self.tx
            .send(msg)
            .context("sending on an ipc-channel typed channel")?;
        self.sent += 1;
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.rx.recv() {
            Ok(msg) if msg.seq == self.received => {
                self.received += 1;
                self.inbox = msg;
                Ok(Some(&self.inbox.payload))
            }
            Ok(msg) => Err(Error::new(format!(
                "received message {} where {} was next",
                msg.seq, self.received
            ))),
            Err(IpcError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on an ipc-channel typed channel"),
        }
    }
}

/// A request to a one-shot server: the payload, and in the first one the
/// end replies go to.
#[derive(Serialize, Deserialize)]
struct Request {
    #[serde(with = "serde_bytes")]
    payload: Vec<u8>,
    reply_to: Option<IpcBytesSender>,
}

/// One-shot servers, one per client, and their clients.
#[derive(Debug)]
pub struct OneShotServers;

impl Server for OneShotServers {
    fn name(&self) -> &'static str {
        "ipc-channel"
    }

    fn one_address(&self) -> bool {
        false
    }

    /// A one-shot server for each client.
    fn serve(&self, _clients: usize) -> Result<Listening, Error> {
        Ok(Box::new(|| {
            let (server, name) =
                IpcOneShotServer::<Request>::new().context("making a one-shot server")?;
            thread::spawn(move || serve(server));
            Ok(name)
        }))
    }

    fn connect(
        &self,
        address: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error> {
        let (reply_to, replies) = ipc::bytes_channel().context("making the reply channel")?;
        let requests = IpcSender::<Request>::connect(address.to_owned())
            .context(format!("connecting to the one-shot server {address}"))?;
        let mut conn = ServerConn {
            requests,
            replies,
            reply_to: Some(reply_to),
        };
        conn.round_trip(request, reply)?;
        Ok(Box::new(conn))
    }
}

/// Takes the one client and echoes its requests until it hangs up.
fn serve(server: IpcOneShotServer<Request>) {
    let (requests, mut first) = match server.accept() {
        Ok(accepted) => accepted,
        Err(e) => return engine::report("accepting an ipc-channel client", e),
    };
    let Some(reply_to) = first.reply_to.take() else {
        let e = "no reply channel in its first request";
        return engine::report("an ipc-channel client", e);
    };
    let mut next = Ok(first);
    while let Ok(request) = next {
        if let Err(e) = reply_to.send(&request.payload) {
            return engine::report("replying to an ipc-channel client", e);
        }
        next = requests.recv();
    }
}

struct ServerConn {
    requests: IpcSender<Request>,
    replies: IpcBytesReceiver,
    /// The reply channel's sending end, until the first request takes it.
    reply_to: Option<IpcBytesSender>,
}

impl Conn for ServerConn {
    fn round_trip(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), Error> {
        let request = Request {
            payload: request.to_vec(),
            reply_to: self.reply_to.take(),
        };
        self.requests.send(request).context("sending a request")?;
        *reply = self.replies.recv().context("receiving a reply")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in child: the real one is this binary, which a unit test
    /// cannot start; the channels are made and used on a thread instead.
    fn sleeper() -> ChildGuard {
        ChildGuard::new(Command::new("sleep").arg("30").spawn().unwrap())
    }

    fn round_trips<C: Channels>() {
        let (server, name) = IpcOneShotServer::<EndsOf<C>>::new().unwrap();
        let child = thread::spawn(move || {
            let mut endpoint = connect::<C>(name).unwrap();
            while let Some(request) = endpoint.recv().unwrap() {
                let reply: Vec<u8> = request.iter().map(|b| !b).collect();
                endpoint
                    .prepare(reply.len())
                    .unwrap()
                    .copy_from_slice(&reply);
                endpoint.send().unwrap();
            }
        });
        let mut parent = accept::<C>(server, "unused", &mut sleeper()).unwrap();
        for (len, marker) in [(0, 0), (12, 1), (300_000, 2), (12, 3)] {
            parent.prepare(len).unwrap().fill(marker);
            parent.send().unwrap();
            let reply = parent.recv().unwrap().unwrap();
            assert_eq!(reply.len(), len);
            assert!(reply.iter().all(|&b| b == !marker));
        }
        drop(parent);
        child.join().unwrap();
    }

    #[test]
    fn bytes_round_trip_and_close() {
        round_trips::<BytesEndpoint>();
    }

    #[test]
    fn typed_round_trip_and_close() {
        round_trips::<TypedEndpoint>();
    }

    #[test]
    fn a_child_that_exits_without_connecting_is_an_error() {
        let (server, name) = IpcOneShotServer::<EndsOf<BytesEndpoint>>::new().unwrap();
        let mut child = ChildGuard::new(Command::new("true").spawn().unwrap());
        let error = accept::<BytesEndpoint>(server, &name, &mut child);
        let error = error.err().unwrap().to_string();
        assert!(error.contains("exited"), "{error}");
    }
}
