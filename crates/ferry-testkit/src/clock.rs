//! Clocks that compare across processes, CPU time, peak address space.

use std::time::Duration;

/// This process's peak virtual memory size so far (`VmPeak` in
/// `/proc/self/status`), in bytes: how much address space it ever mapped.
pub fn vm_peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmPeak:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .expect("a VmPeak line in /proc/self/status");
    kib * 1024
}

/// CPU time the calling thread has used so far
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`).
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The system-wide monotonic clock in nanoseconds. Unlike `Instant`, its
/// readings compare between processes on one machine.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
