//! Readiness for callers that wait in a loop of their own: a level-triggered
//! look at a receiver's doorbell, and a wait on it that a signal ends.
//!
//! [`Receiver::ready_fd`] alone is edge-like: an `Empty` answer arms it,
//! and it may stay readable after the message that rang it was received.
//! A binding whose users poll the descriptor themselves (Python's
//! `selectors` and `asyncio`, C's `poll`/`epoll`/libuv) needs it to say
//! what a receive would do: [`Receiver::poll_ready`] settles it that way,
//! and a binding calls it after each receive once its user has the
//! descriptor. The same call is the binding's wait: it blocks in `poll`,
//! which a signal interrupts, so an interpreter runs its signal handlers
//! (Python's `KeyboardInterrupt`) and waits again, with no timer while
//! idle.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use super::Receiver;
use super::Source;
use crate::transport::ring::wake;

impl Receiver {
    /// Whether a receive would not wait now, waiting up to `timeout` for it
    /// (`None`: until it would not, or a signal; zero: never waiting). A
    /// receiver with a *whole* message is ready, and so is one whose peer
    /// has gone or broken the rules (the receive then says so).
    ///
    /// A signal delivered to the calling thread ends the wait early with
    /// `false`, so a caller can run its handlers and call again.
    ///
    /// Afterwards [`Receiver::ready_fd`] is level-triggered: readable if
    /// this returned `true`, and from `false` on until a message (or the
    /// end) arrives; so a caller that hands the descriptor to an event
    /// loop calls `poll_ready(Some(Duration::ZERO))` after each receive,
    /// and the descriptor is readable exactly while a receive would not
    /// wait. While the receiver stays ready, that costs no system call (it
    /// knows its own ring of the descriptor is still there to read); when
    /// a receive has emptied it, a `recv` on the descriptor and a fence.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (a, b) = ferry::pipe()?;
    /// let rx = b.receiver();
    /// assert!(!rx.poll_ready(Some(Duration::ZERO))?);
    /// a.send(b"ping")?;
    /// assert!(rx.poll_ready(Some(Duration::from_secs(1)))?);
    /// assert_eq!(rx.recv()?, b"ping");
    /// assert!(!rx.poll_ready(Some(Duration::ZERO))?); // the descriptor is clear again
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::ready_fd`] (the descriptor is made on the first
    /// call), or the `poll` that waits failing.
    pub fn poll_ready(&self, timeout: Option<Duration>) -> std::io::Result<bool> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let bell = std::sync::Arc::clone(self.half.doorbell()?);
        // Still readable from an earlier call, and still ready: nothing to
        // settle (a receive in between left a message, or the end).
        if bell.known_readable() && self.is_ready() {
            return Ok(true);
        }
        loop {
            // Cleared and armed: from here each frame the sender writes
            // rings it; the look after the fence sees every frame before.
            self.source_arm(true);
            wake::settle();
            if self.is_ready() {
                // Readable while ready: the sender need not ring it.
                self.source_disarm();
                if let Some((_, ringer)) = self.half.doorbell_pair() {
                    bell.ring_known(&ringer);
                }
                return Ok(true);
            }
            // Still armed: a frame from now on makes it readable.
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(false);
            }
            let rang = crate::base::sys::wait_readable(&[bell.as_fd()], deadline)?;
            if !rang[0] {
                // Out of time, or a signal: the caller looks at both.
                return self.poll_ready(Some(Duration::ZERO));
            }
        }
    }

    /// [`Receiver::poll_ready`] over many receivers at once: the index of
    /// the first (in `receivers`' order) whose receive would not wait,
    /// waiting up to `timeout` for one (`None`: until one is, or a
    /// signal). `Ok(None)` when the time is out or a signal came first.
    /// Each receiver's descriptor is left level-triggered, as
    /// `poll_ready` leaves it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use ferry::Receiver;
    /// let (a, b) = ferry::pipe()?;
    /// let (c, d) = ferry::pipe()?;
    /// let both = [b.receiver(), d.receiver()];
    /// assert_eq!(Receiver::poll_ready_any(&both, Some(Duration::ZERO))?, None);
    /// c.send(b"second")?;
    /// assert_eq!(Receiver::poll_ready_any(&both, Some(Duration::from_secs(1)))?, Some(1));
    /// # drop(a);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Receiver::poll_ready`].
    pub fn poll_ready_any(
        receivers: &[&Receiver],
        timeout: Option<Duration>,
    ) -> std::io::Result<Option<usize>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let bells = receivers
            .iter()
            .map(|r| r.half.doorbell().map(std::sync::Arc::clone))
            .collect::<std::io::Result<Vec<_>>>()?;
        loop {
            // Each looked at, and armed if not ready (see `poll_ready`).
            for (i, receiver) in receivers.iter().enumerate() {
                if receiver.poll_ready(Some(Duration::ZERO))? {
                    return Ok(Some(i));
                }
            }
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return Ok(None);
            }
            let fds: Vec<_> = bells.iter().map(|b| b.as_fd()).collect();
            let rang = crate::base::sys::wait_readable(&fds, deadline)?;
            if !rang.contains(&true) {
                // Out of time, or a signal: one more look, then the caller.
                return Ok(receivers
                    .iter()
                    .position(|r| r.poll_ready(Some(Duration::ZERO)).unwrap_or(false)));
            }
        }
    }
}
