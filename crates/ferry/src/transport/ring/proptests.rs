//! The ring against a queue oracle: random pushes, pops and peeks on heap
//! storage and on a real shared mapping, at several capacities and start
//! positions (near 2^64 too). Too slow for Miri.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::base::sync::Ordering;
use crate::transport::ring::Region;

#[derive(Debug, Clone)]
enum Op {
    /// Push `body` as two parts split at `split % (len + 1)`.
    Push {
        tag: u32,
        body: Vec<u8>,
        split: usize,
    },
    Pop,
    /// Peek, then read `len` bytes from `offset` (both modulo the body).
    Peek {
        offset: usize,
        len: usize,
    },
}

fn op(capacity: usize) -> impl Strategy<Value = Op> {
    let push = (
        any::<u32>(),
        prop::collection::vec(any::<u8>(), 0..capacity / 2),
        any::<usize>(),
    )
        .prop_map(|(tag, body, split)| Op::Push { tag, body, split });
    let peek = (any::<usize>(), any::<usize>()).prop_map(|(offset, len)| Op::Peek { offset, len });
    prop_oneof![4 => push, 3 => Just(Op::Pop), 1 => peek]
}

/// Where both positions start: zero, anywhere, or just below 2^64.
fn start() -> impl Strategy<Value = u64> {
    let below_wrap = (0u64..64 * 1024).prop_map(|back| u64::MAX - back);
    prop_oneof![Just(0), any::<u64>(), below_wrap].prop_map(|pos| pos & !7)
}

/// A capacity from `choices`, a start position and operations to run.
fn case(choices: &'static [usize]) -> impl Strategy<Value = (usize, u64, Vec<Op>)> {
    prop::sample::select(choices).prop_flat_map(|capacity| {
        (
            Just(capacity),
            start(),
            prop::collection::vec(op(capacity), 1..300),
        )
    })
}

/// Both sides of `storage`, whose positions are set to `start` first.
fn adopt_at<S: Storage + Clone>(storage: S, start: u64) -> (Producer<S>, Consumer<S>) {
    storage
        .control()
        .producer
        .pos
        .store(start, Ordering::Relaxed);
    storage
        .control()
        .consumer
        .pos
        .store(start, Ordering::Relaxed);
    let producer = Producer::new(storage.clone()).expect("consistent positions");
    (
        producer,
        Consumer::new(storage).expect("consistent positions"),
    )
}

/// Runs `ops` on the ring and on the oracle; every pop, peek and refused
/// push must agree. Drains the ring at the end.
fn check_against_oracle<S: Storage>(
    mut p: Producer<S>,
    mut c: Consumer<S>,
    capacity: usize,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut oracle = VecDeque::<(u32, Vec<u8>)>::new();
    let mut queued = 0;
    for op in ops {
        match op {
            Op::Push { tag, body, split } => {
                let fits = queued + frame_size(body.len()) <= capacity;
                let (a, b) = body.split_at(split % (body.len() + 1));
                prop_assert_eq!(p.try_push(*tag, &[a, b]), Ok(fits));
                if fits {
                    queued += frame_size(body.len());
                    oracle.push_back((*tag, body.clone()));
                }
            }
            Op::Pop => {
                let expected = oracle.pop_front();
                queued -= expected.as_ref().map_or(0, |(_, b)| frame_size(b.len()));
                prop_assert_eq!(pop(&mut c), expected);
            }
            Op::Peek { offset, len } => peek_matches(&mut c, oracle.front(), *offset, *len)?,
        }
    }
    while let Some(expected) = oracle.pop_front() {
        prop_assert_eq!(pop(&mut c), Some(expected));
    }
    prop_assert_eq!(pop(&mut c), None);
    prop_assert_eq!(p.free(), Ok(capacity));
    Ok(())
}

fn peek_matches<S: Storage>(
    c: &mut Consumer<S>,
    expected: Option<&(u32, Vec<u8>)>,
    offset: usize,
    len: usize,
) -> Result<(), TestCaseError> {
    let frame = c.peek().expect("an honest producer");
    prop_assert_eq!(
        frame.map(|f| (f.tag(), f.len())),
        expected.map(|(t, b)| (*t, b.len()))
    );
    if let (Some(frame), Some((_, body))) = (frame, expected) {
        let offset = offset % (body.len() + 1);
        let mut part = vec![0; len % (body.len() - offset + 1)];
        c.read(frame, offset, &mut part);
        prop_assert_eq!(&part[..], &body[offset..offset + part.len()]);
    }
    Ok(())
}

fn pop<S: Storage>(c: &mut Consumer<S>) -> Option<(u32, Vec<u8>)> {
    let frame = c.peek().expect("an honest producer")?;
    let mut body = vec![0xee; 3];
    c.read_append(frame, 0, frame.len(), &mut body);
    c.consume(frame);
    Some((frame.tag(), body.split_off(3)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    #[cfg_attr(miri, ignore)]
    fn heap_rings_match_a_queue((capacity, start, ops) in case(&[64, 128, 256, 4096])) {
        let (p, c) = adopt_at(HeapStorage::new(capacity), start);
        check_against_oracle(p, c, capacity, &ops)?;
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn mapped_rings_match_a_queue((capacity, start, ops) in case(&[4096, 8192])) {
        let region = Region::create(capacity).expect("a shared mapping");
        let (p, c) = adopt_at(region.ring(0), start);
        check_against_oracle(p, c, capacity, &ops)?;
        prop_assert_eq!(region.control(1).producer.pos.load(Ordering::Relaxed), 0);
    }
}
