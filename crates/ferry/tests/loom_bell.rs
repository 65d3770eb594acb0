//! The bell conformance suite (`src/ring/bell_conformance.rs`) on the
//! futex the loom tests model (`loom_model::ModelFutex`): every
//! interleaving of each check, so a lost wake-up shows as a deadlock. The
//! checks that need a clock or shared mappings run on the kernel's futex
//! only (`cargo test -p ferry --lib -- bell_conformance`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ferry --test loom_bell`.
#![cfg(loom)]

#[allow(dead_code)] // the bell suite needs the modelled futex only
mod loom_model;

use ferry::ring::bell_conformance as suite;
use loom_model::ModelFutex;

#[test]
fn a_changed_word_is_not_slept_on() {
    loom::model(|| suite::a_changed_word_is_not_slept_on(ModelFutex::default()));
}

#[test]
fn a_change_and_a_wake_end_a_sleep() {
    loom::model(|| suite::a_change_and_a_wake_end_a_sleep(ModelFutex::default()));
}

#[test]
fn each_wake_in_a_row_ends_a_sleep() {
    loom::model(|| suite::each_wake_in_a_row_ends_a_sleep(ModelFutex::default(), 2));
}

#[test]
fn wake_all_ends_every_sleep() {
    loom::model(|| suite::wake_all_ends_every_sleep(ModelFutex::default(), 2));
}
