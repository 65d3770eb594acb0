//! A pipe's shared region: its layout, and the header that opens it.
//!
//! ```text
//! 0              header: magic "FERRYPIP", version: u32, capacity: u32   16 bytes
//! CONTROL_AT     Control of ring 0 (end 0 writes, end 1 reads)           256 bytes
//! +256           Control of ring 1 (end 1 writes, end 0 reads)           256 bytes
//! DATA_AT        data of ring 0                                          capacity
//! DATA_AT + c    data of ring 1                                          capacity
//! ```
//!
//! The region arrives from a peer as a sealed memory object; the header is
//! copied out of it once and checked here against the object's length, so
//! everything the rest of the crate derives from the capacity lies inside
//! the mapping.

use super::Violation;

use super::ring::{CONTROL_SIZE, FRAME_ALIGN, SIDE_SIZE};

/// Opens every pipe region.
pub const MAGIC: [u8; 8] = *b"FERRYPIP";
/// The region layout's version, after the magic.
pub const VERSION: u32 = 1;
/// Bytes of the encoded header.
pub const HEADER_LEN: usize = 16;
/// Offset of ring 0's control block; ring 1's follows it.
pub const CONTROL_AT: usize = 256;
/// Offset of ring 0's data area; ring 1's follows it.
pub const DATA_AT: usize = 4096;
/// Smallest ring capacity a region may have.
pub const MIN_CAPACITY: usize = 4096;
/// Largest ring capacity a region may have.
pub const MAX_CAPACITY: usize = 1 << 30;
/// Bytes of the smallest region.
pub const MIN_REGION_LEN: usize = DATA_AT + 2 * MIN_CAPACITY;
/// Bytes of the largest region.
pub const MAX_REGION_LEN: usize = DATA_AT + 2 * MAX_CAPACITY;

const _: () = {
    // The capacity travels as a u32 and is widened to usize losslessly.
    assert!(usize::BITS >= 32);
    assert!(MAX_CAPACITY <= u32::MAX as usize);
    assert!(MIN_CAPACITY.is_power_of_two() && MAX_CAPACITY.is_power_of_two());
    assert!(MIN_CAPACITY <= MAX_CAPACITY);
    // The ring's storage contract: a power of two of at least 64 bytes.
    assert!(MIN_CAPACITY >= 64);
    // Header, then both control blocks at their alignment, then the data.
    assert!(HEADER_LEN <= CONTROL_AT);
    assert!(CONTROL_AT.is_multiple_of(SIDE_SIZE));
    assert!(CONTROL_AT + 2 * CONTROL_SIZE <= DATA_AT);
    // Data areas start page-aligned, so frame headers (8-aligned) are too.
    assert!(DATA_AT.is_multiple_of(4096) && DATA_AT.is_multiple_of(FRAME_ALIGN));
    // The largest region's length is representable.
    assert!(DATA_AT.checked_add(2 * MAX_CAPACITY).is_some());
};

/// Whether `capacity` is a ring capacity a region may have: a power of two
/// in `MIN_CAPACITY..=MAX_CAPACITY`.
pub fn valid_capacity(capacity: usize) -> bool {
    capacity.is_power_of_two() && (MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity)
}

/// Bytes of a region whose rings hold `capacity` bytes each
/// (`DATA_AT + 2 * capacity`), or `None` if that overflows.
pub fn region_len(capacity: usize) -> Option<usize> {
    capacity.checked_mul(2)?.checked_add(DATA_AT)
}

/// The checked contents of a region's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionHeader {
    /// Each ring's data capacity in bytes.
    pub capacity: u32,
}

impl RegionHeader {
    /// The header of a region with rings of `capacity` bytes, if that is a
    /// [valid capacity](valid_capacity).
    pub fn new(capacity: usize) -> Option<Self> {
        let capacity = u32::try_from(capacity).ok()?;
        let header = Self { capacity };
        valid_capacity(header.ring_capacity()).then_some(header)
    }

    /// Each ring's data capacity, as a size.
    pub fn ring_capacity(self) -> usize {
        // Lossless: usize has at least 32 bits (asserted above).
        self.capacity as usize
    }

