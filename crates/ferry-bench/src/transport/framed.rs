//! Length-prefixed messages over a byte stream (a Unix stream socket, a pair
//! of OS pipes): a 4-byte little-endian length, then the payload.
//!
//! Written as a good user of these primitives would: one `write` per message
//! (header and payload from one buffer), and a buffered reader, so a small
//! message costs one `read`.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};

use super::Endpoint;
use crate::error::{Context, Error};

/// The length in front of every message.
pub const HEADER: usize = 4;
/// The largest message accepted, so a bad header cannot ask for any amount
/// of memory.
pub const MAX_MESSAGE: usize = 1 << 30;
/// The reader's buffer: one `read` takes a small message whole.
const READ_BUFFER: usize = 64 * 1024;

/// An endpoint framing messages over a reader and a writer.
pub struct Framed<R, W> {
    reader: BufReader<R>,
    writer: W,
    /// The next message: header, then payload.
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl<R: Read, W: Write> Framed<R, W> {
    /// Messages read from `reader` and written to `writer`.
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: BufReader::with_capacity(READ_BUFFER, reader),
            writer,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }

    /// Whether the peer closed the stream at a message boundary.
    fn at_end(&mut self) -> Result<bool, Error> {
        loop {
            match self.reader.fill_buf() {
                Ok(bytes) => return Ok(bytes.is_empty()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("reading a message header"),
            }
        }
    }

    fn read_len(&mut self) -> Result<usize, Error> {
        let mut header = [0; HEADER];
        self.reader
            .read_exact(&mut header)
            .context("reading a message header")?;
        header_len(header)
    }
}

/// Makes `out` the header of a `len`-byte message and room for its
/// payload, which it returns.
pub fn frame(out: &mut Vec<u8>, len: usize) -> Result<&mut [u8], Error> {
    let header = u32::try_from(len)
        .ok()
        .filter(|&l| l as usize <= MAX_MESSAGE)
        .ok_or_else(|| Error::new(format!("a {len}-byte message is too large to frame")))?;
    out.resize(HEADER + len, 0);
    out[..HEADER].copy_from_slice(&header.to_le_bytes());
    Ok(&mut out[HEADER..])
}

/// The payload length `header` gives, within [`MAX_MESSAGE`].
pub fn header_len(header: [u8; HEADER]) -> Result<usize, Error> {
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_MESSAGE {
        return Err(Error::new(format!(
            "message header claims {len} bytes, over the {MAX_MESSAGE}-byte limit"
        )));
    }
    Ok(len)
}

impl<R: Read, W: Write> Endpoint for Framed<R, W> {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        frame(&mut self.out, len)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.writer
            .write_all(&self.out)
            .context("writing a message")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        if self.at_end()? {
            return Ok(None);
        }
        let len = self.read_len()?;
        self.inbox.resize(len, 0);
        self.reader
            .read_exact(&mut self.inbox)
            .context("reading a message payload")?;
        Ok(Some(&self.inbox))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_a_byte_stream() {
        let mut sender = Framed::new(std::io::empty(), Vec::new());
        for (len, marker) in [(0, 0), (5, 1), (100_000, 2)] {
            sender.prepare(len).unwrap().fill(marker);
            sender.send().unwrap();
        }
        let mut receiver = Framed::new(&sender.writer[..], std::io::sink());
        for (len, marker) in [(0, 0), (5, 1), (100_000, 2)] {
            let msg = receiver.recv().unwrap().unwrap();
            assert_eq!((msg.len(), msg.iter().all(|&b| b == marker)), (len, true));
        }
        assert!(receiver.recv().unwrap().is_none());
    }

    #[test]
    fn a_stream_cut_mid_message_is_an_error() {
        let bytes = [10, 0, 0, 0, 1, 2];
        let mut receiver = Framed::new(&bytes[..], std::io::sink());
        assert!(receiver.recv().is_err());
    }
}
