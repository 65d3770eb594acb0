//! Whether a receiver keeps catching up with a one-way stream: a fact the
//! mechanism keeps across waits for the policy ([`super::Seen::streak`]).
//!
//! Reading at a writer's heels, each look takes the cache line the writer
//! is about to write, and both sides pay a cross-core transfer per few
//! messages; a reader that lets a batch build first reads many per
//! transfer (the policy's `STREAM_PAUSE`).

/// A wait that ends within this many polls of its first found the writer
/// at work right there: the reader was at its heels.
pub const HEELS_POLLS: u32 = 16;

/// A receiving end's record of its last waits: a wait counts as a
/// stream's when the wait before it ended at once (within
/// [`HEELS_POLLS`]), more than one message came since, and this end sent
/// nothing between. A round trip (this end answers between waits), a
/// pipelined one (it answers too), and a trickle (one message per wait, or
/// waits that last) never count.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pace {
    /// Frames taken and this end's send position at the last wait.
    taken: u64,
    sent: u64,
    /// Whether the last wait ended within [`HEELS_POLLS`].
    heels: bool,
    /// Waits in a row that looked like a stream.
    streak: u8,
}

impl Pace {
    /// Records a wait that begins after `taken` frames in all; `sent`
    /// reads this end's send position, asked only where the wait may be a
    /// stream's (read at the start of a round trip's wait, it is the line
    /// the peer is pulling at that moment). The waits in a row, this one
    /// included, that looked like a stream's.
    pub fn next(&mut self, taken: u64, sent: impl FnOnce() -> u64) -> u8 {
        let batch = self.heels && taken.wrapping_sub(self.taken) >= 2;
        // Unread where it cannot matter: a wait after a round trip's reads
        // it again before it can count (one wait later).
        let stream = batch && {
            let sent = sent();
            let same = sent == self.sent;
            self.sent = sent;
            same
        };
        self.taken = taken;
        self.heels = false;
        self.streak = match stream {
            true => self.streak.saturating_add(1),
            false => 0,
        };
        self.streak
    }

    /// Records whether the wait just ended within [`HEELS_POLLS`].
    pub fn heels(&mut self, at_once: bool) {
        self.heels = at_once;
    }
}

#[cfg(test)]
mod tests {
    use super::Pace;
    use crate::transport::wait::policy::STREAM_WAITS;

    /// One wait that ends within its first polls: whether it pauses first.
    fn wait(pace: &mut Pace, taken: u64, sent: u64) -> bool {
        let pause = pace.next(taken, || sent) >= STREAM_WAITS;
        pace.heels(true);
        pause
    }

    #[test]
    fn a_reader_that_keeps_catching_up_with_a_stream_pauses_from_its_fourth_wait() {
        let mut pace = Pace::default();
        // The first wait has no history; the next ones each follow a batch
        // (the first of them reads the send position for the first time).
        assert!(!wait(&mut pace, 0, 7));
        assert!(!wait(&mut pace, 5, 7));
        assert!(!wait(&mut pace, 12, 7));
        assert!(wait(&mut pace, 20, 7));
        assert!(wait(&mut pace, 27, 7));
    }

    #[test]
    fn a_round_trip_never_pauses() {
        // One message per wait, and this end answers each.
        let mut pace = Pace::default();
        for i in 1..100u64 {
            assert!(!wait(&mut pace, i, i * 80));
        }
        // Pipelined: several messages per wait, but answered.
        let mut pace = Pace::default();
        for i in 1..100u64 {
            assert!(!wait(&mut pace, i * 4, i * 320));
        }
    }

    #[test]
    fn a_trickle_or_a_wait_that_lasted_ends_the_pausing() {
        let mut pace = Pace::default();
        for taken in [0, 5, 10, 15] {
            wait(&mut pace, taken, 0);
        }
        assert!(wait(&mut pace, 20, 0));
        // One message since the last wait: the reader keeps up.
        assert!(!wait(&mut pace, 21, 0));
        assert!(!wait(&mut pace, 30, 0));
        assert!(wait(&mut pace, 40, 0));
        // The last wait did not end at once (it spun on, or slept).
        pace.heels(false);
        assert!(!wait(&mut pace, 50, 0));
        assert!(!wait(&mut pace, 60, 0));
        assert!(wait(&mut pace, 70, 0));
        // This end answered between two waits.
        assert!(!wait(&mut pace, 80, 8));
    }
}
