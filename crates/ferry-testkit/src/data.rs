//! Seeded data a parent and its child derive alike, and checksums of it.

/// xorshift64*: a tiny deterministic generator, so a parent and its child
/// can derive the same message sizes and contents from one seed.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator; any seed works (zero is remapped).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..=max`.
    pub fn upto(&mut self, max: usize) -> usize {
        (self.next_u64() % (max as u64 + 1)) as usize
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An order-sensitive 64-bit checksum (FNV-1a over 8-byte words, seeded
/// with the length), fast enough for hundreds of megabytes in debug builds.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word: [u8; 8] = word.try_into().expect("8-byte chunk");
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(FNV_PRIME);
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    (h ^ u64::from_le_bytes(tail)).wrapping_mul(FNV_PRIME)
}

/// Folds one value into a running checksum.
pub fn mix(running: u64, value: u64) -> u64 {
    (running ^ value).wrapping_mul(FNV_PRIME).rotate_left(31)
}

/// A `u64` as a message.
pub fn u64_msg(value: u64) -> [u8; 8] {
    value.to_le_bytes()
}

/// A message that must be one `u64`.
pub fn msg_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("an 8-byte message"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_gives_one_sequence_and_checksums_see_order() {
        let (mut a, mut b) = (XorShift::new(7), XorShift::new(7));
        assert_eq!(a.bytes(100), b.bytes(100));
        assert_ne!(XorShift::new(7).next_u64(), XorShift::new(8).next_u64());
        assert!((0..1000).all(|_| a.upto(5) <= 5));
        assert_ne!(checksum(b"abcdefgh12"), checksum(b"12abcdefgh"));
        assert_ne!(checksum(b""), checksum(&[0]));
        assert_eq!(msg_u64(&u64_msg(0xfeed)), 0xfeed);
        assert_ne!(mix(mix(0, 1), 2), mix(mix(0, 2), 1));
    }
}
