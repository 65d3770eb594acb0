//! Large messages out of line: the payload sits in a pool block of the
//! link, and the ring carries a 16-byte descriptor. The zero-copy API on
//! top of it is in `loan.rs`.

use std::time::{Duration, Instant};

use super::Sender;
use super::error::SendFault;
use super::sender::Tx;
use crate::base::wire::frame::{BlockRef, HANDLE_ID, Kind, Tag};
use crate::transport::link::Link;
use crate::transport::pool::block::{Block, class_for};

/// Messages of at least this many bytes, on a pipe to another process,
/// travel out of line in a pool block (see the crate docs for the
/// measurements behind it); smaller ones are copied through the ring.
pub const OUT_OF_LINE: usize = 64 * 1024;

/// How long a sender waits for one of its blocks to come back, with the
/// link's pool at its cap, before sending through the ring instead.
const PATIENCE: Duration = Duration::from_millis(2);

impl Sender {
    /// Copies `bytes` into a block and sends its descriptor; `Ok(false)` if
    /// the pool has no block to give (at its cap with every block out), for
    /// the caller to send through the ring instead.
    pub(super) fn send_out_of_line(
        &self,
        tx: &mut Tx,
        link: &Link,
        bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<bool, SendFault> {
        let Some((id, mut block)) = self.lend_block(link, bytes.len(), deadline)? else {
            return Ok(false);
        };
        crate::base::memcopy::copy_slice(&mut block.bytes_mut()[..bytes.len()], bytes);
        self.push_block(tx, link, id, block, bytes.len(), deadline)?;
        Ok(true)
    }

    /// A free block of at least `len` bytes from the link's pool, or `None`
    /// for the ring instead: when no block size holds `len` within the cap,
    /// or when the pool stays full (at its byte cap, or at the class's
    /// [limit](crate::transport::pool::per_link::per_class): 8 MiB of it, 4 to 64 blocks)
    /// with every block out for [`PATIENCE`] (a receiver holding
    /// views for long must not stall the sender). A block usually comes
    /// back within one message's time, so a stream waits briefly rather
    /// than mapping ever more blocks.
    pub(super) fn lend_block(
        &self,
        link: &Link,
        len: usize,
        deadline: Option<Instant>,
    ) -> Result<Option<(u32, Block)>, SendFault> {
        let Some(class) = class_for(len) else {
            return Ok(None);
        };
        let mut waited_since = None;
        loop {
            // The failure is looked at under the pool's lock, after a
            // failure seen there has given every block back: a peer that
            // died while this waited lends no block, and the send fails
            // rather than reach its ring.
            let lent = link.with_pool(|pool| match link.failure() {
                Some(failure) => Err(failure),
                None => Ok(pool.fits(class).then(|| pool.alloc(class, link))),
            });
            let lent = match lent {
                Ok(Err(failure)) => return Err(failure.into()),
                Ok(Ok(lent)) => lent.transpose(),
                Err(e) => Err(e),
            };
            match lent {
                Ok(None) => return Ok(None),
                Ok(Some(Some(lent))) => return Ok(Some(lent)),
                // The peer has not read its control socket (a new block
                // cannot be announced now), or this kernel cannot seal a
                // block against the receiver's writes: the ring carries it.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::TimedOut | std::io::ErrorKind::Unsupported
                    ) =>
                {
                    crate::transport::pool::reserve::blocks().count_ring_fallback();
                    return Ok(None);
                }
                Err(e) => return Err(self.core.half.io_error(e)),
                Ok(Some(None)) => {}
            }
            let now = Instant::now();
            let since = *waited_since.get_or_insert(now);
            if now - since >= PATIENCE {
                crate::transport::pool::reserve::blocks().count_ring_fallback();
                return Ok(None);
            }
            if deadline.is_some_and(|d| now >= d) {
                return Err(SendFault::Timeout);
            }
            // Give the CPU away between looks: a block comes back only
            // when the receiver has read a message, and on a shared CPU it
            // cannot while this spins (spinning 50 µs first was no faster
            // across CPUs and slower on one).
            crate::base::sys::yield_cpu();
        }
    }

    /// Puts a written block back in the pool as sent, and its descriptor
    /// into the ring; undoes the first if the second fails.
    pub(super) fn push_block(
        &self,
        tx: &mut Tx,
        link: &Link,
        id: u32,
        block: Block,
        len: usize,
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        self.push_block_naming(tx, link, (id, block), len, &[], deadline)
    }

    /// For [`Sender::send_with`]: a block holding `bytes`, copied in, if
    /// the message goes out of line (it is large enough and the link's pool
    /// has a block to give); `None` for the ring.
    pub(super) fn block_for(
        &self,
        link: &Link,
        bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Option<(u32, Block)>, SendFault> {
        if bytes.len() < self.out_of_line.get() {
            return Ok(None);
        }
        let Some((id, mut block)) = self.lend_block(link, bytes.len(), deadline)? else {
            return Ok(None);
        };
        crate::base::memcopy::copy_slice(&mut block.bytes_mut()[..bytes.len()], bytes);
        Ok(Some((id, block)))
    }

    /// [`Sender::push_block`] naming the ends in `id_bytes` (their records
    /// sent, room for the frame waited for) in the same frame.
    pub(super) fn push_block_naming(
        &self,
        tx: &mut Tx,
        link: &Link,
        (id, block): (u32, Block),
        len: usize,
        id_bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let generation = link
            .with_pool(|pool| pool.commit(id, block))
            .map_err(|e| self.core.half.io_error(e))?;
        let head = BlockRef {
            id,
            generation,
            len: len as u64,
        }
        .encode();
        let handles = (id_bytes.len() / HANDLE_ID) as u16;
        let tag = Tag {
            kind: Kind::Block,
            handles,
        };
        let result = self.push(tx, tag, &[&head, id_bytes], deadline);
        match result {
            Ok(()) => tx.count_handles_sent(handles),
            Err(_) => {
                let _ = link.with_pool(|pool| pool.cancel(id));
            }
        }
        result
    }
}
