//! Message frames inside a ring.
//!
//! A message travels as one `Whole` frame, or, when larger than one frame
//! may be, as `First`, any number of `More`, and `Last`. The ring's frame
//! tag (a `u32`) holds `kind | VERSION << 8 | handles << 16`.
//!
//! | kind    | body                                                   |
//! |---------|--------------------------------------------------------|
//! | `Whole` | `handles × u64` handle ids, then the payload            |
//! | `First` | `total: u64` message length, handle ids, first piece   |
//! | `More`  | the next piece                                          |
//! | `Last`  | the final piece                                         |
//! | `Abort` | empty: drop the message begun by `First`                |
//! | `Block` | `id: u32`, `generation: u32`, `len: u64` of a pool block holding the whole payload, then handle ids |

use super::VERSION;

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
}

/// Bytes of one handle id in a frame body.
pub const HANDLE_ID: usize = 8;
/// Bytes of the `total` field of a `First` frame.
pub const TOTAL: usize = 8;
/// Bytes of a `Block` frame's descriptor: id, generation, length.
pub const BLOCK_REF: usize = 16;

/// A decoded, checked frame tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// The frame's kind.
    pub kind: Kind,
    /// Handles attached to the message (only on `Whole` and `First`).
    pub handles: u16,
}

impl Tag {
    /// Packs the tag for the ring header.
    pub fn encode(self) -> u32 {
        self.kind as u32 | u32::from(VERSION) << 8 | u32::from(self.handles) << 16
    }

    /// Unpacks and checks a tag read from the ring.
    pub fn decode(raw: u32) -> Result<Self, &'static str> {
        let kind = match raw & 0xff {
            1 => Kind::Whole,
            2 => Kind::First,
            3 => Kind::More,
            4 => Kind::Last,
            5 => Kind::Abort,
            6 => Kind::Block,
            _ => return Err("unknown frame kind"),
        };
        if (raw >> 8) & 0xff != u32::from(VERSION) {
            return Err("unsupported frame version");
        }
        let handles = (raw >> 16) as u16;
        if handles != 0 && !matches!(kind, Kind::Whole | Kind::First | Kind::Block) {
            return Err("handles on a continuation frame");
        }
        Ok(Self { kind, handles })
    }

    /// Bytes before the payload in this frame's body.
    pub fn prefix_len(self) -> usize {
        let fixed = match self.kind {
            Kind::First => TOTAL,
            Kind::Block => BLOCK_REF,
            _ => 0,
        };
        fixed + usize::from(self.handles) * HANDLE_ID
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip() {
        for kind in [
            Kind::Whole,
            Kind::First,
            Kind::More,
            Kind::Last,
            Kind::Abort,
            Kind::Block,
        ] {
            let handles = if matches!(kind, Kind::Whole | Kind::First | Kind::Block) {
                7
            } else {
                0
            };
            let tag = Tag { kind, handles };
            assert_eq!(Tag::decode(tag.encode()), Ok(tag));
        }
    }

    #[test]
    fn bad_tags_are_refused() {
        assert!(Tag::decode(0).is_err());
        assert!(Tag::decode(7 | 1 << 8).is_err());
        assert!(Tag::decode(1 | 2 << 8).is_err());
        assert!(Tag::decode(3 | 1 << 8 | 1 << 16).is_err());
    }
}
