//! A hostile receiver cannot write the pool blocks it is sent.
//!
//! The parent sends a large message out of line; the child, playing the
//! attacker, finds the block's read-only mapping in `/proc/self/maps` (ferry
//! closed the descriptor after mapping it) and tries every way to make it
//! writable: `mprotect`, reopening it through `/proc/self/map_files` and
//! writing, mapping that descriptor writable, punching a hole in it. Each
//! attempt that succeeded scribbles on the block. The parent checks that
//! every attempt was refused and, reusing the block for a second message,
//! that it still holds exactly what it wrote.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;

use ferry::PipeOptions;
use ferry_testkit::{XorShift, secs, this_test};
use rustix::fs::FallocateFlags;
use rustix::mm::{MapFlags, MprotectFlags, ProtFlags};

const MIB: usize = 1 << 20;
/// What the attacker writes wherever an attempt lets it.
const SCRIBBLE: u8 = 0xEE;
/// The attempts, in the order the attacker reports them.
const ATTEMPTS: [&str; 5] = [
    "mprotect the mapping read-write",
    "pwrite the reopened block",
    "mmap the reopened block PROT_WRITE|MAP_SHARED",
    "punch a hole in the reopened block",
    "mprotect a new read-only shared mapping read-write",
];
/// The child's last word, once the second message arrived intact.
const INTACT: &[u8] = b"second message intact";

/// Message `n` of the test, 1 MiB derived from a seed both sides know.
fn message(n: u64) -> Vec<u8> {
    XorShift::new(n).bytes(MIB)
}

#[test]
fn a_receiver_cannot_write_the_blocks_it_is_sent() {
    if ferry_testkit::role().is_some() {
        return attacker();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "attacker", &PipeOptions::new());
    let first = message(1);
    pipe.send(&first).expect("send the first message");
    let report = String::from_utf8(pipe.recv().expect("the attacker's report")).expect("text");
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), ATTEMPTS.len(), "report:\n{report}");
    for (line, attempt) in lines.iter().zip(ATTEMPTS) {
        let refused = line
            .strip_prefix(attempt)
            .and_then(|l| l.strip_prefix(": refused"));
        assert!(refused.is_some(), "the attacker got through:\n{report}");
    }
    // The block came back released; a loan of its size reuses it, and
    // reads what this side wrote into it the first time.
    let mut loan = pipe.sender().loan(MIB).expect("loan the block again");
    assert!(
        loan[..] == first[..],
        "the block no longer holds the first message (first difference at byte {:?})",
        loan.iter().zip(&first).position(|(a, b)| a != b)
    );
    loan.copy_from_slice(&message(2));
    loan.send().expect("send the second message");
    assert_eq!(pipe.recv().expect("the attacker's last word"), INTACT);
    drop(pipe);
    child.wait_ok();
}

/// The child: receives the first message, attacks its block, reports, and
/// checks the second message.
fn attacker() {
    let (_dog, pipe) = ferry_testkit::child_pipe("attacker", secs(60));
    // A copying receive: the block is released (and stays mapped here).
    assert!(pipe.recv().expect("the first message") == message(1));
    let block = BlockMapping::find();
    let outcomes = [
        block.mprotect_writable(),
        block.reopen().and_then(|file| pwrite(&file)),
        block.reopen().and_then(|file| map_writable(&file)),
        block.reopen().and_then(|file| punch_hole(&file)),
        block.reopen().and_then(|file| remap_then_mprotect(&file)),
    ];
    let report: Vec<String> = ATTEMPTS
        .iter()
        .zip(outcomes)
        .map(|(attempt, outcome)| match outcome {
            Ok(()) => format!("{attempt}: ALLOWED"),
            Err(e) => format!("{attempt}: refused ({e})"),
        })
        .collect();
    pipe.send(report.join("\n").as_bytes()).expect("report");
    assert!(pipe.recv().expect("the second message") == message(2));
    pipe.send(INTACT).expect("last word");
}

/// The peer block's read-only mapping in this process.
struct BlockMapping {
    start: usize,
    len: usize,
    /// `start-end` as `/proc/self/maps` writes it: its `map_files` name.
    range: String,
}

