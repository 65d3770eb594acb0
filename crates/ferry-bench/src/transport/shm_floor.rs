//! The floor: a hand-written shared-memory slot per direction, and a futex
//! (`shm-futex`) or a busy-poll (`shm-spin`) to wait on it, with no library
//! around them; `shm-in-place`, the zero-copy rows' floor, writes and reads
//! each message in place in the futex slots. The parent names a memfd to the
//! child as `/proc/<parent>/fd/<fd>`, so nothing is left in /dev/shm or /tmp,
//! even by a killed process. The connect rows' `shm-floor` engines
//! ([`crate::server`]) use the same slots in a region shaped like a ferry
//! pipe's ([`Layout::of_region`]).
//!
//! A slot is a header and a payload. The writer waits until the reader has
//! taken the last message (`ack` equals `seq`), copies the payload in,
//! stores the length and bumps `seq`; the reader waits until `seq` moves,
//! copies the payload out and sets `ack`. In place, the writer waits for
//! `ack` in `prepare` and lends the slot, and the reader lends the slot and
//! sets `ack` only at its next `prepare` or `recv`. A dropped end sets the
//! top bit of its `seq`. A sleeper sleeps on the futex of the word it waits
//! for, with a flag asking to be woken, so a side that does not sleep costs
//! its peer no system call; it looks at the peer process every [`LIVENESS`].
//!
//! # Safety
//!
//! The one file of ferry-bench with unsafe code, sound because:
//! - the memory is mapped with no address hint, so it overlaps nothing,
//!   only after checking the file is large enough, so no access faults; it
//!   is unmapped when its [`Mapping`] drops, which every reference borrows;
//! - headers are `AtomicU32`s at aligned offsets, valid for any bits, and
//!   both processes access them only atomically;
//! - payloads are reached only after checking their length against the
//!   capacity, and each side touches a slot only in the window the protocol
//!   gives it: the writer between seeing `ack` (Acquire) and bumping `seq`
//!   (Release), the reader between seeing the bump (Acquire) and setting
//!   `ack` (Release). In place, the lent slice borrows the end, so it ends
//!   before the end's next call, which alone closes the window. The peer is
//!   this program, which keeps to that protocol.

#![allow(unsafe_code)]

use std::fs::OpenOptions;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::MemfdFlags;
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};
use rustix::thread::futex;

use super::{ChildGuard, Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// The environment variable naming the shared memory to the child.
const ENV: &str = "FERRY_BENCH_SHM";
/// Payload bytes a slot holds: the protocol's largest message.
const CAPACITY: usize = 1 << 20;
/// Bytes before a slot's payload: its header, padded to a cache line.
const HEADER: usize = 64;
/// One slot: header, then payload.
const SLOT: usize = HEADER + CAPACITY;
/// The whole shared memory: a slot each way.
const SIZE: usize = 2 * SLOT;
/// Set in `seq` when the writer has closed its end.
const CLOSED: u32 = 1 << 31;
/// How often a waiter looks at the peer process.
const LIVENESS: Duration = Duration::from_millis(100);
/// Polls of a spinning wait between two yields of the CPU.
const BURST: usize = 128;

const _: () = assert!(size_of::<Header>() <= HEADER);
const _: () = assert!(
    HEADER.is_multiple_of(align_of::<Header>()) && SLOT.is_multiple_of(align_of::<Header>())
);

/// Where a mapping's two slots' headers and payloads lie, and the payload
/// bytes each holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    header: [usize; 2],
    payload: [usize; 2],
    capacity: usize,
}

impl Layout {
    /// The pingpong floor's: two slots of [`SLOT`] bytes.
    const PINGPONG: Self = Self {
        header: [0, SLOT],
        payload: [HEADER, SLOT + HEADER],
        capacity: CAPACITY,
    };

    /// The shape of a ferry pipe region of `len` bytes (ferry's
    /// `wire/region.rs`): both headers on the first page, where ferry keeps
    /// its two ring control blocks, then each direction's data, a page
    /// apart from the headers when the region has room for that. A
    /// one-page region keeps everything on its one page. `None` below
    /// 2 KiB.
    pub(crate) fn of_region(len: usize) -> Option<Self> {
        const PAGE: usize = 4096;
        let data_at = match len >= 3 * PAGE {
            true => PAGE,
            false => 1024,
        };
        let capacity = len.checked_sub(data_at)? / 2 / 64 * 64;
        let layout = Self {
            header: [256, 512],
            payload: [data_at, data_at + capacity],
            capacity,
        };
        (len >= 2048 && layout.fits(len)).then_some(layout)
    }

