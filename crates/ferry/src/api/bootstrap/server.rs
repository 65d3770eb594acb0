//! A named server that unrelated processes connect to.
//!
//! Each accepted client is a link of its own (its connection is the link's
//! control socket) with one pipe on it, which the client made and sent
//! with its opening (see [`crate::base::wire::handshake`]): the server maps it,
//! checked as any peer's region and charged to the link's map budget, and
//! answers with a welcome, so it makes no shared memory while a client
//! waits.
//! Handshakes run side by side without a thread: `accept` polls the
//! listening socket and every connection still in its handshake, so a
//! client that connects and says nothing delays no one; it is closed after
//! the handshake timeout.
//!
//! A flood of silent connections must not push out honest clients. An
//! honest client sends its opening right after `connect` (a peer
//! credentials check in between), so it is usually queued before the
//! server takes the connection: each new connection's opening is read the
//! moment it is taken, and one that has spoken never needs a pending slot.
//! The pending slots hold only the silent; when they are full, the one
//! silent longest is closed, but only once it has been silent for
//! [`EVICTION_GRACE`] (an honest client preempted between its `connect`
//! and its opening on a loaded machine gets that long). While every slot
//! is younger than that, the server takes no new connection: the rest
//! wait in the listening socket's backlog, where an honest client's
//! opening queues up, so it is answered as soon as it is taken. A flood
//! therefore costs honest clients delay (at most the backlog's share of
//! `max_pending` slots per grace), never their connection. A quota per
//! user or process would not help: the default policy admits one user
//! only, and a process can fork.

use std::collections::VecDeque;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::address::{Address, Token};
use super::{INVITE_ENV, look_for_datagram};
use crate::api::channel::{Descriptor, Pipe, PipeOptions, Selectable, Source};
use crate::base::sys::{
    ControlSocket, Credentials, Interest, Listener, OffThread, PeerFd, Poller, Received,
    close_all_later, effective_uid, inherit_in_child, note_pipe, wait_readable,
};
use crate::base::wire::handshake::{HELLO_LEN, Hello, Invite, InviteEnv, Refusal, welcome};
use crate::transport::link::{Fault, Link};

/// Default time a client has to send its opening after connecting (D-Bus
/// allows 5 s too).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Default most connections in their handshake at once.
pub const MAX_PENDING_HANDSHAKES: usize = 64;

/// How long a connection that has not spoken is safe from being closed
/// to make room for a newer one (see the module comment). A connection
/// is closed after the handshake timeout if that is shorter.
pub const EVICTION_GRACE: Duration = Duration::from_millis(200);

/// Who may connect: the server's policy over a client's credentials.
type Policy = Arc<dyn Fn(&Credentials) -> bool + Send + Sync>;

/// How a [`Server`] is set up.
///
/// ```no_run
/// let token = ferry::Token::random()?;
/// let server = ferry::ServerOptions::new()
///     .token(token)                          // clients must present it
///     .allow(|peer| peer.uid == 1000)        // instead of "same user only"
///     .handshake_timeout(std::time::Duration::from_secs(2))
///     .bind("render-service")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct ServerOptions {
    pipe: PipeOptions,
    token: Option<Token>,
    policy: Option<Policy>,
    handshake_timeout: Duration,
    max_pending: usize,
}

