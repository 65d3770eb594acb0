//! What every transport moves: a payload whose every byte is written by the
//! sender and read by the receiver, so no transport wins by not moving data.
//!
//! Each round trip has a marker byte; the request is filled with it and the
//! reply with its complement, and each side checks every byte it receives.

use crate::error::Error;

/// The marker of round trip `index` (consecutive round trips differ).
pub fn marker(index: usize) -> u8 {
    index as u8
}

/// The marker the echo writes in reply to a request marked `request`.
pub fn reply_marker(request: u8) -> u8 {
    !request
}

/// Writes `marker` into every byte of `buf`.
pub fn fill(buf: &mut [u8], marker: u8) {
    buf.fill(marker);
}

/// Reads every byte of `buf` and checks each equals `marker`.
pub fn check(buf: &[u8], marker: u8) -> Result<(), Error> {
    // A branch-free fold, so the compiler reads the bytes a vector at a time.
    let stray = buf.iter().fold(0u8, |acc, &b| acc | (b ^ marker));
    if stray == 0 {
        return Ok(());
    }
    let at = buf.iter().position(|&b| b != marker).unwrap_or(0);
    Err(Error::new(format!(
        "payload corrupted: byte {at} of {} is {:#04x}, expected {marker:#04x}",
        buf.len(),
        buf[at]
    )))
}

/// Reads the marker of a received request and checks every byte carries it.
pub fn read_request(buf: &[u8]) -> Result<u8, Error> {
    let marker = *buf
        .first()
        .ok_or_else(|| Error::new("received an empty request: requests carry a marker byte"))?;
    check(buf, marker)?;
    Ok(marker)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_buffer_checks() {
        let mut buf = vec![0; 1000];
        fill(&mut buf, 7);
        assert!(check(&buf, 7).is_ok());
        assert_eq!(read_request(&buf).unwrap(), 7);
    }

    #[test]
    fn one_stray_byte_is_caught_and_located() {
        let mut buf = vec![9; 1000];
        buf[999] = 8;
        let error = check(&buf, 9).unwrap_err().to_string();
        assert!(error.contains("byte 999 of 1000"), "{error}");
        assert!(read_request(&[]).is_err());
    }

    #[test]
    fn replies_and_neighbours_differ() {
        for i in 0..1000 {
            assert_ne!(reply_marker(marker(i)), marker(i));
            assert_ne!(marker(i), marker(i + 1));
        }
    }
}
