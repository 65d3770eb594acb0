//! Message frames inside a ring.
//!
//! A message travels as one `Whole` frame, or, when larger than one frame
//! may be, as `First`, any number of `More`, and `Last`. The ring's frame
//! tag (a `u32`) holds `kind | VERSION << 8 | handles << 16`, with at most
//! [`MAX_HANDLES`] handles.
//!
//! | kind    | body                                                   |
//! |---------|--------------------------------------------------------|
//! | `Whole` | `handles × u64` handle ids, then the payload            |
//! | `First` | `total: u64` message length, handle ids, first piece   |
//! | `More`  | the next piece                                          |
//! | `Last`  | the final piece                                         |
//! | `Abort` | empty: drop the message begun by `First`                |
//! | `Block` | `id: u32`, `generation: u32`, `len: u64` of a pool block holding the whole payload, then handle ids |
//! | `Attach` | one handle id: a receiving half the receiver reads with this ring from now on (no message) |
//!
//! `Attach` is how a sender with clones travels: its clone goes as the
//! sending half of a new ring, whose receiving half the sender first
//! attaches, through the ring it shares with its clones, to the receiver
//! they all send to (see `Sender::send_with`).

use super::{MAX_HANDLES, VERSION, Violation};

/// What a frame is, within its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole message in one frame.
    Whole = 1,
    /// The first piece of a larger message.
    First = 2,
    /// A middle piece.
    More = 3,
    /// The final piece.
    Last = 4,
    /// The sender gave up on the message it began; discard it.
    Abort = 5,
    /// A whole message whose payload sits in a pool block (out of line).
    Block = 6,
    /// Not a message: a receiving half for the receiver to read along
    /// with this ring (a clone of its sender's ring).
    Attach = 7,
}

/// Bytes of one handle id in a frame body.
pub const HANDLE_ID: usize = 8;
/// Bytes of the `total` field of a `First` frame.
pub const TOTAL: usize = 8;
/// Bytes of a `Block` frame's descriptor: id, generation, length.
pub const BLOCK_REF: usize = 16;

/// The raw tag of the commonest frame: a `Whole` message without handles
/// (its body is all payload). A receiver compares a frame's raw tag with it
/// before decoding anything.
pub const PLAIN_WHOLE: u32 = Tag {
    kind: Kind::Whole,
    handles: 0,
}
.encode();

/// A decoded, checked frame tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// The frame's kind.
    pub kind: Kind,
    /// Handles attached to the message (only on `Whole`, `First`,
    /// `Block` and `Attach`), at most [`MAX_HANDLES`].
    pub handles: u16,
}

impl Tag {
    /// Packs the tag for the ring header.
    pub const fn encode(self) -> u32 {
        self.kind as u32 | (VERSION as u32) << 8 | (self.handles as u32) << 16
    }

    /// Unpacks and checks a tag read from the ring: a known kind, this
    /// version, and at most [`MAX_HANDLES`] handles, only on the kinds that
    /// carry them.
    pub fn decode(raw: u32) -> Result<Self, Violation> {
        let kind = match raw & 0xff {
            1 => Kind::Whole,
            2 => Kind::First,
            3 => Kind::More,
            4 => Kind::Last,
            5 => Kind::Abort,
            6 => Kind::Block,
            7 => Kind::Attach,
            _ => return Err(Violation::UnknownFrameKind),
        };
        if (raw >> 8) & 0xff != u32::from(VERSION) {
            return Err(Violation::UnsupportedFrameVersion);
        }
        let handles = (raw >> 16) as u16;
        if usize::from(handles) > MAX_HANDLES {
            return Err(Violation::TooManyHandles);
        }
        if handles != 0 && !matches!(kind, Kind::Whole | Kind::First | Kind::Block | Kind::Attach) {
            return Err(Violation::HandlesOnContinuation);
        }
        Ok(Self { kind, handles })
    }

    /// Bytes before the payload in this frame's body (at most
    /// `BLOCK_REF + MAX_HANDLES * HANDLE_ID` for a decoded tag).
    pub fn prefix_len(self) -> usize {
        let fixed = match self.kind {
            Kind::First => TOTAL,
            Kind::Block => BLOCK_REF,
            _ => 0,
        };
        fixed + usize::from(self.handles) * HANDLE_ID
    }
}

/// A `Block` frame's descriptor of the pool block holding the payload.
///
/// Decoding cannot fail: every bit pattern is some id, generation and
/// length. Whether the block was announced, the generation is current and
/// the length fits the block and the receiver's limit is for the receiver
/// to check against its own state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    /// The block's number on the link.
    pub id: u32,
    /// Bumped each time the sender lends the block again.
    pub generation: u32,
    /// Payload bytes in the block.
    pub len: u64,
}

impl BlockRef {
    /// Packs the descriptor: `id`, `generation`, `len`, little-endian.
    pub fn encode(self) -> [u8; BLOCK_REF] {
        let mut out = [0u8; BLOCK_REF];
        out[..4].copy_from_slice(&self.id.to_le_bytes());
        out[4..8].copy_from_slice(&self.generation.to_le_bytes());
        out[8..].copy_from_slice(&self.len.to_le_bytes());
        out
    }

    /// Unpacks a descriptor copied out of the ring.
    pub fn decode(bytes: &[u8; BLOCK_REF]) -> Self {
        let [i0, i1, i2, i3, g0, g1, g2, g3, len @ ..] = *bytes;
        Self {
            id: u32::from_le_bytes([i0, i1, i2, i3]),
            generation: u32::from_le_bytes([g0, g1, g2, g3]),
            len: u64::from_le_bytes(len),
        }
    }
}

