//! `ferry.Connection`: one end of a pipe, shaped as
//! `multiprocessing.connection.Connection`.
//!
//! ## How a blocking call waits
//!
//! A receive first waits the way ferry's Rust receive does (a short spin,
//! then a futex sleep), for at most [`FIRST_WAIT`]: a reply that comes
//! within it costs no system call besides the futex. Past it, the call
//! waits in `poll` on the receiver's doorbell ([`ferry::Receiver::poll_ready`]),
//! which a signal interrupts: the Python signal handlers run
//! (`KeyboardInterrupt` is raised there) and the wait goes on, with no
//! timer while idle. The GIL is released for every wait.
//!
//! A send that finds the pipe full waits for room in slices of
//! [`SEND_SLICE`], running the signal handlers between them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::{Loan, View, bytes_of, bytes_of_mut};
use crate::end::{End, Gate};
use crate::errors::{recv_timeout_error, send_error, send_timeout_error, timed_out};
use crate::fork;

/// The first wait of a receive: ferry's own (spin, then futex), which a
/// signal does not end; so it bounds how late a `KeyboardInterrupt` can be
/// while the peer is silent. Replies within it cost no doorbell.
pub(crate) const FIRST_WAIT: Duration = Duration::from_millis(1);

/// How long a send waits for room before it runs the signal handlers and
/// waits again.
const SEND_SLICE: Duration = Duration::from_millis(50);

/// The first 8 bytes of a message that begins a pickle sent in parts (its
/// out-of-band buffers, each a message of its own, and pipe ends): a byte
/// no pickle begins with (`0xff` is no opcode), then a tag.
pub(crate) const PARTS: &[u8; 8] = b"\xffferry\x01\x00";

/// The most out-of-band buffers one pickle may carry.
const MOST_PARTS: u32 = 1 << 16;

/// One end of a pipe: `send`/`recv` (pickle), `send_bytes`/`recv_bytes`
/// (bytes), `poll`, `fileno`, `close`, as `multiprocessing`'s; ferry's own
/// `recv_view`, `loan`, `send_fds`/`recv_fds`. Picklable (see the package's
/// docs). Safe to use from several threads.
#[pyclass(module = "ferry._ferry", frozen, weakref)]
pub struct Connection {
    end: RwLock<Option<Arc<End>>>,
    sending: Gate,
    receiving: Gate,
    /// The descriptor was handed out: it is kept level-triggered after
    /// each receive.
    level: AtomicBool,
    /// A message `recv_bytes(maxlength)` refused, received next.
    held: Mutex<Option<ferry::SharedBytes>>,
    /// A pickle in parts whose receive ran out of time (or was
    /// interrupted) before its last part: the next `recv` goes on with it.
    partial: Mutex<Option<Partial>>,
    /// The fork generation this end belongs to (see `fork.rs`).
    born: u64,
}

impl Connection {
    pub(crate) fn new(end: End) -> Self {
        Self {
            end: RwLock::new(Some(Arc::new(end))),
            sending: Gate::default(),
            receiving: Gate::default(),
            level: AtomicBool::new(false),
            held: Mutex::new(None),
            partial: Mutex::new(None),
            born: fork::generation(),
        }
    }

    /// The end, if open (and this process's, not inherited through fork).
    pub(crate) fn end(&self) -> PyResult<Arc<End>> {
        fork::check(self.born)?;
        match &*self.end.read().unwrap_or_else(|e| e.into_inner()) {
            Some(end) => Ok(Arc::clone(end)),
            None => Err(PyOSError::new_err("handle is closed")),
        }
    }

    /// Takes the end out, to travel (the connection is closed after).
    pub(crate) fn take_end(&self) -> PyResult<End> {
        fork::check(self.born)?;
        let mut slot = self.end.write().unwrap_or_else(|e| e.into_inner());
        let end = slot
            .take()
            .ok_or_else(|| PyOSError::new_err("handle is closed"))?;
        match Arc::try_unwrap(end) {
            Ok(end) => Ok(end),
            Err(end) => {
                *slot = Some(end);
                Err(PyValueError::new_err(
                    "the connection is in use by another thread; it can travel once that call returns",
                ))
            }
        }
    }

