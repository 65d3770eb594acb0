//! A long stream of 1 MiB messages out of line: memory on both sides stays
//! under the pool cap, and nearly every block is reused rather than mapped
//! on the sender's path. Alone in its test binary, so no other test's
//! blocks count in this process's memory or pool counters.

use ferry::PipeOptions;
use ferry_testkit::{msg_u64, secs, this_test, u64_msg};

const MIB: usize = 1 << 20;

/// This process's resident memory in bytes (VmRSS).
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS line");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmRSS kB");
    kib * 1024
}

#[test]
fn a_long_megabyte_stream_stays_under_the_pool_cap() {
    const COUNT: u64 = 10_000;
    const CAP: usize = 16 * MIB;
    if ferry_testkit::role().is_some() {
        let (_dog, pipe) = ferry_testkit::child_pipe("stream", secs(240));
        let base = rss();
        let mut peak = 0;
        let mut buf = Vec::new();
        for i in 0..COUNT {
            pipe.receiver().recv_into(&mut buf).expect("message");
            assert_eq!(buf.len(), MIB);
            assert_eq!(buf[..8], i.to_le_bytes(), "message {i} head");
            assert_eq!(buf[MIB - 8..], (!i).to_le_bytes(), "message {i} tail");
            if i % 500 == 0 {
                peak = peak.max(rss().saturating_sub(base));
            }
        }
        pipe.send(&u64_msg(peak as u64)).expect("report");
        return;
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(240));
    let options = PipeOptions::new().pool_cap(CAP);
    let (child, pipe) = ferry_testkit::spawn_child(&dog, this_test!(), "stream", &options);
    let before = ferry::pool_stats();
    let base = rss();
    let mut peak = 0;
    let mut msg = vec![0x5a; MIB];
    for i in 0..COUNT {
        msg[..8].copy_from_slice(&i.to_le_bytes());
        msg[MIB - 8..].copy_from_slice(&(!i).to_le_bytes());
        pipe.send(&msg).expect("send");
        if i % 500 == 0 {
            peak = peak.max(rss().saturating_sub(base));
        }
    }
    let child_peak = msg_u64(&pipe.recv().expect("report")) as usize;
    let after = ferry::pool_stats();
    eprintln!("RSS growth: sender {peak} B, receiver {child_peak} B; pool {before:?} -> {after:?}");
    // The sender also keeps the reserve of pre-faulted blocks (4 MiB per
    // active size class) and its message buffer.
    let slack = 4 * MIB + 8 * MIB;
    assert!(peak <= CAP + slack, "sender grew {peak} B, cap {CAP}");
    assert!(
        child_peak <= CAP + slack,
        "receiver grew {child_peak} B, cap {CAP}"
    );
    let reused = after.reused - before.reused;
    let from_reserve = after.taken_from_reserve - before.taken_from_reserve;
    let on_path = after.made_on_send_path - before.made_on_send_path;
    let through_ring = after.ring_fallbacks - before.ring_fallbacks;
    let blocks = reused + from_reserve + on_path;
    assert_eq!(blocks + through_ring, COUNT, "every send accounted for");
    assert!(
        through_ring * 10 <= COUNT,
        "{through_ring} of {COUNT} sends found the pool at its cap"
    );
    assert!(
        (reused + from_reserve) * 100 >= blocks * 95,
        "only {} of {blocks} blocks came without a mapping on the sender's path",
        reused + from_reserve
    );
    drop(pipe);
    child.wait_ok();
}
