//! Model-checks the wait mechanism (`ferry::wait::run`) steered by the
//! default policy (`policy::adaptive`) with loom: a producer and a consumer
//! over a one-slot ring each wait through it, spinning, yielding or
//! sleeping as the policy says, the sleep being the ring's own sleep loop
//! (`wake::sleep_until`) on a modelled futex. Every message must arrive in
//! order; a lost wakeup leaves a thread asleep forever, which loom reports
//! as a deadlock.
//!
//! Three views of the peer, so each branch of the policy is taken: its
//! `waiting` word on another CPU (spin, then sleep once it sleeps), on
//! this CPU (yield, then sleep), and not seen at all (a blind spin). In a
//! model every yield lets the other side run, so a wait mostly ends within
//! a step; each view is therefore also run with each side holding back a
//! move until the other side has gone to sleep (a [`Gate`]), so the whole
//! spin runs out, the policy says sleep, and the move races the sleep.
//! Under loom the mechanism's clock is a fake (10 µs a read) and a poll
//! burst is 2 polls (`policy::BURST`).
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test
//! --release -p ferry --test loom_wait`.
#![cfg(loom)]

mod loom_model;

use std::time::Instant;

use ferry::ring::Corrupt;
use ferry::ring::control::{Control, Side};
use ferry::ring::wake;
use ferry::wait::{self, Memory, Peer, Place, Target, policy};
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use loom_model::{ModelFutex, Until as Asleep};

/// How the waits see their peer.
#[derive(Clone, Copy)]
enum View {
    /// Its `waiting` word, on another CPU.
    Elsewhere,
    /// Its `waiting` word, on this CPU.
    Here,
    /// Not at all, on another CPU.
    Unseen,
}

/// A latch a side opens as it goes to sleep, for the other side to hold
/// back its next move until then: that move then races the sleep's
/// announcement, and the sleeper's spin (or yields) ran their whole course
/// first, the peer being held (not runnable) meanwhile.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
    }
}

/// One wait of a ring side until `ready()` holds, as the mechanism sees it.
struct Until<'a, F> {
    futex: &'a ModelFutex,
    me: &'a Side,
    peer: &'a Side,
    view: View,
    /// Opened as this side goes to sleep.
    asleep: &'a Gate,
    ready: F,
}

impl<F: Fn() -> bool> Target for Until<'_, F> {
    type Ready = ();
    type Stop = Corrupt;

    fn poll(&mut self) -> Result<Option<()>, Corrupt> {
        Ok((self.ready)().then_some(()))
    }

    fn place(&self) -> Place {
        match self.view {
            View::Here => Place::Here,
            View::Elsewhere | View::Unseen => Place::Elsewhere,
        }
    }

    fn peer(&self) -> Peer {
        // Relaxed: a scheduling hint, as in the pipe's own look.
        match (self.view, self.peer.waiting.load(Ordering::Relaxed)) {
            (View::Unseen, _) => Peer::Unseen,
            (_, 0) => Peer::Awake,
            _ => Peer::Asleep,
        }
    }

    fn ended(&mut self, _ask: bool) -> Option<Result<(), Corrupt>> {
        None
    }

    fn timed_out(&mut self) -> Result<(), Corrupt> {
        unreachable!("no deadline")
    }

    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), Corrupt> {
        assert!(deadline.is_none());
        self.asleep.open();
        wake::sleep_until(self.futex, self.me, self.peer, &mut Asleep(&self.ready))
    }
}

/// One side of the ring: its words, the other side's, the bell, how it
/// sees the other side, its sleep latch and the other side's.
struct End<'a> {
    futex: &'a ModelFutex,
    me: &'a Side,
    peer: &'a Side,
    view: View,
    asleep: &'a Gate,
    peer_asleep: &'a Gate,
    memory: Memory,
}

