//! Control messages between the parent and the child, sent outside the
//! timed spans through the same transport as the payloads: a fixed 16-byte
//! phrase whose bytes differ, so it never equals a payload (whose bytes are
//! all equal, see [`crate::payload`]). The child answers with little-endian
//! words, then the CPUs it noted since its last answer (see [`CpuLog`]).

use std::time::Duration;

use crate::error::Error;
use crate::placement::{CpuLog, MAX_SAMPLES};
use crate::transport::Endpoint;

/// Asks the child for its CPU time.
pub const CPU_QUERY: &[u8] = b"ferry-bench:cpu?";
/// Ends a stream: asks the child for its count, checksum and CPU time.
pub const STREAM_END: &[u8] = b"ferry-bench:end.";

/// The child's answer to [`STREAM_END`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamReport {
    /// Payloads received since the stream began.
    pub messages: u64,
    /// Their checksum (see [`crate::throughput::Checksum`]).
    pub checksum: u64,
    /// The child's CPU time so far.
    pub cpu: Duration,
    /// The CPUs the child noted since the last query.
    pub cpus: Vec<u64>,
}

/// The child's answer to [`CPU_QUERY`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildTime {
    /// The child's CPU time so far.
    pub cpu: Duration,
    /// The CPUs the child noted since the last query.
    pub cpus: Vec<u64>,
}

/// Sends `message` and waits for the child's reply, which must hold `N`
/// little-endian `u64`s, then at most [`MAX_SAMPLES`] CPU numbers.
fn ask<const N: usize>(
    endpoint: &mut dyn Endpoint,
    message: &[u8],
) -> Result<([u64; N], Vec<u64>), Error> {
    endpoint.prepare(message.len())?.copy_from_slice(message);
    endpoint.send()?;
    let reply = endpoint
        .recv()?
        .ok_or_else(|| Error::new("the child closed its end instead of answering"))?;
    decode(reply)
}

/// The parent: the child's CPU time so far, and where both processes run.
pub fn child_cpu(endpoint: &mut dyn Endpoint) -> Result<ChildTime, Error> {
    let ([nanos], cpus) =
        ask::<1>(endpoint, CPU_QUERY).map_err(|e| e.within("asking the child's CPU time"))?;
    Ok(ChildTime {
        cpu: Duration::from_nanos(nanos),
        cpus,
    })
}

/// The parent: ends a stream and returns the child's report.
pub fn end_stream(endpoint: &mut dyn Endpoint) -> Result<StreamReport, Error> {
    let ([messages, checksum, nanos], cpus) =
        ask::<3>(endpoint, STREAM_END).map_err(|e| e.within("ending the stream"))?;
    Ok(StreamReport {
        messages,
        checksum,
        cpu: Duration::from_nanos(nanos),
        cpus,
    })
}

/// The child: answers a control message with `words`, then the CPUs `log`
/// noted (starting it anew).
pub fn answer(endpoint: &mut dyn Endpoint, words: &[u64], log: &mut CpuLog) -> Result<(), Error> {
    let all: Vec<u64> = words.iter().copied().chain(log.take()).collect();
    let buf = endpoint.prepare(all.len() * 8)?;
    for (chunk, word) in buf.chunks_exact_mut(8).zip(all) {
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    endpoint.send()
}

fn decode<const N: usize>(reply: &[u8]) -> Result<([u64; N], Vec<u64>), Error> {
    let most = (N + MAX_SAMPLES) * 8;
    if reply.len() < N * 8 || reply.len() > most || !reply.len().is_multiple_of(8) {
        return Err(Error::new(format!(
            "the child's answer has {} bytes, expected {} and then up to {MAX_SAMPLES} words",
            reply.len(),
            N * 8
        )));
    }
    let (words, _) = reply.as_chunks::<8>();
    let mut all = words.iter().map(|&word| u64::from_le_bytes(word));
    let words = std::array::from_fn(|_| all.next().unwrap_or_default());
    Ok((words, all.collect()))
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
        assert_eq!(decode::<3>(&bytes).unwrap(), ([1, u64::MAX, 7], vec![]));
        assert_eq!(decode::<1>(&bytes).unwrap(), ([1], vec![u64::MAX, 7]));
        assert!(decode::<4>(&bytes).is_err());
        assert!(decode::<1>(&bytes[..12]).is_err());
    }
}
