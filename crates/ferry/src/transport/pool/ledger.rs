//! The sender's bookkeeping of its blocks, in private memory: which are
//! free (per size class), which are out with the peer at which generation.
//!
//! Pure logic over block ids, so it runs under Miri. The peer's only say
//! is the `released(id, generation)` answer read from the release table:
//! a block comes back only when the peer reports exactly the generation it
//! was sent with, so a peer can delay a block but never free one twice or
//! free one it was never sent.
// Public to the loom model tests (`tests/loom_reserve.rs`), which build
// the crate with `--cfg loom`; crate-private otherwise.
#![cfg_attr(not(loom), allow(unreachable_pub))]

use std::time::{Duration, Instant};

/// The class of a retired id: unmapped for good. Ids are never reused, so
/// a frame can never mean an old block by a new block's id (the peer may
/// read a retirement only after frames sent later).
const RETIRED: usize = usize::MAX;

/// Free lists and outstanding blocks of one link direction.
#[derive(Debug)]
pub struct Ledger {
    /// Size class of each block id ([`RETIRED`] once unmapped).
    classes: Vec<usize>,
    /// Generation each block was last sent with (0: never sent).
    generations: Vec<u32>,
    /// Free block ids per class.
    free: Vec<Vec<u32>>,
    /// Blocks with the peer: (id, generation).
    outstanding: Vec<(u32, u32)>,
    /// How many ids are retired.
    retired: usize,
    /// When each class last lent a block out.
    last_take: Vec<Option<Instant>>,
    /// Blocks alive per class.
    per_class: Vec<usize>,
}

impl Ledger {
    /// An empty ledger for `classes` size classes.
    pub fn new(classes: usize) -> Self {
        Self {
            classes: Vec::new(),
            generations: Vec::new(),
            free: vec![Vec::new(); classes],
            outstanding: Vec::new(),
            retired: 0,
            last_take: vec![None; classes],
            per_class: vec![0; classes],
        }
    }

    /// Ids in use (blocks mapped, free or not).
    pub fn live(&self) -> usize {
        self.classes.len() - self.retired
    }

    /// Blocks of `class` alive (free or not).
    pub fn live_in(&self, class: usize) -> usize {
        self.per_class[class]
    }

    /// The id the next [`Ledger::add`] returns.
    pub fn next_id(&self) -> u32 {
        self.classes.len() as u32
    }

    /// Records a new block of `class`, lent out (not free); returns its id.
    pub fn add(&mut self, class: usize) -> u32 {
        self.last_take[class] = Some(Instant::now());
        self.per_class[class] += 1;
        self.classes.push(class);
        self.generations.push(0);
        (self.classes.len() - 1) as u32
    }

    /// Retires the free blocks of every class but `keep`, returning their
    /// ids for the caller to unmap and announce.
    pub fn retire_other_classes(&mut self, keep: usize) -> Vec<u32> {
        self.retire_where(|class, _| class != keep)
    }

    /// Retires the free blocks of classes that lent nothing for `idle`.
    pub fn retire_idle(&mut self, now: Instant, idle: Duration) -> Vec<u32> {
        self.retire_where(|_, last| last.is_none_or(|t| now.duration_since(t) >= idle))
    }

    fn retire_where(&mut self, pick: impl Fn(usize, Option<Instant>) -> bool) -> Vec<u32> {
        let mut gone = Vec::new();
        for class in 0..self.free.len() {
            if !self.free[class].is_empty() && pick(class, self.last_take[class]) {
                gone.append(&mut self.free[class]);
            }
        }
        for &id in &gone {
            self.per_class[self.classes[id as usize]] -= 1;
            self.classes[id as usize] = RETIRED;
        }
        self.retired += gone.len();
        gone
    }

    /// Lends out a free block of `class`, first taking back what the peer
    /// released if the class has none free.
    pub fn take(&mut self, class: usize, released: impl Fn(u32, u32) -> bool) -> Option<u32> {
        if self.free[class].is_empty() {
            self.reclaim(released);
        }
        let id = self.free[class].pop()?;
        self.last_take[class] = Some(Instant::now());
        Some(id)
    }

    /// Moves every block the peer reports released back to its free list.
    pub fn reclaim(&mut self, released: impl Fn(u32, u32) -> bool) {
        let (classes, free) = (&self.classes, &mut self.free);
        self.outstanding.retain(|&(id, generation)| {
            if !released(id, generation) {
                return true;
            }
            free[classes[id as usize]].push(id);
            false
        });
    }

    /// Every outstanding block back, for a peer that is gone.
    pub fn reclaim_all(&mut self) {
        self.reclaim(|_, _| true);
    }

