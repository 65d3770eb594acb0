//! The sending half of a pipe end: messages into frames, frames into the
//! ring it alone writes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::clones::Gathered;
use super::error::SendFault;
use super::half::{Half, Setting};
use super::prefix::Orphan;
use super::route::LinkRef;
use super::wait::{Stop, Waiter};
use super::{Handle, SendError, SendTimeoutError, SendWithError, TrySendError};
use crate::base::lock::{Guard, Lock};
use crate::base::sync::{AtomicBool, Ordering};
use crate::base::wire::frame::{
    BLOCK_REF, HANDLE_ID, Kind, PLAIN_WHOLE, TOTAL, Tag, encode_handle_id, encode_total,
};
use crate::base::wire::{HANDLE_WINDOW, MAX_HANDLES};
use crate::transport::link::Failure;
#[cfg(feature = "serde")]
use crate::transport::ring::FrameWriter;
use crate::transport::ring::RingView;
use crate::transport::ring::region::MoveClaim;
use crate::transport::ring::{Corrupt, FRAME_HEADER, Producer, frame_size};

/// Why an end with a side held by another process is refused: one half's
/// other side is here and the other's is not.
pub(super) const NOT_YET_MOVABLE: &str = "a pipe end one of whose halves has its other side in this process \
     and the other in another cannot be sent on yet: split it, or send the halves apart";

/// Why an end with a side held by another process is refused: this
/// process kept no memory object for it (see `Region::object`).
pub(super) const NOT_KEPT: &str = "this process keeps the memory of at most a quarter of its descriptor \
     limit (RLIMIT_NOFILE) of pipes to send them on, and this end came past that bound (or is a \
     server's connection made before it): it stays here; raise the limit, or drop or send on \
     other ends first";

/// Why an end whose other side's holder keeps moving that side stays (see
/// `Half::mark_moving`).
const OTHER_SIDE_MOVING: &str = "the other side of this pipe end is being sent on by its holder, \
     which did not finish within 5 s (or the call's deadline): this end stays here; try again";

/// Why a receiver whose sender never ends naming its link stays, broken
/// (see `Half::begin_forward_receiver`).
const NAMING_NEVER_ENDED: &str = "the sender of this receiver did not finish naming its link \
     within 5 s (or the call's deadline), or said it switched links past what the ring holds, \
     so no boundary for the move could be fixed: the receiver stays here, and its pipe is \
     broken (its calls say RouteBoundary)";

/// Why an end whose other side's holder has gone stays: the record that
/// would have told that holder where the end went found its socket closed,
/// and the end could not go as a fresh one either (see `prefix::Orphan`:
/// one of its rings' other sides is still held, or taking out what it
/// holds failed).
const OTHER_SIDE_GONE: &str = "the process holding the other side of this pipe end has gone, and \
     what the end still holds could not be handed on in a fresh end: it stays here (receive what \
     it still holds; its calls then say Disconnected)";

/// Why a receiver whose sender is elsewhere stays: see
/// [`Half::begin_forward_receiver`](super::half::Half::forward_receiver).
const RECEIVE_FIRST: &str = "messages carrying descriptors, pipe ends or large payloads are on their \
     way to this receiver, or one is half received: receive them before sending it on";

/// Why ends are refused by a receiver that takes bytes only (see
/// [`Receiver::set_bytes_only`](super::Receiver::set_bytes_only)).
const BYTES_ONLY: &str = "the receiving end takes bytes only (it said so with \
     Receiver::set_bytes_only): no pipe end, half or descriptor can be sent to it";

/// The sending half of a pipe end, behind its mutex.
#[derive(Debug)]
pub(super) struct Tx {
    ring: Producer<RingView>,
    waiter: Waiter,
    /// A message was begun and abandoned; an `Abort` frame is owed.
    owes_abort: bool,
    /// The message in pieces whose rest found no room before its call's
    /// deadline (the `Abort` it owes is still owed): a send of the same
    /// message goes on from there (see [`Sender::try_send`]).
    resume: Option<Resume>,
    /// Pipe ends sent through this ring so far (wrapping).
    handles_sent: u32,
    /// The messages in flight, when a message capacity is set.
    counted: Option<InFlight>,
}

impl Tx {
    /// Counts a message whose last frame was just published, if a message
    /// capacity is set (room for it was waited for under the same lock).
    #[inline]
    fn note_message(&mut self) {
        if let Some(counted) = &mut self.counted {
            counted.ends.push_back(self.ring.tail());
        }
    }

    pub(super) fn new(ring: Producer<RingView>) -> Self {
        Self {
            ring,
            waiter: Waiter::default(),
            owes_abort: false,
            resume: None,
            handles_sent: 0,
            counted: None,
        }
    }
}

/// How [`Sender::send_with_local`] ended: done (sent, or failed with the
/// ends handed back), or the ring linked meanwhile (its receiving side left
/// the process), with the ends for the send over the link.
enum Local {
    Done(Result<(), SendWithError<SendFault>>),
    Linked(Vec<Handle>),
}

impl Tx {
    /// Counts `handles` more ends sent through this ring.
    pub(super) fn count_handles_sent(&mut self, handles: u16) {
        self.handles_sent = self.handles_sent.wrapping_add(u32::from(handles));
    }
}

/// A sender's count of its messages in flight (sent and not yet
/// received), for a message capacity (see
/// [`PipeOptions::capacity`](super::PipeOptions::capacity)):
/// the ring position where each ends, oldest first. One is received once
/// the consumer's published head has passed its end; the head is checked
/// on every read ([`Producer::released`]), so a peer that lies about it
/// can only make its own pipe look emptier or fuller, never this list
/// longer than `capacity` (nor than one entry per 8 ring bytes).
#[derive(Debug)]
struct InFlight {
    capacity: usize,
    ends: std::collections::VecDeque<u64>,
}

impl InFlight {
    /// Whether one more message may be sent: fewer than `capacity` are in
    /// flight once those the consumer has passed are forgotten.
    fn has_room(&mut self, ring: &mut Producer<RingView>) -> Result<bool, Corrupt> {
        while self.ends.len() >= self.capacity {
            match self.ends.front() {
                Some(&end) if ring.released(end)? => self.ends.pop_front(),
                _ => return Ok(false),
            };
        }
        Ok(true)
    }
}

/// Whether a frame of `kind` ends a message the receiver will deliver.
fn ends_message(kind: Kind) -> bool {
    matches!(kind, Kind::Whole | Kind::Last | Kind::Block | Kind::Attach)
}

/// What a send that moves ends writes to name them: a message, or (a
/// clone of this sender setting out) an `Attach` frame alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    Message,
    Attach,
}

/// A message sent in pieces, part way: which message (its length, the
/// address of the caller's bytes and a hash of them) and how much of it the
/// ring has taken.
#[derive(Debug)]
struct Resume {
    len: usize,
    at: usize,
    hash: u64,
    /// Payload bytes written so far (the `First` frame and any `More`).
    done: usize,
}

impl Resume {
    fn new(bytes: &[u8], done: usize) -> Self {
        Self {
            len: bytes.len(),
            at: bytes.as_ptr() as usize,
            hash: hash(bytes),
            done,
        }
    }

    /// How much of `bytes` was written, if `bytes` is this message: the
    /// same slice of the caller's memory holding the same bytes (a reused
    /// buffer refilled with another message is told apart by its hash).
    fn of(&self, bytes: &[u8]) -> Option<usize> {
        (self.same_place(bytes) && self.hash == hash(bytes)).then_some(self.done)
    }

    /// Whether `bytes` is the same slice of the caller's memory.
    fn same_place(&self, bytes: &[u8]) -> bool {
        self.len == bytes.len() && self.at == bytes.as_ptr() as usize
    }
}

/// A hash of a message, to tell a retry of it from another message in the
/// same buffer (SipHash-1-3: about 1 ms per 1.5 MB, paid once per retry
/// that finds room to go on).
fn hash(bytes: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = std::hash::DefaultHasher::new();
    hasher.write(bytes);
    hasher.finish()
}

fn stop_to_error(half: &Half, stop: Stop) -> SendFault {
    match stop {
        Stop::Timeout => SendFault::Timeout,
        Stop::Gone(failure) => half.gone(failure).into(),
        Stop::Corrupt(Corrupt(why)) => half.corrupt(why).into(),
    }
}

