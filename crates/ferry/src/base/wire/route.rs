//! Routing records on a link's control socket: what a forwarder and the two
//! holders of a moved end say to each other while the end's route switches
//! to a direct path (see `docs/notes/2026-11-27-routing-design.md`).
//!
//! A routing record is 40 bytes, `magic: u32 = "FRR1"`, `kind: u16`,
//! `arg: u16`, `token: [u8; 16]`, `a: u64`, `b: u64`. The control socket
//! keeps record boundaries, so its length (40, against a plain record's 16)
//! and its magic tell it from a [`super::record::Record`]. The token names
//! one move and is its capability: 16 random bytes, never all zero.
//!
//! | kind | `arg` | `a` | `b` | descriptors |
//! |------|-------|-----|-----|-------------|
//! | 1 [`RouteRecord::Introduce`] | 0 | the introduced process's pid | its uid | a socket to it, and its pidfd where there is one |
//! | 2 [`RouteRecord::Moved`] | `2 * ring + side` (side 0 producer, 1 consumer): the side that moved | the pipe region's inode | the boundary: the ring position (bytes the producer had written) from which frames name handles sent over the new path | a socket to the side's new holder, and that holder's pidfd where there is one; none when the new holder is the receiving process itself |
//! | 3 [`RouteRecord::Attach`] | 0 | 0 | 0 | none |
//! | 4 [`RouteRecord::StopProxying`] | 0 | 0 | the final sequence the old path carries | none |
//! | 5 [`RouteRecord::Done`] | 0 | 0 | 0 | none |
//! | 6 [`RouteRecord::Routed`] | `2 * ring + side`: the side sent, plus 4 when the other side of a whole end follows in a second `Routed` with the same id, or plus 8 when a receiving side's prefix follows (see below) | the id a message frame claims it by | the boundary, as for `Moved` | the pipe region, a socket to the holder of the ring's other side, and that holder's pidfd where there is one; the region alone when that holder is the receiving process (the side comes home) |
//!
//! A whole pipe end whose twin is in another process travels as its two
//! sides: first its receiving side's `Routed` with 4 added to `arg` (the
//! end is not complete yet: no message may claim the id), then its sending
//! side's, with the same id, the same region, the other ring, and a socket
//! of its own; the second completes the end.
//!
//! A receiving side whose unread messages its forwarder took out of the
//! ring (they named handles or blocks on the forwarder's link, which the
//! new holder does not read) travels with them in a pipe of their own, its
//! **prefix**: its `Routed` has 8 added to `arg` (no message may claim the
//! id yet), and a plain `PipeEnd` record with the same id, the receiving
//! half of the prefix, completes it (for a whole end, 4 and 8 are both
//! added, and the prefix comes before the sending side's `Routed`). The
//! new holder reads the prefix to its end before the ring.
//!
//! A receiving side's `Moved` carries boundary 0: its mover fixes the
//! boundary afterwards (the sender's tail once it names no link) and sends
//! it in `Routed`. Kinds 1 and 3–5 are decoded but not yet sent: they are
//! for reusing one link per process pair (see the design note).
//!
//! A field a kind does not use must be zero, so every record that decodes
//! encodes back to the same bytes.

use super::{VERSION, Violation};

/// Bytes in one routing record.
pub const ROUTE_RECORD_LEN: usize = 40;
/// Magic number opening every routing record: "FRR" and the version.
pub const ROUTE_MAGIC: u32 = u32::from_le_bytes([b'F', b'R', b'R', VERSION]);

/// Names one move of a pipe end; whoever holds it may take part in that
/// move, and only in that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(pub [u8; 16]);