    /// Whether both slots lie inside `len` bytes, their headers aligned.
    fn fits(&self, len: usize) -> bool {
        (0..2).all(|slot| {
            self.header[slot].is_multiple_of(align_of::<Header>())
                && self.header[slot] + size_of::<Header>() <= len
                && self.payload[slot] + self.capacity <= len
        })
    }
}

/// The slots' memory and the file behind it, a memfd or its reopening.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    layout: Layout,
    file: OwnedFd,
}

impl Mapping {
    /// Maps the whole of `file`, shared, after reading its size: a size
    /// `shape` gives a layout for, or an error.
    pub(crate) fn received(
        file: OwnedFd,
        shape: impl FnOnce(usize) -> Option<Layout>,
    ) -> Result<Self, Error> {
        let stat = rustix::fs::fstat(&file).context("reading the shared memory's size")?;
        let len = usize::try_from(stat.st_size).ok();
        match len.and_then(|len| Some((len, shape(len)?))) {
            Some((len, layout)) => Self::made(file, len, layout),
            None => Err(Error::new(format!(
                "the shared memory has {} bytes, a size it may not have",
                stat.st_size
            ))),
        }
    }

    /// Maps `len` bytes of `file`, shared, which this process has just
    /// made that long, laid out as `layout` says.
    pub(crate) fn made(file: OwnedFd, len: usize, layout: Layout) -> Result<Self, Error> {
        if !layout.fits(len) {
            return Err(Error::new(format!("{layout:?} does not fit {len} bytes")));
        }
        let (read_write, shared) = (ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED);
        // SAFETY: with no address hint (null) the kernel picks a range that
        // overlaps no memory this process uses, so nothing is invalidated;
        // the file has `len` bytes (this process sized it, or read its size
        // from fstat), so no access to the mapping faults. Only this
        // program holds the file, and it never shrinks one.
        let base = unsafe { rustix::mm::mmap(ptr::null_mut(), len, read_write, shared, &file, 0) };
        let base = base.context("mapping the shared memory")?;
        let base = NonNull::new(base.cast()).ok_or_else(|| Error::new("mmap returned null"))?;
        Ok(Self {
            base,
            len,
            layout,
            file,
        })
    }

    /// The header of slot `slot` (0 or 1).
    fn header(&self, slot: usize) -> &Header {
        assert!(slot < 2);
        // SAFETY: the header lies inside the mapping and is aligned for
        // Header (`Layout::fits`, checked when mapping; the base is
        // page-aligned); Header is AtomicU32s, valid for any bits and
        // accessed only atomically by both processes; the reference
        // borrows self, which unmaps on drop.
        unsafe {
            self.base
                .add(self.layout.header[slot])
                .cast::<Header>()
                .as_ref()
        }
    }

    /// The first payload byte of slot `slot` (0 or 1), with
    /// `layout.capacity` bytes from there (`Layout::fits`).
    fn payload(&self, slot: usize) -> *mut u8 {
        assert!(slot < 2);
        self.base.as_ptr().wrapping_add(self.layout.payload[slot])
    }

    /// Payload bytes a slot holds.
    fn capacity(&self) -> usize {
        self.layout.capacity
    }
}

// SAFETY: the mapping belongs to the process, not to a thread, and is
// reached only through the atomics and copies described above.
unsafe impl Send for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base and len are exactly what mmap returned and mapped,
        // and no reference into the mapping outlives self (they borrow it).
        // An error could only mean those were wrong; there is nothing to do.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A slot's header, in shared memory.
#[repr(C)]
struct Header {
    /// Messages written (modulo 2³¹), with [`CLOSED`] once the writer has
    /// closed. Written by the writer.
    seq: Word,
    /// Messages read; the slot is free when it equals `seq`. Written by the
    /// reader.
    ack: Word,
    /// The length of the last message written.
    len: AtomicU32,
}

/// A futex word one side changes and the other waits on, and whether the
/// waiter sleeps on it.
#[repr(C)]
struct Word {
    value: AtomicU32,
    sleeping: AtomicU32,
}

