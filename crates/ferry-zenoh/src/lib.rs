//! A lossless bridge that carries ferry pipes between machines over
//! [Zenoh](https://zenoh.io).
//!
//! On one machine a bridge **exports** a local ferry server under a Zenoh
//! key prefix; on another a bridge **imports** that prefix as a local
//! ferry server name. A program connects to the imported name with
//! [`ferry::connect`] as if the service were local; each connection becomes
//! a new pipe to the exported server, with a key space of its own. A
//! bridge can also export a single pipe end or channel half, to the first
//! far program that connects ([`Bridge::export_end`]).
//!
//! ```no_run
//! use ferry_zenoh::{Bridge, BridgeOptions};
//! // Machine A: the service listens at the local name "camera".
//! let a = Bridge::open(BridgeOptions::new().listen("tcp/0.0.0.0:7447"))?;
//! let _export = a.export("camera", None, "robot/camera")?;
//! // Machine B: programs connect to "camera" here.
//! let b = Bridge::open(BridgeOptions::new().connect("tcp/machine-a:7447"))?;
//! let _import = b.import("robot/camera", "camera", None)?;
//! let pipe = ferry::connect("camera")?;
//! pipe.send(b"frame please")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a bridged pipe promises
//!
//! - **In order, nothing lost, nothing duplicated.** Every message carries
//!   its direction's sequence number; a gap (messages lost when the link
//!   between the bridges broke and came back) breaks that pipe: both
//!   bridges log why, and both local programs see `Disconnected`. Nothing
//!   is skipped silently.
//! - **Bounded memory, backpressure end to end.** The receiving bridge
//!   grants a window (256 messages and 64 MiB by default) and the sending
//!   bridge sends no more than granted. A slow consumer stops the grants;
//!   the sending bridge stops reading its ring; the ring fills and the far
//!   program's `send` waits (`try_send` says `Full`), as on one machine.
//!   Zenoh's own queues never fill for it (publishers use
//!   `CongestionControl::Block` and reliable delivery as a backstop).
//!   Zenoh's callbacks never block: they record and wake a thread.
//! - **Death is pushed.** Each side of a pipe holds a Zenoh liveliness
//!   token; when the far bridge dies, or the link between the bridges is
//!   down for longer than the lease ([`BridgeOptions::lease`], 1 s by
//!   default), the local program sees `Disconnected` after it received
//!   everything that arrived. A program that dies is seen by its own bridge
//!   as ferry sees any peer die, and the far program then sees
//!   `Disconnected` after every message was delivered.
//! - **Bytes only.** Descriptors and pipe ends cannot leave the machine:
//!   the bridge's ends are declared bytes only
//!   ([`ferry::Receiver::set_bytes_only`]), so a local program that sends
//!   one is told `NotTransferable` and gets it back. Through an import or
//!   an exported server that holds from the first message on (the
//!   bridge's ends take bytes only before the program is welcomed:
//!   [`ferry::PipeOptions::bytes_only`]); an end given to
//!   [`Bridge::export_end`] is declared when it is exported. A hostile
//!   program that ignores the declaration gets nothing across: the bridge
//!   forwards bytes alone and closes whatever came with them.
//!
//! # Trust
//!
//! A bridged pipe's key space is a capability: whoever can publish on it
//! can speak on that pipe (and a record that breaks the rules breaks the
//! pipe, never the bridge). Run bridges on a network you trust, or
//! authenticate them with Zenoh's TLS transport (the `tls` feature, on by
//! default: `tls/host:port` locators, mutual TLS) or its public-key
//! authentication (`transport/auth/pubkey`), and restrict key prefixes
//! with Zenoh's access control lists, in a configuration file given to
//! [`BridgeOptions::config_file`]. The exporting bridge presents the local
//! server's token ([`ferry::Token`]) on every connection it makes, so a
//! server that asks for one is reached only through bridges given it; an
//! import can ask the local programs that connect to it for a token of its
//! own (`ServerOptions::token` given to [`Bridge::import`]).
//!
//! Everything from the far bridge is checked before use (see [`wire`]).

