//! `ferry.spawn([...])`: a child process, Python or not, that starts with a
//! pipe to this one; the child takes it with `ferry.from_parent()` (or, in
//! Rust, `ferry::Pipe::from_parent()`).

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTimeoutError, PyValueError};
use pyo3::prelude::*;

use crate::conn::Connection;
use crate::end::End;

/// How often a `wait` looks at the child (and runs the signal handlers).
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// A child started by `spawn`.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Child {
    child: Mutex<std::process::Child>,
    pid: u32,
}

impl Child {
    fn child(&self) -> std::sync::MutexGuard<'_, std::process::Child> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A return code as `subprocess` gives it: the exit status, or minus the
/// signal that ended the child.
fn code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(-1)
}

#[pymethods]
impl Child {
    #[getter]
    fn pid(&self) -> u32 {
        self.pid
    }

    /// The return code if the child has ended, else `None`.
    fn poll(&self) -> PyResult<Option<i32>> {
        Ok(self.child().try_wait()?.map(code))
    }

    /// Waits for the child to end (at most `timeout` seconds:
    /// `TimeoutError`); its return code.
    #[pyo3(signature = (timeout = None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<i32> {
        let deadline = crate::conn::deadline(timeout)?;
        loop {
            if let Some(status) = self.child().try_wait()? {
                return Ok(code(status));
            }
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(PyTimeoutError::new_err("the child is still running"));
            }
            py.detach(|| std::thread::sleep(WAIT_SLICE));
            py.check_signals()?;
        }
    }

    /// Sends the child `SIGKILL`.
    fn kill(&self) -> PyResult<()> {
        Ok(self.child().kill()?)
    }
}

/// Starts `args` (a program and its arguments) as a child process holding
/// the other end of a new pipe: `(child, connection)`. `env` (a dict)
/// adds to or replaces variables of this process's environment.
#[pyfunction]
#[pyo3(signature = (args, *, env = None))]
pub(crate) fn spawn(
    py: Python<'_>,
    args: Vec<String>,
    env: Option<std::collections::HashMap<String, String>>,
) -> PyResult<(Child, Connection)> {
    let (program, rest) = args
        .split_first()
        .ok_or_else(|| PyValueError::new_err("spawn needs a program"))?;
    let mut command = Command::new(program);
    command.args(rest);
    for (key, value) in env.unwrap_or_default() {
        command.env(key, value);
    }
    let (child, pipe) = py
        .detach(|| ferry::spawn(command))
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    let pid = child.id();
    Ok((
        Child {
            child: Mutex::new(child),
            pid,
        },
        Connection::new(End::Pipe(pipe)),
    ))
}

/// The pipe to the parent, in a child started by `ferry.spawn` (once).
#[pyfunction]
pub(crate) fn from_parent() -> PyResult<Connection> {
    let pipe = ferry::Pipe::from_parent()
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    Ok(Connection::new(End::Pipe(pipe)))
}
