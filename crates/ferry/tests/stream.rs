//! 100,000 messages of random sizes from 0 to 300 KiB each way between a
//! parent and its child, in order, checked byte for byte, with checksums.
//!
//! Down (parent to child) the large messages travel out of line, in pool
//! blocks (the default from 64 KiB); up, the child turns that off, so
//! messages over half the ring travel in pieces through it.

use std::time::Instant;

use ferry::{Pipe, PipeOptions};
use ferry_testkit::{XorShift, checksum, mix, secs, this_test};

const COUNT: u64 = 100_000;
const MAX_LEN: usize = 300 * 1024;
/// Seeds of the parent-to-child and the child-to-parent streams.
const DOWN: u64 = 0xfe88_15ee;
const UP: u64 = 0x0bac_45ee;

/// Sizes where the pipe changes behaviour: empty, around a frame's 8-byte
/// alignment, a page, the largest message sent as one frame by a 64 KiB
/// ring (half its largest frame body: 32,764 bytes), the out-of-line
/// threshold (64 KiB), the same edges of the default 256 KiB ring (131,068
/// and 262,144), and the 300 KiB maximum.
const EDGES: [usize; 23] = [
    0, 1, 7, 8, 9, 4095, 4096, 4097, 32_763, 32_764, 32_765, 32_768, 65_535, 65_536, 65_537,
    131_067, 131_068, 131_069, 131_072, 262_136, 262_144, 262_145, MAX_LEN,
];

/// Both processes derive the same messages: sizes from a seeded generator,
/// contents from a shared random pool at a per-message offset, stamped with
/// the sequence number.
struct Messages {
    sizes: XorShift,
    pool: Vec<u8>,
}

impl Messages {
    fn new(seed: u64) -> Self {
        Self {
            sizes: XorShift::new(seed),
            pool: XorShift::new(seed ^ 0xabc).bytes(2 * MAX_LEN),
        }
    }

    /// The size of message `seq`: the edge sizes first and now and then
    /// again; otherwise mostly small (so debug builds stay quick), some up
    /// to 32 KiB, and 3 in 100 anywhere up to 300 KiB.
    fn size(&mut self, seq: u64) -> usize {
        let r = self.sizes.next_u64();
        if (seq as usize) < EDGES.len() {
            return EDGES[seq as usize];
        }
        if seq.is_multiple_of(5_000) {
            return EDGES[(seq / 5_000) as usize % EDGES.len()];
        }
        match r % 100 {
            0..82 => self.sizes.upto(1024),
            82..97 => self.sizes.upto(32 * 1024),
            _ => self.sizes.upto(MAX_LEN),
        }
    }

    /// Writes message `seq` into `out` (reusing its allocation).
    fn fill(&mut self, seq: u64, out: &mut Vec<u8>) {
        let len = self.size(seq);
        let offset = (seq as usize).wrapping_mul(7919) % (self.pool.len() - len + 1);
        out.clear();
        out.extend_from_slice(&self.pool[offset..offset + len]);
        let stamp = seq.to_le_bytes();
        let n = len.min(stamp.len());
        out[..n].copy_from_slice(&stamp[..n]);
    }
}

/// Sends the stream of messages derived from `seed`; returns its bytes and
/// running checksum.
fn send_stream(pipe: &Pipe, seed: u64) -> (u64, u64) {
    let mut messages = Messages::new(seed);
    let mut msg = Vec::new();
    let (mut bytes, mut sum) = (0u64, 0u64);
    for seq in 0..COUNT {
        messages.fill(seq, &mut msg);
        pipe.send(&msg)
            .unwrap_or_else(|e| panic!("send of message {seq}: {e}"));
        bytes += msg.len() as u64;
        sum = mix(sum, checksum(&msg));
    }
    (bytes, sum)
}

/// Receives the stream derived from `seed`, checking every message against
/// the one it must be, in order; returns its bytes and running checksum.
fn check_stream(pipe: &Pipe, seed: u64) -> (u64, u64) {
    let mut messages = Messages::new(seed);
    let (mut got, mut want) = (Vec::new(), Vec::new());
    let (mut bytes, mut sum) = (0u64, 0u64);
    for seq in 0..COUNT {
        pipe.receiver()
            .recv_into(&mut got)
            .unwrap_or_else(|e| panic!("recv of message {seq}: {e}"));
        messages.fill(seq, &mut want);
        assert_eq!(got.len(), want.len(), "length of message {seq}");
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b);
            panic!("message {seq} ({} bytes) differs at byte {at:?}", got.len());
        }
        bytes += got.len() as u64;
        sum = mix(sum, checksum(&got));
    }
    (bytes, sum)
}

