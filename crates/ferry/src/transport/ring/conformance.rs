//! What every ring [`Storage`] must do, as one suite run on each
//! implementation the crate has (iceoryx2's `conformance-tests` shape): the
//! suite is generic over a [`Kind`] that makes fresh storage, and
//! [`storage_suite!`] instantiates every test of it per kind.
//!
//! The kinds: heap memory ([`HeapStorage`] behind an `Arc`, as the fuzz
//! targets and benchmarks use it), a ring of a shared mapping
//! ([`RingView`], both sides on one mapping, as in-process pipes use it),
//! and both sides on two mappings of one memory object (as two processes
//! map a pipe's region: the producer's side from the region it made, the
//! consumer's from the descriptor it was sent).
//!
//! The unsafe blocks reach the data area through the raw pointer
//! [`Storage::data`] gives, as the ring's sides do, while no side exists.
#![allow(unsafe_code)]
// Under Miri only the heap kind runs (the others map memfds).
#![cfg_attr(miri, allow(dead_code))]

use std::sync::Arc;

use super::region::{Region, RingView};
use super::{Consumer, Corrupt, HeapStorage, Producer, Storage};
use crate::base::sync::Ordering;
use crate::base::sys::PeerFd;
use crate::base::wire::Violation;

/// A storage implementation under test.
trait Kind {
    /// The storage.
    type S: Storage + Send + 'static;
    /// The smallest capacity it makes.
    const MIN: usize;
    /// The producer's and the consumer's handles on one fresh ring of
    /// `capacity` bytes.
    fn make(capacity: usize) -> (Self::S, Self::S);
}

/// Heap memory, shared through an `Arc`.
struct Heap;

impl Kind for Heap {
    type S = Arc<HeapStorage>;
    const MIN: usize = 64;
    fn make(capacity: usize) -> (Self::S, Self::S) {
        let storage = HeapStorage::new(capacity);
        (Arc::clone(&storage), storage)
    }
}

/// Ring 1 of one shared mapping (ring 0 is written alongside, so a view
/// that strayed into its neighbour would show).
struct Mapped;

impl Kind for Mapped {
    type S = RingView;
    const MIN: usize = crate::base::wire::region::MIN_CAPACITY;
    fn make(capacity: usize) -> (Self::S, Self::S) {
        let region = Region::create(capacity).expect("make a region");
        fill_neighbour(&region.ring(0));
        (region.ring(1), region.ring(1))
    }
}

/// Ring 0 of one memory object mapped twice: the producer's side on the
/// mapping that made it, the consumer's on a mapping of a copy of its
/// descriptor, as a peer process maps what it was sent.
struct Remapped;

impl Kind for Remapped {
    type S = RingView;
    const MIN: usize = crate::base::wire::region::MIN_CAPACITY;
    fn make(capacity: usize) -> (Self::S, Self::S) {
        let made = Region::create(capacity).expect("make a region");
        let mut copy = None;
        made.send_object(false, |fd| {
            copy = Some(fd.try_clone_to_owned()?);
            Ok(())
        })
        .expect("the region's object is held");
        let received = Region::from_peer(PeerFd::new(copy.expect("a copy")), false)
            .expect("map the region as its peer would");
        fill_neighbour(&made.ring(1));
        (made.ring(0), received.ring(0))
    }
}

/// Writes 0xee over the whole data area of `neighbour`, a ring beside the
/// one under test.
fn fill_neighbour(neighbour: &RingView) {
    // SAFETY: `data()` points to `capacity()` bytes valid for writes (the
    // `Storage` contract), and no side of this ring exists.
    unsafe { std::ptr::write_bytes(neighbour.data(), 0xee, neighbour.capacity()) };
}

/// Both sides of a fresh ring of `capacity` bytes of kind `K`.
fn sides<K: Kind>(capacity: usize) -> (Producer<K::S>, Consumer<K::S>) {
    let (ps, cs) = K::make(capacity);
    let fresh = "a fresh ring's positions are both zero";
    (
        Producer::new(ps).expect(fresh),
        Consumer::new(cs).expect(fresh),
    )
}

/// Takes the next frame whole: its tag and body.
fn pop<S: Storage>(c: &mut Consumer<S>) -> Option<(u32, Vec<u8>)> {
    let frame = c.peek().expect("an honest ring")?;
    let mut body = Vec::new();
    c.read_append(frame, 0, frame.len(), &mut body);
    c.consume(frame);
    Some((frame.tag(), body))
}

/// Body `i` of a stream through a ring of `capacity` bytes: its length
/// varies (up to a third of the ring) and its bytes name it.
fn body(i: usize, capacity: usize) -> Vec<u8> {
    let len = (i * 37) % (capacity / 3);
    (0..len).map(|b| (b + i) as u8).collect()
}

