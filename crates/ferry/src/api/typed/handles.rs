//! Channel halves (and in-place byte views) inside a typed message.
//!
//! A typed half inside a value travels as a handle, as ipc-channel's do:
//! while a typed send encodes a value, a thread-local table collects the
//! byte halves the value's typed halves turn into, and the message carries
//! each one's index into that table; the receiver's decode claims them by
//! index from the ends that came with the message. Outside a ferry typed
//! send or receive there is no table, and a half refuses to serialize.

use std::cell::{Cell, RefCell};
use std::os::fd::AsFd;
use std::sync::Arc;

use crate::api::channel::Arrived;
use crate::api::channel::{Handle, SharedBytes};
use crate::api::codec::EncodeError;
use crate::transport::link::PendingFd;

/// Puts a byte half back into the typed half it was taken from, when the
/// message that was to carry it was not sent.
pub(super) type Restore = Box<dyn FnOnce(Handle) + Send>;

/// What an encode collected.
#[derive(Default)]
pub(super) struct Outgoing {
    /// The byte halves, in handle order.
    pub(super) ends: Vec<Handle>,
    /// For each of `ends`, in the same order, what puts it back into its
    /// typed half if the message is not sent (`None`: a duplicated
    /// descriptor, which the value still holds).
    restore: Vec<Option<Restore>>,
    /// For each handle, whether the current pass over the value has named
    /// it: a half met twice in one pass is refused (the receiver could
    /// claim it only once).
    named: Vec<bool>,
    /// Work to run once the message has been sent (forwarding the values
    /// queued in-process for a receiver that is leaving).
    pub(super) after: Vec<Box<dyn FnOnce() + Send>>,
    /// The handle index of each descriptor the value held, in the order
    /// its serialization met them, so a second pass over the same value
    /// ([`continuing`]) names the same ones without taking them again.
    fd_indices: Vec<u32>,
    /// How many of `fd_indices` the current pass has met.
    fd_cursor: usize,
}

impl Outgoing {
    /// Runs the deferred work (after the message went, or failed to).
    pub(super) fn finish(self) {
        for action in self.after {
            action();
        }
    }

    /// Takes back the ends a failed send handed back (all of them, in
    /// order, unless the send failed part way).
    pub(super) fn hand_back(&mut self, ends: Vec<Handle>) {
        if self.ends.is_empty() {
            self.ends = ends;
        }
    }

    /// The message was not sent: puts each half back into the typed half it
    /// came from, so the value handed back to the caller is whole. If some
    /// ends are missing (a send that failed part way), they cannot be
    /// matched to their halves, and none is put back.
    pub(super) fn restore(&mut self) {
        let ends = std::mem::take(&mut self.ends);
        let restore = std::mem::take(&mut self.restore);
        if ends.len() != restore.len() {
            return;
        }
        for (end, restore) in ends.into_iter().zip(restore) {
            if let Some(restore) = restore {
                restore(end);
            }
        }
    }
}

/// What a decode may claim.
struct Incoming {
    /// Descriptors left unclaimed go to the closer when this drops.
    ends: Vec<Option<Arrived>>,
    /// The descriptors claimed: the decode got a duplicate of each, so a
    /// value dropped half-decoded (a later field refused) never closes the
    /// last descriptor of a file on this thread; these go to the closer.
    kept: Vec<PendingFd>,
    /// The whole message, for byte fields read in place.
    view: Option<Arc<SharedBytes>>,
}

// Encodes and decodes nest (forwarding a queue encodes values inside
// another encode), so each table is tagged with the depth it belongs to.
// Most messages carry no halves: then no table is made at all, and
// entering or leaving an encode or decode is one counter each.
thread_local! {
    static ENCODING: Cell<u32> = const { Cell::new(0) };
    static DECODING: Cell<u32> = const { Cell::new(0) };
    /// How many tables exist in `OUTGOING` and `INCOMING` together: while
    /// none does, leaving an encode or decode looks at neither.
    static TABLES: Cell<u32> = const { Cell::new(0) };
    static OUTGOING: RefCell<Vec<(u32, Outgoing)>> = const { RefCell::new(Vec::new()) };
    static INCOMING: RefCell<Vec<(u32, Incoming)>> = const { RefCell::new(Vec::new()) };
}

/// Leaves an encode or decode (even one that panicked): drops the depth
/// and any table left at it.
struct Leave {
    depth: &'static std::thread::LocalKey<Cell<u32>>,
    tables: fn(u32),
}

impl Drop for Leave {
    fn drop(&mut self) {
        let depth = self.depth.with(|d| {
            let depth = d.get();
            d.set(depth - 1);
            depth
        });
        (self.tables)(depth);
    }
}