#![warn(missing_docs)]

mod bridged;
pub mod credit;
pub mod wire;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use zenoh::Wait;
use zenoh::query::Query;

use crate::bridged::{Prepared, Setup};
use crate::wire::{Open, Side, Window};

/// Where a bridge reports what happens to its pipes (opened, ended,
/// broken, and why).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

/// How a bridge meets other bridges, and the terms of its pipes.
#[derive(Clone)]
pub struct BridgeOptions {
    listen: Vec<String>,
    connect: Vec<String>,
    lease: Duration,
    window: Window,
    max_message: u64,
    open_timeout: Duration,
    config_file: Option<PathBuf>,
    log: Log,
}

impl fmt::Debug for BridgeOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BridgeOptions")
            .field("listen", &self.listen)
            .field("connect", &self.connect)
            .field("lease", &self.lease)
            .field("window", &self.window)
            .field("max_message", &self.max_message)
            .finish_non_exhaustive()
    }
}

impl Default for BridgeOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl BridgeOptions {
    /// Peer mode, multicast scouting off, no endpoints, a 1 s lease, a
    /// window of 256 messages and 64 MiB, messages up to 1 GiB, reports
    /// to standard error.
    pub fn new() -> Self {
        Self {
            listen: Vec::new(),
            connect: Vec::new(),
            lease: Duration::from_secs(1),
            window: Window {
                messages: 256,
                bytes: 64 << 20,
            },
            max_message: 1 << 30,
            open_timeout: Duration::from_secs(5),
            config_file: None,
            log: Arc::new(|line| eprintln!("ferry-bridge: {line}")),
        }
    }

    /// Listens for other bridges at a Zenoh endpoint (`tcp/0.0.0.0:7447`).
    pub fn listen(mut self, endpoint: impl Into<String>) -> Self {
        self.listen.push(endpoint.into());
        self
    }

    /// Connects to another bridge's endpoint (`tcp/10.0.0.2:7447`); Zenoh
    /// retries until it answers.
    pub fn connect(mut self, endpoint: impl Into<String>) -> Self {
        self.connect.push(endpoint.into());
        self
    }

    /// How long the link between two bridges may be silent before each
    /// takes the other for dead (and its pipes end): 1 s by default, for a
    /// LAN; Zenoh's own default is 10 s.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// What this bridge queues for each pipe's incoming direction at most.
    pub fn window(mut self, messages: u64, bytes: u64) -> Self {
        self.window = Window {
            messages: messages.max(1),
            bytes: bytes.max(1),
        };
        self
    }

    /// The largest message this bridge takes from the far side.
    pub fn max_message(mut self, bytes: u64) -> Self {
        self.max_message = bytes.max(1);
        self
    }

    /// A Zenoh configuration file (JSON5) to start from: TLS, public-key
    /// authentication, access control. The options above are applied on
    /// top of it.
    pub fn config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_file = Some(path.into());
        self
    }

    /// Where the bridge reports what happens to its pipes.
    pub fn log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.log = Arc::new(log);
        self
    }

    fn zenoh_config(&self) -> Result<zenoh::Config, Error> {
        let mut config = match &self.config_file {
            Some(path) => zenoh::Config::from_file(path)
                .map_err(|e| Error::Config(format!("reading {}: {e}", path.display())))?,
            None => zenoh::Config::default(),
        };
        let quoted = |list: &[String]| {
            let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(","))
        };
        let lease_ms = self.lease.as_millis().max(1);
        for (key, value) in [
            ("mode", "\"peer\"".to_owned()),
            ("scouting/multicast/enabled", "false".to_owned()),
            ("listen/endpoints", quoted(&self.listen)),
            ("connect/endpoints", quoted(&self.connect)),
            ("transport/link/tx/lease", lease_ms.to_string()),
            ("transport/link/tx/keep_alive", "4".to_owned()),
        ] {
            config
                .insert_json5(key, &value)
                .map_err(|e| Error::Config(format!("{key} = {value}: {e}")))?;
        }
        Ok(config)
    }
}

