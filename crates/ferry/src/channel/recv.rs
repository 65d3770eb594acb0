//! Receiving: frames out of the ring, checked, into whole messages.

use std::time::{Duration, Instant};

use super::wait::{Stop, Waiter};
use super::{Pipe, RecvError};
use crate::link::Failure;
use crate::ring::event::{self, SysFutex};
use crate::ring::{Consumer, Corrupt, Frame};
use crate::shm::RingView;
use crate::wire::frame::{HANDLE_ID, Kind, TOTAL, Tag};

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
        self.recv_message(buf, None, None)
    }

    /// Receives a message if one is waiting, else [`RecvError::Empty`].
    pub fn try_recv(&self) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        match self.recv_message(&mut bytes, None, Some(Instant::now())) {
            Ok(()) => Ok(bytes),
            Err(RecvError::Timeout) => Err(RecvError::Empty),
            Err(e) => Err(e),
        }
    }

    /// Receives a message, waiting at most `timeout`. A message that was
    /// arriving in pieces when time ran out is kept for the next call.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        self.recv_message(&mut bytes, None, Some(Instant::now() + timeout))?;
        Ok(bytes)
    }

    /// Receives the next message with the pipe ends it carries.
    pub fn recv_with(&self) -> Result<Message, RecvError> {
        let mut message = Message::default();
        self.recv_message(&mut message.bytes, Some(&mut message.pipes), None)?;
        Ok(message)
    }

    fn recv_message(
        &self,
        buf: &mut Vec<u8>,
        pipes: Option<&mut Vec<Pipe>>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvError> {
        if let Some(failure @ Failure::Protocol(_)) = self.failure() {
            return Err(failure.into());
        }
        let scope = self.scope(false);
        let mut rx = Self::lock(&self.rx);
        let rx = &mut *rx;
        buf.clear();
        let (mut total, mut got) = match rx.partial.take() {
            Some(p) => {
                *buf = p.bytes;
                (Some(p.total), p.pipes)
            }
            None => (None, Vec::new()),
        };
        loop {
            let frame = match rx.waiter.wait(&scope, deadline, || rx.ring.peek()) {
                Ok(frame) => frame,
                Err(stop) => {
                    if let (Some(total), Stop::Timeout) = (total, &stop) {
                        rx.partial = Some(Partial {
                            bytes: std::mem::take(buf),
                            total,
                            pipes: got,
                        });
                    }
                    return Err(self.stop_to_error(stop));
                }
            };
            let done = self
                .take_frame(&rx.ring, frame, buf, &mut total, &mut got)
                .map_err(|why| self.corrupt(why))?;
            rx.ring.consume(frame);
            event::notify(&SysFutex, scope.me, scope.peer);
            if done {
                if let Some(out) = pipes {
                    *out = got;
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
        buf: &mut Vec<u8>,
        total: &mut Option<usize>,
        got: &mut Vec<Pipe>,
    ) -> Result<bool, &'static str> {
        let tag = Tag::decode(frame.tag)?;
        let prefix = tag.prefix_len();
        if frame.len < prefix {
            return Err("frame shorter than its own header fields");
        }
        let payload = frame.len - prefix;
        match (*total, tag.kind) {
            (None, Kind::Whole) => {
                if payload > self.limit {
                    return Err("message longer than the receiver's limit");
                }
                self.claim_pipes(ring, frame, 0, tag.handles, got)?;
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
                self.claim_pipes(ring, frame, TOTAL, tag.handles, got)?;
                ring.read_append(frame, prefix, payload, buf);
                *total = Some(announced as usize);
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
                got.clear();
                *total = None;
                Ok(false)
            }
            _ => Err("frame out of sequence"),
        }
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
            got.push(Pipe::adopt(link, region, role));
        }
        Ok(())
    }
}