fn tables() -> u32 {
    TABLES.with(Cell::get)
}

fn count_tables(change: i32) {
    TABLES.with(|t| t.set(t.get().wrapping_add_signed(change)));
}

fn drop_outgoing_at(depth: u32) {
    if tables() == 0 {
        return;
    }
    OUTGOING.with(|o| {
        let mut o = o.borrow_mut();
        if o.last().is_some_and(|(d, _)| *d >= depth) {
            o.pop();
            count_tables(-1);
        }
    });
}

fn drop_incoming_at(depth: u32) {
    if tables() == 0 {
        return;
    }
    INCOMING.with(|i| {
        let mut i = i.borrow_mut();
        if i.last().is_some_and(|(d, _)| *d >= depth) {
            i.pop();
            count_tables(-1);
        }
    });
}

/// Enters an encode: its depth, and what leaves it (even on a panic).
fn enter_encode() -> (u32, Leave) {
    let depth = ENCODING.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    let leave = Leave {
        depth: &ENCODING,
        tables: drop_outgoing_at,
    };
    (depth, leave)
}

/// Runs `encode` with a table of its own and returns what it collected.
pub(super) fn encoding<R>(encode: impl FnOnce() -> R) -> (R, Outgoing) {
    let (depth, leave) = enter_encode();
    let result = encode();
    let collected = match tables() {
        0 => None,
        _ => take_outgoing_at(depth),
    };
    drop(leave);
    (result, collected.unwrap_or_default())
}

/// Takes the encode table of depth `depth`, if it is the newest.
fn take_outgoing_at(depth: u32) -> Option<Outgoing> {
    OUTGOING.with(|o| {
        let mut o = o.borrow_mut();
        match o.last() {
            Some((d, _)) if *d == depth => {
                count_tables(-1);
                o.pop().map(|(_, out)| out)
            }
            _ => None,
        }
    })
}

/// Whether the current encode's table can take one more end.
pub(super) fn room() -> Result<(), EncodeError> {
    let depth = ENCODING.with(Cell::get);
    if depth == 0 {
        return Err(EncodeError::HandleOutsideSend);
    }
    if tables() == 0 {
        return Ok(());
    }
    OUTGOING.with(|o| match o.borrow().last() {
        Some((d, out)) if *d == depth && out.ends.len() >= crate::api::channel::MAX_HANDLES => {
            Err(EncodeError::Handle(format!(
                "more than {} handles (channel halves and descriptors) in one message",
                crate::api::channel::MAX_HANDLES
            )))
        }
        _ => Ok(()),
    })
}

/// The current encode's table (made on first use), to change.
fn with_outgoing<R>(f: impl FnOnce(&mut Outgoing) -> R) -> Option<R> {
    let depth = ENCODING.with(Cell::get);
    if depth == 0 {
        return None;
    }
    OUTGOING.with(|o| {
        let mut o = o.borrow_mut();
        if o.last().is_none_or(|(d, _)| *d != depth) {
            o.push((depth, Outgoing::default()));
            count_tables(1);
        }
        o.last_mut().map(|(_, out)| f(out))
    })
}

/// Whether the current encode has taken any channel half.
pub(super) fn has_ends() -> bool {
    if tables() == 0 {
        return false;
    }
    let depth = ENCODING.with(Cell::get);
    OUTGOING.with(|o| {
        o.borrow()
            .last()
            .is_some_and(|(d, out)| *d == depth && !out.ends.is_empty())
    })
}

/// Adds an end to the current encode's table (checked by [`room`] first)
/// and returns its index; `restore` puts it back if the message is not
/// sent.
pub(super) fn push_end(end: Handle, restore: Option<Restore>) -> u32 {
    with_outgoing(|out| {
        out.ends.push(end);
        out.restore.push(restore);
        out.named.push(true);
        // At most MAX_HANDLES (253), checked by `room`, so the index fits.
        (out.ends.len() - 1) as u32
    })
    .expect("checked by `room`")
}

/// Runs a second encode of a value whose first encode collected `out`,
/// under that same table: channel halves already taken keep their indices
/// (they remember them), and descriptors, met in the same order, are named
/// by the indices they got the first time instead of being taken again.
pub(super) fn continuing<R>(mut out: Outgoing, encode: impl FnOnce() -> R) -> (R, Outgoing) {
    out.fd_cursor = 0;
    out.named.fill(false);
    let (depth, leave) = enter_encode();
    OUTGOING.with(|o| o.borrow_mut().push((depth, out)));
    count_tables(1);
    let result = encode();
    let out = take_outgoing_at(depth);
    drop(leave);
    (result, out.unwrap_or_default())
}