/// One routing record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRecord {
    /// The sender vouches for another process it has a link to, and hands
    /// this process a socket to it (the new link, unless one to the same
    /// process exists).
    Introduce {
        /// The introduction.
        token: Token,
        /// The introduced process, as the sender's link to it saw it.
        pid: u32,
        /// Its user.
        uid: u32,
    },
    /// The other side of one of this process's rings has moved to another
    /// holder: handles at or past `boundary` come over the new path.
    Moved {
        /// The move.
        token: Token,
        /// The ring (0 or 1).
        ring: u8,
        /// Whether the side that moved is the ring's consumer (else its
        /// producer).
        consumer: bool,
        /// The pipe region's inode, as both sides' `fstat` sees it.
        region: u64,
        /// The ring's first handle sequence on the new path.
        boundary: u64,
    },
    /// The sender's path for the move `token` is the link this record came
    /// on.
    Attach {
        /// The move.
        token: Token,
    },
    /// The old path carries the move's handles below `last` and no more.
    StopProxying {
        /// The move.
        token: Token,
        /// One past the last handle sequence on the old path.
        last: u64,
    },
    /// The forwarder has relayed everything of the move and forgets it.
    Done {
        /// The move.
        token: Token,
    },
    /// A side of a pipe whose other side is held by a third process: it
    /// travels with a socket to that process, which its handles use from
    /// `boundary` on.
    Routed {
        /// The move.
        token: Token,
        /// The ring (0 or 1).
        ring: u8,
        /// Whether the side sent is the ring's consumer (else its producer).
        consumer: bool,
        /// The id a message frame names it by.
        id: u64,
        /// The ring position from which frames name handles sent over the
        /// new path.
        boundary: u64,
        /// The other side of a whole end follows, in a `Routed` record
        /// with the same id, which completes the end.
        joins: bool,
        /// A receiving side whose prefix follows, as a `PipeEnd` record
        /// with the same id, which completes it.
        prefixed: bool,
    },
}

impl RouteRecord {
    /// The move or introduction it belongs to.
    pub const fn token(&self) -> Token {
        match *self {
            Self::Introduce { token, .. }
            | Self::Moved { token, .. }
            | Self::Attach { token }
            | Self::StopProxying { token, .. }
            | Self::Done { token }
            | Self::Routed { token, .. } => token,
        }
    }

    /// Encodes the record.
    pub fn encode(self) -> [u8; ROUTE_RECORD_LEN] {
        let (kind, arg, a, b) = match self {
            Self::Introduce { pid, uid, .. } => (1u16, 0u16, u64::from(pid), u64::from(uid)),
            Self::Moved {
                ring,
                consumer,
                region,
                boundary,
                ..
            } => (
                2,
                2 * u16::from(ring) + u16::from(consumer),
                region,
                boundary,
            ),
            Self::Attach { .. } => (3, 0, 0, 0),
            Self::StopProxying { last, .. } => (4, 0, 0, last),
            Self::Done { .. } => (5, 0, 0, 0),
            Self::Routed {
                ring,
                consumer,
                id,
                boundary,
                joins,
                prefixed,
                ..
            } => (
                6,
                2 * u16::from(ring)
                    + u16::from(consumer)
                    + 4 * u16::from(joins)
                    + 8 * u16::from(prefixed),
                id,
                boundary,
            ),
        };
        let mut out = [0u8; ROUTE_RECORD_LEN];
        out[..4].copy_from_slice(&ROUTE_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&kind.to_le_bytes());
        out[6..8].copy_from_slice(&arg.to_le_bytes());
        out[8..24].copy_from_slice(&self.token().0);
        out[24..32].copy_from_slice(&a.to_le_bytes());
        out[32..].copy_from_slice(&b.to_le_bytes());
        out
    }

