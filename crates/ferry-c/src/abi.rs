//! Every function the C ABI exports, and nothing else: each checks its
//! arguments through `raw`, runs its body under `status::guard` (no panic
//! crosses the boundary) and returns a status. `include/ferry.h` is made
//! from this file by cbindgen.

// Exporting a symbol (`no_mangle`) is unsafe code to Rust; the functions
// are `unsafe extern "C"` where a caller's pointer is used, each with the
// promise it needs, and their only unsafe blocks call into `raw`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void};

use crate::child::ferry_child;
use crate::options::ferry_pipe_options;
use crate::pipe::{Received, Wait, ferry_pipe, too_large};
use crate::raw;
use crate::status::{self, ferry_status, guard, quietly};

/// The ABI's major version: the `N` of `libferry.so.N`. A program built
/// against another major version cannot use this library.
pub const FERRY_ABI_MAJOR: u32 = 0;
/// The ABI's minor version: raised by every addition.
pub const FERRY_ABI_MINOR: u32 = 1;

/// This library's ABI version: `FERRY_ABI_MAJOR << 16 | FERRY_ABI_MINOR`.
/// A program can use it if the major versions are equal and the library's
/// minor version is at least the header's.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_abi_version() -> u32 {
    (FERRY_ABI_MAJOR << 16) | FERRY_ABI_MINOR
}

/// The name and meaning of a status (any `int`: an unknown one says so).
/// The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_status_str(status: c_int) -> *const c_char {
    ferry_status::text(status).as_ptr()
}

/// What the last failed call on this thread said, NUL-terminated ("" after
/// a call that succeeded). Valid until this thread's next ferry call.
#[unsafe(no_mangle)]
pub extern "C" fn ferry_last_error() -> *const c_char {
    status::last_error()
}

/// The `errno` of this thread's last `FERRY_IO` status (0 otherwise).
#[unsafe(no_mangle)]
pub extern "C" fn ferry_last_os_error() -> c_int {
    status::last_os_error()
}

/// Makes a pipe: `*a` and `*b` are its two ends, each sending to the
/// other. `options` may be NULL (every default).
///
/// # Safety
///
/// `options` is NULL or a `ferry_pipe_options` with its `size` set; `a`
/// and `b` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_pipe_new(
    options: *const ferry_pipe_options,
    a: *mut *mut ferry_pipe,
    b: *mut *mut ferry_pipe,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (mut a, mut b, options) = unsafe {
            (
                raw::out(a, "a")?,
                raw::out(b, "b")?,
                raw::options(options, "ferry_pipe_options")?,
            )
        };
        let (x, y) =
            (options.to_ferry()?.pipe()).map_err(|e| status::Failure::io("making a pipe", &e))?;
        a.set(raw::into_handle(ferry_pipe::new(x)));
        b.set(raw::into_handle(ferry_pipe::new(y)));
        Ok(())
    })
}

/// Closes an end (NULL: nothing): the peer's receives then end with
/// `FERRY_DISCONNECTED` once they have taken everything sent. No other
/// thread may be using `pipe`.
///
/// # Safety
///
/// `pipe` is NULL or an end not yet closed; it is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_pipe_close(pipe: *mut ferry_pipe) {
    // SAFETY: as this function's promise.
    quietly(|| unsafe { raw::close(pipe) });
}

/// Sends `len` bytes (a copy: `data` is the caller's again on return),
/// waiting up to `timeout_ns` while the pipe is full (`FERRY_WOULD_BLOCK`
/// for 0, `FERRY_TIMED_OUT` after). `FERRY_TOO_LARGE` over the pipe's
/// limit, `FERRY_DISCONNECTED` once the peer is gone.
///
/// # Safety
///
/// `pipe` is an end not closed; `data` is NULL (with `len` 0) or `len`
/// readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_send(
    pipe: *const ferry_pipe,
    data: *const c_void,
    len: usize,
    timeout_ns: i64,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, data) = unsafe { (raw::handle(pipe, "pipe")?, raw::bytes(data, len, "data")?) };
        pipe.send(data, Wait::from_ns(timeout_ns))
    })
}

/// Receives the next message into `buf` (`cap` bytes), writing its length
/// to `*len`. If it is longer than `cap`: `FERRY_TOO_LARGE`, `*len` is its
/// length, and it stays, to be received next (by a call with a larger
/// buffer). Waits up to `timeout_ns` for a message (`FERRY_WOULD_BLOCK` for
/// 0, `FERRY_TIMED_OUT` after); `FERRY_DISCONNECTED` once the peer is gone
/// and everything it sent was received.
///
/// # Safety
///
/// `pipe` is an end not closed; `buf` is NULL (with `cap` 0) or `cap`
/// writable bytes; `len` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_recv(
    pipe: *const ferry_pipe,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
    timeout_ns: i64,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, buf, mut len) = unsafe {
            (
                raw::handle(pipe, "pipe")?,
                raw::bytes_mut(buf, cap, "buf")?,
                raw::out(len, "len")?,
            )
        };
        match pipe.recv(buf, Wait::from_ns(timeout_ns))? {
            Received::Fit(n) => {
                len.set(n);
                Ok(())
            }
            Received::TooLarge(n) => {
                len.set(n);
                Err(too_large(n, cap))
            }
        }
    })
}