/// What the child reports: the stream it received and the one it sent.
fn summary(received: (u64, u64), sent: (u64, u64)) -> Vec<u8> {
    [received.0, received.1, sent.0, sent.1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// Both directions at once: the parent streams to the child while the
/// child streams back, each side checking what it receives.
#[test]
fn hundred_thousand_random_sizes_each_way() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let started = Instant::now();
    let (sent, received) = std::thread::scope(|s| {
        let sender = s.spawn(|| send_stream(&pipe, DOWN));
        let received = check_stream(&pipe, UP);
        (sender.join().expect("sender thread"), received)
    });
    eprintln!(
        "{COUNT} messages each way, {} MB down and {} MB up, in {:?}",
        sent.0 / 1_000_000,
        received.0 / 1_000_000,
        started.elapsed()
    );
    let report = pipe.recv().expect("the child's summary");
    assert_eq!(report, summary(sent, received), "child's summary");
    drop(pipe);
    child.wait_ok();
}

fn child() {
    let (_dog, pipe) = ferry_testkit::child_pipe("child", secs(120));
    pipe.sender().set_out_of_line(usize::MAX);
    let (received, sent) = std::thread::scope(|s| {
        let sender = s.spawn(|| send_stream(&pipe, UP));
        let received = check_stream(&pipe, DOWN);
        (received, sender.join().expect("sender thread"))
    });
    pipe.send(&summary(received, sent)).expect("send summary");
    assert!(
        matches!(pipe.recv(), Err(ferry::RecvError::Disconnected)),
        "nothing after the last message"
    );
}

/// Messages in the one-way stream below.
const SMALL_COUNT: u64 = 400_000;

/// One way, 64-byte messages as fast as the child sends them, the parent
/// answering nothing until the end: its receive keeps catching up with
/// the stream, and the adaptive wait lets batches build before it looks
/// again (`Pace` in `wait/pace.rs`). Every message still arrives, in
/// order, those taken with a timeout shorter than that pause too.
#[test]
fn a_one_way_stream_of_small_messages_arrives_in_order() {
    if ferry_testkit::role().is_some() {
        return small_stream_child();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, pipe) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let mut got = Vec::new();
    let mut timeouts = 0u64;
    let mut seq = 0u64;
    while seq < SMALL_COUNT {
        // Every 64th receive has 1 µs to find its message.
        let received = if seq.is_multiple_of(64) {
            match pipe
                .receiver()
                .recv_timeout(std::time::Duration::from_micros(1))
            {
                Err(ferry::RecvTimeoutError::Timeout) => {
                    timeouts += 1;
                    continue;
                }
                Ok(message) => {
                    got = message;
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        } else {
            pipe.receiver()
                .recv_into(&mut got)
                .map_err(|e| e.to_string())
        };
        received.unwrap_or_else(|e| panic!("recv of message {seq}: {e}"));
        let mut want = [0u8; 64];
        want[..8].copy_from_slice(&seq.to_le_bytes());
        want[8..].fill(seq as u8);
        assert_eq!(got, want, "message {seq}");
        seq += 1;
    }
    eprintln!("{SMALL_COUNT} messages of 64 B, {timeouts} receives timed out first");
    pipe.send(&seq.to_le_bytes()).expect("send the count");
    drop(pipe);
    child.wait_ok();
}

fn small_stream_child() {
    let (_dog, pipe) = ferry_testkit::child_pipe("child", secs(120));
    let mut msg = [0u8; 64];
    for seq in 0..SMALL_COUNT {
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        msg[8..].fill(seq as u8);
        pipe.send(&msg)
            .unwrap_or_else(|e| panic!("send of message {seq}: {e}"));
    }
    let count = pipe.recv().expect("the parent's count");
    assert_eq!(count, SMALL_COUNT.to_le_bytes(), "messages the parent took");
}