/// Packs a `First` frame's `total` field: the whole message's length.
pub fn encode_total(total: u64) -> [u8; TOTAL] {
    total.to_le_bytes()
}

/// Unpacks a `First` frame's `total` field. Any value decodes; the receiver
/// checks it against its limit and the first piece's length.
pub fn decode_total(bytes: &[u8; TOTAL]) -> u64 {
    u64::from_le_bytes(*bytes)
}

/// Packs one handle id of a frame body.
pub fn encode_handle_id(id: u64) -> [u8; HANDLE_ID] {
    id.to_le_bytes()
}

/// Unpacks one handle id of a frame body. Any value decodes; the receiver
/// checks that the peer sent a handle by that id.
pub fn decode_handle_id(bytes: &[u8; HANDLE_ID]) -> u64 {
    u64::from_le_bytes(*bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KINDS: [Kind; 7] = [
        Kind::Whole,
        Kind::First,
        Kind::More,
        Kind::Last,
        Kind::Abort,
        Kind::Block,
        Kind::Attach,
    ];

    fn carries_handles(kind: Kind) -> bool {
        matches!(kind, Kind::Whole | Kind::First | Kind::Block | Kind::Attach)
    }

    #[test]
    fn tags_round_trip() {
        for kind in KINDS {
            let counts: &[u16] = if carries_handles(kind) {
                &[0, 1, 7, MAX_HANDLES as u16]
            } else {
                &[0]
            };
            for &handles in counts {
                let tag = Tag { kind, handles };
                assert_eq!(Tag::decode(tag.encode()), Ok(tag));
            }
        }
    }

    #[test]
    fn tags_are_packed_as_documented() {
        let tag = Tag {
            kind: Kind::First,
            handles: 0x00fd,
        };
        assert_eq!(tag.encode(), 0x00fd_0102);
    }

    #[test]
    fn unknown_kinds_are_refused() {
        for kind in (0..=255u32).filter(|k| !(1..=7).contains(k)) {
            let raw = kind | u32::from(VERSION) << 8;
            assert_eq!(
                Tag::decode(raw),
                Err(Violation::UnknownFrameKind),
                "kind {kind}"
            );
        }
    }

    #[test]
    fn other_versions_are_refused() {
        for version in (0..=255u32).filter(|&v| v != u32::from(VERSION)) {
            let raw = Kind::Whole as u32 | version << 8;
            assert_eq!(
                Tag::decode(raw),
                Err(Violation::UnsupportedFrameVersion),
                "version {version}"
            );
        }
    }

    #[test]
    fn more_handles_than_one_socket_message_passes_are_refused() {
        for kind in KINDS.into_iter().filter(|&k| carries_handles(k)) {
            for handles in [MAX_HANDLES as u16 + 1, 4096, u16::MAX] {
                let raw = Tag { kind, handles }.encode();
                assert_eq!(
                    Tag::decode(raw),
                    Err(Violation::TooManyHandles),
                    "{kind:?} with {handles}"
                );
            }
        }
    }

    #[test]
    fn handles_on_continuation_frames_are_refused() {
        for kind in KINDS.into_iter().filter(|&k| !carries_handles(k)) {
            let raw = Tag { kind, handles: 1 }.encode();
            assert_eq!(
                Tag::decode(raw),
                Err(Violation::HandlesOnContinuation),
                "{kind:?}"
            );
        }
    }

    #[test]
    fn prefixes_count_fixed_fields_and_handle_ids() {
        let prefix = |kind, handles| Tag { kind, handles }.prefix_len();
        assert_eq!(prefix(Kind::Whole, 0), 0);
        assert_eq!(prefix(Kind::Whole, 2), 2 * HANDLE_ID);
        assert_eq!(prefix(Kind::First, 1), TOTAL + HANDLE_ID);
        assert_eq!(
            prefix(Kind::Block, MAX_HANDLES as u16),
            BLOCK_REF + MAX_HANDLES * HANDLE_ID
        );
        assert_eq!(prefix(Kind::Last, 0), 0);
    }

    #[test]
    fn block_refs_round_trip() {
        for block in [
            BlockRef {
                id: 0,
                generation: 0,
                len: 0,
            },
            BlockRef {
                id: 7,
                generation: 2,
                len: 65_536,
            },
            BlockRef {
                id: u32::MAX,
                generation: u32::MAX,
                len: u64::MAX,
            },
        ] {
            assert_eq!(BlockRef::decode(&block.encode()), block);
        }
    }

    #[test]
    fn block_refs_are_little_endian_id_generation_len() {
        let bytes = [1, 0, 0, 0, 2, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0x80];
        let block = BlockRef::decode(&bytes);
        assert_eq!(
            block,
            BlockRef {
                id: 1,
                generation: 0x0102,
                len: 0x8000_0000_0001_0000,
            }
        );
        assert_eq!(block.encode(), bytes);
    }

    #[test]
    fn totals_and_handle_ids_round_trip_little_endian() {
        for value in [0, 1, 0x0102_0304_0506_0708, u64::MAX] {
            assert_eq!(decode_total(&encode_total(value)), value);
            assert_eq!(decode_handle_id(&encode_handle_id(value)), value);
        }
        assert_eq!(encode_total(0x0102), [2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(decode_handle_id(&[0, 0, 0, 0, 0, 0, 0, 1]), 1 << 56);
    }
}
