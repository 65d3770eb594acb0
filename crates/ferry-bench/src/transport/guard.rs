//! The child process as the parent holds it: the test kit's guard (killed
//! if abandoned, waited for with a deadline so a stuck child cannot hang
//! the benchmark), and how its end joins what was measured.

pub use ferry_testkit::ChildGuard;
use ferry_testkit::Exit;

use crate::error::Error;
use crate::pingpong::EXIT_TIMEOUT;

/// Waits up to [`EXIT_TIMEOUT`] for `what` (the child) to exit, and joins
/// what was measured with how it ended.
pub fn finish<T>(child: ChildGuard, what: &str, measured: Result<T, Error>) -> Result<T, Error> {
    let trouble = match child.wait_or_kill(EXIT_TIMEOUT) {
        Ok(Exit::Exited(status)) if status.success() => None,
        Ok(Exit::Exited(status)) => Some(format!("{what} exited with {status}")),
        Ok(Exit::Killed) => Some(format!(
            "{what} was still running {EXIT_TIMEOUT:?} after the parent closed, and was killed"
        )),
        Err(e) => Some(format!("waiting for {what}: {e}")),
    };
    match (measured, trouble) {
        (Ok(measured), None) => Ok(measured),
        (Ok(_), Some(why)) => Err(Error::new(why)),
        (Err(e), None) => Err(e),
        (Err(e), Some(why)) => Err(Error::new(format!("{e} ({why})"))),
    }
}
