//! Records on a link's control socket.
//!
//! One record is 16 bytes, `magic: u32 = "FRY1"`, `kind: u16`, `arg: u16`,
//! `id: u64`, with one descriptor attached (none for `Retire`):
//!
//! | kind | `arg` | `id` | descriptor |
//! |------|-------|------|------------|
//! | 1 [`Record::PipeEnd`] | what of the pipe is now the receiver's ([`Carried`]) | claimed by the message frame naming `id` | the pipe's region |
//! | 2 [`Record::Block`] | size class | the block's number on this link | the block |
//! | 3 [`Record::ReleaseTable`] | 0 | 0 | the table where the receiver hands blocks back |
//! | 4 [`Record::Retire`] | 0 | the block's number | none: the sender unmapped the (free) block; unmap it too |
//! | 5 [`Record::Doorbell`] | `2 * ring + side` (side 0 producer, 1 consumer): the sender's side, which will wait on it | the pipe region's inode | a Unix datagram socket: send a byte through it after changing that ring while the side's `doorbell` word is set |
//! | 6 [`Record::Fd`] | 0 | claimed by the message frame naming `id` (ids shared with pipe ends) | any descriptor the application sent with a message |

use super::Violation;

use super::VERSION;

/// Bytes in one record.
pub const RECORD_LEN: usize = 16;
/// Magic number opening every record: "FRY" and the version.
pub const MAGIC: u32 = u32::from_le_bytes([b'F', b'R', b'Y', VERSION]);

/// What of a pipe a [`Record::PipeEnd`] hands over, as its `arg`: 0 or 1
/// a whole end (it writes ring `role` and reads the other), 2 or 3 the
/// sending half of ring `arg - 2`, 4 or 5 the receiving half of ring
/// `arg - 4`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Carried {
    /// A whole pipe end: writes ring `role`, reads ring `1 - role`.
    Pipe {
        /// 0 or 1.
        role: u8,
    },
    /// The sending half of ring `ring` alone.
    Sender {
        /// 0 or 1.
        ring: u8,
    },
    /// The receiving half of ring `ring` alone.
    Receiver {
        /// 0 or 1.
        ring: u8,
    },
}

impl Carried {
    /// The record's `arg` for it.
    pub const fn encode(self) -> u16 {
        match self {
            Self::Pipe { role } => role as u16,
            Self::Sender { ring } => 2 + ring as u16,
            Self::Receiver { ring } => 4 + ring as u16,
        }
    }

    /// Decodes a record's `arg`.
    pub const fn decode(arg: u16) -> Result<Self, Violation> {
        match arg {
            0 | 1 => Ok(Self::Pipe { role: arg as u8 }),
            2 | 3 => Ok(Self::Sender {
                ring: (arg - 2) as u8,
            }),
            4 | 5 => Ok(Self::Receiver {
                ring: (arg - 4) as u8,
            }),
            _ => Err(Violation::BadPipeEndRole),
        }
    }
}

/// One control record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// The shared memory of a pipe, part of which now belongs to the
    /// receiver.
    PipeEnd {
        /// What of the pipe the receiver now holds.
        end: Carried,
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
    /// The doorbell of one side of a ring the sender holds: the receiver,
    /// holding the other side, rings it while that side says it waits on it.
    Doorbell {
        /// The ring (0 or 1).
        ring: u8,
        /// Whether the sender's side is the ring's consumer (else its producer).
        consumer: bool,
        /// The pipe region's inode, as both sides' `fstat` sees it.
        region: u64,
    },
    /// A descriptor the application attached to a message, whatever it is
    /// (a file, a socket, a memfd): the receiver holds it, unused, until
    /// the message naming `id` claims it.
    Fd {
        /// The id by which a message frame claims it.
        id: u64,
    },
}

impl Record {
    /// Encodes the record.
    pub fn encode(self) -> [u8; RECORD_LEN] {
        let (kind, arg, id) = match self {
            Self::PipeEnd { end, id } => (1u16, end.encode(), id),
            Self::Block { class, id } => (2, u16::from(class), id),
            Self::ReleaseTable => (3, 0, 0),
            Self::Retire { id } => (4, 0, id),
            Self::Doorbell {
                ring,
                consumer,
                region,
            } => (5, 2 * u16::from(ring) + u16::from(consumer), region),
            Self::Fd { id } => (6, 0, id),
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
                end: Carried::decode(arg)?,
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
            5 if arg < 4 => Ok(Self::Doorbell {
                ring: (arg / 2) as u8,
                consumer: arg % 2 == 1,
                region: id,
            }),
            5 => Err(Violation::BadDoorbellSide),
            6 if arg == 0 => Ok(Self::Fd { id }),
            6 => Err(Violation::FdRecordArg),
            _ => Err(Violation::UnknownRecordKind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_carried_part_round_trips_and_others_are_refused() {
        for arg in 0..6 {
            assert_eq!(Carried::decode(arg).map(Carried::encode), Ok(arg));
        }
        assert_eq!(Carried::decode(2), Ok(Carried::Sender { ring: 0 }));
        assert_eq!(Carried::decode(5), Ok(Carried::Receiver { ring: 1 }));
        for arg in [6, 7, 0x100, u16::MAX] {
            assert_eq!(Carried::decode(arg), Err(Violation::BadPipeEndRole));
        }
    }

    #[test]
    fn records_round_trip() {
        for rec in [
            Record::PipeEnd {
                end: Carried::Pipe { role: 1 },
                id: 0xdead_beef_1234,
            },
            Record::Block { class: 8, id: 77 },
            Record::ReleaseTable,
            Record::Retire { id: 5 },
            Record::Fd { id: 3 },
            Record::Doorbell {
                ring: 1,
                consumer: true,
                region: 0x1234_5678_9abc,
            },
            Record::Doorbell {
                ring: 0,
                consumer: false,
                region: 0,
            },
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
            ("kind 7", raw(7, 0, 0)),
            ("fd with an arg", raw(6, 1, 9)),
            ("doorbell arg 4", raw(5, 4, 0)),
            ("doorbell arg 0xffff", raw(5, 0xffff, 0)),
            ("kind 0xffff", raw(0xffff, 0, 0)),
            ("pipe end arg 6", raw(1, 6, 9)),
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
                    end: Carried::Pipe { role: 0 },
                    id: u64::MAX,
                },
            ),
            (raw(2, 255, 0), Record::Block { class: 255, id: 0 }),
            (raw(4, 0, u64::MAX), Record::Retire { id: u64::MAX }),
            (raw(6, 0, u64::MAX), Record::Fd { id: u64::MAX }),
        ] {
            assert_eq!(Record::decode(&bytes), Ok(record));
            assert_eq!(record.encode(), bytes);
        }
    }
}
