//! A real in-process pipe whose shared region the input corrupts at will,
//! as a hostile peer could, between honest sends and receives.
//!
//! The input is a sequence of operations: raw writes anywhere in the
//! region, writes and nudges of the control words, forged frame headers and
//! bodies at the next unread frame, `try_send` from either end, `try_recv`
//! or `recv_timeout(0)` on either end, and dropping an end. Every call must
//! return a message or an error: never panic, never read out of bounds
//! (the build runs under AddressSanitizer). Until the first corruption, the
//! pipe must also behave exactly: every message sent arrives, once, whole
//! and in order, and nothing else does.
//!
//! Input format (little-endian; a truncated operation ends the input), one
//! opcode byte (taken modulo 8) and its fields, where `sel` bit 0 picks the
//! ring (ring 0 is written by end A, ring 1 by end B) or the end:
//!
//! | op | fields | operation |
//! |----|--------|-----------|
//! | 0 | `offset: u16, n: u8, n bytes` | raw write at `offset` mod the region's size |
//! | 1 | `sel: u8, value: u64` | control word: bit 1 consumer side, `sel >> 2` mod 5 = pos, signal, waiting, closed, cpu (u32 but pos) |
//! | 2 | `sel: u8, delta: i16` | add `delta` to a position (bit 1 consumer side) |
//! | 3 | `sel: u8, len: u32, tag: u32` | next unread frame's header; unless bit 1, the tag's version byte is this version and its kind is taken mod 8 |
//! | 4 | `sel: u8, at: u16, n: u8, n bytes` | next unread frame's body bytes from `at` |
//! | 5 | `sel: u8, len: u16, fill: u8` | `try_send` of `len` mod 6000 bytes of `fill` |
//! | 6 | `sel: u8` | `try_recv`, or with bit 1 `recv_timeout(0)` |
//! | 7 | `sel: u8` | drop the end |
#![no_main]

use std::collections::VecDeque;
use std::mem::offset_of;
use std::time::Duration;

use ferry::fuzzing::{read_region, region_len, write_region};
use ferry::ring::control::{Control, Side};
use ferry::ring::{CONTROL_SIZE, FRAME_HEADER};
use ferry::wire::VERSION;
use ferry::wire::region::{CONTROL_AT, DATA_AT};
use ferry::{Pipe, PipeOptions, RecvTimeoutError, TryRecvError, TrySendError};
use libfuzzer_sys::fuzz_target;

const CAPACITY: usize = 4096;

/// One end of the pipe: `A` writes ring 0 and reads ring 1, `B` the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handle {
    A,
    B,
}

/// Which side of a ring's control block.
#[derive(Debug, Clone, Copy)]
enum Writer {
    Producer,
    Consumer,
}

#[derive(Debug, Clone, Copy)]
enum Field {
    Pos,
    Signal,
    Waiting,
    Closed,
    Cpu,
}

#[derive(Debug, Clone, Copy)]
enum How {
    Try,
    TimeoutZero,
}

#[derive(Debug)]
enum Op<'a> {
    Write {
        offset: u16,
        bytes: &'a [u8],
    },
    Word {
        ring: usize,
        writer: Writer,
        field: Field,
        value: u64,
    },
    Nudge {
        ring: usize,
        writer: Writer,
        delta: i16,
    },
    Header {
        ring: usize,
        len: u32,
        tag: u32,
    },
    Body {
        ring: usize,
        at: u16,
        bytes: &'a [u8],
    },
    Send {
        from: Handle,
        len: u16,
        fill: u8,
    },
    Recv {
        on: Handle,
        how: How,
    },
    Close {
        end: Handle,
    },
}

/// Reads operations off the input (see the module comment).
struct Ops<'a>(&'a [u8]);

