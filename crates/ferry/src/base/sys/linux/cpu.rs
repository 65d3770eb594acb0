//! CPU queries and pinning: `sched_getcpu(3)`, `sched_setaffinity(2)`.

#[cfg(feature = "internals")]
use std::io;

/// The CPU the calling thread runs on now (it may move at any moment).
///
/// Uses the vDSO, so it costs nanoseconds, not a system call.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub fn current_cpu() -> usize {
    rustix::thread::sched_getcpu()
}

/// The number of CPUs online in the system (not just those the calling
/// thread may use: a thread pinned to one CPU still has a peer elsewhere).
///
/// Reads `/sys/devices/system/cpu/online` (see
/// [`cpu(4)`](https://www.kernel.org/doc/html/latest/admin-guide/cputopology.html)),
/// a list of ranges such as `0-3,6`; falls back to the affinity mask.
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|list| count_cpu_list(list.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Counts the CPUs in a kernel CPU list (`0-3,6`).
fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |count, range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        let (first, last): (usize, usize) = (first.parse().ok()?, last.parse().ok()?);
        Some(count + last.checked_sub(first)? + 1)
    })
}

/// Gives up the CPU to another runnable thread, if any:
/// [`sched_yield(2)`](https://man7.org/linux/man-pages/man2/sched_yield.2.html).
pub(crate) fn yield_cpu() {
    rustix::thread::sched_yield();
}

/// Whether the calling thread's affinity mask lets the scheduler run it on
/// `cpu` (asked only by the opt-in `Wait::Tuned`) (`false` if the mask cannot be read).
///
/// See [`sched_getaffinity(2)`](https://man7.org/linux/man-pages/man2/sched_getaffinity.2.html).
pub(crate) fn may_run_on(cpu: usize) -> bool {
    rustix::thread::sched_getaffinity(None).is_ok_and(|set| cpu < CPU_SET_BITS && set.is_set(cpu))
}

/// Whether the calling thread's affinity mask lets the scheduler run it on
/// more than one CPU (asked only by the opt-in `Wait::Tuned`) (`false` if the mask cannot be read).
pub(crate) fn may_move() -> bool {
    rustix::thread::sched_getaffinity(None).is_ok_and(|set| set.count() > 1)
}

/// CPUs a [`rustix::thread::CpuSet`] holds.
const CPU_SET_BITS: usize = rustix::thread::CpuSet::MAX_CPU;

/// Pins the calling thread to one CPU.
///
/// See [`sched_setaffinity(2)`](https://man7.org/linux/man-pages/man2/sched_setaffinity.2.html).
#[cfg(feature = "internals")]
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_lists_are_counted() {
        assert_eq!(super::count_cpu_list("0"), Some(1));
        assert_eq!(super::count_cpu_list("0-1"), Some(2));
        assert_eq!(super::count_cpu_list("0-3,6,8-9"), Some(7));
        assert_eq!(super::count_cpu_list("3-1"), None);
        assert_eq!(super::count_cpu_list("x"), None);
        assert!(super::online_cpus() >= 1);
    }

    #[test]
    fn a_thread_may_run_where_it_runs_and_nowhere_past_the_set() {
        assert!(super::may_run_on(super::current_cpu()));
        assert!(!super::may_run_on(usize::MAX));
    }
}