    /// Packs the header: magic, version, capacity, little-endian.
    pub fn encode(self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12..].copy_from_slice(&self.capacity.to_le_bytes());
        out
    }

    /// Unpacks a header copied out of a peer's region, whose memory object
    /// is `object_len` bytes: the magic and version must match, the
    /// capacity must be [valid](valid_capacity), and the object exactly as
    /// long as the layout with that capacity.
    pub fn decode(bytes: &[u8; HEADER_LEN], object_len: usize) -> Result<Self, Violation> {
        let [m @ .., v0, v1, v2, v3, c0, c1, c2, c3] = *bytes;
        if m != MAGIC || u32::from_le_bytes([v0, v1, v2, v3]) != VERSION {
            return Err(Violation::RegionMagic);
        }
        let header = Self {
            capacity: u32::from_le_bytes([c0, c1, c2, c3]),
        };
        if !valid_capacity(header.ring_capacity()) {
            return Err(Violation::RegionCapacityRange);
        }
        if region_len(header.ring_capacity()) != Some(object_len) {
            return Err(Violation::RegionCapacityMismatch);
        }
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(capacity: usize) -> [u8; HEADER_LEN] {
        RegionHeader::new(capacity).unwrap().encode()
    }

    #[test]
    fn headers_round_trip_at_every_size_class_edge() {
        for capacity in [MIN_CAPACITY, 65_536, MAX_CAPACITY] {
            let len = DATA_AT + 2 * capacity;
            let decoded = RegionHeader::decode(&header(capacity), len).unwrap();
            assert_eq!(decoded.ring_capacity(), capacity);
            assert_eq!(decoded.encode(), header(capacity));
        }
    }

    #[test]
    fn headers_are_laid_out_as_documented() {
        assert_eq!(header(4096), *b"FERRYPIP\x01\x00\x00\x00\x00\x10\x00\x00");
        assert_eq!(MIN_REGION_LEN, region_len(MIN_CAPACITY).unwrap());
        assert_eq!(MAX_REGION_LEN, region_len(MAX_CAPACITY).unwrap());
    }

    #[test]
    fn only_valid_capacities_make_a_header() {
        for bad in [
            0,
            1,
            64,
            2048,
            4097,
            3 << 12,
            MAX_CAPACITY + 1,
            1 << 31,
            usize::MAX,
        ] {
            assert_eq!(RegionHeader::new(bad), None, "capacity {bad}");
        }
    }

    #[test]
    fn bad_magic_or_version_is_refused() {
        let good = header(MIN_CAPACITY);
        for at in 0..12 {
            let mut bad = good;
            bad[at] ^= 0x40;
            assert_eq!(
                RegionHeader::decode(&bad, MIN_REGION_LEN),
                Err(Violation::RegionMagic),
                "byte {at}"
            );
        }
    }

    #[test]
    fn capacities_out_of_range_or_not_powers_of_two_are_refused() {
        for capacity in [0u32, 1, 2048, 4097, 3 << 12, 1 << 31, u32::MAX] {
            let bad = RegionHeader { capacity }.encode();
            // Even with an object length that matches the claimed capacity.
            let len = region_len(capacity as usize).unwrap();
            assert_eq!(
                RegionHeader::decode(&bad, len),
                Err(Violation::RegionCapacityRange),
                "capacity {capacity}"
            );
        }
    }

    #[test]
    fn a_capacity_that_disagrees_with_the_object_length_is_refused() {
        let good = header(65_536);
        let len = region_len(65_536).unwrap();
        for object_len in [0, len - 1, len + 1, len * 2, MIN_REGION_LEN, usize::MAX] {
            assert_eq!(
                RegionHeader::decode(&good, object_len),
                Err(Violation::RegionCapacityMismatch),
                "object of {object_len} bytes"
            );
        }
    }

    #[test]
    fn region_lengths_never_overflow() {
        assert_eq!(region_len(usize::MAX), None);
        assert_eq!(region_len(usize::MAX / 2), None);
        assert_eq!(region_len(0), Some(DATA_AT));
    }
}
