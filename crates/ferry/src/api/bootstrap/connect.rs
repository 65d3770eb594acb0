//! A client's side of a named server: connect, check who listens, present
//! the token with a pipe made here, and wait for the server's word.
//!
//! The client makes the pipe (so the server maps what it is sent instead
//! of making one while the client waits) and sends its far end with the
//! opening; the server answers with one datagram, a welcome or a refusal.
//! A connect then costs the server one wake-up, as a Unix socket's does,
//! and the client may write its first message as soon as it is welcomed.

use std::fmt;
use std::time::{Duration, Instant};

use super::address::{Address, Token};
use super::{INVITE_ENV, look_for_datagram};
use crate::api::channel::{Pipe, PipeOptions, ProtocolError};
use crate::base::sync::{AtomicBool, Ordering};
use crate::base::sys::{
    ControlSocket, Received, adopt_inherited_pipe, close_all_later, credentials, effective_uid,
    read_note, wait_readable,
};
use crate::base::wire::Violation;
use crate::base::wire::handshake::{
    Hello, Invite, InviteEnv, MAX_INVITE, REFUSAL_LEN, Refusal, decode_answer,
};
use crate::transport::link::Link;

/// Default time to connect and complete the handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why [`connect`] (or [`connect_invited`]) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// No server listens at the address (the message names it).
    NoServer(String),
    /// The server turned this client away, and said why.
    Refused(Refusal),
    /// The process listening there is not of the user this client trusts
    /// (by default, its own): nothing was sent to it.
    UntrustedServer {
        /// The listener's user.
        uid: u32,
        /// The user expected.
        expected: u32,
    },
    /// The server closed the connection before answering (it timed the
    /// handshake out, had too many pending, or is going away).
    Closed,
    /// The server did not answer in time.
    Timeout,
    /// The server's answer broke the wire rules.
    Protocol(ProtocolError),
    /// This process was not invited ([`connect_invited`]; the message says
    /// how that was seen).
    NotInvited(String),
    /// The process that invited this one handed over an invitation that
    /// breaks the rules ([`connect_invited`]): the parent's fault, not
    /// this process's.
    BadInvitation {
        /// The parent process.
        parent: u32,
        /// What was wrong with it.
        why: String,
    },
    /// The operating system refused (for example, out of descriptors).
    Io(std::io::Error),
}

