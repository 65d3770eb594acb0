//! Typed channels: send Rust values, not byte strings.
//!
//! [`channel`] makes a [`Sender<T>`] and a [`Receiver<T>`], holding at most
//! a given number of values, for any
//! `T: Serialize + DeserializeOwned + Send + 'static`.
//!
//! - **In one process** the value itself is moved through a queue: no
//!   encoding, no copy of its heap data (Mojo's lazy serialization).
//! - **Across processes** values are encoded (the format and what its
//!   decoder refuses are below) and travel over a byte pipe's shared
//!   memory. Either half can go to another process inside a message (make
//!   it a field of the value: it travels as a handle, as ipc-channel's do)
//!   or by hand ([`Sender::into_bytes`], [`Receiver::from_bytes`]). Values
//!   still queued in this process when a half leaves follow it, in order.
//! - **Byte fields** that serialize as bytes ([`ByteBuf`], `serde_bytes`,
//!   [`SharedBytes`]) are one length and one copy. A large value is encoded
//!   straight into a loaned pool block, so a big byte field is copied once
//!   on each side, as with the byte pipe. A [`SharedBytes`] field of a
//!   received value is a view into the message, not a copy. A plain
//!   `Vec<u8>` is a sequence that serde walks byte by byte: wrap it in
//!   [`ByteBuf`] (or `#[serde(with = "serde_bytes")]`).
//!
//! ```
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Job {
//!     id: u64,
//!     name: String,
//!     data: ferry::typed::ByteBuf,
//! }
//!
//! let (tx, rx) = ferry::channel::<Job>(16)?;
//! tx.send(Job { id: 1, name: "resize".into(), data: vec![7; 1024].into() })?;
//! let job = rx.recv()?;
//! assert_eq!((job.id, job.data.len()), (1, 1024));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A reply channel per call, sent inside the request:
//!
//! ```
//! use serde::{Deserialize, Serialize};
//! use ferry::typed::Sender;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Add { a: i32, b: i32, reply: Sender<i32> }
//!
//! let (requests, served) = ferry::channel::<Add>(16)?;
//! let server = std::thread::spawn(move || {
//!     for Add { a, b, reply } in served.iter() {
//!         reply.send(a + b).unwrap();
//!     }
//! });
//! let (reply, answer) = ferry::channel(1)?;
//! requests.send(Add { a: 2, b: 3, reply })?;
//! assert_eq!(answer.recv()?, 5);
//! drop(requests);
//! server.join().unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The encoding, and why this one
//!
//! The format is ferry's own (see [`codec`](crate::api::typed#the-format)): a
//! compact, non-self-describing serde format much like postcard's, with a
//! decoder built for hostile input:
//!
//! - **Bounded allocation.** A string or byte length past the end of the
//!   message is refused before anything is allocated; a sequence or map
//!   count reaches serde as a size hint of at most the bytes left, so a
//!   peer's length prefix never makes this process reserve room for
//!   elements the message does not hold.
//! - **Bounded work.** At most the message's length plus [`EMPTY_ELEMENTS`]
//!   elements, so elements that encode to nothing cannot spin the decoder.
//! - **Bounded depth.** At most [`MAX_DEPTH`] nested compound values, so a
//!   deeply nested message cannot overflow the stack.
//! - **No panics** on any input (a fuzz target, `typed_decode`).
//! - **Strings read in shared memory are copied before they are checked**,
//!   so a sender that rewrites its block while this process decodes it
//!   cannot slip invalid UTF-8 past the check.
//!
//! Why this format and not postcard, bitcode, wincode or rkyv (speed on
//! the same values, and what each did with hostile input) is in the
//! dated study `docs/notes/2026-11-codec-study.md`: in short, the
//! faster ones need derives of their own, which a channel for any
//! `T: Serialize` cannot ask of its users, and the one as fast has no
//! depth limit.
//!
//! # The format
//!
//! | serde type | bytes |
//! |---|---|
//! | `bool` | one byte, `0` or `1` |
//! | `u8`, `i8` | one byte |
//! | `u16`…`u128` | LEB128 varint |
//! | `i16`…`i128` | zigzag, then LEB128 varint |
//! | `f32`, `f64` | little-endian |
//! | `char` | its scalar value as a varint |
//! | `str`, bytes | varint length, then the bytes |
//! | `None` / `Some(v)` | `0` / `1` then `v` |
//! | unit, unit struct | nothing |
//! | newtype struct | its field |
//! | tuple, tuple struct, struct | the fields in order |
//! | sequence, map | varint count, then the elements (keys and values) |
//! | enum variant | varint index, then its fields |
//! | a typed channel half, a descriptor ([`Fd`], [`fd`]) | varint index into the handles the message carries |
//!
//! Types that need a self-describing format (`#[serde(untagged)]`,
//! internally tagged enums, `flatten`) give [`Reason::NotSelfDescribing`].

mod error;
pub mod fd;
mod handles;
mod moving;
mod queue;
mod receiver;
mod remote;
mod sender;

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::api::channel::SharedBytes;
pub use crate::api::codec::{
    DecodeError, EMPTY_ELEMENTS, EncodeError, MAX_DEPTH, Reason, decode, decode_borrowed, encode,
    encode_into, encoded_len,
};
pub use error::{
    RecvError, RecvTimeoutError, SendError, SendFailure, SendTimeoutError, TryRecvError,
    TrySendError,
};
pub use fd::Fd;
#[cfg(feature = "tokio")]
pub use receiver::AsyncReceiver;
pub use receiver::Receiver;
pub use sender::Sender;

/// Makes a typed channel: a [`Sender<T>`] and a [`Receiver<T>`], both in
/// this process, holding at most `capacity` values. Nothing is shared
/// with the OS until a half leaves.
///
/// While `capacity` values are sent and not yet received,
/// [`Sender::send`] waits for a receive, [`Sender::try_send`] says
/// `Full` and [`Sender::send_timeout`] times out. The bound is the same
/// once a half has gone to another process: the byte pipe the channel
/// becomes holds at most `capacity` messages (see
/// [`PipeOptions::capacity`](crate::PipeOptions::capacity),
/// which also says where it cannot follow a sender), and its ring's bytes
/// bound it as well.
///
/// ```
/// let (tx, rx) = ferry::channel::<String>(1)?;
/// tx.send("hello".to_string())?;
/// assert!(matches!(tx.try_send("again".into()), Err(ferry::typed::TrySendError::Full(_))));
/// assert_eq!(rx.recv()?, "hello");
/// tx.try_send("again".into())?; // room again
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// `InvalidInput` for a `capacity` of 0 (no value could pass: there is no
/// rendezvous channel), as for [`crate::bytes::channel`].
pub fn channel<T>(capacity: usize) -> std::io::Result<(Sender<T>, Receiver<T>)>
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    if capacity == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a channel's capacity must be at least 1 (0 would let no value through)",
        ));
    }
    Ok(queued(capacity))
}

