//! A typed value over a byte half: encode and send, receive and decode.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::{SendError, SendFailure, SendTimeoutError, TrySendError};
use super::handles;
use crate::api::channel::Written;
use crate::api::channel::{RecvFault, SendFault};
use crate::api::codec::{self, DecodeError, EncodeError};
use crate::api::codec::{Encoder, Out};

/// How long a send may wait for room.
#[derive(Debug, Clone, Copy)]
pub(super) enum Until {
    /// As long as it takes.
    Sent,
    /// Not at all.
    Now,
    /// Until the deadline.
    Deadline(Instant),
}

/// A send's failure, before it becomes the caller's error type (with the
/// value handed back).
#[derive(Debug)]
pub(super) enum SendFail {
    Disconnected,
    Full,
    Timeout,
    Failed(SendFailure),
}

impl From<EncodeError> for SendFail {
    fn from(e: EncodeError) -> Self {
        Self::Failed(SendFailure::Encode(e))
    }
}

impl From<SendFault> for SendFail {
    fn from(fault: SendFault) -> Self {
        match fault {
            SendFault::Disconnected => Self::Disconnected,
            SendFault::Timeout => Self::Timeout,
            SendFault::TooLarge { len, limit } => {
                Self::Failed(SendFailure::TooLarge { len, limit })
            }
            SendFault::NotTransferable(why) => Self::Failed(SendFailure::NotTransferable(why)),
            SendFault::Protocol(e) => Self::Failed(SendFailure::Protocol(e)),
            SendFault::Io(e) => Self::Failed(SendFailure::Io(e)),
        }
    }
}

/// Turns a byte send's error into a [`SendFail`] (the three byte error
/// types share their variants but for the one each adds).
macro_rules! from_byte_error {
    ($fn:ident, $error:ident $(, $extra:ident => $fail:ident)?) => {
        fn $fn(e: crate::$error) -> SendFail {
            match e {
                $(crate::$error::$extra => SendFail::$fail,)?
                crate::$error::Disconnected => SendFail::Disconnected,
                crate::$error::TooLarge { len, limit } => {
                    SendFail::Failed(SendFailure::TooLarge { len, limit })
                }
                crate::$error::NotTransferable(why) => {
                    SendFail::Failed(SendFailure::NotTransferable(why))
                }
                crate::$error::Protocol(e) => SendFail::Failed(SendFailure::Protocol(e)),
                crate::$error::Io(e) => SendFail::Failed(SendFailure::Io(e)),
                // `non_exhaustive`: a variant added later is reported as
                // this process's failure, never as the peer's.
                #[allow(unreachable_patterns)]
                other => SendFail::Failed(SendFailure::Io(std::io::Error::other(other.to_string()))),
            }
        }
    };
}

from_byte_error!(from_send, SendError);
from_byte_error!(from_try, TrySendError, Full => Full);
from_byte_error!(from_timeout, SendTimeoutError, Timeout => Timeout);

impl SendFail {
    /// The error of a send that waits as long as it takes, holding `value`.
    pub(super) fn send_error<T>(self, value: T) -> SendError<T> {
        match self {
            Self::Disconnected => SendError::Disconnected(value),
            Self::Failed(failure) => SendError::Failed(value, failure),
            // Never made by a send that waits as long as it takes.
            Self::Full | Self::Timeout => {
                SendError::Failed(value, SendFailure::Io(std::io::ErrorKind::TimedOut.into()))
            }
        }
    }

    /// The error of a `try_` send, holding `value`.
    pub(super) fn try_send_error<T>(self, value: T) -> TrySendError<T> {
        match self {
            Self::Full | Self::Timeout => TrySendError::Full(value),
            other => other.send_error(value).into(),
        }
    }

    /// The error of a `_timeout` send, holding `value`.
    pub(super) fn send_timeout_error<T>(self, value: T) -> SendTimeoutError<T> {
        match self {
            Self::Full | Self::Timeout => SendTimeoutError::Timeout(value),
            other => other.send_error(value).into(),
        }
    }
}

