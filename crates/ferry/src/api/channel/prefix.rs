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
use std::time::{Duration, Instant};

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
    /// Rings of clones the receiver read (attached before the move, or by
    /// `Attach` frames below the boundary): sent after the messages, in
    /// `Attach` frames, and read by the new holder once the prefix ends.
    rings: Vec<Receiver>,
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
        let (a, b) = PipeOptions::new().ring_size(self.ring_for(like)?).pipe()?;
        let (tx, back_rx) = a.split();
        let (back_tx, rx) = b.split();
        drop((back_rx, back_tx));
        tx.set_max_message(like.max_message());
        tx.set_out_of_line(usize::MAX);
        rx.set_max_message(like.max_message());
        rx.set_bytes_only(like.bytes_only());
        self.pipe = Some((tx, rx));
        Ok(())
    }

    /// The ring size for a pipe that holds all of its messages written in
    /// it twice over (at least `like`'s ring); `OutOfMemory` past the
    /// largest ring.
    fn ring_for(&self, like: &Receiver) -> std::io::Result<usize> {
        let need = self
            .messages
            .iter()
            .map(|(bytes, handles)| bytes.len().saturating_add(overhead(handles.len())))
            .fold(0usize, usize::saturating_add)
            .saturating_add(self.rings.len().saturating_mul(overhead(1)))
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
        Ok(size)
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
        let Self {
            pipe,
            messages,
            rings,
        } = self;
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
        super::clones::attach_all(&tx, rings, deadline);
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
        on.put_back_rings(self.rings);
    }

    /// Takes the rings `on` reads besides its own, to go after the
    /// messages.
    pub(super) fn take_rings(&mut self, on: &Receiver) {
        self.add_rings(on.take_rings());
    }

    /// Adds rings to go after the messages.
    pub(super) fn add_rings(&mut self, mut rings: Vec<Receiver>) {
        self.rings.append(&mut rings);
    }
}

/// An end whose other side's holder has gone (its link hung up), sent on
/// all the same. Its ring cannot be handed over, since no process is left
/// to be told where it went; so the ring stays here and what it still
/// holds goes on instead, in a fresh end made here:
///
/// - a receiver: every message it still holds is taken out, whole, with
///   what it carries (as for a prefix), and a fresh one-way pipe's
///   receiver goes in its place; once it has gone, the messages are sent
///   into that pipe and its sender is dropped. The new holder receives
///   them, in order, then `Disconnected`: what this holder would have.
/// - a whole end: the same, over a fresh two-way pipe, whose other end
///   is dropped (its sends say `Disconnected`, as this end's would).
/// - a sender: a fresh pipe's sender whose receiver is dropped.
///
/// If the message does not go, the messages taken out stay here, read
/// first by the end, which is handed back: nothing is lost.
pub(super) struct Orphan {
    /// The end it stands for (dropped once the messages are on their way).
    end: Option<Handle>,
    /// The fresh pipe's sender, and the messages for it.
    feed: Option<Sender>,
    messages: Prefix,
}

/// How long taking out an orphan's messages may take: its writer is gone,
/// so every frame is there already (a writer that hung up its socket and
/// goes on writing is stopped by this and by [`MOST_TAKEN`]).
const TAKE_FOR: Duration = Duration::from_secs(1);

/// Most bytes taken out of an orphan (the fresh pipe's largest ring holds
/// them twice over).
const MOST_TAKEN: usize = MAX_CAPACITY / 2;