    /// Decodes and checks a routing record: exactly [`ROUTE_RECORD_LEN`]
    /// bytes, this magic and version, a known kind, a token that is not
    /// all zero, a pid and uid that fit in 32 bits (and a pid that is not
    /// 0), a side that names one of a ring's two sides, and zero in every
    /// field the kind does not use.
    pub fn decode(bytes: &[u8]) -> Result<Self, Violation> {
        let bytes: &[u8; ROUTE_RECORD_LEN] =
            bytes.try_into().map_err(|_| Violation::RecordLength)?;
        let [m0, m1, m2, m3, k0, k1, g0, g1, rest @ ..] = *bytes;
        // `rest` is 32 bytes: the token, then `a` and `b`.
        let token: [u8; 16] = std::array::from_fn(|i| rest[i]);
        let a = u64::from_le_bytes(std::array::from_fn(|i| rest[16 + i]));
        let b = u64::from_le_bytes(std::array::from_fn(|i| rest[24 + i]));
        if u32::from_le_bytes([m0, m1, m2, m3]) != ROUTE_MAGIC {
            return Err(Violation::RecordMagic);
        }
        if token == [0; 16] {
            return Err(Violation::RouteTokenZero);
        }
        let (arg, token) = (u16::from_le_bytes([g0, g1]), Token(token));
        let unused = |zero: &[u64]| match arg == 0 && zero.iter().all(|&v| v == 0) {
            true => Ok(()),
            false => Err(Violation::RouteRecordFields),
        };
        match u16::from_le_bytes([k0, k1]) {
            1 => {
                unused(&[])?;
                let pid = u32::try_from(a).map_err(|_| Violation::RouteRecordFields)?;
                let uid = u32::try_from(b).map_err(|_| Violation::RouteRecordFields)?;
                match pid {
                    0 => Err(Violation::RouteRecordFields),
                    _ => Ok(Self::Introduce { token, pid, uid }),
                }
            }
            2 if arg < 4 => Ok(Self::Moved {
                token,
                ring: (arg / 2) as u8,
                consumer: arg % 2 == 1,
                region: a,
                boundary: b,
            }),
            2 => Err(Violation::RouteSide),
            3 => unused(&[a, b]).map(|()| Self::Attach { token }),
            4 => unused(&[a]).map(|()| Self::StopProxying { token, last: b }),
            5 => unused(&[a, b]).map(|()| Self::Done { token }),
            6 if arg >= 16 => Err(Violation::RouteSide),
            // A prefix only for a receiving side.
            6 if arg >= 8 && arg % 2 == 0 => Err(Violation::RouteRecordFields),
            6 => Ok(Self::Routed {
                token,
                ring: (arg / 2 % 2) as u8,
                consumer: arg % 2 == 1,
                id: a,
                boundary: b,
                joins: arg & 4 != 0,
                prefixed: arg & 8 != 0,
            }),
            _ => Err(Violation::UnknownRecordKind),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Token = Token([7; 16]);

    fn every_kind() -> [RouteRecord; 10] {
        [
            RouteRecord::Introduce {
                token: T,
                pid: 4242,
                uid: 1000,
            },
            RouteRecord::Moved {
                token: T,
                ring: 1,
                consumer: true,
                region: 0x1234_5678_9abc,
                boundary: 17,
            },
            RouteRecord::Moved {
                token: Token([0xff; 16]),
                ring: 0,
                consumer: false,
                region: 0,
                boundary: u64::MAX,
            },
            RouteRecord::Attach { token: T },
            RouteRecord::StopProxying { token: T, last: 99 },
            RouteRecord::Done { token: T },
            RouteRecord::Routed {
                token: T,
                ring: 1,
                consumer: false,
                id: 3,
                boundary: 4096,
                joins: false,
                prefixed: false,
            },
            RouteRecord::Routed {
                token: T,
                ring: 0,
                consumer: true,
                id: 9,
                boundary: 0,
                joins: true,
                prefixed: false,
            },
            RouteRecord::Routed {
                token: T,
                ring: 1,
                consumer: true,
                id: 11,
                boundary: 80,
                joins: false,
                prefixed: true,
            },
            RouteRecord::Routed {
                token: T,
                ring: 0,
                consumer: true,
                id: 12,
                boundary: 96,
                joins: true,
                prefixed: true,
            },
        ]
    }

    #[test]
    fn routing_records_round_trip() {
        for record in every_kind() {
            assert_eq!(RouteRecord::decode(&record.encode()), Ok(record));
        }
    }

    #[test]
    fn routing_records_are_laid_out_as_documented() {
        let bytes = RouteRecord::StopProxying {
            token: Token([0xab; 16]),
            last: 0x0102,
        }
        .encode();
        let mut want = *b"FRR\x01\x04\x00\x00\x00";
        want[3] = VERSION;
        assert_eq!(bytes[..8], want);
        assert_eq!(bytes[8..24], [0xab; 16]);
        assert_eq!(bytes[24..32], [0; 8]);
        assert_eq!(bytes[32..], [2, 1, 0, 0, 0, 0, 0, 0]);
        // A plain record is never mistaken for one, nor one for it.
        let plain = super::super::record::Record::ReleaseTable.encode();
        assert_eq!(RouteRecord::decode(&plain), Err(Violation::RecordLength));
        assert!(super::super::record::Record::decode(&bytes).is_err());
    }

    /// A routing record with the given raw fields, the right magic and a
    /// non-zero token.
    fn raw(kind: u16, arg: u16, a: u64, b: u64) -> [u8; ROUTE_RECORD_LEN] {
        let mut out = RouteRecord::Done { token: T }.encode();
        out[4..6].copy_from_slice(&kind.to_le_bytes());
        out[6..8].copy_from_slice(&arg.to_le_bytes());
        out[24..32].copy_from_slice(&a.to_le_bytes());
        out[32..].copy_from_slice(&b.to_le_bytes());
        out
    }

    #[test]
    fn bad_routing_records_are_refused_naming_the_rule() {
        let mut zero_token = RouteRecord::Attach { token: T }.encode();
        zero_token[8..24].fill(0);
        let mut bad_magic = RouteRecord::Attach { token: T }.encode();
        bad_magic[2] ^= 0x20;
        for (what, bytes, why) in [
            ("a zero token", zero_token, Violation::RouteTokenZero),
            ("a bad magic", bad_magic, Violation::RecordMagic),
            ("kind 0", raw(0, 0, 0, 0), Violation::UnknownRecordKind),
            ("kind 7", raw(7, 0, 0, 0), Violation::UnknownRecordKind),
            ("routed side 16", raw(6, 16, 1, 1), Violation::RouteSide),
            (
                "a prefix for a sending side",
                raw(6, 8, 1, 1),
                Violation::RouteRecordFields,
            ),
            ("pid 0", raw(1, 0, 0, 5), Violation::RouteRecordFields),
            (
                "pid past u32",
                raw(1, 0, 1 << 32, 5),
                Violation::RouteRecordFields,
            ),
            (
                "uid past u32",
                raw(1, 0, 5, 1 << 32),
                Violation::RouteRecordFields,
            ),
            (
                "introduce with an arg",
                raw(1, 1, 5, 5),
                Violation::RouteRecordFields,
            ),
            ("moved side 4", raw(2, 4, 1, 1), Violation::RouteSide),
            (
                "attach with a",
                raw(3, 0, 1, 0),
                Violation::RouteRecordFields,
            ),
            (
                "attach with b",
                raw(3, 0, 0, 1),
                Violation::RouteRecordFields,
            ),
            (
                "attach with an arg",
                raw(3, 1, 0, 0),
                Violation::RouteRecordFields,
            ),
            ("stop with a", raw(4, 0, 1, 9), Violation::RouteRecordFields),
            ("done with b", raw(5, 0, 0, 1), Violation::RouteRecordFields),
        ] {
            assert_eq!(RouteRecord::decode(&bytes), Err(why), "{what}");
        }
        let good = RouteRecord::Attach { token: T }.encode();
        for len in [0, 16, 39, 41] {
            let mut bytes = good.to_vec();
            bytes.resize(len, 0);
            assert_eq!(
                RouteRecord::decode(&bytes),
                Err(Violation::RecordLength),
                "{len} bytes"
            );
        }
    }

    #[test]
    fn every_field_value_a_kind_allows_is_accepted() {
        for (bytes, record) in [
            (
                raw(1, 0, u64::from(u32::MAX), 0),
                RouteRecord::Introduce {
                    token: T,
                    pid: u32::MAX,
                    uid: 0,
                },
            ),
            (
                raw(2, 3, u64::MAX, 0),
                RouteRecord::Moved {
                    token: T,
                    ring: 1,
                    consumer: true,
                    region: u64::MAX,
                    boundary: 0,
                },
            ),
            (
                raw(4, 0, 0, u64::MAX),
                RouteRecord::StopProxying {
                    token: T,
                    last: u64::MAX,
                },
            ),
        ] {
            assert_eq!(RouteRecord::decode(&bytes), Ok(record));
            assert_eq!(record.encode(), bytes);
        }
    }
}
