//! Records on a link's control socket.
//!
//! One record is 16 bytes, `magic: u32 = "FRY1"`, `kind: u16`, `role: u16`,
//! `id: u64`, with exactly one descriptor attached. The only kind today is
//! [`PIPE_END`]: the shared memory of a pipe whose end `role` (0 or 1) now
//! belongs to the receiver, to be claimed by the message frame naming `id`.

use super::VERSION;

/// Bytes in one record.
pub const RECORD_LEN: usize = 16;
/// Magic number opening every record: "FRY" and the version.
pub const MAGIC: u32 = u32::from_le_bytes([b'F', b'R', b'Y', VERSION]);
/// The record kind carrying a pipe end.
pub const PIPE_END: u16 = 1;

/// A pipe end sent over the control socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipeEnd {
    /// Which end of the pipe (0 or 1) the receiver now holds.
    pub role: u8,
    /// The id by which a message frame claims it.
    pub id: u64,
}

impl PipeEnd {
    /// Encodes the record.
    pub fn encode(self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&PIPE_END.to_le_bytes());
        out[6..8].copy_from_slice(&u16::from(self.role).to_le_bytes());
        out[8..].copy_from_slice(&self.id.to_le_bytes());
        out
    }

    /// Decodes and checks a record.
    pub fn decode(bytes: &[u8]) -> Result<Self, &'static str> {
        let bytes: &[u8; RECORD_LEN] = bytes
            .try_into()
            .map_err(|_| "control record of the wrong length")?;
        let [m0, m1, m2, m3, k0, k1, r0, r1, id @ ..] = *bytes;
        if u32::from_le_bytes([m0, m1, m2, m3]) != MAGIC {
            return Err("control record with a bad magic number or version");
        }
        if u16::from_le_bytes([k0, k1]) != PIPE_END {
            return Err("unknown control record kind");
        }
        let role = match u16::from_le_bytes([r0, r1]) {
            0 => 0,
            1 => 1,
            _ => return Err("pipe end role is neither 0 nor 1"),
        };
        Ok(Self {
            role,
            id: u64::from_le_bytes(id),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let rec = PipeEnd {
            role: 1,
            id: 0xdead_beef_1234,
        };
        assert_eq!(PipeEnd::decode(&rec.encode()), Ok(rec));
    }

    #[test]
    fn bad_records_are_refused() {
        let good = PipeEnd { role: 0, id: 9 }.encode();
        assert!(PipeEnd::decode(&good[..15]).is_err());
        for (at, value) in [(0, b'X'), (4, 9), (6, 2)] {
            let mut bad = good;
            bad[at] = value;
            assert!(PipeEnd::decode(&bad).is_err(), "byte {at} = {value}");
        }
    }
}
