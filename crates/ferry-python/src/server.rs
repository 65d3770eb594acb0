//! `ferry.Listener` and `ferry.Client`: ferry's named server, shaped as
//! `multiprocessing.connection`'s. A name is an abstract socket (Linux),
//! or a socket file when it begins with `/`. Only processes of the
//! server's user connect (the kernel's peer credentials are checked), and
//! a server made with a token accepts only clients that present it.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::conn::Connection;
use crate::end::End;

/// How long an `accept` waits before it runs the signal handlers and waits
/// again.
const ACCEPT_SLICE: Duration = Duration::from_millis(50);

fn to_address(name: &str) -> ferry::Address {
    match name.starts_with('/') {
        true => ferry::Address::file(name),
        false => ferry::Address::named(name),
    }
}

fn to_token(token: Option<&[u8]>) -> PyResult<Option<ferry::Token>> {
    token
        .map(|t| {
            <[u8; 32]>::try_from(t)
                .map(ferry::Token::from_bytes)
                .map_err(|_| PyValueError::new_err("a token is 32 bytes (ferry.new_token())"))
        })
        .transpose()
}

/// A new random token, 32 bytes: give it to the `Listener` and to its
/// clients.
#[pyfunction]
pub(crate) fn new_token(py: Python<'_>) -> PyResult<Bound<'_, PyBytes>> {
    Ok(PyBytes::new(py, ferry::Token::random()?.as_bytes()))
}

/// A named server: `accept()` gives a `Connection` per client.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Listener {
    server: RwLock<Option<Arc<ferry::Server>>>,
    name: String,
    last: Mutex<Option<(Option<u32>, u32, u32)>>,
}

#[pymethods]
impl Listener {
    #[new]
    #[pyo3(signature = (address, *, token = None))]
    fn new(address: &str, token: Option<&[u8]>) -> PyResult<Self> {
        let mut options = ferry::ServerOptions::new();
        if let Some(token) = to_token(token)? {
            options = options.token(token);
        }
        let server = options.bind(to_address(address))?;
        Ok(Self {
            server: RwLock::new(Some(Arc::new(server))),
            name: address.to_owned(),
            last: Mutex::new(None),
        })
    }

    /// Waits for a client (at most `timeout` seconds: `TimeoutError`).
    #[pyo3(signature = (*, timeout = None))]
    fn accept(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Connection> {
        let server = self
            .server
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| PyOSError::new_err("listener is closed"))?;
        let deadline = crate::conn::deadline(timeout)?;
        loop {
            let slice = deadline.map_or(ACCEPT_SLICE, |d| {
                d.saturating_duration_since(Instant::now())
                    .min(ACCEPT_SLICE)
            });
            match py.detach(|| server.accept_timeout(slice)) {
                Ok(connection) => {
                    let peer = connection.peer;
                    *self.last.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((peer.pid, peer.uid, peer.gid));
                    return Ok(Connection::new(End::Pipe(connection.pipe)));
                }
                Err(ferry::AcceptError::Timeout) => {
                    if deadline.is_some_and(|d| d <= Instant::now()) {
                        return Err(pyo3::exceptions::PyTimeoutError::new_err(
                            "no client connected before the timeout",
                        ));
                    }
                    py.check_signals()?;
                }
                Err(ferry::AcceptError::Io(e)) => return Err(e.into()),
                // A client refused or gone mid-handshake: the next one.
                Err(_) => py.check_signals()?,
            }
        }
    }

    /// The name it listens on.
    #[getter]
    fn address(&self) -> &str {
        &self.name
    }

    /// `(pid, uid, gid)` of the last client accepted (`pid` is `None` for a
    /// client outside this pid namespace).
    #[getter]
    fn last_accepted(&self) -> Option<(Option<u32>, u32, u32)> {
        *self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops listening (the name is free again).
    fn close(&self) {
        self.server
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _trace: &Bound<'_, PyAny>,
    ) -> bool {
        self.close();
        false
    }
}

/// Connects to the `Listener` at `address` (with its token, if it has
/// one); `TimeoutError` after `timeout` seconds (5 by default).
#[pyfunction]
#[pyo3(signature = (address, *, token = None, timeout = None))]
pub(crate) fn client(
    py: Python<'_>,
    address: &str,
    token: Option<&[u8]>,
    timeout: Option<f64>,
) -> PyResult<Connection> {
    let mut options = ferry::ConnectOptions::new();
    if let Some(token) = to_token(token)? {
        options = options.token(token);
    }
    if let Some(t) = timeout {
        let t = Duration::try_from_secs_f64(t.max(0.0))
            .map_err(|_| PyValueError::new_err("bad timeout"))?;
        options = options.timeout(t);
    }
    let address = to_address(address);
    let pipe = py
        .detach(|| options.connect(address))
        .map_err(|e| match e {
            ferry::ConnectError::NoServer(_) => {
                pyo3::exceptions::PyConnectionRefusedError::new_err(e.to_string())
            }
            ferry::ConnectError::Refused(_) | ferry::ConnectError::UntrustedServer { .. } => {
                pyo3::exceptions::PyPermissionError::new_err(e.to_string())
            }
            ferry::ConnectError::Timeout => {
                pyo3::exceptions::PyTimeoutError::new_err(e.to_string())
            }
            ferry::ConnectError::Protocol(_) => {
                crate::errors::ProtocolError::new_err(e.to_string())
            }
            other => PyOSError::new_err(other.to_string()),
        })?;
    Ok(Connection::new(End::Pipe(pipe)))
}
