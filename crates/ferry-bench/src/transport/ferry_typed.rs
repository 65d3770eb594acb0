//! ferry's typed channels (`ferry-typed`): the seed message
//! `struct { topic: u32, data: Vec<u8> }` (its bytes as
//! [`ferry::typed::ByteBuf`], one length and one copy) encoded and decoded
//! on every message, over the same pipe and wait as the `ferry` row. Each
//! side keeps its message and its inbox: `send_ref` encodes from a
//! reference (ipc-channel's `send` takes the message by value, so it drops
//! the payload buffer every time), and `recv_into` decodes over the inbox
//! with serde's `deserialize_in_place`, reusing its buffer.

use ::ferry::typed::{ByteBuf, Pipe as TypedPipe, RecvError};
use serde::{Deserialize, Serialize};

use super::Endpoint;
use crate::error::{Context, Error};

/// The message.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
struct Msg {
    /// The message's number (wrapping), checked on receipt.
    topic: u32,
    data: ByteBuf,
}

/// A typed two-way end over one pipe end.
pub(super) struct TypedEndpoint {
    end: TypedPipe<Msg, Msg>,
    /// The next message.
    out: Msg,
    /// The last message received.
    inbox: Msg,
    sent: u32,
    received: u32,
}

impl TypedEndpoint {
    pub(super) fn new(pipe: ::ferry::Pipe) -> Self {
        Self {
            end: TypedPipe::from_pipe(pipe),
            out: Msg::default(),
            inbox: Msg::default(),
            sent: 0,
            received: 0,
        }
    }
}

impl Endpoint for TypedEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.data.resize(len, 0);
        Ok(&mut self.out.data)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.out.topic = self.sent;
        self.end
            .sender()
            .send_ref(&self.out)
            .context("sending on a ferry typed channel")?;
        self.sent = self.sent.wrapping_add(1);
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        match self.end.receiver().recv_into(&mut self.inbox) {
            Ok(()) if self.inbox.topic == self.received => {
                self.received = self.received.wrapping_add(1);
                Ok(Some(&self.inbox.data))
            }
            Ok(()) => Err(Error::new(format!(
                "received message {} where {} was next",
                self.inbox.topic, self.received
            ))),
            Err(RecvError::Disconnected) => Ok(None),
            Err(e) => Err(e).context("receiving on a ferry typed channel"),
        }
    }
}
