//! Where the two processes of a benchmark run: on CPUs of the scheduler's
//! choosing, pinned to two different CPUs, or pinned to one.

use clap::ValueEnum;

use crate::error::{Context, Error};

/// Every this many round trips of a timed span, each process notes the CPU
/// it runs on (a vDSO call, outside the parent's timing; in the child, a
/// compare per round trip and the call on one in this many).
pub const ROUND_TRIPS_PER_NOTE: u64 = 16;
/// Every this many messages of a stream, each process notes its CPU (a
/// stream's messages take tens of nanoseconds).
pub const MESSAGES_PER_NOTE: u64 = 1024;
/// At most this many notes per process and timed span.
pub const MAX_SAMPLES: usize = 4096;

/// The CPUs one process ran on, noted every few messages.
#[derive(Debug)]
pub struct CpuLog {
    every: u64,
    messages: u64,
    cpus: Vec<u64>,
}

impl CpuLog {
    /// A log that notes the CPU every `every` messages.
    pub fn new(every: u64) -> Self {
        Self {
            every: every.max(1),
            messages: 0,
            cpus: Vec::new(),
        }
    }

    /// Counts one message, noting the CPU on the first and every
    /// `every`-th after.
    #[inline]
    pub fn tick(&mut self) {
        if self.messages.is_multiple_of(self.every) && self.cpus.len() < MAX_SAMPLES {
            self.cpus.push(ferry::internals::current_cpu() as u64);
        }
        self.messages += 1;
    }

    /// The notes so far, starting a new log.
    pub fn take(&mut self) -> Vec<u64> {
        self.messages = 0;
        std::mem::take(&mut self.cpus)
    }
}

/// How often the two processes were on one CPU during a timed span: the
/// parent's and the child's notes of the same messages, paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seen {
    /// Pairs of notes.
    pub samples: usize,
    /// Pairs on the same CPU.
    pub shared: usize,
}

impl Seen {
    /// Pairs the parent's notes with the child's, message by message.
    pub fn of(parent: &[u64], child: &[u64]) -> Self {
        let pairs = parent.iter().zip(child);
        Self {
            samples: pairs.len(),
            shared: pairs.filter(|(p, c)| p == c).count(),
        }
    }

    /// The share of the span the pair spent on one CPU; `None` without
    /// notes.
    pub fn share(self) -> Option<f64> {
        (self.samples > 0).then(|| self.shared as f64 / self.samples as f64)
    }

    /// Whether the pair shared one CPU for most of the span (as the span's
    /// median round trip does); `None` without notes.
    pub fn one_cpu(self) -> Option<bool> {
        Some(self.share()? >= 0.5)
    }
}

/// Where the parent and the child run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Placement {
    /// Neither process is pinned.
    #[default]
    Unpinned,
    /// The parent on CPU 0, the child on CPU 1.
    Split,
    /// Both on CPU 0.
    Same,
}

impl Placement {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Unpinned => "unpinned",
            Self::Split => "split",
            Self::Same => "same",
        }
    }

    /// The CPUs of the parent and the child, where pinned.
    fn cpus(self) -> Option<(usize, usize)> {
        match self {
            Self::Unpinned => None,
            Self::Split => Some((0, 1)),
            Self::Same => Some((0, 0)),
        }
    }

    /// Fails unless this machine has the CPUs the placement needs.
    pub fn check(self) -> Result<(), Error> {
        let online = ferry::internals::online_cpus();
        match self {
            Self::Split if online < 2 => Err(Error::new(format!(
                "placement split needs 2 CPUs, but this process may run on {online}"
            ))),
            _ => Ok(()),
        }
    }

    /// Pins the calling thread where the parent belongs.
    pub fn pin_parent(self) -> Result<(), Error> {
        pin(self.cpus().map(|(parent, _)| parent), "parent")
    }

    /// Pins the calling thread where the child belongs.
    pub fn pin_child(self) -> Result<(), Error> {
        pin(self.cpus().map(|(_, child)| child), "child")
    }
}

fn pin(cpu: Option<usize>, who: &str) -> Result<(), Error> {
    let Some(cpu) = cpu else { return Ok(()) };
    ferry::internals::pin_to_cpu(cpu).context(format!("pinning the {who} to CPU {cpu}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_pair_message_by_message_and_the_majority_decides() {
        // The child noted one more (its log ran on past the parent's).
        let seen = Seen::of(&[0, 0, 1, 1], &[0, 1, 1, 0, 1]);
        assert_eq!((seen.samples, seen.shared), (4, 2));
        assert_eq!((seen.share(), seen.one_cpu()), (Some(0.5), Some(true)));
        let apart = Seen::of(&[0, 0, 0], &[1, 1, 0]);
        assert_eq!(apart.one_cpu(), Some(false));
        assert_eq!(Seen::of(&[], &[1]).one_cpu(), None);
    }

    #[test]
    fn a_log_notes_the_first_message_and_every_nth_and_starts_anew_when_taken() {
        let mut log = CpuLog::new(4);
        for _ in 0..9 {
            log.tick();
        }
        let cpus = log.take();
        assert_eq!(cpus.len(), 3, "{cpus:?}");
        let online = ferry::internals::online_cpus() as u64;
        assert!(cpus.iter().all(|&cpu| cpu < online.max(1)), "{cpus:?}");
        log.tick();
        assert_eq!(log.take().len(), 1);
    }
}
