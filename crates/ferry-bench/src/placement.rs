//! Where the two processes of a benchmark run: on CPUs of the scheduler's
//! choosing, pinned to two different CPUs, or pinned to one.

use clap::ValueEnum;

use crate::error::{Context, Error};

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

    fn parent_cpu(self) -> Option<usize> {
        match self {
            Self::Unpinned => None,
            Self::Split | Self::Same => Some(0),
        }
    }

    fn child_cpu(self) -> Option<usize> {
        match self {
            Self::Unpinned => None,
            Self::Split => Some(1),
            Self::Same => Some(0),
        }
    }

    /// Fails unless this machine has the CPUs the placement needs.
    pub fn check(self) -> Result<(), Error> {
        let online = ferry::sys::online_cpus();
        match self {
            Self::Split if online < 2 => Err(Error::new(format!(
                "placement split needs 2 CPUs, but this process may run on {online}"
            ))),
            _ => Ok(()),
        }
    }

    /// Pins the calling thread where the parent belongs.
    pub fn pin_parent(self) -> Result<(), Error> {
        pin(self.parent_cpu(), "parent")
    }

    /// Pins the calling thread where the child belongs.
    pub fn pin_child(self) -> Result<(), Error> {
        pin(self.child_cpu(), "child")
    }
}

fn pin(cpu: Option<usize>, who: &str) -> Result<(), Error> {
    match cpu {
        Some(cpu) => ferry::sys::pin_to_cpu(cpu).context(format!("pinning the {who} to CPU {cpu}")),
        None => Ok(()),
    }
}
