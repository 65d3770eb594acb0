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
use crate::loan::ferry_loan;
use crate::message::ferry_message;
use crate::options::ferry_pipe_options;
use crate::pipe::{Received, Wait, ferry_pipe, too_large};
use crate::raw;
use crate::server::{ferry_credentials, ferry_server};
use crate::status::{self, ferry_status, guard, quietly};

/// The ABI's major version: the `N` of `libferry.so.N`. A program built
/// against another major version cannot use this library.
pub const FERRY_ABI_MAJOR: u32 = 0;
/// The ABI's minor version: raised by every addition.
pub const FERRY_ABI_MINOR: u32 = 2;

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

/// Waits up to `timeout_ns` until a receive on one of the `count` ends in
/// `pipes` would not wait: `FERRY_OK` with `*ready` the index of the first
/// such (in the array's order: put the one to favour first), or
/// `FERRY_WOULD_BLOCK` (0) or `FERRY_TIMED_OUT`. An idle wait sleeps in
/// the kernel on every end's descriptor at once.
///
/// # Safety
///
/// `pipes` is `count` ends not closed (`count` > 0); `ready` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_poll_many(
    pipes: *const *const ferry_pipe,
    count: usize,
    timeout_ns: i64,
    ready: *mut usize,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipes, mut ready) = unsafe {
            (
                raw::slice(pipes, count, "pipes")?,
                raw::out(ready, "ready")?,
            )
        };
        if pipes.is_empty() {
            return Err(status::Failure::invalid("no pipes to wait on"));
        }
        let pipes = pipes
            .iter()
            // SAFETY: each an end not closed (the promise); NULL refused.
            .map(|&p| unsafe { raw::handle(p, "an end in pipes") })
            .collect::<status::Result<Vec<_>>>()?;
        let wait = Wait::from_ns(timeout_ns);
        match (ferry_pipe::poll_many(&pipes, wait)?, wait) {
            (Some(i), _) => {
                ready.set(i);
                Ok(())
            }
            (None, Wait::Never) => Err(status::Failure::new(
                status::FERRY_WOULD_BLOCK,
                "no message is waiting on any of them",
            )),
            (None, _) => Err(status::Failure::new(
                status::FERRY_TIMED_OUT,
                "no message arrived on any of them before the timeout",
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
        pipe.set_max_message(limit)
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
        let (child, mut status) = unsafe { (raw::handle(child, "child")?, raw::out_opt(status)) };
        let exit = child.wait(Wait::from_ns(timeout_ns))?;
        raw::Out::set_if(&mut status, exit);
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

/// Receives the next message as a view: `*message` holds its bytes, a
/// large message from another process in place in shared memory (no
/// copy), until `ferry_message_close`. Descriptors or ends that came with
/// it are closed (`ferry_recv_message` keeps them). Waits as `ferry_recv`.
///
/// # Safety
///
/// `pipe` is an end not closed; `message` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_recv_view(
    pipe: *const ferry_pipe,
    timeout_ns: i64,
    message: *mut *mut ferry_message,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, mut out) =
            unsafe { (raw::handle(pipe, "pipe")?, raw::out(message, "message")?) };
        let view = pipe.view(Wait::from_ns(timeout_ns))?;
        out.set(raw::into_handle(ferry_message::new(
            crate::message::Arrived::View(view),
        )));
        Ok(())
    })
}

/// Receives the next message with the descriptors and pipe ends that came
/// with it (its bytes copied once). Waits as `ferry_recv`.
///
/// # Safety
///
/// `pipe` is an end not closed; `message` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_recv_message(
    pipe: *const ferry_pipe,
    timeout_ns: i64,
    message: *mut *mut ferry_message,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, mut out) =
            unsafe { (raw::handle(pipe, "pipe")?, raw::out(message, "message")?) };
        let received = pipe.message(Wait::from_ns(timeout_ns))?;
        out.set(raw::into_handle(ferry_message::new(received)));
        Ok(())
    })
}

