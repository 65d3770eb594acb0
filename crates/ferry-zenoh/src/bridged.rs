//! One bridged pipe: a local ferry pipe end on this side, its twin on the
//! far bridge, and Zenoh between them.
//!
//! Two threads per pipe carry it:
//!
//! - the **pump** reads the local end and publishes each message, within
//!   the far side's credit ([`Gate`]); when the local end hangs up it
//!   publishes a finish and waits until the far side delivered it all;
//! - the **deliverer** takes what arrived ([`Inbox`]) and sends it on the
//!   local end (straight into a ferry loan, no copy of its own), waiting
//!   there as ferry waits when the local program reads slowly, and grants
//!   credit as it delivers.
//!
//! Zenoh's callbacks only record what arrived and wake a thread: they
//! never block. The far side's liveliness token going away (its bridge
//! died, or the link between the bridges did for longer than the lease)
//! ends the pipe: what arrived is delivered, then the local program sees
//! `Disconnected`, in both directions.

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zenoh::Wait;
use zenoh::bytes::ZBytes;
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::{Publisher, Subscriber};
use zenoh::qos::CongestionControl;
use zenoh::sample::{Sample, SampleKind};
use zenoh_buffers::{ZBuf, ZSliceBuffer};

use crate::Log;
use crate::credit::{End, Gate, Inbox, Next};
use crate::wire::{Credit, CreditRecord, Header, Keys, MAX_REASON, Open, Side, Want};

/// What a pipe needs from its bridge.
#[derive(Clone)]
pub(crate) struct Setup {
    pub session: zenoh::Session,
    pub prefix: String,
    pub id: String,
    pub me: Side,
    /// What this side grants the far side.
    pub mine: Open,
    pub log: Log,
}

/// The state both threads and the callbacks share.
struct Shared {
    setup: Setup,
    gate: Gate,
    inbox: Inbox,
    /// Dropped to wake the pump from its wait on the local end.
    wake: Mutex<Option<ferry::Sender>>,
    /// The local end's sending half, once started; taken (and so closed)
    /// when the deliverer ends. The deliverer holds the lock while it
    /// sends; a callback only tries it.
    local: Mutex<Option<ferry::Sender>>,
}

impl Shared {
    fn far_gone(&self) {
        self.inbox.end(End::FarGone);
        self.gate.end();
        self.wake_pump();
    }

    fn wake_pump(&self) {
        drop(self.wake.lock().unwrap_or_else(|e| e.into_inner()).take());
    }

    fn break_pipe(&self, reason: String) {
        self.inbox.end(End::Broken {
            reason,
            tell_far: true,
        });
        self.gate.end();
        self.wake_pump();
    }

    fn log(&self, what: &str) {
        (self.setup.log)(&format!("pipe {}: {what}", self.setup.id));
    }
}

/// The Zenoh side of a pipe: held by both threads, undeclared when the
/// last of them ends (the far side then sees this side's token go).
struct Wires {
    data: Publisher<'static>,
    /// Grants and stops for the far side's messages.
    credit: Publisher<'static>,
    /// This side's wants, on its own direction's credit key.
    want: Publisher<'static>,
    _subscribers: Vec<Subscriber<()>>,
    _alive: LivelinessToken,
}

/// A pipe whose Zenoh side is declared (so nothing the far side sends is
/// missed), waiting for the far side's [`Open`] to start.
pub(crate) struct Prepared {
    shared: Arc<Shared>,
    wires: Wires,
    wake: ferry::Receiver,
}

impl Prepared {
    /// Declares the pipe's keys: subscribers first, then this side's
    /// liveliness token.
    pub fn declare(setup: Setup) -> zenoh::Result<Prepared> {
        let keys = Keys::new(&setup.prefix, &setup.id);
        let (me, far) = (setup.me, setup.me.far());
        let (wake_tx, wake) = ferry::bytes::channel(1)?;
        let shared = Arc::new(Shared {
            gate: Gate::new(),
            inbox: Inbox::new(setup.mine.window, setup.mine.max_message),
            wake: Mutex::new(Some(wake_tx)),
            local: Mutex::new(None),
            setup,
        });
        let session = &shared.setup.session;
        let publisher = |key: String| {
            session
                .declare_publisher(key)
                .congestion_control(CongestionControl::Block)
                .wait()
        };
        let mut subscribers = Vec::new();
        let on = Arc::clone(&shared);
        subscribers.push(
            session
                .declare_subscriber(keys.data(far))
                .callback(move |sample: Sample| on_data(&on, &sample))
                .wait()?,
        );
        let on = Arc::clone(&shared);
        subscribers.push(
            session
                .declare_subscriber(keys.credit(me))
                .callback(move |sample: Sample| match record(&sample) {
                    Ok(CreditRecord::Credit(Credit::Grant(count))) => on.gate.grant(count),
                    Ok(CreditRecord::Credit(Credit::Stop)) => {
                        on.gate.end();
                        on.wake_pump();
                    }
                    // This side's own, delivered locally.
                    Ok(CreditRecord::Want(_)) => {}
                    Err(why) => on.break_pipe(why),
                })
                .wait()?,
        );
        let on = Arc::clone(&shared);
        subscribers.push(
            session
                .declare_subscriber(keys.credit(far))
                .callback(move |sample: Sample| match record(&sample) {
                    Ok(CreditRecord::Want(Want(_))) => on.inbox.want(),
                    // This side's own grants and stops, delivered locally.
                    Ok(CreditRecord::Credit(_)) => {}
                    Err(why) => on.break_pipe(why),
                })
                .wait()?,
        );
        let on = Arc::clone(&shared);
        subscribers.push(
            session
                .liveliness()
                .declare_subscriber(keys.alive(far))
                .history(true)
                .callback(move |sample: Sample| {
                    if sample.kind() == SampleKind::Delete {
                        on.log("the far side's token is gone (it ended the pipe, or died)");
                        on.far_gone();
                    }
                })
                .wait()?,
        );
        let wires = Wires {
            data: publisher(keys.data(me))?,
            credit: publisher(keys.credit(far))?,
            want: publisher(keys.credit(me))?,
            _subscribers: subscribers,
            _alive: session.liveliness().declare_token(keys.alive(me)).wait()?,
        };
        Ok(Prepared {
            shared,
            wires,
            wake,
        })
    }

