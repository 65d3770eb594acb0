//! Threads ferry starts for itself, with every signal blocked
//! ([`pthread_sigmask(3)`](https://man7.org/linux/man-pages/man3/pthread_sigmask.3.html)).
//!
//! A program that takes its signals with `signalfd` or `sigwait` blocks
//! them in every thread it owns; a thread a library starts with the
//! signals unblocked would take them instead (the kernel hands a
//! process-directed signal to any thread that does not block it), and its
//! handler would run on ferry's thread or the signal would be lost to the
//! `signalfd`. So each of ferry's threads starts with all signals blocked:
//! the calling thread blocks them all, starts the thread (which inherits
//! that mask from its first instruction, so there is no window), and
//! restores its own mask. Signals the kernel sends a thread for its own
//! fault (`SIGSEGV`, `SIGBUS`, …) are delivered whatever the mask.

#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::thread::JoinHandle;

/// Starts a thread named `name` running `f`, with every signal blocked in
/// it; `stack` bytes of stack where given.
pub(crate) fn spawn_quiet<F>(name: &str, stack: Option<usize>, f: F) -> io::Result<JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let mut builder = std::thread::Builder::new().name(name.into());
    if let Some(stack) = stack {
        builder = builder.stack_size(stack);
    }
    let saved = block_all()?;
    let spawned = builder.spawn(f);
    restore(&saved);
    spawned
}

/// Blocks every signal in the calling thread; returns the mask it had.
fn block_all() -> io::Result<libc::sigset_t> {
    let mut all = MaybeUninit::<libc::sigset_t>::uninit();
    let mut saved = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigfillset` writes a whole `sigset_t` into the valid,
    // exclusively borrowed `all`; `pthread_sigmask` reads `all` (written
    // by `sigfillset`, which cannot fail on a valid pointer) and writes the
    // old mask into the valid `saved`, which is read only after it
    // returned 0.
    unsafe {
        libc::sigfillset(all.as_mut_ptr());
        match libc::pthread_sigmask(libc::SIG_BLOCK, all.as_ptr(), saved.as_mut_ptr()) {
            0 => Ok(saved.assume_init()),
            errno => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// Puts back the calling thread's mask from [`block_all`].
fn restore(saved: &libc::sigset_t) {
    // SAFETY: `saved` is a whole `sigset_t` that `pthread_sigmask` wrote;
    // a null old-mask pointer asks for nothing back. `SIG_SETMASK` with a
    // valid set cannot fail.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, saved, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The started thread blocks every signal the caller did not, and the
    /// caller's own mask is as it was.
    #[test]
    fn a_started_thread_blocks_every_signal_and_the_caller_keeps_its_mask() {
        fn blocked(signal: libc::c_int) -> bool {
            let mut now = MaybeUninit::<libc::sigset_t>::uninit();
            // SAFETY: a null new set only reads the mask into the valid
            // `now`, read after the call returned 0; `sigismember` reads it.
            unsafe {
                assert_eq!(
                    libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), now.as_mut_ptr()),
                    0
                );
                libc::sigismember(now.as_ptr(), signal) == 1
            }
        }
        let before = blocked(libc::SIGTERM);
        let inside = spawn_quiet("ferry-test", None, || {
            assert!(blocked(libc::SIGTERM) && blocked(libc::SIGINT) && blocked(libc::SIGUSR1));
        })
        .unwrap()
        .join();
        assert!(
            inside.is_ok(),
            "the started thread did not block every signal"
        );
        assert_eq!(blocked(libc::SIGTERM), before);
    }
}
