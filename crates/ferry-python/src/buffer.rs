//! Buffers between Python and ferry, without copies where a copy is not the
//! point: a received message as a read-only buffer ([`View`]), a loan as a
//! writable one ([`Loan`]), and any buffer-protocol object's bytes read or
//! written in place.
//!
//! The unsafe code of the binding is here, each block argued:
//!
//! - reading and writing the memory of a buffer Python exported to us,
//!   which Python keeps valid (and unmoved, for a resizable `bytearray`)
//!   until the `PyUntypedBuffer` is released;
//! - exporting a view's or a loan's memory (`__getbuffer__`), which this
//!   module keeps valid and unmoved while any export is alive: each export
//!   is counted, and the memory is given up only at a count of zero
//!   (`release()` raises `BufferError` otherwise, as `mmap.close()` does),
//!   or when the object itself is freed, which Python does only after
//!   every export released its reference to it;
//! - owning a descriptor number `os.dup` just returned.
#![allow(unsafe_code)] // argued above and at each block

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;

/// The bytes of a C-contiguous buffer Python exported.
pub(crate) fn bytes_of(buffer: &PyUntypedBuffer) -> PyResult<&[u8]> {
    if !buffer.is_c_contiguous() {
        return Err(PyBufferError::new_err(
            "the buffer is not contiguous: pass bytes(...) or a contiguous copy",
        ));
    }
    let (ptr, len) = (buffer.buf_ptr().cast::<u8>(), buffer.len_bytes());
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: a C-contiguous buffer of `len` bytes at `ptr`, valid and
    // unmoved until `buffer` is released, which the borrow outlives not.
    // Another Python thread may write it meanwhile (as it may while
    // `socket.send` reads it): the bytes sent are then a mix, never memory
    // outside the buffer.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// The bytes of a writable C-contiguous buffer Python exported.
pub(crate) fn bytes_of_mut(buffer: &mut PyUntypedBuffer) -> PyResult<&mut [u8]> {
    if buffer.readonly() {
        return Err(PyBufferError::new_err("the buffer is read-only"));
    }
    if !buffer.is_c_contiguous() {
        return Err(PyBufferError::new_err("the buffer is not contiguous"));
    }
    let (ptr, len) = (buffer.buf_ptr().cast::<u8>(), buffer.len_bytes());
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in `bytes_of`, and writable (checked above); the `&mut`
    // borrow of `buffer` keeps this the one Rust reference to it.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A received message, read-only, as a buffer: `memoryview(view)`,
/// `numpy.frombuffer(view)`, `bytes(view)`. A message that came out of line
/// is read where it lies, in the sender's pool block, which stays this
/// process's until every export of the view is released and the view is
/// released or freed; a sender that exits or is killed meanwhile changes
/// nothing.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct View {
    held: Mutex<Option<ferry::SharedBytes>>,
    exports: AtomicUsize,
    in_place: bool,
}

impl View {
    pub(crate) fn new(held: ferry::SharedBytes) -> Self {
        let in_place = held.is_in_place();
        Self {
            held: Mutex::new(Some(held)),
            exports: AtomicUsize::new(0),
            in_place,
        }
    }

    fn held(&self) -> MutexGuard<'_, Option<ferry::SharedBytes>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes, copied (for a caller that needs them after the view).
    pub(crate) fn with_bytes<R>(&self, read: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
        match &*self.held() {
            Some(held) => Ok(read(held)),
            None => Err(released()),
        }
    }
}

fn released() -> PyErr {
    PyValueError::new_err("operation on a released view")
}

#[pymethods]
impl View {
    /// Whether the bytes are read in place in the sender's pool block
    /// (not a copy).
    #[getter]
    fn in_place(&self) -> bool {
        self.in_place
    }

    /// Whether `release()` was called.
    #[getter]
    fn released(&self) -> bool {
        self.held().is_none()
    }

    /// Gives the message back now (its pool block returns to the sender's
    /// pool). Raises `BufferError` while a `memoryview` or array over it
    /// exists.
    fn release(&self) -> PyResult<()> {
        let mut held = self.held();
        if self.exports.load(Ordering::Acquire) != 0 {
            return Err(PyBufferError::new_err(
                "cannot release a view while memoryviews or arrays over it exist",
            ));
        }
        let gone = held.take();
        drop(held);
        drop(gone);
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        self.with_bytes(<[u8]>::len)
    }

    fn __bytes__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        self.with_bytes(|bytes| pyo3::types::PyBytes::new(py, bytes))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        _kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _trace: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.release()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match &*self.held() {
            Some(held) => format!(
                "<ferry.View {} bytes{}>",
                held.len(),
                if self.in_place { ", in place" } else { "" }
            ),
            None => "<ferry.View released>".to_owned(),
        }
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("a received message is read-only"));
        }
        let me = slf.get();
        let held = me.held();
        let Some(bytes) = held.as_deref() else {
            return Err(released());
        };
        // SAFETY: `view` is the struct Python passed to fill; the message
        // stays valid and unmoved while the export is counted (`release`
        // refuses until then; see the module comment).
        unsafe {
            export(
                &slf,
                view,
                bytes.as_ptr().cast_mut(),
                bytes.len(),
                true,
                flags,
                &me.exports,
            )
        }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A writable slot for one message, from `Connection.loan(n)`: write it
