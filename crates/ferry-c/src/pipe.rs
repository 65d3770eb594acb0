//! `ferry_pipe`: one end of a pipe, as the C ABI holds it, and what its
//! calls do (in safe Rust: `abi.rs` hands them checked arguments).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::status::{
    FERRY_TOO_LARGE, FERRY_WOULD_BLOCK, Failure, Result, recv_failure, send_failure,
    try_send_failure,
};

/// One end of a pipe: it sends to, and receives from, the other end (or,
/// for a half that came in a message, only one of the two). Made by
/// `ferry_pipe_new`, `ferry_spawn`, `ferry_from_parent`, `ferry_connect`,
/// `ferry_server_accept`, `ferry_message_take_end`; freed by
/// `ferry_pipe_close`, or by a send that carries it away.
#[allow(non_camel_case_types)]
pub struct ferry_pipe {
    end: End,
    /// A message a receive found too large for its buffer: the next
    /// receive gets it.
    held: Mutex<Option<ferry::SharedBytes>>,
    /// Whether `held` holds one (looked at without the lock on every
    /// receive).
    holding: AtomicBool,
    /// Whether the readiness descriptor was handed out: each receive then
    /// leaves it readable exactly while another would not wait.
    level: AtomicBool,
}

/// What a `ferry_pipe` holds.
pub(crate) enum End {
    Pipe(ferry::Pipe),
    Sender(ferry::Sender),
    Receiver(ferry::Receiver),
    /// Gone with a message whose send failed part way (its handle stays
    /// valid, to be closed).
    Gone,
}

impl End {
    pub(crate) fn from_handle(handle: ferry::Handle) -> Option<Self> {
        match handle {
            ferry::Handle::Pipe(p) => Some(Self::Pipe(p)),
            ferry::Handle::Sender(s) => Some(Self::Sender(s)),
            ferry::Handle::Receiver(r) => Some(Self::Receiver(r)),
            _ => None,
        }
    }

    pub(crate) fn into_handle(self) -> Option<ferry::Handle> {
        match self {
            Self::Pipe(p) => Some(p.into()),
            Self::Sender(s) => Some(s.into()),
            Self::Receiver(r) => Some(r.into()),
            Self::Gone => None,
        }
    }
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
    #[inline]
    pub(crate) fn from_ns(timeout_ns: i64) -> Self {
        match timeout_ns {
            0 => Self::Never,
            ..0 => Self::Forever,
            ns => Self::For(Duration::from_nanos(ns.unsigned_abs())),
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
        Self::of(End::Pipe(pipe))
    }

    pub(crate) fn of(end: End) -> Self {
        Self {
            end,
            held: Mutex::new(None),
            holding: AtomicBool::new(false),
            level: AtomicBool::new(false),
        }
    }

    /// The sending half, or why there is none.
    #[inline]
    pub(crate) fn sender(&self) -> Result<&ferry::Sender> {
        match &self.end {
            End::Pipe(p) => Ok(p.sender()),
            End::Sender(s) => Ok(s),
            End::Receiver(_) => Err(Failure::invalid("this end only receives")),
            End::Gone => Err(gone()),
        }
    }

    /// The receiving half, or why there is none.
    #[inline]
    pub(crate) fn receiver(&self) -> Result<&ferry::Receiver> {
        match &self.end {
            End::Pipe(p) => Ok(p.receiver()),
            End::Receiver(r) => Ok(r),
            End::Sender(_) => Err(Failure::invalid("this end only sends")),
            End::Gone => Err(gone()),
        }
    }

    /// Why this end cannot be sent away now, if it cannot: a message is
    /// held for it (it would be lost), or it is gone.
    pub(crate) fn check_sendable(&self) -> Result<()> {
        if self.has_held() {
            return Err(Failure::new(
                crate::status::FERRY_NOT_TRANSFERABLE,
                "a message too large for an earlier buffer is held for this end: receive it first",
            ));
        }
        match self.end {
            End::Gone => Err(gone()),
            _ => Ok(()),
        }
    }

    /// The end and whether its descriptor was handed out, to send it away
    /// (and to make it again, [`ferry_pipe::from_parts`], if that fails).
    pub(crate) fn into_parts(self) -> (End, bool) {
        (self.end, self.level.into_inner())
    }

    pub(crate) fn from_parts(end: End, level: bool) -> Self {
        let pipe = Self::of(end);
        pipe.level.store(level, Ordering::Relaxed);
        pipe
    }

    #[inline]
    pub(crate) fn send(&self, bytes: &[u8], wait: Wait) -> Result<()> {
        let tx = self.sender()?;
        match wait {
            Wait::Never => tx.try_send(bytes).map_err(try_send_failure),
            Wait::For(d) => tx.send_timeout(bytes, d).map_err(send_failure),
            Wait::Forever => tx.send(bytes).map_err(|e| send_failure(e.into())),
        }
    }

    /// Receives the next message into `buf` (or says how large it is, and
    /// keeps it).
    #[inline]
    pub(crate) fn recv(&self, buf: &mut [u8], wait: Wait) -> Result<Received> {
        if matches!(wait, Wait::Forever) && !self.has_held() {
            // Copied once, from where the message lies into `buf`; one
            // too large for it is kept (copied out) for the next receive.
            // The closure's result stays a word: the rare copy goes out
            // through `kept`.
            let rx = self.receiver()?;
            let mut kept = None;
            let got = rx.recv_in_place(|bytes| {
                match buf.get_mut(..bytes.len()) {
                    Some(room) => room.copy_from_slice(bytes),
                    None => kept = Some(bytes.to_vec()),
                }
                bytes.len()
            });
            self.settle();
            let len = got.map_err(|e| recv_failure(e.into()))?;
            return match kept {
                None => Ok(Received::Fit(len)),
                Some(copy) => {
                    self.hold(copy.into());
                    Ok(Received::TooLarge(len))
                }
            };
        }
        let message = self.view(wait)?;
        let len = message.len();
        if len > buf.len() {
            self.hold(message);
            return Ok(Received::TooLarge(len));
        }
        buf[..len].copy_from_slice(&message);
        Ok(Received::Fit(len))
    }

    /// Keeps `message` for the next receive.
    fn hold(&self, message: ferry::SharedBytes) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        *held = Some(message);
        self.holding.store(true, Ordering::Release);
    }