/// The message's bytes: `*data` stays valid until `ferry_message_close`.
/// They may be shared memory the sender can still change: copy what you
/// check before you act on it.
///
/// # Safety
///
/// `message` is a message not closed; `data` and `len` are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_data(
    message: *const ferry_message,
    data: *mut *const c_void,
    len: *mut usize,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (message, mut data, mut len) = unsafe {
            (
                raw::handle(message, "message")?,
                raw::out(data, "data")?,
                raw::out(len, "len")?,
            )
        };
        let bytes = message.data();
        data.set(bytes.as_ptr().cast());
        len.set(bytes.len());
        Ok(())
    })
}

/// How many descriptors came with the message (taken ones included; 0
/// for NULL).
///
/// # Safety
///
/// `message` is NULL or a message not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_fd_count(message: *const ferry_message) -> usize {
    let mut count = 0;
    // SAFETY: as this function's promise.
    quietly(|| count = unsafe { raw::handle(message, "message") }.map_or(0, |m| m.fd_count()));
    count
}

/// How many pipe ends came with the message (taken ones included; 0 for
/// NULL).
///
/// # Safety
///
/// `message` is NULL or a message not closed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_end_count(message: *const ferry_message) -> usize {
    let mut count = 0;
    // SAFETY: as this function's promise.
    quietly(|| count = unsafe { raw::handle(message, "message") }.map_or(0, |m| m.end_count()));
    count
}

/// Takes descriptor `index` of the message: `*fd` is now the caller's to
/// close (it is close-on-exec). Each is taken once.
///
/// # Safety
///
/// `message` is a message not closed; `fd` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_take_fd(
    message: *const ferry_message,
    index: usize,
    fd: *mut c_int,
) -> ferry_status {
    use std::os::fd::IntoRawFd;
    guard(|| {
        // SAFETY: as this function's promise.
        let (message, mut fd) = unsafe { (raw::handle(message, "message")?, raw::out(fd, "fd")?) };
        fd.set(message.take_fd(index)?.into_raw_fd());
        Ok(())
    })
}

/// Takes pipe end `index` of the message: `*end` is now the caller's (a
/// whole end, or a half that only sends or only receives). Each is taken
/// once.
///
/// # Safety
///
/// `message` is a message not closed; `end` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_take_end(
    message: *const ferry_message,
    index: usize,
    end: *mut *mut ferry_pipe,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (message, mut end) =
            unsafe { (raw::handle(message, "message")?, raw::out(end, "end")?) };
        end.set(raw::into_handle(message.take_end(index)?));
        Ok(())
    })
}

/// Frees a received message (NULL: nothing): its view goes back to the
/// sender's pool, and descriptors and ends not taken are closed.
///
/// # Safety
///
/// `message` is NULL or a message not closed; neither it nor the data
/// `ferry_message_data` gave is used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_message_close(message: *mut ferry_message) {
    // SAFETY: as this function's promise.
    quietly(|| unsafe { raw::close(message) });
}

