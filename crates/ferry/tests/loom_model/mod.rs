//! What the loom tests share: a futex modelled for loom.

use std::time::Duration;

use ferry::ring::Corrupt;
use ferry::ring::wake::{Bell, Sleeper};
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::{Condvar, Mutex};

/// A futex modelled with a mutex and condition variable: `wait` sleeps only
/// if the word still holds `expected` when checked under the lock, and every
/// waker bumps the word before taking the lock to notify.
#[derive(Default)]
pub struct ModelFutex {
    lock: Mutex<()>,
    cv: Condvar,
}

impl Bell for ModelFutex {
    fn wait(&self, word: &AtomicU32, expected: u32, _timeout: Duration) -> bool {
        let guard = self.lock.lock().unwrap();
        if word.load(Ordering::SeqCst) == expected {
            drop(self.cv.wait(guard).unwrap());
        }
        false
    }
    fn wake(&self, _word: &AtomicU32) {
        let _guard = self.lock.lock().unwrap();
        self.cv.notify_all();
    }
}

/// A sleeping wait for `ready()` to hold, with nothing else to stop it.
pub struct Until<F>(pub F);

impl<F: Fn() -> bool> Sleeper for Until<F> {
    type Ready = ();
    type Stop = Corrupt;
    fn poll(&mut self) -> Result<Option<()>, Corrupt> {
        Ok((self.0)().then_some(()))
    }
    fn before_sleep(&mut self, _ran_out: bool) -> Result<Duration, Corrupt> {
        Ok(Duration::MAX)
    }
}
