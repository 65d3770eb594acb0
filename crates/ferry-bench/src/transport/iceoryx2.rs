//! iceoryx2, the zero-copy shared-memory middleware: a publish-subscribe
//! service of `[u8]` slices each way, in an iceoryx2 domain of the row's own
//! ([`domain`]), and for `iceoryx2-event` an event service to sleep on
//! (`iceoryx2-spin` busy-polls `Subscriber::receive`). The payload is copied
//! in and out, as every transport here does.
//!
//! Settings: no history (the child says hello once its ports exist), one
//! sample loaned or borrowed at a time, [`BUFFER`] samples in flight, safe
//! overflow off with the publisher retrying until delivered, so a full
//! buffer holds the sender back as on every other transport (iceoryx2's
//! default overwrites the oldest sample). A `u64` user header numbers the
//! messages, so a lost one is an error, and marks the close. A spinner
//! yields between polls when both processes are pinned to one and the same
//! CPU (as ferry's spinner does) and once a wait has lasted [`SPIN_ALONE`].
//! Both nodes leave SIGINT and SIGTERM alone (iceoryx2 would swallow them).

mod domain;

use std::fs;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use ::iceoryx2::port::listener::Listener;
use ::iceoryx2::port::notifier::Notifier;
use ::iceoryx2::port::publisher::Publisher;
use ::iceoryx2::port::subscriber::Subscriber;
use ::iceoryx2::port::{BackpressureAction, BackpressureInfo};
use ::iceoryx2::prelude::*;
use ::iceoryx2::service::port_factory::{event, publish_subscribe};

use super::{ChildGuard, Connection, Endpoint, Transport};
use crate::error::{Context, Error};
use domain::Domain;

/// The environment variable naming the row's domain to the child.
const ENV_DOMAIN: &str = "FERRY_BENCH_ICEORYX2_DOMAIN";
/// The environment variable giving the child the parent's pid and CPUs.
const ENV_PARENT: &str = "FERRY_BENCH_ICEORYX2_PARENT";
/// The largest payload, the services' `initial_max_slice_len`.
const MAX_PAYLOAD: usize = 1 << 20;
/// Samples a subscriber holds before the publisher waits.
const BUFFER: usize = 8;
/// The user header of the message that closes a direction.
const CLOSE: u64 = u64::MAX;
/// How often a waiting side asks whether the peer process still runs.
const LIVENESS: Duration = Duration::from_millis(50);
/// How long a close waits for room in the peer's buffer: a peer that is
/// alive but stuck must not hold up the row's end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the child has to open its ports and say hello.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Polls between clock reads while spinning.
const POLLS_PER_CLOCK_READ: u32 = 256;
/// How long a spinner polls before it yields between polls: about one
/// cross-CPU wake-up on this machine class, as ferry's adaptive spin.
const SPIN_ALONE: Duration = Duration::from_micros(50);
/// The services from the parent to the child and back.
const TO_CHILD: &str = "ferry-bench/to-child";
const TO_PARENT: &str = "ferry-bench/to-parent";

type Service = ipc::Service;
type PubSub = publish_subscribe::PortFactory<Service, [u8], u64>;

/// iceoryx2 with one way of waiting on both ends.
#[derive(Debug)]
pub struct Iceoryx2 {
    name: &'static str,
    event: bool,
}

impl Iceoryx2 {
    /// Sleeps on an event listener; the publisher notifies after sending.
    pub const EVENT: Self = Self {
        name: "iceoryx2-event",
        event: true,
    };
    /// Busy-polls the subscriber.
    pub const SPIN: Self = Self {
        name: "iceoryx2-spin",
        event: false,
    };
}