/// Why a bridge could not do what it was asked.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The options make no Zenoh configuration.
    Config(String),
    /// Zenoh refused (an endpoint in use, a key that is not one).
    Zenoh(String),
    /// This machine refused (the local server name taken, no memory).
    Io(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(why) => write!(f, "the bridge's Zenoh configuration: {why}"),
            Error::Zenoh(why) => write!(f, "Zenoh: {why}"),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

fn zenoh_error(e: impl fmt::Display) -> Error {
    Error::Zenoh(e.to_string())
}

/// A bridge: one Zenoh session, which exports and imports prefixes.
pub struct Bridge {
    session: zenoh::Session,
    options: BridgeOptions,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("zid", &self.session.zid())
            .field("options", &self.options)
            .finish()
    }
}

/// A prefix being exported; dropping it stops taking new pipes (those open
/// go on until they end).
pub struct Export {
    _queryable: zenoh::query::Queryable<()>,
}

/// A prefix being imported; dropping it stops taking new connections
/// (its thread wakes at once and lets the name go; pipes open go on until
/// they end).
pub struct Import {
    /// Dropped to wake the accepting thread, which then ends.
    _stop: ferry::Sender,
}

/// A local end to export once ([`Bridge::export_end`]).
#[derive(Debug)]
pub enum LocalEnd {
    /// A pipe end: both ways.
    Pipe(ferry::Pipe),
    /// A channel's sending half: what the far program sends comes here.
    Sender(ferry::Sender),
    /// A channel's receiving half: what is sent to it here goes to the far
    /// program.
    Receiver(ferry::Receiver),
}

impl LocalEnd {
    fn receiver(&self) -> Option<&ferry::Receiver> {
        match self {
            LocalEnd::Pipe(pipe) => Some(pipe.receiver()),
            LocalEnd::Sender(_) => None,
            LocalEnd::Receiver(rx) => Some(rx),
        }
    }

    fn halves(self) -> (Option<ferry::Sender>, Option<ferry::Receiver>) {
        match self {
            LocalEnd::Pipe(pipe) => {
                let (tx, rx) = pipe.split();
                (Some(tx), Some(rx))
            }
            LocalEnd::Sender(tx) => (Some(tx), None),
            LocalEnd::Receiver(rx) => (None, Some(rx)),
        }
    }
}

impl From<ferry::Pipe> for LocalEnd {
    fn from(pipe: ferry::Pipe) -> Self {
        LocalEnd::Pipe(pipe)
    }
}

impl From<ferry::Sender> for LocalEnd {
    fn from(tx: ferry::Sender) -> Self {
        LocalEnd::Sender(tx)
    }
}

impl From<ferry::Receiver> for LocalEnd {
    fn from(rx: ferry::Receiver) -> Self {
        LocalEnd::Receiver(rx)
    }
}

/// What an export bridges each pipe to.
enum Source {
    /// A new connection to a local server.
    Server {
        address: ferry::Address,
        token: Option<ferry::Token>,
    },
    /// One end, until the first pipe takes it (boxed: an end is large).
    End(Option<Box<LocalEnd>>),
}

impl Source {
    /// Whether what the far program sends has somewhere to go.
    fn takes(&self) -> bool {
        match self {
            Source::Server { .. } => true,
            Source::End(end) => end
                .as_ref()
                .is_some_and(|end| !matches!(**end, LocalEnd::Receiver(_))),
        }
    }

    fn take_end(&mut self) -> Option<LocalEnd> {
        match self {
            Source::End(end) => end.take().map(|end| *end),
            Source::Server { .. } => None,
        }
    }
}

/// New pipes waiting for the exporting thread: a bound, so a flood of
/// open queries costs this bridge no more than this.
const PENDING_OPENS: usize = 64;

