//! The process-wide reserve of ready blocks, kept full in the background.
//!
//! After SpiderMonkey's GC chunk pool: making a block (memfd, size, seal,
//! map, fault every page) costs about 440 µs per MiB, reusing one a few
//! microseconds. A helper thread keeps each size class that saw demand
//! recently between a low and a high watermark of free, pre-faulted blocks.
//! A sender never waits for it: with its class empty, it makes a block on
//! its own path, and the counters say how often that happened. The helper
//! runs only when more than one CPU is online (with one, it would only
//! steal the sender's time), and releases the blocks of a class that has
//! seen no demand for [`IDLE`], so memory goes back to the OS.
//!
//! The handshake: `take` records demand under the lock and kicks the helper
//! after unlocking; the helper decides whether there is work and starts
//! waiting under one hold of the same lock, so a kick can never fall
//! between its look and its sleep. The reserve is generic over what it
//! holds so that `tests/loom_reserve.rs` can model-check exactly this code.
// Public to the loom model tests (`tests/loom_reserve.rs`), which build
// the crate with `--cfg loom`; crate-private otherwise.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use std::time::{Duration, Instant};

use crate::base::sync::{AtomicU64, Condvar, Mutex, MutexGuard, Ordering};

/// A class with no demand for this long gives its free blocks back.
pub const IDLE: Duration = Duration::from_secs(2);

/// Counters of where blocks came from; see [`crate::pool_stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Blocks the helper thread made ahead of demand.
    pub made_in_background: u64,
    /// Blocks a sender had to make itself, on its own path.
    pub made_on_send_path: u64,
    /// Blocks handed out from the reserve (made in the background).
    pub taken_from_reserve: u64,
    /// Sends that reused a block already bound to the link (no mapping).
    pub reused: u64,
    /// Blocks released to the OS after the idle period.
    pub released_idle: u64,
    /// Large messages sent through the ring because their link's pool was
    /// at its cap with every block out.
    pub ring_fallbacks: u64,
    /// Blocks bound to this process's links now (sent to a peer at least
    /// once); they are unmapped when their link goes away.
    pub in_links: u64,
}

#[derive(Debug)]
struct Class<T> {
    free: Vec<T>,
    last_demand: Option<Instant>,
}

#[derive(Debug)]
struct Shelves<T> {
    classes: Vec<Class<T>>,
}

/// How a reserve behaves.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// (refill below, fill up to) per class.
    pub watermarks: fn(usize) -> (usize, usize),
    /// Whether the helper also wakes when a class's free items have idled
    /// for [`IDLE`], to release them (`false`: only when kicked). It sleeps
    /// without a timeout while no class holds free items, so an idle
    /// process makes no periodic wakeups.
    pub release_idle: bool,
    /// The helper returns after making this many items (`None`: never;
    /// tests use it to end the model).
    pub budget: Option<u64>,
}

/// The reserve: free items per class, and the helper's wake-up.
#[derive(Debug)]
pub struct Reserve<T> {
    shelves: Mutex<Shelves<T>>,
    kick: Condvar,
    make: fn(usize) -> std::io::Result<T>,
    tuning: Tuning,
    made_in_background: AtomicU64,
    made_on_send_path: AtomicU64,
    taken_from_reserve: AtomicU64,
    reused: AtomicU64,
    released_idle: AtomicU64,
    ring_fallbacks: AtomicU64,
    in_links: AtomicU64,
}

