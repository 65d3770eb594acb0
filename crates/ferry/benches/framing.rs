//! ferry's framing on a pipe whose two ends are in this process: a 144-byte
//! message sent and received on one thread, and a 100 KB message that
//! travels in pieces through a 32 KiB ring to a thread that receives it
//! whole and acknowledges it.

use std::hint::black_box;
use std::thread;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ferry::PipeOptions;

const SMALL: usize = 144;
const LARGE: usize = 100_000;
/// Smaller than [`LARGE`], so it travels in pieces.
const SMALL_RING: usize = 32 * 1024;

fn small(c: &mut Criterion) {
    let (a, b) = ferry::pipe().expect("a pipe");
    let message = vec![0x5a; SMALL];
    let mut inbox = Vec::with_capacity(SMALL);
    let mut group = c.benchmark_group("framing");
    group.throughput(Throughput::Bytes(SMALL as u64));
    group.bench_function("send+recv 144 B, one thread", |bench| {
        bench.iter(|| {
            a.send(black_box(&message)).expect("send");
            b.receiver().recv_into(&mut inbox).expect("recv");
            black_box(&inbox);
        });
    });
    group.finish();
}

fn large(c: &mut Criterion) {
    let (a, b) = PipeOptions::new()
        .ring_size(SMALL_RING)
        .pipe()
        .expect("a pipe");
    let receiver = thread::spawn(move || {
        let mut inbox = Vec::new();
        while b.receiver().recv_into(&mut inbox).is_ok() {
            assert_eq!(inbox.len(), LARGE);
            if b.send(&[]).is_err() {
                break;
            }
        }
    });
    let message = vec![0x5a; LARGE];
    let mut ack = Vec::new();
    let mut group = c.benchmark_group("framing");
    group.throughput(Throughput::Bytes(LARGE as u64));
    group.bench_function("send+recv 100 KB in pieces, two threads", |bench| {
        bench.iter(|| {
            a.send(black_box(&message)).expect("send");
            a.receiver()
                .recv_into(&mut ack)
                .expect("the acknowledgement");
        });
    });
    group.finish();
    drop(a);
    receiver.join().expect("the receiving thread");
}

criterion_group!(benches, small, large);
criterion_main!(benches);
