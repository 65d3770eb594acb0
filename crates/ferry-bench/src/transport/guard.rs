//! The child process as the parent holds it: killed if abandoned, and
//! waited for with a deadline so a stuck child cannot hang the benchmark.

use std::process::{Child, ExitStatus};
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::error::{Context, Error};
use crate::pingpong::EXIT_TIMEOUT;

/// How often a deadline wait looks at the child.
const POLL: Duration = Duration::from_millis(1);

/// A child process that is killed and reaped if dropped while running.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    reaped: bool,
}

impl ChildGuard {
    /// Guards `child`.
    pub fn new(child: Child) -> Self {
        Self {
            child,
            reaped: false,
        }
    }

    /// The child, for taking its standard streams.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The child's exit status if it has exited, without waiting.
    pub fn try_status(&mut self) -> Result<Option<ExitStatus>, Error> {
        let status = self.child.try_wait();
        let status = status.context("asking whether the child exited")?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Waits up to `timeout` for the child to exit, then kills it: its
    /// status, or `None` if it was killed.
    fn wait_or_kill(mut self, timeout: Duration) -> Result<Option<ExitStatus>, Error> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.try_status()? {
                return Ok(Some(status));
            }
            sleep(POLL);
        }
        self.kill();
        Ok(None)
    }

    /// Waits up to [`EXIT_TIMEOUT`] for `what` (the child) to exit, and
    /// joins what was measured with how it ended.
    pub fn finish<T>(self, what: &str, measured: Result<T, Error>) -> Result<T, Error> {
        let trouble = match self.wait_or_kill(EXIT_TIMEOUT)? {
            Some(status) if status.success() => None,
            Some(status) => Some(format!("{what} exited with {status}")),
            None => Some(format!(
                "{what} was still running {EXIT_TIMEOUT:?} after the parent closed, and was killed"
            )),
        };
        match (measured, trouble) {
            (Ok(measured), None) => Ok(measured),
            (Ok(_), Some(why)) => Err(Error::new(why)),
            (Err(e), None) => Err(e),
            (Err(e), Some(why)) => Err(Error::new(format!("{e} ({why})"))),
        }
    }

    /// Waits for the child to exit, however long it takes, without
    /// polling (a caller that needs a deadline sets it from outside).
    pub fn wait(mut self) -> Result<ExitStatus, Error> {
        let status = self.child.wait().context("waiting for the child")?;
        self.reaped = true;
        Ok(status)
    }

    fn kill(&mut self) {
        if !self.reaped {
            // Either may fail only because the child already exited.
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