/// A fresh storage is as large as asked, its positions are zero, and the
/// producer's and consumer's handles reach the same bytes and the same
/// control block.
fn fresh_storage_is_one_memory_as_large_as_asked<K: Kind>() {
    for capacity in [K::MIN, 4 * K::MIN] {
        let (ps, cs) = K::make(capacity);
        assert_eq!((ps.capacity(), cs.capacity()), (capacity, capacity));
        assert!(capacity.is_power_of_two() && capacity >= 64);
        for side in [&ps.control().producer, &ps.control().consumer] {
            assert_eq!(side.pos.load(Ordering::Relaxed), 0);
        }
        // SAFETY: both pointers are valid for `capacity` bytes (the
        // `Storage` contract); no side of the ring exists, so nothing else
        // touches them.
        let (written, read) = unsafe {
            let data = std::slice::from_raw_parts_mut(ps.data(), capacity);
            for (i, byte) in data.iter_mut().enumerate() {
                *byte = (i % 251) as u8;
            }
            (
                data.to_vec(),
                std::slice::from_raw_parts(cs.data(), capacity).to_vec(),
            )
        };
        assert_eq!(read, written, "the consumer's handle sees other bytes");
        ps.control().producer.pos.store(4096, Ordering::Release);
        cs.control().consumer.signal.store(7, Ordering::Release);
        assert_eq!(cs.control().producer.pos.load(Ordering::Acquire), 4096);
        assert_eq!(ps.control().consumer.signal.load(Ordering::Acquire), 7);
    }
}

/// Frames of many sizes come out in order and whole, through many laps of
/// the ring (bodies and headers wrapping around its end).
fn frames_come_out_in_order_and_whole_across_laps<K: Kind>() {
    let (mut p, mut c) = sides::<K>(K::MIN);
    let laps = 20;
    let mut sent = 0;
    for i in 0.. {
        let body = body(i, K::MIN);
        let (front, back) = body.split_at(body.len() / 3);
        assert!(p.try_push(i as u32, &[front, back]).unwrap());
        sent += super::frame_size(body.len());
        assert_eq!(pop(&mut c), Some((i as u32, body)));
        if sent > laps * K::MIN {
            break;
        }
    }
    assert_eq!(pop(&mut c), None);
}

/// A full ring refuses a frame, says it has no room, and takes the frame
/// once the consumer has made room.
fn a_full_ring_refuses_until_the_consumer_makes_room<K: Kind>() {
    let (mut p, mut c) = sides::<K>(K::MIN);
    let half = K::MIN / 2 - super::FRAME_HEADER;
    assert!(p.try_push(1, &[&vec![1; half]]).unwrap());
    assert!(p.try_push(2, &[&vec![2; half]]).unwrap());
    assert_eq!(p.free().unwrap(), 0);
    assert!(!p.try_push(3, &[&[3]]).unwrap());
    assert_eq!(pop(&mut c), Some((1, vec![1; half])));
    assert!(p.try_push(3, &[&[3]]).unwrap());
    assert_eq!(pop(&mut c), Some((2, vec![2; half])));
    assert_eq!(pop(&mut c), Some((3, vec![3])));
    assert_eq!(pop(&mut c), None);
}

/// Sides adopting the storage check the positions they find: unaligned or
/// more than the capacity apart is refused; consistent positions just
/// below 2^64 are taken, and frames then cross the wrap of the counters.
fn adoption_checks_the_positions_it_finds<K: Kind>() {
    let capacity = K::MIN as u64;
    for (tail, head, why) in [
        (4, 0, Violation::UnalignedPosition),
        (capacity + 8, 0, Violation::PositionsTooFarApart),
        (8, 16, Violation::PositionsTooFarApart),
    ] {
        let (ps, cs) = K::make(K::MIN);
        ps.control().producer.pos.store(tail, Ordering::Relaxed);
        ps.control().consumer.pos.store(head, Ordering::Relaxed);
        assert_eq!(Producer::new(ps).err(), Some(Corrupt(why)), "{tail} {head}");
        assert_eq!(Consumer::new(cs).err(), Some(Corrupt(why)), "{tail} {head}");
    }
    let start = u64::MAX - 7;
    let (ps, cs) = K::make(K::MIN);
    ps.control().producer.pos.store(start, Ordering::Relaxed);
    ps.control().consumer.pos.store(start, Ordering::Relaxed);
    let (mut p, mut c) = (Producer::new(ps).unwrap(), Consumer::new(cs).unwrap());
    for i in 0..64 {
        let body = body(i as usize, K::MIN);
        assert!(p.try_push(i, &[&body]).unwrap());
        assert_eq!(pop(&mut c), Some((i, body)));
    }
    assert!(p.tail() < start, "the tail wrapped past 2^64");
}

