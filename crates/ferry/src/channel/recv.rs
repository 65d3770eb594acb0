//! Receiving: frames out of the ring, checked, into whole messages.

use std::time::{Duration, Instant};

use super::wait::{Stop, Waiter};
use super::{Pipe, PipeOptions, RecvError};
use crate::link::Failure;
use crate::ring::event::{self, SysFutex};
use crate::ring::{Consumer, Corrupt, Frame};
use crate::shm::RingView;
use crate::shm::pool::Held;
use crate::wire::frame::{BLOCK_REF, HANDLE_ID, Kind, TOTAL, Tag};

/// A message together with the pipe ends it carried.
#[derive(Debug, Default)]
pub struct Message {
    /// The payload.
    pub bytes: Vec<u8>,
    /// Pipe ends sent with [`Pipe::send_with`], now owned by this process.
    pub pipes: Vec<Pipe>,
}

/// A message whose pieces are still arriving, kept across a timeout.
#[derive(Debug)]
struct Partial {
    bytes: Vec<u8>,
    total: usize,
    pipes: Vec<Pipe>,
}

/// The message being put together from frames.
#[derive(Debug, Default)]
struct Assembly {
    /// The announced length, between `First` and `Last`.
    total: Option<usize>,
    /// Pipe ends claimed so far.
    pipes: Vec<Pipe>,
}

/// Where a received message goes.
pub(super) struct Delivery<'a> {
    /// The payload, unless it is handed over as a block.
    pub(super) bytes: &'a mut Vec<u8>,
    /// Attached pipe ends, if the caller takes them (else they are dropped).
    pub(super) pipes: Option<&'a mut Vec<Pipe>>,
    /// An out-of-line payload's block, if the caller reads it in place.
    pub(super) block: Option<&'a mut Option<Held>>,
}

impl<'a> Delivery<'a> {
    fn bytes(bytes: &'a mut Vec<u8>) -> Self {
        Self {
            bytes,
            pipes: None,
            block: None,
        }
    }
}

/// The receiving half of a pipe end, behind its mutex.
#[derive(Debug)]
pub(super) struct Rx {
    ring: Consumer<RingView>,
    waiter: Waiter,
    partial: Option<Partial>,
}

impl Rx {
    pub(super) fn new(ring: Consumer<RingView>) -> Self {
        Self {
            ring,
            waiter: Waiter::default(),
            partial: None,
        }
    }
}

