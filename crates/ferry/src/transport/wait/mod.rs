//! How a waiter waits: one mechanism, and the policies that steer it.
//!
//! The mechanism ([`run`]) is one loop: ask the policy for the next step,
//! take it (poll the condition a number of times, yield the CPU, or sleep),
//! then read the clock, check the deadline and the peer's end, and look at
//! the peer again. The policy (`policy.rs`) is a pure function from what
//! the wait has seen ([`Seen`]) to the next step; it never reads a clock, a
//! file or the system. What is waited on is a [`Target`]: a pipe's ring
//! half (`channel::wait`), or a typed channel's in-process queue.
//!
//! The only system calls a wait makes are the policy's `sched_yield`, the
//! target's sleep (a futex wait) and reading this thread's CPU (the vDSO);
//! the peer's death is pushed to a sleeper by the link's watcher, and the
//! kernel is asked about the peer only by a wait that has spun for
//! [`LIVENESS`].
//!
//! One fact the mechanism records across waits, for the policy: whether a
//! step lost the CPU to another thread ([`STALL`]). A poll burst that took
//! far longer than a burst takes was preempted; a yield that took that long
//! ran another thread, and where the peer is not on this CPU that thread
//! was someone else's. Either way more threads want this CPU than it has,
//! and the policy stops spinning for a while ([`Seen::calm`]).

// Public for loom's tests only (`lib.rs`), crate-wide otherwise.
#![cfg_attr(not(loom), allow(unreachable_pub))]

mod pace;
pub mod policy;

#[cfg(all(test, not(loom)))]
mod conformance;

use std::time::{Duration, Instant};

pub use pace::{HEELS_POLLS, Pace};
pub use policy::{Peer, Place, Seen, Step};

/// A step that lasts longer than this lost the CPU to another thread: a
/// poll burst takes under a few microseconds and a yield that finds no
/// other thread runnable returns in one system call, on any machine.
pub const STALL: Duration = Duration::from_micros(100);
/// How often a wait that has not slept asks the kernel whether the peer
/// process lives (the flags the peer and the watcher set are read every
/// step).
pub const LIVENESS: Duration = Duration::from_millis(20);

/// What a wait waits on.
pub trait Target {
    /// What the wait returns when the condition holds.
    type Ready;
    /// Why the wait can end without it.
    type Stop;
    /// Whether the condition holds now.
    fn poll(&mut self) -> Result<Option<Self::Ready>, Self::Stop>;
    /// Where the peer last said it runs.
    fn place(&self) -> Place;
    /// What is seen of the peer's state.
    fn peer(&self) -> Peer;
    /// Records this wait in a receiver's [`Pace`]; the waits in a row that
    /// looked like a stream's (0 where there is no stream to tell).
    fn pace(&self, _pace: &mut Pace) -> u8 {
        0
    }
    /// Whether the wait must end for another reason than its condition
    /// (the peer is gone), asking the kernel if `ask`; the result then.
    fn ended(&mut self, ask: bool) -> Option<Result<Self::Ready, Self::Stop>>;
    /// The deadline passed.
    fn timed_out(&mut self) -> Result<Self::Ready, Self::Stop>;
    /// Sleeps until the condition holds, the deadline passes or the wait
    /// ends otherwise.
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<Self::Ready, Self::Stop>;
}

/// What a waiting end remembers from one wait to the next.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// Waits so far (wraps).
    waits: u32,
    /// Waits since a step lost the CPU to another thread (saturates).
    calm: u32,
    /// Whether this end reads a stream.
    pace: Pace,
}

impl Default for Memory {
    fn default() -> Self {
        Self {
            waits: 0,
            calm: u32::MAX,
            pace: Pace::default(),
        }
    }
}

