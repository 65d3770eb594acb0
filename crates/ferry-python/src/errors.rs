//! ferry's errors as Python users expect them: `EOFError` once the peer is
//! gone and everything it sent has been read, `BrokenPipeError` on a send to
//! a peer that is gone, `TimeoutError`, and [`ProtocolError`] for a peer
//! that broke the rules.

use pyo3::exceptions::{
    PyBrokenPipeError, PyConnectionError, PyEOFError, PyOSError, PyTimeoutError, PyValueError,
};
use pyo3::{PyErr, create_exception};

create_exception!(
    ferry,
    ProtocolError,
    PyConnectionError,
    "The peer broke ferry's rules (it wrote what no honest peer writes, or \
     died in a way that left the pipe unusable): this end is closed. Never \
     raised for a peer that merely exited."
);

create_exception!(
    ferry,
    NotTransferable,
    PyValueError,
    "A pipe end or descriptor that cannot travel with this message; the \
     message was not sent and the ends are still this process's."
);

/// A receive that failed.
pub(crate) fn recv_error(e: ferry::RecvError) -> PyErr {
    match e {
        ferry::RecvError::Disconnected => {
            PyEOFError::new_err("the peer is gone and everything it sent has been read")
        }
        ferry::RecvError::Protocol(p) => ProtocolError::new_err(p.to_string()),
        ferry::RecvError::Io(e) => PyErr::from(e),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// A receive with a deadline that failed.
pub(crate) fn recv_timeout_error(e: ferry::RecvTimeoutError) -> PyErr {
    match e {
        ferry::RecvTimeoutError::Timeout => timed_out(),
        ferry::RecvTimeoutError::Disconnected => recv_error(ferry::RecvError::Disconnected),
        ferry::RecvTimeoutError::Protocol(p) => recv_error(ferry::RecvError::Protocol(p)),
        ferry::RecvTimeoutError::Io(e) => recv_error(ferry::RecvError::Io(e)),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// A send that failed.
pub(crate) fn send_error(e: ferry::SendError) -> PyErr {
    match e {
        ferry::SendError::Disconnected => {
            PyBrokenPipeError::new_err("the peer is gone: nothing more can be sent to it")
        }
        ferry::SendError::TooLarge { .. } => PyValueError::new_err(e.to_string()),
        ferry::SendError::NotTransferable(why) => NotTransferable::new_err(why),
        ferry::SendError::Protocol(p) => ProtocolError::new_err(p.to_string()),
        ferry::SendError::Io(e) => PyErr::from(e),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// A send with a deadline that failed.
pub(crate) fn send_timeout_error(e: ferry::SendTimeoutError) -> PyErr {
    match e {
        ferry::SendTimeoutError::Timeout => {
            PyTimeoutError::new_err("the pipe stayed full until the deadline")
        }
        ferry::SendTimeoutError::Disconnected => send_error(ferry::SendError::Disconnected),
        ferry::SendTimeoutError::TooLarge { len, limit } => {
            send_error(ferry::SendError::TooLarge { len, limit })
        }
        ferry::SendTimeoutError::NotTransferable(why) => {
            send_error(ferry::SendError::NotTransferable(why))
        }
        ferry::SendTimeoutError::Protocol(p) => send_error(ferry::SendError::Protocol(p)),
        ferry::SendTimeoutError::Io(e) => send_error(ferry::SendError::Io(e)),
        other => PyOSError::new_err(other.to_string()),
    }
}

/// Nothing arrived in time.
pub(crate) fn timed_out() -> PyErr {
    PyTimeoutError::new_err("no message arrived before the timeout")
}
