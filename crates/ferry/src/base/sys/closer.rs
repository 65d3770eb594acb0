//! Closing what a peer sent, off the caller's thread.
//!
//! `close(2)` of the last descriptor of an open file runs the file's
//! release, and some releases wait: a TCP socket with `SO_LINGER` set and
//! data unsent waits up to its linger time, a file of a FUSE server waits
//! for the server's answer, and a socket whose queue holds descriptors in
//! flight releases each of those in turn (so a doorbell socket can carry a
//! lingering one inside it). A peer chooses all of that. So no thread of
//! the application ever closes a descriptor a peer sent: each is a
//! [`PeerFd`], whose drop hands it (with whatever must outlive the close,
//! such as the charge it holds against a budget) to this process's closer.
//!
//! The closer is a thread, `ferry-close`, started on first use and asleep
//! while there is nothing to close. A hand-over that finds more waiting in
//! the queue than idle closer threads starts one more, up to
//! [`MOST_THREADS`], which then stays,
//! asleep when idle: so a close that waits (for seconds, or for ever)
//! holds back no other while fewer than [`MOST_THREADS`] wait at once,
//! and no thread has to watch the clock to notice a stuck one. (Closes
//! that do not wait take microseconds, so the threads beyond the first
//! start only when closes come in bursts or one is stuck.) What waits in
//! the queue keeps its charges until it is closed, so a peer sending
//! descriptors that never finish closing uses up only its own share of
//! the budget they count against.
//!
//! If no thread can be started, what is queued stays queued (with its
//! charges) until a later hand-over starts one.

use std::collections::VecDeque;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};

/// Most closer threads at once.
pub(crate) const MOST_THREADS: usize = 4;

/// A closer thread's stack: it only drops what it is handed.
const STACK: usize = 128 << 10;

/// Anything whose drop may close a peer's descriptor.
type Item = Box<dyn Send>;

/// The queue and the threads working on it.
#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    /// Threads started and not ended.
    threads: usize,
    /// Threads asleep on the queue.
    idle: usize,
}

#[derive(Default)]
struct Closer {
    state: Mutex<State>,
    ready: Condvar,
}

fn closer() -> &'static Closer {
    static CLOSER: OnceLock<Closer> = OnceLock::new();
    CLOSER.get_or_init(Closer::default)
}

impl Closer {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drops `item` on a closer thread, never on this one: for a descriptor a
/// peer sent, or a value holding one, together with whatever must be
/// dropped after it (the value's fields drop in their declared order).
pub(crate) fn close_later<T: Send + 'static>(item: T) {
    let closer = closer();
    let mut state = closer.lock();
    state.queue.push_back(Box::new(item));
    if state.idle > 0 {
        closer.ready.notify_one();
    }
    // Idle threads count until they wake, so one may already be called for
    // an earlier item: compare what waits with who will take it.
    if state.queue.len() > state.idle && state.threads < MOST_THREADS {
        start(&mut state);
    }
}

/// Starts one more closer thread (under the lock).
fn start(state: &mut State) {
    let spawned = super::spawn_quiet("ferry-close", Some(STACK), run);
    if spawned.is_ok() {
        state.threads += 1;
    }
}

/// A closer thread: drops what is queued, one item at a time, forever.
fn run() {
    let closer = closer();
    let mut state = closer.lock();
    loop {
        let Some(item) = state.queue.pop_front() else {
            state.idle += 1;
            state = closer.ready.wait(state).unwrap_or_else(|e| e.into_inner());
            state.idle -= 1;
            continue;
        };
        drop(state);
        drop(item);
        state = closer.lock();
    }
}

/// A descriptor a peer sent, and `H`, held until it is closed (a charge
/// against a budget, say). Dropping it closes the descriptor on a closer
/// thread (see the module comment); [`PeerFd::into_owned`] takes it out
/// for a holder that will close it itself (the application, or code that
/// has checked it is of a kind whose close cannot wait).
#[derive(Debug)]
pub(crate) struct PeerFd<H: Send + 'static = ()> {
    /// `None` only once taken, in `into_owned` or `drop`.
    held: Option<(OwnedFd, H)>,
}