impl<'a> Ops<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.byte()?);
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn op(&mut self) -> Option<Op<'a>> {
        let code = self.byte()? % 8;
        if code == 0 {
            let offset = u16::from_le_bytes(self.take()?);
            return Some(Op::Write {
                offset,
                bytes: self.bytes()?,
            });
        }
        let sel = self.byte()?;
        let ring = usize::from(sel & 1);
        let end = if sel & 1 == 0 { Handle::A } else { Handle::B };
        let writer = if sel & 2 == 0 {
            Writer::Producer
        } else {
            Writer::Consumer
        };
        Some(match code {
            1 => Op::Word {
                ring,
                writer,
                field: [
                    Field::Pos,
                    Field::Signal,
                    Field::Waiting,
                    Field::Closed,
                    Field::Cpu,
                ][usize::from(sel >> 2) % 5],
                value: u64::from_le_bytes(self.take()?),
            },
            2 => Op::Nudge {
                ring,
                writer,
                delta: i16::from_le_bytes(self.take()?),
            },
            3 => {
                let len = u32::from_le_bytes(self.take()?);
                let mut tag = u32::from_le_bytes(self.take()?);
                if sel & 2 == 0 {
                    tag = (tag & 0xffff_0000) | (u32::from(VERSION) << 8) | ((tag & 0xff) % 8);
                }
                Op::Header { ring, len, tag }
            }
            4 => {
                let at = u16::from_le_bytes(self.take()?);
                Op::Body {
                    ring,
                    at,
                    bytes: self.bytes()?,
                }
            }
            5 => {
                let len = u16::from_le_bytes(self.take()?);
                Op::Send {
                    from: end,
                    len,
                    fill: self.byte()?,
                }
            }
            6 => {
                let how = if sel & 2 == 0 {
                    How::Try
                } else {
                    How::TimeoutZero
                };
                Op::Recv { on: end, how }
            }
            _ => Op::Close { end },
        })
    }
}

/// The pipe under test, and what an honest pipe would deliver.
struct World {
    a: Option<Pipe>,
    b: Option<Pipe>,
    /// Messages sent and not yet received, per ring: (length, fill byte).
    queued: [VecDeque<(usize, u8)>; 2],
    /// Set once the region was written behind the pipe's back: from then
    /// on only "no panic, no bad access" is checked.
    tainted: bool,
}

impl World {
    fn end(&self, end: Handle) -> Option<&Pipe> {
        match end {
            Handle::A => self.a.as_ref(),
            Handle::B => self.b.as_ref(),
        }
    }

    /// Any live end: both see the same region.
    fn any(&self) -> Option<&Pipe> {
        self.a.as_ref().or(self.b.as_ref())
    }

    fn write(&mut self, offset: usize, bytes: &[u8]) {
        self.tainted = true;
        if let Some(pipe) = self.any() {
            // SAFETY: this thread alone uses the pipe and nothing borrowed
            // from it is alive.
            unsafe { write_region(pipe, offset, bytes) };
        }
    }

    fn read_u64(&self, offset: usize) -> u64 {
        let mut word = [0u8; 8];
        if let Some(pipe) = self.any() {
            // SAFETY: as in `write`.
            unsafe { read_region(pipe, offset, &mut word) };
        }
        u64::from_le_bytes(word)
    }

    /// Writes `bytes` into ring `ring`'s data from stream position `pos`,
    /// wrapping at the end of the data area as the ring does.
    fn write_ring(&mut self, ring: usize, pos: u64, bytes: &[u8]) {
        let data = DATA_AT + ring * CAPACITY;
        for (i, chunk) in bytes.chunks(CAPACITY).enumerate() {
            let at = (pos as usize).wrapping_add(i * CAPACITY) & (CAPACITY - 1);
            let first = chunk.len().min(CAPACITY - at);
            self.write(data + at, &chunk[..first]);
            self.write(data, &chunk[first..]);
        }
    }

    fn apply(&mut self, op: Op<'_>) {
        match op {
            Op::Write { offset, bytes } => {
                let len = self.any().map_or(1, region_len);
                self.write(usize::from(offset) % len, bytes);
            }
            Op::Word {
                ring,
                writer,
                field,
                value,
            } => {
                let at = word_at(ring, writer, field);
                match field {
                    Field::Pos => self.write(at, &value.to_le_bytes()),
                    _ => self.write(at, &(value as u32).to_le_bytes()),
                }
            }
            Op::Nudge {
                ring,
                writer,
                delta,
            } => {
                let at = word_at(ring, writer, Field::Pos);
                let pos = self.read_u64(at).wrapping_add(delta as i64 as u64);
                self.write(at, &pos.to_le_bytes());
            }
            Op::Header { ring, len, tag } => {
                let head = self.read_u64(word_at(ring, Writer::Consumer, Field::Pos));
                let header = u64::from(len) | u64::from(tag) << 32;
                self.write_ring(ring, head, &header.to_le_bytes());
            }
            Op::Body { ring, at, bytes } => {
                let head = self.read_u64(word_at(ring, Writer::Consumer, Field::Pos));
                let pos = head.wrapping_add((FRAME_HEADER + usize::from(at)) as u64);
                self.write_ring(ring, pos, bytes);
            }
            Op::Send { from, len, fill } => self.send(from, usize::from(len) % 6000, fill),
            Op::Recv { on, how } => self.recv(on, how),
            Op::Close { end } => match end {
                Handle::A => self.a = None,
                Handle::B => self.b = None,
            },
        }
    }

