//! A typed value over a byte half: encode and send, receive and decode.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::handles;
use crate::channel::RecvFault;
use crate::codec::{self, DecodeError, EncodeError};
use crate::{SendError, SendTimeoutError, TrySendError};

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

/// A send's failure, before it becomes the caller's error type.
#[derive(Debug)]
pub(super) enum SendFail {
    Send(SendError),
    Full,
    Timeout,
}

impl From<EncodeError> for SendFail {
    fn from(e: EncodeError) -> Self {
        Self::Send(SendError::Encode(e))
    }
}

impl From<SendFail> for SendError {
    fn from(fail: SendFail) -> Self {
        match fail {
            SendFail::Send(e) => e,
            // Never made by a send that waits as long as it takes.
            SendFail::Full | SendFail::Timeout => {
                SendError::Io(std::io::ErrorKind::TimedOut.into())
            }
        }
    }
}

impl From<SendFail> for TrySendError {
    fn from(fail: SendFail) -> Self {
        match fail {
            SendFail::Send(e) => e.into(),
            SendFail::Full | SendFail::Timeout => TrySendError::Full,
        }
    }
}

impl From<SendFail> for SendTimeoutError {
    fn from(fail: SendFail) -> Self {
        match fail {
            SendFail::Send(e) => e.into(),
            SendFail::Full | SendFail::Timeout => SendTimeoutError::Timeout,
        }
    }
}

fn from_try(e: TrySendError) -> SendFail {
    match e {
        TrySendError::Full => SendFail::Full,
        TrySendError::Disconnected => SendFail::Send(SendError::Disconnected),
        TrySendError::TooLarge { len, limit } => SendFail::Send(SendError::TooLarge { len, limit }),
        TrySendError::NotTransferable(why) => SendFail::Send(SendError::NotTransferable(why)),
        TrySendError::Protocol(e) => SendFail::Send(SendError::Protocol(e)),
        TrySendError::Io(e) => SendFail::Send(SendError::Io(e)),
        TrySendError::Encode(e) => SendFail::Send(SendError::Encode(e)),
    }
}

fn from_timeout(e: SendTimeoutError) -> SendFail {
    match e {
        SendTimeoutError::Timeout => SendFail::Timeout,
        SendTimeoutError::Disconnected => SendFail::Send(SendError::Disconnected),
        SendTimeoutError::TooLarge { len, limit } => {
            SendFail::Send(SendError::TooLarge { len, limit })
        }
        SendTimeoutError::NotTransferable(why) => SendFail::Send(SendError::NotTransferable(why)),
        SendTimeoutError::Protocol(e) => SendFail::Send(SendError::Protocol(e)),
        SendTimeoutError::Io(e) => SendFail::Send(SendError::Io(e)),
        SendTimeoutError::Encode(e) => SendFail::Send(SendError::Encode(e)),
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

/// Sends an encoded message (and its ends) on `tx`.
pub(super) fn send_encoded(
    tx: &crate::Sender,
    bytes: &[u8],
    ends: Vec<crate::End>,
    until: Until,
) -> Result<(), SendFail> {
    match (ends.is_empty(), until) {
        (true, Until::Sent) => tx.send(bytes).map_err(SendFail::Send),
        (true, Until::Now) => tx.try_send(bytes).map_err(from_try),
        (true, Until::Deadline(d)) => tx
            .send_timeout(bytes, d.saturating_duration_since(Instant::now()))
            .map_err(from_timeout),
        (false, Until::Sent) => tx
            .send_with(bytes, ends)
            .map_err(|e| SendFail::Send(e.error)),
        (false, Until::Now) => tx.try_send_with(bytes, ends).map_err(|e| from_try(e.error)),
        (false, Until::Deadline(d)) => tx
            .send_with_timeout(bytes, ends, d.saturating_duration_since(Instant::now()))
            .map_err(|e| from_timeout(e.error)),
    }
}

/// Encodes and sends one value. A large value with no halves in it is
/// encoded straight into a loaned pool block (a counting pass first, then
/// one pass that writes; its byte fields are copied once); others go
/// through `buf`.
pub(super) fn send<T: Serialize>(
    tx: &crate::Sender,
    buf: &mut Vec<u8>,
    value: &T,
    until: Until,
) -> Result<(), SendFail> {
    let (counted, mut out) = handles::encoding(|| codec::encoded_len(value));
    let ends = std::mem::take(&mut out.ends);
    let result = counted
        .map_err(SendFail::from)
        .and_then(|len| send_counted(tx, buf, value, len, ends, until));
    out.finish();
    result
}

fn send_counted<T: Serialize>(
    tx: &crate::Sender,
    buf: &mut Vec<u8>,
    value: &T,
    len: usize,
    ends: Vec<crate::End>,
    until: Until,
) -> Result<(), SendFail> {
    if ends.is_empty() && len >= crate::LOAN_IN_PLACE && matches!(until, Until::Sent) {
        let mut loan = tx.loan(len).map_err(SendFail::Send)?;
        codec::encode_exact(value, &mut loan)?;
        return loan.send().map_err(SendFail::Send);
    }
    buf.clear();
    // The counting pass took the halves; this one writes the same indices.
    let (written, more) = handles::encoding(|| codec::encode_into(value, buf));
    more.finish();
    written?;
    if buf.len() != len {
        return Err(EncodeError::SizeChanged.into());
    }
    let result = send_encoded(tx, buf, ends, until);
    if buf.capacity() > KEEP_BUFFER {
        *buf = Vec::new();
    }
    result
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

/// Receives one message on `rx` and decodes it as a `T`, claiming the
/// ends it carries.
pub(super) fn recv<T: DeserializeOwned>(
    rx: &crate::Receiver,
    deadline: Option<Instant>,
) -> Result<T, RecvFail> {
    let (view, ends) = rx.recv_parts(deadline)?;
    let view = Arc::new(view);
    let in_place = view.is_in_place();
    let (decoded, unclaimed) = handles::decoding(ends, Some(Arc::clone(&view)), || {
        codec::decode_message::<T>(&view, in_place)
    });
    let value = decoded.map_err(RecvFail::Decode)?;
    match unclaimed {
        0 => Ok(value),
        n => Err(RecvFail::Decode(codec::DecodeError::unclaimed::<T>(
            n,
            view.len(),
        ))),
    }
}
