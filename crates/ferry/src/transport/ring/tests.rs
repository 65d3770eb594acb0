//! Ring tests over heap storage; they also run under Miri.
//!
//! The unsafe blocks play a hostile producer writing a lying frame header
//! into the free space a real producer would own, while none writes.
#![allow(unsafe_code)]

use crate::base::wire::Violation;
use std::sync::Arc;

use super::copy::copy_in;
use super::*;
use crate::base::sync::Ordering;

type Heap = Arc<HeapStorage>;

/// A producer and a consumer adopting `storage` as it stands.
fn adopt(storage: &Heap) -> Result<(Producer<Heap>, Consumer<Heap>), Corrupt> {
    Ok((
        Producer::new(Arc::clone(storage))?,
        Consumer::new(Arc::clone(storage))?,
    ))
}

/// Fresh storage whose control block says `tail` and `head`.
fn storage_at(capacity: usize, tail: u64, head: u64) -> Heap {
    let storage = HeapStorage::new(capacity);
    let control = storage.control();
    control.producer.pos.store(tail, Ordering::Relaxed);
    control.consumer.pos.store(head, Ordering::Relaxed);
    storage
}

/// Both sides of an empty ring whose positions start at `start`, and its
/// storage for playing the hostile peer.
fn pair_at(capacity: usize, start: u64) -> (Producer<Heap>, Consumer<Heap>, Heap) {
    let storage = storage_at(capacity, start, start);
    let (p, c) = adopt(&storage).expect("consistent positions");
    (p, c, storage)
}

fn pop<S: Storage>(c: &mut Consumer<S>) -> Option<(u32, Vec<u8>)> {
    let frame = c.peek().unwrap()?;
    let mut body = Vec::new();
    c.read_append(frame, 0, frame.len(), &mut body);
    c.consume(frame);
    Some((frame.tag(), body))
}

#[test]
fn frames_come_out_in_order_and_whole() {
    let (mut p, mut c) = heap(256);
    assert_eq!(pop(&mut c), None);
    assert!(p.try_push(7, &[b"abc", b"de"]).unwrap());
    assert!(p.try_push(8, &[]).unwrap());
    assert_eq!(pop(&mut c), Some((7, b"abcde".to_vec())));
    assert_eq!(pop(&mut c), Some((8, Vec::new())));
    assert_eq!(pop(&mut c), None);
}

#[test]
fn a_full_ring_refuses_then_accepts_after_a_pop() {
    let (mut p, mut c) = heap(64);
    // 64 bytes hold two frames of 8 + 24 bytes.
    assert!(p.try_push(1, &[&[1; 24]]).unwrap());
    assert!(p.try_push(2, &[&[2; 24]]).unwrap());
    assert!(!p.try_push(3, &[&[3; 1]]).unwrap());
    assert_eq!(p.free().unwrap(), 0);
    assert_eq!(pop(&mut c), Some((1, vec![1; 24])));
    assert!(p.try_push(3, &[&[3; 1]]).unwrap());
    assert_eq!(pop(&mut c), Some((2, vec![2; 24])));
    assert_eq!(pop(&mut c), Some((3, vec![3; 1])));
}

/// Pushes and pops `rounds` frames of varying sizes, split in two parts.
fn stream_through<S: Storage>(p: &mut Producer<S>, c: &mut Consumer<S>, rounds: usize) {
    for i in 0..rounds {
        let len = (i * 7) % 100;
        let body: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
        assert!(
            p.try_push(i as u32, &[&body[..len / 2], &body[len / 2..]])
                .unwrap()
        );
        assert_eq!(pop(c), Some((i as u32, body)));
    }
}

#[test]
fn frames_wrap_around_the_end_intact() {
    let (mut p, mut c) = heap(128);
    stream_through(&mut p, &mut c, if cfg!(miri) { 40 } else { 2000 });
}

