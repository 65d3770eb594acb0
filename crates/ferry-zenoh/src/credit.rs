//! End-to-end credit, one direction of one bridged pipe at a time: the
//! receiving bridge grants a window (messages and bytes) and the sending
//! bridge sends no more than granted. So the receiving bridge queues at
//! most a window, whatever Zenoh does, and a slow local consumer slows the
//! far local sender through ferry's own backpressure: the receiving bridge
//! stops granting, the sending bridge stops reading its ring, the ring
//! fills, and the far program's `send` waits.
//!
//! Grants are cumulative (`delivered + window`), so a late or repeated one
//! changes nothing. A message larger than what is left of the window goes
//! once everything sent before it was delivered; a sender that waits asks
//! for a grant ([`Want`](crate::wire::Want)), which the receiver gives once
//! its queue is empty.
//!
//! [`Gate`] is the sender's side, [`Inbox`] the receiver's. Both are
//! touched from Zenoh's callbacks, which must never block: those calls
//! only take a short lock and notify.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};

use zenoh::bytes::ZBytes;

use crate::wire::{Count, Header, MAX_REASON, Window};

/// Whether a message of `len` bytes may go, `sent` having gone before it,
/// under the cumulative grant `granted` of a window `window`.
pub fn allows(granted: Count, sent: Count, window: Window, len: u64) -> bool {
    let all_delivered = Count {
        messages: granted.messages.saturating_sub(window.messages),
        bytes: granted.bytes.saturating_sub(window.bytes),
    };
    sent.messages < granted.messages
        && (sent.bytes.saturating_add(len) <= granted.bytes || sent == all_delivered)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// The sending bridge's side of one direction.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    moved: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// The far side's window, once its terms are known.
    window: Option<Window>,
    granted: Count,
    sent: Count,
    ended: bool,
}

/// Why a [`Gate`] lets nothing more through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended;

impl Gate {
    /// A gate that lets nothing through until [`Gate::open`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The far side's window: its first grant.
    pub fn open(&self, window: Window) {
        lock(&self.state).window = Some(window);
        self.grant(Count {
            messages: window.messages,
            bytes: window.bytes,
        });
    }

    /// A grant from the far side (never blocks).
    pub fn grant(&self, granted: Count) {
        let mut state = lock(&self.state);
        state.granted.messages = state.granted.messages.max(granted.messages);
        state.granted.bytes = state.granted.bytes.max(granted.bytes);
        drop(state);
        self.moved.notify_all();
    }

    /// Lets nothing more through, and wakes a waiter (never blocks).
    pub fn end(&self) {
        lock(&self.state).ended = true;
        self.moved.notify_all();
    }

