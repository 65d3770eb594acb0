//! Peer death pushed, not polled: one thread per process, `ferry-watch`,
//! sleeps in the kernel on every link's control socket and peer process
//! handle at once and is woken only when a peer's end hangs up or its
//! process exits (crashed or was killed too; the handle tells even when the
//! peer made this process hold its end of the socket, see [`super`]). It
//! then marks the link down and wakes every thread of this
//! process asleep on the link's rings, which find the link down and return
//! `Disconnected` (after taking what the peer committed). Waiting threads
//! therefore sleep without a timeout, and an idle process makes no periodic
//! wakeups, however many pipes it holds.
//!
//! Where the watch cannot be had (no thread or no epoll descriptor to be
//! made, or an OS without a backend for it), links are not watched and
//! their waiters fall back to asking the kernel every few milliseconds, as
//! they did before the watcher existed.

use std::collections::HashMap;
use std::os::fd::AsFd;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use super::Link;
use crate::base::sync::{AtomicU64, Ordering};
use crate::base::sys::{Interest, Poller, Process};

/// The process's watcher: the kernel's watch and the links it stands for.
#[derive(Debug)]
struct Watcher {
    poller: Poller,
    links: Mutex<HashMap<u64, Weak<Link>>>,
    next_key: AtomicU64,
}

/// The watcher, started on first use; `None` where it could not be.
fn watcher() -> Option<&'static Watcher> {
    static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();
    WATCHER
        .get_or_init(|| {
            let watcher = Watcher {
                poller: Poller::new().ok()?,
                links: Mutex::new(HashMap::new()),
                next_key: AtomicU64::new(1),
            };
            crate::base::sys::spawn_quiet("ferry-watch", None, run).ok()?;
            Some(watcher)
        })
        .as_ref()
}

/// Watches `link`'s socket for the peer's hang-up; returns the key to
/// [`unwatch`] it with, or `None` if this process has no watcher.
pub(super) fn watch(link: &Arc<Link>) -> Option<u64> {
    let watcher = watcher()?;
    // Relaxed: keys need only be unique.
    let key = watcher.next_key.fetch_add(1, Ordering::Relaxed);
    let mut links = watcher.links.lock().unwrap_or_else(|e| e.into_inner());
    links.insert(key, Arc::downgrade(link));
    if (watcher.poller)
        .add_or_take_over(link.socket.as_fd(), key, Interest::HangUp)
        .is_err()
    {
        links.remove(&key);
        return None;
    }
    Some(key)
}

/// Watches the peer process of the link watched under `key` too: its exit
/// is reported as the socket's hang-up is.
pub(super) fn watch_process(key: u64, process: &Process) -> std::io::Result<()> {
    match watcher() {
        Some(watcher) => (watcher.poller).add_or_take_over(process.as_fd(), key, Interest::Exited),
        None => Ok(()),
    }
}

/// Stops watching a link's socket and peer process, before they are
/// closed. Only the key goes: the kernel drops a descriptor's watch when
/// its file is closed (the link's pidfd at once, its socket once emptied
/// and closed), and an event that comes for a key no longer known is
/// ignored, so the two `epoll_ctl` calls a removal would cost every
/// connection are spared.
pub(super) fn unwatch(key: u64) {
    if let Some(watcher) = watcher() {
        let mut links = watcher.links.lock().unwrap_or_else(|e| e.into_inner());
        links.remove(&key);
    }
}

/// The watcher thread: waits for hang-ups and exits and hands each to its
/// link.
fn run() {
    // The thread starts inside `get_or_init`: this call waits for it to
    // finish, and finds the watcher made.
    let Some(watcher) = watcher() else { return };
    let mut keys = Vec::new();
    loop {
        keys.clear();
        if watcher.poller.wait(&mut keys, None).is_err() {
            // Nothing recoverable happens to an epoll descriptor we own;
            // if it does, waiters still see hang-ups by asking themselves.
            return;
        }
        for key in &keys {
            let link = {
                let links = watcher.links.lock().unwrap_or_else(|e| e.into_inner());
                links.get(key).and_then(Weak::upgrade)
            };
            if let Some(link) = link {
                link.hung_up();
            }
        }
    }
}