#[test]
fn partial_reads_see_the_right_bytes() {
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(0, &[&[9; 40]]).unwrap());
    pop(&mut c);
    // This frame wraps: it starts at 48 of 64.
    let body: Vec<u8> = (0..30).collect();
    assert!(p.try_push(5, &[&body]).unwrap());
    let frame = c.peek().unwrap().unwrap();
    let mut middle = [0u8; 10];
    c.read(frame, 10, &mut middle);
    assert_eq!(middle.to_vec(), body[10..20].to_vec());
}

#[test]
fn adoption_refuses_unaligned_positions() {
    for (tail, head) in [(3, 0), (12, 8), (8, 4), (0, 1), (u64::MAX, u64::MAX)] {
        let storage = storage_at(64, tail, head);
        assert!(
            Producer::new(Arc::clone(&storage)).is_err(),
            "{tail} {head}"
        );
        assert!(Consumer::new(storage).is_err(), "{tail} {head}");
    }
}

#[test]
fn adoption_refuses_more_than_capacity_in_flight() {
    let near_wrap = u64::MAX - 7;
    for (tail, head) in [
        (72, 0),
        (1 << 40, 0),
        (0, 8),
        (near_wrap, 0),
        (72, near_wrap),
        (near_wrap - 64, near_wrap),
    ] {
        let storage = storage_at(64, tail, head);
        assert!(
            Producer::new(Arc::clone(&storage)).is_err(),
            "{tail} {head}"
        );
        assert!(Consumer::new(storage).is_err(), "{tail} {head}");
    }
}

#[test]
fn adoption_accepts_consistent_positions_across_the_wrap() {
    let near_wrap = u64::MAX - 7;
    for (tail, head) in [
        (64, 0),
        (near_wrap, near_wrap),
        (56, near_wrap),
        (0, near_wrap - 56),
    ] {
        let storage = storage_at(64, tail, head);
        assert!(adopt(&storage).is_ok(), "{tail} {head}");
    }
}

#[test]
fn positions_near_the_top_work_across_the_wrap() {
    let start = (u64::MAX - 100) & !7;
    let (mut p, mut c, storage) = pair_at(128, start);
    stream_through(&mut p, &mut c, if cfg!(miri) { 60 } else { 3000 });
    let control = storage.control();
    let tail = control.producer.pos.load(Ordering::Relaxed);
    assert!(tail < start, "the positions wrapped past 2^64");
    assert_eq!(control.consumer.pos.load(Ordering::Relaxed), tail);
}

#[test]
fn a_consumer_resumes_frames_that_straddle_the_wrap() {
    let start = u64::MAX - 7 - 32;
    let (mut p, c, storage) = pair_at(128, start);
    drop(c);
    for i in 0..3u8 {
        assert!(p.try_push(u32::from(i), &[&[i; 20]]).unwrap());
    }
    // The second frame crosses 2^64; a new consumer takes over.
    let mut c = Consumer::new(storage).unwrap();
    for i in 0..3u8 {
        assert_eq!(pop(&mut c), Some((u32::from(i), vec![i; 20])));
    }
    assert_eq!(pop(&mut c), None);
}

/// The attack as it arrives: a peer sends a pipe end whose region says
/// impossible positions; both sides refuse to adopt it.
#[test]
#[cfg_attr(miri, ignore)] // memfd and sockets
fn a_peer_region_with_impossible_positions_is_refused() {
    use crate::transport::link::Link;
    let (sa, sb) = crate::base::sys::socket_pair().unwrap();
    let limits = crate::api::channel::PipeOptions::new().link_limits();
    let (ours, theirs) = (Link::new(sa, limits), Link::new(sb, limits));
    for (tail, head) in [(4, 0), (u64::MAX - 3, u64::MAX - 3), (8192, 0)] {
        let region = crate::transport::ring::Region::create(4096).unwrap();
        let control = region.control(0);
        control.producer.pos.store(tail, Ordering::Relaxed);
        control.consumer.pos.store(head, Ordering::Relaxed);
        let end = crate::base::wire::record::Carried::Pipe { role: 0 };
        let id = theirs
            .send_pipe_end(&region, end, true, None, None)
            .unwrap();
        let mut deadline = crate::transport::link::Deadline::new(None);
        let end = ours
            .collect(&[id], None, &mut deadline)
            .unwrap()
            .0
            .remove(0);
        let crate::transport::link::Claimed::Handle(end) = end else {
            panic!("a pipe end was sent")
        };
        let (adopted, role) = (end.region, 0);
        assert!(Producer::new(adopted.ring(role)).is_err(), "{tail} {head}");
        assert!(Consumer::new(adopted.ring(role)).is_err(), "{tail} {head}");
        assert!(Consumer::new(adopted.ring(1 - role)).is_ok());
    }
}

