//! Waiting on many receivers (and servers) at once.
//!
//! A [`Select`] owns its members: byte [`Receiver`]s, typed
//! [`typed::Receiver<T>`](crate::api::typed::Receiver)s of any `T`, and
//! [`Server`](crate::Server)s, each under a [`Key`] that stays its own
//! until it is removed (keys are never reused). One poller (epoll on Linux)
//! watches their descriptors. [`Select::ready`] returns the key of a member
//! on which a call would not wait:
//!
//! - a receiver with a *whole* message to receive (a message larger than
//!   the ring is ready once its last piece is in: the pieces before it are
//!   taken into the receiver as they come, so the sender is not held up),
//!   or whose peer has gone or broken the rules;
//! - a server with a client to accept (or one that finished its
//!   handshake, or was refused).
//!
//! A peer that has gone is an event, reported until a receive on that
//! receiver has returned the end (`Disconnected`, or `Protocol` for a peer
//! that broke the rules), and never again after that: the receiver stays
//! in the set, never ready, until it is removed, so a loop over a set
//! whose peers come and go never spins. It looks at the members in turn,
//! starting after the one it returned last, so a busy member cannot
//! starve the others.
//!
//! The cost of waiting: every receiver is armed (one store each, then one
//! fence), so each sender rings its receiver's doorbell (one datagram
//! `send`) after each frame while the `Select` waits; a doorbell that rang
//! is cleared (a `recv` per datagram) before the next wait.
//!
//! A doorbell reaches the other side of a ring over the link between the
//! two processes that hold its sides. A half forwarded to a third process
//! gets a link of its own to the process holding the other side (see
//! [`Sender::send_with`](super::Sender::send_with), *Forwarding a half*),
//! and the doorbells follow it there, so a `Select` is woken wherever
//! either side went.

use std::any::Any;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Receiver;
use super::error::{AddError, ReadyTimeoutError, TryReadyError};
use crate::base::sys::{Interest, Poller};
use crate::transport::ring::wake;

/// A descriptor a member is watched by, kept open while it is watched.
pub(crate) type Descriptor = Arc<dyn AsFd + Send + Sync>;

/// What a member of a [`Select`] does for it; implemented inside the crate
/// only (the seal of [`Selectable`]).
pub(crate) mod sealed {
    /// A readiness source.
    pub trait Source {
        /// The descriptor that becomes readable when this member may be
        /// ready (made on first use). It may change (a typed receiver
        /// whose sender left this process): the set asks before each wait.
        fn source_fd(&self) -> std::io::Result<super::Descriptor>;
        /// Whether a call would not wait now.
        fn source_ready(&self) -> bool;
        /// Says this member waits on its descriptor (clearing it first if
        /// it `rung`); the set then fences once and looks again.
        fn source_arm(&self, rung: bool);
        /// Says this member no longer waits on its descriptor.
        fn source_disarm(&self);
        /// Whether a call has handed its end to the caller (the peer gone,
        /// or broke the rules): from then on it is never ready.
        fn source_ended(&self) -> bool;
        /// When this member must be looked at again though its descriptor
        /// says nothing (a server's timers), if ever.
        fn source_deadline(&self) -> Option<std::time::Instant> {
            None
        }
    }
}

/// What can join a [`Select`]: a byte [`Receiver`], a typed
/// [`typed::Receiver<T>`](crate::api::typed::Receiver), a
/// [`Server`](crate::Server). Sealed: implemented by ferry's types only.
pub trait Selectable: sealed::Source + Any + Send {}

impl sealed::Source for Receiver {
    fn source_fd(&self) -> io::Result<Descriptor> {
        Ok(Arc::clone(self.half.doorbell()?) as Descriptor)
    }

    fn source_ready(&self) -> bool {
        self.is_ready()
    }

    fn source_arm(&self, rung: bool) {
        if self.attached() {
            self.arm_all(rung);
            return;
        }
        if let Some(bell) = self.half.armable_bell() {
            if rung {
                bell.clear();
            }
            wake::announce_doorbell(self.half.sides().0);
        }
    }

    fn source_disarm(&self) {
        match self.attached() {
            true => self.disarm_all(),
            false => self.half.disarm_bell(),
        }
    }

    fn source_ended(&self) -> bool {
        self.has_ended()
    }
}

impl Selectable for Receiver {}

/// A member's name in its [`Select`], returned by [`Select::add`]: it
/// stays the member's until the member is removed, and is never given to
/// another member of the same set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(u64);

/// One member of a set.
struct Entry {
    key: Key,
    member: Box<dyn Selectable>,
    /// The descriptor the poller watches for it; `None` once it has ended
    /// (no longer watched, never ready).
    fd: Option<Descriptor>,
    /// Its descriptor may have been readable since it was last cleared.
    rung: bool,
}