impl End<'_> {
    /// Waits until `ready()` holds, through the mechanism and the default
    /// policy, as a pipe end does (it has polled once and missed).
    fn wait_until(&mut self, ready: impl Fn() -> bool) {
        if ready() {
            return;
        }
        let mut target = Until {
            futex: self.futex,
            me: self.me,
            peer: self.peer,
            view: self.view,
            asleep: self.asleep,
            ready,
        };
        wait::run(policy::adaptive, &mut self.memory, &mut target, None).unwrap();
    }

    /// Moves this side's position to `pos` and tells the other side; first,
    /// if `hold`, waits until the other side has gone to sleep (once).
    fn advance(&self, pos: u64, hold: bool) {
        if hold {
            self.peer_asleep.pass();
        }
        self.me.pos.store(pos, Ordering::Release);
        wake::notify(self.futex, self.me, self.peer);
    }
}

/// A ring of one slot: the producer writes message `i` (the value `i *
/// 10`) into the slot once the consumer has taken `i - 1`, then publishes;
/// the consumer waits for it, reads it, and gives the slot back. Each
/// notifies the other after moving its position. With `hold`, the consumer
/// gives the first slot back only once the producer (waiting for room)
/// has gone to sleep, and the producer publishes the last message only
/// once the consumer (waiting for it) has.
fn handoff(items: u64, view: View, hold: bool) {
    let mut model = loom::model::Builder::new();
    // A spin through `AWAKE_SPIN` is a hundred steps of the fake clock,
    // each a few scheduling points: more than loom's default 1,000.
    model.max_branches = 20_000;
    model.check(move || {
        let control = Arc::new(Control::default());
        let slot = Arc::new(AtomicU64::new(0));
        let futex = Arc::new(ModelFutex::default());
        let gates = Arc::new([Gate::default(), Gate::default()]);
        let shared = (
            Arc::clone(&control),
            Arc::clone(&slot),
            Arc::clone(&futex),
            Arc::clone(&gates),
        );
        let producer = loom::thread::spawn(move || {
            let (control, slot, futex, gates) = shared;
            let mut end = End {
                futex: &futex,
                me: &control.producer,
                peer: &control.consumer,
                view,
                asleep: &gates[0],
                peer_asleep: &gates[1],
                memory: Memory::default(),
            };
            let peer = &control.consumer;
            for i in 1..=items {
                end.wait_until(|| peer.pos.load(Ordering::Acquire) >= i - 1);
                // Relaxed: ordered by the Release store of `pos`.
                slot.store(i * 10, Ordering::Relaxed);
                end.advance(i, hold && i == items);
            }
        });
        let mut end = End {
            futex: &futex,
            me: &control.consumer,
            peer: &control.producer,
            view,
            asleep: &gates[1],
            peer_asleep: &gates[0],
            memory: Memory::default(),
        };
        let peer = &control.producer;
        for i in 1..=items {
            end.wait_until(|| peer.pos.load(Ordering::Acquire) >= i);
            // Relaxed: the Acquire load of `pos` that ended the wait orders
            // the producer's write of the slot before this read.
            assert_eq!(slot.load(Ordering::Relaxed), i * 10, "message {i}");
            end.advance(i, hold && i == 1);
        }
        producer.join().unwrap();
    });
}

#[test]
fn a_handoff_waiting_on_a_peer_elsewhere_never_loses_a_message_or_a_wakeup() {
    handoff(2, View::Elsewhere, false);
}

#[test]
fn a_handoff_waiting_on_a_peer_on_this_cpu_never_loses_a_message_or_a_wakeup() {
    handoff(2, View::Here, false);
}

#[test]
fn a_handoff_waiting_on_an_unseen_peer_never_loses_a_message_or_a_wakeup() {
    handoff(2, View::Unseen, false);
}

/// The same, each side's wait running its whole spin (or its yields) and
/// sleeping while the other side's move races that sleep.
#[test]
fn a_peer_elsewhere_moving_as_this_side_falls_asleep_always_wakes_it() {
    handoff(2, View::Elsewhere, true);
}

#[test]
fn a_peer_on_this_cpu_moving_as_this_side_falls_asleep_always_wakes_it() {
    handoff(2, View::Here, true);
}

#[test]
fn an_unseen_peer_moving_as_this_side_falls_asleep_always_wakes_it() {
    handoff(2, View::Unseen, true);
}
