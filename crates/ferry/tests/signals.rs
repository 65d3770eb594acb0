//! ferry's own threads never take a program's signals.
//!
//! A program that takes its signals with `signalfd` or `sigwait` blocks
//! them in its threads, often only once its libraries are up. A thread
//! ferry had started before that with the signals unblocked would be the
//! one the kernel hands a process-directed signal to: the default action
//! (here `SIGUSR1`'s: end the process) would run instead of the program's
//! `sigwait`. ferry starts its threads with every signal blocked.
//!
//! This test has its own `main` (no libtest harness, `Cargo.toml`):
//! libtest's main thread would take the signal itself, being neither the
//! program's nor ferry's.
//!
//! The child starts ferry's threads (the link watcher by being spawned, the
//! pool helper by a large message), then blocks `SIGUSR1` in its own
//! threads; the test sends it to the child process, and the child's
//! `sigwait`, called after that, must find it pending.

// clippy.toml's rule on atomics is for the library; tests use std's.
#![allow(clippy::disallowed_types)]
#![allow(unsafe_code)]

use std::mem::MaybeUninit;

use ferry::{Pipe, PipeOptions};
use ferry_testkit::{Watchdog, role, secs, spawn_child};

/// Blocks `SIGUSR1` in the calling thread only.
fn block_usr1() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigemptyset` and `sigaddset` write the valid `set`, which is
    // read (by `pthread_sigmask`, and returned) only after they ran.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        libc::sigaddset(set.as_mut_ptr(), libc::SIGUSR1);
        assert_eq!(
            libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut()),
            0
        );
        set.assume_init()
    }
}

/// Unblocks the signals of `set` in the calling thread.
fn unblock(set: &libc::sigset_t) {
    // SAFETY: `set` is a whole initialised set; no old mask is asked for.
    let status = unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, set, std::ptr::null_mut()) };
    assert_eq!(status, 0);
}

/// Waits for a signal of `set` (blocked in this thread); returns it.
fn wait_for(set: &libc::sigset_t) -> libc::c_int {
    let mut signal = 0;
    // SAFETY: `set` is a whole initialised set; `signal` is a valid place
    // for the number.
    let status = unsafe { libc::sigwait(set, &mut signal) };
    assert_eq!(status, 0, "sigwait failed");
    signal
}

const TEST: &str = "a_signal_the_program_waits_for_never_lands_on_a_ferry_thread";

fn main() {
    if role().as_deref() == Some("child") {
        // The watchdog's thread is the test's, not ferry's: it starts with
        // `SIGUSR1` blocked; ferry's threads start after it is unblocked
        // again, as in a program that blocks it only later.
        let set = block_usr1();
        let _dog = Watchdog::start("signals child", secs(20));
        unblock(&set);
        let pipe = Pipe::from_parent().expect("pipe from the parent");
        // A large message makes the pool helper start (where there is a
        // spare CPU); ferry-watch started with the link.
        pipe.send(&vec![7u8; 1 << 20]).unwrap();
        let set = block_usr1();
        pipe.send(b"ready").unwrap();
        // The signal is sent while every thread of the program blocks it:
        // it stays pending for the process unless a thread of ferry's
        // takes it (and, by its default action, ends the process).
        assert_eq!(pipe.recv().unwrap(), b"sent");
        let signal = wait_for(&set);
        pipe.send(&signal.to_le_bytes()).unwrap();
        return;
    }
    let dog = Watchdog::start(TEST, secs(30));
    let (mut child, pipe) = spawn_child(&dog, TEST, "child", &PipeOptions::new());
    assert_eq!(pipe.recv().unwrap().len(), 1 << 20);
    assert_eq!(pipe.recv().unwrap(), b"ready");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::USR1).unwrap();
    // Sent: a thread that does not block the signal has taken it, or it is
    // pending for the child process.
    let _ = pipe.send(b"sent");
    let reply = pipe.recv().unwrap_or_else(|e| {
        panic!(
            "the child did not take SIGUSR1 in its sigwait ({e}; exit: {:?}): one of ferry's threads took it",
            child.wait()
        )
    });
    assert_eq!(reply, libc::SIGUSR1.to_le_bytes());
    child.wait_ok();
    println!("test {TEST} ... ok");
}
