//! ferry's block pool as this process (the sender of every throughput
//! message and pingpong request) saw it during a row's timed span: how many
//! large messages went out of line in a block, and where each block came
//! from, from [`ferry::pool_stats`]. Other transports leave it at zero.

use ferry::PoolStats;
use serde::Serialize;

/// Where the blocks of some out-of-line messages came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PoolUse {
    /// Messages sent out of line in a block.
    pub blocks: u64,
    /// Blocks reused from the link's own free list.
    pub reused: u64,
    /// Blocks taken from the reserve the helper thread keeps.
    pub from_reserve: u64,
    /// Blocks the sender had to map itself, on its own path.
    pub mapped_on_send_path: u64,
    /// Blocks the helper thread made ahead of demand.
    pub made_in_background: u64,
    /// Large messages sent through the ring because the pool was at its cap.
    pub ring_fallbacks: u64,
}

/// The counters at the start of a span.
#[derive(Debug, Clone, Copy)]
pub struct Mark(PoolStats);

impl Mark {
    /// The counters now.
    pub fn now() -> Self {
        Self(ferry::pool_stats())
    }

    /// What the pool did since this mark.
    pub fn since(self) -> PoolUse {
        let (before, now) = (self.0, ferry::pool_stats());
        let reused = now.reused.saturating_sub(before.reused);
        let from_reserve = now
            .taken_from_reserve
            .saturating_sub(before.taken_from_reserve);
        let mapped = now
            .made_on_send_path
            .saturating_sub(before.made_on_send_path);
        PoolUse {
            blocks: reused + from_reserve + mapped,
            reused,
            from_reserve,
            mapped_on_send_path: mapped,
            made_in_background: now
                .made_in_background
                .saturating_sub(before.made_in_background),
            ring_fallbacks: now.ring_fallbacks.saturating_sub(before.ring_fallbacks),
        }
    }
}

impl PoolUse {
    /// Whether the pool did anything.
    pub fn is_used(&self) -> bool {
        self.blocks > 0 || self.ring_fallbacks > 0
    }

    /// The share of blocks that needed no mapping on the sender's path.
    pub fn off_path_share(&self) -> Option<f64> {
        (self.blocks > 0)
            .then(|| (self.blocks - self.mapped_on_send_path) as f64 / self.blocks as f64)
    }

    /// The counts of several spans together.
    pub fn sum(uses: impl IntoIterator<Item = Self>) -> Self {
        uses.into_iter().fold(Self::default(), |a, b| Self {
            blocks: a.blocks + b.blocks,
            reused: a.reused + b.reused,
            from_reserve: a.from_reserve + b.from_reserve,
            mapped_on_send_path: a.mapped_on_send_path + b.mapped_on_send_path,
            made_in_background: a.made_in_background + b.made_in_background,
            ring_fallbacks: a.ring_fallbacks + b.ring_fallbacks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_sums() {
        let one = PoolUse {
            blocks: 100,
            reused: 90,
            from_reserve: 6,
            mapped_on_send_path: 4,
            made_in_background: 8,
            ring_fallbacks: 0,
        };
        assert_eq!(one.off_path_share(), Some(0.96));
        let two = PoolUse::sum([one, one]);
        assert_eq!((two.blocks, two.mapped_on_send_path), (200, 8));
        assert!(!PoolUse::default().is_used());
        assert_eq!(PoolUse::default().off_path_share(), None);
    }
}