/// (it is a buffer: `memoryview(loan)`, `numpy.frombuffer(loan, ...)`),
/// then `send()` it; used as a context manager it is sent when the block
/// ends without an exception and given back otherwise. A loan of at least
/// the out-of-line size to another process is a pool block: the message is
/// written once, where the receiver reads it.
#[pyclass(module = "ferry._ferry", frozen)]
pub struct Loan {
    loan: Mutex<Option<ferry::Loan<'static>>>,
    exports: AtomicUsize,
}

impl Loan {
    pub(crate) fn new(loan: ferry::Loan<'static>) -> Self {
        Self {
            loan: Mutex::new(Some(loan)),
            exports: AtomicUsize::new(0),
        }
    }

    fn loan(&self) -> MutexGuard<'_, Option<ferry::Loan<'static>>> {
        self.loan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The loan, taken out to send or give back: not while exported.
    fn take(&self) -> PyResult<ferry::Loan<'static>> {
        let mut loan = self.loan();
        if self.exports.load(Ordering::Acquire) != 0 {
            return Err(PyBufferError::new_err(
                "release every memoryview or array over the loan first",
            ));
        }
        loan.take()
            .ok_or_else(|| PyValueError::new_err("the loan was already sent or given back"))
    }
}

#[pymethods]
impl Loan {
    /// Sends what was written. Raises `BufferError` while a `memoryview` or
    /// array over the loan exists.
    fn send(&self, py: Python<'_>) -> PyResult<()> {
        let loan = self.take()?;
        py.detach(|| loan.send()).map_err(crate::errors::send_error)
    }

    /// Gives the slot back unsent.
    fn abort(&self) -> PyResult<()> {
        drop(self.take()?);
        Ok(())
    }

    fn __len__(&self) -> PyResult<usize> {
        match &*self.loan() {
            Some(loan) => Ok(loan.len()),
            None => Err(PyValueError::new_err(
                "the loan was already sent or given back",
            )),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        kind: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _trace: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        match kind.is_none() {
            true => self.send(py)?,
            false => {
                let _ = self.abort();
            }
        }
        Ok(false)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let me = slf.get();
        let mut loan = me.loan();
        let Some(loan) = loan.as_mut() else {
            return Err(PyValueError::new_err(
                "the loan was already sent or given back",
            ));
        };
        let bytes: &mut [u8] = loan;
        // SAFETY: `view` is the struct Python passed to fill; the loan's
        // memory (a heap slot or a mapped block, neither moved when the
        // `Loan` value moves) stays this object's, unsent, while the export
        // is counted (`take` refuses until then).
        unsafe {
            export(
                &slf,
                view,
                bytes.as_mut_ptr(),
                bytes.len(),
                false,
                flags,
                &me.exports,
            )
        }
    }

    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {
        self.exports.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Owns descriptor `fd`, which `os.dup` just made for this caller alone.
pub(crate) fn own_fd(fd: i32) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is open (the `dup` succeeded) and no one else holds it:
    // `os.dup` returned it to this call only.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
}

/// Fills `view` with `len` bytes at `ptr`, owned by `owner`, and counts
/// the export in `exports` (uncounted again if Python refuses `flags`).
///
/// # Safety
///
/// `view` is the struct Python passed to `__getbuffer__`; the `len` bytes
/// at `ptr` stay valid and unmoved (and, unless `readonly`, writable by
/// this export alone) until the count drops back.
unsafe fn export<T>(
    owner: &Bound<'_, T>,
    view: *mut ffi::Py_buffer,
    ptr: *mut u8,
    len: usize,
    readonly: bool,
    flags: c_int,
    exports: &AtomicUsize,
) -> PyResult<()> {
    let len = ffi::Py_ssize_t::try_from(len)
        .map_err(|_| PyBufferError::new_err("too large for a buffer"))?;
    exports.fetch_add(1, Ordering::AcqRel);
    // SAFETY: the caller's promise.
    let filled = unsafe {
        ffi::PyBuffer_FillInfo(
            view,
            owner.as_ptr(),
            ptr.cast(),
            len,
            c_int::from(readonly),
            flags,
        )
    };
    if filled != 0 {
        exports.fetch_sub(1, Ordering::AcqRel);
        return Err(PyErr::fetch(owner.py()));
    }
    Ok(())
}