/// Sends `len` bytes with `fd_count` descriptors and `end_count` pipe
/// ends. The descriptors stay the caller's (the message carries
/// duplicates); the ends go with the message: on `FERRY_OK` their handles
/// are freed (as by `ferry_pipe_close`: no other thread may be using
/// them), on any other status they are still the caller's. An end cannot
/// be sent over itself, nor given twice. Waits as `ferry_send`.
///
/// # Safety
///
/// `pipe` is an end not closed; `data` is NULL (with `len` 0) or `len`
/// readable bytes; `fds` is NULL (with `fd_count` 0) or `fd_count` open
/// descriptors; `ends` is NULL (with `end_count` 0) or `end_count` ends
/// not closed and used by no other thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_send_message(
    pipe: *const ferry_pipe,
    data: *const c_void,
    len: usize,
    fds: *const c_int,
    fd_count: usize,
    ends: *const *mut ferry_pipe,
    end_count: usize,
    timeout_ns: i64,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (sender, data, fds, ends) = unsafe {
            (
                raw::handle(pipe, "pipe")?,
                raw::bytes(data, len, "data")?,
                raw::slice(fds, fd_count, "fds")?,
                raw::slice(ends, end_count, "ends")?,
            )
        };
        for (i, &end) in ends.iter().enumerate() {
            if std::ptr::eq(end, pipe) {
                return Err(status::Failure::invalid(format!(
                    "end {i} is the pipe it would be sent over"
                )));
            }
            if ends[..i].contains(&end) {
                return Err(status::Failure::invalid(format!("end {i} is given twice")));
            }
            // SAFETY: an end not closed (the promise; NULL is refused).
            unsafe { raw::handle(end, "an end")? }.check_sendable()?;
        }
        // SAFETY: open descriptors (the promise).
        let copies = crate::message::duplicate(&unsafe { raw::fds(fds)? })?;
        // From here nothing fails before the send: each end is moved out
        // of its handle, and put back (or the handle freed) after.
        let mut levels = Vec::with_capacity(ends.len());
        let mut handles = Vec::with_capacity(ends.len() + copies.len());
        for &end in ends {
            // SAFETY: checked above; used by no other thread (the promise),
            // and restored or freed below, once.
            let (end, level) = unsafe { raw::take(end) }.into_parts();
            levels.push(level);
            handles.extend(end.into_handle());
        }
        handles.extend(copies.into_iter().map(ferry::Handle::Fd));
        match crate::message::send(sender, data, handles, ends.len(), Wait::from_ns(timeout_ns)) {
            Ok(()) => {
                for &end in ends {
                    // SAFETY: emptied by `take` above.
                    unsafe { raw::free_taken(end) };
                }
                Ok(())
            }
            Err((failure, back)) => {
                let back =
                    back.unwrap_or_else(|| ends.iter().map(|_| crate::pipe::End::Gone).collect());
                for ((&end, value), level) in ends.iter().zip(back).zip(levels) {
                    // SAFETY: emptied by `take` above.
                    unsafe { raw::restore(end, ferry_pipe::from_parts(value, level)) };
                }
                Err(failure)
            }
        }
    })
}

/// Lends room for a message of `len` bytes (a block of shared memory for
/// a large one, which the receiver reads in place): write it through
/// `ferry_loan_data`, then commit or abort it.
///
/// # Safety
///
/// `pipe` is an end not closed; `loan` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_loan_new(
    pipe: *const ferry_pipe,
    len: usize,
    loan: *mut *mut ferry_loan,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (pipe, mut loan) = unsafe { (raw::handle(pipe, "pipe")?, raw::out(loan, "loan")?) };
        loan.set(raw::into_handle(ferry_loan::new(pipe.sender()?, len)?));
        Ok(())
    })
}

/// Where to write the loan's bytes, and how many: valid until it is
/// committed or aborted.
///
/// # Safety
///
/// `loan` is a loan not committed or aborted; `data` and `len` are
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_loan_data(
    loan: *const ferry_loan,
    data: *mut *mut c_void,
    len: *mut usize,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (loan, mut data, mut len) = unsafe {
            (
                raw::handle(loan, "loan")?,
                raw::out(data, "data")?,
                raw::out(len, "len")?,
            )
        };
        data.set(loan.data().cast());
        len.set(loan.len());
        Ok(())
    })
}

/// Sends what was written in the loan, waiting while the pipe is full
/// (as `ferry_send` with a negative timeout), and frees the loan (whatever
/// the status).
///
/// # Safety
///
/// `loan` is a loan not committed or aborted, used by no other thread; it
/// is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_loan_commit(loan: *mut ferry_loan) -> ferry_status {
    guard(|| {
        if loan.is_null() {
            return Err(status::Failure::invalid("loan is NULL"));
        }
        // SAFETY: a live loan used by no one else (the promise), freed
        // here by taking it whole.
        let taken = unsafe { raw::take(loan) };
        // SAFETY: `loan` was emptied just above.
        unsafe { raw::free_taken(loan) };
        taken.commit()
    })
}

/// Frees a loan without sending it (NULL: nothing).
///
/// # Safety
///
/// `loan` is NULL or a loan not committed or aborted, used by no other
/// thread; it is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_loan_abort(loan: *mut ferry_loan) {
    // SAFETY: as this function's promise.
    quietly(|| unsafe { raw::close(loan) });
}

/// The length of a token: 32 bytes (256 bits).
pub const FERRY_TOKEN_LEN: usize = 32;

