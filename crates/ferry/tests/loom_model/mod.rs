//! What the loom tests share: a futex modelled for loom.

use std::time::Duration;

use ferry::ring::wake::Bell;
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