/// The sending half of a pipe end: it alone writes its ring. Made by
/// [`bytes::channel`](crate::bytes::channel) or
/// [`Pipe::split`](super::Pipe::split) (a [`Pipe`](super::Pipe) is a
/// `Sender` and a [`Receiver`](super::Receiver)); it can travel to another
/// process inside a message, as a pipe end can.
///
/// ```
/// let (a, b) = ferry::pipe()?;
/// let (tx, _rx) = a.split();
/// tx.send(b"one way")?;
/// assert_eq!(b.recv()?, b"one way");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Clones
///
/// A clone sends into the same ring, so many threads can send to one
/// receiver; the receiver sees `Disconnected` (after the messages sent
/// before) only once the last clone is gone (a [`Pipe`](super::Pipe)'s
/// own sending half counts as one). Each clone's messages arrive in the
/// order it sent them, whole, never interleaved with another's; between
/// clones, in the order their sends took the shared send lock. That lock
/// is not a queue: a sender finding it held polls it briefly, then
/// sleeps until its holder gives it back and wakes one sleeper, which
/// then races any sender just arriving. So no clone waits while the lock
/// is free, and how often each one gets it is the OS scheduler's
/// fairness, not a strict turn.
///
/// A clone can travel to another process (in [`Sender::send_with`]), and
/// on from there, as a clone of its own: two processes never share the
/// sending side of one ring (a dead or hostile holder of its lock could
/// stop the others), so the clone that is sent is given up for the sending
/// half of a new ring, whose receiving half first goes, over the ring the
/// clones share, to their receiver. The receiver reads every such ring
/// along with its own, one message from each in turn, so a clone that
/// floods its ring cannot starve the others; each clone's messages stay in
/// order; and it sees `Disconnected` once every clone, in any process, is
/// gone. Its [`ready_fd`](super::Receiver::ready_fd) (and so a `Select`
/// or tokio) wakes for all of them. Such a receiver can itself travel,
/// and the rings go with it, their unread messages included; a
/// [`Pipe`](super::Pipe) end whose sender has clones does not travel
/// (split it, and send the halves).
///
/// ```
/// let (tx, rx) = ferry::bytes::channel(16)?;
/// let workers: Vec<_> = (0..4u8)
///     .map(|i| {
///         let tx = tx.clone();
///         std::thread::spawn(move || tx.send(&[i]))
///     })
///     .collect();
/// drop(tx);
/// for worker in workers {
///     worker.join().unwrap()?;
/// }
/// let mut got = Vec::new();
/// while let Ok(message) = rx.recv() {
///     got.push(message[0]); // until the last clone is gone
/// }
/// got.sort();
/// assert_eq!(got, [0, 1, 2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Sender {
    pub(super) core: Arc<Core>,
    /// The largest message this handle sends.
    pub(super) limit: Setting,
    /// Messages from this many bytes travel out of line (to another process).
    pub(super) out_of_line: Setting,
}

/// What the clones of one sender share: their side of the ring and the
/// send lock.
#[derive(Debug)]
pub(super) struct Core {
    pub(super) half: Half,
    tx: Lock<Tx>,
    /// Set once a clone was made: a successful `try_send` then leaves the
    /// doorbell armed, since another clone may wait on it.
    cloned: AtomicBool,
}

impl Clone for Sender {
    /// Another sender into the same ring (see [Clones](Sender#clones)).
    ///
    /// ```
    /// let (tx, rx) = ferry::bytes::channel(4)?;
    /// let tx2 = tx.clone();
    /// tx.send(b"one")?;
    /// tx2.send(b"two")?;
    /// drop(tx);
    /// assert_eq!(rx.recv()?, b"one");
    /// assert_eq!(rx.recv()?, b"two");
    /// drop(tx2); // the last clone: the receiver sees the end
    /// assert!(rx.recv().is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn clone(&self) -> Self {
        // Relaxed: a hint read by this sender's own sends (see `cloned`).
        self.core.cloned.store(true, Ordering::Relaxed);
        Self {
            core: Arc::clone(&self.core),
            limit: self.limit.clone(),
            out_of_line: self.out_of_line.clone(),
        }
    }
}

impl Sender {
    /// Another handle on this sender's ring, for a loan that outlives its
    /// borrow: as a clone, but not counted as one by `try_send` (the loan
    /// only ever sends, never waits on the doorbell).
    pub(super) fn handle(&self) -> Sender {
        Self {
            core: Arc::clone(&self.core),
            limit: self.limit.clone(),
            out_of_line: self.out_of_line.clone(),
        }
    }

    pub(super) fn new(half: Half, options: &super::PipeOptions) -> Result<Self, Corrupt> {
        let ring = Producer::new(half.region.ring(half.ring()))?;
        let mut tx = Tx::new(ring);
        // A side that moved here counts on from the handles its receiver
        // has claimed (those still in flight were its old holder's).
        // Relaxed: a count, compared only (see `wait_for_room`).
        tx.handles_sent = half.sides().1.handles.load(Ordering::Relaxed);
        tx.counted = options.messages.map(|capacity| InFlight {
            capacity,
            ends: std::collections::VecDeque::new(),
        });
        Ok(Self {
            limit: half.limit.clone(),
            core: Arc::new(Core {
                half,
                tx: Lock::new(tx),
                cloned: AtomicBool::new(false),
            }),
            out_of_line: Setting::new(options.out_of_line),
        })
    }

    /// Whether other clones of this sender exist (then it travels as a
    /// clone of its own: see [Clones](Sender#clones)).
    pub(super) fn has_clones(&self) -> bool {
        Arc::strong_count(&self.core) > 1
    }

    /// Sends a message, waiting while the pipe is full.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// a.send(b"")?;             // empty messages are messages too
    /// assert_eq!(b.recv()?, b"");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendError::Disconnected`] once the receiving end is gone;
    /// [`SendError::TooLarge`] past the pipe's limit (nothing sent);
    /// [`SendError::Protocol`] if the peer broke the protocol;
    /// [`SendError::Io`] if the OS refused (a large message's shared memory).
    #[inline]
    pub fn send(&self, bytes: &[u8]) -> Result<(), SendError> {
        Ok(self.send_message(bytes, None)?)
    }

