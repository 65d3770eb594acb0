//! `ferry_message`: a received message (its bytes, read in place when it
//! came as a view, and the descriptors and pipe ends that came with it),
//! and sending one with descriptors and ends.

use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::Mutex;

use crate::pipe::{End, Wait, ferry_pipe};
use crate::status::{FERRY_INVALID_ARGUMENT, Failure, Result, send_failure, try_send_failure};

/// A received message: `ferry_message_data` gives its bytes, which stay
/// valid (and, for a view, in place in shared memory) until
/// `ferry_message_close`; its descriptors and pipe ends are taken one by
/// one (`ferry_message_take_fd`, `ferry_message_take_end`); close frees
/// what was not taken.
#[allow(non_camel_case_types)]
pub struct ferry_message {
    bytes: Bytes,
    fds: Mutex<Vec<Option<OwnedFd>>>,
    ends: Mutex<Vec<Option<End>>>,
}

enum Bytes {
    View(ferry::SharedBytes),
    Owned(Vec<u8>),
}

/// What a receive returned, before it is a `ferry_message`.
pub(crate) enum Arrived {
    View(ferry::SharedBytes),
    Whole(ferry::Message),
}

impl ferry_message {
    pub(crate) fn new(received: Arrived) -> Self {
        match received {
            Arrived::View(bytes) => Self {
                bytes: Bytes::View(bytes),
                fds: Mutex::new(Vec::new()),
                ends: Mutex::new(Vec::new()),
            },
            Arrived::Whole(message) => {
                let ferry::Message {
                    bytes,
                    pipes,
                    senders,
                    receivers,
                    fds,
                    ..
                } = message;
                let ends = (pipes.into_iter().map(End::Pipe))
                    .chain(senders.into_iter().map(End::Sender))
                    .chain(receivers.into_iter().map(End::Receiver))
                    .map(Some)
                    .collect();
                Self {
                    bytes: Bytes::Owned(bytes),
                    fds: Mutex::new(fds.into_iter().map(Some).collect()),
                    ends: Mutex::new(ends),
                }
            }
        }
    }

    pub(crate) fn data(&self) -> &[u8] {
        match &self.bytes {
            Bytes::View(v) => v,
            Bytes::Owned(v) => v,
        }
    }

    pub(crate) fn fd_count(&self) -> usize {
        self.fds.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub(crate) fn end_count(&self) -> usize {
        self.ends.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Descriptor `index`, now the caller's (close-on-exec).
    pub(crate) fn take_fd(&self, index: usize) -> Result<OwnedFd> {
        let mut fds = self.fds.lock().unwrap_or_else(|e| e.into_inner());
        take(&mut fds, index, "descriptor")
    }

    /// Pipe end `index`, now the caller's.
    pub(crate) fn take_end(&self, index: usize) -> Result<ferry_pipe> {
        let mut ends = self.ends.lock().unwrap_or_else(|e| e.into_inner());
        take(&mut ends, index, "pipe end").map(ferry_pipe::of)
    }
}

fn take<T>(items: &mut [Option<T>], index: usize, what: &str) -> Result<T> {
    let count = items.len();
    match items.get_mut(index) {
        None => Err(Failure::invalid(format!(
            "the message has {count} {what}s: there is no {what} {index}"
        ))),
        Some(slot) => slot
            .take()
            .ok_or_else(|| Failure::invalid(format!("{what} {index} was taken already"))),
    }
}

/// Duplicates the caller's descriptors (close-on-exec): the message sends
/// the copies, and the caller's stay its own.
pub(crate) fn duplicate(fds: &[BorrowedFd<'_>]) -> Result<Vec<OwnedFd>> {
    fds.iter()
        .map(|fd| {
            fd.try_clone_to_owned().map_err(|e| match e.raw_os_error() {
                Some(EBADF) => Failure::new(
                    FERRY_INVALID_ARGUMENT,
                    format!("descriptor {fd:?} is not open"),
                ),
                _ => Failure::io("duplicating a descriptor to send", &e),
            })
        })
        .collect()
}

/// `EBADF`: 9 on Linux (and the BSDs).
const EBADF: i32 = 9;

/// Sends `bytes` with `handles` (the ends first, `end_count` of them, then
/// descriptors) through `pipe`. On failure, the ends are handed back in
/// order (all of them, or none if the link failed part way: `None`).
pub(crate) fn send(
    pipe: &ferry_pipe,
    bytes: &[u8],
    handles: Vec<ferry::Handle>,
    end_count: usize,
    wait: Wait,
) -> std::result::Result<(), (Failure, Option<Vec<End>>)> {
    let tx = pipe.sender().map_err(|f| (f, None))?;
    let back = |handles: Vec<ferry::Handle>| {
        let ends: Vec<End> = handles
            .into_iter()
            .take(end_count)
            .filter_map(End::from_handle)
            .collect();
        (ends.len() == end_count).then_some(ends)
    };
    let result = match wait {
        Wait::Never => tx
            .try_send_with(bytes, handles)
            .map_err(|e| (try_send_failure(e.error), e.handles)),
        Wait::For(d) => tx
            .send_with_timeout(bytes, handles, d)
            .map_err(|e| (send_failure(e.error), e.handles)),
        Wait::Forever => tx
            .send_with(bytes, handles)
            .map_err(|e| (send_failure(e.error.into()), e.handles)),
    };
    result.map_err(|(failure, returned)| (failure, back(returned)))
}