impl fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("pipe", &self.pipe)
            .field("token", &self.token)
            .field("policy", &self.policy.as_ref().map(|_| "custom"))
            .field("handshake_timeout", &self.handshake_timeout)
            .field("max_pending", &self.max_pending)
            .finish()
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerOptions {
    /// Same user only, no token, default pipes, [`HANDSHAKE_TIMEOUT`],
    /// [`MAX_PENDING_HANDSHAKES`].
    pub fn new() -> Self {
        Self {
            pipe: PipeOptions::new(),
            token: None,
            policy: None,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            max_pending: MAX_PENDING_HANDSHAKES,
        }
    }

    /// The options of the server's end of each client's pipe (its message
    /// limit, its wait) and of its link (the client's memory this process
    /// maps, its pool). The ring capacity is the client's: it makes the
    /// pipe, within this map budget.
    pub fn pipe_options(mut self, options: PipeOptions) -> Self {
        self.pipe = options;
        self
    }

    /// Whether the server's end of each client's pipe takes bytes only
    /// from the start, the rest of its pipe options kept: see
    /// [`PipeOptions::bytes_only`].
    pub fn bytes_only(mut self, on: bool) -> Self {
        self.pipe = self.pipe.bytes_only(on);
        self
    }

    /// Asks every client for `token`, before its first message is
    /// delivered; see [`Token`].
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// Accepts the clients for which `policy` says yes, instead of the
    /// server's own user only. It sees the client's credentials as the
    /// kernel recorded them when it connected.
    pub fn allow(mut self, policy: impl Fn(&Credentials) -> bool + Send + Sync + 'static) -> Self {
        self.policy = Some(Arc::new(policy));
        self
    }

    /// How long a client has, after connecting, to send its opening.
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// Most connections in their handshake at once (at least 1): past it,
    /// the one silent longest is closed to make room once it has been
    /// silent for [`EVICTION_GRACE`]; until then new connections wait in
    /// the listening socket's backlog (as long as this).
    pub fn max_pending(mut self, count: usize) -> Self {
        self.max_pending = count.max(1);
        self
    }

    /// Listens at `address`; see [`Server::bind`].
    ///
    /// # Errors
    ///
    /// `AddrInUse` if a live server listens there; what `bind(2)` says
    /// otherwise (a missing directory, no permission).
    pub fn bind(self, address: impl Into<Address>) -> std::io::Result<Server> {
        let address = address.into();
        let backlog = i32::try_from(self.max_pending).unwrap_or(i32::MAX);
        let listener = address.with_socket_name(|name| Listener::bind(name, backlog))?;
        Ok(Server {
            listener,
            address,
            options: self,
            state: Mutex::new(State::default()),
            watch: OnceLock::new(),
        })
    }
}

/// A client that connected and passed the server's checks.
#[derive(Debug)]
#[non_exhaustive]
pub struct Connection {
    /// The server's end of the client's pipe.
    pub pipe: Pipe,
    /// Who the client is, as the kernel recorded it when it connected.
    pub peer: Credentials,
}

/// Why [`Server::accept`] returned without a client.
#[derive(Debug)]
#[non_exhaustive]
pub enum AcceptError {
    /// A client was turned away (and told why); the server goes on, so
    /// call `accept` again.
    Refused {
        /// Who it was.
        peer: Credentials,
        /// Why.
        reason: Refusal,
    },
    /// No client completed its handshake in time ([`Server::accept_timeout`]).
    Timeout,
    /// No client is there to accept now ([`Server::try_accept`]).
    Empty,
    /// This process could not accept (for example, out of descriptors).
    Io(std::io::Error),
}

impl fmt::Display for AcceptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused { peer, reason } => write!(f, "refused a client ({peer}): {reason}"),
            Self::Timeout => f.write_str("no client completed its handshake before the deadline"),
            Self::Empty => f.write_str("no client is there to accept now"),
            Self::Io(e) => write!(f, "system error while accepting a client: {e}"),
        }
    }
}

impl std::error::Error for AcceptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// A connection in its handshake.
#[derive(Debug)]
struct Pending {
    /// Closed off the accepting thread: its queue may hold descriptors the
    /// client sent, which are released when it closes.
    socket: OffThread<ControlSocket>,
    peer: Credentials,
    /// When it was taken off the listening socket.
    since: Instant,
    expires: Instant,
    /// Its socket is in the server's readiness poller.
    watched: bool,
}

