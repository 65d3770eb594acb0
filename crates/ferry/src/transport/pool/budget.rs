//! How much one link may make this process map for its peer.
//!
//! Every mapping of memory a peer sent (a pipe's region, a pool block) is
//! charged to its link's budget before it is made, and the charge lives as
//! long as the mapping, so no peer can grow this process's address space
//! past it (one message could otherwise ask for terabytes). A pool block
//! past the budget closes the link with a protocol error; a pipe end past
//! it is refused alone (`link/inbox.rs`): the peer cannot know this
//! process's budget, and the ends it holds are this process's choice.

use crate::base::sync::{AtomicUsize, Ordering};
use crate::base::wire::Violation;
use std::sync::Arc;

/// Default budget per link: 8 GiB of the peer's memory mapped here, so
/// ~16,000 pipe ends with default rings (516 KiB regions) can be held over
/// one link. Address space, not memory: a region's pages cost memory only
/// once written, and a peer's writes are charged to the peer.
pub(crate) const DEFAULT_MAX_MAPPED: usize = 8 << 30;

/// One link's budget of bytes mapped for its peer.
#[derive(Debug)]
pub(crate) struct MapBudget {
    used: AtomicUsize,
    cap: usize,
}

/// Bytes charged to a budget, given back on drop.
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<MapBudget>,
    bytes: usize,
}

impl MapBudget {
    /// A budget of `cap` bytes.
    pub(crate) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            cap,
        })
    }

    /// Bytes that may still be mapped.
    pub(crate) fn remaining(&self) -> usize {
        // Relaxed: a counter on its own; `charge` re-checks atomically.
        self.cap.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// Charges `bytes`, or refuses if that would pass the cap.
    pub(crate) fn charge(self: &Arc<Self>, bytes: usize) -> Result<Charge, Violation> {
        // Relaxed (all): the counter orders nothing else; the
        // compare-exchange makes the check and the update one step.
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let total = used
                .checked_add(bytes)
                .filter(|&total| total <= self.cap)
                .ok_or(Violation::MapBudgetExceeded)?;
            match self
                .used
                .compare_exchange(used, total, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        Ok(Charge {
            budget: Arc::clone(self),
            bytes,
        })
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        // Relaxed: as in `charge`.
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_cap_and_come_back_on_drop() {
        let budget = MapBudget::new(100);
        let a = budget.charge(60).expect("within the cap");
        assert!(budget.charge(41).is_err());
        assert!(budget.charge(usize::MAX).is_err(), "no overflow");
        let b = budget.charge(40).expect("exactly the cap");
        assert_eq!(budget.remaining(), 0);
        drop(a);
        assert_eq!(budget.remaining(), 60);
        drop(b);
        assert_eq!(budget.remaining(), 100);
    }
}
