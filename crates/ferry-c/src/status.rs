//! One status namespace for every call, the thread's last error, and the
//! guard every entry runs its body under (no panic crosses the boundary).

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// What a call did. Every call that can fail returns one; `FERRY_OK` is 0.
/// After any other, `ferry_last_error()` says what happened in words.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum ferry_status {
    /// Done.
    FERRY_OK = 0,
    /// A call that may not wait (timeout 0) would have had to.
    FERRY_WOULD_BLOCK = 1,
    /// The timeout passed first.
    FERRY_TIMED_OUT = 2,
    /// The peer is gone, and everything it sent has been received.
    FERRY_DISCONNECTED = 3,
    /// The peer broke the rules (its pipe is shut down); nothing of this
    /// process was touched.
    FERRY_PROTOCOL = 4,
    /// The message is larger than the buffer (the size needed is written
    /// back and the message stays, to be received next) or than the pipe's
    /// limit.
    FERRY_TOO_LARGE = 5,
    /// An argument is NULL where it may not be, or out of range.
    FERRY_INVALID_ARGUMENT = 6,
    /// A pipe end in a message cannot travel.
    FERRY_NOT_TRANSFERABLE = 7,
    /// This process's own failure (out of descriptors, of memory):
    /// `ferry_last_os_error()` gives the `errno`.
    FERRY_IO = 8,
    /// Not on this system.
    FERRY_UNSUPPORTED = 9,
    /// A fault inside ferry (a bug): please report it with
    /// `ferry_last_error()`.
    FERRY_INTERNAL = 10,
    /// The server turned this client away (a wrong token, or a server of
    /// another user).
    FERRY_REFUSED = 11,
}

pub use ferry_status::*;

impl ferry_status {
    /// The status's name and meaning, NUL-terminated.
    pub(crate) fn text(code: c_int) -> &'static CStr {
        match code {
            0 => c"FERRY_OK: done",
            1 => c"FERRY_WOULD_BLOCK: the call would have had to wait",
            2 => c"FERRY_TIMED_OUT: the timeout passed first",
            3 => c"FERRY_DISCONNECTED: the peer is gone and everything it sent was received",
            4 => c"FERRY_PROTOCOL: the peer broke the rules",
            5 => c"FERRY_TOO_LARGE: the message is larger than the buffer or the limit",
            6 => c"FERRY_INVALID_ARGUMENT: an argument is NULL or out of range",
            7 => c"FERRY_NOT_TRANSFERABLE: a pipe end cannot travel",
            8 => c"FERRY_IO: this process's own failure (see ferry_last_os_error)",
            9 => c"FERRY_UNSUPPORTED: not on this system",
            10 => c"FERRY_INTERNAL: a fault inside ferry",
            11 => c"FERRY_REFUSED: the server turned this client away",
            _ => c"not a ferry status",
        }
    }
}

/// A failed call: its status, what to say, and the OS's error number for
/// `FERRY_IO`. Boxed, so a `Result` on the hot path stays small (the
/// failure is the cold path).
#[derive(Debug)]
pub(crate) struct Failure(Box<Failed>);

#[derive(Debug)]
pub(crate) struct Failed {
    pub status: ferry_status,
    pub message: String,
    pub os_error: c_int,
}

impl std::ops::Deref for Failure {
    type Target = Failed;
    fn deref(&self) -> &Failed {
        &self.0
    }
}

impl Failure {
    #[cold]
    pub(crate) fn new(status: ferry_status, message: impl Into<String>) -> Self {
        Self(Box::new(Failed {
            status,
            message: message.into(),
            os_error: 0,
        }))
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(FERRY_INVALID_ARGUMENT, message)
    }

    /// This process's own failure, with its `errno`.
    #[cold]
    pub(crate) fn io(what: &str, error: &std::io::Error) -> Self {
        let status = match error.kind() {
            std::io::ErrorKind::Unsupported => FERRY_UNSUPPORTED,
            std::io::ErrorKind::TimedOut => FERRY_TIMED_OUT,
            _ => FERRY_IO,
        };
        Self(Box::new(Failed {
            status,
            message: format!("{what}: {error}"),
            os_error: error.raw_os_error().unwrap_or(0),
        }))
    }
}

