//! Shared (inter-process) futexes: [`futex(2)`](https://man7.org/linux/man-pages/man2/futex.2.html).
//!
//! A ring's words live in shared memory, so `futex_wait` and `futex_wake`
//! never set `FUTEX_PRIVATE_FLAG`; `private_wait` and `private_wake` do,
//! for a word only this process uses (a pipe end's send or receive lock),
//! which spares the kernel the lookup of a shared mapping.

use crate::base::sync::AtomicU32;
use std::time::Duration;

use rustix::thread::futex;

/// Sleeps while `*word == expected`, for at most `timeout`
/// (`Duration::MAX`: without a timeout).
///
/// Returns on a wake, a timeout, a signal, or at once if the word no longer
/// holds `expected`; the caller re-checks its condition in every case.
/// Returns whether the sleep ended without a wake: it timed out
/// (`ETIMEDOUT`) or a signal interrupted it (`EINTR`).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> bool {
    let ts = relative(timeout);
    // Every outcome (woken, EAGAIN, ETIMEDOUT, EINTR) means "look again".
    matches!(
        futex::wait(word.as_std(), futex::Flags::empty(), expected, ts.as_ref()),
        Err(rustix::io::Errno::TIMEDOUT | rustix::io::Errno::INTR)
    )
}

/// Wakes up to `n` sleepers on `word`.
pub(crate) fn futex_wake(word: &AtomicU32, n: u32) {
    // Errors are impossible for a valid, aligned address we hold a reference to.
    let _ = futex::wake(word.as_std(), futex::Flags::empty(), n);
}

/// Sleeps while `*word == expected`, a word of this process's own memory,
/// until woken, for at most `timeout` (`Duration::MAX`: without a timeout),
/// or a signal, or at once if the word changed.
pub(crate) fn private_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = relative(timeout);
    // Every outcome means "look again".
    let _ = futex::wait(word.as_std(), futex::Flags::PRIVATE, expected, ts.as_ref());
}

/// Wakes up to `n` sleepers of [`private_wait`] on `word`; returns how
/// many it woke.
pub(crate) fn private_wake(word: &AtomicU32, n: u32) -> usize {
    // Errors are impossible for a valid, aligned address we hold a reference to.
    futex::wake(word.as_std(), futex::Flags::PRIVATE, n).unwrap_or(0)
}

/// A futex wait's relative timeout: `None` for `Duration::MAX` (no timeout).
fn relative(timeout: Duration) -> Option<rustix::time::Timespec> {
    (timeout != Duration::MAX).then(|| rustix::time::Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    })
}