    /// The held message, if any.
    fn take_held(&self) -> Option<ferry::SharedBytes> {
        if !self.holding.load(Ordering::Acquire) {
            return None;
        }
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        self.holding.store(false, Ordering::Release);
        held.take()
    }

    /// The next message as a view (the held one first).
    pub(crate) fn view(&self, wait: Wait) -> Result<ferry::SharedBytes> {
        let held = self.take_held();
        match held {
            Some(message) => Ok(message),
            None => {
                let rx = self.receiver()?;
                self.receive(wait, |w| match w {
                    Some(d) => rx.recv_shared_timeout(d),
                    None => rx.recv_shared().map_err(Into::into),
                })
            }
        }
    }

    /// The next message with its descriptors and ends (the held one first,
    /// which has none).
    pub(crate) fn message(&self, wait: Wait) -> Result<crate::message::Arrived> {
        if let Some(held) = self.take_held() {
            return Ok(crate::message::Arrived::View(held));
        }
        let rx = self.receiver()?;
        let message = self.receive(wait, |w| match w {
            Some(d) => rx.recv_with_timeout(d),
            None => rx.recv_with().map_err(Into::into),
        })?;
        Ok(crate::message::Arrived::Whole(message))
    }

    /// Receives with `receive` (given how long it may wait: `None`, as
    /// long as it takes), waiting as `wait` says.
    fn receive<T>(
        &self,
        wait: Wait,
        receive: impl Fn(Option<Duration>) -> std::result::Result<T, ferry::RecvTimeoutError>,
    ) -> Result<T> {
        let got = match wait {
            Wait::Never => receive(Some(Duration::ZERO)),
            Wait::For(d) => receive(Some(d)),
            Wait::Forever => receive(None),
        };
        let got = got.map_err(|e| match e {
            ferry::RecvTimeoutError::Timeout if matches!(wait, Wait::Never) => {
                Failure::new(FERRY_WOULD_BLOCK, "no message is waiting")
            }
            e => recv_failure(e),
        });
        self.settle();
        got
    }

    /// A descriptor readable exactly while a receive would not wait.
    pub(crate) fn ready_fd(&self) -> Result<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let rx = self.receiver()?;
        self.level.store(true, Ordering::Relaxed);
        self.settle();
        let fd = rx
            .ready_fd()
            .map_err(|e| Failure::io("making the readiness descriptor", &e))?;
        Ok(fd.as_raw_fd())
    }

    /// Keeps a handed-out descriptor level-triggered (see
    /// [`ferry::Receiver::poll_ready`]).
    #[inline]
    fn settle(&self) {
        if self.level.load(Ordering::Relaxed)
            && let Ok(rx) = self.receiver()
        {
            let _ = rx.poll_ready(Some(Duration::ZERO));
        }
    }

    /// A held message (one too large for the last buffer) is ready too.
    #[inline]
    pub(crate) fn has_held(&self) -> bool {
        // The flag, not the lock: a receive asks this every time, and an
        // uncontended lock is still two locked instructions.
        self.holding.load(Ordering::Acquire)
    }

    /// Whether a receive would not wait, waiting up to `wait` for it.
    pub(crate) fn poll(&self, wait: Wait) -> Result<bool> {
        Ok(Self::poll_many(&[self], wait)?.is_some())
    }

    /// Whether a receive would not wait on one of `pipes`: the first
    /// such (in their order), waiting up to `wait` for one.
    pub(crate) fn poll_many(pipes: &[&ferry_pipe], wait: Wait) -> Result<Option<usize>> {
        if let Some(i) = pipes.iter().position(|p| p.has_held()) {
            return Ok(Some(i));
        }
        let receivers = pipes
            .iter()
            .map(|p| p.receiver())
            .collect::<Result<Vec<_>>>()?;
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
            let ready = ferry::Receiver::poll_ready_any(&receivers, left)
                .map_err(|e| Failure::io("waiting for a message", &e))?;
            // None: out of time, or a signal (which waits on).
            if ready.is_some() || left == Some(Duration::ZERO) {
                return Ok(ready);
            }
        }
    }

    pub(crate) fn set_max_message(&self, limit: usize) -> Result<()> {
        match &self.end {
            End::Pipe(p) => {
                p.sender().set_max_message(limit);
                p.receiver().set_max_message(limit);
            }
            End::Sender(s) => s.set_max_message(limit),
            End::Receiver(r) => r.set_max_message(limit),
            End::Gone => return Err(gone()),
        }
        Ok(())
    }
}

fn gone() -> Failure {
    Failure::new(
        crate::status::FERRY_DISCONNECTED,
        "this end went with a message whose send failed part way",
    )
}

/// The TOO_LARGE failure for a message of `len` bytes and a buffer of
/// `cap`.
pub(crate) fn too_large(len: usize, cap: usize) -> Failure {
    Failure::new(
        FERRY_TOO_LARGE,
        format!("the message is {len} bytes and the buffer {cap}: it stays, to be received next"),
    )
}