impl Transport for Iceoryx2 {
    fn name(&self) -> &'static str {
        self.name
    }

    fn wait(&self) -> &'static str {
        if self.event { "sleep" } else { "spin" }
    }

    fn spawn(&self, mut command: Command) -> Result<Connection, Error> {
        let mut link = Link::new(Domain::create(), self.event, Role::Parent)?;
        let cpus = allowed_cpus()?;
        command
            .env(ENV_DOMAIN, link.domain.tag())
            .env(ENV_PARENT, format!("{} {cpus}", std::process::id()));
        let child = command.spawn().context("spawning the child")?;
        let mut child = ChildGuard::new(child);
        let pid = child.child_mut().id();
        link.set_peer(Peer::Child(pid));
        link.domain.set_child(pid);
        let hello = link
            .receive(Some(Instant::now() + CONNECT_TIMEOUT))
            .context("waiting for the child's hello")?
            .ok_or_else(|| Error::new("the child closed before saying hello"))?;
        let child_cpus = String::from_utf8_lossy(hello).into_owned();
        link.yield_polls = !self.event && one_shared_cpu(&cpus, &child_cpus);
        Ok(Connection {
            child,
            endpoint: Box::new(link),
        })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        let tag = super::from_parent(ENV_DOMAIN)?;
        let parent = super::from_parent(ENV_PARENT)?;
        let (pid, parent_cpus) = parent
            .split_once(' ')
            .and_then(|(pid, cpus)| Some((pid.parse().ok()?, cpus)))
            .ok_or_else(|| Error::new(format!("{ENV_PARENT} is malformed: {parent:?}")))?;
        let mut link = Link::new(Domain::join(tag), self.event, Role::Child)?;
        link.set_peer(Peer::Parent(pid));
        let cpus = allowed_cpus()?;
        link.yield_polls = !self.event && one_shared_cpu(&cpus, parent_cpus);
        link.prepare(cpus.len())?.copy_from_slice(cpus.as_bytes());
        link.send().context("saying hello to the parent")?;
        Ok(Box::new(link))
    }
}

/// The process at the other end, looked at while waiting.
#[derive(Debug, Clone, Copy)]
enum Peer {
    /// The child, by pid. Unreaped until the parent is done with the
    /// endpoint, so a dead child stays visible as a zombie.
    Child(u32),
    /// The parent, by pid: gone once this process has another parent.
    Parent(u32),
}

impl Peer {
    /// Why the peer is gone, if it is.
    fn gone(self) -> Option<String> {
        match self {
            Self::Child(pid) => {
                let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                // The state follows the command name, which is in parentheses.
                let state = stat.rsplit_once(") ").and_then(|(_, s)| s.chars().next());
                match state {
                    Some('Z' | 'X') | None => Some(format!("the child (pid {pid}) exited")),
                    Some(_) => None,
                }
            }
            Self::Parent(pid) => (std::os::unix::process::parent_id() != pid)
                .then(|| format!("the parent (pid {pid}) exited")),
        }
    }
}

/// One side's node, services and ports, and the message buffers.
struct Link {
    // Fields drop in order: ports before their services, services before
    // the node.
    publisher: Publisher<Service, [u8], u64>,
    subscriber: Subscriber<Service, [u8], u64>,
    /// For `iceoryx2-event`: the notifier to the peer and the listener for
    /// its notifications.
    event: Option<(Notifier<Service>, Listener<Service>)>,
    _services: Vec<Services>,
    _node: Node<Service>,
    /// Removed last, once the ports and node are gone (and in the parent,
    /// the child too).
    domain: Domain,
    /// What the publisher's backpressure handler needs to know.
    shared: Arc<Shared>,
    /// For spinning: yield between polls, as the peer shares this CPU.
    yield_polls: bool,
    out: Vec<u8>,
    inbox: Vec<u8>,
    sent: u64,
    received: u64,
    /// This side sent its close.
    closed: bool,
    /// The peer sent its close.
    peer_closed: bool,
}

/// A side's state that its publisher's backpressure handler reads.
#[derive(Default)]
struct Shared {
    /// Set once the peer is known: in the parent, once the child started.
    peer: OnceLock<Peer>,
    /// The close is being sent.
    closing: AtomicBool,
}

/// The services of one direction; kept for as long as their ports.
struct Services {
    data: PubSub,
    event: Option<event::PortFactory<Service>>,
}

/// Which side this is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Parent,
    Child,
}

