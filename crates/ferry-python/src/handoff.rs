//! Ends that travel by pickle: to a `multiprocessing` child (as an argument
//! under `spawn` or `forkserver`), through a `multiprocessing.Queue`, or any
//! way pickled bytes go to another process of this user.
//!
//! A pickled end cannot carry its shared memory in the bytes. So the
//! process pickling it keeps it, under a random 64-bit key, in a table
//! served by a ferry server of its own (an abstract socket with a random
//! name and a random token, made on first use, answered by one thread with
//! every signal blocked). The pickle holds the server's name, its token and
//! the key. The process that unpickles it connects (ferry's handshake: the
//! same user only, the token), sends the key, and receives the end in a
//! message, as any end travels: from then on the two holders talk directly
//! through shared memory, and the connection is closed.
//!
//! An end is handed over once: a second unpickling of the same bytes gets
//! `EOFError` naming why. An end pickled and never unpickled stays in the
//! table for the life of the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::exceptions::{PyEOFError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::conn::Connection;
use crate::end::End;

/// How long a client of the table has to send its key, and an unpickling
/// waits for its end.
const CLAIM_WAIT: Duration = Duration::from_secs(10);

type Table = Arc<Mutex<HashMap<u64, End>>>;

struct Handoff {
    name: String,
    token: ferry::Token,
    table: Table,
}

static HANDOFF: Mutex<Option<Arc<Handoff>>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// In a forked child: the parent's table and thread are not this
/// process's (the thread does not exist here); leave them be.
pub(crate) fn forget_after_fork() {
    if let Some(old) = lock(&HANDOFF).take() {
        std::mem::forget(old);
    }
}

/// This process's table, started on first use.
fn handoff() -> PyResult<Arc<Handoff>> {
    let mut slot = lock(&HANDOFF);
    if let Some(handoff) = &*slot {
        return Ok(Arc::clone(handoff));
    }
    let token = ferry::Token::random()?;
    let mut name = [0u8; 16];
    name.copy_from_slice(&ferry::Token::random()?.as_bytes()[..16]);
    let name = format!(
        "python-handoff.{}.{}",
        std::process::id(),
        name.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let server = ferry::ServerOptions::new()
        .token(token.clone())
        .bind(ferry::Address::named(name.clone()))?;
    let table: Table = Arc::default();
    let served = Arc::clone(&table);
    ferry::internals::spawn_quiet_thread("ferry-handoff", move || serve(&server, &served))?;
    let handoff = Arc::new(Handoff { name, token, table });
    *slot = Some(Arc::clone(&handoff));
    Ok(handoff)
}

/// Answers claims for ever: each client sends a key and gets its end (or
/// `unknown`).
fn serve(server: &ferry::Server, table: &Table) {
    loop {
        let connection = match server.accept() {
            Ok(connection) => connection,
            Err(_) => {
                // A client refused or gone mid-handshake: the next one.
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
        };
        let pipe = connection.pipe;
        let Ok(key) = pipe.receiver().recv_timeout(CLAIM_WAIT) else {
            continue;
        };
        let Ok(key) = <[u8; 8]>::try_from(key.as_slice()) else {
            continue;
        };
        let key = u64::from_le_bytes(key);
        let end = lock(table).remove(&key);
        let Some(end) = end else {
            let _ = pipe.send(b"unknown");
            continue;
        };
        if let Err(e) = pipe.sender().send_with(b"end", vec![end.into_handle()]) {
            // Kept for another claim, and the claimant told why (if it is
            // still there): an end with descriptors or ends sent to it and
            // not yet received cannot leave this process.
            let why = format!("refused: {}", e.error);
            if let Some(end) = e.handles.into_iter().next().and_then(End::from_handle) {
                lock(table).insert(key, end);
            }
            let _ = pipe.send(why.as_bytes());
        }
    }
}

/// Puts `connection`'s end in the table; what a pickle holds to claim it.
#[pyfunction]
pub(crate) fn offer<'py>(
    py: Python<'py>,
    connection: &Bound<'py, Connection>,
) -> PyResult<(String, Bound<'py, PyBytes>, u64)> {
    let handoff = handoff()?;
    let end = connection.get().take_end()?;
    let mut key = [0u8; 8];
    key.copy_from_slice(&ferry::Token::random()?.as_bytes()[..8]);
    let key = u64::from_le_bytes(key);
    lock(&handoff.table).insert(key, end);
    Ok((
        handoff.name.clone(),
        PyBytes::new(py, handoff.token.as_bytes()),
        key,
    ))
}

/// Claims the end a pickle names.
#[pyfunction]
pub(crate) fn claim(py: Python<'_>, name: String, token: &[u8], key: u64) -> PyResult<Connection> {
    let token: [u8; 32] = token
        .try_into()
        .map_err(|_| PyValueError::new_err("a ferry end's pickle with a bad token"))?;
    let end = py.detach(|| -> PyResult<End> {
        let pipe = ferry::ConnectOptions::new()
            .token(ferry::Token::from_bytes(token))
            .timeout(CLAIM_WAIT)
            .connect(ferry::Address::named(name))
            .map_err(|e| {
                PyEOFError::new_err(format!(
                    "the process that pickled this ferry end is gone or refused it: {e}"
                ))
            })?;
        pipe.send(&key.to_le_bytes())
            .map_err(crate::errors::send_error)?;
        let message = pipe
            .receiver()
            .recv_with_timeout(CLAIM_WAIT)
            .map_err(crate::errors::recv_timeout_error)?;
        let end = message
            .pipes
            .into_iter()
            .map(End::Pipe)
            .chain(message.senders.into_iter().map(End::Sender))
            .chain(message.receivers.into_iter().map(End::Receiver))
            .next();
        end.ok_or_else(|| match message.bytes.strip_prefix(b"refused: ") {
            Some(why) => PyValueError::new_err(format!(
                "the process that pickled this ferry end could not hand it over: {}",
                String::from_utf8_lossy(why)
            )),
            None => PyEOFError::new_err(
                "this ferry end was already unpickled once (an end goes to one process)",
            ),
        })
    })?;
    Ok(Connection::new(end))
}