    /// Puts an end back (a send that did not take it).
    pub(crate) fn put_back(&self, end: End) {
        *self.end.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(end));
    }

    fn receiving_end(&self) -> PyResult<Arc<End>> {
        let end = self.end()?;
        match end.receiver() {
            Some(_) => Ok(end),
            None => Err(PyOSError::new_err("connection is write-only")),
        }
    }

    fn sending_end(&self) -> PyResult<Arc<End>> {
        let end = self.end()?;
        match end.sender() {
            Some(_) => Ok(end),
            None => Err(PyOSError::new_err("connection is read-only")),
        }
    }

    /// Sends `bytes`, waiting for room (in slices, running the signal
    /// handlers between them).
    fn send_raw(&self, py: Python<'_>, tx: &ferry::Sender, bytes: &[u8]) -> PyResult<()> {
        match tx.try_send(bytes) {
            Ok(()) => return Ok(()),
            Err(ferry::TrySendError::Full) => {}
            Err(e) => return Err(send_error(widen_try_send(e))),
        }
        loop {
            match py.detach(|| tx.send_timeout(bytes, SEND_SLICE)) {
                Ok(()) => return Ok(()),
                Err(ferry::SendTimeoutError::Timeout) => py.check_signals()?,
                Err(e) => return Err(send_timeout_error(e)),
            }
        }
    }

    /// Sends `bytes` with `handles`, waiting for room in slices and running
    /// the signal handlers between them. A handler's error ends the wait
    /// (with the handles given back), unless `deferred` is given: then the
    /// send goes on and the error waits there, for a message whose head is
    /// already out (its receiver expects the rest).
    fn send_with_slices(
        py: Python<'_>,
        tx: &ferry::Sender,
        bytes: &[u8],
        mut handles: Vec<ferry::Handle>,
        mut deferred: Option<&mut Option<PyErr>>,
    ) -> Result<(), (PyErr, Vec<ferry::Handle>)> {
        loop {
            match py.detach(|| tx.send_with_timeout(bytes, handles, SEND_SLICE)) {
                Ok(()) => return Ok(()),
                Err(ferry::SendWithError {
                    error: ferry::SendTimeoutError::Timeout,
                    handles: back,
                }) => {
                    handles = back;
                    if let Err(e) = py.check_signals() {
                        match deferred.as_deref_mut() {
                            Some(slot) => *slot = slot.take().or(Some(e)),
                            None => return Err((e, handles)),
                        }
                    }
                }
                Err(e) => return Err((send_timeout_error(e.error), e.handles)),
            }
        }
    }

    /// Receives with `receive` (given a wait; zero: none), waiting as the
    /// module comment says, until `deadline`.
    fn receive<T: Send>(
        &self,
        py: Python<'_>,
        rx: &ferry::Receiver,
        deadline: Option<Instant>,
        receive: impl Fn(Duration) -> Result<T, ferry::RecvTimeoutError> + Sync,
    ) -> PyResult<T> {
        // What is there already, with the GIL held: no wait.
        match receive(Duration::ZERO) {
            Ok(got) => return self.received(rx, got),
            Err(ferry::RecvTimeoutError::Timeout) => {}
            Err(e) => return Err(recv_timeout_error(e)),
        }
        let first = left(deadline).map_or(FIRST_WAIT, |left| left.min(FIRST_WAIT));
        if !first.is_zero() {
            match py.detach(|| receive(first)) {
                Ok(got) => return self.received(rx, got),
                Err(ferry::RecvTimeoutError::Timeout) => {}
                Err(e) => return Err(recv_timeout_error(e)),
            }
        }
        loop {
            py.check_signals()?;
            let left = left(deadline);
            if left == Some(Duration::ZERO) {
                self.settle(rx);
                return Err(timed_out());
            }
            let ready = py.detach(|| rx.poll_ready(left)).map_err(PyErr::from)?;
            if ready {
                match receive(Duration::ZERO) {
                    Ok(got) => return self.received(rx, got),
                    Err(ferry::RecvTimeoutError::Timeout) => {}
                    Err(e) => return Err(recv_timeout_error(e)),
                }
            }
        }
    }

    /// A receive's result, with the descriptor settled if it was handed
    /// out.
    fn received<T>(&self, rx: &ferry::Receiver, got: T) -> PyResult<T> {
        self.settle(rx);
        Ok(got)
    }

    /// Keeps the handed-out descriptor level-triggered (see
    /// [`ferry::Receiver::poll_ready`]).
    fn settle(&self, rx: &ferry::Receiver) {
        if self.level.load(Ordering::Relaxed) {
            let _ = rx.poll_ready(Some(Duration::ZERO));
        }
    }

    /// The next message as a view (the one `recv_bytes(maxlength)` refused
    /// first).
    fn receive_view(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<ferry::SharedBytes> {
        let deadline = deadline(timeout)?;
        let end = self.receiving_end()?;
        let rx = end.receiver().expect("checked");
        let _inside = self.receiving.enter(py);
        no_partial(&self.partial)?;
        if let Some(held) = self.held.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Ok(held);
        }
        self.receive(py, rx, deadline, |wait| rx.recv_shared_timeout(wait))
    }

    /// Receives what a pickle in parts still lacks: its ends' message,
    /// then its parts, until `deadline`.
    fn receive_rest(
        &self,
        py: Python<'_>,
        rx: &ferry::Receiver,
        deadline: Option<Instant>,
        partial: &mut Partial,
    ) -> PyResult<()> {
        if partial.ends.is_none() {
            let message = self.receive(py, rx, deadline, |wait| rx.recv_with_timeout(wait))?;
            let ferry::Message {
                bytes,
                pipes,
                senders,
                receivers,
                refused,
                ..
            } = message;
            let ends: Vec<End> = (pipes.into_iter().map(End::Pipe))
                .chain(senders.into_iter().map(End::Sender))
                .chain(receivers.into_iter().map(End::Receiver))
                .collect();
            if !bytes.is_empty() || ends.len() + refused != partial.end_count as usize {
                return Err(crate::errors::ProtocolError::new_err(
                    "a pickle's pipe ends did not come as its head said",
                ));
            }
            partial.ends = Some(ends);
        }
        while partial.parts.len() < partial.count as usize {
            let part = self.receive(py, rx, deadline, |wait| rx.recv_shared_timeout(wait))?;
            partial.parts.push(View::new(part));
        }
        Ok(())
    }
}