impl Word {
    /// Stores `value`, waking the waiter if it sleeps.
    fn set(&self, value: u32) {
        // SeqCst (both): with the waiter's SeqCst store of `sleeping` then
        // load of `value` in `sleep`, one side sees the other's store:
        // either the waiter sees `value` and does not sleep, or this sees
        // `sleeping` and wakes it. The store also releases what this side
        // wrote before it to the waiter's Acquire load in `wait_while`.
        self.value.store(value, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) != 0 {
            // Not PRIVATE: the waiter is in another process.
            let _ = futex::wake(&self.value, futex::Flags::empty(), 1);
        }
    }

    /// Waits while the word holds `old`, then returns what it holds.
    fn wait_while(&self, old: u32, wait: Wait, peer: &Peer) -> Result<u32, Error> {
        match wait {
            Wait::Futex => self.sleep_while(old, peer),
            Wait::Spin => self.spin_while(old, peer),
        }
    }

    fn sleep_while(&self, old: u32, peer: &Peer) -> Result<u32, Error> {
        loop {
            // Acquire: pairs with the SeqCst store in `set`.
            let now = self.value.load(Ordering::Acquire);
            if now != old {
                return Ok(now);
            }
            if self.sleep(old)? {
                peer.check()?;
            }
        }
    }

    /// Sleeps on the futex while it holds `old`, at most [`LIVENESS`];
    /// whether the time ran out.
    fn sleep(&self, old: u32) -> Result<bool, Error> {
        // SeqCst: see `set`.
        self.sleeping.store(1, Ordering::SeqCst);
        let timeout = Timespec {
            tv_sec: 0,
            tv_nsec: LIVENESS.as_nanos() as _,
        };
        let slept = match self.value.load(Ordering::SeqCst) == old {
            true => futex::wait(&self.value, futex::Flags::empty(), old, Some(&timeout)),
            false => Ok(()),
        };
        // Relaxed: a late wake-up only costs `set` a system call.
        self.sleeping.store(0, Ordering::Relaxed);
        match slept {
            Ok(()) | Err(Errno::AGAIN | Errno::INTR) => Ok(false),
            Err(Errno::TIMEDOUT) => Ok(true),
            Err(e) => Err(e).context("waiting on the futex"),
        }
    }

    fn spin_while(&self, old: u32, peer: &Peer) -> Result<u32, Error> {
        let mut look = Instant::now() + LIVENESS;
        loop {
            for _ in 0..BURST {
                // Acquire: pairs with the SeqCst store in `set`.
                let now = self.value.load(Ordering::Acquire);
                if now != old {
                    return Ok(now);
                }
                std::hint::spin_loop();
            }
            // A peer on this CPU runs only if this steps aside; with the
            // CPU to itself, this returns at once.
            std::thread::yield_now();
            if Instant::now() >= look {
                peer.check()?;
                look = Instant::now() + LIVENESS;
            }
        }
    }
}

/// How a side waits for its peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// Sleep on the futex at once.
    Futex,
    /// Poll, yielding the CPU between bursts, and never sleep.
    Spin,
}

/// The process at the other end, watched so that a wait cannot outlive it.
pub(crate) enum Peer {
    /// The parent's view: a pidfd of the child, readable once it exits.
    Child(OwnedFd),
    /// The parent's view where pidfds are missing (Linux before 5.3, and
    /// valgrind, under which `ferry-bench instructions` counts): the
    /// child's id, asked with `waitid` without reaping it.
    ChildPid(Pid),
    /// The child's view: the parent's id; an orphan gets another parent.
    Parent(Option<Pid>),
    /// A connection's: the socket it came over, readable only once the
    /// peer has hung up (nothing more is sent on it after the handshake).
    Socket(OwnedFd),
}

impl Peer {
    /// Fails if the peer has exited.
    fn check(&self) -> Result<(), Error> {
        let (exited, who) = match self {
            Self::Child(pidfd) => (readable(pidfd, "asking whether the child exited")?, "child"),
            Self::ChildPid(pid) => {
                let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
                match rustix::process::waitid(WaitId::Pid(*pid), options) {
                    Ok(status) => (status.is_some(), "child"),
                    Err(Errno::INTR) => (false, "child"),
                    Err(e) => return Err(e).context("asking whether the child exited"),
                }
            }
            Self::Parent(parent) => (rustix::process::getppid() != *parent, "parent"),
            Self::Socket(socket) => (readable(socket, "asking whether the peer hung up")?, "peer"),
        };
        match exited {
            true => Err(Error::new(format!(
                "the {who} exited while this side waited"
            ))),
            false => Ok(()),
        }
    }
}

