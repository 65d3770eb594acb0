//! How many descriptors peers may make this process hold.
//!
//! A descriptor a peer sends with a message (an `Fd` record) is open here
//! from the moment its record is read until the application takes it, or,
//! if no one ever does (the message is refused, dropped, or the link
//! fails), until the closer has closed it. Each link's cap alone does not
//! bound that: six peers at a per-link cap of 256 fill a table of 1,024
//! (the usual soft `RLIMIT_NOFILE`), and then `accept`, `socket`, `memfd`
//! and every honest link fail with `EMFILE`. So every such descriptor is
//! charged against two counts, one per link and one for the process:
//!
//! - The process holds at most **half of the soft limit** for all peers
//!   together (`total`), from `RLIMIT_NOFILE` as last read: read once, and
//!   again whenever a charge would be refused (so a process that raises
//!   its limit gets the room at once, and a descriptor received costs no
//!   system call of its own); the other half
//!   is this process's own: its listening socket, each link's control
//!   socket, pool blocks and pipes, and whatever the application opens.
//! - One link holds at most `min(256, total / 4)` (`share`): even at the
//!   usual limit of 1,024 (a total of 512, a share of 128) one peer cannot
//!   take more than a quarter of what all peers may, and with a high limit
//!   a link keeps the protocol's own cap ([`MAX_PENDING_FDS`]), one full
//!   message of [`crate::base::wire::MAX_HANDLES`] descriptors with room over.
//! - Past `share / 8` (its `floor`), a link may take one more only while a
//!   quarter of `total` stays free. So peers at their share fill at most
//!   three quarters of `total`; the last quarter is for links holding
//!   less than their floor, which is every honest link whose messages are
//!   being received. With a limit of 1,024: three hostile peers at 128
//!   each, then any number of others at 16 each until `total` is full;
//!   an honest link can always take 16 while fewer than eight hostile
//!   links hold their floor.
//!
//! A message with more descriptors than its link's share can be received
//! only once the process's limit is high enough (a soft limit of 2,048
//! gives a share of 256); until then it stays queued and each receive says
//! so, as a local shortage.
//!
//! Over either count the record stays queued on the socket and the
//! receive reports a local shortage (`Io`, `QuotaExceeded`): the peer is
//! not blamed, as an honest peer with many pipes whose messages the
//! application has not read yet reaches it too.

use std::io;
use std::sync::Arc;

use crate::base::sync::{AtomicU64, AtomicUsize, Ordering};
use crate::base::sys::descriptor_limit;
use crate::base::wire::MAX_PENDING_FDS;

/// The soft limit assumed where it cannot be read (or is unlimited, for
/// which this is the cap: no more is ever needed).
const ASSUMED_LIMIT: u64 = 1 << 20;

/// What the limits come to for a soft limit `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shares {
    /// Most held for all links together.
    pub(crate) total: usize,
    /// Most held for one link.
    pub(crate) share: usize,
    /// What one link may hold while less than a quarter of `total` is free.
    pub(crate) floor: usize,
}

impl Shares {
    /// The shares for a soft descriptor limit of `limit`.
    pub(crate) fn for_limit(limit: u64) -> Self {
        let total = usize::try_from(limit.min(ASSUMED_LIMIT) / 2).unwrap_or(usize::MAX);
        let share = (total / 4).min(MAX_PENDING_FDS);
        Self {
            total,
            share,
            floor: (share / 8).max(1).min(share),
        }
    }

    /// Whether a link holding `mine`, in a process holding `all` for every
    /// link, may take one more.
    pub(crate) fn allows(&self, mine: usize, all: usize) -> bool {
        let headroom = self.total / 4;
        mine < self.share && all < self.total && (mine < self.floor || all + headroom < self.total)
    }
}

/// Held for all links together.
static HELD: AtomicUsize = AtomicUsize::new(0);

/// The soft descriptor limit as last read (0: not read yet).
static LIMIT: AtomicU64 = AtomicU64::new(0);

/// The shares for the limit as last read, read afresh if `fresh` (or
/// never read).
fn current_shares(fresh: bool) -> Shares {
    // Relaxed (both): a cached number; a stale one is read again before
    // any charge is refused on its account.
    let mut limit = LIMIT.load(Ordering::Relaxed);
    if fresh || limit == 0 {
        limit = descriptor_limit().unwrap_or(ASSUMED_LIMIT).max(1);
        LIMIT.store(limit, Ordering::Relaxed);
    }
    Shares::for_limit(limit)
}

/// One link's count of descriptors held for it.
#[derive(Debug, Default)]
pub(crate) struct LinkFds {
    held: AtomicUsize,
}

/// One descriptor's charge against its link's count and the process's;
/// released on drop.
#[derive(Debug)]
pub(crate) struct FdCharge {
    link: Arc<LinkFds>,
}

impl LinkFds {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Charges one descriptor to this link, or says why it cannot be.
    pub(crate) fn charge(self: &Arc<Self>) -> io::Result<FdCharge> {
        // Relaxed (all): counts only, compared with limits; a race lets a
        // charge in or out a moment early, never past the limit by more
        // than the racing threads (each undoes its own over-count).
        let mine = self.held.fetch_add(1, Ordering::Relaxed);
        let all = HELD.fetch_add(1, Ordering::Relaxed);
        let mut shares = current_shares(false);
        if !shares.allows(mine, all) {
            shares = current_shares(true);
        }
        if shares.allows(mine, all) {
            return Ok(FdCharge {
                link: Arc::clone(self),
            });
        }
        self.held.fetch_sub(1, Ordering::Relaxed);
        HELD.fetch_sub(1, Ordering::Relaxed);
        Err(over(&shares, mine, all))
    }
}

impl Drop for FdCharge {
    fn drop(&mut self) {
        // Relaxed: see `charge`.
        self.link.held.fetch_sub(1, Ordering::Relaxed);
        HELD.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The local error of a charge refused.
fn over(shares: &Shares, mine: usize, all: usize) -> io::Error {
    let why = if mine >= shares.share {
        format!(
            "{mine} descriptors the peer sent wait here for messages not yet received \
             (at most {} per link); receive those first",
            shares.share
        )
    } else {
        format!(
            "peers' descriptors fill this process's share of its descriptor limit \
             ({all} held, at most {} for all peers, this link holds {mine})",
            shares.total
        )
    };
    io::Error::new(
        io::ErrorKind::QuotaExceeded,
        format!("{why} (the descriptor stays queued)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_follow_the_limit() {
        let usual = Shares::for_limit(1024);
        assert_eq!(
            (usual.total, usual.share, usual.floor),
            (512, 128, 16),
            "the usual soft limit"
        );
        let high = Shares::for_limit(65536);
        assert_eq!((high.total, high.share, high.floor), (32768, 256, 32));
        let tiny = Shares::for_limit(8);
        assert_eq!((tiny.total, tiny.share, tiny.floor), (4, 1, 1));
        assert_eq!(Shares::for_limit(u64::MAX).share, MAX_PENDING_FDS);
    }

    #[test]
    fn a_link_past_its_floor_leaves_a_quarter_free() {
        let s = Shares::for_limit(1024);
        assert!(s.allows(0, 0));
        assert!(!s.allows(128, 128), "at its share");
        assert!(s.allows(127, 383), "a quarter stays free after it");
        assert!(
            !s.allows(20, 384),
            "past its floor, a quarter would not stay free"
        );
        assert!(s.allows(15, 500), "under its floor");
        assert!(!s.allows(0, 512), "the total is full");
    }
}