    /// Sends a message if the pipe has room for all of it now, never
    /// waiting.
    ///
    /// A message larger than the ring (one that travels in pieces, when
    /// no shared-memory block carries it: see [`OUT_OF_LINE`]) can never
    /// have room for all of it at once. Such a message is begun only when
    /// the ring is empty (the receiver has taken all before it); its
    /// pieces go in as far as they fit, and then `Full` says it is not
    /// sent *yet*: the pieces stay in the ring, and a `try_send` (or any
    /// send) of the same message (the same bytes at the same address, as
    /// a retry loop passes them) goes on from there, never writing a piece
    /// twice, so a receiver that keeps reading gets it whole after a few
    /// calls. A send of any other message first abandons it (the receiver
    /// drops the pieces; nothing of it is delivered). A smaller message in
    /// pieces is written only when all of it fits.
    ///
    /// [`OUT_OF_LINE`]: super::OUT_OF_LINE
    ///
    /// ```
    /// let (a, b) = ferry::PipeOptions::new().ring_size(4096).pipe()?;
    /// while a.sender().try_send(&[0; 1000]).is_ok() {}
    /// assert!(matches!(a.sender().try_send(&[0; 1000]), Err(ferry::TrySendError::Full)));
    /// b.recv()?;
    /// a.sender().try_send(&[0; 1000])?; // room again
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] when there is no room now (nothing sent),
    /// and when another thread of this end is in a send that does not end
    /// within about 100 µs (one waiting for room, or for the peer to read
    /// its socket): a `try_` call never waits for it (a ready descriptor
    /// armed by this answer is rung once that send is done); the rest as
    /// [`Sender::send`].
    pub fn try_send(&self, bytes: &[u8]) -> Result<(), TrySendError> {
        let sent = match self.send_message(bytes, Some(Instant::now())) {
            Err(SendFault::Timeout) => match self.core.half.armable_bell() {
                // Full while this sender has a doorbell: arm it, and look
                // once more (room made before the receiver saw it armed).
                Some(bell) => {
                    self.core.half.arm_bell(bell);
                    self.send_message(bytes, Some(Instant::now()))
                }
                None => Err(SendFault::Timeout),
            },
            other => other,
        };
        // Relaxed: see `Core::cloned`; a clone may wait on the bell.
        if sent.is_ok() && !self.core.cloned.load(Ordering::Relaxed) {
            self.core.half.disarm_bell();
        }
        Ok(sent?)
    }

    /// A descriptor that becomes readable when the pipe may have room
    /// again, for a poll loop of the caller's own: call
    /// [`Sender::try_send`] until it says `Full`, then wait for the
    /// descriptor to be readable, and try again. A `Full` answer arms it
    /// (the receiver then rings it each time it frees room, until a send
    /// succeeds; once the sender has been cloned, for good, as another
    /// clone may wait on it). It may be readable with too little room for
    /// the message: `try_send` then says `Full` again. Never read or write
    /// it yourself. Clones of one sender share it (the same descriptor).
    ///
    /// # Errors
    ///
    /// As [`Receiver::ready_fd`](super::Receiver::ready_fd).
    pub fn ready_fd(&self) -> std::io::Result<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Ok(self.core.half.doorbell()?.as_fd())
    }

    /// Sends a message, waiting at most `timeout` for room. The time counts
    /// from the call: waiting for another thread's send on this end (one
    /// that may itself wait for room) takes from it too.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (a, _b) = ferry::PipeOptions::new().ring_size(4096).pipe()?;
    /// while a.sender().try_send(&[0; 1000]).is_ok() {}
    /// let late = a.sender().send_timeout(&[0; 1000], Duration::from_millis(5));
    /// assert!(matches!(late, Err(ferry::SendTimeoutError::Timeout)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] if the pipe stayed full until the
    /// deadline (nothing of the message was delivered; a message in
    /// pieces stopped part way goes on with the next send of the same
    /// message, as after [`Sender::try_send`]); the rest as
    /// [`Sender::send`].
    pub fn send_timeout(&self, bytes: &[u8], timeout: Duration) -> Result<(), SendTimeoutError> {
        Ok(self.send_message(bytes, Some(Instant::now() + timeout))?)
    }

    /// Sends a message carrying pipe ends (or halves of them: a [`Pipe`],
    /// a [`Sender`], a [`Receiver`]) and descriptors to whoever holds the
    /// receiving side, in this process or another: the same call either
    /// way, so a program tested in one process runs split across two.
    ///
    /// Each attached end must have its twin in this process (as both ends of
    /// [`crate::pipe()`] do; for a half, the other side of its ring), or be
    /// a half whose other side is in another process (see *Forwarding a
    /// half* below). To another process, the moved end and its twin then
    /// talk through shared memory, watched over by this pipe's link; no
    /// descriptor stays open per pipe. Within this process nothing crosses a socket: the ends
    /// wait in the pipe's own queue, in order with the messages, and arrive
    /// as they left (an end sent to its own twin is a local pipe again).
    /// The receiver takes them with [`Receiver::recv_with`].
    ///
    /// At most [`HANDLE_WINDOW`] ends are in flight per pipe direction (sent
    /// and not yet received); past that this waits for the receiver, as
    /// [`Sender::send`] waits for room in a full pipe. A message of at
    /// least [`OUT_OF_LINE`](super::OUT_OF_LINE) bytes to another process
    /// travels in a pool block, ends or not.
    ///
    /// ```
    /// let (a, b) = ferry::pipe()?;
    /// let (c, d) = ferry::pipe()?;
    /// a.sender().send_with(b"take c", vec![c])?; // b is in this process too
    /// let mut message = b.receiver().recv_with()?;
    /// assert_eq!(message.bytes, b"take c");
    /// let c = message.pipes.pop().unwrap();
    /// c.send(b"through c")?;
    /// assert_eq!(d.recv()?, b"through c");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Ends that later leave the process
    ///
    /// Ends sent over a pipe within this process are held by the pipe
    /// until received, by id in the order sent; the frames in its ring name
    /// them by those ids, which mean nothing to another process. So an end
    /// (or half) of such a pipe cannot leave the process while ends sent
    /// over either of its rings here are still unreceived: that send says
    /// [`SendError::NotTransferable`] and hands it back; receive them first.
    /// (Carrying them along would mean re-sending each over the link and
    /// renaming it in frames already published in shared memory, which the
    /// receiver may be reading.) Moving it to another place in this process
    /// is always allowed: the queue goes with the pipe.
    ///
    /// # Forwarding a half
    ///
    /// A [`Sender`] whose receiver is in another process, or a [`Receiver`]
    /// whose sender is, can be sent on, to any process, any number of times
    /// (a broker handing a worker's input to a client, a plugin host wiring
    /// two plugins). It arrives with a link of its own to the process
    /// holding the other side, which this process introduces (a socket
    /// pair, and each side's process handle, so each sees the other die);
    /// from then on the two talk as if the pipe had been made between them
    /// (shared memory, the futex, doorbells, fds and pool blocks over the
    /// new link), and nothing passes through this process: it may exit as
    /// soon as the send returns. A sender sent back to its receiver's
    /// process is a pipe within that process again.
    ///
    /// What was sent before the move still arrives first, in order: a
    /// forwarded sender's earlier messages (with their descriptors and
    /// blocks) on the old link; a forwarded receiver's unread messages from
    /// the ring. Unread messages whose descriptors, pipe ends or blocks came
    /// to this process are taken out here and handed on with the receiver,
    /// read first by its new holder. A receiver with a message half received
    /// here is not forwarded: that send says
    /// [`SendError::NotTransferable`] and hands it back; receive the rest,
    /// then send it again.
    ///
    /// An end whose other side's holder has died goes on as what it is to
    /// its holder: a fresh end holding the messages the old one still held,
    /// which its new holder receives, in order, before `Disconnected`.
    ///
    /// An end (or half) forwards if this process kept its pipe's memory
    /// (it arrived here, or was made here), within a bound of a quarter of
    /// the descriptor limit; one with one half's other side here and the
    /// other's elsewhere does not ([`SendError::NotTransferable`]: send the
    /// halves apart). Forwarding costs one socket pair and a few records,
    /// and one descriptor per such end in each process it passes (its
    /// pipe's memory, kept so it can be sent on).
    ///
    /// An end can never travel over the ring it receives from (it could
    /// never receive itself); ends that hold each other in a longer loop
    /// within the process (a receiver sent over a pipe whose own receiver
    /// is then sent to the first) are kept until both pipes' senders go.
    ///
    /// # Errors
    ///
    /// As [`Sender::send`], and [`SendError::NotTransferable`] for ends that
    /// cannot travel (see its text), and for any end at all once the
    /// receiving side takes bytes only ([`Receiver::set_bytes_only`]:
    /// then nothing is written); every end not sent is handed back in the
    /// [`SendWithError`].
    ///
    /// [`Pipe`]: super::Pipe
    /// [`Receiver`]: super::Receiver
    /// [`Receiver::recv_with`]: super::Receiver::recv_with
    /// [`Receiver::set_bytes_only`]: super::Receiver::set_bytes_only
    pub fn send_with<E: Into<Handle>>(
        &self,
        bytes: &[u8],
        ends: Vec<E>,
    ) -> Result<(), SendWithError> {
        self.refuse_if_bytes_only(into_ends(ends))
            .and_then(|ends| self.send_with_deadline(bytes, ends, None, Naming::Message))
            .map_err(SendWithError::convert)
    }

    /// [`Sender::send_with`] if the pipe has room for the message and its
    /// ends now.
    ///
    /// # Errors
    ///
    /// [`TrySendError::Full`] when there is no room now, with every end
    /// handed back; the rest as [`Sender::send_with`].
    pub fn try_send_with<E: Into<Handle>>(
        &self,
        bytes: &[u8],
        ends: Vec<E>,
    ) -> Result<(), SendWithError<TrySendError>> {
        let now = Some(Instant::now());
        self.refuse_if_bytes_only(into_ends(ends))
            .and_then(|ends| self.send_with_deadline(bytes, ends, now, Naming::Message))
            .map_err(SendWithError::convert)
    }

    /// [`Sender::send_with`], waiting at most `timeout` for room.
    ///
    /// # Errors
    ///
    /// [`SendTimeoutError::Timeout`] if there was no room by the deadline,
    /// with the ends not sent handed back; the rest as
    /// [`Sender::send_with`].
    pub fn send_with_timeout<E: Into<Handle>>(
        &self,
        bytes: &[u8],
        ends: Vec<E>,
        timeout: Duration,
    ) -> Result<(), SendWithError<SendTimeoutError>> {
        let deadline = Some(Instant::now() + timeout);
        self.refuse_if_bytes_only(into_ends(ends))
            .and_then(|ends| self.send_with_deadline(bytes, ends, deadline, Naming::Message))
            .map_err(SendWithError::convert)
    }

    /// Hands `ends` back if there is one and this sender's receiver takes
    /// bytes only (see
    /// [`Receiver::set_bytes_only`](super::Receiver::set_bytes_only)),
    /// before anything is written or any end is touched.
    fn refuse_if_bytes_only(
        &self,
        ends: Vec<Handle>,
    ) -> Result<Vec<Handle>, SendWithError<SendFault>> {
        if ends.is_empty() || !self.core.half.peer_bytes_only() {
            return Ok(ends);
        }
        Err(SendWithError {
            error: SendFault::NotTransferable(BYTES_ONLY),
            handles: ends,
        })
    }

    /// [`Sender::send_with`] until `deadline`, with the fault as it is. Not
    /// refused by a receiver that takes bytes only: for what ferry hands
    /// on itself, messages sent before a receiver moved (`prefix.rs`).
    pub(super) fn send_with_until(
        &self,
        bytes: &[u8],
        ends: Vec<Handle>,
        deadline: Option<Instant>,
    ) -> Result<(), SendWithError<SendFault>> {
        self.send_with_deadline(bytes, ends, deadline, Naming::Message)
    }

    /// Moves `ends` with a message: the ends' records cross the socket
    /// first, then a `First` frame naming them (with no payload), then the
    /// payload as `Last` (or `More`…`Last`). Room for that `First` and for
    /// an `Abort` is waited for before any record leaves, so ends whose
    /// records went out are always named by a frame: the peer claims them,
    /// and if the message is then abandoned it drops them (their twins here
    /// see `Disconnected`); they never pile up unclaimed at the peer.
    ///
    /// A message of [`OUT_OF_LINE`](super::OUT_OF_LINE) bytes or more goes
    /// in a pool block instead: its block is lent before any record leaves
    /// (given back if one fails), and one `Block` frame names the block and
    /// the ends. Over a pipe within this process, see
    /// [`Sender::send_with_local`].
    ///
    /// A sender with clones among `ends` sets out as a clone of its own
    /// (see [`Sender::clone_to_travel`]).
    fn send_with_deadline(
        &self,
        bytes: &[u8],
        ends: Vec<Handle>,
        deadline: Option<Instant>,
        kind: Naming,
    ) -> Result<(), SendWithError<SendFault>> {
        let ends = match self.core.half.link.get() {
            None => match self.send_with_local(bytes, ends, deadline, kind) {
                Local::Done(result) => return result,
                Local::Linked(ends) => ends,
            },
            Some(_) => ends,
        };
        let ends = clones_to_travel(ends, deadline)?;
        // Rings of clones that left this process and still wait in a
        // receiver's handle queue here are taken in first: the receiver
        // may then leave with them (see `Gathered`).
        for end in &ends {
            if let Handle::Receiver(rx) = end {
                rx.settle_attaches();
            }
        }
        // The claims stay held until the ends have moved (their rings'
        // link cells set) or been handed back.
        // The link is chosen again once the naming section has begun.
        let (_, claims) = match self.check_transfer(bytes, &ends) {
            Ok(checked) => checked,
            Err(error) => {
                return Err(SendWithError {
                    error,
                    handles: ends,
                });
            }
        };
        let mut tx = match self.begin_send(bytes.len(), deadline) {
            Ok(tx) => tx,
            Err(error) => {
                return Err(SendWithError {
                    error,
                    handles: ends,
                });
            }
        };
        if let Err(error) = self.wait_for_room(&mut tx, ends.len(), deadline) {
            return Err(SendWithError {
                error,
                handles: ends,
            });
        }
        // From here until the frame naming them is out, the records go on
        // the link the receiving side's holder reads now.
        let naming = self.core.half.begin_naming();
        let Some(link) = naming.link().map(Arc::clone) else {
            return Err(SendWithError {
                error: SendFault::NotTransferable("the receiving side came back to this process"),
                handles: ends,
            });
        };
        let mut block = match self.block_for(&link, bytes, deadline) {
            Ok(block) => block,
            Err(error) => {
                return Err(SendWithError {
                    error,
                    handles: ends,
                });
            }
        };
        let mut id_bytes = Vec::with_capacity(ends.len() * HANDLE_ID);
        // Where each end's sides stand as they leave: once its record is
        // out, its new holder may use them before this call ends.
        let mut leaving: Vec<[u64; 2]> = ends.iter().map(Handle::leaving_at).collect();
        let mut ends = ends;
        // Ends sent as stand-ins (see `Owed`): what each is still owed.
        let mut owed: Vec<Owed> = Vec::new();
        for i in 0..ends.len() {
            // A receiver reading clones' rings, and an end whose other
            // side's holder has gone, go as stand-ins.
            let gathers = matches!(&ends[i], Handle::Receiver(rx) if rx.reads_clone_rings());
            let sent = match gathers {
                true => Err(None),
                false => ends[i].send_region(&link, deadline).map_err(Some),
            };
            let sent = match sent {
                Ok(id) => Ok(id),
                Err(None) => send_stand_in(&mut ends, i, &mut leaving, &mut owed, &link, deadline),
                Err(Some(e))
                    if is_hang_up(&e) && link.failure().is_none() && ends[i].is_orphaned() =>
                {
                    send_stand_in(&mut ends, i, &mut leaving, &mut owed, &link, deadline)
                }
                Err(Some(e)) => Err(e),
            };
            match sent {
                Ok(id) => id_bytes.extend_from_slice(&encode_handle_id(id)),
                Err(e) => {
                    if let Some((id, block)) = block.take() {
                        let _ = link.with_pool(|pool| pool.give_back(id, block));
                    }
                    // A receiver with messages naming the old link on their way
                    // to it stays here: the caller receives them first.
                    let error = match e.kind() {
                        std::io::ErrorKind::InvalidInput => {
                            SendFault::NotTransferable(RECEIVE_FIRST)
                        }
                        std::io::ErrorKind::ResourceBusy => {
                            SendFault::NotTransferable(OTHER_SIDE_MOVING)
                        }
                        std::io::ErrorKind::InvalidData => {
                            SendFault::NotTransferable(NAMING_NEVER_ENDED)
                        }
                        // A closed socket that is not this pipe's link is
                        // the end's own (its other side's holder gone):
                        // this pipe is fine.
                        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                            if link.failure().is_none() =>
                        {
                            SendFault::NotTransferable(OTHER_SIDE_GONE)
                        }
                        _ => self.core.half.io_error(e),
                    };
                    // The ends already sent are named and dropped; the rest
                    // (this one included: its object is kept) go back.
                    let abandoned = self.abandon_ends(&mut tx, &id_bytes);
                    let mut handles = Owed::take_back(owed);
                    handles.extend(ends.into_iter().skip(i));
                    return Err(SendWithError {
                        error: abandoned.err().unwrap_or(error),
                        handles,
                    });
                }
            }
        }
        let sent = match block {
            Some((id, block)) => {
                let len = bytes.len();
                let named =
                    self.push_block_naming(&mut tx, &link, (id, block), len, &id_bytes, deadline);
                drop(naming);
                named
            }
            None if kind == Naming::Attach => {
                let named = self.push_attach(&mut tx, &id_bytes, deadline);
                drop(naming);
                named
            }
            None => {
                let named = self.push_ends(&mut tx, bytes.len(), &id_bytes, deadline);
                // The rest of the message names nothing.
                drop(naming);
                named.and_then(|()| self.push_rest(&mut tx, bytes, deadline))
            }
        };
        if let Err(error) = sent {
            return Err(SendWithError {
                error,
                handles: Owed::take_back(owed),
            });
        }
        for (end, at) in ends.into_iter().zip(leaving) {
            end.moved_over(&link, at);
        }
        // What the stand-ins are owed goes after them with nothing of this
        // send held (a receiver stood in for is sent now, and claims its
        // own ring's move).
        drop((tx, claims));
        for owed in owed {
            owed.deliver(deadline);
        }
        Ok(())
    }

    /// [`Sender::send_with`] over a ring whose receiving side is in this
    /// process: the ends go into the ring's handle queue (no socket, no
    /// descriptor duplicated) and a `First` frame names them by their ids
    /// there, then the payload follows as across processes. The queue and
    /// the frame are written under this ring's move claim, the one a move
    /// of the receiving side takes too: either the move finds the ends
    /// queued and is refused (see the docs of [`Sender::send_with`]), or
    /// this finds the ring linked and sends over the link.
    /// `Local::Linked` hands the ends back for that.
    fn send_with_local(
        &self,
        bytes: &[u8],
        ends: Vec<Handle>,
        deadline: Option<Instant>,
        kind: Naming,
    ) -> Local {
        let fail = |error, ends| {
            Local::Done(Err(SendWithError {
                error,
                handles: ends,
            }))
        };
        let _claims = match self.check_ends(bytes, &ends) {
            Ok(claims) => claims,
            Err(error) => return fail(error, ends),
        };
        let mut tx = match self.begin_send(bytes.len(), deadline) {
            Ok(tx) => tx,
            Err(error) => return fail(error, ends),
        };
        if let Err(error) = self.wait_for_room(&mut tx, ends.len(), deadline) {
            return fail(error, ends);
        }
        let own = match self.claim_own_ring(deadline) {
            Ok(own) => own,
            Err(error) => return fail(error, ends),
        };
        if self.core.half.link.get().is_some() {
            return Local::Linked(ends);
        }
        let count = ends.len();
        let id_bytes = match self.queue_locally(ends) {
            Ok(id_bytes) => id_bytes,
            Err((error, ends)) => return fail(error, ends),
        };
        let named = match kind {
            Naming::Message => self.push_ends(&mut tx, bytes.len(), &id_bytes, deadline),
            Naming::Attach => self.push_attach(&mut tx, &id_bytes, deadline),
        };
        if let Err(error) = named {
            // No frame names them: they come back, in order.
            let mut local = self.core.half.link.local();
            let mut back: Vec<Handle> = (0..count).map_while(|_| local.take_back()).collect();
            back.reverse();
            return fail(error, back);
        }
        drop(own);
        if kind == Naming::Attach {
            return Local::Done(Ok(()));
        }
        let sent = self.push_rest(&mut tx, bytes, deadline);
        Local::Done(sent.map_err(|error| SendWithError {
            error,
            handles: Vec::new(),
        }))
    }

    /// Queues `ends` in this ring's handle queue; returns the ids naming
    /// them, or hands them back if the receiving side is gone.
    fn queue_locally(&self, ends: Vec<Handle>) -> Result<Vec<u8>, (SendFault, Vec<Handle>)> {
        let mut local = self.core.half.link.local();
        // Acquire: pairs with the Release store of `closed` in the
        // receiving side's drop, which then empties this queue under its
        // lock: ends queued after that would never be dropped.
        if self.core.half.sides().1.closed.load(Ordering::Acquire) != 0 {
            return Err((self.core.half.gone(Failure::HungUp).into(), ends));
        }
        let mut id_bytes = Vec::with_capacity(ends.len() * HANDLE_ID);
        for end in ends {
            id_bytes.extend_from_slice(&encode_handle_id(local.push(end)));
        }
        Ok(id_bytes)
    }

    /// Claims the move of this half's own ring, waiting while a thread
    /// moving its receiving side holds it (that move ends by its own
    /// deadline; nothing it waits for waits for this).
    fn claim_own_ring(&self, deadline: Option<Instant>) -> Result<MoveClaim, SendFault> {
        let mut looks = 0u32;
        loop {
            if let Some(claim) = self.core.half.region.claim_move(self.core.half.ring()) {
                return Ok(claim);
            }
            if is_past(deadline) {
                return Err(SendFault::Timeout);
            }
            looks += 1;
            match looks < 64 {
                true => crate::base::sys::yield_cpu(),
                false => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Pushes the `First` frame announcing a message of `len` bytes and
    /// naming the ends in `id_bytes` (room for it was waited for).
    fn push_ends(
        &self,
        tx: &mut Tx,
        len: usize,
        id_bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let handles = (id_bytes.len() / HANDLE_ID) as u16;
        let first = Tag {
            kind: Kind::First,
            handles,
        };
        let total = encode_total(len as u64);
        self.push(tx, first, &[&total, id_bytes], deadline)?;
        tx.count_handles_sent(handles);
        Ok(())
    }

    /// Names the receiving half in `id_bytes` (its record went out, or it
    /// is queued within this process) in an `Attach` frame: the receiver
    /// reads it along with this ring from then on.
    fn push_attach(
        &self,
        tx: &mut Tx,
        id_bytes: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let handles = (id_bytes.len() / HANDLE_ID) as u16;
        let attach = Tag {
            kind: Kind::Attach,
            handles,
        };
        self.push(tx, attach, &[id_bytes], deadline)?;
        tx.count_handles_sent(handles);
        Ok(())
    }

    /// A clone of this sender to send to another process, this one given
    /// up for it: the sending half of a new ring (this ring's size, wait
    /// and limits), whose receiving half goes first, in an `Attach` frame
    /// over this ring, to the receiver this sender's clones send to. That
    /// receiver reads the new ring along with theirs (in turns: no clone
    /// can starve another), and sees the end once every clone's ring has
    /// (see [`Sender#clones`]). On failure this sender comes back.
    fn clone_to_travel(self, deadline: Option<Instant>) -> Result<Sender, (SendFault, Sender)> {
        let options = super::PipeOptions::new().ring_size(self.ring_size());
        let (a, b) = match options.pipe() {
            Ok(pipe) => pipe,
            Err(e) => return Err((SendFault::Io(e), self)),
        };
        let (tx, back_rx) = a.split();
        let (back_tx, rx) = b.split();
        // One way only: the ring back is closed at once.
        drop((back_rx, back_tx));
        tx.set_wait(self.wait());
        tx.limit.set(self.limit.get());
        tx.out_of_line.set(self.out_of_line.get());
        // The receiver takes bytes only from every clone: the new ring says
        // so from the start (the receiver says it again as it attaches it).
        rx.half.set_bytes_only(self.core.half.peer_bytes_only());
        let attach = vec![Handle::Receiver(rx)];
        match self.send_with_deadline(&[], attach, deadline, Naming::Attach) {
            Ok(()) => Ok(tx),
            Err(refused) => Err((refused.error, self)),
        }
    }

    /// Sends `rx` in an `Attach` frame over this ring: its receiver reads
    /// `rx`'s ring along with this one from then on (see `clones.rs`).
    pub(super) fn attach_until(
        &self,
        rx: super::Receiver,
        deadline: Option<Instant>,
    ) -> Result<(), SendWithError<SendFault>> {
        self.send_with_deadline(&[], vec![Handle::Receiver(rx)], deadline, Naming::Attach)
    }

    /// Names the ends in `id_bytes`, whose records went out, in a message
    /// that is at once abandoned, so the peer claims and drops them.
    fn abandon_ends(&self, tx: &mut Tx, id_bytes: &[u8]) -> Result<(), SendFault> {
        if id_bytes.is_empty() {
            return Ok(());
        }
        let now = Some(Instant::now());
        self.push_ends(tx, 0, id_bytes, now)?;
        let abort = Tag {
            kind: Kind::Abort,
            handles: 0,
        };
        self.push(tx, abort, &[], now)
    }

    /// Stops assuming one thread also uses the other half of its pipe end
    /// (see [`Pipe::split_joined`](super::Pipe::split_joined)).
    #[cfg(feature = "serde")]
    pub(crate) fn unjoin(&mut self) {
        // Relaxed: see `Pipe::split`.
        self.core.half.joined.store(false, Ordering::Relaxed);
    }

    /// Sends one message whose bytes `write` puts in place, straight into
    /// the ring (the typed layer's encoder), once at least `min` bytes of
    /// room are free. `write` may put at most what fits in one frame of a
    /// small message (and this pipe's limit); if it puts more, or aborts,
    /// nothing is sent and this returns `Ok(false)`: the caller sends the
    /// message another way.
    #[cfg(feature = "serde")]
    pub(crate) fn send_written(
        &self,
        min: usize,
        mut write: impl FnMut(&mut Written<'_, '_>),
        deadline: Option<Instant>,
    ) -> Result<bool, SendFault> {
        let mut tx = self.begin_send(0, deadline)?;
        let max = self
            .limit
            .get()
            .min(self.out_of_line.get().saturating_sub(1))
            .min(tx.ring.max_body() / 2);
        if min > max {
            return Ok(false);
        }
        let scope = self.core.half.scope();
        let Tx { ring, waiter, .. } = &mut *tx;
        let raw = Tag {
            kind: Kind::Whole,
            handles: 0,
        }
        .encode();
        let sent = waiter
            .wait(&scope, deadline, || {
                ring.try_push_with(raw, min, max, &mut |frame: &mut FrameWriter<
                    '_,
                    RingView,
                >| {
                    write(&mut Written(frame))
                })
            })
            .map_err(|stop| stop_to_error(&self.core.half, stop))?;
        if sent {
            tx.note_message();
            self.core.half.ring_peer();
        }
        Ok(sent)
    }

    /// Whether a message of `len` bytes would go out of line, in a pool
    /// block (then the typed layer encodes it straight into a loaned one).
    #[cfg(feature = "serde")]
    pub(crate) fn goes_out_of_line(&self, len: usize) -> bool {
        len >= self.out_of_line.get()
            && self.core.half.link().is_some()
            && crate::transport::pool::block::class_for(len).is_some()
    }

    /// Whether the receiving side of this half's ring is in another process
    /// (then ends sent with a message cross the link; within this process
    /// they wait in the ring's own queue).
    pub(crate) fn is_linked(&self) -> bool {
        self.core.half.link.get().is_some()
    }

    /// The link the ends will travel over, once they may, and the claims
    /// on moving their rings' sides (see [`Handle::claim_move`]).
    fn check_transfer(
        &self,
        bytes: &[u8],
        ends: &[Handle],
    ) -> Result<(LinkRef<'_>, Vec<MoveClaim>), SendFault> {
        let Some(link) = self.core.half.link.get() else {
            return Err(SendFault::NotTransferable(
                "pipe ends travel over a link only to another process",
            ));
        };
        let claims = self.check_ends(bytes, ends)?;
        // Under the claims: no send within this process queues more.
        let queued = |h: &Half| !h.link.local().is_empty();
        if ends.iter().any(|end| end.halves().any(queued)) {
            return Err(SendFault::NotTransferable(
                "ends or descriptors sent over this pipe within this process are not yet \
                 received; it can leave the process once they are",
            ));
        }
        Ok((link, claims))
    }

    /// Checks `ends` may travel with a message of `bytes` on this half, and
    /// claims the move of their rings' sides (see [`Handle::claim_move`]).
    fn check_ends(&self, bytes: &[u8], ends: &[Handle]) -> Result<Vec<MoveClaim>, SendFault> {
        if ends.len() > MAX_HANDLES {
            return Err(SendFault::NotTransferable(
                "more than 253 pipe ends in one message",
            ));
        }
        if self.is_linked() && ends.iter().any(Handle::has_clones) {
            return Err(SendFault::NotTransferable(
                "a pipe end whose sender has clones cannot travel to another process: split it \
                 and send its halves (a sender with clones travels as a clone of its own)",
            ));
        }
        // A receiver goes with its clones' rings (see `Gathered`), and so
        // does a whole end forwarded (see `prefix.rs`); a whole end made
        // here does not.
        let gathers_not = |end: &Handle| {
            matches!(end, Handle::Pipe(_)) && end.reads_clones() && !end.is_forwarded()
        };
        if self.is_linked() && ends.iter().any(gathers_not) {
            return Err(SendFault::NotTransferable(
                "a whole pipe end whose other end is in this process, and whose receiving half \
                 reads the rings of its sender's clones in other processes, cannot travel to \
                 another process: split it and send its halves",
            ));
        }
        if let Some(why) = ends.iter().find_map(Handle::why_unmovable) {
            return Err(SendFault::NotTransferable(why));
        }
        let twins = |(i, e): (usize, &Handle)| ends[..i].iter().any(|f| e.shares_a_ring(f));
        if ends.iter().enumerate().any(twins) {
            return Err(SendFault::NotTransferable(
                "both sides of one ring cannot travel together",
            ));
        }
        let reads_this_ring = |h: &Half| Arc::ptr_eq(&h.region, &self.core.half.region);
        let reads_this_ring = |h: &Half| reads_this_ring(h) && h.ring() == self.core.half.ring();
        if ends.iter().any(|end| end.halves().any(reads_this_ring)) {
            return Err(SendFault::NotTransferable(
                "a pipe end cannot travel over the ring it receives from",
            ));
        }
        if bytes.len() > self.limit.get() {
            return Err(SendFault::TooLarge {
                len: bytes.len(),
                limit: self.limit.get(),
            });
        }
        let mut claims = Vec::new();
        for end in ends {
            if !end.claim_move(&mut claims) {
                return Err(SendFault::NotTransferable(
                    "another thread is sending the other side of this pipe end's ring",
                ));
            }
        }
        // Checked again under the claims: a move that finished between the
        // first check and the claims has set its rings' links.
        if let Some(why) = ends.iter().find_map(Handle::why_unmovable) {
            return Err(SendFault::NotTransferable(why));
        }
        Ok(claims)
    }

    /// Waits until `count` more ends fit in this direction's window and
    /// the ring has room for the `First` frame naming them and an `Abort`
    /// (room only grows while the send lock is held).
    fn wait_for_room(
        &self,
        tx: &mut Tx,
        count: usize,
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let scope = self.core.half.scope();
        // The frame naming them: `First` or (out of line) `Block`.
        let need = frame_size(TOTAL.max(BLOCK_REF) + count * HANDLE_ID) + FRAME_HEADER;
        let Tx {
            ring,
            waiter,
            handles_sent,
            ..
        } = tx;
        let sent = *handles_sent;
        waiter
            .wait(&scope, deadline, || {
                // Relaxed: a count only compared here; the receiver's wake
                // (with its fence) makes us look again.
                let claimed = scope.peer().handles.load(Ordering::Relaxed);
                // Signed: past a move, the receiver may have claimed more
                // than this holder sent (its old holder's too): none of
                // this holder's is in flight then.
                let in_flight = (sent.wrapping_sub(claimed) as i32).max(0) as usize;
                let window = in_flight == 0 || in_flight + count <= HANDLE_WINDOW;
                Ok((window && ring.free()? >= need).then_some(()))
            })
            .map_err(|stop| stop_to_error(&self.core.half, stop))
    }

    fn send_message(&self, bytes: &[u8], deadline: Option<Instant>) -> Result<(), SendFault> {
        // The common case, kept short: a small message into a ring with room
        // for it now, on a pipe in good order. Anything else (a full ring,
        // a large message, an owed abort, a failure to report) takes the
        // general path below, which checks it all again.
        if bytes.len() < self.out_of_line.get()
            && bytes.len() <= self.limit.get()
            && self.core.half.in_good_order()
        {
            let Some(mut tx) = self.core.tx.lock_until(deadline, &self.core.half) else {
                return Err(SendFault::Timeout);
            };
            if !tx.owes_abort
                && tx.counted.is_none()
                && bytes.len() <= tx.ring.max_body() / 2
                && tx.ring.try_push(PLAIN_WHOLE, &[bytes]) == Ok(true)
            {
                drop(tx);
                self.core.half.ring_peer();
                return Ok(());
            }
        }
        self.send_general(bytes, deadline)
    }

    /// [`Sender::send_in_place`]'s common case: a message small enough
    /// for one frame in the ring, which `write` writes there, under the
    /// send lock, once there is room (or into a spare buffer then copied, if
    /// the frame would wrap at the ring's end). Any other message gives
    /// `write` back unused (`Ok(Err(write))`).
    #[inline(always)]
    pub(super) fn write_in_ring<F: FnOnce(&mut [u8])>(
        &self,
        len: usize,
        write: F,
    ) -> Result<Result<(), F>, SendFault> {
        if len >= self.out_of_line.get() || len > self.limit.get() {
            return Ok(Err(write));
        }
        let mut tx = self.begin_send(len, None)?;
        if len > tx.ring.max_body() / 2 {
            return Ok(Err(write));
        }
        // `write` runs under the send lock: a call on this half from
        // inside it panics rather than wait for itself.
        let lent = self.core.tx.lend();
        let write = match tx.ring.try_push_in_place(PLAIN_WHOLE, len, write) {
            Ok(Ok(())) => {
                tx.note_message();
                drop((lent, tx));
                self.core.half.ring_peer();
                return Ok(Ok(()));
            }
            Ok(Err(write)) => write,
            Err(Corrupt(why)) => return Err(self.core.half.corrupt(why).into()),
        };
        self.write_in_ring_later(&mut tx, len, write)?;
        drop(lent);
        Ok(Ok(()))
    }

    /// [`Sender::write_in_ring`] once the ring is too full for the frame,
    /// or the frame would wrap at its end: waits for room, then writes in
    /// place, or into a spare buffer and copies that.
    #[inline(never)]
    fn write_in_ring_later(
        &self,
        tx: &mut Tx,
        len: usize,
        write: impl FnOnce(&mut [u8]),
    ) -> Result<(), SendFault> {
        let scope = self.core.half.scope();
        let need = frame_size(len);
        let Tx { ring, waiter, .. } = tx;
        waiter
            .wait(&scope, None, || Ok((ring.free()? >= need).then_some(())))
            .map_err(|stop| stop_to_error(&self.core.half, stop))?;
        // Room only grows while the send lock is held: this cannot be full.
        let write = match ring.try_push_in_place(PLAIN_WHOLE, len, write) {
            Ok(Ok(())) => {
                tx.note_message();
                self.core.half.ring_peer();
                return Ok(());
            }
            Ok(Err(write)) => write,
            Err(Corrupt(why)) => return Err(self.core.half.corrupt(why).into()),
        };
        let mut copy = super::spare::zeroed(len);
        write(&mut copy);
        let whole = Tag {
            kind: Kind::Whole,
            handles: 0,
        };
        let pushed = self.push(tx, whole, &[&copy], None);
        super::spare::give(copy);
        pushed
    }

    /// [`Sender::send_message`] for every case.
    #[inline(never)]
    fn send_general(&self, bytes: &[u8], deadline: Option<Instant>) -> Result<(), SendFault> {
        let mut tx = self.lock_send(bytes.len(), deadline)?;
        if let Some(done) = (tx.resume.as_ref())
            .filter(|resume| resume.same_place(bytes))
            .map(|resume| resume.done)
        {
            let piece = tx.ring.max_body() / 4;
            let next = frame_size(piece.min(bytes.len() - done));
            // A `try_` call with no room to go on answers at once, without
            // hashing the message.
            if is_past(deadline) && tx.ring.free().map_err(|c| self.corrupt(c))? < next {
                return Err(SendFault::Timeout);
            }
            if let Some(done) = tx.resume.as_ref().and_then(|resume| resume.of(bytes)) {
                return self.push_pieces(&mut tx, bytes, Some(done), deadline);
            }
        }
        self.settle_abort(&mut tx, deadline)?;
        // Between processes, large messages go out of line; one larger than
        // the largest block travels in pieces.
        let small = bytes.len() < self.out_of_line.get()
            || self.core.half.link().is_none()
            || crate::transport::pool::block::class_for(bytes.len()).is_none();
        if small && bytes.len() <= tx.ring.max_body() / 2 {
            let whole = Tag {
                kind: Kind::Whole,
                handles: 0,
            };
            return self.push(&mut tx, whole, &[bytes], deadline);
        }
        if !small {
            let naming = self.core.half.begin_naming();
            if let Some(link) = naming.link()
                && self.send_out_of_line(&mut tx, link, bytes, deadline)?
            {
                return Ok(());
            }
        }
        if is_past(deadline) && !self.may_begin_pieces(&mut tx, bytes.len())? {
            return Err(SendFault::Timeout);
        }
        self.push_pieces(&mut tx, bytes, None, deadline)
    }

    /// Whether a `try_` call begins a message of `len` bytes in pieces
    /// now: if all its frames fit (then it is all sent), or if it can
    /// never fit whole and the ring is empty (see [`Sender::try_send`]).
    fn may_begin_pieces(&self, tx: &mut Tx, len: usize) -> Result<bool, SendFault> {
        let first = self.first_piece(tx).min(len);
        let piece = tx.ring.max_body() / 4;
        let rest = len - first;
        let mut need = frame_size(TOTAL + first) + (rest / piece) * frame_size(piece);
        if !rest.is_multiple_of(piece) || rest == 0 {
            need += frame_size(rest % piece);
        }
        let free = tx.ring.free().map_err(|c| self.corrupt(c))?;
        let capacity = self.core.half.region.capacity();
        Ok(need <= free || (need > capacity && free == capacity))
    }

    /// Writes a message in pieces: `First` (unless `done` says how much
    /// was written already), then `More`…`Last`. If the deadline comes
    /// part way, the message is kept for a send of the same message to go
    /// on with (its `Abort` owed meanwhile); any other failure abandons it.
    fn push_pieces(
        &self,
        tx: &mut Tx,
        bytes: &[u8],
        done: Option<usize>,
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let done = match done {
            Some(done) => done,
            None => {
                let first = self.first_piece(tx).min(bytes.len());
                let tag = Tag {
                    kind: Kind::First,
                    handles: 0,
                };
                let total = encode_total(bytes.len() as u64);
                self.push(tx, tag, &[&total, &bytes[..first]], deadline)?;
                first
            }
        };
        tx.resume = None;
        let piece = tx.ring.max_body() / 4;
        let mut at = done;
        loop {
            let end = bytes.len().min(at + piece);
            let kind = if end == bytes.len() {
                Kind::Last
            } else {
                Kind::More
            };
            match self.push(tx, Tag { kind, handles: 0 }, &[&bytes[at..end]], deadline) {
                Ok(()) if kind == Kind::Last => {
                    tx.owes_abort = false;
                    return Ok(());
                }
                Ok(()) => at = end,
                Err(SendFault::Timeout) => {
                    tx.owes_abort = true;
                    tx.resume = Some(Resume::new(bytes, at));
                    return Err(SendFault::Timeout);
                }
                Err(e) => return Err(self.abandon(tx, e)),
            }
        }
    }

    /// Abandons a message begun in pieces after failure `e`: the `Abort`
    /// goes now if it fits, else it is owed (unless the pipe is gone).
    fn abandon(&self, tx: &mut Tx, e: SendFault) -> SendFault {
        tx.resume = None;
        tx.owes_abort = !matches!(e, SendFault::Disconnected | SendFault::Protocol(_));
        let abort = Tag {
            kind: Kind::Abort,
            handles: 0,
        };
        if tx.owes_abort && self.push(tx, abort, &[], Some(Instant::now())).is_ok() {
            tx.owes_abort = false;
        }
        e
    }

    fn corrupt(&self, Corrupt(why): Corrupt) -> SendFault {
        self.core.half.corrupt(why).into()
    }

    /// Checks a message of `len` bytes may be sent, and takes the send
    /// lock, having sent the `Abort` of a message abandoned before.
    pub(super) fn begin_send(
        &self,
        len: usize,
        deadline: Option<Instant>,
    ) -> Result<Guard<'_, Tx>, SendFault> {
        let mut tx = self.lock_send(len, deadline)?;
        self.settle_abort(&mut tx, deadline)?;
        Ok(tx)
    }

    /// Sends the `Abort` owed for a message abandoned before, if any.
    fn settle_abort(&self, tx: &mut Tx, deadline: Option<Instant>) -> Result<(), SendFault> {
        if tx.owes_abort {
            let abort = Tag {
                kind: Kind::Abort,
                handles: 0,
            };
            self.push(tx, abort, &[], deadline)?;
            tx.owes_abort = false;
            tx.resume = None;
        }
        Ok(())
    }

    /// Checks a message of `len` bytes may be sent, and takes the send lock.
    fn lock_send(&self, len: usize, deadline: Option<Instant>) -> Result<Guard<'_, Tx>, SendFault> {
        if len > self.limit.get() {
            return Err(SendFault::TooLarge {
                len,
                limit: self.limit.get(),
            });
        }
        if let Some(failure) = self.core.half.failure() {
            return Err(failure.into());
        }
        // Another thread of this end may hold the lock while it waits for
        // room or for the socket: this call waits for it no longer than its
        // own deadline, and a `try_` call not at all (see
        // `Lock::lock_until`).
        let mut tx = self
            .core
            .tx
            .lock_until(deadline, &self.core.half)
            .ok_or(SendFault::Timeout)?;
        // Acquire: pairs with the Release store in the peer's drop.
        if self.core.half.sides().1.closed.load(Ordering::Acquire) != 0 {
            return Err(self.core.half.gone(Failure::HungUp).into());
        }
        if tx.counted.is_some() {
            self.wait_for_message_room(&mut tx, deadline)?;
        }
        Ok(tx)
    }

    /// Waits until fewer messages than the message capacity are in
    /// flight (see [`InFlight`]); the receiver wakes this wait as it wakes
    /// one for ring room, by taking a frame.
    #[inline(never)]
    fn wait_for_message_room(
        &self,
        tx: &mut Tx,
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let scope = self.core.half.scope();
        let Tx {
            ring,
            waiter,
            counted,
            ..
        } = tx;
        let Some(counted) = counted else {
            return Ok(());
        };
        waiter
            .wait(&scope, deadline, || {
                Ok(counted.has_room(ring)?.then_some(()))
            })
            .map_err(|stop| stop_to_error(&self.core.half, stop))
    }

    /// The most payload a `First` frame carries.
    fn first_piece(&self, tx: &Tx) -> usize {
        (tx.ring.max_body() / 4).saturating_sub(TOTAL)
    }

    /// Sends the rest of a message begun with `First`, as `More`…, `Last`
    /// (an empty `Last` if nothing is left). If a piece cannot be sent, the
    /// message is aborted (now, or by the next send).
    fn push_rest(
        &self,
        tx: &mut Tx,
        mut rest: &[u8],
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let piece = tx.ring.max_body() / 4;
        loop {
            let (chunk, after) = rest.split_at(piece.min(rest.len()));
            let kind = if after.is_empty() {
                Kind::Last
            } else {
                Kind::More
            };
            if let Err(e) = self.push(tx, Tag { kind, handles: 0 }, &[chunk], deadline) {
                return Err(self.abandon(tx, e));
            }
            if after.is_empty() {
                return Ok(());
            }
            rest = after;
        }
    }

    /// Writes one frame, waiting for room, then wakes the receiver if asleep.
    pub(super) fn push(
        &self,
        tx: &mut Tx,
        tag: Tag,
        parts: &[&[u8]],
        deadline: Option<Instant>,
    ) -> Result<(), SendFault> {
        let scope = self.core.half.scope();
        let Tx { ring, waiter, .. } = tx;
        let raw = tag.encode();
        waiter
            .wait(&scope, deadline, || {
                ring.try_push(raw, parts).map(|done| done.then_some(()))
            })
            .map_err(|stop| stop_to_error(&self.core.half, stop))?;
        if ends_message(tag.kind) {
            tx.note_message();
        }
        self.core.half.ring_peer();
        Ok(())
    }
}