impl Link {
    fn new(domain: Domain, event: bool, role: Role) -> Result<Self, Error> {
        let who = match role {
            Role::Parent => "parent",
            Role::Child => "child",
        };
        let node_name =
            NodeName::new(&format!("ferry-bench-{who}")).context("naming the iceoryx2 node")?;
        let node = NodeBuilder::new()
            .name(&node_name)
            // ferry-bench keeps the default SIGINT and SIGTERM behaviour.
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .config(&domain.config()?)
            .create::<Service>()
            .context("creating the iceoryx2 node")?;
        let (outgoing, incoming) = match role {
            Role::Parent => (TO_CHILD, TO_PARENT),
            Role::Child => (TO_PARENT, TO_CHILD),
        };
        let out = Services::new(&node, outgoing, event, role)?;
        let inc = Services::new(&node, incoming, event, role)?;
        let shared = Arc::new(Shared::default());
        let publisher = out
            .data
            .publisher_builder()
            .initial_max_slice_len(MAX_PAYLOAD)
            .max_loaned_samples(1)
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .set_backpressure_handler(backpressure(Arc::clone(&shared)))
            .create()
            .context(format!("creating the publisher of {outgoing}"))?;
        let subscriber = inc
            .data
            .subscriber_builder()
            .create()
            .context(format!("creating the subscriber of {incoming}"))?;
        let event = match (&out.event, &inc.event) {
            (Some(out), Some(inc)) => Some((
                out.notifier_builder()
                    .create()
                    .context(format!("creating the notifier of {outgoing}"))?,
                inc.listener_builder()
                    .create()
                    .context(format!("creating the listener of {incoming}"))?,
            )),
            _ => None,
        };
        Ok(Self {
            publisher,
            subscriber,
            event,
            _services: vec![out, inc],
            _node: node,
            domain,
            shared,
            yield_polls: false,
            out: Vec::new(),
            inbox: Vec::new(),
            sent: 0,
            received: 0,
            closed: false,
            peer_closed: false,
        })
    }

    fn set_peer(&mut self, peer: Peer) {
        // Set once, right after the link is made.
        let _ = self.shared.peer.set(peer);
    }

    /// Why the peer is gone, if it is.
    fn peer_gone(&self) -> Option<String> {
        self.shared.peer.get().and_then(|peer| peer.gone())
    }

    /// Publishes `self.out` with `header`, and notifies the peer.
    fn publish(&self, header: u64) -> Result<(), Error> {
        let mut sample = self
            .publisher
            .loan_slice_uninit(self.out.len())
            .context("loaning a sample")?;
        *sample.user_header_mut() = header;
        let sample = sample.write_from_slice(&self.out);
        sample.send().context("sending a sample")?;
        if let Some((notifier, _)) = &self.event {
            notifier.notify().context("notifying the peer")?;
        }
        Ok(())
    }

    /// Tells the peer this side is closing, unless it closed first.
    fn close(&mut self) {
        if !self.peer_closed && !self.closed {
            self.closed = true;
            // Relaxed: the handler runs on this thread.
            self.shared.closing.store(true, Ordering::Relaxed);
            self.out.clear();
            // A peer that is gone needs no close.
            let _ = self.publish(CLOSE);
        }
    }