/// A pickle in parts, received so far (see [`PARTS`]).
struct Partial {
    head: ferry::SharedBytes,
    /// Where the pickle begins in `head`.
    offset: usize,
    count: u32,
    end_count: u32,
    /// The ends, once their message is in.
    ends: Option<Vec<End>>,
    parts: Vec<View>,
}

/// Refuses a receive of one message while a pickle in parts is half
/// received: it would take one of the pickle's parts.
fn no_partial(partial: &Mutex<Option<Partial>>) -> PyResult<()> {
    match partial.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
        true => Err(PyValueError::new_err(
            "an object is half received (its recv timed out or was interrupted): \
             call recv() to finish it first",
        )),
        false => Ok(()),
    }
}

/// A `try_send` error as the `send` error it is (it was not `Full`).
fn widen_try_send(e: ferry::TrySendError) -> ferry::SendError {
    match e {
        ferry::TrySendError::Disconnected => ferry::SendError::Disconnected,
        ferry::TrySendError::TooLarge { len, limit } => ferry::SendError::TooLarge { len, limit },
        ferry::TrySendError::NotTransferable(why) => ferry::SendError::NotTransferable(why),
        ferry::TrySendError::Protocol(p) => ferry::SendError::Protocol(p),
        ferry::TrySendError::Io(e) => ferry::SendError::Io(e),
        other => ferry::SendError::Io(std::io::Error::other(other.to_string())),
    }
}

/// The deadline of a `timeout` in seconds (`None`: none; negative: now).
pub(crate) fn deadline(timeout: Option<f64>) -> PyResult<Option<Instant>> {
    match timeout {
        None => Ok(None),
        Some(t) if t.is_nan() => Err(PyValueError::new_err("timeout is NaN")),
        Some(t) => {
            let t = Duration::try_from_secs_f64(t.max(0.0)).unwrap_or(Duration::MAX);
            Ok(Instant::now().checked_add(t))
        }
    }
}

/// What is left until `deadline` (`None`: no deadline).
fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// The bytes of `buffer` from `offset`, `size` of them (all by default),
/// checked as `multiprocessing` checks them.
fn window(bytes: &[u8], offset: usize, size: Option<usize>) -> PyResult<&[u8]> {
    if offset > bytes.len() {
        return Err(PyValueError::new_err("offset is too large"));
    }
    let size = size.unwrap_or(bytes.len() - offset);
    if size > bytes.len() - offset {
        return Err(PyValueError::new_err("buffer length < offset + size"));
    }
    Ok(&bytes[offset..offset + size])
}

/// The package's pickling helpers (`ferry/_pickle.py`).
static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static REDUCE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