/// What a send owes an end it sent a stand-in for (a fresh end made here),
/// once the message naming the stand-in is out: an end whose other side's
/// holder has gone hands on what it held ([`Orphan`]); a receiver reading
/// clones' rings follows its stand-in with them ([`Gathered`]).
enum Owed {
    Orphan(Box<Orphan>),
    Gathered(Box<Gathered>),
}

impl Owed {
    /// Keeps `end`, the end stood in for, until the message has gone.
    fn with_end(self, end: Handle) -> Self {
        match (self, end) {
            (Self::Gathered(gathered), Handle::Receiver(rx)) => {
                Self::Gathered(Box::new(gathered.with_end(rx)))
            }
            (Self::Orphan(orphan), end) => Self::Orphan(Box::new(orphan.with_end(end))),
            (owed, _) => owed,
        }
    }

    /// The stand-in could not go: `end` keeps what was taken from it.
    fn keep_on(self, end: &Handle) {
        match (self, end) {
            (Self::Orphan(orphan), end) => orphan.keep_on(end),
            (Self::Gathered(gathered), Handle::Receiver(rx)) => gathered.keep_on(rx),
            (Self::Gathered(_), _) => {}
        }
    }

    /// The message did not go: the ends stood in for, as they were.
    fn take_back(owed: Vec<Self>) -> Vec<Handle> {
        let mut ends = Vec::new();
        for owed in owed {
            match owed {
                Self::Orphan(orphan) => ends.extend(Orphan::take_back(vec![*orphan])),
                Self::Gathered(gathered) => ends.extend(gathered.take_back().map(Handle::Receiver)),
            }
        }
        ends
    }