/// Writes a new random token (`FERRY_TOKEN_LEN` bytes) to `token`: give
/// it to the server and to its clients.
///
/// # Safety
///
/// `token` is `FERRY_TOKEN_LEN` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_token_new(token: *mut u8) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let mut out = unsafe { raw::out(token.cast::<[u8; FERRY_TOKEN_LEN]>(), "token")? };
        out.set(crate::server::new_token()?);
        Ok(())
    })
}

/// Listens at `name`: an abstract name (nothing on disk) or, with a `/`
/// in it, a socket file's path. Only clients of this user connect, and
/// with `token` (`FERRY_TOKEN_LEN` bytes; NULL: none) only those that
/// present it.
///
/// # Safety
///
/// `name` is a NUL-terminated string; `token` is NULL or
/// `FERRY_TOKEN_LEN` readable bytes; `server` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_server_bind(
    name: *const c_char,
    token: *const u8,
    server: *mut *mut ferry_server,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (name, token, mut out) = unsafe {
            (
                raw::text(name, "name")?,
                raw::token(token)?,
                raw::out(server, "server")?,
            )
        };
        out.set(raw::into_handle(ferry_server::bind(name, token)?));
        Ok(())
    })
}

/// Accepts the next client, waiting up to `timeout_ns`: `*pipe` is this
/// end of its pipe, and `*peer` (which may be NULL) who it is. A client
/// turned away (a wrong token) is skipped.
///
/// # Safety
///
/// `server` is a server not closed; `pipe` is writable; `peer` is NULL or
/// writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_server_accept(
    server: *const ferry_server,
    timeout_ns: i64,
    pipe: *mut *mut ferry_pipe,
    peer: *mut ferry_credentials,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (server, mut pipe, mut peer) = unsafe {
            (
                raw::handle(server, "server")?,
                raw::out(pipe, "pipe")?,
                raw::out_opt(peer),
            )
        };
        let (end, who) = server.accept(Wait::from_ns(timeout_ns))?;
        pipe.set(raw::into_handle(end));
        raw::Out::set_if(&mut peer, who);
        Ok(())
    })
}

/// A level-triggered descriptor for the server: readable while a client
/// waits to be accepted. Never read or close it.
///
/// # Safety
///
/// `server` is a server not closed; `fd` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_server_ready_fd(
    server: *const ferry_server,
    fd: *mut c_int,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (server, mut fd) = unsafe { (raw::handle(server, "server")?, raw::out(fd, "fd")?) };
        fd.set(server.ready_fd()?);
        Ok(())
    })
}

/// Stops listening and frees the server (NULL: nothing); pipes it
/// accepted go on.
///
/// # Safety
///
/// `server` is NULL or a server not closed, used by no other thread; it
/// is not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_server_close(server: *mut ferry_server) {
    // SAFETY: as this function's promise.
    quietly(|| unsafe { raw::close(server) });
}

/// Connects to the server at `name` (as `ferry_server_bind` names it),
/// presenting `token` (NULL: none). A connection waits for the server's
/// answer: up to `timeout_ns` if positive, else ferry's default (5 s).
/// `FERRY_DISCONNECTED` if no server listens there, `FERRY_REFUSED` if it
/// turned this client away.
///
/// # Safety
///
/// `name` is a NUL-terminated string; `token` is NULL or
/// `FERRY_TOKEN_LEN` readable bytes; `pipe` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ferry_connect(
    name: *const c_char,
    token: *const u8,
    timeout_ns: i64,
    pipe: *mut *mut ferry_pipe,
) -> ferry_status {
    guard(|| {
        // SAFETY: as this function's promise.
        let (name, token, mut out) = unsafe {
            (
                raw::text(name, "name")?,
                raw::token(token)?,
                raw::out(pipe, "pipe")?,
            )
        };
        out.set(raw::into_handle(crate::server::connect(
            name,
            token,
            Wait::from_ns(timeout_ns),
        )?));
        Ok(())
    })
}

/// The C `pid_t` (from `<sys/types.h>`: the header does not define it).
#[allow(non_camel_case_types)]
pub type pid_t = i32;
