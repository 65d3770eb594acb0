//! Records on a link's control socket.
//!
//! One record is 16 bytes, `magic: u32 = "FRY1"`, `kind: u16`, `arg: u16`,
//! `id: u64`, with one descriptor attached (none for `Retire`):
//!
//! | kind | `arg` | `id` | descriptor |
//! |------|-------|------|------------|
//! | 1 [`Record::PipeEnd`] | end `role` (0 or 1) now the receiver's | claimed by the message frame naming `id` | the pipe's region |
//! | 2 [`Record::Block`] | size class | the block's number on this link | the block |
//! | 3 [`Record::ReleaseTable`] | 0 | 0 | the table where the receiver hands blocks back |
//! | 4 [`Record::Retire`] | 0 | the block's number | none: the sender unmapped the (free) block; unmap it too |

use super::Violation;

use super::VERSION;

/// Bytes in one record.
pub const RECORD_LEN: usize = 16;
/// Magic number opening every record: "FRY" and the version.
pub const MAGIC: u32 = u32::from_le_bytes([b'F', b'R', b'Y', VERSION]);

/// One control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The shared memory of a pipe whose end `role` now belongs to the receiver.
    PipeEnd {
        /// Which end of the pipe (0 or 1) the receiver now holds.
        role: u8,
        /// The id by which a message frame claims it.
        id: u64,
    },
    /// A pool block the sender will name in `Block` frames.
    Block {
        /// Its size class.
        class: u8,
        /// Its number on this link.
        id: u64,
    },
    /// The sender's release table for this link.
    ReleaseTable,
    /// A block the sender will never name again (it was free, and unmapped).
    Retire {
        /// The block's number on this link.
        id: u64,
    },
}

impl Record {
    /// Encodes the record.
    pub fn encode(self) -> [u8; RECORD_LEN] {
        let (kind, arg, id) = match self {
            Self::PipeEnd { role, id } => (1u16, u16::from(role), id),
            Self::Block { class, id } => (2, u16::from(class), id),
            Self::ReleaseTable => (3, 0, 0),
            Self::Retire { id } => (4, 0, id),
        };
        let mut out = [0u8; RECORD_LEN];
        out[..4].copy_from_slice(&MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&kind.to_le_bytes());
        out[6..8].copy_from_slice(&arg.to_le_bytes());
        out[8..].copy_from_slice(&id.to_le_bytes());
        out
    }

    /// Decodes and checks a record: exactly [`RECORD_LEN`] bytes, this
    /// magic and version, a known kind, and an `arg` and `id` that kind
    /// allows (the fields a kind does not use must be zero). So every
    /// record that decodes encodes back to the same bytes.
    pub fn decode(bytes: &[u8]) -> Result<Self, Violation> {
        let bytes: &[u8; RECORD_LEN] = bytes.try_into().map_err(|_| Violation::RecordLength)?;
        let [m0, m1, m2, m3, k0, k1, a0, a1, id @ ..] = *bytes;
        if u32::from_le_bytes([m0, m1, m2, m3]) != MAGIC {
            return Err(Violation::RecordMagic);
        }
        let arg = u16::from_le_bytes([a0, a1]);
        let id = u64::from_le_bytes(id);
        match u16::from_le_bytes([k0, k1]) {
            1 => Ok(Self::PipeEnd {
                role: Self::role(arg)?,
                id,
            }),
            2 => Ok(Self::Block {
                class: u8::try_from(arg).map_err(|_| Violation::BlockClassOutOfRange)?,
                id,
            }),
            3 if arg == 0 && id == 0 => Ok(Self::ReleaseTable),
            3 => Err(Violation::ReleaseTableRecordArgs),
            4 if arg == 0 => Ok(Self::Retire { id }),
            4 => Err(Violation::RetireRecordArg),
            _ => Err(Violation::UnknownRecordKind),
        }
    }

    /// A pipe end's role from a record's `arg`.
    fn role(arg: u16) -> Result<u8, Violation> {
        match arg {
            0 => Ok(0),
            1 => Ok(1),
            _ => Err(Violation::BadPipeEndRole),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        for rec in [
            Record::PipeEnd {
                role: 1,
                id: 0xdead_beef_1234,
            },
            Record::Block { class: 8, id: 77 },
            Record::ReleaseTable,
            Record::Retire { id: 5 },
        ] {
            assert_eq!(Record::decode(&rec.encode()), Ok(rec));
        }
    }

    #[test]
    fn records_are_laid_out_as_documented() {
        let bytes = Record::Block {
            class: 3,
            id: 0x0102,
        }
        .encode();
        assert_eq!(
            bytes,
            *b"FRY\x01\x02\x00\x03\x00\x02\x01\x00\x00\x00\x00\x00\x00"
        );
    }

    #[test]
    fn records_of_the_wrong_length_are_refused() {
        let good = Record::Retire { id: 1 }.encode();
        let mut long = good.to_vec();
        long.push(0);
        for bytes in [&[][..], &good[..1], &good[..15], &long] {
            assert_eq!(
                Record::decode(bytes),
                Err(Violation::RecordLength),
                "{} bytes",
                bytes.len()
            );
        }
    }

    #[test]
    fn bad_magic_or_version_is_refused() {
        let good = Record::ReleaseTable.encode();
        for at in 0..4 {
            let mut bad = good;
            bad[at] ^= 0x20;
            assert_eq!(
                Record::decode(&bad),
                Err(Violation::RecordMagic),
                "byte {at}"
            );
        }
    }

    /// A record with the given raw fields and the right magic.
    fn raw(kind: u16, arg: u16, id: u64) -> [u8; RECORD_LEN] {
        let mut out = Record::ReleaseTable.encode();
        out[4..6].copy_from_slice(&kind.to_le_bytes());
        out[6..8].copy_from_slice(&arg.to_le_bytes());
        out[8..].copy_from_slice(&id.to_le_bytes());
        out
    }

    #[test]
    fn bad_fields_are_refused() {
        for (what, bytes) in [
            ("kind 0", raw(0, 0, 0)),
            ("kind 5", raw(5, 0, 0)),
            ("kind 0xffff", raw(0xffff, 0, 0)),
            ("pipe end role 2", raw(1, 2, 9)),
            ("pipe end role 0xffff", raw(1, 0xffff, 9)),
            ("block class 256", raw(2, 256, 9)),
            ("release table with an arg", raw(3, 1, 0)),
            ("release table with an id", raw(3, 0, 1)),
            ("retire with an arg", raw(4, 1, 9)),
        ] {
            assert!(Record::decode(&bytes).is_err(), "{what}");
        }
    }

    #[test]
    fn every_field_value_a_kind_allows_is_accepted() {
        for (bytes, record) in [
            (
                raw(1, 0, u64::MAX),
                Record::PipeEnd {
                    role: 0,
                    id: u64::MAX,
                },
            ),
            (raw(2, 255, 0), Record::Block { class: 255, id: 0 }),
            (raw(4, 0, u64::MAX), Record::Retire { id: u64::MAX }),
        ] {
            assert_eq!(Record::decode(&bytes), Ok(record));
            assert_eq!(record.encode(), bytes);
        }
    }
}