/// A set of receivers and servers to wait on together; it owns them.
///
/// ```
/// let (a1, b1) = ferry::pipe()?;
/// let (a2, b2) = ferry::pipe()?;
/// let (_, rx1) = b1.split();
/// let (_, rx2) = b2.split();
/// let mut select = ferry::Select::new()?;
/// let first = select.add(rx1)?;
/// let second = select.add(rx2)?;
/// a2.send(b"two")?;
/// assert_eq!(select.ready()?, second);
/// let rx2 = select.get::<ferry::Receiver>(second).expect("a byte receiver");
/// assert_eq!(rx2.try_recv()?, b"two");
/// drop(a1); // a gone peer is an event too, until the receiver says so
/// assert_eq!(select.ready()?, first);
/// let rx1 = select.remove::<ferry::Receiver>(first).expect("it is there");
/// assert!(matches!(rx1.try_recv(), Err(ferry::TryRecvError::Disconnected)));
/// assert_eq!(select.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Select {
    /// In the order they were added (keys ascending).
    members: Vec<Entry>,
    poller: Poller,
    /// Where the next look starts (after the last one returned).
    next: usize,
    /// The key the next member gets.
    next_key: u64,
    /// Keys the poller reported, reused between waits.
    keys: Vec<u64>,
}

impl fmt::Debug for Select {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: Vec<Key> = self.members.iter().map(|e| e.key).collect();
        f.debug_struct("Select").field("members", &keys).finish()
    }
}