/// Encodes `value` into `buf` (cleared first) with the halves it holds.
pub(super) fn encode<T: Serialize>(
    value: &T,
    buf: &mut Vec<u8>,
) -> (Result<(), EncodeError>, handles::Outgoing) {
    buf.clear();
    handles::encoding(|| codec::encode_into(value, buf))
}

/// Sends an encoded message (and its ends) on `tx`; on failure, hands
/// back the ends that were not sent.
pub(super) fn send_encoded(
    tx: &crate::api::channel::Sender,
    bytes: &[u8],
    ends: Vec<crate::api::channel::Handle>,
    until: Until,
) -> Result<(), (SendFail, Vec<crate::api::channel::Handle>)> {
    let plain = |fail| (fail, Vec::new());
    match (ends.is_empty(), until) {
        (true, Until::Sent) => tx.send(bytes).map_err(|e| plain(from_send(e))),
        (true, Until::Now) => tx.try_send(bytes).map_err(|e| plain(from_try(e))),
        (true, Until::Deadline(d)) => tx
            .send_timeout(bytes, d.saturating_duration_since(Instant::now()))
            .map_err(|e| plain(from_timeout(e))),
        (false, Until::Sent) => tx
            .send_with(bytes, ends)
            .map_err(|e| (from_send(e.error), e.handles)),
        (false, Until::Now) => tx
            .try_send_with(bytes, ends)
            .map_err(|e| (from_try(e.error), e.handles)),
        (false, Until::Deadline(d)) => tx
            .send_with_timeout(bytes, ends, d.saturating_duration_since(Instant::now()))
            .map_err(|e| (from_timeout(e.error), e.handles)),
    }
}

/// A sender's encode buffer, and what it learned of its message sizes.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    buf: Vec<u8>,
    /// The last message went out of line: count the next one first, to
    /// encode it straight into a loaned block.
    large: bool,
    /// The last message's length, when it was encoded into the ring: the
    /// room the next one waits for before it is encoded there.
    last: usize,
    /// The last message did not fit in one frame: go through the buffer
    /// (until a message is small again).
    skip_ring: bool,
}

/// A message this short always fits in one frame of a ring.
const SURELY_FITS: usize = 4096;

/// The encoder's output, straight into a ring frame.
struct RingOut<'w, 'a, 'r>(&'w mut Written<'a, 'r>);

impl Out for RingOut<'_, '_, '_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.0.put(bytes);
    }
    #[inline]
    fn put_byte(&mut self, byte: u8) {
        self.0.put(&[byte]);
    }
}

impl Until {
    fn deadline(self) -> Option<Instant> {
        match self {
            Until::Sent => None,
            Until::Now => Some(Instant::now()),
            Until::Deadline(deadline) => Some(deadline),
        }
    }

    fn fail(self, fault: SendFault) -> SendFail {
        match (self, fault) {
            (Until::Now, SendFault::Timeout) => SendFail::Full,
            (Until::Deadline(_), SendFault::Timeout) => SendFail::Timeout,
            (_, fault) => fault.into(),
        }
    }
}

/// Encodes a small value straight into the ring, once there is room for
/// one as long as the last: `Ok(true)` if it went, `Ok(false)` if it did
/// not fit in one frame or holds channel halves (the caller sends it from
/// a buffer; the halves taken stay in the current encode's table).
fn send_in_ring<T: Serialize>(
    tx: &crate::api::channel::Sender,
    scratch: &mut Scratch,
    value: &T,
    until: Until,
) -> Result<bool, SendFail> {
    let mut failed = None;
    let mut written = 0;
    let sent = tx.send_written(
        scratch.last,
        |frame| {
            let mut encoder = Encoder::new(RingOut(frame));
            let encoded = value.serialize(&mut encoder).and_then(|()| {
                let elements = encoder.finish();
                codec::check_elements(elements, encoder.into_out().0.written())
            });
            match encoded {
                Ok(()) if handles::has_ends() => frame.abort(),
                Ok(()) => written = frame.written(),
                Err(e) => {
                    failed = Some(e);
                    frame.abort();
                }
            }
        },
        until.deadline(),
    );
    match (sent, failed) {
        (_, Some(e)) => Err(e.into()),
        (Ok(true), None) => {
            scratch.last = written;
            Ok(true)
        }
        (Ok(false), None) => {
            scratch.last = 0;
            scratch.skip_ring = !handles::has_ends();
            Ok(false)
        }
        (Err(fault), None) => Err(until.fail(fault)),
    }
}

