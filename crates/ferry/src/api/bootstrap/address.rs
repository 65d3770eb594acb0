//! Where a named server listens, and the secret it may ask for.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::base::sys::{SocketName, random_bytes};
use crate::base::wire::handshake::TOKEN_LEN;

/// Prefix of every abstract name ferry binds, so ferry's names never meet
/// another program's.
const ABSTRACT_PREFIX: &str = "ferry.";

/// Where a [`Server`](crate::Server) listens and clients
/// [`connect`](crate::connect).
///
/// A plain name (`"my-service"`, or [`Address::named`]) is an abstract
/// socket on Linux: no file, gone with its server, so a crashed server
/// leaves nothing behind. [`Address::file`] and [`Address::in_runtime_dir`]
/// name a socket file, made with mode 0600 (its owner only); a file left
/// by a server that died is reclaimed by the next [`Server::bind`](crate::Server::bind).
/// Either way, a server accepts only its own user unless told otherwise.
///
/// ```
/// let named = ferry::Address::from("my-service");
/// assert_eq!(named.to_string(), "@ferry.my-service");
/// let file = ferry::Address::file("/tmp/my-service.sock");
/// assert_eq!(file.to_string(), "/tmp/my-service.sock");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// An abstract socket name (Linux), without ferry's prefix.
    Named(String),
    /// A socket file.
    File(PathBuf),
}

impl Address {
    /// An abstract socket name.
    pub fn named(name: impl Into<String>) -> Self {
        Self::Named(name.into())
    }

    /// A socket file at `path`.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self::File(path.into())
    }

    /// A socket file named `name.sock` in `$XDG_RUNTIME_DIR` (a directory
    /// only its user can enter).
    ///
    /// # Errors
    ///
    /// `NotFound` if `XDG_RUNTIME_DIR` is not set or is not an absolute path.
    pub fn in_runtime_dir(name: &str) -> std::io::Result<Self> {
        let dir = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "XDG_RUNTIME_DIR is not set to an absolute path",
                )
            })?;
        Ok(Self::File(dir.join(format!("{name}.sock"))))
    }

    /// The abstract name's bytes (with ferry's prefix), or the path.
    pub(crate) fn with_socket_name<R>(&self, f: impl FnOnce(&SocketName<'_>) -> R) -> R {
        match self {
            Self::Named(name) => {
                let bytes = format!("{ABSTRACT_PREFIX}{name}");
                f(&SocketName::Abstract(bytes.as_bytes()))
            }
            Self::File(path) => f(&SocketName::Path(path)),
        }
    }

    /// The bytes an invitation carries, and whether they name a file.
    pub(crate) fn to_wire(&self) -> (bool, Vec<u8>) {
        use std::os::unix::ffi::OsStrExt;
        match self {
            Self::Named(name) => (false, name.as_bytes().to_vec()),
            Self::File(path) => (true, path.as_os_str().as_bytes().to_vec()),
        }
    }

    /// The address an invitation named (a name that is not UTF-8 is taken
    /// byte for byte, lossily).
    pub(crate) fn from_wire(file: bool, name: &[u8]) -> Self {
        use std::os::unix::ffi::OsStrExt;
        match file {
            true => Self::File(Path::new(std::ffi::OsStr::from_bytes(name)).to_path_buf()),
            false => Self::Named(String::from_utf8_lossy(name).into_owned()),
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_socket_name(|name| name.fmt(f))
    }
}

impl From<&str> for Address {
    fn from(name: &str) -> Self {
        Self::named(name)
    }
}

impl From<String> for Address {
    fn from(name: String) -> Self {
        Self::named(name)
    }
}

impl From<&Path> for Address {
    fn from(path: &Path) -> Self {
        Self::file(path)
    }
}

impl From<PathBuf> for Address {
    fn from(path: PathBuf) -> Self {
        Self::file(path)
    }
}

/// A secret (256 random bits) a server asks every client for: only
/// processes it was handed to can connect, whatever their user.
///
/// A server started with [`ServerOptions::token`](crate::ServerOptions::token)
/// hands it to the children it starts with [`Server::spawn`](crate::Server::spawn)
/// through an inherited pipe that only the child reads (not the
/// environment or the command line, which other processes of the user can
/// read). It is compared in constant time, and never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Token([u8; TOKEN_LEN]);

impl Token {
    /// A new token from the kernel's random number generator.
    ///
    /// # Errors
    ///
    /// If the kernel gives no random bytes.
    pub fn random() -> std::io::Result<Self> {
        let mut bytes = [0u8; TOKEN_LEN];
        random_bytes(&mut bytes)?;
        Ok(Self(bytes))
    }

    /// A token from bytes agreed on some other way.
    pub fn from_bytes(bytes: [u8; TOKEN_LEN]) -> Self {
        Self(bytes)
    }

    /// The token's bytes, to hand to a client by a way of your own.
    pub fn as_bytes(&self) -> &[u8; TOKEN_LEN] {
        &self.0
    }

    /// Whether `other` is this token, in time that does not depend on
    /// where they differ.
    pub(crate) fn matches(&self, other: &[u8; TOKEN_LEN]) -> bool {
        let diff = self
            .0
            .iter()
            .zip(other)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}
