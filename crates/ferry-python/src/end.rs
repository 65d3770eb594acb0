//! What a `Connection` holds: a whole pipe end or one half, and the gates
//! that keep a message of several parts whole when several Python threads
//! use one end.

use std::sync::{Condvar, Mutex};

use pyo3::Python;

/// A pipe end, or one of its halves.
#[derive(Debug)]
pub(crate) enum End {
    Pipe(ferry::Pipe),
    Sender(ferry::Sender),
    Receiver(ferry::Receiver),
}

impl End {
    pub(crate) fn sender(&self) -> Option<&ferry::Sender> {
        match self {
            Self::Pipe(pipe) => Some(pipe.sender()),
            Self::Sender(tx) => Some(tx),
            Self::Receiver(_) => None,
        }
    }

    pub(crate) fn receiver(&self) -> Option<&ferry::Receiver> {
        match self {
            Self::Pipe(pipe) => Some(pipe.receiver()),
            Self::Receiver(rx) => Some(rx),
            Self::Sender(_) => None,
        }
    }

    /// The end as a handle, to travel in a message.
    pub(crate) fn into_handle(self) -> ferry::Handle {
        match self {
            Self::Pipe(pipe) => pipe.into(),
            Self::Sender(tx) => tx.into(),
            Self::Receiver(rx) => rx.into(),
        }
    }

    /// The end a handle that arrived is, if it is one (not a descriptor).
    pub(crate) fn from_handle(handle: ferry::Handle) -> Option<Self> {
        match handle {
            ferry::Handle::Pipe(pipe) => Some(Self::Pipe(pipe)),
            ferry::Handle::Sender(tx) => Some(Self::Sender(tx)),
            ferry::Handle::Receiver(rx) => Some(Self::Receiver(rx)),
            _ => None,
        }
    }
}

/// One thread at a time through a direction of an end, so the parts of one
/// message (a pickle and its out-of-band buffers) go and come together.
/// Entered with the GIL released when another thread is inside.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    busy: Mutex<bool>,
    freed: Condvar,
}

impl Gate {
    pub(crate) fn enter(&self, py: Python<'_>) -> Entered<'_> {
        if !self.try_enter() {
            py.detach(|| {
                let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
                while *busy {
                    busy = self.freed.wait(busy).unwrap_or_else(|e| e.into_inner());
                }
                *busy = true;
            });
        }
        Entered(self)
    }

    fn try_enter(&self) -> bool {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        !std::mem::replace(&mut *busy, true)
    }
}

/// Inside a [`Gate`] until dropped.
pub(crate) struct Entered<'a>(&'a Gate);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.freed.notify_one();
    }
}