    fn send(&mut self, from: Handle, len: usize, fill: u8) {
        let Some(pipe) = self.end(from) else { return };
        let result = pipe.sender().try_send(&vec![fill; len]);
        if self.tainted {
            return;
        }
        let peer_gone = self.end(other(from)).is_none();
        match result {
            Ok(()) => self.queued[ring_of(from)].push_back((len, fill)),
            Err(TrySendError::Full) => {}
            Err(TrySendError::Disconnected) if peer_gone => {}
            Err(e) => panic!("an honest send of {len} bytes failed: {e:?}"),
        }
    }

    fn recv(&mut self, on: Handle, how: How) {
        let Some(pipe) = self.end(on) else { return };
        let result = match how {
            How::Try => pipe.receiver().try_recv().map_err(|e| match e {
                TryRecvError::Empty => Missing::Nothing,
                TryRecvError::Disconnected => Missing::Gone,
                e => Missing::Failed(format!("{e:?}")),
            }),
            How::TimeoutZero => pipe.receiver().recv_timeout(Duration::ZERO).map_err(|e| match e {
                RecvTimeoutError::Timeout => Missing::Nothing,
                RecvTimeoutError::Disconnected => Missing::Gone,
                e => Missing::Failed(format!("{e:?}")),
            }),
        };
        if self.tainted {
            return;
        }
        let peer_gone = self.end(other(on)).is_none();
        let queue = &mut self.queued[1 - ring_of(on)];
        match result {
            Ok(bytes) => {
                let (len, fill) = queue.pop_front().expect("a message nobody sent");
                assert!(bytes.len() == len && bytes.iter().all(|&b| b == fill));
            }
            Err(Missing::Nothing) => {
                assert!(queue.is_empty(), "a sent message did not arrive");
            }
            Err(Missing::Gone) => {
                assert!(peer_gone && queue.is_empty(), "disconnected too early");
            }
            Err(Missing::Failed(e)) => panic!("an honest receive failed: {e}"),
        }
    }
}

/// Why a receive gave no message, whichever call it was.
enum Missing {
    /// Nothing waiting (`Empty`, or a zero timeout's `Timeout`).
    Nothing,
    /// The peer is gone.
    Gone,
    /// Anything else, which an honest exchange never gives.
    Failed(String),
}

fn other(end: Handle) -> Handle {
    match end {
        Handle::A => Handle::B,
        Handle::B => Handle::A,
    }
}

/// The ring `end` writes.
fn ring_of(end: Handle) -> usize {
    match end {
        Handle::A => 0,
        Handle::B => 1,
    }
}

/// Offset in the region of one control word.
fn word_at(ring: usize, writer: Writer, field: Field) -> usize {
    let side = match writer {
        Writer::Producer => offset_of!(Control, producer),
        Writer::Consumer => offset_of!(Control, consumer),
    };
    let field = match field {
        Field::Pos => offset_of!(Side, pos),
        Field::Signal => offset_of!(Side, signal),
        Field::Waiting => offset_of!(Side, waiting),
        Field::Closed => offset_of!(Side, closed),
        Field::Cpu => offset_of!(Side, cpu),
    };
    CONTROL_AT + ring * CONTROL_SIZE + side + field
}

fuzz_target!(|data: &[u8]| {
    let (a, b) = PipeOptions::new()
        .ring_size(CAPACITY)
        .pipe()
        .expect("an in-process pipe");
    let mut world = World {
        a: Some(a),
        b: Some(b),
        queued: [VecDeque::new(), VecDeque::new()],
        tainted: false,
    };
    let mut ops = Ops(data);
    while let Some(op) = ops.op() {
        world.apply(op);
    }
});
