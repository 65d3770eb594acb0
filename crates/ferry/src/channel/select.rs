//! Waiting on many receivers at once.
//!
//! A [`Select`] holds receivers by reference and one poller (epoll on
//! Linux) over their doorbells. [`Select::ready`] returns the index of a
//! receiver on which a call would not wait: a message is there, or the
//! peer has gone or broken the rules (reported, never dropped: the
//! receiver's next call says `Disconnected` or `Protocol`). It looks at
//! the receivers in turn, starting after the one it returned last, so a
//! busy receiver cannot starve the others.
//!
//! The cost of waiting: every receiver is armed (one store each, then one
//! fence), so each sender rings its receiver's doorbell (one datagram
//! `send`) after each frame while the `Select` lives; a doorbell that rang
//! is cleared (a `recv` per datagram) before the next wait.
//!
//! A limit: a doorbell reaches the other side of a ring over the link
//! between the two processes that hold its sides. When the two halves of
//! one pipe were sent from the process that made it to two *different*
//! processes, those two share no link: the receiving one's doorbell never
//! reaches the sending one, so a `Select`, `ready_fd` or async receive
//! there is not woken by that peer's messages (a blocking `recv` is, on the
//! shared futex). Until pipes learn to reach a peer through another
//! process (proxy bypass), wait on such a receiver with `recv`.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use super::Receiver;
use super::error::{ReadyTimeoutError, TryReadyError};
use crate::ring::wake;
use crate::sys::{Interest, Poller};

/// A set of receivers to wait on together.
///
/// ```
/// let (a1, b1) = ferry::pipe()?;
/// let (a2, b2) = ferry::pipe()?;
/// let mut select = ferry::Select::new()?;
/// let first = select.add(b1.receiver())?;
/// let second = select.add(b2.receiver())?;
/// a2.send(b"two")?;
/// assert_eq!(select.ready()?, second);
/// assert_eq!(b2.try_recv()?, b"two");
/// drop(a1); // a gone peer is an event too
/// assert_eq!(select.ready()?, first);
/// assert!(matches!(b1.try_recv(), Err(ferry::TryRecvError::Disconnected)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Select<'a> {
    members: Vec<Member<'a>>,
    poller: Poller,
    /// Where the next look starts (after the last one returned).
    next: usize,
    /// Keys the poller reported, reused between waits.
    keys: Vec<u64>,
}

#[derive(Debug)]
struct Member<'a> {
    receiver: &'a Receiver,
    /// Its doorbell may have rung since it was last cleared.
    rung: bool,
}

impl<'a> Select<'a> {
    /// An empty set.
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
            keys: Vec::new(),
        })
    }

    /// Adds `receiver`; returns its index, which [`Select::ready`] returns
    /// when it is ready.
    ///
    /// # Errors
    ///
    /// As [`Receiver::ready_fd`], or the poller refused it (`AlreadyExists`
    /// if the receiver is in this set already).
    pub fn add(&mut self, receiver: &'a Receiver) -> io::Result<usize> {
        let fd = receiver.ready_fd()?;
        let index = self.members.len();
        self.poller.add(fd, index as u64, Interest::Readable)?;
        self.members.push(Member {
            receiver,
            rung: true,
        });
        Ok(index)
    }

    /// How many receivers are in the set.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set has no receivers.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Waits until a receiver is ready; returns its index.
    ///
    /// # Errors
    ///
    /// [`io::Error`] if the poller fails, or (`InvalidInput`) the set is
    /// empty and could never be ready.
    pub fn ready(&mut self) -> io::Result<usize> {
        match self.ready_until(None) {
            Ok(index) => Ok(index),
            Err(ReadyTimeoutError::Io(e)) => Err(e),
            Err(ReadyTimeoutError::Timeout) => unreachable!("no deadline"),
        }
    }

    /// The index of a receiver that is ready now, never waiting.
    ///
    /// # Errors
    ///
    /// [`TryReadyError::Empty`] if none is ready.
    pub fn try_ready(&mut self) -> Result<usize, TryReadyError> {
        self.first_ready().ok_or(TryReadyError::Empty)
    }

    /// Waits at most `timeout` for a receiver to be ready.
    ///
    /// # Errors
    ///
    /// [`ReadyTimeoutError::Timeout`] if none was in time; otherwise as
    /// [`Select::ready`].
    pub fn ready_timeout(&mut self, timeout: Duration) -> Result<usize, ReadyTimeoutError> {
        self.ready_until(Some(Instant::now() + timeout))
    }

    fn ready_until(&mut self, deadline: Option<Instant>) -> Result<usize, ReadyTimeoutError> {
        if self.members.is_empty() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "select over no receivers");
            return Err(ReadyTimeoutError::Io(e));
        }
        loop {
            if let Some(index) = self.first_ready() {
                return Ok(index);
            }
            self.arm_all();
            if let Some(index) = self.first_ready() {
                return Ok(index);
            }
            let timeout = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(ReadyTimeoutError::Timeout),
                },
            };
            self.keys.clear();
            self.poller
                .wait(&mut self.keys, timeout)
                .map_err(ReadyTimeoutError::Io)?;
            for &key in &self.keys {
                if let Some(member) = self.members.get_mut(key as usize) {
                    member.rung = true;
                }
            }
        }
    }

    /// The first ready receiver, looking from just after the last one
    /// returned.
    fn first_ready(&mut self) -> Option<usize> {
        let n = self.members.len();
        let found = (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&i| self.members[i].receiver.is_ready())?;
        self.next = (found + 1) % n;
        Some(found)
    }

    /// Clears the doorbells that rang and says every receiver waits on its
    /// own: one store each, then one fence for all (the caller looks at
    /// every ring again after this).
    fn arm_all(&mut self) {
        for member in &mut self.members {
            let half = &member.receiver.half;
            if let Some(bell) = half.armable_bell() {
                if member.rung {
                    bell.clear();
                    member.rung = false;
                }
                wake::announce_doorbell(half.sides().0);
            }
        }
        wake::settle();
    }
}

impl Drop for Select<'_> {
    fn drop(&mut self) {
        for member in &self.members {
            member.receiver.half.disarm_bell();
        }
    }
}

/// The set's own descriptor: readable when one of its receivers may be
/// ready (then call [`Select::try_ready`]), for a poll loop of the
/// caller's. Armed by a wait ([`Select::ready`], or [`Select::try_ready`]
/// after a `ready_timeout` that ran out).
impl AsFd for Select<'_> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.poller.as_fd()
    }
}
