//! CPU time of this process: user plus system time of all its threads, to
//! the nanosecond (`CLOCK_PROCESS_CPUTIME_ID`: `getrusage`'s total without
//! its tick rounding). The child reports its own over the transport (see
//! [`crate::control`]).

use std::time::Duration;

use rustix::time::{ClockId, clock_gettime};

/// CPU time this process has used so far.
pub fn process_time() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u32::try_from(t.tv_nsec).unwrap_or(0);
    Duration::new(secs, nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_counts_work() {
        let before = process_time();
        let mut x = 0u64;
        while process_time() < before + Duration::from_millis(5) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(process_time() - before >= Duration::from_millis(5), "{x}");
    }
}