static RECV_ASYNC: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static BUFFER_TOO_SHORT: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

#[pymethods]
impl Connection {
    /// Sends the bytes of a buffer-protocol object (`bytes`, `bytearray`,
    /// `memoryview`, an array), from `offset`, `size` of them (all by
    /// default), as one message.
    #[pyo3(signature = (buf, offset = 0, size = None))]
    fn send_bytes(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        offset: usize,
        size: Option<usize>,
    ) -> PyResult<()> {
        let end = self.sending_end()?;
        let tx = end.sender().expect("checked");
        let _inside = self.sending.enter(py);
        if let Ok(bytes) = buf.cast::<PyBytes>() {
            return self.send_raw(py, tx, window(bytes.as_bytes(), offset, size)?);
        }
        let buffer = PyUntypedBuffer::get(buf)?;
        let bytes = window(bytes_of(&buffer)?, offset, size)?;
        self.send_raw(py, tx, bytes)
    }

    /// Receives a message's bytes. A message longer than `maxlength` raises
    /// `OSError` and stays, to be received next. `timeout` (seconds, ferry's
    /// own) raises `TimeoutError` when nothing came in time.
    #[pyo3(signature = (maxlength = None, *, timeout = None))]
    fn recv_bytes<'py>(
        &self,
        py: Python<'py>,
        maxlength: Option<usize>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let held = self.receive_view(py, timeout)?;
        let bytes = &held[..];
        if let Some(max) = maxlength
            && bytes.len() > max
        {
            let len = bytes.len();
            *self.held.lock().unwrap_or_else(|e| e.into_inner()) = Some(held);
            return Err(PyOSError::new_err(format!(
                "bad message length: {len} bytes, over maxlength {max} (the message stays, to be received next)"
            )));
        }
        Ok(PyBytes::new(py, bytes))
    }

    /// Receives a message into a writable buffer from `offset`; returns
    /// its length. A buffer too small raises
    /// `multiprocessing.BufferTooShort` with the message's bytes as its
    /// first argument.
    #[pyo3(signature = (buf, offset = 0))]
    fn recv_bytes_into(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        offset: usize,
    ) -> PyResult<usize> {
        let mut buffer = PyUntypedBuffer::get(buf)?;
        let room = bytes_of_mut(&mut buffer)?;
        if offset > room.len() {
            return Err(PyValueError::new_err("offset is too large"));
        }
        let held = self.receive_view(py, None)?;
        let bytes = &held[..];
        if bytes.len() > room.len() - offset {
            let short = BUFFER_TOO_SHORT.import(py, "multiprocessing", "BufferTooShort")?;
            return Err(PyErr::from_value(short.call1((PyBytes::new(py, bytes),))?));
        }
        room[offset..offset + bytes.len()].copy_from_slice(bytes);
        Ok(bytes.len())
    }

    /// Receives a message as a read-only buffer ([`View`]): read in place
    /// in the sender's pool block when it came out of line (no copy).
    #[pyo3(signature = (*, timeout = None))]
    fn recv_view(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<View> {
        Ok(View::new(self.receive_view(py, timeout)?))
    }

    /// A writable slot for one message of `size` bytes ([`Loan`]), sent by
    /// its `send()` or at the end of a `with` block.
    fn loan(&self, py: Python<'_>, size: usize) -> PyResult<Loan> {
        let end = self.sending_end()?;
        let tx = end.sender().expect("checked");
        let loan = py.detach(|| tx.loan_owned(size)).map_err(send_error)?;
        Ok(Loan::new(loan))
    }

    /// Sends a picklable object (pickle protocol 5, out-of-band buffers of
    /// at least `OUT_OF_LINE` bytes each in a message of its own, so a
    /// large array is copied once, into shared memory, and read in place;
    /// `Connection`s inside it travel as pipe ends).
    fn send(&self, py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let dumps = DUMPS.import(py, "ferry._pickle", "dumps")?;
        let (data, buffers, ends): (Bound<'_, PyBytes>, Bound<'_, PyList>, Bound<'_, PyList>) =
            dumps.call1((obj,))?.extract()?;
        let end = self.sending_end()?;
        let tx = end.sender().expect("checked");
        if buffers.is_empty() && ends.is_empty() {
            let _inside = self.sending.enter(py);
            return self.send_raw(py, tx, data.as_bytes());
        }
        let count = u32::try_from(buffers.len())
            .ok()
            .filter(|&n| n <= MOST_PARTS)
            .ok_or_else(|| PyValueError::new_err("more than 65,536 out-of-band buffers"))?;
        let views: Vec<PyUntypedBuffer> = buffers
            .iter()
            .map(|b| PyUntypedBuffer::get(&b))
            .collect::<PyResult<_>>()?;
        for view in &views {
            // Checked before the head goes: a part refused after it would
            // leave the receiver waiting for it.
            if bytes_of(view)?.len() > tx.max_message() {
                return Err(send_error(ferry::SendError::TooLarge {
                    len: view.len_bytes(),
                    limit: tx.max_message(),
                }));
            }
        }
        let end_count = u32::try_from(ends.len())
            .ok()
            .filter(|&n| n as usize <= ferry::MAX_HANDLES)
            .ok_or_else(|| PyValueError::new_err("more than 253 pipe ends in one object"))?;
        let mut head = Vec::with_capacity(PARTS.len() + 8 + data.as_bytes().len());
        head.extend_from_slice(PARTS);
        head.extend_from_slice(&count.to_le_bytes());
        head.extend_from_slice(&end_count.to_le_bytes());
        head.extend_from_slice(data.as_bytes());
        let connections: Vec<Bound<'_, Connection>> = ends
            .iter()
            .map(|c| c.cast_into::<Connection>().map_err(PyErr::from))
            .collect::<PyResult<_>>()?;
        drop(end);
        let handles = take_ends(&connections, self)?;
        let end = match self.sending_end() {
            Ok(end) => end,
            Err(e) => {
                put_back(&connections, handles);
                return Err(e);
            }
        };
        let tx = end.sender().expect("checked");
        let _inside = self.sending.enter(py);
        if let Err(e) = self.send_raw(py, tx, &head) {
            put_back(&connections, handles);
            return Err(e);
        }
        // The rest: the ends, in a message of their own right after the
        // head (so the head, which may be large, is received as a view),
        // then each buffer. The head is out, so a signal no longer stops
        // the send: its handler's error is raised once the rest is out.
        let mut deferred = None;
        if !handles.is_empty()
            && let Err((e, back)) =
                Self::send_with_slices(py, tx, b"", handles, Some(&mut deferred))
        {
            put_back(&connections, back);
            return Err(e);
        }
        for view in &views {
            let bytes = bytes_of(view)?;
            Self::send_with_slices(py, tx, bytes, Vec::new(), Some(&mut deferred))
                .map_err(|(e, _)| e)?;
        }
        deferred.map_or(Ok(()), Err)
    }

    /// Receives an object sent by `send` (unpickled: only from a peer you
    /// trust, as with `multiprocessing`). Its out-of-band buffers are
    /// read-only views of the messages they came in (in place, for those
    /// that came out of line).
    #[pyo3(signature = (*, timeout = None))]
    fn recv<'py>(&self, py: Python<'py>, timeout: Option<f64>) -> PyResult<Bound<'py, PyAny>> {
        let deadline = deadline(timeout)?;
        let end = self.receiving_end()?;
        let rx = end.receiver().expect("checked");
        let loads = LOADS.import(py, "ferry._pickle", "loads")?;
        let inside = self.receiving.enter(py);
        let resumed = self
            .partial
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let mut partial = match resumed {
            Some(partial) => partial,
            None => {
                let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
                let head = match held {
                    Some(held) => held,
                    None => self.receive(py, rx, deadline, |wait| rx.recv_shared_timeout(wait))?,
                };
                let Some(rest) = head.strip_prefix(PARTS) else {
                    drop(inside);
                    let data = View::new(head);
                    return loads.call1((data, PyList::empty(py), PyList::empty(py), 0));
                };
                // Each count read once (a hostile peer may change a block
                // while it is read).
                let Some((counts, data)) = rest.split_first_chunk::<8>() else {
                    return Err(crate::errors::ProtocolError::new_err(
                        "a pickle in parts too short for its counts",
                    ));
                };
                let count = u32::from_le_bytes([counts[0], counts[1], counts[2], counts[3]]);
                let end_count = u32::from_le_bytes([counts[4], counts[5], counts[6], counts[7]]);
                if count > MOST_PARTS || end_count as usize > ferry::MAX_HANDLES {
                    return Err(crate::errors::ProtocolError::new_err(format!(
                        "a pickle in {count} parts with {end_count} pipe ends: more than a sender sends"
                    )));
                }
                let offset = head.len() - data.len();
                Partial {
                    head,
                    offset,
                    count,
                    end_count,
                    ends: (end_count == 0).then(Vec::new),
                    parts: Vec::with_capacity(count as usize),
                }
            }
        };
        // What follows the head was sent right after it; a receive that
        // runs out of time (or is interrupted) keeps what it has, for the
        // next `recv` to go on with.
        if let Err(e) = self.receive_rest(py, rx, deadline, &mut partial) {
            // Kept unless the peer is gone or broke the rules.
            let peers = e.is_instance_of::<crate::errors::ProtocolError>(py)
                || e.is_instance_of::<pyo3::exceptions::PyEOFError>(py);
            if !peers {
                *self.partial.lock().unwrap_or_else(|e| e.into_inner()) = Some(partial);
            }
            return Err(e);
        }
        drop(inside);
        let Partial {
            head,
            offset,
            ends,
            parts,
            ..
        } = partial;
        let ends: Vec<Connection> = ends
            .unwrap_or_default()
            .into_iter()
            .map(Connection::new)
            .collect();
        loads.call1((
            View::new(head),
            PyList::new(py, parts)?,
            PyList::new(py, ends)?,
            offset,
        ))
    }

    /// Whether a receive would not wait (a message, or the peer's end),
    /// waiting up to `timeout` seconds for it (`None`: for ever).
    #[pyo3(signature = (timeout = 0.0))]
    fn poll(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let deadline = deadline(timeout)?;
        let end = self.receiving_end()?;
        let rx = end.receiver().expect("checked");
        if self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return Ok(true);
        }
        loop {
            if py
                .detach(|| rx.poll_ready(left(deadline)))
                .map_err(PyErr::from)?
            {
                return Ok(true);
            }
            if left(deadline) == Some(Duration::ZERO) {
                return Ok(false);
            }
            py.check_signals()?;
        }
    }

    /// A descriptor readable exactly while a receive would not wait
    /// (level-triggered), for `selectors`, `asyncio`'s `add_reader`, and
    /// `ferry.wait`. Never read it or close it.
    fn fileno(&self, py: Python<'_>) -> PyResult<i32> {
        use std::os::fd::AsRawFd;
        let end = self.receiving_end()?;
        let rx = end.receiver().expect("checked");
        self.level.store(true, Ordering::Relaxed);
        py.detach(|| rx.poll_ready(Some(Duration::ZERO)))
            .map_err(PyErr::from)?;
        Ok(rx.ready_fd().map_err(PyErr::from)?.as_raw_fd())
    }

    /// Closes this end: the peer's receives then end with `EOFError` once
    /// they have read everything sent, and its sends raise
    /// `BrokenPipeError`. Another thread's call on it returns first.
    fn close(&self) {
        let end = self.end.write().unwrap_or_else(|e| e.into_inner()).take();
        if fork::check(self.born).is_err() {
            std::mem::forget(end);
        }
    }

    /// Whether `close()` was called (or the end travelled on).
    #[getter]
    fn closed(&self) -> bool {
        self.end.read().unwrap_or_else(|e| e.into_inner()).is_none()
    }

    /// The largest message this end sends or accepts (256 MiB by
    /// default); a peer that sends a larger one broke the rules
    /// (`ProtocolError`).
    #[getter]
    fn max_message(&self) -> PyResult<usize> {
        let end = self.end()?;
        Ok(match (end.sender(), end.receiver()) {
            (_, Some(rx)) => rx.max_message(),
            (Some(tx), None) => tx.max_message(),
            (None, None) => 0,
        })
    }

    #[setter]
    fn set_max_message(&self, limit: usize) -> PyResult<()> {
        let end = self.end()?;
        if let Some(tx) = end.sender() {
            tx.set_max_message(limit);
        }
        if let Some(rx) = end.receiver() {
            rx.set_max_message(limit);
        }
        Ok(())
    }

    /// Whether this end receives.
    #[getter]
    fn readable(&self) -> PyResult<bool> {
        Ok(self.end()?.receiver().is_some())
    }

    /// Whether this end sends.
    #[getter]
    fn writable(&self) -> PyResult<bool> {
        Ok(self.end()?.sender().is_some())
    }

    /// Sends `data` with file descriptors (each duplicated: yours stay
    /// open), like `socket.send_fds`.
    fn send_fds(&self, py: Python<'_>, data: &Bound<'_, PyAny>, fds: Vec<i32>) -> PyResult<()> {
        let end = self.sending_end()?;
        let tx = end.sender().expect("checked");
        let mut handles = Vec::with_capacity(fds.len());
        for fd in fds {
            if fd < 0 {
                return Err(PyValueError::new_err(format!("not a descriptor: {fd}")));
            }
            handles.push(ferry::Handle::Fd(dup_fd(py, fd)?));
        }
        let buffer = PyUntypedBuffer::get(data)?;
        let bytes = bytes_of(&buffer)?;
        let _inside = self.sending.enter(py);
        Self::send_with_slices(py, tx, bytes, handles, None).map_err(|(e, _)| e)
    }

    /// Receives a message and the file descriptors that came with it (now
    /// yours, close-on-exec), like `socket.recv_fds`: `(data, fds)`.
    #[pyo3(signature = (*, timeout = None))]
    fn recv_fds<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<(Bound<'py, PyBytes>, Vec<i32>)> {
        use std::os::fd::IntoRawFd;
        let deadline = deadline(timeout)?;
        let end = self.receiving_end()?;
        let rx = end.receiver().expect("checked");
        let _inside = self.receiving.enter(py);
        no_partial(&self.partial)?;
        let message = self.receive(py, rx, deadline, |wait| rx.recv_with_timeout(wait))?;
        let fds = message
            .fds
            .into_iter()
            .map(IntoRawFd::into_raw_fd)
            .collect();
        Ok((PyBytes::new(py, &message.bytes), fds))
    }

    /// Receives an object as `recv` does, in a coroutine: waits on the
    /// descriptor with the running loop's `add_reader` (no thread).
    fn recv_async<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        RECV_ASYNC
            .import(slf.py(), "ferry._aio", "recv_async")?
            .call1((slf,))
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

    fn __repr__(&self) -> String {
        match &*self.end.read().unwrap_or_else(|e| e.into_inner()) {
            None => "<ferry.Connection closed>".to_owned(),
            Some(end) => format!(
                "<ferry.Connection {}>",
                match (end.sender().is_some(), end.receiver().is_some()) {
                    (true, true) => "duplex",
                    (true, false) => "write-only",
                    _ => "read-only",
                }
            ),
        }
    }

    /// Pickled (to a `multiprocessing` child, or any process of this
    /// user), the end travels: it is handed to whichever process unpickles
    /// it, once (see `handoff.rs`), and this connection is closed.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        REDUCE
            .import(slf.py(), "ferry._pickle", "reduce_connection")?
            .call1((slf,))
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // An end inherited through fork is the parent's: closing it here
        // would end the parent's pipe.
        if fork::check(self.born).is_err() {
            let end = self.end.get_mut().unwrap_or_else(|e| e.into_inner()).take();
            std::mem::forget(end);
        }
    }
}

