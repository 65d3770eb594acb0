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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::block::{Block, CLASSES, class_size};

/// A class with no demand for this long gives its free blocks back.
pub const IDLE: Duration = Duration::from_secs(2);
/// Bytes of free blocks the helper aims to keep per active class (at
/// least one block, at most eight).
const TARGET_BYTES: usize = 4 << 20;

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
    /// Blocks bound to this process's links now (sent to a peer at least
    /// once); they are unmapped when their link goes away.
    pub in_links: u64,
}

#[derive(Debug, Default)]
struct Class {
    free: Vec<Block>,
    last_demand: Option<Instant>,
}

/// The reserve: free blocks per class, and the helper's wake-up.
#[derive(Debug)]
pub struct Reserve {
    classes: Mutex<Vec<Class>>,
    kick: Condvar,
    helper: OnceLock<bool>,
    made_in_background: AtomicU64,
    made_on_send_path: AtomicU64,
    taken_from_reserve: AtomicU64,
    reused: AtomicU64,
    released_idle: AtomicU64,
    in_links: AtomicU64,
}

/// The watermarks of `class`: (refill below, fill up to).
pub fn watermarks(class: usize) -> (usize, usize) {
    let high = (TARGET_BYTES / class_size(class)).clamp(1, 8);
    ((high / 2).max(1), high)
}

impl Reserve {
    /// The process's reserve.
    pub fn global() -> &'static Reserve {
        static RESERVE: OnceLock<Reserve> = OnceLock::new();
        RESERVE.get_or_init(|| Reserve {
            classes: Mutex::new((0..CLASSES).map(|_| Class::default()).collect()),
            kick: Condvar::new(),
            helper: OnceLock::new(),
            made_in_background: AtomicU64::new(0),
            made_on_send_path: AtomicU64::new(0),
            taken_from_reserve: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            released_idle: AtomicU64::new(0),
            in_links: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Class>> {
        self.classes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A ready block of `class`: from the reserve if it has one, else made
    /// here and now. Never waits for the helper.
    pub fn take(&'static self, class: usize) -> std::io::Result<Block> {
        let taken = {
            let mut classes = self.lock();
            classes[class].last_demand = Some(Instant::now());
            classes[class].free.pop()
        };
        if self.start_helper() {
            self.kick.notify_one();
        }
        // Relaxed (all counters): statistics, read on their own.
        match taken {
            Some(block) => {
                self.taken_from_reserve.fetch_add(1, Ordering::Relaxed);
                Ok(block)
            }
            None => {
                self.made_on_send_path.fetch_add(1, Ordering::Relaxed);
                Block::create(class)
            }
        }
    }

    /// Counts blocks bound to a link (`bound`) or unmapped with it.
    pub fn count_in_links(&self, bound: u64, unmapped: u64) {
        // Relaxed (both): a gauge, read on its own.
        self.in_links.fetch_add(bound, Ordering::Relaxed);
        self.in_links.fetch_sub(unmapped, Ordering::Relaxed);
    }

    /// Counts a send that reused a block bound to its link.
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
            in_links: self.in_links.load(Ordering::Relaxed),
        }
    }

    /// Starts the helper once, where a spare CPU exists; whether it runs.
    fn start_helper(&'static self) -> bool {
        *self.helper.get_or_init(|| {
            crate::sys::online_cpus() > 1
                && std::thread::Builder::new()
                    .name("ferry-pool".into())
                    .spawn(move || self.run_helper())
                    .is_ok()
        })
    }

    fn run_helper(&self) {
        loop {
            let work = self.plan();
            if work.is_empty() {
                let guard = self.lock();
                drop(self.kick.wait_timeout(guard, IDLE / 2));
                continue;
            }
            for class in work {
                self.refill(class);
            }
        }
    }

    /// Releases idle classes' blocks and lists the classes below their low
    /// watermark.
    fn plan(&self) -> Vec<usize> {
        let now = Instant::now();
        let mut released = Vec::new();
        let mut work = Vec::new();
        let mut classes = self.lock();
        for (i, class) in classes.iter_mut().enumerate() {
            let active = class.last_demand.is_some_and(|t| now - t < IDLE);
            if !active {
                released.append(&mut class.free);
            } else if class.free.len() < watermarks(i).0 {
                work.push(i);
            }
        }
        drop(classes);
        // Relaxed: a statistic.
        self.released_idle
            .fetch_add(released.len() as u64, Ordering::Relaxed);
        work
    }

    /// Makes blocks of `class` up to its high watermark, outside the lock.
    fn refill(&self, class: usize) {
        let (_, high) = watermarks(class);
        while self.lock()[class].free.len() < high {
            let Ok(block) = Block::create(class) else {
                return;
            };
            // Relaxed: a statistic.
            self.made_in_background.fetch_add(1, Ordering::Relaxed);
            self.lock()[class].free.push(block);
        }
    }
}