impl BlockMapping {
    /// The one 1 MiB read-only shared mapping of a `ferry-block` memfd.
    fn find() -> Self {
        let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
        let found: Vec<Self> = maps.lines().filter_map(Self::parse).collect();
        assert_eq!(found.len(), 1, "peer block mappings in:\n{maps}");
        found.into_iter().next().expect("one mapping")
    }

    /// `Some` if `line` is a read-only shared 1 MiB `ferry-block` mapping.
    fn parse(line: &str) -> Option<Self> {
        let mut fields = line.split_whitespace();
        let range = fields.next()?;
        let perms = fields.next()?;
        let path = fields.nth(3)?;
        if perms != "r--s" || !path.starts_with("/memfd:ferry-block") {
            return None;
        }
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let len = usize::from_str_radix(end, 16).ok()?.checked_sub(start)?;
        (len == MIB).then(|| Self {
            start,
            len,
            range: range.to_string(),
        })
    }

    /// Makes the mapping itself writable, and scribbles through it.
    fn mprotect_writable(&self) -> io::Result<()> {
        // SAFETY: `start..start + len` is the block mapping ferry made in
        // this process (read from /proc/self/maps); changing its protection
        // is the attack. If the kernel allowed it, the one byte written
        // lands in shared memory that no Rust reference of this process
        // points into (the message was copied out and released).
        unsafe { mprotect_rw(self.start as *mut u8, self.len)? };
        // SAFETY: as above: the mapping is now writable and unaliased.
        unsafe { (self.start as *mut u8).write_volatile(SCRIBBLE) };
        Ok(())
    }

    /// Opens the mapped object again by `/proc/self/map_files`, read-write.
    /// (The open itself succeeds where this process may read `map_files`,
    /// as root: what the seal refuses is writing.)
    fn reopen(&self) -> io::Result<File> {
        let path = format!("/proc/self/map_files/{}", self.range);
        OpenOptions::new().read(true).write(true).open(path)
    }
}

/// `mprotect(PROT_READ | PROT_WRITE)`.
///
/// # Safety
///
/// `start..start + len` must be a whole mapping that no Rust reference
/// points into.
unsafe fn mprotect_rw(start: *mut u8, len: usize) -> io::Result<()> {
    let rw = MprotectFlags::READ | MprotectFlags::WRITE;
    // SAFETY: the caller's contract.
    unsafe { rustix::mm::mprotect(start.cast(), len, rw) }.map_err(io::Error::from)
}

fn pwrite(file: &File) -> io::Result<()> {
    file.write_at(&[SCRIBBLE], 0).map(drop)
}

/// Maps `file` writable and shared, and scribbles through it.
fn map_writable(file: &File) -> io::Result<()> {
    let rw = ProtFlags::READ | ProtFlags::WRITE;
    let start = map(file, rw)?;
    // SAFETY: `start` is a fresh MIB-long writable mapping of this process,
    // unmapped just after; no Rust reference points into it.
    unsafe {
        start.write_volatile(SCRIBBLE);
        rustix::mm::munmap(start.cast(), MIB)?;
    }
    Ok(())
}

fn punch_hole(file: &File) -> io::Result<()> {
    let punch = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(file, punch, 0, MIB as u64)?;
    Ok(())
}

/// Maps `file` read-only and shared, then makes that mapping writable and
/// scribbles through it.
fn remap_then_mprotect(file: &File) -> io::Result<()> {
    let start = map(file, ProtFlags::READ)?;
    // SAFETY: `start` is a fresh MIB-long mapping of this process, unmapped
    // below; no Rust reference points into it.
    let made_writable = unsafe { mprotect_rw(start, MIB) };
    if made_writable.is_ok() {
        // SAFETY: as above, and now writable.
        unsafe { start.write_volatile(SCRIBBLE) };
    }
    // SAFETY: the range mmap returned, unmapped once.
    unsafe { rustix::mm::munmap(start.cast(), MIB)? };
    made_writable
}

/// A fresh shared mapping of the first MiB of `file` with `prot`.
fn map(file: &File, prot: ProtFlags) -> io::Result<*mut u8> {
    // SAFETY: a null hint makes the kernel choose a fresh range, which
    // overlaps no existing Rust object.
    let start =
        unsafe { rustix::mm::mmap(std::ptr::null_mut(), MIB, prot, MapFlags::SHARED, file, 0)? };
    Ok(start.cast())
}