impl ConnectError {
    /// Whether the peer is gone: no server listens at the address
    /// ([`NoServer`](Self::NoServer)), it closed the connection before
    /// answering ([`Closed`](Self::Closed)), or its answer broke the rules
    /// ([`Protocol`](Self::Protocol): the connection is dropped).
    ///
    /// ```
    /// let e = ferry::ConnectError::Closed;
    /// assert!(e.is_disconnected());
    /// assert!(!ferry::ConnectError::Timeout.is_disconnected());
    /// ```
    pub fn is_disconnected(&self) -> bool {
        matches!(self, Self::NoServer(_) | Self::Closed | Self::Protocol(_))
    }
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoServer(why) => f.write_str(why),
            Self::Refused(why) => write!(f, "the server refused the connection: {why}"),
            Self::UntrustedServer { uid, expected } => write!(
                f,
                "the server listening there runs as uid {uid}, not uid {expected}: not connecting"
            ),
            Self::Closed => f.write_str(
                "the server closed the connection during the handshake \
                 (timed out, too many pending, or shutting down)",
            ),
            Self::Timeout => f.write_str("the server did not answer the handshake in time"),
            Self::Protocol(e) => e.fmt(f),
            Self::NotInvited(why) => write!(f, "not invited to a ferry server: {why}"),
            Self::BadInvitation { parent, why } => {
                write!(
                    f,
                    "the invitation from parent process {parent} is malformed: {why}"
                )
            }
            Self::Io(e) => write!(f, "system error while connecting: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<Violation> for ConnectError {
    fn from(why: Violation) -> Self {
        Self::Protocol(ProtocolError::from(why))
    }
}

/// How [`connect`] connects.
///
/// ```no_run
/// let pipe = ferry::ConnectOptions::new()
///     .token(ferry::Token::from_bytes([7; 32]))
///     .timeout(std::time::Duration::from_secs(1))
///     .connect("render-service")?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pipe: PipeOptions,
    token: Option<Token>,
    timeout: Duration,
    server_uid: Option<u32>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl ConnectOptions {
    /// No token, a server of this user only, [`CONNECT_TIMEOUT`], default
    /// pipe options.
    pub fn new() -> Self {
        Self {
            pipe: PipeOptions::new(),
            token: None,
            timeout: CONNECT_TIMEOUT,
            server_uid: None,
        }
    }

    /// The options of the pipe this client makes (its ring capacity among
    /// them), of its end, and of its link.
    pub fn pipe_options(mut self, options: PipeOptions) -> Self {
        self.pipe = options;
        self
    }

    /// Presents `token` to the server.
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// Longest the connection and the handshake may take together.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Trusts a server running as `uid` (instead of this process's user).
    pub fn server_uid(mut self, uid: u32) -> Self {
        self.server_uid = Some(uid);
        self
    }

    /// Connects to the server at `address`; see [`connect`].
    ///
    /// # Errors
    ///
    /// See [`ConnectError`].
    pub fn connect(&self, address: impl Into<Address>) -> Result<Pipe, ConnectError> {
        let address = address.into();
        let deadline = Instant::now() + self.timeout;
        let socket = address
            .with_socket_name(|name| crate::base::sys::connect(name, self.timeout))
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => ConnectError::NoServer(e.to_string()),
                std::io::ErrorKind::TimedOut => ConnectError::Timeout,
                _ => ConnectError::Io(e),
            })?;
        let server = credentials(socket.as_fd()).map_err(ConnectError::Io)?;
        let expected = self.server_uid.unwrap_or_else(effective_uid);
        if server.uid != expected {
            return Err(ConnectError::UntrustedServer {
                uid: server.uid,
                expected,
            });
        }
        let hello = Hello {
            token: self.token.as_ref().map(|t| *t.as_bytes()),
        };
        // The server's end takes what the server's options say.
        let (near, far) = self
            .pipe
            .clone()
            .bytes_only(false)
            .pipe()
            .map_err(ConnectError::Io)?;
        if self.pipe.bytes_only {
            near.receiver().set_bytes_only(true);
        }
        let link = Link::connected(socket, self.pipe.link_limits()).map_err(ConnectError::Io)?;
        // A server that refused at once may have closed already: its
        // refusal is still queued, so read on whatever this says.
        let _ = far.send_opening(&link, &hello.encode(), Some(deadline));
        near.say_cpu();
        answer(link.socket(), deadline)?;
        Ok(near)
    }
}

/// Waits for the server's answer and takes it: `Ok` for a welcome.
fn answer(socket: &ControlSocket, deadline: Instant) -> Result<(), ConnectError> {
    let mut buf = [0u8; REFUSAL_LEN + 1];
    // A server that refused before reading our opening closed a socket
    // with unread data: the kernel reports that (`ECONNRESET`, a hang-up
    // here) once, ahead of the refusal still queued; so look once more.
    let mut reset_seen = false;
    let mut looked = false;
    loop {
        match socket.try_recv(&mut buf).map_err(ConnectError::Io)? {
            Received::Record {
                len: REFUSAL_LEN,
                fds,
                truncated: false,
            } if fds.is_empty() => {
                return match decode_answer(&buf[..REFUSAL_LEN])? {
                    None => Ok(()),
                    Some(why) => Err(ConnectError::Refused(why)),
                };
            }
            Received::Record { fds, .. } => {
                close_all_later(fds);
                return Err(Violation::BadHandshake.into());
            }
            Received::HungUp if !reset_seen => reset_seen = true,
            Received::HungUp => return Err(ConnectError::Closed),
            Received::NoRoom => {
                return Err(ConnectError::Io(std::io::Error::new(
                    std::io::ErrorKind::QuotaExceeded,
                    "out of file descriptors: could not take what the server sent",
                )));
            }
            Received::Empty if Instant::now() >= deadline => return Err(ConnectError::Timeout),
            // The server answers within tens of microseconds: look for it
            // briefly first, then sleep for it.
            Received::Empty if !looked => {
                looked = true;
                look_for_datagram(socket.as_fd(), Some(deadline)).map_err(ConnectError::Io)?;
            }
            Received::Empty => {
                wait_readable(&[socket.as_fd()], Some(deadline)).map_err(ConnectError::Io)?;
            }
        }
    }
}

