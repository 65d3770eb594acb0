//! The block pool's shared formats: the size classes a block record names,
//! and the release table through which a receiver hands blocks back.
//!
//! # Blocks
//!
//! A pool block is a sealed shared-memory object of [`class_size`]`(class)`
//! bytes, `class < CLASSES`, announced once per link by a control record
//! (`wire/record.rs`) and named afterwards by `Block` frames
//! (`wire/frame.rs`: id, generation, length).
//!
//! # The release table
//!
//! One per link direction, [`RELEASE_TABLE_LEN`] bytes: [`SLOTS`]
//! little-endian `u32`s, slot `i` the generation of block `i` the receiver
//! last released. The sender only compares a slot with the generation it
//! expects, so any value a receiver writes is harmless.

/// Number of size classes: 4 KiB << 0 ..= 4 KiB << 16 (256 MiB).
pub const CLASSES: usize = 17;
/// The smallest block.
pub const MIN_BLOCK: usize = 4096;

/// Bytes in a block of `class` (`class < CLASSES`).
pub const fn class_size(class: usize) -> usize {
    MIN_BLOCK << class
}

/// The smallest class holding `len` bytes, if any does.
pub fn class_for(len: usize) -> Option<usize> {
    let class = len.max(MIN_BLOCK).next_power_of_two().trailing_zeros() as usize - 12;
    (class < CLASSES).then_some(class)
}

/// Blocks one link direction may have: the release table's slots.
pub const SLOTS: usize = 65536;
/// Bytes of a release table.
pub const RELEASE_TABLE_LEN: usize = SLOTS * 4;

const _: () = {
    assert!(MIN_BLOCK == 1 << 12, "class_for counts from 2^12");
    assert!(class_size(CLASSES - 1) == 256 << 20);
    assert!(RELEASE_TABLE_LEN.is_multiple_of(4096));
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_length_gets_the_smallest_class_that_holds_it() {
        assert_eq!(class_for(0), Some(0));
        assert_eq!(class_for(MIN_BLOCK), Some(0));
        assert_eq!(class_for(MIN_BLOCK + 1), Some(1));
        assert_eq!(class_for(class_size(CLASSES - 1)), Some(CLASSES - 1));
        assert_eq!(class_for(class_size(CLASSES - 1) + 1), None);
        assert_eq!(class_for(usize::MAX / 2), None);
    }
}
