//! Model-checks the sleep/wake protocol of `ferry::ring::wake` with loom:
//! every interleaving (and every weak-memory outcome loom models) of a
//! producer and a consumer that each sleep when they cannot proceed. A lost
//! wakeup would leave a thread asleep forever, which loom reports as a
//! deadlock.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test --release -p ferry --test loom_wake`.
#![cfg(loom)]

mod loom_model;

use ferry::ring::control::{Control, Side};
use ferry::ring::wake;
use loom::sync::atomic::Ordering;
use loom::sync::{Arc, Condvar, Mutex};
use loom_model::{ModelFutex, Until};

/// Waits, as `me`, until `ready()` holds, sleeping on `peer`'s bell: the
/// sleep loop every blocking wait of a pipe runs.
fn wait_until(futex: &ModelFutex, me: &Side, peer: &Side, ready: impl Fn() -> bool) {
    wake::sleep_until(futex, me, peer, &mut Until(ready)).unwrap();
}

/// A ring of `capacity` items: the producer waits for room, the consumer
/// for items; each notifies the other after moving its position.
fn run(items: u64, capacity: u64) {
    loom::model(move || {
        let control = Arc::new(Control::default());
        let futex = Arc::new(ModelFutex::default());
        let (c2, f2) = (Arc::clone(&control), Arc::clone(&futex));
        let producer = loom::thread::spawn(move || {
            for i in 1..=items {
                let (me, peer) = (&c2.producer, &c2.consumer);
                wait_until(&f2, me, peer, || {
                    i - peer.pos.load(Ordering::Acquire) <= capacity
                });
                me.pos.store(i, Ordering::Release);
                wake::notify(&*f2, me, peer);
            }
        });
        let (me, peer) = (&control.consumer, &control.producer);
        for i in 1..=items {
            wait_until(&futex, me, peer, || peer.pos.load(Ordering::Acquire) >= i);
            me.pos.store(i, Ordering::Release);
            wake::notify(&*futex, me, peer);
        }
        producer.join().unwrap();
    });
}

#[test]
fn consumer_sleeping_on_an_empty_ring_is_always_woken() {
    run(2, 4);
}

#[test]
fn both_sides_sleeping_in_turn_never_lose_a_wakeup() {
    run(3, 1);
}

/// An eventfd modelled as a flag under a lock: `ring` sets it and notifies,
/// `clear` resets it, `wait` sleeps until it is set. One instance may stand
/// for several doorbells watched together (an epoll over them).
#[derive(Default)]
struct ModelDoorbell {
    rung: Mutex<bool>,
    cv: Condvar,
}

impl ModelDoorbell {
    fn ring(&self) {
        *self.rung.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn clear(&self) {
        *self.rung.lock().unwrap() = false;
    }
    fn wait(&self) {
        let mut rung = self.rung.lock().unwrap();
        while !*rung {
            rung = self.cv.wait(rung).unwrap();
        }
    }
}

/// A producer's side of one item: publish, notify (fence (B)), and ring
/// the consumer's doorbell if it says it waits on it.
fn publish(futex: &ModelFutex, bell: &ModelDoorbell, me: &Side, peer: &Side, pos: u64) {
    me.pos.store(pos, Ordering::Release);
    wake::notify(futex, me, peer);
    if wake::wants_doorbell(peer) {
        bell.ring();
    }
}

/// A consumer waiting on its doorbell (as a `Select` or an async task
/// does) for each of `items` items is always woken: it clears the bell,
/// arms, re-checks the ring, and only then waits.
#[test]
fn a_consumer_waiting_on_its_doorbell_is_always_woken() {
    loom::model(|| {
        let control = Arc::new(Control::default());
        let futex = Arc::new(ModelFutex::default());
        let bell = Arc::new(ModelDoorbell::default());
        let (c2, f2, b2) = (Arc::clone(&control), Arc::clone(&futex), Arc::clone(&bell));
        let producer = loom::thread::spawn(move || {
            for i in 1..=2 {
                publish(&f2, &b2, &c2.producer, &c2.consumer, i);
            }
        });
        let (me, peer) = (&control.consumer, &control.producer);
        for i in 1..=2 {
            while peer.pos.load(Ordering::Acquire) < i {
                bell.clear();
                wake::arm_doorbell(me);
                if peer.pos.load(Ordering::Acquire) >= i {
                    break;
                }
                bell.wait();
            }
            me.pos.store(i, Ordering::Release);
        }
        wake::disarm_doorbell(me);
        producer.join().unwrap();
    });
}

/// One waiter over two rings whose doorbells it watches together (a
/// `Select`): it announces on both sides, fences once, re-checks both,
/// and only then waits; a producer on each ring publishes one item.
#[test]
fn a_select_over_two_rings_is_always_woken() {
    loom::model(|| {
        let rings = Arc::new([Control::default(), Control::default()]);
        let futex = Arc::new(ModelFutex::default());
        let bell = Arc::new(ModelDoorbell::default());
        let producers: Vec<_> = (0..2)
            .map(|r| {
                let (rings, futex, bell) =
                    (Arc::clone(&rings), Arc::clone(&futex), Arc::clone(&bell));
                loom::thread::spawn(move || {
                    let ring = &rings[r];
                    publish(&futex, &bell, &ring.producer, &ring.consumer, 1);
                })
            })
            .collect();
        let seen = |r: usize| rings[r].producer.pos.load(Ordering::Acquire) >= 1;
        while !(seen(0) && seen(1)) {
            bell.clear();
            for ring in rings.iter() {
                wake::announce_doorbell(&ring.consumer);
            }
            wake::settle();
            if seen(0) && seen(1) {
                break;
            }
            bell.wait();
        }
        for p in producers {
            p.join().unwrap();
        }
    });
}
