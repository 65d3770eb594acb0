//! Ring tests over heap storage; they also run under Miri.

use std::sync::Arc;

use super::*;

fn pair(capacity: usize) -> (Producer<Arc<HeapStorage>>, Consumer<Arc<HeapStorage>>) {
    let storage = HeapStorage::new(capacity);
    (Producer::new(Arc::clone(&storage)), Consumer::new(storage))
}

fn pop(c: &mut Consumer<Arc<HeapStorage>>) -> Option<(u32, Vec<u8>)> {
    let frame = c.peek().unwrap()?;
    let mut body = Vec::new();
    c.read_append(frame, 0, frame.len, &mut body);
    c.consume(frame);
    Some((frame.tag, body))
}

#[test]
fn frames_come_out_in_order_and_whole() {
    let (mut p, mut c) = pair(256);
    assert_eq!(pop(&mut c), None);
    assert!(p.try_push(7, &[b"abc", b"de"]).unwrap());
    assert!(p.try_push(8, &[]).unwrap());
    assert_eq!(pop(&mut c), Some((7, b"abcde".to_vec())));
    assert_eq!(pop(&mut c), Some((8, Vec::new())));
    assert_eq!(pop(&mut c), None);
}

#[test]
fn a_full_ring_refuses_then_accepts_after_a_pop() {
    let (mut p, mut c) = pair(64);
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

#[test]
fn frames_wrap_around_the_end_intact() {
    let (mut p, mut c) = pair(128);
    let rounds = if cfg!(miri) { 40 } else { 2000 };
    for i in 0..rounds {
        let len = (i * 7) % 100;
        let body: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
        assert!(
            p.try_push(i as u32, &[&body[..len / 2], &body[len / 2..]])
                .unwrap()
        );
        assert_eq!(pop(&mut c), Some((i as u32, body)));
    }
}

#[test]
fn partial_reads_see_the_right_bytes() {
    let (mut p, mut c) = pair(64);
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
fn impossible_positions_are_corrupt_not_panics() {
    let (mut p, mut c) = pair(64);
    let control = p.storage().control();
    control.producer.pos.store(1000, Ordering::SeqCst);
    assert!(c.peek().is_err(), "tail beyond head + capacity");
    control.producer.pos.store(3, Ordering::SeqCst);
    assert!(c.peek().is_err(), "unaligned tail");
    control.consumer.pos.store(8, Ordering::SeqCst);
    assert!(p.free().is_err(), "head beyond tail");
}

#[test]
fn a_lying_frame_length_is_corrupt() {
    let (p, mut c) = pair(64);
    // Publish 16 bytes whose header claims a 4000-byte body.
    let header = [0xa0u8, 0x0f, 0, 0, 0, 0, 0, 0];
    // SAFETY: the producer owns this range until it publishes the tail.
    unsafe { copy_in(p.storage(), 0, &header) };
    p.storage()
        .control()
        .producer
        .pos
        .store(16, Ordering::Release);
    assert_eq!(
        c.peek(),
        Err(Corrupt("frame length runs past the published data"))
    );
}

#[test]
fn two_threads_stream_without_loss() {
    let (mut p, mut c) = pair(256);
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
