//! How far apart CPUs 0 and 1 are right now: the time one cache line takes
//! to go from one to the other and back.
//!
//! On a virtual machine the host moves the vCPUs between cores that share a
//! cache and cores that do not: the same 2-vCPU guest takes ~60, ~120–140 or
//! ~400 ns per round trip by the moment, and every cross-CPU figure follows.
//! Each run of a row measures this just before and just after it.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Round trips in one measurement: ~5–15 ms on the machines measured.
const ROUND_TRIPS: u64 = 20_000;
/// A round stops at this long (a CPU taken away by the host), and the
/// measurement then says nothing.
const GIVE_UP: Duration = Duration::from_millis(200);

/// What the answerer writes once it runs on its CPU.
const READY: u64 = u64::MAX - 1;

/// One cache line, alone: 128 bytes, as adjacent-line prefetch pairs lines.
#[repr(align(128))]
struct Line(AtomicU64);

/// The median time, over a few rounds, for a cache line written on CPU 0
/// to be answered from CPU 1; `None` where the machine has fewer than two
/// CPUs this process may pin a thread to (asked once), or where a round ran
/// too long (the host took a CPU away: this measurement only).
pub fn line_round_trip() -> Option<Duration> {
    static CAN_PIN: OnceLock<bool> = OnceLock::new();
    let can_pin = CAN_PIN.get_or_init(|| {
        ferry::internals::online_cpus() >= 2
            && thread::spawn(|| (0..2).all(|cpu| ferry::internals::pin_to_cpu(cpu).is_ok()))
                .join()
                .unwrap_or(false)
    });
    if !can_pin {
        return None;
    }
    let mut rounds = (0..3).map(|_| round()).collect::<Option<Vec<_>>>()?;
    rounds.sort();
    Some(rounds[1])
}

/// A line's round trip between CPUs 0 and 1 just before and just after
/// one run.
#[derive(Debug, Clone, Copy, Default)]
pub struct Apart {
    /// Measured before the run.
    pub before: Option<Duration>,
    /// Measured after it.
    pub after: Option<Duration>,
}

impl fmt::Display for Apart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.before, self.after) {
            (Some(b), Some(a)) => write!(
                f,
                "a line between CPUs 0 and 1 {}/{} ns round trip before/after",
                b.as_nanos(),
                a.as_nanos()
            ),
            _ => write!(f, "no line round trip measured"),
        }
    }
}

/// One measurement: CPU 0 writes `i`, CPU 1 answers with `i` on another
/// line, `ROUND_TRIPS` times.
fn round() -> Option<Duration> {
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let deadline = Instant::now() + GIVE_UP;
    // Either side stops on the deadline, and then says so with `u64::MAX`.
    let wait_for = |line: &Line, value: u64, other: &Line| loop {
        match line.0.load(Ordering::Acquire) {
            v if v == value => return true,
            u64::MAX => return false,
            _ if Instant::now() > deadline => {
                other.0.store(u64::MAX, Ordering::Release);
                return false;
            }
            _ => std::hint::spin_loop(),
        }
    };
    thread::scope(|scope| {
        let answerer = scope.spawn(|| {
            ferry::internals::pin_to_cpu(1).ok()?;
            // Ready: the asker starts its clock once this thread is here.
            pong.0.store(READY, Ordering::Release);
            for i in 1..=ROUND_TRIPS {
                if !wait_for(&ping, i, &pong) {
                    return None;
                }
                pong.0.store(i, Ordering::Release);
            }
            Some(())
        });
        let asker = scope.spawn(|| {
            ferry::internals::pin_to_cpu(0).ok()?;
            if !wait_for(&pong, READY, &ping) {
                return None;
            }
            let start = Instant::now();
            for i in 1..=ROUND_TRIPS {
                ping.0.store(i, Ordering::Release);
                if !wait_for(&pong, i, &ping) {
                    return None;
                }
            }
            Some(start.elapsed() / ROUND_TRIPS as u32)
        });
        let took = asker.join().ok().flatten();
        if took.is_none() {
            ping.0.store(u64::MAX, Ordering::Release);
        }
        answerer.join().ok().flatten()?;
        took
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_trip_between_two_cpus_takes_time() {
        // Where two CPUs can be pinned, a line's round trip is measured
        // and lies between a nanosecond and the give-up bound.
        if ferry::internals::online_cpus() < 2 || ferry::internals::pin_to_cpu(0).is_err() {
            return;
        }
        let rt = line_round_trip().expect("two CPUs, pinned: a figure");
        assert!(rt > Duration::from_nanos(1) && rt < GIVE_UP, "{rt:?}");
    }
}