/// Whether a receive would not wait, waiting up to `timeout_ns` for that:
/// `FERRY_OK` if so (a message, or the peer gone), `FERRY_WOULD_BLOCK` (0)
/// or `FERRY_TIMED_OUT` if not.
///
/// # Safety
///
/// `pipe` is an end not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_poll(pipe: *const ferry_pipe, timeout_ns: i64) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let pipe = unsafe { raw::handle(pipe, "pipe")? };
        let wait = Wait::from_ns(timeout_ns);
        match (pipe.poll(wait)?, wait) {
            (true, _) => Ok(()),
            (false, Wait::Never) => Err(status::Failure::new(
                status::FERRY_WOULD_BLOCK,
                "no message is waiting",
            )),
            (false, _) => Err(status::Failure::new(
                status::FERRY_TIMED_OUT,
                "no message arrived before the timeout",
            )),
        }
    })
}

/// A descriptor for `poll`, `epoll`, libuv or GLib, **level-triggered**:
/// readable exactly while a receive would not wait (a message is there, or
/// the peer is gone). Never read it or close it: it belongs to `pipe`,
/// and lives as long as it.
///
/// # Safety
///
/// `pipe` is an end not closed; `fd` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_ready_fd(pipe: *const ferry_pipe, fd: *mut c_int) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, mut fd) = unsafe { (raw::handle(pipe, "pipe")?, raw::out(fd, "fd")?) };
        fd.set(pipe.ready_fd()?);
        Ok(())
    })
}

/// Sets the largest message this end sends or accepts (a peer that sends
/// a larger one broke the rules: `FERRY_PROTOCOL`).
///
/// # Safety
///
/// `pipe` is an end not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_pipe_set_max_message(
    pipe: *const ferry_pipe,
    limit: usize,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let pipe = unsafe { raw::handle(pipe, "pipe")? };
        pipe.set_max_message(limit);
        Ok(())
    })
}

/// Starts the program `argv[0]` (on `PATH` if it has no `/`) with the
/// arguments `argv[1..]` (a NULL-terminated vector, as `execvp` takes),
/// and a pipe to it: `*pipe` is this end, which the child takes with
/// `ferry_from_parent`. `options` may be NULL.
///
/// # Safety
///
/// `argv` is a NULL-terminated vector of NUL-terminated strings;
/// `options` is NULL or has its `size` set; `child` and `pipe` are
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_spawn(
    argv: *const *const c_char,
    options: *const ferry_pipe_options,
    child: *mut *mut ferry_child,
    pipe: *mut *mut ferry_pipe,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (argv, options, mut child, mut pipe) = unsafe {
            (
                raw::c_strings(argv, "argv")?,
                raw::options(options, "ferry_pipe_options")?,
                raw::out(child, "child")?,
                raw::out(pipe, "pipe")?,
            )
        };
        let (c, p) = crate::child::spawn(&argv, options.to_ferry()?)?;
        child.set(raw::into_handle(c));
        pipe.set(raw::into_handle(p));
        Ok(())
    })
}

/// In a child started by `ferry_spawn` (from C, Rust or Python): the pipe
/// to its parent. Once per process; `FERRY_INVALID_ARGUMENT` in a process
/// that was not so started, or on a second call.
///
/// # Safety
///
/// `pipe` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_from_parent(pipe: *mut *mut ferry_pipe) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let mut pipe = unsafe { raw::out(pipe, "pipe")? };
        pipe.set(raw::into_handle(crate::child::from_parent()?));
        Ok(())
    })
}

/// The child's process id.
///
/// # Safety
///
/// `child` is a child not closed; `pid` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_child_pid(
    child: *const ferry_child,
    pid: *mut pid_t,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (child, mut pid) = unsafe { (raw::handle(child, "child")?, raw::out(pid, "pid")?) };
        pid.set(pid_t::try_from(child.pid()).unwrap_or(pid_t::MAX));
        Ok(())
    })
}

/// Waits up to `timeout_ns` for the child to exit, writing its status as
/// `waitpid` gives it (`WIFEXITED`, `WEXITSTATUS`, `WTERMSIG` apply) to
/// `*status` (which may be NULL). `FERRY_WOULD_BLOCK` (0) or
/// `FERRY_TIMED_OUT` while it runs.
///
/// # Safety
///
/// `child` is a child not closed; `status` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_child_wait(
    child: *const ferry_child,
    timeout_ns: i64,
    status: *mut c_int,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (child, mut status) = unsafe {
            (
                raw::handle(child, "child")?,
                (!status.is_null())
                    .then(|| raw::out(status, "status"))
                    .transpose()?,
            )
        };
        let exit = child.wait(Wait::from_ns(timeout_ns))?;
        if let Some(status) = status.as_mut() {
            status.set(exit);
        }
        Ok(())
    })
}

/// Sends the child `SIGKILL` (nothing if it was already waited for).
///
/// # Safety
///
/// `child` is a child not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_child_kill(child: *const ferry_child) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let child = unsafe { raw::handle(child, "child")? };
        child.kill()
    })
}

/// Frees the handle (NULL: nothing). The process is neither waited for
/// nor killed. No other thread may be using `child`.
///
/// # Safety
///
/// `child` is NULL or a child not yet closed; it is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_child_close(child: *mut ferry_child) {
    // SAFETY: as this function's promise.
    quietly(|| unsafe { raw::close(child) });
}

/// The C `pid_t` (from `<sys/types.h>`: the header does not define it).
#[allow(non_camel_case_types)]
pub type pid_t = i32;
