//! The receiving half of a pipe end: frames out of the ring it alone
//! reads, checked, into whole messages.

use crate::base::wire::Violation;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use super::clones::Clones;
use super::error::RecvFault;
use std::sync::Arc;

use super::half::{Half, Unread};
use super::prefix::Prefix;
use super::route::Named;
use super::wait::{Scope, Stop, Waiter};
use super::{
    Arrived, Handle, Pipe, PipeOptions, RecvError, RecvTimeoutError, Sender, TryRecvError,
};
use crate::base::lock::{Guard, Lock};
use crate::base::sync::{AtomicBool, Ordering};
use crate::base::wire::frame::{
    BLOCK_REF, BlockRef, HANDLE_ID, Kind, PLAIN_WHOLE, TOTAL, Tag, decode_handle_id, decode_total,
};
use crate::transport::link::{Deadline, Failure, Fault};
use crate::transport::pool::per_link::Held;
use crate::transport::ring::RingView;
use crate::transport::ring::{Consumer, Corrupt, Frame};

/// A message together with the pipe ends (and halves) and descriptors it
/// carried, each kind in the order it was attached.
#[derive(Debug, Default)]
pub struct Message {
    /// The payload.
    pub bytes: Vec<u8>,
    /// Pipe ends sent with [`Sender::send_with`], now owned by this process.
    pub pipes: Vec<Pipe>,
    /// Sending halves that came with the message.
    pub senders: Vec<Sender>,
    /// Receiving halves that came with the message.
    pub receivers: Vec<Receiver>,
    /// File descriptors that came with the message (close-on-exec).
    pub fds: Vec<OwnedFd>,
    /// Pipe ends (or halves) the peer attached that this process refused:
    /// their shared memory would pass what is left of the link's budget
    /// of mapped memory ([`PipeOptions::max_mapped`](crate::PipeOptions::max_mapped)).
    /// Each was closed, so whoever holds its other end sees the pipe
    /// disconnected; the rest of the message is here. Not the peer's fault
    /// (it cannot know this process's budget): the link goes on.
    pub refused: usize,
}

impl Message {
    fn take_ends(&mut self, ends: Vec<Arrived>) {
        for end in ends {
            match end.into_end() {
                Handle::Pipe(pipe) => self.pipes.push(pipe),
                Handle::Sender(sender) => self.senders.push(sender),
                Handle::Receiver(receiver) => self.receivers.push(receiver),
                Handle::Fd(fd) => self.fds.push(fd),
            }
        }
    }
}

/// A message whose pieces are still arriving, kept across a timeout.
#[derive(Debug)]
struct Partial {
    bytes: Vec<u8>,
    total: usize,
    ends: Vec<Arrived>,
    refused: usize,
}

/// The message being put together from frames.
#[derive(Debug, Default)]
struct Assembly {
    /// The announced length, between `First` and `Last`.
    total: Option<usize>,
    /// Pipe ends and descriptors claimed so far.
    ends: Vec<Arrived>,
    /// Pipe ends refused so far (see [`Message::refused`]).
    refused: usize,
    /// An `Attach` frame was taken: the receive starts over, reading the
    /// attached ring too.
    attached: bool,
}

/// Where a received message goes.
pub(super) struct Delivery<'a> {
    /// The payload, unless it is handed over as a block.
    pub(super) bytes: &'a mut Vec<u8>,
    /// Attached pipe ends and descriptors, if the caller takes them (else
    /// they are dropped, descriptors on the closer).
    pub(super) ends: Option<&'a mut Vec<Arrived>>,
    /// How many attached ends were refused (see [`Message::refused`]).
    pub(super) refused: usize,
    /// An out-of-line payload's block, if the caller reads it in place.
    pub(super) block: Option<&'a mut Option<Held>>,
}

impl<'a> Delivery<'a> {
    fn bytes(bytes: &'a mut Vec<u8>) -> Self {
        Self {
            bytes,
            ends: None,
            refused: 0,
            block: None,
        }
    }
}

impl Receiver {
    /// Sends this receiver, whose sender is in another process, on to the
    /// process at the other end of `dest` (see [`Half::begin_forward_receiver`]);
    /// returns the id the message frame names it by. Messages below the
    /// boundary that name the old link go with it, in its prefix (see
    /// `prefix.rs`). Refused while a message is half received here (its
    /// first frames read, the rest not): the new holder could not finish it.
    pub(super) fn forward(
        &self,
        dest: &Arc<crate::transport::link::Link>,
        deadline: Option<Instant>,
    ) -> std::io::Result<u64> {
        let (begun, prefix) = self.begin_forward(dest, deadline, true)?;
        Prefix::forward_with(prefix, self, dest, deadline, |prefixed, then| {
            begun.finish_then(prefixed, then, deadline)
        })
    }

