//! `ferry_server`: ferry's named server (same user by `SO_PEERCRED`, an
//! optional 256-bit token), and connecting to one.

use std::time::{Duration, Instant};

use crate::pipe::{Wait, ferry_pipe};
use crate::status::{
    FERRY_DISCONNECTED, FERRY_PROTOCOL, FERRY_REFUSED, FERRY_TIMED_OUT, FERRY_WOULD_BLOCK, Failure,
    Result,
};

/// A named server: clients connect to it by name (`ferry_connect`) and
/// each accepted one is a pipe. Freed by `ferry_server_close`, which frees
/// the name.
#[allow(non_camel_case_types)]
pub struct ferry_server {
    server: ferry::Server,
}

/// Who a client is, as the kernel recorded it when it connected.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct ferry_credentials {
    /// Its process id; 0 when it is outside this process's pid namespace.
    pub pid: u32,
    /// Its effective user id.
    pub uid: u32,
    /// Its effective group id.
    pub gid: u32,
}

/// How long an accept that waits for ever waits at a time.
const ACCEPT_SLICE: Duration = Duration::from_secs(3600);

/// A name as an address: one with a `/` is a socket file's path, any
/// other an abstract name (nothing on disk).
fn address(name: &str) -> Result<ferry::Address> {
    if name.is_empty() {
        return Err(Failure::invalid("the server's name is empty"));
    }
    Ok(match name.contains('/') {
        true => ferry::Address::file(name),
        false => ferry::Address::named(name),
    })
}

impl ferry_server {
    pub(crate) fn bind(name: &str, token: Option<[u8; 32]>) -> Result<Self> {
        let mut options = ferry::ServerOptions::new();
        if let Some(token) = token {
            options = options.token(ferry::Token::from_bytes(token));
        }
        let server = options
            .bind(address(name)?)
            .map_err(|e| Failure::io(&format!("binding the server {name:?}"), &e))?;
        Ok(Self { server })
    }

    /// The next client, waiting as `wait` says. A client turned away (a
    /// wrong token) or gone mid-handshake is skipped.
    pub(crate) fn accept(&self, wait: Wait) -> Result<(ferry_pipe, ferry_credentials)> {
        let start = Instant::now();
        loop {
            let slice = match wait {
                Wait::Never => Duration::ZERO,
                Wait::For(d) => d.saturating_sub(start.elapsed()),
                Wait::Forever => ACCEPT_SLICE,
            };
            let got = match wait {
                Wait::Never => self.server.try_accept(),
                _ => self.server.accept_timeout(slice),
            };
            match got {
                Ok(connection) => {
                    let peer = connection.peer;
                    let credentials = ferry_credentials {
                        pid: peer.pid.unwrap_or(0),
                        uid: peer.uid,
                        gid: peer.gid,
                    };
                    return Ok((ferry_pipe::new(connection.pipe), credentials));
                }
                Err(ferry::AcceptError::Empty) => {
                    return Err(Failure::new(FERRY_WOULD_BLOCK, "no client is waiting"));
                }
                Err(ferry::AcceptError::Timeout) => match wait {
                    Wait::Forever => continue,
                    _ if slice.is_zero() || start.elapsed() >= slice => {
                        return Err(Failure::new(
                            FERRY_TIMED_OUT,
                            "no client came before the timeout",
                        ));
                    }
                    _ => continue,
                },
                Err(ferry::AcceptError::Io(e)) => {
                    return Err(Failure::io("accepting a client", &e));
                }
                // Turned away, or gone mid-handshake: the next one.
                Err(_) if matches!(wait, Wait::Never) => {
                    return Err(Failure::new(FERRY_WOULD_BLOCK, "no client is waiting"));
                }
                Err(_) => continue,
            }
        }
    }

    pub(crate) fn ready_fd(&self) -> Result<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        let fd = (self.server.ready_fd())
            .map_err(|e| Failure::io("making the server's readiness descriptor", &e))?;
        Ok(fd.as_raw_fd())
    }
}

/// Connects to the server `name`, with its token if it has one.
pub(crate) fn connect(name: &str, token: Option<[u8; 32]>, wait: Wait) -> Result<ferry_pipe> {
    let mut options = ferry::ConnectOptions::new();
    if let Some(token) = token {
        options = options.token(ferry::Token::from_bytes(token));
    }
    // A connection is a handshake: it always waits for the server's
    // answer, for the default time unless a timeout is given.
    if let Wait::For(d) = wait {
        options = options.timeout(d);
    }
    let pipe = options.connect(address(name)?).map_err(|e| {
        let words = e.to_string();
        match e {
            ferry::ConnectError::NoServer(_) | ferry::ConnectError::Closed => {
                Failure::new(FERRY_DISCONNECTED, words)
            }
            ferry::ConnectError::Refused(_) | ferry::ConnectError::UntrustedServer { .. } => {
                Failure::new(FERRY_REFUSED, words)
            }
            ferry::ConnectError::Timeout => Failure::new(FERRY_TIMED_OUT, words),
            ferry::ConnectError::Protocol(_) => Failure::new(FERRY_PROTOCOL, words),
            ferry::ConnectError::Io(io) => Failure::io("connecting", &io),
            _ => Failure::new(crate::status::FERRY_INTERNAL, words),
        }
    })?;
    Ok(ferry_pipe::new(pipe))
}

/// A new random token.
pub(crate) fn new_token() -> Result<[u8; 32]> {
    let token = ferry::Token::random().map_err(|e| Failure::io("making a token", &e))?;
    Ok(*token.as_bytes())
}