    /// Whether the far side's token is there now (asked once, waiting up
    /// to `timeout`): a far side that died before this side subscribed
    /// would otherwise never be seen to go.
    pub fn far_is_alive(&self, timeout: std::time::Duration) -> bool {
        let keys = Keys::new(&self.shared.setup.prefix, &self.shared.setup.id);
        let replies = self
            .shared
            .setup
            .session
            .liveliness()
            .get(keys.alive(self.shared.setup.me.far()))
            .timeout(timeout)
            .wait();
        replies.is_ok_and(|replies| replies.recv().is_ok_and(|reply| reply.result().is_ok()))
    }

    /// Starts the pipe's two threads on the local end's halves with the
    /// far side's `far` terms: `rx`'s messages go out, what arrives goes
    /// into `tx`. Without `rx` this side sends nothing (it finishes at
    /// once: the far program reads `Disconnected`); without `tx` it takes
    /// nothing (it stops the far side at once; its terms said so, see
    /// [`Open::CLOSED`]). The local receiver takes bytes only already (see
    /// the crate's docs).
    pub fn start(
        self,
        tx: Option<ferry::Sender>,
        rx: Option<ferry::Receiver>,
        far: Open,
    ) -> std::io::Result<()> {
        let Prepared {
            shared,
            wires,
            wake,
        } = self;
        shared.gate.open(far.window);
        let wires = Arc::new(wires);
        *shared.local.lock().unwrap_or_else(|e| e.into_inner()) = tx;
        let name = format!("ferry-bridge {}", &shared.setup.id[..8]);
        let (s, w) = (Arc::clone(&shared), Arc::clone(&wires));
        thread::Builder::new()
            .name(format!("{name} pump"))
            .spawn(move || match rx {
                Some(rx) => pump(&s, &w, &rx, &wake, far.max_message),
                None => finish(&s, &w),
            })?;
        thread::Builder::new()
            .name(format!("{name} deliver"))
            .spawn(move || {
                deliver(&shared, &wires);
                // The local end sees `Disconnected` once it read the rest.
                drop(
                    shared
                        .local
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .take(),
                );
            })?;
        Ok(())
    }
}

/// A credit record, decoded and checked.
fn record(sample: &Sample) -> Result<CreditRecord, String> {
    CreditRecord::decode(&sample.payload().to_bytes())
        .map_err(|why| format!("the far bridge sent {why}"))
}

fn on_data(shared: &Shared, sample: &Sample) {
    let header = match sample.attachment() {
        Some(attachment) => Header::decode(&attachment.to_bytes()),
        None => {
            return shared.break_pipe("the far bridge sent a message without its header".into());
        }
    };
    match header {
        Ok(header) => shared
            .inbox
            .arrive(header, sample.payload().clone(), |payload| {
                try_deliver(shared, payload)
            }),
        Err(why) => shared.break_pipe(format!("the far bridge sent {why}")),
    }
}

/// Messages up to this size may be delivered from Zenoh's callback; larger
/// ones go through a loan on the delivering thread.
const FAST_MAX: usize = 64 << 10;

/// Delivers `payload` on the local end from a callback, if that needs no
/// wait: a small message, the local end free, its ring with room.
fn try_deliver(shared: &Shared, payload: &ZBytes) -> bool {
    if payload.len() > FAST_MAX {
        return false;
    }
    let Ok(local) = shared.local.try_lock() else {
        return false;
    };
    local
        .as_ref()
        .is_some_and(|tx| tx.try_send(&payload.to_bytes()).is_ok())
}