    /// Waits until a message of `len` bytes may go, and counts it as sent:
    /// its sequence number. `want` is called (without the lock) each time
    /// the gate has to wait, with what was sent so far.
    pub fn acquire(&self, len: u64, mut want: impl FnMut(Count)) -> Result<u64, Ended> {
        let mut state = lock(&self.state);
        let mut asked = false;
        loop {
            if state.ended {
                return Err(Ended);
            }
            let Some(window) = state.window else {
                state = self.moved.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            if allows(state.granted, state.sent, window, len) {
                let seq = state.sent.messages;
                state.sent = state.sent.plus(len);
                return Ok(seq);
            }
            if !asked {
                asked = true;
                let sent = state.sent;
                drop(state);
                want(sent);
                state = lock(&self.state);
                continue;
            }
            state = self.moved.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits until the gate has ended (the far side stopped or is gone).
    pub fn wait_ended(&self) {
        let mut state = lock(&self.state);
        while !state.ended {
            state = self.moved.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// What was sent.
    pub fn sent(&self) -> Count {
        lock(&self.state).sent
    }
}

/// The receiving bridge's side of one direction: the messages that
/// arrived, not yet delivered to the local end, at most a window of them.
#[derive(Debug)]
pub struct Inbox {
    window: Window,
    max_message: u64,
    state: Mutex<InboxState>,
    moved: Condvar,
}

#[derive(Debug)]
struct InboxState {
    queue: VecDeque<ZBytes>,
    received: Count,
    delivered: Count,
    granted: Count,
    fin: Option<u64>,
    want: bool,
    end: Option<End>,
    /// A message is being delivered (by the delivering thread, or by a
    /// callback's fast path): nothing else is, so order holds.
    delivering: bool,
    /// A grant due after a fast-path delivery, for the delivering thread
    /// to publish (a callback publishes nothing).
    grant_due: Option<Count>,
}

/// Why an inbox takes nothing more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// The far side (or its bridge) is gone; what arrived is still
    /// delivered.
    FarGone,
    /// The pipe is broken: `reason`; `tell_far` when the far side does not
    /// know yet.
    Broken {
        /// Why.
        reason: String,
        /// Whether the far side does not know yet.
        tell_far: bool,
    },
    /// This side's local end is gone: nothing more can be delivered.
    LocalGone,
}

/// What the delivering thread does next.
#[derive(Debug)]
pub enum Next {
    /// Deliver this message.
    Message(ZBytes),
    /// Publish this grant (the sender waits and the queue is empty).
    Grant(Count),
    /// Every message was delivered and the sender finished.
    Fin,
    /// Stop, for this reason.
    End(End),
}

impl Inbox {
    /// An empty inbox granting `window`, taking messages of up to
    /// `max_message` bytes.
    pub fn new(window: Window, max_message: u64) -> Self {
        Self {
            window,
            max_message,
            state: Mutex::new(InboxState {
                queue: VecDeque::new(),
                received: Count::default(),
                delivered: Count::default(),
                granted: Count {
                    messages: window.messages,
                    bytes: window.bytes,
                },
                fin: None,
                want: false,
                end: None,
                delivering: false,
                grant_due: None,
            }),
            moved: Condvar::new(),
        }
    }

    /// A record that arrived on the data key (never blocks). A record that
    /// breaks the rules (out of order, past its credit, too large, a
    /// finish that does not match) breaks the pipe.
    ///
    /// `fast` may deliver a message at once, without waiting (a `try_send`
    /// on the local end): it is offered one when nothing is queued or
    /// being delivered, so order holds; when it says no, the message is
    /// queued for the delivering thread. This saves that thread's wakeup
    /// whenever the local end keeps up.
    pub fn arrive(&self, header: Header, payload: ZBytes, fast: impl FnOnce(&ZBytes) -> bool) {
        let mut state = lock(&self.state);
        if matches!(state.end, Some(End::Broken { .. } | End::LocalGone)) {
            // Nothing more is delivered: nothing more is kept (a far side
            // that goes on sending costs no memory).
            return;
        }
        if let Some(reason) = self.check(&mut state, header, &payload) {
            // Over `FarGone` too: what is queued is not delivered as if
            // nothing had been lost.
            state.end = Some(End::Broken {
                reason,
                tell_far: true,
            });
        } else if let Header::Data { .. } = header {
            let len = payload.len() as u64;
            state.received = state.received.plus(len);
            if state.queue.is_empty() && !state.delivering {
                state.delivering = true;
                drop(state);
                let delivered = fast(&payload);
                state = lock(&self.state);
                state.delivering = false;
                if delivered {
                    state.grant_due = self.count_delivered(&mut state, len).or(state.grant_due);
                    // The delivering thread may wait for this delivery to
                    // end, with something else to do now (a message another
                    // callback queued meanwhile, a finish, an end).
                    let wake = state.grant_due.is_some()
                        || !state.queue.is_empty()
                        || state.fin.is_some()
                        || state.end.is_some();
                    drop(state);
                    if wake {
                        self.moved.notify_all();
                    }
                    return;
                }
            }
            state.queue.push_back(payload);
        }
        drop(state);
        self.moved.notify_all();
    }

    /// Why `header` breaks the rules, if it does; a finish or a break is
    /// recorded here. The rules hold after the far side is gone too (what
    /// arrived then is still delivered, so still bounded by the credit).
    fn check(&self, state: &mut InboxState, header: Header, payload: &ZBytes) -> Option<String> {
        if state.fin.is_some() {
            return Some("the far bridge sent after it finished".into());
        }
        match header {
            Header::Data { seq } => {
                let len = payload.len() as u64;
                if seq != state.received.messages {
                    Some(format!(
                        "message {seq} arrived where {} was next: messages were lost between the bridges",
                        state.received.messages
                    ))
                } else if len > self.max_message {
                    Some(format!(
                        "a message of {len} bytes, over this bridge's largest ({})",
                        self.max_message
                    ))
                } else if !allows(state.granted, state.received, self.window, len) {
                    Some("the far bridge sent past the credit it was given".to_owned())
                } else {
                    None
                }
            }
            Header::Fin { count } if count == state.received.messages => {
                state.fin = Some(count);
                None
            }
            Header::Fin { count } => Some(format!(
                "the far bridge finished after {count} messages, but {} arrived: messages were lost between the bridges",
                state.received.messages
            )),
            Header::Break => {
                // At most `MAX_REASON` bytes of it: the far side chooses
                // its length, and it goes into a log.
                let bytes = payload.to_bytes();
                let reason = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_REASON)]);
                state.end = Some(End::Broken {
                    reason: format!("the far bridge broke the pipe: {reason}"),
                    tell_far: false,
                });
                None
            }
        }
    }

    /// The sender waits for credit (never blocks).
    ///
    /// What it sent is not checked against what arrived: data still on the
    /// way is delivered first, and the grant follows once the queue is dry.
    pub fn want(&self) {
        let mut state = lock(&self.state);
        state.want = true;
        drop(state);
        self.moved.notify_all();
    }

    /// Ends the inbox (never blocks). An end already set stays, except
    /// [`End::FarGone`], which a broken pipe or a gone local end replaces:
    /// what arrived is then no longer delivered, and the delivering thread
    /// is told at once (it may have failed mid-delivery).
    pub fn end(&self, end: End) {
        let mut state = lock(&self.state);
        let replace = matches!(
            (&state.end, &end),
            (None, _) | (Some(End::FarGone), End::Broken { .. } | End::LocalGone)
        );
        if replace {
            state.end = Some(end);
        }
        drop(state);
        self.moved.notify_all();
    }

    /// What to do next, waiting for it. After [`End::FarGone`], the
    /// messages that arrived come first.
    pub fn next(&self) -> Next {
        let mut state = lock(&self.state);
        loop {
            match &state.end {
                Some(End::FarGone) | None => {}
                Some(end) => return Next::End(end.clone()),
            }
            if let Some(grant) = state.grant_due.take() {
                return Next::Grant(grant);
            }
            if state.delivering {
                // A callback delivers one now: the next waits for it.
                state = self.moved.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            if let Some(message) = state.queue.pop_front() {
                state.delivering = true;
                return Next::Message(message);
            }
            if state.fin.is_some() {
                return Next::Fin;
            }
            if let Some(end) = &state.end {
                return Next::End(end.clone());
            }
            if state.want {
                state.want = false;
                if let Some(grant) = Self::regrant(&mut state, self.window) {
                    return Next::Grant(grant);
                }
            }
            state = self.moved.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Counts a message of `len` bytes as delivered to the local end: the
    /// grant to publish, if one is due (half the window used since the
    /// last, or the sender waits and the queue is empty).
    pub fn delivered(&self, len: u64) -> Option<Count> {
        let mut state = lock(&self.state);
        state.delivering = false;
        let grant = self.count_delivered(&mut state, len);
        drop(state);
        // A callback may wait to deliver the next.
        self.moved.notify_all();
        grant
    }

    fn count_delivered(&self, state: &mut InboxState, len: u64) -> Option<Count> {
        state.delivered = state.delivered.plus(len);
        let base = Count {
            messages: state.granted.messages - self.window.messages,
            bytes: state.granted.bytes - self.window.bytes,
        };
        let used_messages = state.delivered.messages - base.messages;
        let used_bytes = state.delivered.bytes - base.bytes;
        let due = used_messages * 2 >= self.window.messages
            || used_bytes * 2 >= self.window.bytes
            || (state.want && state.queue.is_empty());
        if !due {
            return None;
        }
        state.want = false;
        Self::regrant(state, self.window)
    }

    /// A new grant from what was delivered, if it moves.
    fn regrant(state: &mut InboxState, window: Window) -> Option<Count> {
        let granted = Count {
            messages: state.delivered.messages + window.messages,
            bytes: state.delivered.bytes + window.bytes,
        };
        (granted != state.granted).then(|| {
            state.granted = granted;
            granted
        })
    }

    /// Messages and bytes queued now (for tests and statistics).
    pub fn queued(&self) -> (usize, u64) {
        let state = lock(&self.state);
        let bytes = state.queue.iter().map(|m| m.len() as u64).sum();
        (state.queue.len(), bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Window = Window {
        messages: 4,
        bytes: 100,
    };

    fn data(inbox: &Inbox, seq: u64, len: usize) {
        inbox.arrive(Header::Data { seq }, ZBytes::from(vec![0u8; len]), |_| {
            false
        });
    }

    #[test]
    fn a_sender_never_passes_its_window() {
        let gate = Gate::new();
        gate.open(WINDOW);
        for seq in 0..4 {
            assert_eq!(gate.acquire(10, |_| panic!("no wait")), Ok(seq));
        }
        // A fifth waits; once granted more, it goes.
        assert!(!allows(
            Count {
                messages: 4,
                bytes: 100
            },
            gate.sent(),
            WINDOW,
            10
        ));
        gate.grant(Count {
            messages: 6,
            bytes: 120,
        });
        assert_eq!(gate.acquire(10, |_| panic!("no wait")), Ok(4));
        // An older grant changes nothing.
        gate.grant(Count {
            messages: 1,
            bytes: 1,
        });
        assert_eq!(gate.acquire(10, |_| panic!("no wait")), Ok(5));
    }

    #[test]
    fn a_message_larger_than_the_window_goes_once_all_before_it_was_delivered() {
        let window = Window {
            messages: 4,
            bytes: 100,
        };
        // Nothing sent yet: anything goes.
        assert!(allows(
            Count {
                messages: 4,
                bytes: 100
            },
            Count::default(),
            window,
            1000
        ));
        // Something in flight: it waits.
        let sent = Count {
            messages: 1,
            bytes: 10,
        };
        assert!(!allows(
            Count {
                messages: 4,
                bytes: 100
            },
            sent,
            window,
            1000
        ));
        // Delivered and granted again: it goes.
        assert!(allows(
            Count {
                messages: 5,
                bytes: 110
            },
            sent,
            window,
            1000
        ));
    }

    #[test]
    fn the_inbox_grants_at_half_the_window_and_when_the_sender_waits() {
        let inbox = Inbox::new(WINDOW, 1000);
        data(&inbox, 0, 10);
        data(&inbox, 1, 10);
        assert!(matches!(inbox.next(), Next::Message(_)));
        assert_eq!(inbox.delivered(10), None);
        assert!(matches!(inbox.next(), Next::Message(_)));
        assert_eq!(
            inbox.delivered(10),
            Some(Count {
                messages: 6,
                bytes: 120
            })
        );
        // The sender waits with one message delivered since the grant.
        data(&inbox, 2, 5);
        inbox.want();
        assert!(matches!(inbox.next(), Next::Message(_)));
        assert_eq!(
            inbox.delivered(5),
            Some(Count {
                messages: 7,
                bytes: 125
            })
        );
    }

    #[test]
    fn a_gap_a_credit_overrun_and_an_early_finish_each_break_the_pipe() {
        let gap = Inbox::new(WINDOW, 1000);
        data(&gap, 1, 1);
        assert!(matches!(
            gap.next(),
            Next::End(End::Broken { tell_far: true, .. })
        ));

        let overrun = Inbox::new(WINDOW, 1000);
        for seq in 0..5 {
            data(&overrun, seq, 1);
        }
        let mut delivered = 0;
        let end = loop {
            match overrun.next() {
                Next::Message(_) => {
                    delivered += 1;
                    overrun.delivered(1);
                }
                other => break other,
            }
        };
        // The fifth message broke the pipe: the four before it are not
        // delivered after the break (a broken pipe stops).
        assert!(delivered <= 4);
        assert!(matches!(end, Next::End(End::Broken { .. })), "{end:?}");

        let early = Inbox::new(WINDOW, 1000);
        data(&early, 0, 1);
        early.arrive(Header::Fin { count: 2 }, ZBytes::new(), |_| false);
        assert!(matches!(early.next(), Next::End(End::Broken { .. })));

        let large = Inbox::new(WINDOW, 10);
        data(&large, 0, 11);
        assert!(matches!(large.next(), Next::End(End::Broken { .. })));
    }

    #[test]
    fn after_the_far_side_is_gone_what_arrived_is_delivered_first() {
        let inbox = Inbox::new(WINDOW, 1000);
        data(&inbox, 0, 1);
        data(&inbox, 1, 1);
        inbox.end(End::FarGone);
        for _ in 0..2 {
            assert!(matches!(inbox.next(), Next::Message(_)));
            inbox.delivered(1);
        }
        assert!(matches!(inbox.next(), Next::End(End::FarGone)));
    }

    #[test]
    fn a_finish_ends_the_direction_once_delivered() {
        let inbox = Inbox::new(WINDOW, 1000);
        data(&inbox, 0, 1);
        inbox.arrive(Header::Fin { count: 1 }, ZBytes::new(), |_| false);
        assert!(matches!(inbox.next(), Next::Message(_)));
        inbox.delivered(1);
        assert!(matches!(inbox.next(), Next::Fin));
    }

    #[test]
    fn the_fast_path_delivers_only_when_nothing_is_ahead_of_it() {
        let inbox = Inbox::new(WINDOW, 1000);
        let offered = std::cell::Cell::new(0);
        // Nothing ahead: delivered by the callback, nothing queued.
        inbox.arrive(Header::Data { seq: 0 }, ZBytes::from(vec![1u8]), |_| {
            offered.set(offered.get() + 1);
            true
        });
        assert_eq!(inbox.queued(), (0, 0));
        // Refused (the local ring is full): queued, in order.
        inbox.arrive(Header::Data { seq: 1 }, ZBytes::from(vec![2u8]), |_| false);
        // Something queued: not offered, queued behind it.
        inbox.arrive(Header::Data { seq: 2 }, ZBytes::from(vec![3u8]), |_| {
            panic!("offered past a queued message")
        });
        assert_eq!(offered.get(), 1);
        let Next::Message(first) = inbox.next() else {
            panic!()
        };
        assert_eq!(&*first.to_bytes(), [2]);
        // Being delivered by the thread: a new one is not offered either.
        inbox.arrive(Header::Data { seq: 3 }, ZBytes::from(vec![4u8]), |_| {
            panic!("offered while another was being delivered")
        });
        inbox.delivered(1);
        let Next::Message(second) = inbox.next() else {
            panic!()
        };
        assert_eq!(&*second.to_bytes(), [3]);
        inbox.delivered(1);
        let Next::Message(third) = inbox.next() else {
            panic!()
        };
        assert_eq!(&*third.to_bytes(), [4]);
        inbox.delivered(1);
        assert_eq!(inbox.queued(), (0, 0));
    }

    #[test]
    fn a_grant_due_after_a_fast_delivery_goes_to_the_thread() {
        let inbox = Inbox::new(WINDOW, 1000);
        inbox.arrive(Header::Data { seq: 0 }, ZBytes::from(vec![1u8]), |_| true);
        // Two of a window of four delivered: half, so a grant is due.
        inbox.arrive(Header::Data { seq: 1 }, ZBytes::from(vec![1u8]), |_| true);
        match inbox.next() {
            Next::Grant(grant) => assert_eq!(
                grant,
                Count {
                    messages: 6,
                    bytes: 102
                }
            ),
            other => panic!("{other:?}"),
        }
    }
}

/// A far bridge that sends whatever it likes, in any order, against an
/// inbox whose local end reads slowly or not at all: the inbox never
/// holds more than its window (or one message alone, up to its largest),
/// takes nothing once it ended, and breaks the pipe rather than skip.
#[cfg(test)]
mod hostile {
    use proptest::prelude::*;

    use super::*;

    const WINDOW: Window = Window {
        messages: 8,
        bytes: 1000,
    };
    const MAX_MESSAGE: u64 = 3000;

    #[derive(Debug, Clone)]
    enum Record {
        /// The next message in order, of this length; whether the local
        /// end takes it at once if offered (the callback's fast path).
        Next(usize, bool),
        /// A message numbered as the far side likes.
        Numbered(u64, usize),
        Fin(u64),
        FinNow,
        Break,
        Want,
        /// The local end reads this many messages.
        Read(usize),
        /// A delivery fails: the local end is gone.
        ReadFails,
        FarGone,
        LocalGone,
    }

    fn record() -> impl Strategy<Value = Record> {
        prop_oneof![
            8 => (0usize..1200, any::<bool>()).prop_map(|(l, f)| Record::Next(l, f)),
            1 => (0usize..4000, any::<bool>()).prop_map(|(l, f)| Record::Next(l, f)),
            1 => (any::<u64>(), 0usize..200).prop_map(|(s, l)| Record::Numbered(s, l)),
            1 => any::<u64>().prop_map(Record::Fin),
            1 => Just(Record::FinNow),
            1 => Just(Record::Break),
            2 => Just(Record::Want),
            4 => (0usize..6).prop_map(Record::Read),
            1 => Just(Record::ReadFails),
            1 => Just(Record::FarGone),
            1 => Just(Record::LocalGone),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_inbox_stays_bounded_and_in_order(records in proptest::collection::vec(record(), 1..200)) {
            let inbox = Inbox::new(WINDOW, MAX_MESSAGE);
            // What the local end read, by sequence: each message's first
            // byte is its number (mod 256), so a skip shows.
            let mut read = 0u64;
            for record in records {
                let before = inbox.queued();
                let ended = lock(&inbox.state).end.clone();
                let next = lock(&inbox.state).received.messages;
                let payload = |len: usize| {
                    let mut bytes = vec![0u8; len];
                    if let Some(first) = bytes.first_mut() {
                        *first = next as u8;
                    }
                    ZBytes::from(bytes)
                };
                match record {
                    Record::Next(len, takes) => {
                        let mut order = Ok(());
                        inbox.arrive(Header::Data { seq: next }, payload(len), |message| {
                            if takes {
                                let bytes = message.to_bytes();
                                if bytes.first().is_some_and(|&first| first != read as u8) {
                                    order = Err(format!("delivered {} where {read} was next", bytes[0]));
                                }
                                read += 1;
                            }
                            takes
                        });
                        prop_assert_eq!(order, Ok(()));
                    }
                    Record::Numbered(seq, len) => inbox.arrive(Header::Data { seq }, payload(len), |_| false),
                    Record::Fin(count) => inbox.arrive(Header::Fin { count }, ZBytes::new(), |_| false),
                    Record::FinNow => inbox.arrive(Header::Fin { count: next }, ZBytes::new(), |_| false),
                    Record::Break => inbox.arrive(Header::Break, ZBytes::from(vec![b'x'; 2000]), |_| false),
                    Record::Want => inbox.want(),
                    Record::FarGone => inbox.end(End::FarGone),
                    Record::LocalGone => inbox.end(End::LocalGone),
                    Record::Read(count) => {
                        for _ in 0..count {
                            // `next` waits only when there is nothing to
                            // do: ask only when something is queued.
                            if inbox.queued().0 == 0 {
                                break;
                            }
                            match inbox.next() {
                                Next::Message(message) => {
                                    let bytes = message.to_bytes();
                                    if let Some(&first) = bytes.first() {
                                        prop_assert_eq!(first, read as u8, "delivered out of order");
                                    }
                                    read += 1;
                                    inbox.delivered(message.len() as u64);
                                }
                                Next::End(_) => break,
                                // Due after a fast delivery: published, then on.
                                Next::Grant(_) => {}
                                Next::Fin => prop_assert!(false, "a finish with messages queued"),
                            }
                        }
                    }
                    Record::ReadFails => {
                        if inbox.queued().0 > 0 && let Next::Message(_) = inbox.next() {
                            // As the delivering thread does; then it asks
                            // again, and must be told to stop, not wait.
                            inbox.end(End::LocalGone);
                            let end = lock(&inbox.state).end.clone();
                            prop_assert!(
                                matches!(end, Some(End::LocalGone | End::Broken { .. })),
                                "after a failed delivery: {:?}", end
                            );
                            prop_assert!(matches!(inbox.next(), Next::End(_)));
                        }
                    }
                }
                let (messages, bytes) = inbox.queued();
                prop_assert!(messages as u64 <= WINDOW.messages, "{} messages queued", messages);
                prop_assert!(
                    bytes <= WINDOW.bytes.max(MAX_MESSAGE),
                    "{} bytes queued", bytes
                );
                if matches!(ended, Some(End::Broken { .. } | End::LocalGone)) {
                    prop_assert!(messages <= before.0, "queued after the end");
                }
                if let Some(End::Broken { reason, .. }) = &lock(&inbox.state).end {
                    // Each byte that is not UTF-8 becomes U+FFFD, three bytes.
                    prop_assert!(reason.len() <= 3 * MAX_REASON + 64, "a reason of {} bytes", reason.len());
                }
                if let Some(End::Broken { .. }) = ended {
                    prop_assert!(
                        matches!(lock(&inbox.state).end, Some(End::Broken { .. })),
                        "a broken pipe mended"
                    );
                }
            }
        }
    }
}