impl Pipe {
    /// Receives the next message, waiting for it.
    ///
    /// Returns [`RecvError::Disconnected`] once the other end is gone and
    /// every message it sent has been received. Pipe ends attached to the
    /// message are dropped (use [`Pipe::recv_with`] to keep them).
    pub fn recv(&self) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        self.recv_into(&mut bytes)?;
        Ok(bytes)
    }

    /// Receives the next message into `buf`, replacing its contents and
    /// reusing its allocation: no allocation per message in steady state.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let mut buf = Vec::with_capacity(1024);
    /// for i in 0..3u8 {
    ///     a.send(&[i; 10])?;
    ///     b.recv_into(&mut buf)?;
    ///     assert_eq!(buf, [i; 10]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recv_into(&self, buf: &mut Vec<u8>) -> Result<(), RecvError> {
        self.recv_message(&mut Delivery::bytes(buf), None)
    }

    /// Receives a message if one is waiting, else [`RecvError::Empty`].
    pub fn try_recv(&self) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        match self.recv_message(&mut Delivery::bytes(&mut bytes), Some(Instant::now())) {
            Ok(()) => Ok(bytes),
            Err(RecvError::Timeout) => Err(RecvError::Empty),
            Err(e) => Err(e),
        }
    }

    /// Receives a message, waiting at most `timeout`. A message that was
    /// arriving in pieces when time ran out is kept for the next call.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        self.recv_message(
            &mut Delivery::bytes(&mut bytes),
            Some(Instant::now() + timeout),
        )?;
        Ok(bytes)
    }

    /// Receives the next message with the pipe ends it carries.
    pub fn recv_with(&self) -> Result<Message, RecvError> {
        let mut message = Message::default();
        let delivery = &mut Delivery {
            bytes: &mut message.bytes,
            pipes: Some(&mut message.pipes),
            block: None,
        };
        self.recv_message(delivery, None)?;
        Ok(message)
    }

    pub(super) fn recv_message(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvError> {
        if let Some(failure @ Failure::Protocol(_)) = self.failure() {
            return Err(failure.into());
        }
        let scope = self.scope(false);
        let mut rx = Self::lock(&self.rx);
        let rx = &mut *rx;
        out.bytes.clear();
        let mut asm = Assembly::default();
        if let Some(partial) = rx.partial.take() {
            *out.bytes = partial.bytes;
            asm = Assembly {
                total: Some(partial.total),
                pipes: partial.pipes,
            };
        }
        loop {
            let frame = match rx.waiter.wait(&scope, deadline, || rx.ring.peek()) {
                Ok(frame) => frame,
                Err(stop) => {
                    if let (Some(total), Stop::Timeout) = (asm.total, &stop) {
                        rx.partial = Some(Partial {
                            bytes: std::mem::take(out.bytes),
                            total,
                            pipes: asm.pipes,
                        });
                    }
                    return Err(self.stop_to_error(stop));
                }
            };
            let done = self
                .take_frame(&rx.ring, frame, &mut asm, out)
                .map_err(|why| self.corrupt(why))?;
            rx.ring.consume(frame);
            event::notify(&SysFutex, scope.me, scope.peer);
            if done {
                if let Some(pipes) = out.pipes.as_deref_mut() {
                    *pipes = asm.pipes;
                }
                return Ok(());
            }
        }
    }

    fn stop_to_error(&self, stop: Stop) -> RecvError {
        match stop {
            Stop::Timeout => RecvError::Timeout,
            Stop::Gone(failure) => failure.into(),
            Stop::Corrupt(Corrupt(why)) => self.corrupt(why).into(),
        }
    }

    /// Adds one checked frame to the message being assembled; `Ok(true)`
    /// when the message is complete.
    fn take_frame(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        asm: &mut Assembly,
        out: &mut Delivery<'_>,
    ) -> Result<bool, &'static str> {
        let tag = Tag::decode(frame.tag())?;
        let prefix = tag.prefix_len();
        if frame.len() < prefix {
            return Err("frame shorter than its own header fields");
        }
        let payload = frame.len() - prefix;
        let buf = &mut *out.bytes;
        match (asm.total, tag.kind) {
            (None, Kind::Whole) => {
                if payload > self.limit {
                    return Err("message longer than the receiver's limit");
                }
                self.claim_pipes(ring, frame, 0, tag.handles, &mut asm.pipes)?;
                ring.read_append(frame, prefix, payload, buf);
                Ok(true)
            }
            (None, Kind::First) => {
                let mut field = [0u8; TOTAL];
                ring.read(frame, 0, &mut field);
                let announced = u64::from_le_bytes(field);
                if announced > self.limit as u64 || (payload as u64) > announced {
                    return Err("message length out of range");
                }
                self.claim_pipes(ring, frame, TOTAL, tag.handles, &mut asm.pipes)?;
                ring.read_append(frame, prefix, payload, buf);
                asm.total = Some(announced as usize);
                Ok(false)
            }
            (Some(expected), Kind::More | Kind::Last) => {
                if buf.len() + payload > expected {
                    return Err("message pieces longer than announced");
                }
                ring.read_append(frame, 0, payload, buf);
                let last = tag.kind == Kind::Last;
                if last && buf.len() != expected {
                    return Err("message pieces shorter than announced");
                }
                Ok(last)
            }
            (Some(_), Kind::Abort) => {
                buf.clear();
                *asm = Assembly::default();
                Ok(false)
            }
            (None, Kind::Block) if payload == 0 => {
                self.claim_pipes(ring, frame, BLOCK_REF, tag.handles, &mut asm.pipes)?;
                self.take_block(ring, frame, out)?;
                Ok(true)
            }
            _ => Err("frame out of sequence"),
        }
    }

    /// Takes the pool block a `Block` frame names: as a view if the caller
    /// wants one, else copied out and released at once.
    fn take_block(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        out: &mut Delivery<'_>,
    ) -> Result<(), &'static str> {
        let mut head = [0u8; BLOCK_REF];
        ring.read(frame, 0, &mut head);
        let [i0, i1, i2, i3, g0, g1, g2, g3, len @ ..] = head;
        let len = u64::from_le_bytes(len);
        if len > self.limit as u64 {
            return Err("message longer than the receiver's limit");
        }
        let link = self
            .link()
            .ok_or("block frame on a pipe within one process")?;
        let id = u32::from_le_bytes([i0, i1, i2, i3]);
        let held = link.take_block(id, u32::from_le_bytes([g0, g1, g2, g3]), len as usize)?;
        match out.block.as_deref_mut() {
            Some(slot) => *slot = Some(held),
            None => out.bytes.extend_from_slice(held.bytes()),
        }
        Ok(())
    }

    /// Takes the pipe ends a frame names from the link.
    fn claim_pipes(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        at: usize,
        count: u16,
        got: &mut Vec<Pipe>,
    ) -> Result<(), &'static str> {
        if count == 0 {
            return Ok(());
        }
        let link = self
            .link
            .get()
            .ok_or("pipe ends sent over a pipe inside one process")?;
        for i in 0..usize::from(count) {
            let mut id = [0u8; HANDLE_ID];
            ring.read(frame, at + i * HANDLE_ID, &mut id);
            let (region, role) = link.claim(u64::from_le_bytes(id))?;
            got.push(Pipe::adopt(link, region, role, &PipeOptions::new()).map_err(|c| c.0)?);
        }
        Ok(())
    }
}
