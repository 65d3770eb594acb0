//! A call's deadline, and the bounded work it may do past it.
//!
//! A peer can keep a receiver busy without ever completing a message
//! (frames that begin messages and abort them, records that announce and
//! retire blocks). A `try_` or `_timeout` call must still return on time,
//! so every frame and record it handles is a step: the first [`GRACE`]
//! steps are free (so a `try_` call, whose deadline is "now", still takes
//! what is already there), and each later step checks the clock.

use std::time::Instant;

/// Steps a call may take before it looks at its deadline.
pub(crate) const GRACE: u32 = 64;

/// When a call must return, and how much it has done.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Option<Instant>,
    steps: u32,
}

impl Deadline {
    /// A deadline at `at` (`None`: the call may wait for ever).
    pub(crate) fn new(at: Option<Instant>) -> Self {
        Self { at, steps: 0 }
    }

    /// Counts one step; `false` once the deadline has passed and the free
    /// steps are spent: the caller stops and reports a timeout.
    pub(crate) fn step(&mut self) -> bool {
        let Some(at) = self.at else {
            return true;
        };
        self.steps = self.steps.saturating_add(1);
        self.steps <= GRACE || Instant::now() < at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_passed_deadline_allows_the_grace_steps_then_stops() {
        let mut late = Deadline::new(Some(Instant::now()));
        for _ in 0..GRACE {
            assert!(late.step());
        }
        assert!(!late.step());
        let mut never = Deadline::new(None);
        assert!((0..10 * GRACE).all(|_| never.step()));
        let mut later = Deadline::new(Some(Instant::now() + Duration::from_secs(60)));
        assert!((0..10 * GRACE).all(|_| later.step()));
    }
}