/// Whether `fd` is readable now; an interrupted poll says not yet.
fn readable(fd: &OwnedFd, what: &str) -> Result<bool, Error> {
    let mut fds = [PollFd::new(fd, PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&Timespec::default())) {
        Ok(ready) => Ok(ready > 0),
        Err(Errno::INTR) => Ok(false),
        Err(e) => Err(e).context(what),
    }
}

/// A shared-memory slot each way, with one wait strategy on both ends.
#[derive(Debug)]
pub struct ShmFloor {
    name: &'static str,
    wait: Wait,
    in_place: bool,
}

impl ShmFloor {
    const fn new(name: &'static str, wait: Wait, in_place: bool) -> Self {
        Self {
            name,
            wait,
            in_place,
        }
    }

    /// Sleep on a futex.
    pub const FUTEX: Self = Self::new("shm-futex", Wait::Futex, false);
    /// Busy-poll.
    pub const SPIN: Self = Self::new("shm-spin", Wait::Spin, false);
    /// Sleep on a futex; messages written and read in place in the slots.
    pub const IN_PLACE: Self = Self::new("shm-in-place", Wait::Futex, true);
}

impl Transport for ShmFloor {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        match self.wait {
            Wait::Futex => "sleep",
            Wait::Spin => "spin",
        }
    }

    fn spawn(&self, mut command: Command) -> Result<Connection, Error> {
        let memfd = rustix::fs::memfd_create("ferry-bench-shm", MemfdFlags::CLOEXEC)
            .context("creating a memfd")?;
        rustix::fs::ftruncate(&memfd, SIZE as u64).context("sizing the memfd")?;
        let mapping = Mapping::made(memfd, SIZE, Layout::PINGPONG)?;
        let fd = mapping.file.as_raw_fd();
        command.env(ENV, format!("/proc/{}/fd/{fd}", std::process::id()));
        let mut child = ChildGuard::new(command.spawn().context("spawning the child")?);
        let pid = Pid::from_child(child.child_mut());
        let peer = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
            Ok(pidfd) => Peer::Child(pidfd),
            Err(Errno::NOSYS) => Peer::ChildPid(pid),
            Err(e) => return Err(e).context("opening a pidfd of the child"),
        };
        let endpoint = Box::new(Slots::new(mapping, 0, self.wait, peer).in_place(self.in_place));
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        // Before opening: if the parent is gone by then, so is its memfd.
        let parent = rustix::process::getppid();
        let path = super::from_parent(ENV)?;
        let path = Path::new(&path);
        let file = OpenOptions::new().read(true).write(true).open(path);
        let file = file.context(format!("opening {}", path.display()))?;
        let mapping = Mapping::received(file.into(), pingpong_shape)?;
        let slots = Slots::new(mapping, 1, self.wait, Peer::Parent(parent));
        Ok(Box::new(slots.in_place(self.in_place)))
    }
}

/// The pingpong floor's layout, for a file of exactly its size.
fn pingpong_shape(len: usize) -> Option<Layout> {
    (len == SIZE).then_some(Layout::PINGPONG)
}

/// One end: writes one slot, reads the other, copying payloads in and out
/// or lending the slots in place.
pub(crate) struct Slots {
    mapping: Mapping,
    /// The slot this end writes; it reads the other.
    out: usize,
    wait: Wait,
    peer: Peer,
    /// Messages sent and received (modulo 2³¹).
    sent: u32,
    received: u32,
    /// The next message, copied in by `send`.
    outgoing: Vec<u8>,
    /// The last message received, copied out.
    inbox: Vec<u8>,
    /// Lend the slots instead of copying.
    in_place: bool,
    /// In place: the bytes of the message lent by `prepare`.
    lent: usize,
    /// In place: the last message received is lent and not yet
    /// acknowledged.
    holding: bool,
}

impl Slots {
    /// The end that writes slot `out` (0 or 1) and reads the other.
    pub(crate) fn new(mapping: Mapping, out: usize, wait: Wait, peer: Peer) -> Self {
        Self {
            mapping,
            out,
            wait,
            peer,
            sent: 0,
            received: 0,
            outgoing: Vec::new(),
            inbox: Vec::new(),
            in_place: false,
            lent: 0,
            holding: false,
        }
    }

