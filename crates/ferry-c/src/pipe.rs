//! `ferry_pipe`: one end of a pipe, as the C ABI holds it, and what its
//! calls do (in safe Rust: `abi.rs` hands them checked arguments).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::status::{
    FERRY_TOO_LARGE, FERRY_WOULD_BLOCK, Failure, Result, recv_failure, send_failure,
    try_send_failure,
};

/// One end of a pipe: it sends to, and receives from, the other end.
/// Made by `ferry_pipe_new`, `ferry_spawn`, `ferry_from_parent`; freed by
/// `ferry_pipe_close` only.
#[allow(non_camel_case_types)]
pub struct ferry_pipe {
    pipe: ferry::Pipe,
    /// A message a receive found too large for its buffer: the next
    /// receive gets it.
    held: Mutex<Option<ferry::SharedBytes>>,
    /// Whether the readiness descriptor was handed out: each receive then
    /// leaves it readable exactly while another would not wait.
    level: AtomicBool,
}

/// How long a call may wait, from the ABI's one argument: 0 never,
/// negative for ever, else that many nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    Never,
    For(Duration),
    Forever,
}

impl Wait {
    pub(crate) fn from_ns(timeout_ns: i64) -> Self {
        match timeout_ns {
            0 => Self::Never,
            ..0 => Self::Forever,
            ns => Self::For(Duration::from_nanos(ns.unsigned_abs())),
        }
    }

    /// The wait as the slices a blocking call takes: a call that waits for
    /// ever waits an hour at a time.
    fn slice(self) -> Duration {
        match self {
            Self::Never => Duration::ZERO,
            Self::For(d) => d,
            Self::Forever => Duration::from_secs(3600),
        }
    }
}

/// What a receive into a caller's buffer did.
pub(crate) enum Received {
    /// The message is in the buffer: its length.
    Fit(usize),
    /// The message is larger than the buffer: its length. It stays.
    TooLarge(usize),
}

impl ferry_pipe {
    pub(crate) fn new(pipe: ferry::Pipe) -> Self {
        Self {
            pipe,
            held: Mutex::new(None),
            level: AtomicBool::new(false),
        }
    }

    pub(crate) fn send(&self, bytes: &[u8], wait: Wait) -> Result<()> {
        let tx = self.pipe.sender();
        loop {
            let sent = match wait {
                Wait::Never => tx.try_send(bytes).map_err(try_send_failure),
                _ => tx.send_timeout(bytes, wait.slice()).map_err(send_failure),
            };
            match sent {
                Err(f) if matches!(wait, Wait::Forever) && is_timeout(&f) => continue,
                other => return other,
            }
        }
    }

    /// Receives the next message into `buf` (or says how large it is, and
    /// keeps it).
    pub(crate) fn recv(&self, buf: &mut [u8], wait: Wait) -> Result<Received> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let message = match held.take() {
            Some(message) => message,
            None => self.receive(wait)?,
        };
        let len = message.len();
        if len > buf.len() {
            *held = Some(message);
            return Ok(Received::TooLarge(len));
        }
        buf[..len].copy_from_slice(&message);
        Ok(Received::Fit(len))
    }

    /// The next message, waiting as `wait` says.
    fn receive(&self, wait: Wait) -> Result<ferry::SharedBytes> {
        let rx = self.pipe.receiver();
        loop {
            let got = rx.recv_shared_timeout(wait.slice()).map_err(|e| match e {
                ferry::RecvTimeoutError::Timeout if matches!(wait, Wait::Never) => {
                    Failure::new(FERRY_WOULD_BLOCK, "no message is waiting")
                }
                e => recv_failure(e),
            });
            match got {
                Err(f) if matches!(wait, Wait::Forever) && is_timeout(&f) => continue,
                other => {
                    self.settle();
                    return other;
                }
            }
        }
    }

    /// A descriptor readable exactly while a receive would not wait.
    pub(crate) fn ready_fd(&self) -> Result<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let rx = self.pipe.receiver();
        self.level.store(true, Ordering::Relaxed);
        self.settle();
        let fd = rx
            .ready_fd()
            .map_err(|e| Failure::io("making the readiness descriptor", &e))?;
        Ok(fd.as_raw_fd())
    }

    /// Keeps a handed-out descriptor level-triggered (see
    /// [`ferry::Receiver::poll_ready`]).
    fn settle(&self) {
        if self.level.load(Ordering::Relaxed) {
            let _ = self.pipe.receiver().poll_ready(Some(Duration::ZERO));
        }
    }

    /// A held message (one too large for the last buffer) is ready too.
    pub(crate) fn has_held(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Whether a receive would not wait, waiting up to `wait` for it.
    pub(crate) fn poll(&self, wait: Wait) -> Result<bool> {
        if self.has_held() {
            return Ok(true);
        }
        let deadline = match wait {
            Wait::For(d) => Instant::now().checked_add(d),
            _ => None,
        };
        loop {
            let left = match wait {
                Wait::Never => Some(Duration::ZERO),
                Wait::For(_) => deadline.map(|d| d.saturating_duration_since(Instant::now())),
                Wait::Forever => None,
            };
            let ready = (self.pipe.receiver().poll_ready(left))
                .map_err(|e| Failure::io("waiting for a message", &e))?;
            // Not ready: out of time, or a signal (which waits on).
            if ready || left == Some(Duration::ZERO) {
                return Ok(ready);
            }
        }
    }

    pub(crate) fn set_max_message(&self, limit: usize) {
        self.pipe.sender().set_max_message(limit);
        self.pipe.receiver().set_max_message(limit);
    }
}

fn is_timeout(failure: &Failure) -> bool {
    failure.status == crate::status::FERRY_TIMED_OUT
}

/// The TOO_LARGE failure for a message of `len` bytes and a buffer of
/// `cap`.
pub(crate) fn too_large(len: usize, cap: usize) -> Failure {
    Failure::new(
        FERRY_TOO_LARGE,
        format!("the message is {len} bytes and the buffer {cap}: it stays, to be received next"),
    )
}