    /// Marks lent block `id` sent; returns its new generation (never 0).
    pub fn commit(&mut self, id: u32) -> u32 {
        let generation = &mut self.generations[id as usize];
        *generation = generation.wrapping_add(1).max(1);
        self.outstanding.push((id, *generation));
        *generation
    }

    /// Undoes a `commit` whose frame could not be sent.
    pub fn cancel(&mut self, id: u32) {
        self.outstanding.retain(|&(i, _)| i != id);
        self.give_back(id);
    }

    /// Returns lent block `id`, unsent, to its free list.
    pub fn give_back(&mut self, id: u32) {
        self.free[self.classes[id as usize]].push(id);
    }

    /// Blocks with the peer now.
    #[cfg(test)]
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    /// A release table on the heap: slot per id.
    struct Table(RefCell<Vec<u32>>);

    impl Table {
        fn released(&self, id: u32, generation: u32) -> bool {
            self.0.borrow().get(id as usize) == Some(&generation)
        }
        fn write(&self, id: u32, generation: u32) {
            self.0.borrow_mut()[id as usize] = generation;
        }
    }

    #[test]
    fn blocks_come_back_only_at_their_generation() {
        let table = Table(RefCell::new(vec![0; 8]));
        let mut ledger = Ledger::new(3);
        let a = ledger.add(1);
        let g1 = ledger.commit(a);
        assert_eq!(ledger.take(1, |i, g| table.released(i, g)), None);
        table.write(a, g1 + 1); // a lie about a future generation
        assert_eq!(ledger.take(1, |i, g| table.released(i, g)), None);
        table.write(a, g1);
        assert_eq!(ledger.take(1, |i, g| table.released(i, g)), Some(a));
        let g2 = ledger.commit(a);
        assert_ne!(g1, g2);
        // The old release still in the table does not free the new use.
        table.write(a, g1);
        assert_eq!(ledger.take(1, |i, g| table.released(i, g)), None);
        assert_eq!(ledger.outstanding(), 1);
    }

    #[test]
    fn classes_are_kept_apart_and_nothing_is_lost() {
        let table = Table(RefCell::new(vec![0; 64]));
        let mut ledger = Ledger::new(4);
        let ids: Vec<u32> = (0..40).map(|i| ledger.add(i % 4)).collect();
        for &id in &ids {
            let generation = ledger.commit(id);
            table.write(id, generation);
        }
        let rounds = if cfg!(miri) { 2 } else { 50 };
        for _ in 0..rounds {
            let mut got = Vec::new();
            for class in 0..4 {
                while let Some(id) = ledger.take(class, |i, g| table.released(i, g)) {
                    assert_eq!(id as usize % 4, class, "block of the wrong class");
                    got.push(id);
                }
            }
            got.sort_unstable();
            assert_eq!(got, ids, "every block back exactly once");
            for &id in &got {
                let generation = ledger.commit(id);
                table.write(id, generation);
            }
        }
    }

    #[test]
    fn retired_blocks_leave_the_free_lists_for_good() {
        let never = |_, _| false;
        let mut ledger = Ledger::new(3);
        let (a, b, c) = (ledger.add(0), ledger.add(1), ledger.add(2));
        for id in [a, b, c] {
            ledger.give_back(id);
        }
        assert_eq!(ledger.retire_other_classes(1), [a, c]);
        assert_eq!(ledger.live(), 1);
        assert_eq!((ledger.live_in(0), ledger.live_in(1)), (0, 1));
        assert_eq!(ledger.take(0, never), None);
        assert_eq!(ledger.take(2, never), None);
        assert_eq!(ledger.take(1, never), Some(b));
        ledger.give_back(b);
        let later = Instant::now() + Duration::from_secs(10);
        assert_eq!(ledger.retire_idle(later, Duration::from_secs(2)), [b]);
        let next = ledger.next_id();
        assert_eq!(ledger.add(2), next);
        assert!(![a, b, c].contains(&next), "a retired id is never reused");
        assert_eq!(ledger.live(), 1);
    }

    #[test]
    fn cancel_and_give_back_return_blocks_and_reclaim_all_empties() {
        let mut ledger = Ledger::new(2);
        let a = ledger.add(0);
        let b = ledger.add(0);
        ledger.give_back(a);
        ledger.commit(b);
        ledger.cancel(b);
        let never = |_, _| false;
        let mut back = vec![
            ledger.take(0, never).unwrap(),
            ledger.take(0, never).unwrap(),
        ];
        back.sort_unstable();
        assert_eq!(back, [a, b]);
        ledger.commit(a);
        ledger.commit(b);
        ledger.reclaim_all();
        assert_eq!(ledger.outstanding(), 0);
        assert!(ledger.take(0, never).is_some() && ledger.take(0, never).is_some());
        assert_eq!(ledger.take(0, never), None);
    }
}
