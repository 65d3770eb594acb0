//! A link's blocks, on each side.
//!
//! [`SendPool`]: the blocks this process sends through, with its free lists
//! in private memory. A block is announced to the peer once (its descriptor
//! crosses the control socket and is closed), then reused for many messages:
//! each use bumps its generation, and it comes back when the peer's release
//! table shows that generation.
//!
//! [`PeerBlocks`]: the blocks the peer announced, mapped read-only here,
//! with the checks that keep a hostile sender from naming a block it never
//! sent, a range past a block's end, an old generation, or a block this
//! side still holds.

use crate::base::sync::Ordering;
use crate::base::wire::Violation;
use std::collections::HashMap;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Instant;

use super::block::{Block, CLASSES, PeerBlock, class_size};
use super::budget::{Charge, MapBudget};
use super::ledger::Ledger;
use super::release::{ReleaseTable, SLOTS};
use super::reserve::{self, IDLE};
use crate::base::sys::{MapError, PeerFd};

/// Most blocks of one size class a link direction maps. A stream that runs
/// ahead of its receiver waits for blocks to come back beyond this, instead
/// of mapping one block per message in flight (small blocks would otherwise
/// reach the byte cap only after thousands of mappings).
pub(crate) const MAX_PER_CLASS: usize = 64;

/// Most bytes of one size class a link direction keeps in flight (at
/// least [`MIN_PER_CLASS`] blocks). A sender that runs further ahead of its
/// receiver only pushes the blocks it wrote out of the cache before the
/// receiver reads them: with 64 MiB in flight a 1 MiB stream ran at 5.2
/// GiB/s on one CPU and 8.6 across two, with 8 MiB at 7.1 and 10.0 (the
/// reference machine's last-level cache is 32 MiB). Smaller budgets were
/// up to 7% faster across CPUs but 1.2–4× slower on one, where the sender
/// then gives its CPU to the receiver every few messages.
pub(crate) const CLASS_BYTES: usize = 8 << 20;

/// Blocks of one class a link direction may always have, however large:
/// one being written, one in the ring, one held by the receiver, and one
/// on its way back.
pub(crate) const MIN_PER_CLASS: usize = 4;

/// The most blocks of `class` a link direction maps.
pub(crate) fn per_class(class: usize) -> usize {
    (CLASS_BYTES / class_size(class)).clamp(MIN_PER_CLASS, MAX_PER_CLASS)
}

/// The sending side's blocks on one link.
#[derive(Debug)]
pub(crate) struct SendPool {
    /// Each block by id, or `None` while it is lent out to be written.
    blocks: Vec<Option<Block>>,
    ledger: Ledger,
    table: ReleaseTable,
    mapped: usize,
    cap: usize,
}