/// Connects to the named server at `address` (a plain name is an abstract
/// socket; see [`Address`]), with default [`ConnectOptions`]: no token, a
/// server of this process's user only.
///
/// ```no_run
/// let pipe = ferry::connect("echo-service")?;
/// pipe.send(b"hello")?;
/// assert_eq!(pipe.recv()?, b"hello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// See [`ConnectError`]: no server there, a server of another user, a
/// refusal (with its reason), a timeout.
pub fn connect(address: impl Into<Address>) -> Result<Pipe, ConnectError> {
    ConnectOptions::new().connect(address)
}

static INVITE_TAKEN: AtomicBool = AtomicBool::new(false);

/// Connects to the server that started this process with
/// [`Server::spawn`](crate::Server::spawn), presenting the token it
/// handed over (read once, from a pipe only this process inherited).
///
/// # Errors
///
/// [`ConnectError::NotInvited`] in a process no server started (or the
/// second time); [`ConnectError::BadInvitation`] if the parent handed over
/// something that is not an invitation; [`ConnectError::Timeout`] if the
/// invitation did not come whole in time; the rest as [`connect`].
pub fn connect_invited() -> Result<Pipe, ConnectError> {
    connect_invited_with(ConnectOptions::new())
}

/// [`connect_invited`] with `options` (their token is replaced by the one
/// handed over; their timeout covers reading the invitation too).
///
/// # Errors
///
/// As [`connect_invited`].
pub fn connect_invited_with(options: ConnectOptions) -> Result<Pipe, ConnectError> {
    let value = std::env::var(INVITE_ENV)
        .map_err(|_| ConnectError::NotInvited(format!("{INVITE_ENV} is not set")))?;
    let env = InviteEnv::decode(&value)
        .map_err(|why| ConnectError::NotInvited(format!("{INVITE_ENV}={value:?}: {why}")))?;
    if !super::child_of(env.parent) {
        return Err(ConnectError::NotInvited(format!(
            "{INVITE_ENV} was set for a child of process {}, not this process",
            env.parent
        )));
    }
    // Relaxed: a once-only latch; the descriptor itself is the resource.
    if INVITE_TAKEN.swap(true, Ordering::Relaxed) {
        return Err(ConnectError::NotInvited(
            "the invitation was already used".into(),
        ));
    }
    let fd = adopt_inherited_pipe(env.fd).map_err(|e| {
        ConnectError::NotInvited(format!("{INVITE_ENV} names descriptor {}: {e}", env.fd))
    })?;
    // The note is read within the connection's time: a parent that holds
    // its end of the note's pipe open cannot hold this process.
    let deadline = Instant::now() + options.timeout;
    let bad = |why: String| ConnectError::BadInvitation {
        parent: env.parent,
        why,
    };
    let note = read_note(&fd, MAX_INVITE, deadline).map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut => ConnectError::Timeout,
        std::io::ErrorKind::InvalidData => bad(e.to_string()),
        _ => ConnectError::Io(e),
    })?;
    drop(fd);
    let invite = Invite::decode(&note).map_err(|why| bad(why.to_string()))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let options = match invite.token {
        Some(token) => options.token(Token::from_bytes(token)),
        None => options,
    }
    .timeout(left);
    options.connect(Address::from_wire(invite.file, &invite.name))
}