/// A position the other side publishes later that cannot be true is
/// `Corrupt`, at the next look, on either side.
fn impossible_positions_published_later_are_corrupt<K: Kind>() {
    let (ps, cs) = K::make(K::MIN);
    let control = ps.control() as *const super::Control;
    let (_p, mut c) = (Producer::new(ps).unwrap(), Consumer::new(cs).unwrap());
    // SAFETY: the control block lives as long as the storage the sides
    // hold; it is all atomics, so a shared reference is sound beside them.
    let control = unsafe { &*control };
    control.producer.pos.store(3, Ordering::Release);
    assert_eq!(c.peek(), Err(Corrupt(Violation::BadWritePosition)));

    let (ps, cs) = K::make(K::MIN);
    let control = ps.control() as *const super::Control;
    let (mut p, _c) = (Producer::new(ps).unwrap(), Consumer::new(cs).unwrap());
    // SAFETY: as above.
    let control = unsafe { &*control };
    assert!(p.try_push(1, &[&[1; 24]]).unwrap());
    control.consumer.pos.store(64, Ordering::Release);
    assert!(p.free().is_err(), "a head past the tail");
}

/// Frames written in place (a slot the producer lends, then a writer that
/// puts parts) come out whole, also where they wrap.
fn frames_written_in_place_come_out_whole<K: Kind>() {
    let (mut p, mut c) = sides::<K>(K::MIN);
    for i in 0..(4 * K::MIN / 64) as u32 {
        let lent = p.try_push_in_place(i, 20, |slot| slot.fill(i as u8));
        match lent.unwrap() {
            Ok(()) => assert_eq!(pop(&mut c), Some((i, vec![i as u8; 20]))),
            // A slot that would wrap is refused; the frame goes in parts.
            Err(_) => assert!(p.try_push(i, &[&[i as u8; 20]]).unwrap()),
        }
        pop(&mut c);
        let written = p.try_push_with(i, 1, usize::MAX, |w| {
            w.put(b"in ");
            w.put(b"parts");
        });
        assert_eq!(written.unwrap(), Some(true));
        assert_eq!(pop(&mut c), Some((i, b"in parts".to_vec())));
    }
}

/// A producer and a consumer on two threads stream without loss, the
/// producer waiting for room and the consumer for frames.
fn two_threads_stream_without_loss<K: Kind>() {
    let (mut p, mut c) = sides::<K>(K::MIN);
    let count = if cfg!(miri) { 200 } else { 50_000 };
    let writer = std::thread::spawn(move || {
        for i in 0..count {
            while !p.try_push(i as u32, &[&body(i % 97, K::MIN)]).unwrap() {
                std::thread::yield_now();
            }
        }
    });
    let mut writer = Some(writer);
    for i in 0..count {
        let frame = loop {
            match pop(&mut c) {
                Some(frame) => break frame,
                // Looked at again after the writer ended: it may have
                // pushed its last frame just before. Joined first: only
                // the join makes its writes visible (`is_finished` does
                // not synchronize, and Miri's weak memory shows it).
                None if writer.as_ref().is_some_and(|w| w.is_finished()) => {
                    if let Some(done) = writer.take() {
                        done.join().unwrap();
                    }
                }
                None if writer.is_none() => panic!("the writer stopped after {i} frames"),
                None => std::thread::yield_now(),
            }
        };
        assert_eq!(frame, (i as u32, body(i % 97, K::MIN)));
    }
    if let Some(writer) = writer {
        writer.join().unwrap();
    }
}

/// One module per storage kind, each running the whole suite.
macro_rules! storage_suite {
    ($($module:ident: $kind:ty),* $(,)?) => {$(
        mod $module {
            #[test]
            fn fresh_storage_is_one_memory_as_large_as_asked() {
                super::fresh_storage_is_one_memory_as_large_as_asked::<$kind>();
            }
            #[test]
            fn frames_come_out_in_order_and_whole_across_laps() {
                super::frames_come_out_in_order_and_whole_across_laps::<$kind>();
            }
            #[test]
            fn a_full_ring_refuses_until_the_consumer_makes_room() {
                super::a_full_ring_refuses_until_the_consumer_makes_room::<$kind>();
            }
            #[test]
            fn adoption_checks_the_positions_it_finds() {
                super::adoption_checks_the_positions_it_finds::<$kind>();
            }
            #[test]
            fn impossible_positions_published_later_are_corrupt() {
                super::impossible_positions_published_later_are_corrupt::<$kind>();
            }
            #[test]
            fn frames_written_in_place_come_out_whole() {
                super::frames_written_in_place_come_out_whole::<$kind>();
            }
            #[test]
            fn two_threads_stream_without_loss() {
                super::two_threads_stream_without_loss::<$kind>();
            }
        }
    )*};
}

storage_suite!(heap: super::Heap);

// Not under Miri: these make memfds and map them.
#[cfg(not(miri))]
storage_suite!(mapped: super::Mapped, remapped: super::Remapped);
