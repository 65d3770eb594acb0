//! CPU queries and pinning: `sched_getcpu(3)`, `sched_setaffinity(2)`.

use std::io;

/// The CPU the calling thread runs on now (it may move at any moment).
///
/// Uses the vDSO, so it costs nanoseconds, not a system call.
pub fn current_cpu() -> usize {
    rustix::thread::sched_getcpu()
}

/// The number of CPUs this process may run on.
pub fn online_cpus() -> usize {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => set.count() as usize,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// Pins the calling thread to one CPU.
///
/// See [`sched_setaffinity(2)`](https://man7.org/linux/man-pages/man2/sched_setaffinity.2.html).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}
