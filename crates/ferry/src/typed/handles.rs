//! Channel halves (and in-place byte views) inside a typed message.
//!
//! A typed half inside a value travels as a handle, as ipc-channel's do:
//! while a typed send encodes a value, a thread-local table collects the
//! byte halves the value's typed halves turn into, and the message carries
//! each one's index into that table; the receiver's decode claims them by
//! index from the ends that came with the message. Outside a ferry typed
//! send or receive there is no table, and a half refuses to serialize.

use std::cell::RefCell;
use std::sync::Arc;

use crate::codec::EncodeError;
use crate::{End, SharedBytes};

/// What an encode collected.
#[derive(Default)]
pub(super) struct Outgoing {
    /// The byte halves, in handle order.
    pub(super) ends: Vec<End>,
    /// Work to run once the message has been sent (forwarding the values
    /// queued in-process for a receiver that is leaving).
    pub(super) after: Vec<Box<dyn FnOnce() + Send>>,
}

impl Outgoing {
    /// Runs the deferred work (after the message went, or failed to).
    pub(super) fn finish(self) {
        for action in self.after {
            action();
        }
    }
}

/// What a decode may claim.
struct Incoming {
    ends: Vec<Option<End>>,
    /// The whole message, for byte fields read in place.
    view: Option<Arc<SharedBytes>>,
}

thread_local! {
    static OUTGOING: RefCell<Vec<Outgoing>> = const { RefCell::new(Vec::new()) };
    static INCOMING: RefCell<Vec<Incoming>> = const { RefCell::new(Vec::new()) };
}

/// Pops the context it pushed, even if the encode or decode panicked.
struct Pop(fn());

impl Drop for Pop {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// Runs `encode` with a fresh table (encodes nest: forwarding a queue can
/// encode values inside another encode) and returns what it collected.
pub(super) fn encoding<R>(encode: impl FnOnce() -> R) -> (R, Outgoing) {
    OUTGOING.with(|o| o.borrow_mut().push(Outgoing::default()));
    let pop = Pop(|| {
        OUTGOING.with(|o| o.borrow_mut().pop());
    });
    let result = encode();
    let collected =
        OUTGOING.with(|o| std::mem::take(o.borrow_mut().last_mut().expect("pushed above")));
    drop(pop);
    (result, collected)
}

/// Whether the current encode's table can take one more end.
pub(super) fn room() -> Result<(), EncodeError> {
    OUTGOING.with(|o| match o.borrow().last() {
        Some(out) if out.ends.len() < crate::MAX_HANDLES => Ok(()),
        Some(_) => Err(EncodeError::Handle(format!(
            "more than {} channel halves in one message",
            crate::MAX_HANDLES
        ))),
        None => Err(EncodeError::HandleOutsideSend),
    })
}

/// Adds an end to the current encode's table (checked by [`room`] first)
/// and returns its index.
pub(super) fn push_end(end: End) -> u32 {
    OUTGOING.with(|o| {
        let mut o = o.borrow_mut();
        let out = o.last_mut().expect("checked by `room`");
        out.ends.push(end);
        // At most MAX_HANDLES (253), checked by `room`, so the index fits.
        (out.ends.len() - 1) as u32
    })
}

/// Runs `action` after the current message has been sent, or now (on a
/// thread of its own) if no send is encoding.
pub(super) fn after_send(action: Box<dyn FnOnce() + Send>) {
    let action = OUTGOING.with(|o| match o.borrow_mut().last_mut() {
        Some(out) => {
            out.after.push(action);
            None
        }
        None => Some(action),
    });
    if let Some(action) = action {
        action();
    }
}

/// Runs `decode` with `ends` (the ends the message carried) to claim, and
/// returns how many it left unclaimed (they are dropped).
pub(super) fn decoding<R>(
    ends: Vec<End>,
    view: Option<Arc<SharedBytes>>,
    decode: impl FnOnce() -> R,
) -> (R, usize) {
    INCOMING.with(|i| {
        i.borrow_mut().push(Incoming {
            ends: ends.into_iter().map(Some).collect(),
            view,
        })
    });
    let pop = Pop(|| {
        INCOMING.with(|i| i.borrow_mut().pop());
    });
    let result = decode();
    let left = INCOMING.with(|i| {
        i.borrow()
            .last()
            .map_or(0, |inc| inc.ends.iter().filter(|e| e.is_some()).count())
    });
    drop(pop);
    (result, left)
}

/// Claims end `index` of the message being decoded.
pub(super) fn claim(index: u32) -> Result<End, String> {
    INCOMING.with(|i| {
        let mut i = i.borrow_mut();
        let Some(incoming) = i.last_mut() else {
            return Err("a ferry channel half can only be decoded by a ferry typed receive".into());
        };
        let count = incoming.ends.len();
        match usize::try_from(index)
            .ok()
            .and_then(|k| incoming.ends.get_mut(k))
        {
            Some(slot) => slot
                .take()
                .ok_or_else(|| format!("handle {index} is claimed twice")),
            None => Err(format!(
                "handle {index} is past the {count} the message carried"
            )),
        }
    })
}

/// A byte field borrowed from the message being decoded, as a part of the
/// message's view (no copy), if there is one.
pub(super) fn view_part(bytes: &[u8]) -> Option<SharedBytes> {
    INCOMING.with(|i| {
        let i = i.borrow();
        let view = i.last()?.view.as_ref()?;
        SharedBytes::part_of(view, bytes)
    })
}
