//! What every [`Bell`] must do, as one suite run on each implementation:
//! the kernel's futex ([`SysFutex`](super::wake::SysFutex), instantiated
//! below) and the futex `tests/loom_wake.rs` models with a loom mutex and
//! condition variable (`tests/loom_bell.rs` runs this suite on it under
//! `--cfg loom`, where every interleaving of each check is explored).
//!
//! The checks that sleep for a time ([`an_unchanged_word_is_slept_on`],
//! [`a_wake_is_not_kept_for_a_later_sleep`]) and the one that needs a
//! second mapping of shared memory ([`a_sleeper_is_woken_through_another_mapping`])
//! run on the kernel's futex only: loom's model has no clock, and no
//! mappings.
//!
//! A sleeper here waits as every sleeper in the crate does: it re-checks
//! the word after each return ("may return early"), so a check fails only
//! if a sleeper sleeps through the change and its wake (a lost wake-up:
//! a hang, which loom reports as a deadlock and the kernel's runs by the
//! time they take).

// Under Miri nothing runs it (see `sys_futex` below).
#![cfg_attr(miri, allow(dead_code))]

use std::time::Duration;

use super::wake::Bell;
use crate::base::sync::{AtomicU32, Ordering};

#[cfg(loom)]
use loom::{sync::Arc, thread};
#[cfg(not(loom))]
use std::{sync::Arc, thread};

/// A sleep no check waits out: a sleeper still asleep after it was lost.
pub const LONG: Duration = Duration::from_secs(20);

/// A bell and a word, shared by a check's threads.
struct Shared<B> {
    bell: B,
    word: AtomicU32,
}

/// Runs `check`; outside loom, fails if it took a quarter of [`LONG`]: a
/// sleeper then slept through its wake and saw the change only when its
/// sleep ran out.
fn promptly(check: impl FnOnce()) {
    #[cfg(not(loom))]
    let start = std::time::Instant::now();
    check();
    #[cfg(not(loom))]
    assert!(
        start.elapsed() < LONG / 4,
        "a wake was lost: {:?}",
        start.elapsed()
    );
}

/// Outside loom, gives a sleeper just started time to fall asleep, so the
/// change after this finds it asleep and only the wake can end its sleep
/// (loom tries both orders anyway).
fn let_it_fall_asleep() {
    #[cfg(not(loom))]
    std::thread::sleep(Duration::from_millis(3));
}

/// Sleeps on `word` until it holds at least `goal`.
fn sleep_until_at_least<B: Bell>(bell: &B, word: &AtomicU32, goal: u32) {
    loop {
        // Acquire: pairs with the waker's Release bump.
        let seen = word.load(Ordering::Acquire);
        if seen >= goal {
            return;
        }
        bell.wait(word, seen, LONG);
    }
}

/// `wait` on a word that no longer holds the expected value returns
/// without sleeping (it does not wait for a wake that already happened).
pub fn a_changed_word_is_not_slept_on<B: Bell>(bell: B) {
    let word = AtomicU32::new(5);
    promptly(|| {
        bell.wait(&word, 4, LONG);
    });
}

/// A sleeper is woken by a waker that changes the word and then wakes it,
/// whichever comes first: the sleeper's look at the word or the change.
pub fn a_change_and_a_wake_end_a_sleep<B: Bell + Send + Sync + 'static>(bell: B) {
    let shared = Arc::new(Shared {
        bell,
        word: AtomicU32::new(0),
    });
    let sleeper = Arc::clone(&shared);
    promptly(|| {
        let sleeper = thread::spawn(move || sleep_until_at_least(&sleeper.bell, &sleeper.word, 1));
        let_it_fall_asleep();
        // Release: pairs with the sleeper's Acquire load.
        shared.word.store(1, Ordering::Release);
        shared.bell.wake(&shared.word);
        sleeper.join().unwrap();
    });
}

/// Changes made one after another, each followed by a wake, each end the
/// sleep that waits for it (a sleeper that went back to sleep is woken
/// again).
pub fn each_wake_in_a_row_ends_a_sleep<B: Bell + Send + Sync + 'static>(bell: B, rounds: u32) {
    let shared = Arc::new(Shared {
        bell,
        word: AtomicU32::new(0),
    });
    let sleeper = Arc::clone(&shared);
    promptly(|| {
        let sleeper = thread::spawn(move || {
            for goal in 1..=rounds {
                sleep_until_at_least(&sleeper.bell, &sleeper.word, goal);
            }
        });
        for _ in 0..rounds {
            let_it_fall_asleep();
            // Release: pairs with the sleeper's Acquire load.
            shared.word.fetch_add(1, Ordering::Release);
            shared.bell.wake(&shared.word);
        }
        sleeper.join().unwrap();
    });
}

