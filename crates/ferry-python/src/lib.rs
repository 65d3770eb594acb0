//! The extension module of the `ferry` Python package (`ferry._ferry`):
//! ferry's pipes in the shape of `multiprocessing.connection`. The
//! pure-Python part of the package (`python/ferry/`) adds pickling,
//! `wait`, asyncio and the benchmark; `python/ferry/__init__.py` is where a
//! reader starts.
//!
//! - `conn.rs`: `Connection`, one end of a pipe, and how a call waits;
//! - `buffer.rs`: buffers without copies (`View`, `Loan`), and the
//!   binding's unsafe code;
//! - `end.rs`: what a connection holds;
//! - `handoff.rs`: ends that travel by pickle;
//! - `server.rs`: `Listener`, `Client`;
//! - `child.rs`: `spawn`, `from_parent`;
//! - `fork.rs`: what `fork` does to an end;
//! - `errors.rs`: ferry's errors as Python's.

mod buffer;
mod child;
mod conn;
mod end;
mod errors;
mod fork;
mod handoff;
mod server;

use pyo3::prelude::*;

use conn::Connection;
use end::End;

/// A new pipe: two connections. Duplex by default (each end sends and
/// receives); `duplex=False` gives `(reader, writer)`, as
/// `multiprocessing.Pipe` does.
#[pyfunction]
#[pyo3(signature = (duplex = true))]
fn pipe(duplex: bool) -> PyResult<(Connection, Connection)> {
    let (a, b) = ferry::pipe()?;
    if duplex {
        return Ok((Connection::new(End::Pipe(a)), Connection::new(End::Pipe(b))));
    }
    let (writer, _) = a.split();
    let (_, reader) = b.split();
    Ok((
        Connection::new(End::Receiver(reader)),
        Connection::new(End::Sender(writer)),
    ))
}

#[pymodule]
fn _ferry(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Connection>()?;
    m.add_class::<buffer::View>()?;
    m.add_class::<buffer::Loan>()?;
    m.add_class::<server::Listener>()?;
    m.add_class::<child::Child>()?;
    m.add_function(wrap_pyfunction!(pipe, m)?)?;
    m.add_function(wrap_pyfunction!(server::client, m)?)?;
    m.add_function(wrap_pyfunction!(server::new_token, m)?)?;
    m.add_function(wrap_pyfunction!(child::spawn, m)?)?;
    m.add_function(wrap_pyfunction!(child::from_parent, m)?)?;
    m.add_function(wrap_pyfunction!(handoff::offer, m)?)?;
    m.add_function(wrap_pyfunction!(handoff::claim, m)?)?;
    m.add_function(wrap_pyfunction!(fork::after_fork_in_child, m)?)?;
    m.add("ProtocolError", py.get_type::<errors::ProtocolError>())?;
    m.add("NotTransferable", py.get_type::<errors::NotTransferable>())?;
    m.add("OUT_OF_LINE", ferry::OUT_OF_LINE)?;
    m.add("FIRST_WAIT", conn::FIRST_WAIT.as_secs_f64())?;
    Ok(())
}