impl Bridge {
    /// Opens the bridge's Zenoh session.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for options Zenoh does not take, [`Error::Zenoh`]
    /// if the session does not open (an endpoint in use).
    pub fn open(options: BridgeOptions) -> Result<Bridge, Error> {
        let session = zenoh::open(options.zenoh_config()?)
            .wait()
            .map_err(zenoh_error)?;
        Ok(Bridge { session, options })
    }

    /// The bridge's Zenoh session, for a program that also speaks Zenoh
    /// itself (the benchmark's raw pub/sub rows share it).
    pub fn session(&self) -> &zenoh::Session {
        &self.session
    }

    /// The terms this bridge offers the far side of each pipe.
    fn terms(&self) -> Open {
        Open {
            window: self.options.window,
            max_message: self.options.max_message,
        }
    }

    fn setup(&self, prefix: &str, id: String, me: Side) -> Setup {
        Setup {
            session: self.session.clone(),
            prefix: prefix.to_owned(),
            id,
            me,
            mine: self.terms(),
            log: Arc::clone(&self.options.log),
        }
    }

    /// Exports the local ferry server at `server` under `prefix`: each
    /// pipe a far bridge opens there connects to the server (presenting
    /// `token`, if the server asks for one).
    ///
    /// # Errors
    ///
    /// [`Error::Zenoh`] if `prefix` is not a key expression or Zenoh
    /// refuses the queryable.
    pub fn export(
        &self,
        server: impl Into<ferry::Address>,
        token: Option<ferry::Token>,
        prefix: &str,
    ) -> Result<Export, Error> {
        let source = Source::Server {
            address: server.into(),
            token,
        };
        self.export_source(source, prefix)
    }

    /// Exports one local end under `prefix`, once: the first pipe a far
    /// bridge opens there is bridged to it, and later ones are refused (a
    /// far program that connects again sees `Disconnected`). A pipe end
    /// carries both ways; a channel's [`ferry::Sender`] takes what the far
    /// program sends (its reads see `Disconnected`: nothing comes back), a
    /// [`ferry::Receiver`] carries what this side's program sends to it
    /// (the far program reads, and sees `Disconnected` after the last
    /// message once that program hangs up; its own sends fail
    /// `Disconnected` at once). A typed channel's half goes as
    /// its byte half (`into_bytes`). The end's receiver is declared bytes
    /// only at once ([`ferry::Receiver::set_bytes_only`]): set up the end
    /// before its sender sends a descriptor, or that descriptor is closed
    /// at the bridge.
    ///
    /// ```no_run
    /// use ferry_zenoh::{Bridge, BridgeOptions};
    /// let bridge = Bridge::open(BridgeOptions::new().listen("tcp/0.0.0.0:7447"))?;
    /// let (tx, rx) = ferry::bytes::channel(64)?;
    /// // A far program that connects to the imported `robot/log` reads
    /// // what is sent on `tx` here.
    /// let _export = bridge.export_end(rx, "robot/log")?;
    /// tx.send(b"started")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Bridge::export`].
    pub fn export_end(&self, end: impl Into<LocalEnd>, prefix: &str) -> Result<Export, Error> {
        let end = end.into();
        if let Some(rx) = end.receiver() {
            rx.set_bytes_only(true);
        }
        self.export_source(Source::End(Some(Box::new(end))), prefix)
    }

    fn export_source(&self, mut source: Source, prefix: &str) -> Result<Export, Error> {
        check_prefix(prefix)?;
        let (queue, opens) = mpsc::sync_channel::<Query>(PENDING_OPENS);
        let log = Arc::clone(&self.options.log);
        let queryable = self
            .session
            .declare_queryable(wire::open_keys(prefix))
            .callback(move |query: Query| {
                if queue.try_send(query).is_err() {
                    log("too many pipes waiting to open: one was dropped (its importer times out)");
                }
            })
            .wait()
            .map_err(zenoh_error)?;
        let bridge = Bridge {
            session: self.session.clone(),
            options: self.options.clone(),
        };
        let prefix = prefix.to_owned();
        thread::Builder::new()
            .name("ferry-bridge export".into())
            .spawn(move || {
                for query in opens {
                    bridge.open_exported(&prefix, &mut source, &query);
                }
            })?;
        Ok(Export {
            _queryable: queryable,
        })
    }