/// A named server: many unrelated processes [`connect`](crate::connect)
/// to it, each getting a pipe of its own.
///
/// ```no_run
/// let server = ferry::Server::bind("echo-service")?;
/// loop {
///     match server.accept() {
///         Ok(client) => {
///             std::thread::spawn(move || {
///                 while let Ok(message) = client.pipe.recv() {
///                     let _ = client.pipe.send(&message);
///                 }
///             });
///         }
///         Err(ferry::AcceptError::Refused { .. }) => continue, // told why; keep serving
///         Err(e) => return Err(e.into()),
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Server {
    listener: Listener,
    address: Address,
    options: ServerOptions,
    state: Mutex<State>,
    /// The readiness poller over the listening socket and the connections
    /// in their handshake, made by the first [`Server::ready_fd`] (or
    /// `Select::add`).
    watch: OnceLock<Arc<Poller>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server")
            .field("address", &self.address)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Connections in their handshake, and what finished ones came to.
#[derive(Debug, Default)]
struct State {
    pending: Vec<Pending>,
    /// Clients accepted or refused, not yet returned by `accept`.
    done: VecDeque<Result<Connection, AcceptError>>,
    /// The listening socket is in the readiness poller (it is taken out
    /// while every pending slot is in its grace, so a flood of silent
    /// connections does not keep the poller readable).
    listening: bool,
}

impl Server {
    /// Listens at `address` with default [`ServerOptions`]: clients of this
    /// user only, no token. A plain name is an abstract socket (Linux); a
    /// socket file left by a server that died is reclaimed.
    ///
    /// # Errors
    ///
    /// As [`ServerOptions::bind`].
    pub fn bind(address: impl Into<Address>) -> std::io::Result<Self> {
        ServerOptions::new().bind(address)
    }

    /// Where the server listens.
    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The token clients must present, if any.
    pub fn token(&self) -> Option<&Token> {
        self.options.token.as_ref()
    }

    /// Waits for the next client to complete its handshake.
    ///
    /// # Errors
    ///
    /// [`AcceptError::Refused`] for a client turned away (not fatal: call
    /// again); [`AcceptError::Io`] if this process cannot accept.
    pub fn accept(&self) -> Result<Connection, AcceptError> {
        self.accept_until(None)
    }

    /// [`Server::accept`], waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`AcceptError::Timeout`] if no client completed its handshake in
    /// time; the rest as [`Server::accept`].
    pub fn accept_timeout(&self, timeout: Duration) -> Result<Connection, AcceptError> {
        self.accept_until(Some(Instant::now() + timeout))
    }

    /// Starts `command` as a child invited to this server: it connects
    /// with [`connect_invited`](crate::connect_invited), presenting the
    /// server's token, which it reads from a pipe only it inherits (the
    /// environment names the pipe, not the token).
    ///
    /// # Errors
    ///
    /// If the address is too long to hand over (107 bytes), the note's pipe
    /// cannot be made, or the child cannot be spawned.
    pub fn spawn(&self, mut command: Command) -> std::io::Result<Child> {
        let (file, name) = self.address.to_wire();
        let invite = Invite {
            file,
            name,
            token: self.options.token.as_ref().map(|t| *t.as_bytes()),
        };
        let note = invite.encode().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the server's address is too long to hand to a child",
            )
        })?;
        let read_end = note_pipe(&note)?;
        let env = InviteEnv {
            fd: inherit_in_child(&mut command, read_end.as_fd()),
            parent: std::process::id(),
        };
        command.env(INVITE_ENV, env.encode());
        let child = command.spawn()?;
        drop(read_end);
        Ok(child)
    }

    /// The next client if one can be accepted now, never waiting: one
    /// whose handshake finished, or a new connection whose opening is
    /// already there.
    ///
    /// ```no_run
    /// let server = ferry::Server::bind("try-service")?;
    /// match server.try_accept() {
    ///     Ok(client) => println!("a client: {}", client.peer),
    ///     Err(ferry::AcceptError::Empty) => println!("no one yet"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`AcceptError::Empty`] if no client is there to accept now
    /// (a connection whose opening has not come stays pending); the rest
    /// as [`Server::accept`].
    pub fn try_accept(&self) -> Result<Connection, AcceptError> {
        let mut state = self.lock();
        if let Some(outcome) = state.done.pop_front() {
            return outcome;
        }
        let now = Instant::now();
        self.expire(&mut state, now);
        let listen = self.full_until(&state, now).is_none();
        if self.settle(&mut state, Some(now), listen)? {
            self.take_new(&mut state)?;
        }
        state.done.pop_front().unwrap_or(Err(AcceptError::Empty))
    }

    /// A descriptor that becomes readable when [`Server::try_accept`] may
    /// have a client (a new connection, or the opening of one in its
    /// handshake), for a poll loop of the caller's own: call `try_accept`
    /// until it says `Empty`, then wait for the descriptor, and repeat. It
    /// may be readable with no client to accept (a connection that has not
    /// spoken yet; `try_accept` then says `Empty`). While every handshake
    /// slot holds a silent connection still in its grace (a flood; see the
    /// module docs), new connections wait in the backlog and the
    /// descriptor may stay readable with nothing to accept: wait at most
    /// [`EVICTION_GRACE`] then. (A [`Select`](crate::Select) does all this
    /// itself: it stops watching the listening socket while the slots are
    /// full, and looks again when a grace or a handshake time ends.) Never
    /// read or write the descriptor itself.
    ///
    /// ```no_run
    /// use rustix::event::{PollFd, PollFlags, poll};
    /// let server = ferry::Server::bind("poll-service")?;
    /// let fd = server.ready_fd()?;
    /// loop {
    ///     match server.try_accept() {
    ///         Ok(client) => drop(client), // serve it
    ///         Err(ferry::AcceptError::Empty) => {
    ///             poll(&mut [PollFd::new(&fd, PollFlags::IN)], None)?;
    ///         }
    ///         Err(e) => eprintln!("{e}"),
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// The poller could not be made (out of descriptors), or this system
    /// has none (`Unsupported`).
    pub fn ready_fd(&self) -> std::io::Result<BorrowedFd<'_>> {
        Ok(self.watch()?.as_fd())
    }

    /// The readiness poller, made now if need be with the listening socket
    /// and every connection in its handshake in it.
    fn watch(&self) -> std::io::Result<&Arc<Poller>> {
        if let Some(watch) = self.watch.get() {
            return Ok(watch);
        }
        let mut state = self.lock();
        if let Some(watch) = self.watch.get() {
            return Ok(watch);
        }
        let poller = Poller::new()?;
        poller.add(self.listener.as_fd(), 0, Interest::Readable)?;
        state.listening = true;
        for p in &mut state.pending {
            poller.add(p.socket.as_fd(), 1, Interest::Readable)?;
            p.watched = true;
        }
        Ok(self.watch.get_or_init(|| Arc::new(poller)))
    }

    /// Watches a connection in its handshake, if anyone waits by descriptor.
    fn watch_pending(&self, p: &mut Pending) {
        if let (Some(watch), false) = (self.watch.get(), p.watched) {
            // A connection not watched is still found by `try_accept` and
            // `accept`, which poll every pending one.
            p.watched = watch.add(p.socket.as_fd(), 1, Interest::Readable).is_ok();
        }
    }

    /// Stops watching a connection leaving its handshake.
    fn unwatch_pending(&self, p: &Pending) {
        if let (Some(watch), true) = (self.watch.get(), p.watched) {
            let _ = watch.delete(p.socket.as_fd());
        }
    }

    /// Closes the connections whose handshake time ran out, and watches
    /// the listening socket only while a new connection can be taken;
    /// returns when to look again (a handshake's end, a grace's end).
    fn tidy(&self, state: &mut State, now: Instant) -> Option<Instant> {
        self.expire(state, now);
        let full = self.full_until(state, now);
        if let Some(watch) = self.watch.get()
            && state.listening == full.is_some()
        {
            let listener = self.listener.as_fd();
            state.listening = match full {
                Some(_) => watch.delete(listener).is_err(),
                None => watch.add(listener, 0, Interest::Readable).is_ok(),
            };
        }
        state.pending.iter().map(|p| p.expires).chain(full).min()
    }

    /// Closes the connections whose handshake time ran out.
    fn expire(&self, state: &mut State, now: Instant) {
        let pending = std::mem::take(&mut state.pending);
        for p in pending {
            match p.expires > now {
                true => state.pending.push(p),
                false => self.unwatch_pending(&p),
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn accept_until(&self, deadline: Option<Instant>) -> Result<Connection, AcceptError> {
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.done.pop_front() {
                return outcome;
            }
            let now = Instant::now();
            // A client that let its handshake time run out is closed.
            self.expire(&mut state, now);
            if deadline.is_some_and(|d| d <= now) {
                return Err(AcceptError::Timeout);
            }
            // With every slot taken by a connection still in its grace,
            // new ones wait in the backlog until the oldest's grace ends.
            let full = self.full_until(&state, now);
            let wake = state
                .pending
                .iter()
                .map(|p| p.expires)
                .chain(full)
                .chain(deadline)
                .min();
            let listener_ready = self.settle(&mut state, wake, full.is_none())?;
            if listener_ready {
                self.take_new(&mut state)?;
            }
        }
    }

    /// `None` if a new connection can be taken now (a free slot, or one
    /// whose grace is over); else when the oldest's grace ends.
    fn full_until(&self, state: &State, now: Instant) -> Option<Instant> {
        if state.pending.len() < self.options.max_pending {
            return None;
        }
        let oldest = state.pending.iter().map(|p| p.since).min()?;
        let grace_ends = oldest + EVICTION_GRACE;
        (grace_ends > now).then_some(grace_ends)
    }

    /// Waits until `wake` for a pending client (and, if `listen`, the
    /// listening socket) to be readable, answers every pending client
    /// whose opening came (their outcomes queue in `done`), and says
    /// whether the listener is ready.
    fn settle(
        &self,
        state: &mut State,
        wake: Option<Instant>,
        listen: bool,
    ) -> Result<bool, AcceptError> {
        let ready = {
            let fds: Vec<BorrowedFd<'_>> = listen
                .then(|| self.listener.as_fd())
                .into_iter()
                .chain(state.pending.iter().map(|p| p.socket.as_fd()))
                .collect();
            wait_readable(&fds, wake).map_err(AcceptError::Io)?
        };
        let (listener_ready, clients) = match listen {
            true => (ready[0], &ready[1..]),
            false => (false, &ready[..]),
        };
        let pending = std::mem::take(&mut state.pending);
        for (p, readable) in pending.into_iter().zip(clients) {
            match readable {
                true => self.handshake(p, state),
                false => state.pending.push(p),
            }
        }
        Ok(listener_ready)
    }

    /// Takes the connections waiting on the listening socket while there
    /// is room, turning away at once those whose user the policy refuses
    /// and answering at once those whose opening has come; only the silent
    /// take a pending slot.
    fn take_new(&self, state: &mut State) -> Result<(), AcceptError> {
        while self.make_room(state)? {
            let Some((socket, peer)) = self.listener.accept().map_err(AcceptError::Io)? else {
                break;
            };
            if !self.allows(&peer) {
                state
                    .done
                    .push_back(Err(refuse(&socket, peer, Refusal::Credentials)));
                continue;
            }
            // With no one else in their handshake, look briefly for the
            // opening of this one, which is usually a few microseconds
            // behind its connection, rather than sleep and wake for it.
            if state.pending.is_empty() {
                look_for_datagram(socket.as_fd(), None).map_err(AcceptError::Io)?;
            }
            let since = Instant::now();
            let pending = Pending {
                socket: OffThread::new(socket),
                peer,
                since,
                expires: since + self.options.handshake_timeout,
                watched: false,
            };
            // Queues it in `pending` if it has not spoken yet.
            self.handshake(pending, state);
        }
        Ok(())
    }

    /// Whether a pending slot is free, after answering the pending clients
    /// whose opening has come and, if still full, closing the one silent
    /// longest if its grace is over.
    fn make_room(&self, state: &mut State) -> Result<bool, AcceptError> {
        if state.pending.len() < self.options.max_pending {
            return Ok(true);
        }
        let now = Instant::now();
        self.settle(state, Some(now), false)?;
        if self.full_until(state, now).is_some() {
            return Ok(false);
        }
        if state.pending.len() >= self.options.max_pending {
            let oldest = (0..state.pending.len()).min_by_key(|&i| state.pending[i].since);
            if let Some(i) = oldest {
                let p = state.pending.remove(i);
                self.unwatch_pending(&p);
            }
        }
        Ok(true)
    }

    fn allows(&self, peer: &Credentials) -> bool {
        match &self.options.policy {
            Some(policy) => policy(peer),
            None => peer.uid == effective_uid(),
        }
    }

    /// Reads a pending client's opening and answers it; what came of it
    /// (a client, or a refusal) queues in `done`.
    fn handshake(&self, mut p: Pending, state: &mut State) {
        let mut buf = [0u8; HELLO_LEN + 1];
        // The opening: a `Hello` with the client's pipe (one descriptor).
        let received = p.socket.try_recv(&mut buf);
        if let Ok(Received::Empty) = received {
            self.watch_pending(&mut p);
            return state.pending.push(p);
        }
        // It leaves its handshake, one way or another.
        self.unwatch_pending(&p);
        let opening = match received {
            Ok(Received::Record {
                len,
                mut fds,
                truncated: false,
            }) if fds.len() == 1 => Hello::decode(&buf[..len])
                .ok()
                .zip(fds.pop().map(PeerFd::new)),
            // No pipe, more than one descriptor, or too long: not an
            // opening (what came goes to the closer).
            Ok(Received::Record { fds, .. }) => {
                close_all_later(fds);
                None
            }
            Ok(Received::NoRoom) => None,
            // Gone mid-handshake: nothing is left of it.
            Ok(Received::HungUp | Received::Empty) | Err(_) => return,
        };
        let outcome = match opening {
            None => Err(refuse(&p.socket, p.peer, Refusal::Handshake)),
            Some((hello, pipe)) => match &self.options.token {
                Some(token) if !hello.token.is_some_and(|t| token.matches(&t)) => {
                    Err(refuse(&p.socket, p.peer, Refusal::Token))
                }
                _ => match self.welcome(p, pipe) {
                    Some(outcome) => outcome,
                    None => return,
                },
            },
        };
        state.done.push_back(outcome);
    }

    /// Makes the client's link, takes the pipe it sent (a region that is
    /// not a pipe's is refused as a bad opening), and welcomes it; `None`
    /// if the client hung up in between.
    fn welcome(&self, p: Pending, pipe: PeerFd) -> Option<Result<Connection, AcceptError>> {
        let options = &self.options.pipe;
        let link = match Link::connected(p.socket.into_inner(), options.link_limits()) {
            Ok(link) => link,
            Err(e) => return Some(Err(AcceptError::Io(e))),
        };
        let adopted = link
            .adopt_opening(pipe)
            .and_then(|end| Pipe::adopt(&link, end, options).map_err(|c| Fault::Violation(c.0)));
        let near = match adopted {
            Ok(near) => {
                near.say_cpu();
                // Before the welcome, after which the client may write.
                if options.bytes_only {
                    near.receiver().set_bytes_only(true);
                }
                near
            }
            Err(Fault::Local(e)) => return Some(Err(AcceptError::Io(e))),
            Err(_) => return Some(Err(refuse(link.socket(), p.peer, Refusal::Handshake))),
        };
        match link.socket().try_send(&welcome(), &[]) {
            Ok(()) => Some(Ok(Connection {
                pipe: near,
                peer: p.peer,
            })),
            Err(_) if link.check_peer().is_some() => None,
            Err(e) => Some(Err(AcceptError::Io(e))),
        }
    }
}

/// Tells a client why it is turned away (if it still listens), closes its
/// connection, and makes the error that reports it here.
fn refuse(socket: &ControlSocket, peer: Credentials, reason: Refusal) -> AcceptError {
    let _ = socket.try_send(&reason.encode(), &[]);
    AcceptError::Refused { peer, reason }
}

impl Source for Server {
    fn source_fd(&self) -> std::io::Result<Descriptor> {
        Ok(Arc::clone(self.watch()?) as Descriptor)
    }

    /// A client whose handshake finished (or was refused), a connection
    /// to take, or an opening to read.
    fn source_ready(&self) -> bool {
        let state = self.lock();
        if !state.done.is_empty() {
            return true;
        }
        let listen = self.full_until(&state, Instant::now()).is_none();
        let fds: Vec<BorrowedFd<'_>> = listen
            .then(|| self.listener.as_fd())
            .into_iter()
            .chain(state.pending.iter().map(|p| p.socket.as_fd()))
            .collect();
        // A failed look says ready: `try_accept` reports the failure.
        match wait_readable(&fds, Some(Instant::now())) {
            Ok(ready) => ready.contains(&true),
            Err(_) => true,
        }
    }

    fn source_arm(&self, _rung: bool) {
        self.tidy(&mut self.lock(), Instant::now());
    }

    /// Out of the set: the listening socket is watched again whatever
    /// the slots hold (see [`Server::ready_fd`]).
    fn source_disarm(&self) {
        let mut state = self.lock();
        if let (Some(watch), false) = (self.watch.get(), state.listening) {
            state.listening = watch
                .add(self.listener.as_fd(), 0, Interest::Readable)
                .is_ok();
        }
    }

    fn source_ended(&self) -> bool {
        false
    }

    fn source_deadline(&self) -> Option<Instant> {
        self.tidy(&mut self.lock(), Instant::now())
    }
}

/// A server joins a [`Select`](crate::Select): it is ready when
/// [`Server::try_accept`] may have a client.
impl Selectable for Server {}

/// A [`Server`] for async code on tokio (the `tokio` feature): `accept`
/// suspends the task in tokio's own reactor on the server's readiness
/// descriptor (see [`Server::ready_fd`]), with no helper thread. It is
/// woken by connections and openings; while every handshake slot holds a
/// silent connection in its grace, a client behind them in the backlog is
/// taken at the next such wake (to bound that wait, race `accept` with a
/// timer of [`EVICTION_GRACE`]).
///
/// ```no_run
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let server = ferry::Server::bind("async-service")?.into_async()?;
/// loop {
///     match server.accept().await {
///         Ok(client) => drop(client), // serve it
///         Err(ferry::AcceptError::Refused { .. }) => continue,
///         Err(e) => return Err(e.into()),
///     }
/// }
/// # }
/// ```
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub struct AsyncServer {
    server: Server,
    bell: ::tokio::io::unix::AsyncFd<crate::api::channel::Bell>,
}

#[cfg(feature = "tokio")]
impl Server {
    /// This server for async code on tokio ([`AsyncServer`]). Call it
    /// inside a tokio runtime (with its IO driver enabled).
    ///
    /// # Errors
    ///
    /// As [`Server::ready_fd`]; also outside a tokio runtime, or if the
    /// runtime refuses to register the descriptor.
    ///
    /// # Panics
    ///
    /// As tokio's `AsyncFd`, if the runtime was built without its IO driver
    /// (`enable_io`).
    pub fn into_async(self) -> std::io::Result<AsyncServer> {
        let bell = crate::api::channel::register(&self.source_fd()?, false)?;
        Ok(AsyncServer { server: self, bell })
    }
}

#[cfg(feature = "tokio")]
impl AsyncServer {
    /// Waits for the next client to complete its handshake, suspending
    /// the task meanwhile. Cancel safe: a client is taken only in the poll
    /// that returns it (one whose handshake finished meanwhile waits for
    /// the next call).
    ///
    /// # Errors
    ///
    /// As [`Server::accept`].
    pub async fn accept(&self) -> Result<Connection, AcceptError> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for the next client: `Ready` with it (or a refusal or local
    /// failure), or `Pending` with the task woken when one may be there.
    ///
    /// # Errors
    ///
    /// As [`Server::accept`].
    pub fn poll_accept(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Connection, AcceptError>> {
        use std::task::Poll;
        loop {
            match self.server.try_accept() {
                Err(AcceptError::Empty) => {}
                outcome => return Poll::Ready(outcome),
            }
            let mut guard = match std::task::ready!(self.bell.poll_read_ready(cx)) {
                Ok(guard) => guard,
                Err(e) => return Poll::Ready(Err(AcceptError::Io(e))),
            };
            guard.clear_ready();
            // A connection whose opening has not come is readable again
            // once it speaks; until then nothing else is to be done for
            // it but its timeout, which the next accept applies.
        }
    }

    /// The server back, for blocking use.
    pub fn into_inner(self) -> Server {
        self.server
    }
}