pub(crate) type Result<T> = std::result::Result<T, Failure>;

thread_local! {
    /// The last failure's words on this thread, and its `errno`; `None`
    /// after a call that succeeded (which so costs no allocation).
    static LAST: RefCell<Option<(CString, c_int)>> = const { RefCell::new(None) };
    /// Whether `LAST` holds a failure: all a successful call looks at.
    static FAILED: Cell<bool> = const { Cell::new(false) };
}

fn remember(message: &str, os_error: c_int) {
    // A message with a NUL in it (from a path, say) is cut there.
    let cut = message.split('\0').next().unwrap_or_default();
    let text = CString::new(cut).unwrap_or_default();
    LAST.with(|last| *last.borrow_mut() = Some((text, os_error)));
    FAILED.with(|failed| failed.set(true));
}

/// Forgets the last failure: a call succeeded.
#[inline]
fn forget() {
    if FAILED.with(Cell::get) {
        FAILED.with(|failed| failed.set(false));
        LAST.with(|last| *last.borrow_mut() = None);
    }
}

/// The last failure's words on this thread: valid until this thread's
/// next ferry call.
pub(crate) fn last_error() -> *const c_char {
    LAST.with(|last| match &*last.borrow() {
        Some((text, _)) => text.as_ptr(),
        None => c"".as_ptr(),
    })
}

pub(crate) fn last_os_error() -> c_int {
    LAST.with(|last| last.borrow().as_ref().map_or(0, |(_, errno)| *errno))
}

/// Runs an entry's body: its failure becomes the status it returns (and
/// this thread's last error), and a panic becomes `FERRY_INTERNAL`.
#[inline]
pub(crate) fn guard(body: impl FnOnce() -> Result<()>) -> ferry_status {
    let outcome = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned());
        Err(Failure::new(
            FERRY_INTERNAL,
            format!("ferry panicked: {why}"),
        ))
    });
    match outcome {
        Ok(()) => {
            forget();
            FERRY_OK
        }
        Err(failure) => {
            remember(&failure.message, failure.os_error);
            failure.status
        }
    }
}

/// Runs an entry that cannot fail but must not unwind (a `_close`): a
/// panic is remembered and swallowed.
pub(crate) fn quietly(body: impl FnOnce()) {
    let _ = guard(|| {
        body();
        Ok(())
    });
}

/// Defines the conversion of one of ferry's send errors to a status: the
/// variants every send shares, plus the one its kind of call adds.
macro_rules! send_failure {
    ($(#[$doc:meta])* $name:ident($error:ident), $extra:ident => $status:ident) => {
        $(#[$doc])*
        pub(crate) fn $name(error: ferry::$error) -> Failure {
            use ferry::$error as E;
            let words = error.to_string();
            match error {
                E::$extra => Failure::new($status, words),
                E::Disconnected => Failure::new(FERRY_DISCONNECTED, words),
                E::TooLarge { .. } => Failure::new(FERRY_TOO_LARGE, words),
                E::NotTransferable(_) => Failure::new(FERRY_NOT_TRANSFERABLE, words),
                E::Protocol(_) => Failure::new(FERRY_PROTOCOL, words),
                E::Io(e) => Failure::io("send", &e),
                _ => Failure::new(FERRY_INTERNAL, words),
            }
        }
    };
}

send_failure!(
    /// ferry's send errors as statuses.
    send_failure(SendTimeoutError), Timeout => FERRY_TIMED_OUT
);
send_failure!(
    /// ferry's errors of a send that may not wait, as statuses.
    try_send_failure(TrySendError), Full => FERRY_WOULD_BLOCK
);

/// ferry's receive errors as statuses.
pub(crate) fn recv_failure(error: ferry::RecvTimeoutError) -> Failure {
    use ferry::RecvTimeoutError as E;
    let words = error.to_string();
    match error {
        E::Timeout => Failure::new(FERRY_TIMED_OUT, words),
        E::Disconnected => Failure::new(FERRY_DISCONNECTED, words),
        E::Protocol(_) => Failure::new(FERRY_PROTOCOL, words),
        E::Io(e) => Failure::io("receive", &e),
        _ => Failure::new(FERRY_INTERNAL, words),
    }
}