impl PeerFd {
    /// A descriptor just received from a peer.
    pub(crate) fn new(fd: OwnedFd) -> Self {
        Self {
            held: Some((fd, ())),
        }
    }
}

/// Hands descriptors just received from a peer to the closer.
pub(crate) fn close_all_later(fds: Vec<OwnedFd>) {
    if !fds.is_empty() {
        close_later(fds);
    }
}

impl<H: Send + 'static> PeerFd<H> {
    /// The same descriptor, now also holding `hold` until it is closed.
    pub(crate) fn holding<H2: Send + 'static>(mut self, hold: H2) -> PeerFd<H2> {
        let (fd, old) = self.take();
        drop(old);
        PeerFd {
            held: Some((fd, hold)),
        }
    }

    /// The descriptor, to be closed by whoever takes it; what it held is
    /// dropped now.
    pub(crate) fn into_owned(mut self) -> OwnedFd {
        self.take().0
    }

    fn take(&mut self) -> (OwnedFd, H) {
        self.held
            .take()
            .expect("a PeerFd holds its descriptor until it is taken or dropped")
    }
}

impl<H: Send + 'static> AsFd for PeerFd<H> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match &self.held {
            Some((fd, _)) => fd.as_fd(),
            None => unreachable!("a PeerFd holds its descriptor until it is taken or dropped"),
        }
    }
}

impl<H: Send + 'static> Drop for PeerFd<H> {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            // The tuple drops the descriptor first, then what it held.
            close_later(held);
        }
    }
}

/// A value that may hold descriptors a peer sent (a socket whose queue
/// holds the peer's records, say), dropped on a closer thread.
#[derive(Debug)]
pub(crate) struct OffThread<T: Emptied>(Option<T>);

/// A value an [`OffThread`] holds, which can be emptied of what a peer
/// put in it (a socket's queued records) and then closed on any thread.
pub(crate) trait Emptied: Send + 'static {
    /// Takes out the peer's descriptors it holds; `true` if nothing else of
    /// the peer's is left in it, so dropping it cannot wait.
    fn empty_out(&self) -> (Vec<OwnedFd>, bool);
}

impl<T: Emptied> OffThread<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T) -> Self {
        Self(Some(value))
    }

    /// The value, to be dropped by whoever takes it.
    pub(crate) fn into_inner(mut self) -> T {
        self.0
            .take()
            .expect("an OffThread holds its value until it is taken or dropped")
    }
}

impl<T: Emptied> std::ops::Deref for OffThread<T> {
    type Target = T;
    fn deref(&self) -> &T {
        match &self.0 {
            Some(value) => value,
            None => unreachable!("an OffThread holds its value until it is taken or dropped"),
        }
    }
}

impl<T: Emptied> Drop for OffThread<T> {
    /// Empties the value here (its peer's descriptors go to the closer),
    /// and drops it here once that leaves nothing of the peer's in it; a
    /// value that cannot be emptied goes to the closer whole. A closer
    /// thread woken for every link that ends costs a connect-and-hang-up
    /// loop a third of its time.
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            let (fds, empty) = value.empty_out();
            close_all_later(fds);
            match empty {
                true => drop(value),
                false => close_later(value),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Stands for a descriptor whose close waits: its drop waits for a
    /// word on its channel (or for the sender to go).
    struct Stuck(mpsc::Receiver<()>);

    impl Drop for Stuck {
        fn drop(&mut self) {
            let _ = self.0.recv();
        }
    }

    /// Says when it is dropped.
    struct Done(mpsc::Sender<()>);

    impl Drop for Done {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    #[test]
    fn closes_that_wait_hold_back_neither_the_caller_nor_other_closes() {
        let mut release = Vec::new();
        for _ in 0..MOST_THREADS - 1 {
            let (tx, rx) = mpsc::channel();
            release.push(tx);
            close_later(Stuck(rx));
        }
        let (done, dropped) = mpsc::channel();
        close_later(Done(done));
        assert!(
            dropped.recv_timeout(Duration::from_secs(10)).is_ok(),
            "a close waited behind {} stuck ones",
            MOST_THREADS - 1
        );
        drop(release);
    }
}
