//! ferry through its C ABI (`crates/ferry-c`): every message sent with
//! `ferry_send` and received with `ferry_recv` into a reused buffer, as a
//! C program does; the pipe is made by ferry's Rust `spawn` and handed to
//! the ABI (in the child, `ferry_from_parent`). Its rows against `ferry`'s
//! show what the ABI costs.

// Calls into the C ABI are `unsafe extern "C"` functions; each call below
// passes a handle the ABI made and has not freed, and buffers that live
// for the call.
#![allow(unsafe_code)]

use std::process::Command;

use ferry_c::abi::{ferry_from_parent, ferry_last_error, ferry_pipe_close, ferry_recv, ferry_send};
use ferry_c::{ferry_pipe, ferry_status};

use super::{Connection, Endpoint, Transport};
use crate::error::Error;

/// The C ABI's pipes, default wait.
#[derive(Debug)]
pub struct FerryC;

impl FerryC {
    pub const ADAPTIVE: Self = FerryC;
}

impl Transport for FerryC {
    fn name(&self) -> &'static str {
        "ferry-c"
    }

    fn wait(&self) -> &'static str {
        "adaptive"
    }

    fn spawn(&self, command: Command) -> Result<Connection, Error> {
        let (child, pipe) = super::ferry::spawn_with_pipe(command, ::ferry::Wait::Adaptive)?;
        Ok(Connection::new(
            child,
            Box::new(CEndpoint::new(ferry_c::ferry_pipe_from(pipe))),
        ))
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let mut pipe = std::ptr::null_mut();
        // SAFETY: `pipe` is a writable out parameter.
        check(unsafe { ferry_from_parent(&mut pipe) }, "ferry_from_parent")?;
        Ok(Box::new(CEndpoint::new(pipe)))
    }
}

/// The C ABI's status as the benchmark's error, with the ABI's words. The
/// success test is inline, one comparison, as in a C caller.
#[inline(always)]
fn check(status: ferry_status, call: &str) -> Result<(), Error> {
    match status {
        ferry_status::FERRY_OK => Ok(()),
        failed => Err(failure(failed, call)),
    }
}

#[cold]
#[inline(never)]
fn failure(status: ferry_status, call: &str) -> Error {
    // SAFETY: the thread's last error, NUL-terminated, read before any
    // other ferry call on this thread.
    let words = unsafe { std::ffi::CStr::from_ptr(ferry_last_error()) };
    Error::new(format!("{call}: {status:?}: {}", words.to_string_lossy()))
}

/// One end through the ABI, with reused send and receive buffers.
struct CEndpoint {
    pipe: *mut ferry_pipe,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl CEndpoint {
    fn new(pipe: *mut ferry_pipe) -> Self {
        Self {
            pipe,
            out: Vec::new(),
            inbox: Vec::new(),
        }
    }
}

impl Drop for CEndpoint {
    fn drop(&mut self) {
        // SAFETY: the handle the ABI made, freed once, here.
        unsafe { ferry_pipe_close(self.pipe) };
    }
}

impl Endpoint for CEndpoint {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        // SAFETY: a live handle; `out` is `len` readable bytes.
        let status = unsafe { ferry_send(self.pipe, self.out.as_ptr().cast(), self.out.len(), -1) };
        check(status, "ferry_send")
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        loop {
            let mut len = 0;
            // SAFETY: a live handle; `inbox` is `inbox.len()` writable
            // bytes; `len` is writable.
            let status = unsafe {
                ferry_recv(
                    self.pipe,
                    self.inbox.as_mut_ptr().cast(),
                    self.inbox.len(),
                    &mut len,
                    -1,
                )
            };
            match status {
                ferry_status::FERRY_OK => return Ok(Some(&self.inbox[..len])),
                // Too small: the size needed came back, and the message
                // waits for a buffer that large.
                ferry_status::FERRY_TOO_LARGE => self.inbox.resize(len, 0),
                ferry_status::FERRY_DISCONNECTED => return Ok(None),
                other => return check(other, "ferry_recv").map(|()| None),
            }
        }
    }
}