/// Encodes and sends one value.
///
/// A value that goes out of line (as large messages do) is encoded
/// straight into a loaned pool block: a counting pass first, then one pass
/// that writes, so its byte fields are copied once. Others are encoded in
/// one pass into a buffer the ring copies from. Which to try first follows
/// the last message's size; a small one that turns out large is sent from
/// the buffer.
///
/// If it is not sent, the channel halves the value held are put back into
/// it (see [`handles::Outgoing::restore`]), so the caller gets it back
/// whole.
pub(super) fn send<T: Serialize>(
    tx: &crate::api::channel::Sender,
    scratch: &mut Scratch,
    value: &T,
    until: Until,
) -> Result<(), SendFail> {
    let (result, mut out) = match scratch.large && matches!(until, Until::Sent) {
        true => send_counted(tx, scratch, value, until),
        false => send_framed(tx, scratch, value, until),
    };
    if result.is_err() {
        out.restore();
    }
    out.finish();
    result
}

/// [`send`] after a large message: counted first, then written into a
/// loaned block (or into the buffer if it is not large after all, or holds
/// halves).
fn send_counted<T: Serialize>(
    tx: &crate::api::channel::Sender,
    scratch: &mut Scratch,
    value: &T,
    until: Until,
) -> (Result<(), SendFail>, handles::Outgoing) {
    let (counted, mut out) = handles::encoding(|| codec::encoded_len(value));
    let len = match counted {
        Ok(len) => len,
        Err(e) => return (Err(e.into()), out),
    };
    let ends = std::mem::take(&mut out.ends);
    if ends.is_empty() && tx.goes_out_of_line(len) {
        let sent = (|| {
            let mut loan = tx.loan(len).map_err(from_send)?;
            codec::encode_exact(value, &mut loan)?;
            loan.send().map_err(from_send)
        })();
        return (sent, out);
    }
    scratch.large = false;
    // The counting pass took the halves; this one writes the same indices
    // (so it needs no table of its own).
    let (sent, mut out) = handles::continuing(out, || {
        send_buffered(
            tx,
            scratch,
            |buf| codec::encode_into(value, buf),
            ends,
            until,
        )
    });
    let result = match sent {
        Ok(written) if written == len => Ok(()),
        Ok(_) => Err(EncodeError::SizeChanged.into()),
        Err((fail, ends)) => {
            out.hand_back(ends);
            Err(fail)
        }
    };
    (result, out)
}

/// [`send`] of a value encoded straight into a ring frame, or from the
/// buffer if it does not fit one or holds halves.
fn send_framed<T: Serialize>(
    tx: &crate::api::channel::Sender,
    scratch: &mut Scratch,
    value: &T,
    until: Until,
) -> (Result<(), SendFail>, handles::Outgoing) {
    let skipped = scratch.skip_ring;
    let (in_ring, out) = match skipped {
        false => handles::encoding(|| send_in_ring(tx, scratch, value, until)),
        true => (Ok(false), handles::Outgoing::default()),
    };
    if !matches!(in_ring, Ok(false)) {
        return (in_ring.map(|_| ()), out);
    }
    // Too large for one frame, or it holds halves: from the buffer (the
    // halves taken above keep their indices; if the ring was skipped, this
    // encode takes them).
    scratch.buf.clear();
    let (encoded, mut out) = match skipped {
        false => handles::continuing(out, || codec::encode_into(value, &mut scratch.buf)),
        true => handles::encoding(|| codec::encode_into(value, &mut scratch.buf)),
    };
    scratch.skip_ring = scratch.buf.len() >= SURELY_FITS;
    if let Err(e) = encoded {
        return (Err(e.into()), out);
    }
    let ends = std::mem::take(&mut out.ends);
    scratch.large = tx.goes_out_of_line(scratch.buf.len());
    let sent = send_encoded(tx, &scratch.buf, ends, until);
    if scratch.buf.capacity() > KEEP_BUFFER {
        scratch.buf = Vec::new();
    }
    let result = sent.map_err(|(fail, ends)| {
        out.hand_back(ends);
        fail
    });
    (result, out)
}