impl SendPool {
    /// A pool that maps at most `cap` bytes; `announce` sends the release
    /// table's descriptor to the peer.
    pub(crate) fn new(
        cap: usize,
        announce: impl FnOnce(BorrowedFd<'_>) -> io::Result<()>,
    ) -> io::Result<Self> {
        let (table, object) = ReleaseTable::create()?;
        announce(object.fd())?;
        Ok(Self {
            blocks: Vec::new(),
            ledger: Ledger::new(CLASSES),
            table,
            mapped: 0,
            cap,
        })
    }

    /// Every block back, for a peer that is gone.
    pub(crate) fn reclaim_all(&mut self) {
        self.ledger.reclaim_all();
    }

    /// Lends out a free block of `class` to be written: reused, or taken
    /// from the reserve and announced to the peer. At the cap, free blocks
    /// of other classes are retired (unmapped here, and by the peer) to make
    /// room; `Ok(None)` if that is not enough (the caller then sends through
    /// the ring instead). Free blocks of classes idle
    /// for [`IDLE`] are retired on the way, so memory returns to the OS.
    pub(crate) fn alloc(
        &mut self,
        class: usize,
        peer: &dyn Announce,
    ) -> io::Result<Option<(u32, Block)>> {
        let idle = self.ledger.retire_idle(Instant::now(), IDLE);
        self.retire(&idle, peer)?;
        let table = &self.table;
        if let Some(id) = self.ledger.take(class, |id, g| table.is_released(id, g)) {
            let block = self.blocks[id as usize]
                .take()
                .ok_or_else(|| io::Error::other("free block lent twice"))?;
            reserve::blocks().count_reuse();
            return Ok(Some((id, block)));
        }
        if self.mapped + class_size(class) > self.cap {
            let others = self.ledger.retire_other_classes(class);
            self.retire(&others, peer)?;
        }
        let next = self.ledger.next_id();
        let full = self.mapped + class_size(class) > self.cap
            || self.ledger.live_in(class) >= per_class(class)
            || next as usize >= SLOTS;
        if full {
            return Ok(None);
        }
        let mut block = reserve::take(class)?;
        let object = block
            .take_object()
            .ok_or_else(|| io::Error::other("reserve block already sent"))?;
        peer.announce(next, class, object.fd())?;
        let id = self.ledger.add(class);
        self.blocks.push(None);
        self.mapped += class_size(class);
        reserve::blocks().count_in_links(1, 0);
        Ok(Some((id, block)))
    }

    /// Unmaps retired blocks and tells the peer to do the same.
    fn retire(&mut self, ids: &[u32], peer: &dyn Announce) -> io::Result<()> {
        for &id in ids {
            if let Some(block) = self.blocks[id as usize].take() {
                self.mapped -= block.len();
            }
            reserve::blocks().count_in_links(0, 1);
            peer.retire(id)?;
        }
        Ok(())
    }

    /// Whether a block of `class` can ever be had within the cap.
    pub(crate) fn fits(&self, class: usize) -> bool {
        class_size(class) <= self.cap
    }

    /// Takes back lent block `id`, now written and about to be named in a
    /// frame; returns the generation that frame must carry.
    pub(crate) fn commit(&mut self, id: u32, block: Block) -> u32 {
        self.blocks[id as usize] = Some(block);
        self.ledger.commit(id)
    }

    /// Undoes a `commit` whose frame could not be sent.
    pub(crate) fn cancel(&mut self, id: u32) {
        self.ledger.cancel(id);
    }

    /// Takes back lent block `id` unsent, onto its free list.
    pub(crate) fn give_back(&mut self, id: u32, block: Block) {
        self.blocks[id as usize] = Some(block);
        self.ledger.give_back(id);
    }
}

impl Drop for SendPool {
    fn drop(&mut self) {
        reserve::blocks().count_in_links(0, self.ledger.live() as u64);
    }
}

/// The peer of a link, as the pool speaks to it.
pub(crate) trait Announce {
    /// Sends a new block's descriptor: `id`, size `class`.
    fn announce(&self, id: u32, class: usize, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// Tells the peer block `id` is gone.
    fn retire(&self, id: u32) -> io::Result<()>;
}

#[derive(Debug)]
struct Known {
    block: Arc<Mapped>,
    last_generation: u32,
}

/// A peer's block mapped here, and its charge to the link's map budget
/// (kept while any view of it lives, even after the peer retired it).
#[derive(Debug)]
struct Mapped {
    block: PeerBlock,
    _charge: Charge,
}

/// The receiving side's view of the peer's blocks on one link.
#[derive(Debug, Default)]
pub(crate) struct PeerBlocks {
    blocks: HashMap<u32, Known>,
    table: Option<Arc<ReleaseTable>>,
    mapped: usize,
}

/// A block the receiver holds until it drops this.
#[derive(Debug)]
pub(crate) struct Held {
    block: Arc<Mapped>,
    table: Arc<ReleaseTable>,
    id: u32,
    generation: u32,
    len: usize,
}

impl Held {
    /// The message's bytes (see [`PeerBlock::bytes`] on what a peer may do).
    pub(crate) fn bytes(&self) -> &[u8] {
        self.block.block.bytes(self.len)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Release: pairs with the Acquire swap in `PeerBlocks::take`.
        self.block.block.held.store(false, Ordering::Release);
        self.table.release(self.id, self.generation);
    }
}

impl PeerBlocks {
    /// Maps a block the peer announced, within `cap` bytes of blocks in
    /// all and within the link's map `budget`; both are checked before
    /// anything is mapped.
    pub(crate) fn insert(
        &mut self,
        id: u64,
        class: usize,
        fd: PeerFd,
        cap: usize,
        budget: &Arc<MapBudget>,
    ) -> Result<(), MapError> {
        let id = u32::try_from(id)
            .ok()
            .filter(|&i| (i as usize) < SLOTS)
            .ok_or(Violation::BlockIdOutOfRange)?;
        if self.blocks.contains_key(&id) {
            return Err(Violation::BlockAnnouncedTwice.into());
        }
        let size = (class < CLASSES)
            .then(|| class_size(class))
            .ok_or(Violation::BlockClassOutOfRange)?;
        if self.mapped + size > cap {
            return Err(Violation::PoolCapExceeded.into());
        }
        let charge = budget.charge(size)?;
        let block = PeerBlock::from_peer(fd, class)?;
        self.mapped += size;
        let block = Arc::new(Mapped {
            block,
            _charge: charge,
        });
        self.blocks.insert(
            id,
            Known {
                block,
                last_generation: 0,
            },
        );
        Ok(())
    }

    /// Maps the peer's release table.
    pub(crate) fn set_table(&mut self, fd: PeerFd) -> Result<(), MapError> {
        if self.table.is_some() {
            return Err(Violation::ReleaseTableTwice.into());
        }
        self.table = Some(Arc::new(ReleaseTable::from_peer(fd)?));
        Ok(())
    }

    /// Forgets block `id`, which the peer retired. A view still held keeps
    /// its mapping until dropped.
    pub(crate) fn retire(&mut self, id: u64) -> Result<(), Violation> {
        let id = u32::try_from(id).map_err(|_| Violation::BlockIdOutOfRange)?;
        let known = self
            .blocks
            .remove(&id)
            .ok_or(Violation::RetireUnannounced)?;
        self.mapped -= known.block.block.len();
        Ok(())
    }

    /// Whether block `id` has been announced.
    pub(crate) fn knows(&self, id: u32) -> bool {
        self.blocks.contains_key(&id)
    }

    /// Takes block `id` at `generation` holding `len` bytes, after checking
    /// all three against what the peer announced and what this side holds.
    pub(crate) fn take(&mut self, id: u32, generation: u32, len: usize) -> Result<Held, Violation> {
        let table = self
            .table
            .clone()
            .ok_or(Violation::BlockBeforeReleaseTable)?;
        let known = self
            .blocks
            .get_mut(&id)
            .ok_or(Violation::BlockNeverAnnounced)?;
        if len > known.block.block.len() {
            return Err(Violation::BlockPastEnd);
        }
        if generation <= known.last_generation
            && !(known.last_generation > u32::MAX / 2 && generation < 1 << 16)
        {
            return Err(Violation::StaleGeneration);
        }
        // Acquire: pairs with the Release store when the last view dropped.
        if known.block.block.held.swap(true, Ordering::Acquire) {
            return Err(Violation::BlockHeldTwice);
        }
        known.last_generation = generation;
        Ok(Held {
            block: Arc::clone(&known.block),
            table,
            id,
            generation,
            len,
        })
    }
}