/// `wake_all` after a change ends the sleep of every sleeper on the word.
pub fn wake_all_ends_every_sleep<B: Bell + Send + Sync + 'static>(bell: B, sleepers: usize) {
    let shared = Arc::new(Shared {
        bell,
        word: AtomicU32::new(0),
    });
    promptly(|| {
        let threads: Vec<_> = (0..sleepers)
            .map(|_| {
                let sleeper = Arc::clone(&shared);
                thread::spawn(move || sleep_until_at_least(&sleeper.bell, &sleeper.word, 1))
            })
            .collect();
        let_it_fall_asleep();
        // Release: pairs with each sleeper's Acquire load.
        shared.word.store(1, Ordering::Release);
        shared.bell.wake_all(&shared.word);
        for sleeper in threads {
            sleeper.join().unwrap();
        }
    });
}

/// `wait` on an unchanged word, with nobody to wake it, sleeps (it does
/// not return at once, which would turn every sleep into a spin) and
/// returns once its timeout passed, saying it ran out.
#[cfg(not(loom))]
pub fn an_unchanged_word_is_slept_on<B: Bell>(bell: B) {
    let word = AtomicU32::new(9);
    let timeout = Duration::from_millis(50);
    let start = std::time::Instant::now();
    let ran_out = bell.wait(&word, 9, timeout);
    let slept = start.elapsed();
    assert!(ran_out, "an unwoken sleep said it was woken");
    assert!(
        slept >= timeout / 2,
        "returned after {slept:?} of {timeout:?}"
    );
    assert!(slept < timeout + Duration::from_secs(2), "slept {slept:?}");
}

/// A wake with nobody asleep is not kept: a later sleep on the unchanged
/// word still sleeps (a wake carries no permit; the protocol's counter
/// does that work).
#[cfg(not(loom))]
pub fn a_wake_is_not_kept_for_a_later_sleep<B: Bell>(bell: B) {
    let word = AtomicU32::new(1);
    bell.wake(&word);
    bell.wake_all(&word);
    let start = std::time::Instant::now();
    assert!(bell.wait(&word, 1, Duration::from_millis(30)));
    assert!(start.elapsed() >= Duration::from_millis(15));
}

/// A sleeper on a word of shared memory is woken through a second mapping
/// of that memory (another address in this process, as in another
/// process): what a bell between processes must do.
#[cfg(not(loom))]
pub fn a_sleeper_is_woken_through_another_mapping<B: Bell + Sync>(bell: B) {
    use super::region::Region;
    let made = Region::create(crate::base::wire::region::MIN_CAPACITY).expect("make a region");
    let mut copy = None;
    made.send_object(false, |fd| {
        copy = Some(fd.try_clone_to_owned()?);
        Ok(())
    })
    .expect("the region's object is held");
    let again = Region::from_peer(crate::base::sys::PeerFd::new(copy.expect("a copy")), false)
        .expect("map the region a second time");
    let (mine, theirs) = (made.control(0), again.control(0));
    assert_ne!(
        std::ptr::from_ref(&mine.producer.signal),
        std::ptr::from_ref(&theirs.producer.signal),
        "two mappings at one address"
    );
    promptly(|| {
        thread::scope(|scope| {
            scope.spawn(|| sleep_until_at_least(&bell, &mine.producer.signal, 1));
            thread::sleep(Duration::from_millis(20));
            // Release: pairs with the sleeper's Acquire load, through the
            // other mapping.
            theirs.producer.signal.store(1, Ordering::Release);
            bell.wake(&theirs.producer.signal);
        });
    });
}

// Not under Miri: the kernel's futex is outside what it models (loom checks
// the protocol on a modelled one).
#[cfg(all(test, not(loom), not(miri)))]
mod sys_futex {
    use super::super::wake::SysFutex;

    #[test]
    fn a_changed_word_is_not_slept_on() {
        super::a_changed_word_is_not_slept_on(SysFutex);
    }
    #[test]
    fn a_change_and_a_wake_end_a_sleep() {
        for _ in 0..50 {
            super::a_change_and_a_wake_end_a_sleep(SysFutex);
        }
    }
    #[test]
    fn each_wake_in_a_row_ends_a_sleep() {
        super::each_wake_in_a_row_ends_a_sleep(SysFutex, 50);
    }
    #[test]
    fn wake_all_ends_every_sleep() {
        for _ in 0..20 {
            super::wake_all_ends_every_sleep(SysFutex, 4);
        }
    }
    #[test]
    fn an_unchanged_word_is_slept_on() {
        super::an_unchanged_word_is_slept_on(SysFutex);
    }
    #[test]
    fn a_wake_is_not_kept_for_a_later_sleep() {
        super::a_wake_is_not_kept_for_a_later_sleep(SysFutex);
    }
    #[test]
    fn a_sleeper_is_woken_through_another_mapping() {
        super::a_sleeper_is_woken_through_another_mapping(SysFutex);
    }
}