    /// The file behind the slots.
    pub(crate) fn file(&self) -> BorrowedFd<'_> {
        self.mapping.file.as_fd()
    }

    /// The socket the peer is watched through, if it is.
    pub(crate) fn socket(&self) -> Option<&OwnedFd> {
        match &self.peer {
            Peer::Socket(socket) => Some(socket),
            _ => None,
        }
    }

    /// This end, lending the slots in place (`true`) or copying.
    fn in_place(mut self, in_place: bool) -> Self {
        self.in_place = in_place;
        self
    }

    /// In place: acknowledges the message lent by the last `recv`, whose
    /// slice has ended (it borrowed this end, which the caller borrows
    /// again), so the writer may reuse its slot.
    fn release(&mut self) {
        if std::mem::take(&mut self.holding) {
            self.mapping.header(1 - self.out).ack.set(self.received);
        }
    }

    /// Waits until the reader has taken the last message sent.
    fn wait_for_ack(&self) -> Result<(), Error> {
        let ack = &self.mapping.header(self.out).ack;
        // Acquire: pairs with the reader's store in `Word::set`, after it
        // copied the payload out, so the slot is free to overwrite.
        let mut seen = ack.value.load(Ordering::Acquire);
        while seen != self.sent {
            seen = ack.wait_while(seen, self.wait, &self.peer)?;
        }
        Ok(())
    }
}

/// The count after `n` (modulo 2³¹, clear of [`CLOSED`]).
fn next(n: u32) -> u32 {
    n.wrapping_add(1) & !CLOSED
}

