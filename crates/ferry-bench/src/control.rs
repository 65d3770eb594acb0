//! Control messages between the parent and the child, sent outside the
//! timed spans through the same transport as the payloads.
//!
//! A payload has every byte equal (see [`crate::payload`]); a control
//! message is a fixed 16-byte phrase whose bytes differ, so the two never
//! collide. The child answers each one:
//! - [`CPU_QUERY`]: the child's CPU time so far, in nanoseconds;
//! - [`STREAM_END`] (the throughput workload): how many payloads it
//!   received, their checksum, and its CPU time so far.

use std::time::Duration;

use crate::error::Error;
use crate::transport::Endpoint;

/// Asks the child for its CPU time.
pub const CPU_QUERY: &[u8] = b"ferry-bench:cpu?";
/// Ends a stream: asks the child for its count, checksum and CPU time.
pub const STREAM_END: &[u8] = b"ferry-bench:end.";

/// The child's answer to [`STREAM_END`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamReport {
    /// Payloads received since the stream began.
    pub messages: u64,
    /// Their checksum (see [`crate::throughput::Checksum`]).
    pub checksum: u64,
    /// The child's CPU time so far.
    pub cpu: Duration,
}

/// Sends `message` and waits for the child's reply, which must hold `N`
/// little-endian `u64`s.
fn ask<const N: usize>(endpoint: &mut dyn Endpoint, message: &[u8]) -> Result<[u64; N], Error> {
    endpoint.prepare(message.len())?.copy_from_slice(message);
    endpoint.send()?;
    let reply = endpoint
        .recv()?
        .ok_or_else(|| Error::new("the child closed its end instead of answering"))?;
    decode(reply)
}

/// The parent: the child's CPU time so far.
pub fn child_cpu(endpoint: &mut dyn Endpoint) -> Result<Duration, Error> {
    let [nanos] =
        ask::<1>(endpoint, CPU_QUERY).map_err(|e| e.within("asking the child's CPU time"))?;
    Ok(Duration::from_nanos(nanos))
}

/// The parent: ends a stream and returns the child's report.
pub fn end_stream(endpoint: &mut dyn Endpoint) -> Result<StreamReport, Error> {
    let [messages, checksum, nanos] =
        ask::<3>(endpoint, STREAM_END).map_err(|e| e.within("ending the stream"))?;
    Ok(StreamReport {
        messages,
        checksum,
        cpu: Duration::from_nanos(nanos),
    })
}

/// The child: sends `words` as the reply to a control message.
pub fn answer(endpoint: &mut dyn Endpoint, words: &[u64]) -> Result<(), Error> {
    let buf = endpoint.prepare(words.len() * 8)?;
    for (chunk, word) in buf.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    endpoint.send()
}

/// Nanoseconds of `d`, as a control reply carries them.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn decode<const N: usize>(reply: &[u8]) -> Result<[u64; N], Error> {
    if reply.len() != N * 8 {
        return Err(Error::new(format!(
            "the child's answer has {} bytes, expected {}",
            reply.len(),
            N * 8
        )));
    }
    let mut words = [0u64; N];
    for (word, chunk) in words.iter_mut().zip(reply.chunks_exact(8)) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        *word = u64::from_le_bytes(bytes);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_messages_cannot_be_payloads() {
        for message in [CPU_QUERY, STREAM_END] {
            assert_eq!(message.len(), 16);
            assert!(message.iter().any(|&b| b != message[0]));
        }
        assert_ne!(CPU_QUERY, STREAM_END);
    }

    #[test]
    fn answers_decode_word_by_word() {
        let mut bytes = Vec::new();
        for word in [1u64, u64::MAX, 7] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        assert_eq!(decode::<3>(&bytes).unwrap(), [1, u64::MAX, 7]);
        assert!(decode::<1>(&bytes).is_err());
    }
}
