//! A Rust peer for the Python tests (`tests/test_processes.py`): started by
//! `ferry.spawn`, it echoes every message its parent sends, bytes as they
//! are, until the parent closes the pipe. Its argument, if any, says what
//! it does first:
//!
//! - `greet`: sends `hello from rust`;
//! - `oversize N`: sends N bytes past the parent's message limit (a peer
//!   that breaks the rules: the parent's receive says `ProtocolError`);
//! - `bad-parts`: sends the head of a pickle in parts claiming more parts
//!   than any honest sender sends;
//! - `garbage SEED N`: sends N messages of seeded nonsense in the framing
//!   of a pickle in parts, and hangs up.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pipe = ferry::Pipe::from_parent()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("greet") => pipe.send(b"hello from rust")?,
        Some("oversize") => {
            let len: usize = args.get(1).ok_or("oversize needs a length")?.parse()?;
            pipe.sender().set_max_message(usize::MAX);
            pipe.send(&vec![7u8; len])?;
        }
        Some("bad-parts") => {
            let mut head = b"\xffferry\x01\x00".to_vec();
            head.extend_from_slice(&u32::MAX.to_le_bytes());
            head.extend_from_slice(b"not a pickle");
            pipe.send(&head)?;
        }
        Some("garbage") => {
            let arg = |i: usize| -> Result<u64, Box<dyn std::error::Error>> {
                Ok(args
                    .get(i)
                    .ok_or("garbage needs a seed and a count")?
                    .parse()?)
            };
            return Ok(garbage(&pipe, arg(1)?, arg(2)?)?);
        }
        _ => {}
    }
    loop {
        match pipe.recv() {
            Ok(message) => pipe.send(&message)?,
            Err(ferry::RecvError::Disconnected) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sends `count` messages of nonsense in ferry's framing of a pickle in
/// parts, each body a valid pickle (unpickling what a peer sent is running
/// its code, by design, so the nonsense is aimed at the framing): heads
/// whose part and end counts are random (small or impossible), heads cut
/// short, and pickles of random bytes (which a head before them takes as
/// its parts).
fn garbage(pipe: &ferry::Pipe, seed: u64, count: u64) -> Result<(), ferry::SendError> {
    // xorshift64*: the same nonsense for the same seed.
    let mut state = seed.wrapping_mul(2) | 1;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    const NONE: &[u8] = b"\x80\x05N.";
    for _ in 0..count {
        let mut message = Vec::new();
        match next() % 3 {
            0 => {
                message.extend_from_slice(b"\xffferry\x01\x00");
                for _ in 0..2 {
                    let n = if next() % 2 == 0 { next() % 3 } else { next() };
                    message.extend_from_slice(&(n as u32).to_le_bytes());
                }
                message.extend_from_slice(NONE);
            }
            1 => {
                message.extend_from_slice(b"\xffferry\x01\x00");
                message.extend((0..next() % 8).map(|_| next() as u8));
            }
            _ => {
                let len = (next() % 4097) as u32;
                message.extend_from_slice(b"\x80\x05B");
                message.extend_from_slice(&len.to_le_bytes());
                message.extend((0..len).map(|_| next() as u8));
                message.push(b'.');
            }
        }
        pipe.send(&message)?;
    }
    Ok(())
}