impl Endpoint for Slots {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        let capacity = self.mapping.capacity();
        if len > capacity {
            return Err(Error::new(format!(
                "a {len}-byte message is larger than the {capacity}-byte slot"
            )));
        }
        if !self.in_place {
            self.outgoing.resize(len, 0);
            return Ok(&mut self.outgoing);
        }
        self.release();
        self.wait_for_ack()?;
        self.lent = len;
        let payload = self.mapping.payload(self.out);
        // SAFETY: `len` bytes from `payload` are inside the slot (len ≤
        // capacity, checked above) and the mapping outlives the slice, which
        // borrows self; the reader has acknowledged the last message
        // (`wait_for_ack`) and reads again only after `send` bumps `seq`,
        // which it can call only once the slice has ended.
        Ok(unsafe { std::slice::from_raw_parts_mut(payload, len) })
    }

    fn send(&mut self) -> Result<(), Error> {
        if self.in_place {
            let header = self.mapping.header(self.out);
            // Relaxed: published by the store of `seq` below.
            header.len.store(self.lent as u32, Ordering::Relaxed);
            self.sent = next(self.sent);
            header.seq.set(self.sent);
            return Ok(());
        }
        self.wait_for_ack()?;
        let (header, payload) = (
            self.mapping.header(self.out),
            self.mapping.payload(self.out),
        );
        let len = self.outgoing.len();
        assert!(len <= self.mapping.capacity(), "prepare checks the length");
        // SAFETY: `len` bytes from `payload` are inside the slot (len ≤
        // capacity, asserted) and do not overlap `outgoing`; the reader has
        // acknowledged the last message (`wait_for_ack`) and reads again
        // only after the `seq` store below, so nothing else touches them.
        unsafe { ptr::copy_nonoverlapping(self.outgoing.as_ptr(), payload, len) };
        // Relaxed: published by the store of `seq` below.
        header.len.store(len as u32, Ordering::Relaxed);
        self.sent = next(self.sent);
        header.seq.set(self.sent);
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        self.release();
        let slot = 1 - self.out;
        let (header, payload) = (self.mapping.header(slot), self.mapping.payload(slot));
        let seq = header
            .seq
            .wait_while(self.received, self.wait, &self.peer)?;
        let count = seq & !CLOSED;
        if count == self.received {
            return Ok(None);
        }
        if count != next(self.received) {
            return Err(Error::new(format!(
                "message {count} arrived after message {}",
                self.received
            )));
        }
        // Relaxed: the Acquire load of `seq` made it visible.
        let len = header.len.load(Ordering::Relaxed) as usize;
        if len > self.mapping.capacity() {
            return Err(Error::new(format!("a message claims {len} bytes")));
        }
        if self.in_place {
            self.received = count;
            self.holding = true;
            // SAFETY: `len` bytes from `payload` are inside the slot (len ≤
            // capacity, checked) and the mapping outlives the slice, which
            // borrows self; the writer published them before `seq` (Acquire
            // in `wait_while`) and writes again only after `release` sets
            // `ack`, in this end's next call, once the slice has ended.
            return Ok(Some(unsafe { std::slice::from_raw_parts(payload, len) }));
        }
        self.inbox.resize(len, 0);
        // SAFETY: `len` bytes from `payload` are inside the slot (len ≤
        // capacity, checked) and do not overlap `inbox`; the writer
        // published them before `seq` (Acquire in `wait_while`) and writes
        // again only after the `ack` store below.
        unsafe { ptr::copy_nonoverlapping(payload, self.inbox.as_mut_ptr(), len) };
        self.received = count;
        header.ack.set(count);
        Ok(Some(&self.inbox))
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // The end of the stream, once the peer has read what came before.
        self.mapping.header(self.out).seq.set(self.sent | CLOSED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ends the test process if the returned guard is not dropped within
    /// `limit`: a broken slot protocol hangs on a futex (the peer, this
    /// process, never exits), and a hang must fail the run, not stall it.
    fn watchdog(limit: std::time::Duration) -> ferry_testkit::Watchdog {
        ferry_testkit::Watchdog::start("shm_floor test", limit)
    }

    /// Both ends in this process, on one memfd mapped twice.
    fn pair(wait: Wait, in_place: bool) -> (Slots, Slots) {
        let memfd = rustix::fs::memfd_create("test", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&memfd, SIZE as u64).unwrap();
        let twin = memfd.try_clone().unwrap();
        let alive = || Peer::Parent(rustix::process::getppid());
        let a = Mapping::made(memfd, SIZE, Layout::PINGPONG).unwrap();
        let b = Mapping::received(twin, pingpong_shape).unwrap();
        let (a, b) = (
            Slots::new(a, 0, wait, alive()),
            Slots::new(b, 1, wait, alive()),
        );
        (a.in_place(in_place), b.in_place(in_place))
    }

    #[test]
    fn a_stream_arrives_in_order_then_ends() {
        let _watchdog = watchdog(std::time::Duration::from_secs(30));
        for (wait, in_place) in [
            (Wait::Futex, false),
            (Wait::Spin, false),
            (Wait::Futex, true),
        ] {
            let (mut a, mut b) = pair(wait, in_place);
            let sizes = [1, 12, 4096, 100_000, CAPACITY, 0, 7];
            let reader = std::thread::spawn(move || {
                for (i, &len) in sizes.iter().enumerate() {
                    let msg = b.recv().unwrap().unwrap();
                    assert_eq!(msg.len(), len);
                    assert!(msg.iter().all(|&x| x == i as u8));
                }
                assert!(b.recv().unwrap().is_none());
            });
            for (i, &len) in sizes.iter().enumerate() {
                a.prepare(len).unwrap().fill(i as u8);
                a.send().unwrap();
            }
            drop(a);
            reader.join().unwrap();
        }
    }

    #[test]
    fn in_place_a_slot_is_reused_only_once_its_reader_moved_on() {
        let _watchdog = watchdog(std::time::Duration::from_secs(30));
        let (mut a, mut b) = pair(Wait::Futex, true);
        a.prepare(3).unwrap().fill(1);
        a.send().unwrap();
        assert_eq!(b.recv().unwrap().unwrap(), [1, 1, 1]);
        // b still holds message 1: a's next prepare waits until b's next
        // call, so a writes message 2 only after b has moved on.
        let writer = std::thread::spawn(move || {
            a.prepare(2).unwrap().fill(2);
            a.send().unwrap();
            a
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "the writer overwrote a lent slot");
        assert_eq!(b.recv().unwrap().unwrap(), [2, 2]);
        drop(writer.join().unwrap());
        assert!(b.recv().unwrap().is_none());
    }

    #[test]
    fn a_message_over_the_slot_is_refused() {
        for in_place in [false, true] {
            let (mut a, _b) = pair(Wait::Futex, in_place);
            assert!(a.prepare(CAPACITY + 1).is_err());
        }
    }
}
