//! The ring's hot path on heap storage: push one frame, then peek, copy out
//! and consume it, at sizes from the smallest pingpong message to a page;
//! and the producer's side alone.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ferry::ring;

/// The ring's data area: room for every size below.
const CAPACITY: usize = 64 * 1024;
const SIZES: &[usize] = &[12, 144, 1728, 4096];

fn push_pop(c: &mut Criterion) {
    let mut group = c.benchmark_group("ring push+pop");
    for &size in SIZES {
        let (mut producer, mut consumer) = ring::heap(CAPACITY);
        let body = vec![0x5a; size];
        let mut out = Vec::with_capacity(size);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::from_parameter(size), |b| {
            b.iter(|| {
                let pushed = producer.try_push(7, &[black_box(&body)]);
                assert_eq!(pushed, Ok(true));
                let frame = consumer.peek().ok().flatten().expect("a frame");
                out.clear();
                consumer.read_append(frame, 0, frame.len(), &mut out);
                consumer.consume(frame);
                black_box(&out);
            });
        });
    }
    group.finish();
}

fn push_only(c: &mut Criterion) {
    // Pushes until the ring is full, then drains it untimed: the producer's
    // side alone, 144-byte frames.
    let (mut producer, mut consumer) = ring::heap(CAPACITY);
    let body = [0x5a; 144];
    c.bench_function("ring push 144 B", |b| {
        b.iter(|| {
            if !producer
                .try_push(1, &[black_box(&body)])
                .expect("sound ring")
            {
                while let Some(frame) = consumer.peek().expect("sound ring") {
                    consumer.consume(frame);
                }
                assert_eq!(producer.try_push(1, &[&body]), Ok(true));
            }
        });
    });
}

criterion_group!(benches, push_pop, push_only);
criterion_main!(benches);