#[test]
fn garbage_tails_published_later_are_corrupt() {
    for start in [0, u64::MAX - 15] {
        for garbage in [
            3,
            start.wrapping_add(72),
            start.wrapping_sub(8),
            u64::MAX,
            1 << 63,
        ] {
            let (_p, mut c, storage) = pair_at(64, start);
            let control = storage.control();
            control.producer.pos.store(garbage, Ordering::Release);
            assert_eq!(
                c.peek(),
                Err(Corrupt(Violation::BadWritePosition)),
                "{start} {garbage}"
            );
            assert!(c.is_empty().is_err());
        }
    }
}

#[test]
fn garbage_heads_published_later_are_corrupt() {
    for start in [0, u64::MAX - 15] {
        for garbage in [
            start.wrapping_add(4),
            start.wrapping_add(40),
            start.wrapping_sub(8),
            u64::MAX,
            1 << 63,
        ] {
            let (mut p, _c, storage) = pair_at(64, start);
            assert!(p.try_push(1, &[&[1; 24]]).unwrap());
            storage
                .control()
                .consumer
                .pos
                .store(garbage, Ordering::Release);
            assert!(p.free().is_err(), "{start} {garbage}");
            assert!(p.try_push(2, &[&[2; 40]]).is_err(), "{start} {garbage}");
        }
    }
}

#[test]
fn a_lying_frame_length_is_corrupt() {
    let (_p, mut c, storage) = pair_at(64, 0);
    // Publish 16 bytes whose header claims a 4000-byte body.
    let header = [0xa0u8, 0x0f, 0, 0, 0, 0, 0, 0];
    // SAFETY: the producer owns this range until it publishes the tail.
    unsafe { copy_in(&storage, 0, &header) };
    storage.control().producer.pos.store(16, Ordering::Release);
    assert_eq!(c.peek(), Err(Corrupt(Violation::FrameOverrun)));
}

#[test]
fn the_largest_claimed_length_is_corrupt_not_an_overflow() {
    let (_p, mut c, storage) = pair_at(64, u64::MAX - 7);
    // SAFETY: as above, the range belongs to the (absent) producer.
    unsafe { copy_in(&storage, u64::MAX - 7, &u64::MAX.to_le_bytes()) };
    storage.control().producer.pos.store(56, Ordering::Release);
    assert!(c.peek().is_err());
}

#[test]
#[should_panic(expected = "not peeked from this consumer at its read position")]
fn a_consumed_frame_cannot_be_read_again() {
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(1, &[&[1; 8]]).unwrap());
    let frame = c.peek().unwrap().unwrap();
    c.consume(frame);
    assert!(p.try_push(2, &[&[2; 40]]).unwrap());
    let mut out = Vec::new();
    c.read_append(frame, 0, frame.len(), &mut out);
}

#[test]
#[should_panic(expected = "not peeked from this consumer at its read position")]
fn a_frame_from_another_consumer_is_refused() {
    let (mut big_p, mut big_c) = heap(4096);
    assert!(big_p.try_push(1, &[&[1; 4000]]).unwrap());
    let frame = big_c.peek().unwrap().unwrap();
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(2, &[&[2; 8]]).unwrap());
    assert!(c.peek().unwrap().is_some());
    let mut out = vec![0; 4000];
    c.read(frame, 0, &mut out);
}

#[test]
#[should_panic(expected = "not peeked from this consumer at its read position")]
fn a_frame_is_not_consumed_twice() {
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(1, &[&[1; 8]]).unwrap());
    let frame = c.peek().unwrap().unwrap();
    c.consume(frame);
    c.consume(frame);
}