    /// Waits for the next message and copies it into `self.inbox`; `None`
    /// once the peer has closed.
    fn receive(&mut self, deadline: Option<Instant>) -> Result<Option<&[u8]>, Error> {
        let mut waiting_since = None;
        let mut last_look = None;
        let mut polls = 0u32;
        let mut yielding = self.yield_polls;
        loop {
            if self.take()? {
                return Ok((!self.peer_closed).then_some(&self.inbox[..]));
            }
            match &self.event {
                Some((_, listener)) => {
                    listener
                        .timed_wait(|_| {}, LIVENESS)
                        .context("waiting on the listener")?;
                }
                None if yielding => std::thread::yield_now(),
                None => {
                    std::hint::spin_loop();
                    polls = polls.wrapping_add(1);
                    if !polls.is_multiple_of(POLLS_PER_CLOCK_READ) {
                        continue;
                    }
                }
            }
            // Out of the fast path: a wait has gone on a while.
            let now = Instant::now();
            let since = *waiting_since.get_or_insert(now);
            yielding |= now - since >= SPIN_ALONE;
            let looked = *last_look.get_or_insert(now);
            if now - looked >= LIVENESS {
                last_look = Some(now);
                if let Some(why) = self.peer_gone() {
                    // Whatever the peer sent before it went is still due.
                    if self.take()? {
                        return Ok((!self.peer_closed).then_some(&self.inbox[..]));
                    }
                    return Err(Error::new(format!("{why} without closing")));
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                return Err(Error::new(format!(
                    "nothing arrived within {:?}",
                    now - since
                )));
            }
        }
    }

    /// Takes the next sample if there is one: copies its payload into
    /// `self.inbox`, or notes the peer's close. Whether there was one.
    fn take(&mut self) -> Result<bool, Error> {
        let Some(sample) = self.subscriber.receive().context("receiving a sample")? else {
            return Ok(false);
        };
        let header = *sample.user_header();
        if header == CLOSE {
            self.peer_closed = true;
            return Ok(true);
        }
        if header != self.received {
            return Err(Error::new(format!(
                "received message {header} where {} was next",
                self.received
            )));
        }
        self.received += 1;
        self.inbox.clear();
        self.inbox.extend_from_slice(sample.payload());
        Ok(true)
    }
}

impl Endpoint for Link {
    fn prepare(&mut self, len: usize) -> Result<&mut [u8], Error> {
        if len > MAX_PAYLOAD {
            return Err(Error::new(format!(
                "a {len}-byte message is over the {MAX_PAYLOAD}-byte slice the iceoryx2 services \
                 are made for"
            )));
        }
        self.out.resize(len, 0);
        Ok(&mut self.out)
    }

    fn send(&mut self) -> Result<(), Error> {
        self.publish(self.sent)
            .context("sending on iceoryx2 publish-subscribe")?;
        self.sent += 1;
        Ok(())
    }

    fn recv(&mut self) -> Result<Option<&[u8]>, Error> {
        if self.peer_closed {
            return Ok(None);
        }
        self.receive(None)
            .context("receiving on iceoryx2 publish-subscribe")
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.close();
    }
}

impl Services {
    fn new(node: &Node<Service>, name: &str, event: bool, role: Role) -> Result<Self, Error> {
        let service_name = ServiceName::new(name).context(format!("naming service {name}"))?;
        let builder = node
            .service_builder(&service_name)
            .publish_subscribe::<[u8]>()
            .user_header::<u64>()
            .history_size(0)
            .subscriber_max_buffer_size(BUFFER)
            .subscriber_max_borrowed_samples(1)
            .enable_safe_overflow(false)
            .max_publishers(1)
            .max_subscribers(1)
            .max_nodes(2);
        // The parent creates the services, before the child exists, which
        // opens them.
        macro_rules! create_or_open {
            ($builder:expr, $what:literal) => {
                match role {
                    Role::Parent => $builder
                        .create()
                        .context(format!("creating {} {name}", $what)),
                    Role::Child => $builder.open().context(format!("opening {} {name}", $what)),
                }
            };
        }
        let data = create_or_open!(builder, "service")?;
        let event = match event {
            true => Some(create_or_open!(
                node.service_builder(&service_name)
                    .event()
                    .max_notifiers(1)
                    .max_listeners(1)
                    .max_nodes(2),
                "event service"
            )?),
            false => None,
        };
        Ok(Self { data, event })
    }
}

/// What the publisher does while the subscriber's buffer is full: waits
/// (iceoryx2 spins, yields, then sleeps between retries), and gives up once
/// the subscriber's process is gone, or a close has waited
/// [`CLOSE_TIMEOUT`].
fn backpressure(
    shared: Arc<Shared>,
) -> impl Fn(&BackpressureInfo) -> BackpressureAction + Send + 'static {
    move |info| {
        let waited = info.elapsed_time;
        let gone = waited >= LIVENESS && shared.peer.get().and_then(|p| p.gone()).is_some();
        let stuck = waited >= CLOSE_TIMEOUT && shared.closing.load(Ordering::Relaxed);
        if gone || stuck {
            BackpressureAction::DiscardDataAndFail
        } else {
            BackpressureAction::Retry
        }
    }
}