/// A half that the current encode already took, as handle `index`, is met
/// again: fine once per pass (a second pass over the value names it
/// again), refused if this pass already named it (the receiver could
/// claim it only once), or if it was taken by another message.
pub(super) fn name_again(index: u32) -> Result<(), String> {
    let named = with_outgoing(|out| {
        let slot = usize::try_from(index)
            .ok()
            .and_then(|k| out.named.get_mut(k))?;
        Some(std::mem::replace(slot, true))
    })
    .flatten();
    match named {
        Some(false) => Ok(()),
        Some(true) => Err(format!(
            "this channel half appears more than once in the value (as handle {index}); \
             a half can travel only once per message"
        )),
        None => Err("this channel half has already moved".into()),
    }
}

/// The handle index of the next descriptor the current encode meets: on a
/// first pass `take` makes the end (a duplicate of the descriptor, checked
/// by [`room`] first), on a [`continuing`] pass the index it got then.
pub(super) fn push_fd(
    take: impl FnOnce() -> Result<Handle, EncodeError>,
) -> Result<u32, EncodeError> {
    let again = with_outgoing(|out| {
        let index = out.fd_indices.get(out.fd_cursor).copied();
        out.fd_cursor += usize::from(index.is_some());
        index
    })
    .flatten();
    if let Some(index) = again {
        return Ok(index);
    }
    room()?;
    let index = push_end(take()?, None);
    with_outgoing(|out| {
        out.fd_indices.push(index);
        out.fd_cursor += 1;
    });
    Ok(index)
}

/// Runs `action` after the current message has been sent, or now if no
/// send is encoding.
pub(super) fn after_send(action: Box<dyn FnOnce() + Send>) {
    let mut action = Some(action);
    with_outgoing(|out| out.after.extend(action.take()));
    if let Some(action) = action {
        action();
    }
}

/// Runs `decode` with `ends` (the ends the message carried) to claim, and
/// returns how many it left unclaimed (they are dropped).
pub(super) fn decoding<R>(
    ends: Vec<Arrived>,
    view: Option<Arc<SharedBytes>>,
    decode: impl FnOnce() -> R,
) -> (R, usize) {
    let depth = DECODING.with(|d| {
        d.set(d.get() + 1);
        d.get()
    });
    let leave = Leave {
        depth: &DECODING,
        tables: drop_incoming_at,
    };
    let table = !ends.is_empty() || view.is_some();
    if table {
        count_tables(1);
        INCOMING.with(|i| {
            i.borrow_mut().push((
                depth,
                Incoming {
                    ends: ends.into_iter().map(Some).collect(),
                    kept: Vec::new(),
                    view,
                },
            ))
        });
    }
    let result = decode();
    let left = match table {
        true => INCOMING.with(|i| match i.borrow().last() {
            Some((d, inc)) if *d == depth => inc.ends.iter().filter(|e| e.is_some()).count(),
            _ => 0,
        }),
        false => 0,
    };
    drop(leave);
    (result, left)
}

/// Claims end `index` of the message being decoded.
pub(super) fn claim(index: u32) -> Result<Handle, String> {
    let depth = DECODING.with(Cell::get);
    if depth == 0 {
        return Err("a ferry channel half can only be decoded by a ferry typed receive".into());
    }
    INCOMING.with(|i| {
        let mut i = i.borrow_mut();
        let Some((_, incoming)) = i.last_mut().filter(|(d, _)| *d == depth) else {
            return Err(format!("handle {index} is past the 0 the message carried"));
        };
        let count = incoming.ends.len();
        let slot = usize::try_from(index)
            .ok()
            .and_then(|k| incoming.ends.get_mut(k))
            .ok_or_else(|| format!("handle {index} is past the {count} the message carried"))?;
        match slot.take() {
            None => Err(format!("handle {index} is claimed twice")),
            Some(Arrived::Handle(end)) => Ok(end),
            Some(Arrived::Fd(fd)) => {
                let copy = crate::base::sys::duplicate(fd.as_fd()).map_err(|e| {
                    format!("handle {index}: this process could not take the descriptor: {e}")
                });
                incoming.kept.push(fd);
                Ok(Handle::Fd(copy?))
            }
        }
    })
}

/// A byte field borrowed from the message being decoded, as a part of the
/// message's view (no copy), if there is one.
pub(super) fn view_part(bytes: &[u8]) -> Option<SharedBytes> {
    if tables() == 0 {
        return None;
    }
    let depth = DECODING.with(Cell::get);
    INCOMING.with(|i| match i.borrow().last() {
        Some((d, inc)) if *d == depth => SharedBytes::part_of(inc.view.as_ref()?, bytes),
        _ => None,
    })
}