impl Orphan {
    /// The fresh end to send in `end`'s place, and what is owed to it
    /// once it has gone ([`Orphan::deliver`]). On failure `end` is as it
    /// was (messages taken out are held by it, read first).
    pub(super) fn relay(
        end: &Handle,
        deadline: Option<Instant>,
    ) -> std::io::Result<(Handle, Self)> {
        let mut messages = Prefix::default();
        let rx = match end {
            Handle::Receiver(rx) => Some(rx),
            Handle::Pipe(pipe) => Some(pipe.receiver()),
            Handle::Sender(_) => None,
            Handle::Fd(_) => return Err(std::io::Error::other("a descriptor has no other side")),
        };
        let size = match rx {
            Some(rx) => {
                let ring =
                    take_all(rx, &mut messages, deadline).and_then(|()| messages.ring_for(rx));
                match ring {
                    Ok(size) => size,
                    Err(e) => {
                        messages.keep(rx);
                        return Err(e);
                    }
                }
            }
            None => 4096,
        };
        let made = PipeOptions::new().ring_size(size).pipe();
        let (a, b) = match made {
            Ok(pipe) => pipe,
            Err(e) => {
                if let Some(rx) = rx {
                    messages.keep(rx);
                }
                return Err(e);
            }
        };
        let (fresh, feed) = match end {
            Handle::Receiver(rx) => {
                let (feed, back) = a.split();
                let (_, fresh) = b.split();
                drop(back);
                fresh.set_max_message(rx.max_message());
                fresh.set_bytes_only(rx.bytes_only());
                (Handle::Receiver(fresh), Some(feed))
            }
            Handle::Pipe(pipe) => {
                let (feed, back) = b.split();
                drop(back);
                a.sender().set_max_message(pipe.sender().max_message());
                a.receiver().set_max_message(pipe.receiver().max_message());
                a.receiver().set_bytes_only(pipe.receiver().bytes_only());
                (Handle::Pipe(a), Some(feed))
            }
            _ => {
                let (fresh, _) = a.split();
                drop(b);
                if let Handle::Sender(sender) = end {
                    fresh.set_max_message(sender.max_message());
                }
                (Handle::Sender(fresh), None)
            }
        };
        if let Some(feed) = &feed {
            feed.set_max_message(usize::MAX);
            feed.set_out_of_line(usize::MAX);
        }
        let orphan = Self {
            end: None,
            feed,
            messages,
        };
        Ok((fresh, orphan))
    }

    /// The end this stands for, kept until the messages have gone (or
    /// handed back with them).
    pub(super) fn with_end(mut self, end: Handle) -> Self {
        self.end = Some(end);
        self
    }

    /// The fresh end could not go: its messages go back to `end`.
    pub(super) fn keep_on(self, end: &Handle) {
        let rx = match end {
            Handle::Receiver(rx) => rx,
            Handle::Pipe(pipe) => pipe.receiver(),
            _ => return,
        };
        self.messages.keep(rx);
    }

    /// The message naming the fresh ends did not go: each end as it was,
    /// its messages held by it, to hand back.
    pub(super) fn take_back(orphans: Vec<Self>) -> Vec<Handle> {
        let mut ends = Vec::with_capacity(orphans.len());
        for mut orphan in orphans {
            if let Some(end) = orphan.end.take() {
                orphan.keep_on(&end);
                ends.push(end);
            }
        }
        ends
    }

    /// The fresh end has gone: its messages go after it, into its pipe,
    /// which then ends. The ring was sized for all of them: no wait.
    pub(super) fn deliver(self, deadline: Option<Instant>) {
        let Self {
            end,
            feed,
            messages,
        } = self;
        drop(end);
        let Some(feed) = feed else {
            return;
        };
        for (bytes, handles) in messages.messages {
            // An end that cannot go on (its other side moving at this
            // moment) is dropped, its message goes without it: as for a
            // prefix.
            if let Err(refused) = feed.send_with_until(&bytes, handles, deadline) {
                drop(refused.handles);
                if feed.send_with_until(&bytes, Vec::new(), deadline).is_err() {
                    return;
                }
            }
        }
    }
}

/// Takes every message `rx` still holds out into `into`, until its end.
/// Takes no longer than the caller's `deadline`, nor than [`TAKE_FOR`].
fn take_all(rx: &Receiver, into: &mut Prefix, deadline: Option<Instant>) -> std::io::Result<()> {
    let bound = Instant::now() + TAKE_FOR;
    let until = deadline.map_or(bound, |d| d.min(bound));
    let mut taken = 0usize;
    loop {
        match into.take(|out| rx.recv_message(out, Some(until))) {
            Ok(()) => {}
            Err(super::error::RecvFault::Disconnected) => return Ok(()),
            Err(fault) => {
                return Err(std::io::Error::other(format!(
                    "taking out the messages of an end whose other side has gone: {fault:?}"
                )));
            }
        }
        let last = into.messages.last().map_or(0, |(bytes, _)| bytes.len());
        taken = taken.saturating_add(last);
        if taken > MOST_TAKEN {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "an end whose other side has gone holds more than its largest ring",
            ));
        }
    }
}