impl<T> Reserve<T> {
    /// A reserve of `classes` classes that makes items with `make`.
    pub fn new(classes: usize, make: fn(usize) -> std::io::Result<T>, tuning: Tuning) -> Self {
        let classes = (0..classes)
            .map(|_| Class {
                free: Vec::new(),
                last_demand: None,
            })
            .collect();
        Self {
            shelves: Mutex::new(Shelves { classes }),
            kick: Condvar::new(),
            make,
            tuning,
            made_in_background: AtomicU64::new(0),
            made_on_send_path: AtomicU64::new(0),
            taken_from_reserve: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            released_idle: AtomicU64::new(0),
            ring_fallbacks: AtomicU64::new(0),
            in_links: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shelves<T>> {
        self.shelves.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ready item of `class`: from the reserve if it has one, else made
    /// here and now. Never waits for the helper; kicks it if `helper`.
    pub fn take(&self, class: usize, helper: bool) -> std::io::Result<T> {
        let taken = {
            let mut shelves = self.lock();
            let class = &mut shelves.classes[class];
            class.last_demand = Some(Instant::now());
            class.free.pop()
        };
        if helper {
            self.kick.notify_one();
        }
        // Relaxed (both counters): statistics, read on their own.
        match taken {
            Some(item) => {
                self.taken_from_reserve.fetch_add(1, Ordering::Relaxed);
                Ok(item)
            }
            None => {
                self.made_on_send_path.fetch_add(1, Ordering::Relaxed);
                (self.make)(class)
            }
        }
    }

    /// Counts items bound to a link (`bound`) or unmapped with it.
    pub fn count_in_links(&self, bound: u64, unmapped: u64) {
        // Relaxed (both): a gauge, read on its own.
        self.in_links.fetch_add(bound, Ordering::Relaxed);
        self.in_links.fetch_sub(unmapped, Ordering::Relaxed);
    }

    /// Counts a large message sent through the ring for want of a block.
    pub fn count_ring_fallback(&self) {
        // Relaxed: a statistic.
        self.ring_fallbacks.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a send that reused an item bound to its link.
    pub fn count_reuse(&self) {
        // Relaxed: a statistic.
        self.reused.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn stats(&self) -> PoolStats {
        // Relaxed (all loads): statistics, each read on its own.
        PoolStats {
            made_in_background: self.made_in_background.load(Ordering::Relaxed),
            made_on_send_path: self.made_on_send_path.load(Ordering::Relaxed),
            taken_from_reserve: self.taken_from_reserve.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            released_idle: self.released_idle.load(Ordering::Relaxed),
            ring_fallbacks: self.ring_fallbacks.load(Ordering::Relaxed),
            in_links: self.in_links.load(Ordering::Relaxed),
        }
    }

    /// The helper's loop: refill and release, forever (or until it has
    /// made its [`Tuning::budget`]).
    pub fn run_helper(&self) {
        let mut shelves = self.lock();
        loop {
            let (work, released, release_at) = self.plan(&mut shelves);
            drop(released);
            // Relaxed: a counter only this thread adds to.
            let made = self.made_in_background.load(Ordering::Relaxed);
            if self.tuning.budget.is_some_and(|b| made >= b) {
                return;
            }
            if let Some(class) = work {
                drop(shelves);
                self.refill(class);
                shelves = self.lock();
                continue;
            }
            // Looked and sleeps under one hold of the lock: no lost kick.
            shelves = match release_at.filter(|_| self.tuning.release_idle) {
                Some(at) => {
                    let nap = at.saturating_duration_since(Instant::now());
                    self.kick
                        .wait_timeout(shelves, nap)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.kick.wait(shelves).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }

    /// Takes the free items of idle classes off the shelves (to be dropped,
    /// which unmaps them), names a class below its low watermark, if any,
    /// and tells when the next class still holding items goes idle.
    fn plan(&self, shelves: &mut Shelves<T>) -> (Option<usize>, Vec<T>, Option<Instant>) {
        let now = Instant::now();
        let mut released = Vec::new();
        let mut work = None;
        let mut release_at: Option<Instant> = None;
        for (i, class) in shelves.classes.iter_mut().enumerate() {
            let idle_at = class.last_demand.map(|t| t + IDLE);
            match idle_at {
                Some(at) if at > now => {
                    if !class.free.is_empty() {
                        release_at = Some(release_at.map_or(at, |r| r.min(at)));
                    }
                    if work.is_none() && class.free.len() < (self.tuning.watermarks)(i).0 {
                        work = Some(i);
                    }
                }
                _ => released.append(&mut class.free),
            }
        }
        // Relaxed: a statistic.
        self.released_idle
            .fetch_add(released.len() as u64, Ordering::Relaxed);
        (work, released, release_at)
    }

    /// Makes items of `class` up to its high watermark, outside the lock.
    fn refill(&self, class: usize) {
        let (_, high) = (self.tuning.watermarks)(class);
        while self.lock().classes[class].free.len() < high {
            let Ok(item) = (self.make)(class) else { return };
            // Relaxed: a statistic.
            self.made_in_background.fetch_add(1, Ordering::Relaxed);
            self.lock().classes[class].free.push(item);
        }
    }
}

#[cfg(not(loom))]
mod global {
    use std::sync::OnceLock;

    use super::{Reserve, Tuning};
    use crate::transport::pool::block::{Block, CLASSES, class_size};

    /// Bytes of free blocks the helper aims to keep per active class (at
    /// least one block, at most eight).
    const TARGET_BYTES: usize = 4 << 20;

    /// The watermarks of `class`: (refill below, fill up to).
    fn watermarks(class: usize) -> (usize, usize) {
        let high = (TARGET_BYTES / class_size(class)).clamp(1, 8);
        ((high / 2).max(1), high)
    }

    /// The process's reserve of blocks.
    pub fn blocks() -> &'static Reserve<Block> {
        static RESERVE: OnceLock<Reserve<Block>> = OnceLock::new();
        RESERVE.get_or_init(|| {
            let tuning = Tuning {
                watermarks,
                release_idle: true,
                budget: None,
            };
            Reserve::new(CLASSES, Block::create, tuning)
        })
    }

    /// Takes a block of `class`, starting the helper on first use where a
    /// spare CPU exists.
    pub fn take(class: usize) -> std::io::Result<Block> {
        static HELPER: OnceLock<bool> = OnceLock::new();
        let helper = *HELPER.get_or_init(|| {
            crate::base::sys::online_cpus() > 1
                && crate::base::sys::spawn_quiet("ferry-pool", None, || blocks().run_helper())
                    .is_ok()
        });
        blocks().take(class, helper)
    }
}

#[cfg(not(loom))]
pub use global::{blocks, take};