    /// [`Receiver::forward`] up to the `Routed` record (see
    /// [`Half::begin_forward_receiver`]), with the messages below the
    /// boundary taken out if any names the old link and `relay` allows.
    pub(super) fn begin_forward<'a>(
        &'a self,
        dest: &'a crate::transport::link::Link,
        deadline: Option<Instant>,
        relay: bool,
    ) -> std::io::Result<(super::half::Begun<'a>, Option<Prefix>)> {
        let Some(mut rx) = self.rx.lock_until(deadline, &self.half) else {
            return Err(std::io::ErrorKind::TimedOut.into());
        };
        if rx.partial.is_some() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "a message is half received on this receiver: receive it before sending the receiver on",
            ));
        }
        let ring = &rx.ring;
        // A prefix not yet read goes on first, in the new prefix; rings of
        // clones read here go after it (`Attach` frames in it).
        let prefixed = self.has_prefix() || self.reads_clone_rings();
        let mut unread = Unread::Nothing;
        let begun = self.half.begin_forward_receiver(dest, deadline, |end| {
            // Frames that name handles (`First`, `Whole` with ends,
            // `Attach`) or a block: their records are on the old link,
            // which the new holder does not read. Taken out whole (an
            // attached ring goes after the messages), unless a message is
            // not complete at the boundary (its rest comes after it).
            let (mut names, mut open) = (false, false);
            ring.any_tag_until(end, |tag| {
                let Ok(t) = Tag::decode(tag) else {
                    names = true;
                    return false;
                };
                names |= t.handles > 0 || t.kind == Kind::Block;
                match t.kind {
                    Kind::First => open = true,
                    Kind::Last | Kind::Abort => open = false,
                    _ => {}
                }
                false
            })?;
            unread = match (names || prefixed, relay && !open) {
                (false, _) => Unread::Nothing,
                (true, true) => Unread::Relay,
                (true, false) => Unread::Refuse,
            };
            Ok(unread)
        })?;
        if unread != Unread::Relay {
            return Ok((begun, None));
        }
        let boundary = begun.boundary();
        let mut prefix = Prefix::default();
        if let Err(fault) = self.take_prefix_into(&mut prefix) {
            begun.stay();
            prefix.keep(self);
            return Err(std::io::Error::other(format!(
                "taking out the messages of its own prefix: {fault:?}"
            )));
        }
        // Every frame below the boundary is published, whole messages
        // only: nothing is waited for (the bound is for a sender that
        // lied about its frames). The position is the ring's own (the
        // published one, the other side's process can write), so the loop
        // ends within the bytes below the boundary.
        let until = Some(Instant::now() + Duration::from_secs(1));
        // Wrapping positions: below the boundary while the distance to it
        // is positive.
        let below = |rx: &Rx| (boundary.wrapping_sub(rx.ring.head()) as i64) > 0;
        while below(&rx) {
            let at = rx.ring.head();
            let taken = prefix.take(|out| self.receive_in(&mut rx, out, until));
            // An `Attach` frame read: not a message, its ring joined this
            // receiver's (taken below).
            if matches!(taken, Err(RecvFault::Timeout)) && rx.ring.head() != at {
                continue;
            }
            if let Err(fault) = taken {
                // What was taken stays here, read first; so does the
                // receiver.
                begun.stay();
                prefix.keep(self);
                return Err(std::io::Error::other(format!(
                    "taking out the messages before the boundary: {fault:?}"
                )));
            }
        }
        let past = rx.ring.head() != boundary;
        let piped = match past {
            // A message ran past the boundary: its sender wrote frames
            // that lied about where its messages end.
            true => Err(std::io::Error::other(
                "a message taken out ran past the boundary of the move",
            )),
            false => {
                prefix.take_rings(self);
                prefix.make_pipe(self)
            }
        };
        if let Err(e) = piped {
            begun.stay();
            prefix.keep(self);
            return Err(e);
        }
        Ok((begun, Some(prefix)))
    }
}

impl Receiver {
    /// Whether a message is half received here (its first frames read,
    /// the rest not): the receiver cannot move until it is received (see
    /// [`Receiver::begin_forward`]). `false` while another thread receives.
    pub(super) fn half_received(&self) -> bool {
        self.rx
            .lock_until(Some(Instant::now()), &self.half)
            .is_some_and(|rx| rx.partial.is_some())
    }

    /// Takes in the `Attach` frames at the head of this ring whose rings
    /// wait in its handle queue (clones of a sender in this process that
    /// went elsewhere), so that it may leave the process with those rings
    /// (see `clones::Gathered`); stops at the first other frame. A
    /// receive would do the same; nothing is lost if this does not.
    pub(super) fn settle_attaches(&self) {
        let Some(mut rx) = self.rx.lock_until(Some(Instant::now()), &self.half) else {
            return;
        };
        if rx.partial.is_some() {
            return;
        }
        let mut scratch = Vec::new();
        while !self.half.link.local().is_empty() {
            let Ok(Some(frame)) = rx.ring.peek() else {
                return;
            };
            if !Tag::decode(frame.tag()).is_ok_and(|t| t.kind == Kind::Attach) {
                return;
            }
            let at = rx.ring.head();
            let out = &mut Delivery::bytes(&mut scratch);
            let taken = self.receive_in(&mut rx, out, Some(Instant::now()));
            // An `Attach` taken in reads as a `Timeout` past the frame.
            if !matches!(taken, Err(RecvFault::Timeout)) || rx.ring.head() == at {
                return;
            }
        }
    }
}

/// The receiving half of a pipe end, behind its mutex.
#[derive(Debug)]
pub(super) struct Rx {
    ring: Consumer<RingView>,
    waiter: Waiter,
    partial: Option<Partial>,
    /// Handles claimed from this ring so far (wrapping), published to the
    /// sender, which keeps a bounded window of them in flight.
    claimed: u32,
}