/// The local end's messages out, within the far side's credit.
fn pump(
    shared: &Shared,
    wires: &Wires,
    rx: &ferry::Receiver,
    wake: &ferry::Receiver,
    far_max: u64,
) {
    loop {
        // A zero timeout never waits: the wait is the poll below.
        let message = match rx.recv_shared_timeout(Duration::ZERO) {
            Ok(message) => message,
            Err(ferry::RecvTimeoutError::Timeout) => {
                // Wait for the local end, or for a wake: the far side
                // stopped, is gone, or broke the pipe.
                match ferry::Receiver::poll_ready_any(&[rx, wake], None) {
                    Ok(Some(1)) => return,
                    Ok(_) => continue,
                    Err(e) => {
                        shared.break_pipe(format!("waiting on the local end: {e}"));
                        return;
                    }
                }
            }
            Err(e) if e.is_disconnected() => {
                finish(shared, wires);
                return;
            }
            Err(e) => {
                shared.break_pipe(format!("the local end: {e}"));
                return;
            }
        };
        let len = message.len() as u64;
        if len > far_max {
            shared.break_pipe(format!(
                "a message of {len} bytes, over the far bridge's largest ({far_max})"
            ));
            return;
        }
        let want = |sent| {
            let _ = wires
                .want
                .put(CreditRecord::Want(Want(sent)).encode())
                .wait();
        };
        let Ok(seq) = shared.gate.acquire(len, want) else {
            return;
        };
        let put = wires
            .data
            .put(ZBytes::from(ZBuf::from(View(message))))
            .attachment(Header::Data { seq }.encode())
            .wait();
        if let Err(e) = put {
            shared.break_pipe(format!("publishing a message: {e}"));
            return;
        }
    }
}

/// A received message as Zenoh's buffer: a large one is read where it
/// lies, in its ferry block, until Zenoh is done with it (no copy in the
/// bridge).
#[derive(Debug)]
struct View(ferry::SharedBytes);

impl ZSliceBuffer for View {
    fn as_slice(&self) -> &[u8] {
        &self.0
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
}

/// The local end hung up: the far side is told how many messages there
/// were, and this side waits until it delivered them (or is gone).
fn finish(shared: &Shared, wires: &Wires) {
    let count = shared.gate.sent().messages;
    let fin = wires
        .data
        .put(ZBytes::new())
        .attachment(Header::Fin { count }.encode())
        .wait();
    if let Err(e) = fin {
        shared.break_pipe(format!("publishing the finish: {e}"));
        return;
    }
    shared.gate.wait_ended();
}

/// What arrived, into the local end.
fn deliver(shared: &Shared, wires: &Wires) {
    let credit = |credit: Credit| {
        let _ = wires
            .credit
            .put(CreditRecord::Credit(credit).encode())
            .wait();
    };
    let stop = || credit(Credit::Stop);
    if shared
        .local
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_none()
    {
        // Nothing to deliver into (an exported sending half's absence):
        // the far side stops sending at once.
        shared.inbox.end(End::LocalGone);
        return stop();
    }
    loop {
        match shared.inbox.next() {
            Next::Message(message) => {
                let len = message.len();
                let sent = match &*shared.local.lock().unwrap_or_else(|e| e.into_inner()) {
                    Some(tx) => send_local(tx, &message),
                    None => Err(ferry::SendError::Disconnected),
                };
                if let Err(e) = sent {
                    if e.is_disconnected() {
                        shared.inbox.end(End::LocalGone);
                        stop();
                    } else {
                        shared.break_pipe(format!("delivering a message of {len} bytes: {e}"));
                    }
                    continue;
                }
                if let Some(grant) = shared.inbox.delivered(len as u64) {
                    credit(Credit::Grant(grant));
                }
            }
            Next::Grant(grant) => credit(Credit::Grant(grant)),
            Next::Fin => {
                // Everything was delivered: the far pump may end, and the
                // local end sees `Disconnected` once it read it all.
                stop();
                return;
            }
            Next::End(End::FarGone | End::LocalGone) => return,
            Next::End(End::Broken { reason, tell_far }) => {
                shared.log(&format!("broken: {reason}"));
                if tell_far {
                    let mut why = reason.into_bytes();
                    why.truncate(MAX_REASON);
                    let _ = wires
                        .data
                        .put(ZBytes::from(why))
                        .attachment(Header::Break.encode())
                        .wait();
                }
                shared.gate.end();
                shared.wake_pump();
                return;
            }
        }
    }
}

/// Sends `message` on the local end, written straight into a loan from
/// Zenoh's slices.
fn send_local(tx: &ferry::Sender, message: &ZBytes) -> Result<(), ferry::SendError> {
    let mut loan = tx.loan(message.len())?;
    let mut at = 0;
    for slice in message.slices() {
        loan[at..at + slice.len()].copy_from_slice(slice);
        at += slice.len();
    }
    loan.send()
}