    /// The message has gone: what the stand-in is owed follows it.
    fn deliver(self, deadline: Option<Instant>) {
        match self {
            Self::Orphan(orphan) => orphan.deliver(deadline),
            Self::Gathered(gathered) => gathered.deliver(deadline),
        }
    }
}

/// Sends a stand-in for `ends[i]` over `link`: for a receiver reading
/// clones' rings, a receiver that gathers them ([`Gathered`]); for any
/// other end, one holding what it held ([`Orphan`], its other side's
/// holder gone). On success the stand-in takes the end's place (the end is
/// kept in what it is owed); on failure the end keeps what was taken from
/// it.
fn send_stand_in(
    ends: &mut [Handle],
    i: usize,
    leaving: &mut [[u64; 2]],
    owed: &mut Vec<Owed>,
    link: &Arc<crate::transport::link::Link>,
    deadline: Option<Instant>,
) -> std::io::Result<u64> {
    let (fresh, owes) = match &ends[i] {
        Handle::Receiver(rx) if rx.reads_clone_rings() => {
            Gathered::of(rx).map(|(fresh, gathered)| {
                (Handle::Receiver(fresh), Owed::Gathered(Box::new(gathered)))
            })?
        }
        end => Orphan::relay(end, deadline)
            .map(|(fresh, orphan)| (fresh, Owed::Orphan(Box::new(orphan))))?,
    };
    let at = fresh.leaving_at();
    match fresh.send_region(link, deadline) {
        Ok(id) => {
            leaving[i] = at;
            let end = std::mem::replace(&mut ends[i], fresh);
            owed.push(owes.with_end(end));
            Ok(id)
        }
        Err(e) => {
            owes.keep_on(&ends[i]);
            Err(e)
        }
    }
}