impl Rx {
    pub(super) fn new(ring: Consumer<RingView>) -> Self {
        Self {
            ring,
            waiter: Waiter::default(),
            partial: None,
            claimed: 0,
        }
    }
}

/// A frame being read in place under the receive lock: consumed when this
/// drops, after the reader returns or panics (the message counts as
/// received either way; a reader that panics on it does not see it again).
struct Reading<'a> {
    rx: Guard<'a, Rx>,
    /// `None`: the frame is left in the ring.
    frame: Option<Frame>,
    half: &'a Half,
}

impl Drop for Reading<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(frame) = self.frame {
            self.rx.ring.consume(frame);
            self.half.ring_peer();
            self.half.disarm_bell();
        }
    }
}

fn stop_to_error(half: &Half, stop: Stop) -> RecvFault {
    match stop {
        Stop::Timeout => RecvFault::Timeout,
        Stop::Gone(failure) => half.gone(failure).into(),
        Stop::Corrupt(Corrupt(why)) => half.corrupt(why).into(),
    }
}

/// The receiving half of a pipe end: it alone reads its ring. Made by
/// [`Pipe::split`] (a [`Pipe`] is a [`Sender`] and a `Receiver`); it can
/// travel to another process inside a message, as a pipe end can.
///
/// ```
/// let (a, b) = ferry::pipe()?;
/// let (_tx, rx) = b.split();
/// a.send(b"one way")?;
/// assert_eq!(rx.recv()?, b"one way");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Receiver {
    pub(super) half: Half,
    rx: Lock<Rx>,
    /// Set once a receive has returned the end (`Disconnected`, or
    /// `Protocol`): readiness (a `Select`) no longer reports it.
    ended: AtomicBool,
    /// The rings of this receiver's sender's clones in other processes,
    /// read along with this one (see `clones.rs`).
    pub(super) clones: Clones,
}

impl Receiver {
    pub(super) fn new(half: Half) -> Result<Self, Corrupt> {
        let ring = Consumer::new(half.region.ring(half.ring()))?;
        let mut rx = Rx::new(ring);
        // A side that moved here counts on from the handles its old
        // holders claimed: the sender compares its own count with this
        // one (a count that started again from zero would look like
        // handles in flight that never come, and its window would close
        // for good). Relaxed: as every store of it.
        rx.claimed = half.sides().0.handles.load(Ordering::Relaxed);
        Ok(Self {
            half,
            rx: Lock::new(rx),
            ended: AtomicBool::new(false),
            clones: Clones::default(),
        })
    }

    /// Receives the next message, waiting for it. Pipe ends attached to
    /// the message are dropped (use [`Receiver::recv_with`] to keep them).
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.send(b"hello")?;
    /// assert_eq!(b.recv()?, b"hello");
    /// drop(a);
    /// assert!(matches!(b.recv(), Err(ferry::RecvError::Disconnected)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvError::Disconnected`] once the sending end is gone and every
    /// message it sent has been received; [`RecvError::Protocol`] if the
    /// peer broke the protocol; [`RecvError::Io`] if this process could not
    /// take what the peer sent (the message stays queued).
    pub fn recv(&self) -> Result<Vec<u8>, RecvError> {
        let mut bytes = Vec::new();
        self.recv_into(&mut bytes)?;
        Ok(bytes)
    }

    /// Receives the next message into `buf`, replacing its contents and
    /// reusing its allocation: no allocation per message in steady state.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let mut buf = Vec::with_capacity(1024);
    /// for i in 0..3u8 {
    ///     a.send(&[i; 10])?;
    ///     b.receiver().recv_into(&mut buf)?;
    ///     assert_eq!(buf, [i; 10]);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    #[inline]
    pub fn recv_into(&self, buf: &mut Vec<u8>) -> Result<(), RecvError> {
        Ok(self.recv_message(&mut Delivery::bytes(buf), None)?)
    }

    /// Receives a message if one is waiting, never waiting.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// assert!(matches!(b.receiver().try_recv(), Err(ferry::TryRecvError::Empty)));
    /// a.send(b"now")?;
    /// assert_eq!(b.receiver().try_recv()?, b"now");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TryRecvError::Empty`] when no whole message is waiting, and when
    /// another thread of this end is in a receive that does not end within
    /// about 100 µs (one waiting for a message, or taking a large one): a
    /// `try_` call never waits for it (a ready descriptor armed by this
    /// answer is rung once that receive is done); the rest as
    /// [`Receiver::recv`].
    pub fn try_recv(&self) -> Result<Vec<u8>, TryRecvError> {
        let mut bytes = Vec::new();
        self.try_message(&mut Delivery::bytes(&mut bytes))?;
        Ok(bytes)
    }

    /// [`Receiver::try_recv`] into `buf`, reusing its allocation.
    ///
    /// # Errors
    ///
    /// As [`Receiver::try_recv`].
    pub fn try_recv_into(&self, buf: &mut Vec<u8>) -> Result<(), TryRecvError> {
        Ok(self.try_message(&mut Delivery::bytes(buf))?)
    }