#[test]
#[should_panic(expected = "read past the frame body")]
fn an_overflowing_offset_is_refused() {
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(1, &[&[1; 16]]).unwrap());
    let frame = c.peek().unwrap().unwrap();
    let mut out = [0u8; 8];
    c.read(frame, usize::MAX - 3, &mut out);
}

#[test]
#[should_panic(expected = "frame body larger than the ring")]
fn a_body_larger_than_the_ring_is_a_caller_bug() {
    let (mut p, _c) = heap(64);
    let _ = p.try_push(1, &[&[0; 40], &[0; 40]]);
}

#[test]
fn two_threads_stream_without_loss() {
    let (mut p, mut c) = heap(256);
    let count: u32 = if cfg!(miri) { 200 } else { 100_000 };
    let writer = std::thread::spawn(move || {
        for i in 0..count {
            let body = i.to_le_bytes();
            let len = (i % 13) as usize;
            while !p.try_push(i, &[&body, &vec![i as u8; len]]).unwrap() {
                std::thread::yield_now();
            }
        }
    });
    for i in 0..count {
        let (tag, body) = loop {
            match pop(&mut c) {
                Some(frame) => break frame,
                None => std::thread::yield_now(),
            }
        };
        assert_eq!(tag, i);
        assert_eq!(body[..4], i.to_le_bytes());
        assert_eq!(body.len(), 4 + (i % 13) as usize);
    }
    writer.join().unwrap();
}

#[test]
fn frames_written_in_place_come_out_whole_and_wrap() {
    let (mut p, mut c, _storage) = pair_at(128, 96);
    // The first frame's body starts 8 bytes before the end and wraps.
    let written = p.try_push_with(5, 1, usize::MAX, |w| {
        w.put(b"hello, ");
        w.put(b"wrapped ");
        w.put(b"world");
    });
    assert_eq!(written.unwrap(), Some(true));
    assert_eq!(pop(&mut c), Some((5, b"hello, wrapped world".to_vec())));
    // Nothing put: an empty frame.
    assert_eq!(p.try_push_with(6, 0, 64, |_| {}).unwrap(), Some(true));
    assert_eq!(pop(&mut c), Some((6, Vec::new())));
}

#[test]
fn a_frame_written_in_place_past_its_bound_is_not_published() {
    let (mut p, mut c) = heap(64);
    // At most 10 bytes asked for: 11 overflow, and nothing is published.
    let over = p.try_push_with(1, 1, 10, |w| {
        w.put(&[1; 6]);
        w.put(&[2; 5]);
    });
    assert_eq!(over.unwrap(), Some(false));
    assert_eq!(pop(&mut c), None);
    // Room for 56 bytes of body: a 57-byte put overflows, a 56-byte one fits.
    assert_eq!(
        p.try_push_with(2, 1, usize::MAX, |w| w.put(&[3; 57]))
            .unwrap(),
        Some(false)
    );
    assert_eq!(
        p.try_push_with(2, 1, usize::MAX, |w| w.put(&[3; 56]))
            .unwrap(),
        Some(true)
    );
    // Full now: less room than asked for, and `write` is not called.
    let called = std::cell::Cell::new(false);
    assert_eq!(
        p.try_push_with(3, 1, usize::MAX, |_| called.set(true))
            .unwrap(),
        None
    );
    assert!(!called.get());
    assert_eq!(pop(&mut c), Some((2, vec![3; 56])));
}