    /// One open query: a connection to the local server (or the exported
    /// end), bridged.
    fn open_exported(&self, prefix: &str, source: &mut Source, query: &Query) {
        let log = &self.options.log;
        let refuse = |why: String| {
            log(&format!("refused a pipe: {why}"));
            let _ = query.reply_err(why).wait();
        };
        let Some(id) = wire::id_of_open(prefix, query.key_expr().as_str()) else {
            return refuse(format!("{} is not a pipe to open", query.key_expr()));
        };
        let far = match query.payload().map(|p| Open::decode(&p.to_bytes())) {
            Some(Ok(far)) => far,
            Some(Err(why)) => return refuse(format!("its terms: {why}")),
            None => return refuse("no terms".into()),
        };
        let (to, local) = match source {
            Source::Server { address, token } => {
                // Bytes only before the server is welcomed to write (see
                // the crate's docs).
                let mut connect = ferry::ConnectOptions::new()
                    .timeout(self.options.open_timeout)
                    .pipe_options(ferry::PipeOptions::new().bytes_only(true));
                if let Some(token) = token {
                    connect = connect.token(token.clone());
                }
                match connect.connect(address.clone()) {
                    Ok(pipe) => (address.to_string(), Some(LocalEnd::Pipe(pipe))),
                    Err(e) => {
                        return refuse(format!("connecting to the local server {address}: {e}"));
                    }
                }
            }
            // Taken only once the far side is known to be there.
            Source::End(None) => {
                return refuse(format!("{prefix} is one end, and it is taken"));
            }
            Source::End(Some(_)) => ("the exported end".to_owned(), None),
        };
        let setup = self.setup(prefix, id.clone(), Side::Exporter);
        let prepared = match Prepared::declare(setup) {
            Ok(prepared) => prepared,
            Err(e) => return refuse(format!("declaring its keys: {e}")),
        };
        let mut mine = self.terms();
        if !source.takes() {
            // The far program's sends fail at once, rather than go nowhere.
            mine.window = Open::CLOSED;
        }
        if let Err(e) = query.reply(query.key_expr().clone(), mine.encode()).wait() {
            return log(&format!("pipe {id}: replying to its opener: {e}"));
        }
        if !prepared.far_is_alive(self.options.open_timeout) {
            return log(&format!("pipe {id}: its opener is gone"));
        }
        let Some(local) = local.or_else(|| source.take_end()) else {
            return;
        };
        let (tx, rx) = local.halves();
        match prepared.start(tx, rx, far) {
            Ok(()) => log(&format!("pipe {id}: opened to {to}")),
            Err(e) => log(&format!("pipe {id}: starting its threads: {e}")),
        }
    }