/// A typed channel whose queue holds at most `capacity` values
/// (`usize::MAX`: unbounded).
fn queued<T>(capacity: usize) -> (Sender<T>, Receiver<T>)
where
    T: Serialize + DeserializeOwned + Send + 'static,
{
    let queue = Arc::new(queue::Queue::new(capacity));
    (Sender::local(Arc::clone(&queue)), Receiver::local(queue))
}

/// A byte buffer that encodes as one length and one copy (a plain
/// `Vec<u8>` is walked byte by byte by serde).
///
/// ```
/// let data = ferry::typed::ByteBuf::from(vec![1, 2, 3]);
/// let encoded = ferry::typed::encode(&data)?;
/// assert_eq!(encoded, [3, 1, 2, 3]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteBuf(pub Vec<u8>);

impl std::fmt::Debug for ByteBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ByteBuf({} bytes)", self.0.len())
    }
}

impl From<Vec<u8>> for ByteBuf {
    fn from(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

impl From<ByteBuf> for Vec<u8> {
    fn from(bytes: ByteBuf) -> Self {
        bytes.0
    }
}

impl std::ops::Deref for ByteBuf {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for ByteBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Serialize for ByteBuf {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

/// Accepts bytes (one copy), or a sequence of `u8` from formats that have
/// no bytes type.
struct BytesVisitor;

impl<'de> serde::de::Visitor<'de> for BytesVisitor {
    type Value = Vec<u8>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bytes")
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }
    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(b) = seq.next_element()? {
            out.push(b);
        }
        Ok(out)
    }
}

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_byte_buf(BytesVisitor).map(Self)
    }

    /// Reuses this buffer: the bytes are copied into it, allocating only if
    /// it is too small.
    fn deserialize_in_place<D: Deserializer<'de>>(
        deserializer: D,
        place: &mut Self,
    ) -> Result<(), D::Error> {
        deserializer.deserialize_bytes(BytesInPlace(&mut place.0))
    }
}

/// Copies bytes into an existing buffer.
struct BytesInPlace<'a>(&'a mut Vec<u8>);

impl<'de> serde::de::Visitor<'de> for BytesInPlace<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bytes")
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<(), E> {
        self.0.clear();
        self.0.extend_from_slice(v);
        Ok(())
    }
    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<(), E> {
        *self.0 = v;
        Ok(())
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        *self.0 = BytesVisitor.visit_seq(seq)?;
        Ok(())
    }
}