/// Takes the ends out of `connections` to travel (none may be `sender`
/// itself); on failure every end taken is put back.
fn take_ends(
    connections: &[Bound<'_, Connection>],
    sender: &Connection,
) -> PyResult<Vec<ferry::Handle>> {
    let mut taken = Vec::with_capacity(connections.len());
    for connection in connections {
        let result = match std::ptr::eq(connection.get(), sender) {
            true => Err(PyValueError::new_err(
                "a connection cannot be sent over itself",
            )),
            false => connection.get().take_end(),
        };
        match result {
            Ok(end) => taken.push(end.into_handle()),
            Err(e) => {
                put_back(connections, taken);
                return Err(e);
            }
        }
    }
    Ok(taken)
}

/// Puts handles a send handed back into the connections they came from:
/// the last ones (the ends already sent, if any, come first).
fn put_back(connections: &[Bound<'_, Connection>], handles: Vec<ferry::Handle>) {
    let skip = connections.len().saturating_sub(handles.len());
    for (connection, handle) in connections[skip..].iter().zip(handles) {
        if let Some(end) = End::from_handle(handle) {
            connection.get().put_back(end);
        }
    }
}

/// A duplicate of descriptor `fd` (close-on-exec), made by Python's own
/// `os.dup` (a closed number raises `OSError`: `EBADF`).
fn dup_fd(py: Python<'_>, fd: i32) -> PyResult<std::os::fd::OwnedFd> {
    let dup: i32 = py.import("os")?.call_method1("dup", (fd,))?.extract()?;
    Ok(crate::buffer::own_fd(dup))
}