    /// Imports `prefix` as the local ferry server name `local`: each
    /// program that connects there gets a pipe to the exported server.
    /// `options` sets the local server's terms (who may connect, a token).
    ///
    /// # Errors
    ///
    /// [`Error::Zenoh`] if `prefix` is not a key expression; [`Error::Io`]
    /// if the local name cannot be bound.
    pub fn import(
        &self,
        prefix: &str,
        local: impl Into<ferry::Address>,
        options: Option<ferry::ServerOptions>,
    ) -> Result<Import, Error> {
        check_prefix(prefix)?;
        let server = options.unwrap_or_default().bytes_only(true).bind(local)?;
        // The accepting thread waits on the server and on this channel,
        // which the `Import` holds: no timer, and a drop ends it at once.
        let (stop, stopped) = ferry::bytes::channel(1)?;
        let mut select = ferry::Select::new()?;
        let at = select.add(server).map_err(|e| e.error)?;
        let end = select.add(stopped).map_err(|e| e.error)?;
        let bridge = Arc::new(Bridge {
            session: self.session.clone(),
            options: self.options.clone(),
        });
        let prefix = prefix.to_owned();
        let log = Arc::clone(&self.options.log);
        thread::Builder::new()
            .name("ferry-bridge import".into())
            .spawn(move || {
                loop {
                    let accepted = match select.ready() {
                        Ok(key) if key == end => return,
                        Ok(_) => match select.get::<ferry::Server>(at) {
                            Some(server) => server.try_accept(),
                            None => return,
                        },
                        Err(e) => Err(ferry::AcceptError::Io(e)),
                    };
                    match accepted {
                        Ok(connection) => {
                            // Each opens on a thread of its own: one slow
                            // far bridge holds up no other connection.
                            let (bridge, prefix) = (Arc::clone(&bridge), prefix.clone());
                            let opening = thread::Builder::new()
                                .name("ferry-bridge open".into())
                                .spawn(move || bridge.open_imported(&prefix, connection.pipe));
                            if let Err(e) = opening {
                                log(&format!("a connection dropped: no thread to open it: {e}"));
                            }
                        }
                        // A connection still in its handshake.
                        Err(ferry::AcceptError::Empty) => {}
                        Err(e) => {
                            log(&format!("accepting on the imported name: {e}"));
                            if let ferry::AcceptError::Io(_) = e {
                                // A local failure (out of descriptors):
                                // look again later, not in a spin.
                                thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                }
            })?;
        Ok(Import { _stop: stop })
    }

    /// One local connection: a pipe opened on the exporting bridge.
    fn open_imported(&self, prefix: &str, pipe: ferry::Pipe) {
        let log = &self.options.log;
        let id = match wire::new_id() {
            Ok(id) => id,
            Err(e) => return log(&format!("a new pipe's id: {e}")),
        };
        let prepared = match Prepared::declare(self.setup(prefix, id.clone(), Side::Importer)) {
            Ok(prepared) => prepared,
            Err(e) => return log(&format!("pipe {id}: declaring its keys: {e}")),
        };
        let mine = self.terms();
        let replies = self
            .session
            .get(wire::open_key(prefix, &id))
            .payload(mine.encode())
            .timeout(self.options.open_timeout)
            .wait();
        let reply = match replies.map(|r| r.recv()) {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => {
                return log(&format!(
                    "pipe {id}: no bridge exports {prefix} (no answer in {:?})",
                    self.options.open_timeout
                ));
            }
            Err(e) => return log(&format!("pipe {id}: asking to open: {e}")),
        };
        let far = match reply.result() {
            Ok(sample) => Open::decode(&sample.payload().to_bytes()),
            Err(refusal) => {
                // At most `MAX_REASON` bytes: the far bridge chooses it.
                let bytes = refusal.payload().to_bytes();
                let why = String::from_utf8_lossy(&bytes[..bytes.len().min(wire::MAX_REASON)]);
                return log(&format!("pipe {id}: the exporting bridge refused: {why}"));
            }
        };
        let (tx, rx) = pipe.split();
        match far {
            // A far side that takes nothing: dropping the receiving half
            // fails the local program's sends (`Disconnected`) at once.
            Ok(far) => match prepared.start(Some(tx), (!far.takes_nothing()).then_some(rx), far) {
                Ok(()) => log(&format!("pipe {id}: opened to {prefix}")),
                Err(e) => log(&format!("pipe {id}: starting its threads: {e}")),
            },
            Err(why) => log(&format!("pipe {id}: the exporting bridge's terms: {why}")),
        }
    }
}

/// Whether `prefix` can carry pipes: a key expression without wildcards.
fn check_prefix(prefix: &str) -> Result<(), Error> {
    let key = zenoh::key_expr::KeyExpr::try_from(prefix).map_err(zenoh_error)?;
    if key.as_str().contains('*') || key.as_str().contains('$') {
        return Err(Error::Zenoh(format!(
            "{prefix} has a wildcard: a prefix names one service"
        )));
    }
    Ok(())
}