    /// A descriptor that becomes readable when a message (or the peer's
    /// hang-up) may be waiting, for a poll loop of the caller's own (epoll,
    /// mio, tokio's `AsyncFd`). The protocol: call
    /// [`Receiver::try_recv`] until it says `Empty`, then wait for the
    /// descriptor to be readable, and repeat. An `Empty` answer arms it:
    /// from then on the sender rings it after each frame, until a message
    /// is received (so a sender pays for it only while someone waits). It
    /// may be readable with nothing to receive (a message still arriving in
    /// pieces): then `try_recv` says `Empty` again and re-arms it. Never
    /// read or write the descriptor itself.
    ///
    /// ```
    /// use rustix::event::{PollFd, PollFlags, poll};
    /// let (a, b) = ferry::pipe()?;
    /// let fd = b.receiver().ready_fd()?;
    /// assert!(matches!(b.receiver().try_recv(), Err(ferry::TryRecvError::Empty))); // arms it
    /// a.send(b"ping")?; //                                                 rings it
    /// let mut fds = [PollFd::new(&fd, PollFlags::IN)];
    /// assert_eq!(poll(&mut fds, None)?, 1);
    /// assert_eq!(b.receiver().try_recv()?, b"ping");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The first call makes the descriptor (one end of a Unix datagram socket pair on Linux) and hands
    /// it to the process holding the sending side: [`std::io::Error`] if it
    /// cannot be made (out of descriptors) or the peer has not read its
    /// socket for a second; `Unsupported` on other systems.
    pub fn ready_fd(&self) -> std::io::Result<BorrowedFd<'_>> {
        Ok(self.half.doorbell()?.as_fd())
    }

    /// Whether a receive would not wait now: a *whole* message is there,
    /// or the peer has gone or broken the rules. The pieces of a message
    /// larger than the ring are taken in as they come (see
    /// [`Receiver::gather`]); it is ready once its last piece is in. While
    /// another thread of this end receives, it says no (that receive rings
    /// this end's doorbell when it is done).
    pub(crate) fn is_ready(&self) -> bool {
        match self.attached() {
            true => self.merged_ready(),
            false => self.ready_alone(),
        }
    }

    /// [`Receiver::is_ready`] for this ring alone.
    pub(super) fn ready_alone(&self) -> bool {
        let (me, peer) = self.half.sides();
        // Acquire (all): pair with the producer's Release publication of
        // its position and of `closed`.
        if peer.closed.load(Ordering::Acquire) != 0 || self.half.failure().is_some() {
            return true;
        }
        if peer.pos.load(Ordering::Acquire) == me.pos.load(Ordering::Acquire) {
            return false;
        }
        let Some(mut rx) = self.rx.lock_until(Some(Instant::now()), &self.half) else {
            return false;
        };
        self.gather(&mut rx)
    }

    /// Whether a receive has returned this receiver's end
    /// (`Disconnected`, or `Protocol`).
    pub(crate) fn has_ended(&self) -> bool {
        // Relaxed: a sticky flag this end's own calls set.
        self.ended.load(Ordering::Relaxed)
    }

    /// Notes a receive's failure that ends this receiver.
    #[cold]
    fn note_end(&self, fault: &RecvFault) {
        if matches!(fault, RecvFault::Disconnected | RecvFault::Protocol(_)) {
            // Relaxed: see `has_ended`.
            self.ended.store(true, Ordering::Relaxed);
        }
    }

    /// This receiver's doorbell (made now if need be), shared.
    #[cfg(feature = "serde")]
    pub(crate) fn doorbell(&self) -> std::io::Result<std::sync::Arc<crate::base::sys::Doorbell>> {
        self.half.doorbell().map(std::sync::Arc::clone)
    }

    /// Arms this receiver's doorbell if it has one (a `try_` receive that
    /// found nothing does this, then looks once more); whether it had.
    #[cfg(feature = "serde")]
    pub(crate) fn arm(&self) -> bool {
        if self.attached() {
            return self.arm_all(true);
        }
        match self.half.armable_bell() {
            Some(bell) => {
                self.half.arm_bell(bell);
                true
            }
            None => false,
        }
    }

    /// Takes the pieces of a message that are in the ring, short of its
    /// last, into the message kept for the next receive; whether a
    /// receive would not wait now (a whole message, or something it
    /// reports: a frame that breaks the rules, a failure).
    fn gather(&self, rx: &mut Rx) -> bool {
        let (mut bytes, mut asm) = match rx.partial.take() {
            Some(p) => (
                p.bytes,
                Assembly {
                    total: Some(p.total),
                    ends: p.ends,
                    refused: p.refused,
                    attached: false,
                },
            ),
            None => (Vec::new(), Assembly::default()),
        };
        // Every frame is a step: a peer that keeps publishing pieces that
        // never complete a message cannot hold the caller here (what it
        // sends next rings the doorbell again).
        let mut budget = Deadline::new(Some(Instant::now()));
        let ready = loop {
            if !budget.step() {
                break false;
            }
            let frame = match rx.ring.peek() {
                Ok(Some(frame)) => frame,
                Ok(None) => break false,
                Err(_) => break true,
            };
            let piece = match Tag::decode(frame.tag()) {
                Ok(tag) => matches!(
                    (asm.total, tag.kind),
                    (None, Kind::First | Kind::Attach) | (Some(_), Kind::More | Kind::Abort)
                ),
                Err(_) => false,
            };
            if !piece {
                // A whole message (once the handles it names are in), a
                // last piece, or a frame the receive reports as a
                // violation.
                break self.handles_arrived(&rx.ring, frame, &mut budget);
            }
            let out = &mut Delivery::bytes(&mut bytes);
            match self.take_frame(&rx.ring, frame, &mut asm, out, &mut budget) {
                Ok(_) => self.finish_frame(rx, frame),
                // Descriptors it names are not in yet: a receive waits.
                Err(RecvFault::Timeout) => break false,
                Err(_) => break true,
            }
        };
        if let Some(total) = asm.total {
            rx.partial = Some(Partial {
                bytes,
                total,
                ends: asm.ends,
                refused: asm.refused,
            });
        }
        ready
    }

    /// Whether a frame that makes a whole message (`Whole`, or `Block`)
    /// names only handles, and a block, that have arrived on the link, so
    /// a receive would take it now; reads the records waiting on the
    /// socket within `budget`. True as well for what a receive would
    /// report (a frame that breaks the rules, a failed link), and within
    /// one process, where handles are queued before their frame.
    fn handles_arrived(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        budget: &mut Deadline,
    ) -> bool {
        let Ok(tag) = Tag::decode(frame.tag()) else {
            return true;
        };
        if frame.len() < tag.prefix_len() {
            return true;
        }
        let (at, block) = match tag.kind {
            Kind::Whole => (0, None),
            Kind::Block => match self.block_ref(ring, frame) {
                Ok(block) => (BLOCK_REF, Some(block)),
                Err(_) => return true,
            },
            _ => return true,
        };
        if tag.handles == 0 && block.is_none() {
            return true;
        }
        self.half.follow_moves();
        let Named::Over(link) = self.half.link.at(frame.at()) else {
            return true;
        };
        let ids = handle_ids(ring, frame, at, tag.handles);
        link.has_arrived(&ids, block, budget).unwrap_or(true)
    }

    /// Consumes a frame taken into a message: its handles are counted as
    /// claimed, and the sender is told there is room.
    fn finish_frame(&self, rx: &mut Rx, frame: Frame) {
        rx.ring.consume(frame);
        // The tag was checked by `take_frame`; its top half counts handles.
        let handles = (frame.tag() >> 16) as u16;
        if handles != 0 {
            rx.claimed = rx.claimed.wrapping_add(u32::from(handles));
            // Relaxed: a count the sender only compares; the wake below
            // (with its fence) tells it to look.
            self.half
                .sides()
                .0
                .handles
                .store(rx.claimed, Ordering::Relaxed);
        }
        self.half.ring_peer();
    }

    /// One non-waiting receive that, finding nothing while this receiver
    /// has a doorbell, arms it and looks once more (so a frame published
    /// before the sender saw it armed is not missed).
    fn try_message(&self, out: &mut Delivery<'_>) -> Result<(), RecvFault> {
        if self.attached() {
            return self.recv_message(out, Some(Instant::now()));
        }
        match self.recv_message(out, Some(Instant::now())) {
            // An `Attach` was read: the merged receive armed every ring.
            Err(RecvFault::Timeout) if self.attached() => Err(RecvFault::Timeout),
            Err(RecvFault::Timeout) => match self.half.armable_bell() {
                Some(bell) => {
                    self.half.arm_bell(bell);
                    self.recv_message(out, Some(Instant::now()))
                }
                None => Err(RecvFault::Timeout),
            },
            other => other,
        }
    }

    /// Receives a message, waiting at most `timeout`. A message that was
    /// arriving in pieces when time ran out is kept for the next call.
    /// Waiting for another thread's receive on this end (one that may
    /// itself wait for a message) takes from the same time.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (_a, b) = ferry::pipe()?;
    /// let late = b.receiver().recv_timeout(Duration::from_millis(5));
    /// assert!(matches!(late, Err(ferry::RecvTimeoutError::Timeout)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`RecvTimeoutError::Timeout`] when nothing arrived in time; the rest
    /// as [`Receiver::recv`].
    pub fn recv_timeout(&self, timeout: Duration) -> Result<Vec<u8>, RecvTimeoutError> {
        let mut bytes = Vec::new();
        self.recv_message(
            &mut Delivery::bytes(&mut bytes),
            Some(Instant::now() + timeout),
        )?;
        Ok(bytes)
    }

    /// Receives the next message with the pipe ends (and halves) and
    /// descriptors it carries, whether the sender is in this process or
    /// another (see [`Sender::send_with`]).
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let file = std::fs::File::open("/dev/null")?;
    /// a.sender().send_with(b"a file", vec![ferry::Handle::Fd(file.into())])?;
    /// let message = b.receiver().recv_with()?;
    /// assert_eq!((message.bytes.as_slice(), message.fds.len()), (&b"a file"[..], 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`]; also [`RecvError::Io`] when this process
    /// cannot take an end the peer sent (out of descriptors or address
    /// space): the message stays queued.
    pub fn recv_with(&self) -> Result<Message, RecvError> {
        Ok(self.recv_message_with(None)?)
    }

    /// [`Receiver::recv_with`], waiting at most `timeout` (zero: never
    /// waiting).
    ///
    /// ```
    /// use std::time::Duration;
    /// let (a, b) = ferry::pipe()?;
    /// let none = b.receiver().recv_with_timeout(Duration::ZERO);
    /// assert!(matches!(none, Err(ferry::RecvTimeoutError::Timeout)));
    /// let (c, _d) = ferry::pipe()?;
    /// a.sender().send_with(b"take c", vec![c])?;
    /// let message = b.receiver().recv_with_timeout(Duration::from_secs(1))?;
    /// assert_eq!((message.bytes.as_slice(), message.pipes.len()), (&b"take c"[..], 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv_timeout`], and [`Receiver::recv_with`]'s.
    pub fn recv_with_timeout(&self, timeout: Duration) -> Result<Message, RecvTimeoutError> {
        Ok(self.recv_message_with(Some(Instant::now() + timeout))?)
    }

    fn recv_message_with(&self, deadline: Option<Instant>) -> Result<Message, RecvFault> {
        let mut message = Message::default();
        let mut ends = Vec::new();
        let delivery = &mut Delivery {
            bytes: &mut message.bytes,
            ends: Some(&mut ends),
            refused: 0,
            block: None,
        };
        self.recv_message(delivery, deadline)?;
        message.refused = delivery.refused;
        message.take_ends(ends);
        Ok(message)
    }

    /// Stops assuming one thread also uses the other half of its pipe end
    /// (see [`Pipe::split_joined`](super::Pipe::split_joined)).
    #[cfg(feature = "serde")]
    pub(crate) fn unjoin(&mut self) {
        *self.half.joined.get_mut() = false;
    }

    /// Receives the next message into `bytes` (reused), or as its block's
    /// view when it came out of line, with the ends it carries: the typed
    /// layer's receive.
    #[cfg(feature = "serde")]
    pub(crate) fn recv_parts(
        &self,
        bytes: &mut Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<(Option<super::SharedBytes>, Vec<Arrived>), RecvFault> {
        let mut held = None;
        let mut ends = Vec::new();
        self.recv_message(
            &mut Delivery {
                bytes,
                ends: Some(&mut ends),
                refused: 0,
                block: Some(&mut held),
            },
            deadline,
        )?;
        Ok((
            held.map(|held| super::loan::shared(Some(held), Vec::new())),
            ends,
        ))
    }

    /// Takes the receive lock (after a check that the pipe is not broken).
    #[inline(always)]
    fn begin_recv(&self, deadline: Option<Instant>) -> Result<Guard<'_, Rx>, RecvFault> {
        if let Some(failure @ Failure::Protocol(_)) = self.half.failure() {
            return Err(failure.into());
        }
        // Another thread of this end may hold the lock while it waits for
        // a message: this call waits for it no longer than its own deadline,
        // and a `try_` call not at all (see `Lock::lock_until`).
        self.rx
            .lock_until(deadline, &self.half)
            .ok_or(RecvFault::Timeout)
    }

    /// What a receive's wait looks at: the half's scope, with the frames
    /// taken so far (for the wait's stream pacing).
    #[inline]
    fn wait_scope(&self, rx: &Rx) -> Scope<'_> {
        Scope {
            taken: Some(rx.ring.taken()),
            ..self.half.scope()
        }
    }

    /// The frame at the read position, now or after a wait.
    #[inline(always)]
    fn next_frame(&self, rx: &mut Rx, deadline: Option<Instant>) -> Result<Frame, RecvFault> {
        match rx.ring.peek() {
            Ok(Some(frame)) => Ok(frame),
            _ => {
                self.half.caught_up();
                let scope = self.wait_scope(rx);
                rx.waiter
                    .wait_missed(&scope, deadline, || rx.ring.peek())
                    .map_err(|stop| stop_to_error(&self.half, stop))
            }
        }
    }

    pub(super) fn recv_message(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        if self.attached() {
            return self.recv_merged_noted(out, deadline);
        }
        let received = self.receive(out, deadline);
        if let Err(fault) = &received {
            // An `Attach` read (or one read before, by a racing call): the
            // receive starts over, over every ring.
            if matches!(fault, RecvFault::Timeout) && self.attached() {
                return self.recv_merged_noted(out, deadline);
            }
            self.note_end(fault);
        }
        received
    }

    /// [`Receiver::recv_merged`], noting the end it may report.
    #[cold]
    #[inline(never)]
    fn recv_merged_noted(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        let received = self.recv_merged(out, deadline);
        if let Err(fault) = &received {
            self.note_end(fault);
        }
        received
    }

    #[inline(always)]
    pub(super) fn receive(
        &self,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        let mut rx = self.begin_recv(deadline)?;
        self.receive_in(&mut rx, out, deadline)
    }

    /// [`Receiver::receive`] under the receive lock, held by the caller.
    #[inline(always)]
    fn receive_in(
        &self,
        rx: &mut Rx,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
    ) -> Result<(), RecvFault> {
        if rx.partial.is_some() {
            return self.assemble(rx, out, deadline, None);
        }
        // The common case, kept short: the next frame (now, or after a
        // wait) is a whole message without handles. Anything else is put
        // together by `assemble`, which checks the frame from the start.
        let frame = self.next_frame(rx, deadline)?;
        if frame.tag() != PLAIN_WHOLE || frame.len() > self.half.limit.get() {
            return self.assemble(rx, out, deadline, Some(frame));
        }
        out.bytes.clear();
        rx.ring.read_append(frame, 0, frame.len(), out.bytes);
        rx.ring.consume(frame);
        rx.waiter.received(frame.len());
        self.half.ring_peer();
        if let Some(ends) = out.ends.as_deref_mut() {
            ends.clear();
        }
        self.half.disarm_bell();
        Ok(())
    }

    /// [`Receiver::recv_in_place`]'s common case: the next message is a
    /// whole frame without handles lying in one piece in the ring, and
    /// `read` reads it there, under the receive lock. Any other message
    /// (in pieces, out of line, carrying ends, wrapping at the ring's end)
    /// gives `read` back untaken (`Ok(Err(read))`).
    #[inline(always)]
    pub(super) fn read_in_ring<R, F: FnOnce(&[u8]) -> R>(
        &self,
        read: F,
    ) -> Result<Result<R, F>, RecvFault> {
        if self.attached() {
            return Ok(Err(read));
        }
        let mut rx = self
            .begin_recv(None)
            .inspect_err(|fault| self.note_end(fault))?;
        if rx.partial.is_some() {
            return Ok(Err(read));
        }
        let frame = self
            .next_frame(&mut rx, None)
            .inspect_err(|fault| self.note_end(fault))?;
        if frame.tag() != PLAIN_WHOLE || frame.len() > self.half.limit.get() {
            return Ok(Err(read));
        }
        rx.waiter.received(frame.len());
        let mut reading = Reading {
            rx,
            frame: Some(frame),
            half: &self.half,
        };
        let Some(body) = reading.rx.ring.body_in_place(frame) else {
            // Left unread for the general receive, which copies it.
            reading.frame = None;
            return Ok(Err(read));
        };
        // Declared after `reading`, so dropped first: a call on this half
        // from inside `read` panics rather than wait for itself.
        let _lent = self.rx.lend();
        Ok(Ok(read(body)))
    }

    /// Puts a message together from frames of any kind, resuming one kept
    /// across a timeout, starting with `first` if the caller peeked it.
    #[inline(never)]
    fn assemble(
        &self,
        rx: &mut Rx,
        out: &mut Delivery<'_>,
        deadline: Option<Instant>,
        mut first: Option<Frame>,
    ) -> Result<(), RecvFault> {
        out.bytes.clear();
        let mut asm = Assembly::default();
        if let Some(partial) = rx.partial.take() {
            *out.bytes = partial.bytes;
            asm = Assembly {
                total: Some(partial.total),
                ends: partial.ends,
                refused: partial.refused,
                attached: false,
            };
        }
        // Every frame is a step: a peer that keeps publishing frames that
        // never complete a message cannot hold this call past its deadline.
        let mut budget = Deadline::new(deadline);
        loop {
            let waited = match (first.take(), budget.step()) {
                (Some(frame), _) => Ok(frame),
                (None, true) => {
                    let scope = self.wait_scope(rx);
                    rx.waiter.wait(&scope, deadline, || rx.ring.peek())
                }
                (None, false) => Err(Stop::Timeout),
            };
            let taken = waited
                .map_err(|stop| stop_to_error(&self.half, stop))
                .and_then(|frame| {
                    let done = self.take_frame(&rx.ring, frame, &mut asm, out, &mut budget)?;
                    Ok((frame, done))
                });
            let (frame, done) = match taken {
                Ok(taken) => taken,
                Err(e) => {
                    if let (Some(total), RecvFault::Timeout | RecvFault::Io(_)) = (asm.total, &e) {
                        rx.partial = Some(Partial {
                            bytes: std::mem::take(out.bytes),
                            total,
                            ends: asm.ends,
                            refused: asm.refused,
                        });
                    }
                    return Err(e);
                }
            };
            self.finish_frame(rx, frame);
            if asm.attached {
                // Not a message: the caller's receive starts over, over
                // every ring (see `recv_message`).
                return Err(RecvFault::Timeout);
            }
            if done {
                rx.waiter.received(out.bytes.len());
                if let Some(ends) = out.ends.as_deref_mut() {
                    *ends = asm.ends;
                }
                out.refused = asm.refused;
                self.half.disarm_bell();
                return Ok(());
            }
        }
    }

    fn fault_to_error(&self, fault: Fault) -> RecvFault {
        match fault {
            Fault::Violation(why) => self.half.corrupt(why).into(),
            Fault::Local(e) => RecvFault::Io(e),
            Fault::Late => RecvFault::Timeout,
        }
    }

    /// Adds one checked frame to the message being assembled; `Ok(true)`
    /// when the message is complete. On an error the frame stays unread.
    fn take_frame(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        asm: &mut Assembly,
        out: &mut Delivery<'_>,
        budget: &mut Deadline,
    ) -> Result<bool, RecvFault> {
        let tag = Tag::decode(frame.tag()).map_err(|why| self.half.corrupt(why))?;
        let prefix = tag.prefix_len();
        if frame.len() < prefix {
            return Err(self.half.corrupt(Violation::FrameTooShort).into());
        }
        let payload = frame.len() - prefix;
        match (asm.total, tag.kind) {
            (None, Kind::Whole) => {
                self.check_len(payload as u64)?;
                self.take_handles(ring, frame, 0, tag.handles, None, asm, out, budget)?;
                ring.read_append(frame, prefix, payload, out.bytes);
                Ok(true)
            }
            (None, Kind::First) => {
                let mut field = [0u8; TOTAL];
                ring.read(frame, 0, &mut field);
                let announced = decode_total(&field);
                self.check_len(announced)?;
                if payload as u64 > announced {
                    return Err(self.half.corrupt(Violation::MessageLengthOutOfRange).into());
                }
                self.take_handles(ring, frame, TOTAL, tag.handles, None, asm, out, budget)?;
                ring.read_append(frame, prefix, payload, out.bytes);
                asm.total = Some(announced as usize);
                Ok(false)
            }
            (Some(expected), Kind::More | Kind::Last) => {
                let buf = &mut *out.bytes;
                if buf.len() + payload > expected {
                    return Err(self.half.corrupt(Violation::PiecesTooLong).into());
                }
                ring.read_append(frame, 0, payload, buf);
                let last = tag.kind == Kind::Last;
                if last && buf.len() != expected {
                    return Err(self.half.corrupt(Violation::PiecesTooShort).into());
                }
                Ok(last)
            }
            (Some(_), Kind::Abort) => {
                out.bytes.clear();
                *asm = Assembly::default();
                Ok(false)
            }
            (None, Kind::Attach) if payload == 0 => {
                if tag.handles != 1 {
                    return Err(self.half.corrupt(Violation::BadAttach).into());
                }
                let mut attached = Assembly::default();
                self.take_handles(ring, frame, 0, 1, None, &mut attached, out, budget)?;
                self.attach(attached.ends, attached.refused)
                    .map_err(|why| self.half.corrupt(why))?;
                asm.attached = true;
                Ok(false)
            }
            (None, Kind::Block) if payload == 0 => {
                let block = self.block_ref(ring, frame)?;
                self.take_handles(
                    ring,
                    frame,
                    BLOCK_REF,
                    tag.handles,
                    Some(block),
                    asm,
                    out,
                    budget,
                )?;
                Ok(true)
            }
            _ => Err(self.half.corrupt(Violation::FrameOutOfSequence).into()),
        }
    }

    /// Refuses a message longer than this end accepts.
    fn check_len(&self, len: u64) -> Result<(), RecvFault> {
        match len > self.half.limit.get() as u64 {
            true => Err(self.half.corrupt(Violation::MessageTooLarge).into()),
            false => Ok(()),
        }
    }

    /// The block a `Block` frame names, its length checked.
    fn block_ref(&self, ring: &Consumer<RingView>, frame: Frame) -> Result<BlockRef, RecvFault> {
        let mut head = [0u8; BLOCK_REF];
        ring.read(frame, 0, &mut head);
        let block = BlockRef::decode(&head);
        self.check_len(block.len)?;
        Ok(block)
    }

    /// Takes the ends a frame names from the ring's own handle queue, on a
    /// pipe whose two sides are in this process (see
    /// [`Sender::send_with`]): the oldest queued, which must be the ones
    /// named, in order. No block travels within a process.
    fn take_local(
        &self,
        ids: &[u64],
        block: Option<BlockRef>,
        asm: &mut Assembly,
    ) -> Result<(), RecvFault> {
        if block.is_some() {
            return Err(self.half.corrupt(Violation::HandlesWithinProcess).into());
        }
        let mut local = self.half.link.local();
        for &id in ids {
            let Some(end) = local.take(id) else {
                drop(local);
                return Err(self.half.corrupt(Violation::HandlesWithinProcess).into());
            };
            asm.ends.push(Arrived::Handle(end));
        }
        Ok(())
    }

    /// Takes from the link what a frame names (its `count` pipe ends, ids
    /// at body offset `at`, and its block if any), all or nothing; the
    /// block becomes the payload (a view if the caller wants one, else a
    /// copy, released at once).
    #[allow(clippy::too_many_arguments)]
    fn take_handles(
        &self,
        ring: &Consumer<RingView>,
        frame: Frame,
        at: usize,
        count: u16,
        block: Option<BlockRef>,
        asm: &mut Assembly,
        out: &mut Delivery<'_>,
        budget: &mut Deadline,
    ) -> Result<(), RecvFault> {
        if count == 0 && block.is_none() {
            return Ok(());
        }
        let ids = handle_ids(ring, frame, at, count);
        // The frame's writer sent its handles over the link the ring's
        // route had at the frame's position (see `RingLink`).
        self.half.follow_moves();
        let link = match self.half.link.at(frame.at()) {
            Named::Over(link) => link,
            Named::Queue => return self.take_local(&ids, block, asm),
            // Every frame below where the route let go of a link has been
            // read: this one's position and route disagree.
            Named::Gone => return Err(self.half.corrupt(Violation::RouteBoundary).into()),
        };
        let (ends, held) = link
            .collect(&ids, block, budget)
            .map_err(|fault| self.fault_to_error(fault))?;
        for end in ends {
            match Arrived::claimed(&link, end, &PipeOptions::new())
                .map_err(|c| self.half.corrupt(c.0))?
            {
                Some(end) => asm.ends.push(end),
                None => asm.refused += 1,
            }
        }
        match (held, out.block.as_deref_mut()) {
            (Some(held), Some(slot)) => *slot = Some(held),
            (Some(held), None) => crate::base::memcopy::extend(out.bytes, held.bytes()),
            (None, _) => {}
        }
        Ok(())
    }
}

/// The `count` handle ids a frame names from byte `at` of its body.
fn handle_ids(ring: &Consumer<RingView>, frame: Frame, at: usize, count: u16) -> Vec<u64> {
    (0..usize::from(count))
        .map(|i| {
            let mut id = [0u8; HANDLE_ID];
            ring.read(frame, at + i * HANDLE_ID, &mut id);
            decode_handle_id(&id)
        })
        .collect()
}