/// Waits on `target` as `policy` steers, until its condition holds, the
/// deadline passes or the target ends the wait. The caller has polled once
/// already and found nothing.
#[inline(always)]
pub fn run<T: Target>(
    policy: impl Fn(&Seen) -> Step,
    memory: &mut Memory,
    target: &mut T,
    deadline: Option<Instant>,
) -> Result<T::Ready, T::Stop> {
    memory.waits = memory.waits.wrapping_add(1);
    memory.calm = memory.calm.saturating_add(1);
    let mut seen = Seen {
        spun: Duration::ZERO,
        steps: 0,
        peer: Peer::Unseen,
        place: Place::Unknown,
        cpus: os::online_cpus(),
        calm: memory.calm,
        waits: memory.waits,
        streak: target.pace(&mut memory.pace),
    };
    // Polls made so far in this wait (to tell a wait that ended at once).
    let mut polls = 0;
    // The peer's state is first read after the first step (which does not
    // depend on it): read at once, it pulls the control block's lines the
    // peer is writing at that moment (it has just taken this side's last
    // message), and the answer comes later. The clock too: a reply that
    // lands within the first step costs no clock read.
    seen.place = target.place();
    let mut start = None;
    let mut last_check = None;
    // When the last step ended (this one began).
    let mut began: Option<Instant> = None;
    loop {
        let step = policy(&seen);
        if step == Step::Yield && began.is_none() && seen.place == Place::Elsewhere {
            // A first step that yields away from the peer: time it too, to
            // see whether another thread took the CPU.
            began = Some(clock::now());
        }
        match step {
            Step::Poll(n) => {
                for _ in 0..n {
                    crate::base::sync::spin_hint();
                    if let Some(ready) = target.poll()? {
                        memory.pace.heels(polls < HEELS_POLLS);
                        return Ok(ready);
                    }
                    polls += 1;
                }
            }
            Step::Pause(length) => {
                let now = clock::now();
                let end = deadline.map_or(now + length, |d| d.min(now + length));
                while clock::now() < end {
                    for _ in 0..8 {
                        crate::base::sync::spin_hint();
                    }
                }
            }
            Step::Yield => {
                os::yield_now();
                if let Some(ready) = target.poll()? {
                    return Ok(ready);
                }
            }
            Step::Sleep => return target.sleep(deadline),
        }
        let now = clock::now();
        let start = *start.get_or_insert(now);
        if let Some(began) = began.replace(now)
            && now - began >= STALL
            && (matches!(step, Step::Poll(_)) || seen.place == Place::Elsewhere)
        {
            // Another thread had this CPU (see the module comment).
            memory.calm = 0;
        }
        seen.spun = now - start;
        seen.steps += 1;
        seen.calm = memory.calm;
        if deadline.is_some_and(|d| now >= d) {
            return target.timed_out();
        }
        let ask = now - *last_check.get_or_insert(now) >= LIVENESS;
        if ask {
            last_check = Some(now);
        }
        if let Some(end) = target.ended(ask) {
            return end;
        }
        seen.peer = target.peer();
        seen.place = target.place();
    }
}

#[cfg(not(loom))]
mod cpu {
    use std::cell::Cell;

    /// Waits in a row that may reuse the CPU the first of them read: a stale
    /// answer costs at most one wait's choice, never correctness, and a thread
    /// that slept asks again (it may have moved while asleep).
    const CPU_REUSES: u32 = 16;

    thread_local! {
        /// 1 + the CPU this thread ran on at its last wait that asked, and how
        /// many more waits may reuse the answer.
        static MY_CPU: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
    }

    /// 1 + the CPU this thread runs on: asked of the system (the vDSO), or the
    /// last answer while it may be reused.
    pub(crate) fn my_cpu() -> u32 {
        MY_CPU.with(|known| {
            let (cpu, reuses) = match known.get() {
                (cpu, reuses @ 1..) => (cpu, reuses),
                _ => (crate::base::sys::current_cpu() as u32 + 1, CPU_REUSES),
            };
            known.set((cpu, reuses - 1));
            cpu
        })
    }

    /// Makes this thread's next wait ask for its CPU.
    pub(crate) fn forget_my_cpu() {
        MY_CPU.with(|known| known.set((0, 0)));
    }
}
#[cfg(not(loom))]
pub(crate) use cpu::{forget_my_cpu, my_cpu};
#[cfg(not(loom))]
pub(crate) use os::online_cpus;

/// The clock the mechanism reads: the system's, or under loom a count of
/// reads (loom explores interleavings, so every run must see the same
/// times: each read is 10 µs after the last).
#[cfg(not(loom))]
mod clock {
    pub(super) fn now() -> std::time::Instant {
        std::time::Instant::now()
    }
}

#[cfg(loom)]
mod clock {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    std::thread_local! {
        static BASE: Instant = Instant::now();
        static READS: Cell<u32> = const { Cell::new(0) };
    }

    pub(super) fn now() -> Instant {
        let reads = READS.with(|r| {
            r.set(r.get() + 1);
            r.get()
        });
        BASE.with(|b| *b + Duration::from_micros(10) * reads)
    }
}

/// What the mechanism asks of the system.
#[cfg(not(loom))]
mod os {
    pub(super) fn yield_now() {
        crate::base::sys::yield_cpu();
    }

    pub(crate) fn online_cpus() -> usize {
        static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *CPUS.get_or_init(crate::base::sys::online_cpus)
    }
}

#[cfg(loom)]
mod os {
    pub(super) fn yield_now() {
        loom::thread::yield_now();
    }

    pub(crate) fn online_cpus() -> usize {
        2
    }
}