impl Serialize for SharedBytes {
    /// Encodes as bytes, as [`ByteBuf`] does.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self)
    }
}

/// Takes a byte field as a view of the received message where it can.
struct SharedVisitor;

impl<'de> serde::de::Visitor<'de> for SharedVisitor {
    type Value = SharedBytes;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("bytes")
    }
    fn visit_borrowed_bytes<E: serde::de::Error>(self, v: &'de [u8]) -> Result<SharedBytes, E> {
        Ok(handles::view_part(v).unwrap_or_else(|| SharedBytes::from(v.to_vec())))
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<SharedBytes, E> {
        Ok(SharedBytes::from(v.to_vec()))
    }
    fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<SharedBytes, E> {
        Ok(SharedBytes::from(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<SharedBytes, A::Error> {
        BytesVisitor.visit_seq(seq).map(SharedBytes::from)
    }
}

impl<'de> Deserialize<'de> for SharedBytes {
    /// In a typed receive, a view into the received message: a large
    /// message from another process is read in place in shared memory (see
    /// [`SharedBytes`] for what that means with a hostile sender); else a
    /// copy.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_bytes(SharedVisitor)
    }
}

/// One end of a typed pipe (two ways, as a byte [`crate::Pipe`]): a
/// [`Sender<S>`] and a [`Receiver<R>`], for request and reply.
///
/// ```
/// let (client, server) = ferry::typed::pipe::<String, usize>(16)?;
/// client.send("four".to_string())?;
/// let word = server.recv()?;
/// server.send(word.len())?;
/// assert_eq!(client.recv()?, 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound(
    serialize = "S: Serialize + DeserializeOwned + Send + 'static, R: Serialize + DeserializeOwned + Send + 'static",
    deserialize = "S: Serialize + DeserializeOwned + Send + 'static, R: Serialize + DeserializeOwned + Send + 'static"
))]
pub struct Pipe<S, R> {
    tx: Sender<S>,
    rx: Receiver<R>,
}

/// Makes a typed pipe, both ends in this process: each direction holds at
/// most `capacity` values, as a [`channel`] does.
///
/// # Errors
///
/// `InvalidInput` for a `capacity` of 0, as for [`channel`].
pub fn pipe<A, B>(capacity: usize) -> std::io::Result<(Pipe<A, B>, Pipe<B, A>)>
where
    A: Serialize + DeserializeOwned + Send + 'static,
    B: Serialize + DeserializeOwned + Send + 'static,
{
    let (a_tx, a_rx) = channel(capacity)?;
    let (b_tx, b_rx) = channel(capacity)?;
    Ok((Pipe { tx: a_tx, rx: b_rx }, Pipe { tx: b_tx, rx: a_rx }))
}

impl<S, R> Pipe<S, R>
where
    S: Serialize + DeserializeOwned + Send + 'static,
    R: Serialize + DeserializeOwned + Send + 'static,
{
    /// A typed end over a byte pipe end (for example the one
    /// [`crate::spawn`] gives); the other end must be a `Pipe<R, S>`.
    /// Like the pipe end, it is meant for one thread at a time: its waits
    /// know that the thread that sends also receives (on one CPU with its
    /// peer, a round trip then costs two futex wakes, not a spinner's
    /// time slice). [`split`](Pipe::split) it to use the halves on two
    /// threads.
    pub fn from_pipe(pipe: crate::api::channel::Pipe) -> Self {
        let (tx, rx) = pipe.split_joined();
        Self {
            tx: Sender::from_bytes(tx),
            rx: Receiver::from_bytes(rx),
        }
    }

    /// Sends a value (see [`Sender::send`]).
    ///
    /// # Errors
    ///
    /// As [`Sender::send`].
    pub fn send(&self, value: S) -> Result<(), SendError<S>> {
        self.tx.send(value)
    }

    /// Receives a value (see [`Receiver::recv`]).
    ///
    /// # Errors
    ///
    /// As [`Receiver::recv`].
    pub fn recv(&self) -> Result<R, RecvError> {
        self.rx.recv()
    }

    /// This end's sending half.
    pub fn sender(&self) -> &Sender<S> {
        &self.tx
    }

    /// This end's receiving half.
    pub fn receiver(&self) -> &Receiver<R> {
        &self.rx
    }

    /// The two halves, to own apart (and use on two threads).
    pub fn split(self) -> (Sender<S>, Receiver<R>) {
        self.tx.unjoin();
        self.rx.unjoin();
        (self.tx, self.rx)
    }
}