impl Select {
    /// An empty set.
    ///
    /// ```
    /// let select = ferry::Select::new()?;
    /// assert!(select.is_empty());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The poller could not be made (out of descriptors), or this system
    /// has none (`Unsupported`).
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            members: Vec::new(),
            poller: Poller::new()?,
            next: 0,
            next_key: 0,
            keys: Vec::new(),
        })
    }

    /// Adds `member` (the set owns it from now on); returns its key, which
    /// [`Select::ready`] returns when it is ready.
    ///
    /// ```
    /// let (tx, rx) = ferry::channel::<u32>(16).unwrap();
    /// let mut select = ferry::Select::new()?;
    /// let key = select.add(rx)?;
    /// tx.send(7)?;
    /// assert_eq!(select.ready()?, key);
    /// let rx = select.get::<ferry::typed::Receiver<u32>>(key).expect("there");
    /// assert_eq!(rx.try_recv()?, 7);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`AddError`], holding the member (nothing is lost): its readiness
    /// descriptor could not be made (out of descriptors), or the poller
    /// refused it.
    pub fn add<M: Selectable>(&mut self, member: M) -> Result<Key, AddError<M>> {
        let fd = match member.source_fd() {
            Ok(fd) => fd,
            Err(error) => return Err(AddError { error, member }),
        };
        let key = Key(self.next_key);
        if let Err(error) = self.poller.add(fd.as_fd(), key.0, Interest::Readable) {
            return Err(AddError { error, member });
        }
        self.next_key += 1;
        self.members.push(Entry {
            key,
            member: Box::new(member),
            fd: Some(fd),
            rung: true,
        });
        Ok(key)
    }

    /// Takes the member under `key` out of the set and hands it back, if
    /// it is there and is an `M`; else `None`, and the set is unchanged.
    ///
    /// ```
    /// let (_tx, rx) = ferry::channel::<String>(16).unwrap();
    /// let mut select = ferry::Select::new()?;
    /// let key = select.add(rx)?;
    /// assert!(select.remove::<ferry::Receiver>(key).is_none()); // not a byte receiver
    /// let rx = select.remove::<ferry::typed::Receiver<String>>(key);
    /// assert!(rx.is_some() && select.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remove<M: Selectable>(&mut self, key: Key) -> Option<M> {
        let at = self.position(key)?;
        if !(&*self.members[at].member as &dyn Any).is::<M>() {
            return None;
        }
        let entry = self.members.remove(at);
        if let Some(fd) = &entry.fd {
            // It is open (held by `fd`): deleting it cannot fail but for a
            // poller error, after which it is no longer watched either way.
            let _ = self.poller.delete(fd.as_fd());
        }
        entry.member.source_disarm();
        if at < self.next {
            self.next -= 1;
        }
        if self.next >= self.members.len() {
            self.next = 0;
        }
        (entry.member as Box<dyn Any>)
            .downcast::<M>()
            .ok()
            .map(|m| *m)
    }

    /// The member under `key`, if it is there and is an `M`.
    ///
    /// ```
    /// let (_a, b) = ferry::pipe()?;
    /// let (_, rx) = b.split();
    /// let mut select = ferry::Select::new()?;
    /// let key = select.add(rx)?;
    /// assert!(select.get::<ferry::Receiver>(key).is_some());
    /// assert!(select.get::<ferry::Server>(key).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get<M: Selectable>(&self, key: Key) -> Option<&M> {
        let entry = &self.members[self.position(key)?];
        (&*entry.member as &dyn Any).downcast_ref::<M>()
    }

    /// How many members are in the set (ended ones included, until they
    /// are removed).
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Waits until a member is ready; returns its key.
    ///
    /// # Errors
    ///
    /// [`io::Error`] if the poller fails, or (`InvalidInput`) no member
    /// could ever be ready (the set is empty, or every member has ended).
    pub fn ready(&mut self) -> io::Result<Key> {
        match self.ready_until(None) {
            Ok(key) => Ok(key),
            Err(ReadyTimeoutError::Io(e)) => Err(e),
            Err(ReadyTimeoutError::Timeout) => Err(io::ErrorKind::TimedOut.into()),
        }
    }

    /// The key of a member that is ready now, never waiting.
    ///
    /// ```
    /// let (_a, b) = ferry::pipe()?;
    /// let (_, rx) = b.split();
    /// let mut select = ferry::Select::new()?;
    /// select.add(rx)?;
    /// assert!(matches!(select.try_ready(), Err(ferry::TryReadyError::Empty)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TryReadyError::Empty`] if none is ready.
    pub fn try_ready(&mut self) -> Result<Key, TryReadyError> {
        self.first_ready().ok_or(TryReadyError::Empty)
    }

    /// Waits at most `timeout` for a member to be ready.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (_a, b) = ferry::pipe()?;
    /// let (_, rx) = b.split();
    /// let mut select = ferry::Select::new()?;
    /// select.add(rx)?;
    /// let late = select.ready_timeout(Duration::from_millis(5));
    /// assert!(matches!(late, Err(ferry::ReadyTimeoutError::Timeout)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError::Timeout`] if none was in time; otherwise as
    /// [`Select::ready`].
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<Key, ReadyTimeoutError> {
        self.ready_until(Some(Instant::now() + timeout))
    }

    fn ready_until(&mut self, deadline: Option<Instant>) -> Result<Key, ReadyTimeoutError> {
        loop {
            if let Some(key) = self.first_ready() {
                return Ok(key);
            }
            if self.members.iter().all(|e| e.fd.is_none()) {
                let e = io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "select over no member that could become ready (the set is empty, \
                     or every receiver in it has returned its end)",
                );
                return Err(ReadyTimeoutError::Io(e));
            }
            self.arm_all().map_err(ReadyTimeoutError::Io)?;
            if let Some(key) = self.first_ready() {
                return Ok(key);
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                return Err(ReadyTimeoutError::Timeout);
            }
            let wake = self
                .members
                .iter()
                .filter(|e| e.fd.is_some())
                .filter_map(|e| e.member.source_deadline())
                .chain(deadline)
                .min();
            let timeout = wake.map(|w| w.saturating_duration_since(now));
            self.keys.clear();
            self.poller
                .wait(&mut self.keys, timeout)
                .map_err(ReadyTimeoutError::Io)?;
            for &key in &self.keys {
                if let Some(at) = self.position(Key(key)) {
                    self.members[at].rung = true;
                }
            }
        }
    }

    /// Where the member under `key` is.
    fn position(&self, key: Key) -> Option<usize> {
        self.members.binary_search_by_key(&key, |e| e.key).ok()
    }

    /// The first ready member, looking from just after the last one
    /// returned; a member found ended is no longer watched.
    fn first_ready(&mut self) -> Option<Key> {
        let n = self.members.len();
        for i in 0..n {
            let at = (self.next + i) % n;
            let entry = &mut self.members[at];
            if entry.fd.is_none() {
                continue;
            }
            if entry.member.source_ended() {
                self.retire(at);
                continue;
            }
            if entry.member.source_ready() {
                self.next = (at + 1) % n;
                return Some(entry.key);
            }
        }
        None
    }

    /// Stops watching an ended member.
    fn retire(&mut self, at: usize) {
        let entry = &mut self.members[at];
        if let Some(fd) = entry.fd.take() {
            let _ = self.poller.delete(fd.as_fd());
        }
        entry.member.source_disarm();
    }

    /// Watches each member's current descriptor, clears the ones that rang
    /// and says every member waits on its own: one store each, then one
    /// fence for all (the caller looks at every member again after this).
    fn arm_all(&mut self) -> io::Result<()> {
        for entry in &mut self.members {
            let Some(watched) = &entry.fd else { continue };
            let fd = entry.member.source_fd()?;
            if !std::ptr::addr_eq(Arc::as_ptr(&fd), Arc::as_ptr(watched)) {
                let _ = self.poller.delete(watched.as_fd());
                self.poller
                    .add(fd.as_fd(), entry.key.0, Interest::Readable)?;
                entry.fd = Some(fd);
                entry.rung = true;
            }
            entry.member.source_arm(entry.rung);
            entry.rung = false;
        }
        wake::settle();
        Ok(())
    }
}

impl Drop for Select {
    fn drop(&mut self) {
        for entry in &self.members {
            entry.member.source_disarm();
        }
    }
}

/// The set's own descriptor: readable when one of its members may be
/// ready (then call [`Select::try_ready`]), for a poll loop of the
/// caller's. Armed by a wait ([`Select::ready`], or [`Select::try_ready`]
/// after a `ready_timeout` that ran out).
impl AsFd for Select {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.poller.as_fd()
    }
}
