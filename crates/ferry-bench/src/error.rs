//! One error type for the whole command: a sentence saying what failed and
//! why. A benchmark has no caller that matches on variants, only a person
//! reading the message.

use std::fmt;

/// What went wrong, as a message naming the step that failed.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }

    /// The same error, with `what` (the step that was under way) in front.
    pub fn within(self, what: impl fmt::Display) -> Self {
        Self(format!("{what}: {}", self.0))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Turns any displayable error into an [`Error`] that names the step.
pub trait Context<T> {
    /// Prefixes the error with `what`, the step that failed.
    fn context(self, what: impl fmt::Display) -> Result<T, Error>;
}

impl<T, E: fmt::Display> Context<T> for Result<T, E> {
    fn context(self, what: impl fmt::Display) -> Result<T, Error> {
        self.map_err(|e| Error(format!("{what}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_names_the_step_then_the_cause() {
        let failed: Result<(), std::io::Error> = Err(std::io::Error::other("boom"));
        let error = failed
            .context("connecting")
            .unwrap_err()
            .within("unix-stream");
        assert_eq!(error.to_string(), "unix-stream: connecting: boom");
    }
}
