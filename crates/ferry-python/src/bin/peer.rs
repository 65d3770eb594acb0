//! A Rust peer for the Python tests (`tests/test_processes.py`): started by
//! `ferry.spawn`, it echoes every message its parent sends, bytes as they
//! are, until the parent closes the pipe. Its argument, if any, says what
//! it does first:
//!
//! - `greet`: sends `hello from rust`;
//! - `oversize N`: sends N bytes past the parent's message limit (a peer
//!   that breaks the rules: the parent's receive says `ProtocolError`);
//! - `bad-parts`: sends the head of a pickle in parts claiming more parts
//!   than any honest sender sends.

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