/// Whether a forward failed on a socket that hung up.
fn is_hang_up(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
    )
}

/// Whether `deadline` has passed: a `try_` call's (its deadline is the
/// moment of the call).
fn is_past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|deadline| deadline <= Instant::now())
}

fn into_ends<E: Into<Handle>>(ends: Vec<E>) -> Vec<Handle> {
    ends.into_iter().map(Into::into).collect()
}

/// `ends` with each sender that has clones replaced by a clone made to
/// travel ([`Sender::clone_to_travel`]); on a failure, the ends as they
/// stand then (those replaced so far as their new clones).
fn clones_to_travel(
    ends: Vec<Handle>,
    deadline: Option<Instant>,
) -> Result<Vec<Handle>, SendWithError<SendFault>> {
    if !ends
        .iter()
        .any(|end| matches!(end, Handle::Sender(s) if s.has_clones()))
    {
        return Ok(ends);
    }
    let mut out = Vec::with_capacity(ends.len());
    let mut rest = ends.into_iter();
    while let Some(end) = rest.next() {
        let end = match end {
            Handle::Sender(sender) if sender.has_clones() => {
                match sender.clone_to_travel(deadline) {
                    Ok(clone) => Handle::Sender(clone),
                    Err((error, sender)) => {
                        out.push(Handle::Sender(sender));
                        out.extend(rest);
                        return Err(SendWithError {
                            error,
                            handles: out,
                        });
                    }
                }
            }
            end => end,
        };
        out.push(end);
    }
    Ok(out)
}

/// A message [`Sender::send_written`] lends its writer while the bytes go
/// straight into the ring: the typed layer's encoder writes through it,
/// never through the ring itself.
#[cfg(feature = "serde")]
pub(crate) struct Written<'w, 'r>(&'w mut FrameWriter<'r, RingView>);

#[cfg(feature = "serde")]
impl Written<'_, '_> {
    /// Appends `bytes` (past what fits, the message is dropped: see
    /// [`Sender::send_written`]).
    #[inline]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        self.0.put(bytes);
    }

    /// Drops the message: nothing is sent.
    #[inline]
    pub(crate) fn abort(&mut self) {
        self.0.abort();
    }

    /// Bytes written so far.
    #[inline]
    pub(crate) fn written(&self) -> usize {
        self.0.written()
    }
}
