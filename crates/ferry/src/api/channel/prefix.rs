//! A forwarded receiver's prefix: the messages its forwarder took out of
//! the ring so the receiver could go on.
//!
//! A receiver is forwarded at a ring position, the boundary: frames from
//! it on name handles on the new holder's link to the sender, frames
//! before it on the forwarder's (`Half::begin_forward_receiver`). The new
//! holder does not read the forwarder's link, and the forwarder may exit
//! once the receiver has gone, so frames below the boundary that name
//! descriptors, ends or a block cannot be left in the ring. The forwarder
//! receives every message below the boundary (under the receive lock, as
//! its own application would), and hands them on in a pipe of their own:
//!
//! 1. the messages are taken out of the ring, each whole, with what it
//!    carries (descriptors, ends adopted here, a block's bytes);
//! 2. a one-way pipe `P` is made, its ring large enough for them all;
//! 3. `Routed` for the receiver goes with 8 added to its `arg`, then `P`'s
//!    receiving half as a `PipeEnd` record under the same id: the new
//!    holder files the two together, and no message can claim one alone
//!    (`wire/route.rs`);
//! 4. the messages are sent into `P` (over the link `P`'s receiver went
//!    across: descriptors and ends as records, large ones out of line),
//!    and `P`'s sender is dropped.
//!
//! The new holder's receiver reads `P` to its end, then its ring (see
//! `clones.rs`): every message in the order it was sent. If the receiver
//! cannot go after the messages were taken out, they stay here, in
//! memory, and this receiver reads them first in the same way: nothing is
//! lost.

use std::sync::Arc;
use std::time::Instant;

use super::receiver::Delivery;
use super::{Arrived, Handle, PipeOptions, Receiver, Sender};
use crate::base::wire::region::MAX_CAPACITY;
use crate::transport::link::Link;

/// Messages taken out of a ring for a forwarded receiver, and the pipe
/// they go on in once all are taken.
#[derive(Debug, Default)]
pub(super) struct Prefix {
    pipe: Option<(Sender, Receiver)>,
    /// Each message's bytes and what it carried, in order.
    messages: Vec<(Vec<u8>, Vec<Handle>)>,
}

/// Messages kept in this process, read before a receiver's ring (a
/// forward that did not go after they were taken out).
pub(super) type Held = std::collections::VecDeque<(Vec<u8>, Vec<Handle>)>;

/// Bytes a message takes in a ring beyond its payload, at most: frame
/// headers of its pieces, its length, its handles' ids (generous: the
/// pipe is sized from it).
fn overhead(handles: usize) -> usize {
    256 + 8 * handles
}

impl Prefix {
    /// Takes the next whole message out of the ring, with what it
    /// carries, as `receive` gives it.
    pub(super) fn take(
        &mut self,
        receive: impl FnOnce(&mut Delivery<'_>) -> Result<(), super::error::RecvFault>,
    ) -> Result<(), super::error::RecvFault> {
        let (mut bytes, mut ends) = (Vec::new(), Vec::new());
        let mut delivery = Delivery {
            bytes: &mut bytes,
            ends: Some(&mut ends),
            refused: 0,
            block: None,
        };
        receive(&mut delivery)?;
        let handles = ends.into_iter().map(Arrived::into_end).collect();
        self.messages.push((bytes, handles));
        Ok(())
    }

    /// Adds messages held here (a prefix of the receiver's own, taken out
    /// before its ring's).
    pub(super) fn extend(&mut self, held: Held) {
        self.messages.extend(held);
    }

    /// Step 1, once every message is taken: the pipe `P`, its ring large
    /// enough for all of them written in it (never out of line), so
    /// sending them never waits, though nobody reads `P` before the
    /// message naming the receiver has gone, after them. `like`'s largest
    /// message is `P`'s. `OutOfMemory` when they need a ring past the
    /// largest.
    pub(super) fn make_pipe(&mut self, like: &Receiver) -> std::io::Result<()> {
        let need = self
            .messages
            .iter()
            .map(|(bytes, handles)| bytes.len().saturating_add(overhead(handles.len())))
            .fold(0usize, usize::saturating_add)
            .saturating_mul(2);
        let size = need
            .checked_next_power_of_two()
            .filter(|&size| size <= MAX_CAPACITY)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::OutOfMemory,
                    "the messages on their way to this receiver need a ring past the largest",
                )
            })?
            .max(like.ring_size());
        let (a, b) = PipeOptions::new().ring_size(size).pipe()?;
        let (tx, back_rx) = a.split();
        let (back_tx, rx) = b.split();
        drop((back_rx, back_tx));
        tx.set_max_message(like.max_message());
        tx.set_out_of_line(usize::MAX);
        rx.set_max_message(like.max_message());
        self.pipe = Some((tx, rx));
        Ok(())
    }

    /// Steps 3 (after `Routed`) and 4: `P`'s receiving half to the new
    /// holder under `id`, then the messages into `P`. A message whose ends
    /// cannot be sent on (an end's other side moving at that moment, or
    /// its holder gone) goes without them (they are dropped, as a peer's
    /// unclaimed ends are): the receiver has gone, and its messages go on.
    pub(super) fn send(
        self,
        dest: &Arc<Link>,
        id: u64,
        deadline: Option<Instant>,
    ) -> std::io::Result<()> {
        let Self { pipe, messages } = self;
        let Some((tx, rx)) = pipe else {
            return Err(std::io::Error::other("the prefix has no pipe"));
        };
        let end = Handle::Receiver(rx);
        end.send_region_as(dest, id, deadline)?;
        for (bytes, handles) in messages {
            // The ring has room for all of them: never a wait.
            if let Err(refused) = tx.send_with_until(&bytes, handles, deadline) {
                drop(refused.handles);
                tx.send_with_until(&bytes, Vec::new(), deadline)
                    .map_err(|e| std::io::Error::other(format!("{:?}", e.error)))?;
            }
        }
        Ok(())
    }

    /// Runs a forward of `on` (or of the whole end it is the receiving
    /// half of) with `prefix`, if it has one: `go` sends the receiving
    /// side's `Routed`, marked prefixed or not, and calls the function it
    /// is given with the id, which sends the prefix (step 3 on). If the
    /// forward does not go before that, the messages stay, read first by
    /// `on`.
    pub(super) fn forward_with(
        prefix: Option<Self>,
        on: &Receiver,
        dest: &Arc<Link>,
        deadline: Option<Instant>,
        go: impl FnOnce(bool, &mut dyn FnMut(u64) -> std::io::Result<()>) -> std::io::Result<u64>,
    ) -> std::io::Result<u64> {
        let prefixed = prefix.is_some();
        let mut prefix = prefix;
        let sent = go(prefixed, &mut |id| match prefix.take() {
            Some(prefix) => prefix.send(dest, id, deadline),
            None => Ok(()),
        });
        // Not sent (the receiver stays): its messages are read here first.
        if let Some(prefix) = prefix {
            prefix.keep(on);
        }
        sent
    }

    /// The receiver stays: its messages stay here, in memory, and `on`
    /// reads them first from now on.
    pub(super) fn keep(self, on: &Receiver) {
        on.set_held_prefix(self.messages.into());
    }
}
