//! ipc-channel's way to a server: an `IpcOneShotServer` takes exactly one
//! client, so the serving child makes one per client, ahead of time (its
//! name goes to the parent out of band, untimed, as the pingpong
//! transport's bootstrap hands its server's name to the child), with a
//! thread already waiting in its `accept`.
//!
//! A client's channel to a one-shot server goes one way, so, as
//! ipc-channel's documentation does, the client makes a byte channel for
//! the replies and sends its sending end in its first request; the
//! connect rows' timing includes making it, since no reply can come
//! without it.

use std::thread;

use ::ipc_channel::ipc::{self, IpcBytesReceiver, IpcBytesSender, IpcOneShotServer, IpcSender};
use serde::{Deserialize, Serialize};

use super::engine::{self, Conn, Engine, Listening};
use crate::error::{Context, Error};

/// A request: the payload, and in the first one the end replies go to.
#[derive(Serialize, Deserialize)]
struct Request {
    #[serde(with = "serde_bytes")]
    payload: Vec<u8>,
    reply_to: Option<IpcBytesSender>,
}

/// One-shot servers, one per client, and their clients.
#[derive(Debug)]
pub struct IpcChannel;

impl Engine for IpcChannel {
    fn name(&self) -> &'static str {
        "ipc-channel"
    }

    fn one_address(&self) -> bool {
        false
    }

    fn serve(&self, _clients: usize) -> Result<Box<dyn Listening>, Error> {
        Ok(Box::new(OneShots))
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
        let mut conn = IpcConn {
            requests,
            replies,
            reply_to: Some(reply_to),
        };
        conn.round_trip(request, reply)?;
        Ok(Box::new(conn))
    }
}

/// Makes a one-shot server for each client.
struct OneShots;

impl Listening for OneShots {
    fn next_address(&mut self) -> Result<String, Error> {
        let (server, name) =
            IpcOneShotServer::<Request>::new().context("making a one-shot server")?;
        thread::spawn(move || serve(server));
        Ok(name)
    }
}

/// Takes the one client and echoes its requests until it hangs up.
fn serve(server: IpcOneShotServer<Request>) {
    let (requests, mut first) = match server.accept() {
        Ok(accepted) => accepted,
        Err(e) => return engine::report("accepting an ipc-channel client", e),
    };
    let Some(reply_to) = first.reply_to.take() else {
        return engine::report(
            "an ipc-channel client",
            "no reply channel in its first request",
        );
    };
    let mut next = Ok(first);
    while let Ok(request) = next {
        if let Err(e) = reply_to.send(&request.payload) {
            return engine::report("replying to an ipc-channel client", e);
        }
        next = requests.recv();
    }
}

struct IpcConn {
    requests: IpcSender<Request>,
    replies: IpcBytesReceiver,
    /// The reply channel's sending end, until the first request takes it.
    reply_to: Option<IpcBytesSender>,
}

impl Conn for IpcConn {
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
