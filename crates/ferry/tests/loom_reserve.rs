//! Model-checks the block reserve's refill handshake with loom: a sender
//! taking blocks never waits for the helper and always gets a block, and a
//! kick is never lost. The helper here waits without a timeout and returns
//! once it has made its budget, so a lost kick leaves it asleep forever,
//! which loom reports as a deadlock at `join`.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ferry --test loom_reserve`.
#![cfg(loom)]

use ferry::pool::reserve::{Reserve, Tuning};
use loom::sync::Arc;

fn make(class: usize) -> std::io::Result<usize> {
    Ok(class)
}

/// One class; refill below 1, up to 2.
fn watermarks(_class: usize) -> (usize, usize) {
    (1, 2)
}

#[test]
fn takes_never_wait_and_kicks_are_never_lost() {
    loom::model(|| {
        let tuning = Tuning {
            watermarks,
            release_idle: false,
            budget: Some(2),
        };
        let reserve = Arc::new(Reserve::new(1, make, tuning));
        let helper = {
            let reserve = Arc::clone(&reserve);
            loom::thread::spawn(move || reserve.run_helper())
        };
        for _ in 0..2 {
            assert_eq!(reserve.take(0, true).unwrap(), 0);
        }
        helper.join().unwrap();
        let stats = reserve.stats();
        assert_eq!(stats.taken_from_reserve + stats.made_on_send_path, 2);
        assert!(stats.made_in_background >= 2);
    });
}