/// The CPUs the calling thread may run on, as the kernel lists them
/// (`0-1`, `3`, …).
fn allowed_cpus() -> Result<String, Error> {
    let status = fs::read_to_string("/proc/thread-self/status")
        .context("reading /proc/thread-self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(|list| list.trim().to_owned())
        .ok_or_else(|| Error::new("no Cpus_allowed_list in /proc/thread-self/status"))
}

/// Whether both sides may run on one and the same CPU only.
fn one_shared_cpu(mine: &str, peers: &str) -> bool {
    mine == peers && mine.parse::<usize>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_cpu_in_common_means_sharing() {
        assert!(one_shared_cpu("0", "0"));
        assert!(!one_shared_cpu("0", "1"));
        assert!(!one_shared_cpu("0-1", "0-1"));
        assert!(!one_shared_cpu("0,2", "0,2"));
        assert!(!allowed_cpus().unwrap().is_empty());
    }

    /// Both ends in this process: the real child is this binary, which a
    /// unit test cannot start.
    fn round_trips(event: bool) {
        let mut parent = Link::new(Domain::create(), event, Role::Parent).unwrap();
        let root =
            std::env::temp_dir().join(format!("ferry-bench-iceoryx2-{}", parent.domain.tag()));
        let tag = parent.domain.tag().to_owned();
        let mut child = Link::new(Domain::join(tag), event, Role::Child).unwrap();
        child.prepare(5).unwrap().copy_from_slice(b"hello");
        child.send().unwrap();
        assert_eq!(parent.recv().unwrap().unwrap(), b"hello");
        for (len, marker) in [(0, 0), (12, 1), (MAX_PAYLOAD, 2), (12, 3)] {
            parent.prepare(len).unwrap().fill(marker);
            parent.send().unwrap();
            let request = child.recv().unwrap().unwrap();
            assert!(request.len() == len && request.iter().all(|&b| b == marker));
            child.prepare(len).unwrap().fill(!marker);
            child.send().unwrap();
            let reply = parent.recv().unwrap().unwrap();
            assert!(reply.len() == len && reply.iter().all(|&b| b == !marker));
        }
        assert!(parent.prepare(MAX_PAYLOAD + 1).is_err());
        assert!(root.exists());
        parent.close();
        assert!(child.recv().unwrap().is_none());
        drop(child);
        drop(parent);
        assert!(!root.exists());
    }

    #[test]
    fn event_round_trips_close_and_clean_up() {
        round_trips(true);
    }

    #[test]
    fn spin_round_trips_close_and_clean_up() {
        round_trips(false);
    }

    #[test]
    fn a_stream_longer_than_the_buffer_arrives_whole_and_in_order() {
        let mut parent = Link::new(Domain::create(), true, Role::Parent).unwrap();
        let tag = parent.domain.tag().to_owned();
        let count = 20 * BUFFER;
        let child = std::thread::spawn(move || {
            let mut child = Link::new(Domain::join(tag), true, Role::Child).unwrap();
            child.prepare(0).unwrap();
            child.send().unwrap();
            let mut seen = 0;
            while let Some(message) = child.recv().unwrap() {
                assert!(message.len() == 1000 && message.iter().all(|&b| b == seen as u8));
                seen += 1;
            }
            seen
        });
        assert_eq!(parent.recv().unwrap().unwrap().len(), 0);
        for i in 0..count {
            parent.prepare(1000).unwrap().fill(i as u8);
            parent.send().unwrap();
        }
        parent.close();
        assert_eq!(child.join().unwrap(), count);
    }

    #[test]
    fn a_missing_process_is_gone_and_this_one_is_not() {
        assert!(Peer::Child(u32::MAX).gone().is_some());
        assert!(Peer::Child(std::process::id()).gone().is_none());
        let parent = std::os::unix::process::parent_id();
        assert!(Peer::Parent(parent).gone().is_none());
        assert!(Peer::Parent(parent.wrapping_add(1)).gone().is_some());
    }
}
