//! A ring's bytes: the frame header every frame starts with, and the layout
//! of the control block each ring's two sides share.
//!
//! # Frames
//!
//! A frame is an 8-byte header, then `len` body bytes, padded to 8 bytes:
//!
//! | bytes | field | meaning |
//! |---|---|---|
//! | 0..4 | `len: u32` | body bytes (little-endian) |
//! | 4..8 | `tag: u32` | opaque to the ring: a [`super::frame::Tag`] |
//!
//! The header is written and read as one little-endian `u64`, `len` in its
//! low half, at an 8-aligned position, so it never wraps around the end
//! of the data area; a body may.
//!
//! # The control block
//!
//! [`CONTROL_SIZE`] bytes per ring: the producer's [`SIDE_SIZE`]-byte side,
//! then the consumer's, each 128-aligned. A side's words, each written only
//! by that side (`signal` is slept on by the other):
//!
//! | offset | word | meaning |
//! |---|---|---|
//! | 0 | `pos: u64` | producer: bytes ever written; consumer: bytes ever read |
//! | 64 | `signal: u32` | bumped to wake the other side |
//! | 68 | `waiting: u32` | non-zero while about to sleep or asleep |
//! | 72 | `closed: u32` | non-zero once this side has gone for good |
//! | 76 | `cpu: u32` | 1 + the CPU this side last ran on; 0 unknown |
//! | 80 | `handles: u32` | consumer: pipe ends claimed so far, wrapping |
//! | 84 | `doorbell: u32` | non-zero while this side waits on its doorbell (a datagram socket it sent the other side, which then sends a byte through it after every change) |
//! | 88 | `moved: u32` | bumped, wrapping, each time this side leaves for another process while the other side is held elsewhere: the other side then reads its link for the `Moved` record that says where it went (`wire/route.rs`) |
//! | 92 | `naming: u32` | producer: non-zero while it names a link's handles or blocks in a frame it is about to publish (a receiving side's mover waits for it to clear, so no frame past the tail it then reads names the old link) |
//! | 96 | `moving: u32` | non-zero while this side's holder moves it on to another process, from before it reads where the other side is until its `Moved` record is out and `moved` bumped: the two sides of a ring never move at once (if both would, the producer's goes first and the consumer's waits, then follows it) |
//! | 100 | `followed: u32` | producer: the consumer's `moved` count as of its first naming section on the consumer's newest link |
//! | 104 | `followed_at: u64` | producer: its `pos` as that section began: frames from it on name the consumer's new link, frames before it the old one (a receiving side's mover takes it as the move's boundary once `followed` is its count) |
//! | 112 | `bytes_only: u32` | consumer: non-zero while it takes bytes only: the producer then refuses, before writing anything, a message that attaches handles (any non-zero value counts; a consumer that writes one refuses only what would be sent to itself) |
//!
//! Bytes 116..128 are padding, zero in a fresh ring. `bytes_only` took
//! four bytes of that padding (the side's size is unchanged): a peer built
//! before it leaves the word zero, and so takes handles, as it did.
//!
//! `ring/control.rs` declares the struct and asserts, at compile time, that
//! its fields sit at these offsets.

/// Bytes of a frame header.
pub const FRAME_HEADER: usize = 8;
/// Frames start on this alignment.
pub const FRAME_ALIGN: usize = 8;

/// Bytes a frame with a body of `len` bytes takes in the ring (`len` at
/// most a ring's capacity less [`FRAME_HEADER`]).
pub const fn frame_size(len: usize) -> usize {
    (FRAME_HEADER + len).next_multiple_of(FRAME_ALIGN)
}

/// A frame header as the `u64` the ring stores (little-endian in memory).
pub const fn encode_frame_header(len: u32, tag: u32) -> u64 {
    len as u64 | (tag as u64) << 32
}

/// A frame header's `(len, tag)`. Any value decodes; the ring checks `len`
/// against what the producer published before using it.
pub const fn decode_frame_header(header: u64) -> (u32, u32) {
    (header as u32, (header >> 32) as u32)
}

/// Bytes of one side of a control block (and its alignment).
pub const SIDE_SIZE: usize = 128;
/// Bytes of a ring's control block: the producer's side, then the consumer's.
pub const CONTROL_SIZE: usize = 2 * SIDE_SIZE;
/// Where the consumer's side starts in a control block.
pub const CONSUMER_SIDE: usize = SIDE_SIZE;
/// Offsets of a side's words (see the table above).
pub const POS: usize = 0;
/// See [`POS`].
pub const SIGNAL: usize = 64;
/// See [`POS`].
pub const WAITING: usize = 68;
/// See [`POS`].
pub const CLOSED: usize = 72;
/// See [`POS`].
pub const CPU: usize = 76;
/// See [`POS`].
pub const HANDLES: usize = 80;
/// See [`POS`].
pub const DOORBELL: usize = 84;
/// See [`POS`].
pub const MOVED: usize = 88;
/// See [`POS`].
pub const NAMING: usize = 92;
/// See [`POS`].
pub const MOVING: usize = 96;
/// See [`POS`].
pub const FOLLOWED: usize = 100;
/// See [`POS`].
pub const FOLLOWED_AT: usize = 104;
/// See [`POS`].
pub const BYTES_ONLY: usize = 112;

const _: () = {
    assert!(SIDE_SIZE.is_power_of_two() && BYTES_ONLY + 4 <= SIDE_SIZE);
    assert!(FOLLOWED_AT.is_multiple_of(8) && FOLLOWED_AT + 8 <= BYTES_ONLY);
    // `pos` alone on its cache line, the rest on the next.
    assert!(POS + 8 <= 64 && SIGNAL >= 64);
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_round_trips_and_keeps_len_in_the_low_bytes() {
        for (len, tag) in [(0, 0), (1, 2), (u32::MAX, 7), (5, u32::MAX)] {
            let header = encode_frame_header(len, tag);
            assert_eq!(decode_frame_header(header), (len, tag));
            assert_eq!(header.to_le_bytes()[..4], len.to_le_bytes());
        }
    }

    #[test]
    fn frames_are_padded_to_their_alignment() {
        assert_eq!(frame_size(0), 8);
        assert_eq!(frame_size(1), 16);
        assert_eq!(frame_size(8), 16);
        assert_eq!(frame_size(9), 24);
    }
}