#[test]
fn a_slot_in_place_starts_zeroed_and_is_read_in_place() {
    // Stale bytes where the slot will be (the ring's first 48 bytes, then
    // a lap later): the slot starts from zeros all the same.
    let (mut p, mut c) = heap(128);
    assert!(p.try_push(1, &[&[0xAA; 40]]).unwrap());
    assert_eq!(pop(&mut c), Some((1, vec![0xAA; 40])));
    assert!(p.try_push(1, &[&[0xAA; 72]]).unwrap());
    assert_eq!(pop(&mut c), Some((1, vec![0xAA; 72])));
    let seen = std::cell::RefCell::new(Vec::new());
    let pushed = p.try_push_in_place(2, 20, |slot| {
        seen.borrow_mut().extend_from_slice(slot);
        slot[..5].copy_from_slice(b"hello");
    });
    assert!(pushed.unwrap().is_ok());
    assert_eq!(*seen.borrow(), [0; 20]);
    let frame = c.peek().unwrap().expect("a frame");
    let body = c.body_in_place(frame).expect("in one piece");
    assert_eq!(&body[..7], b"hello\0\0");
    assert_eq!(body.len(), 20);
    c.consume(frame);
    assert_eq!(pop(&mut c), None);
}

#[test]
fn a_slot_that_would_wrap_or_does_not_fit_gives_write_back() {
    // The next body would start 8 bytes before the end: it would wrap.
    let (mut p, mut c, _storage) = pair_at(128, 112);
    let called = std::cell::Cell::new(false);
    let back = p
        .try_push_in_place(3, 20, |_| called.set(true))
        .unwrap()
        .expect_err("a body that wraps is not lent");
    assert!(!called.get());
    // Written as a copy instead, it wraps, and is not lent in place either.
    assert!(p.try_push(3, &[b"across the end", b" of it"]).unwrap());
    let frame = c.peek().unwrap().expect("a frame");
    assert_eq!(c.body_in_place(frame), None);
    assert_eq!(pop(&mut c), Some((3, b"across the end of it".to_vec())));
    back(&mut []);
    assert!(called.get());
    // Too full: with 24 of 64 bytes taken, 32 bytes of body fit, 33 do not.
    let (mut p, mut c) = heap(64);
    assert!(p.try_push(4, &[&[1; 16]]).unwrap());
    assert!(p.try_push_in_place(4, 33, |_| {}).unwrap().is_err());
    assert!(p.try_push_in_place(4, 32, |s| s.fill(9)).unwrap().is_ok());
    assert_eq!(pop(&mut c), Some((4, vec![1; 16])));
    assert_eq!(pop(&mut c), Some((4, vec![9; 32])));
}

#[test]
fn a_slot_whose_writer_panics_publishes_nothing() {
    let (mut p, mut c) = heap(128);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = p.try_push_in_place(5, 8, |_| panic!("the writer fails"));
    }));
    assert!(panicked.is_err());
    assert_eq!(pop(&mut c), None);
    assert!(
        p.try_push_in_place(6, 3, |s| s.copy_from_slice(b"abc"))
            .unwrap()
            .is_ok()
    );
    assert_eq!(pop(&mut c), Some((6, b"abc".to_vec())));
}

/// The write prefetch is used exactly where the CPU has it: the kernel's
/// name for the feature is `3dnowprefetch`.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
#[cfg_attr(miri, ignore = "Miri reads no /proc and runs no prefetch")]
fn the_write_prefetch_is_used_where_the_cpu_has_it() {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
    let flags = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags"))
        .expect("a flags line");
    let has = flags.split_whitespace().any(|f| f == "3dnowprefetch");
    assert_eq!(super::copy::can_prefetch_for_write(), has);
}

/// A stream through a small ring, where every frame's publication asks
/// for a line ahead in free space (and, near the end of the free space,
/// does not): every frame arrives whole and in order.
#[test]
fn frames_written_behind_the_write_prefetch_arrive_whole() {
    let (mut p, mut c, _storage) = pair_at(1024, u64::MAX - 4095);
    for round in 0..2_000u32 {
        let body: Vec<u8> = (0..(round % 97) as u8).map(|b| b ^ round as u8).collect();
        assert_eq!(p.try_push(round, &[&body]), Ok(true));
        if round % 3 != 0 {
            continue;
        }
        for want in round.saturating_sub(2)..=round {
            let (tag, got) = pop(&mut c).expect("a frame");
            assert_eq!(tag, want);
            assert_eq!(got.len(), (want % 97) as usize);
            assert!(
                got.iter()
                    .enumerate()
                    .all(|(i, &b)| b == i as u8 ^ want as u8)
            );
        }
    }
}