/// Encodes into the scratch buffer with `encode` and sends it; returns the
/// encoded length, or the failure and the ends not sent.
fn send_buffered(
    tx: &crate::api::channel::Sender,
    scratch: &mut Scratch,
    encode: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
    ends: Vec<crate::api::channel::Handle>,
    until: Until,
) -> Result<usize, (SendFail, Vec<crate::api::channel::Handle>)> {
    scratch.buf.clear();
    if let Err(e) = encode(&mut scratch.buf) {
        return Err((e.into(), ends));
    }
    let len = scratch.buf.len();
    let sent = send_encoded(tx, &scratch.buf, ends, until);
    if scratch.buf.capacity() > KEEP_BUFFER {
        scratch.buf = Vec::new();
    }
    sent.map(|()| len)
}

/// The scratch buffer is kept between sends up to this size.
const KEEP_BUFFER: usize = 1 << 20;

/// A receive's failure, before it becomes the caller's error type.
#[derive(Debug)]
pub(super) enum RecvFail {
    Recv(RecvFault),
    Decode(DecodeError),
}

impl From<RecvFault> for RecvFail {
    fn from(fault: RecvFault) -> Self {
        Self::Recv(fault)
    }
}

/// Receives one message on `rx` (into `buf`, reused, unless it came out
/// of line: then it is decoded in place, and its `SharedBytes` fields are
/// views of its block) and decodes it as a `T`, claiming the ends it
/// carries.
pub(super) fn recv<T: DeserializeOwned>(
    rx: &crate::api::channel::Receiver,
    buf: &mut Vec<u8>,
    deadline: Option<Instant>,
) -> Result<T, RecvFail> {
    recv_with::<T, T>(rx, buf, deadline, codec::decode_message::<T>)
}

/// [`recv`], decoding over `place` (see [`codec::decode_message_into`]).
pub(super) fn recv_into<T: DeserializeOwned>(
    rx: &crate::api::channel::Receiver,
    buf: &mut Vec<u8>,
    deadline: Option<Instant>,
    place: &mut T,
) -> Result<(), RecvFail> {
    recv_with::<T, ()>(rx, buf, deadline, |bytes, shared| {
        codec::decode_message_into(bytes, shared, place)
    })
}

fn recv_with<T, R>(
    rx: &crate::api::channel::Receiver,
    buf: &mut Vec<u8>,
    deadline: Option<Instant>,
    decode: impl FnOnce(&[u8], bool) -> Result<R, DecodeError>,
) -> Result<R, RecvFail> {
    let (block, ends) = rx.recv_parts(buf, deadline)?;
    let (decoded, unclaimed, len) = match block {
        Some(view) => {
            let view = Arc::new(view);
            let (decoded, unclaimed) =
                handles::decoding(ends, Some(Arc::clone(&view)), || decode(&view, true));
            (decoded, unclaimed, view.len())
        }
        None => {
            let (decoded, unclaimed) = handles::decoding(ends, None, || decode(buf, false));
            let len = buf.len();
            if buf.capacity() > KEEP_BUFFER {
                *buf = Vec::new();
            }
            (decoded, unclaimed, len)
        }
    };
    let value = decoded.map_err(RecvFail::Decode)?;
    match unclaimed {
        0 => Ok(value),
        n => Err(RecvFail::Decode(codec::DecodeError::unclaimed::<T>(n, len))),
    }
}
