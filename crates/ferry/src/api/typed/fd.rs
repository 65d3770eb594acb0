//! File descriptors inside a typed message.
//!
//! A descriptor field travels as a handle, as a channel half does: the
//! encode puts a duplicate of it among the message's ends (one `fcntl`;
//! the value keeps its own, so encoding from a reference is fine), and the
//! receiver's decode claims the descriptor that arrived with the message.
//! In one process nothing is encoded: the value, descriptor and all, moves.

use std::fs::File;
use std::ops::Deref;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::handles;
use crate::api::channel::Handle;
use crate::api::codec::EncodeError;
use crate::base::sys::duplicate;

/// A file descriptor as a field of a typed message (any kind: a file, a
/// socket, a memfd, an eventfd). For a field of type `OwnedFd` or `File`
/// itself, use `#[serde(with = "ferry::typed::fd")]` instead.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use std::io::{Read, Seek, Write};
///
/// #[derive(Serialize, Deserialize)]
/// struct Upload {
///     name: String,
///     data: ferry::typed::Fd,
/// }
///
/// let (tx, rx) = ferry::channel::<Upload>(16)?;
/// let mut file = tempfile()?;
/// file.write_all(b"contents")?;
/// tx.send(Upload { name: "a.txt".into(), data: file.into() })?;
/// let mut file = std::fs::File::from(rx.recv()?.data.into_owned());
/// file.rewind()?;
/// let mut text = String::new();
/// file.read_to_string(&mut text)?;
/// assert_eq!(text, "contents");
/// # fn tempfile() -> std::io::Result<std::fs::File> {
/// #     let path = std::env::temp_dir().join(format!("ferry-fd-doc-{}", std::process::id()));
/// #     let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
/// #     std::fs::remove_file(&path)?;
/// #     Ok(file)
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Fd(pub OwnedFd);

impl Fd {
    /// The descriptor.
    pub fn into_owned(self) -> OwnedFd {
        self.0
    }
}

impl From<OwnedFd> for Fd {
    fn from(fd: OwnedFd) -> Self {
        Self(fd)
    }
}

impl From<File> for Fd {
    fn from(file: File) -> Self {
        Self(file.into())
    }
}

impl From<Fd> for OwnedFd {
    fn from(fd: Fd) -> Self {
        fd.0
    }
}

impl From<Fd> for File {
    fn from(fd: Fd) -> Self {
        fd.0.into()
    }
}

impl Deref for Fd {
    type Target = OwnedFd;
    fn deref(&self) -> &OwnedFd {
        &self.0
    }
}

impl AsFd for Fd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl Serialize for Fd {
    /// A descriptor inside a value travels as a handle; it can be
    /// serialized only by a ferry typed send.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serialize(&self.0, serializer)
    }
}

impl<'de> Deserialize<'de> for Fd {
    /// Claims the descriptor the message carried under this handle.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserialize(deserializer).map(Self)
    }
}

/// Serializes any descriptor as a handle (for `#[serde(with =
/// "ferry::typed::fd")]`): a duplicate of it travels with the message.
///
/// # Errors
///
/// Outside a ferry typed send, past [`MAX_HANDLES`](crate::MAX_HANDLES)
/// handles in one message, or if the descriptor cannot be duplicated (out
/// of descriptors).
pub fn serialize<T: AsFd, S: Serializer>(fd: &T, serializer: S) -> Result<S::Ok, S::Error> {
    let index = handles::push_fd(|| {
        duplicate(fd.as_fd())
            .map(Handle::Fd)
            .map_err(|e| EncodeError::Handle(format!("cannot duplicate a descriptor: {e}")))
    })
    .map_err(serde::ser::Error::custom)?;
    serializer.serialize_u32(index)
}

/// Deserializes a descriptor the message carried (for `#[serde(with =
/// "ferry::typed::fd")]`) as any type made from an `OwnedFd` (`OwnedFd`,
/// `File`, `UnixStream`, ...).
///
/// # Errors
///
/// Outside a ferry typed receive, or if the handle is not a descriptor
/// the message carried.
pub fn deserialize<'de, T: From<OwnedFd>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    let index = u32::deserialize(deserializer)?;
    match handles::claim(index).map_err(serde::de::Error::custom)? {
        Handle::Fd(fd) => Ok(T::from(fd)),
        _ => Err(serde::de::Error::custom(format!(
            "handle {index} is not a descriptor"
        ))),
    }
}
