//! The typed messages' encoding: serde's data model as compact bytes, and
//! a decoder that is safe on hostile input.
//!
//! # The format
//!
//! Not self-describing (as postcard's and bincode's are not): the receiver
//! knows the type it decodes.
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
//!
//! A byte buffer that serializes as bytes (`serde_bytes`,
//! [`Bytes`](crate::api::typed::Bytes), [`SharedBytes`](crate::SharedBytes)) is
//! one length and one copy; a plain `Vec<u8>` is a sequence that serde
//! walks one element at a time.
//!
//! # What the decoder refuses
//!
//! Every value comes from a peer that may be hostile, so the decoder
//! checks everything before it acts on it, in every build:
//!
//! - **Lengths are capped by the bytes left.** A string or byte length
//!   past the end of the message is refused before anything is allocated.
//!   A sequence or map count is passed to serde as a size hint of at most
//!   the bytes left, so no claimed count makes this process reserve room
//!   for elements the message does not hold (and serde caps every such
//!   reservation at 1 MiB).
//! - **Elements are counted.** Elements that encode to nothing (such as
//!   `()`) could otherwise make a tiny message loop for a long time; a
//!   message may hold at most its own length plus [`EMPTY_ELEMENTS`]
//!   sequence elements and map entries. The encoder enforces the same bound.
//! - **Depth is limited** to [`MAX_DEPTH`] nested compound values, so a
//!   deeply nested message cannot overflow the stack. The encoder refuses
//!   deeper values too, so what it makes always decodes.
//! - **Everything else is checked**: varints that overflow their type,
//!   booleans other than 0 and 1, invalid UTF-8 and chars, a message that
//!   ends early, and bytes left over after the value.
//!
//! Nothing in the decoder panics on any input (`fuzz/fuzz_targets/typed_decode.rs`).

mod de;
mod ser;

use std::fmt;

pub(crate) use de::Decoder;
pub(crate) use ser::{Counter, Encoder, Out, SliceOut};

/// How deeply compound values (structs, tuples, sequences, maps, options,
/// enum variants, newtypes) may nest in one message.
pub const MAX_DEPTH: usize = 128;

/// How many sequence elements and map entries a message may hold beyond
/// its length in bytes (for elements that encode to nothing).
pub const EMPTY_ELEMENTS: usize = 1 << 16;

/// Why a value could not be encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The value nests deeper than [`MAX_DEPTH`].
    TooDeep,
    /// A sequence or map whose length serde does not know up front (an
    /// iterator without an exact size); collect it first.
    UnknownLength,
    /// More elements that encode to nothing than [`EMPTY_ELEMENTS`] allows.
    TooManyElements,
    /// The value serialized to a different length on a second pass (its
    /// `Serialize` is not deterministic).
    SizeChanged,
    /// A ferry channel half was serialized outside a ferry typed send.
    HandleOutsideSend,
    /// A ferry channel half could not be prepared to travel.
    Handle(String),
    /// The value's own `Serialize` implementation failed.
    Custom(String),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooDeep => write!(f, "the value nests deeper than {MAX_DEPTH} levels"),
            Self::UnknownLength => {
                f.write_str("a sequence or map without a known length (collect it first)")
            }
            Self::TooManyElements => write!(
                f,
                "more than {EMPTY_ELEMENTS} elements that encode to nothing"
            ),
            Self::SizeChanged => {
                f.write_str("the value serialized to a different length on a second pass")
            }
            Self::HandleOutsideSend => {
                f.write_str("a ferry channel half can only be serialized by a ferry typed send")
            }
            Self::Handle(why) => write!(f, "a channel half in the value cannot travel: {why}"),
            Self::Custom(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for EncodeError {}

impl serde::ser::Error for EncodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::Custom(msg.to_string())
    }
}

/// Why a message did not decode as the type asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The type being decoded (`std::any::type_name`).
    type_name: &'static str,
    /// Where in the message the decoder stopped.
    offset: usize,
    reason: Reason,
}

/// What was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The message ended before the value did.
    Truncated,
    /// Bytes were left after the value.
    TrailingBytes(usize),
    /// A varint longer than its type allows, or one that overflows it.
    BadVarint,
    /// A `bool` byte other than 0 or 1.
    BadBool(u8),
    /// An `Option` tag other than 0 or 1.
    BadOption(u8),
    /// A string that is not UTF-8.
    BadUtf8,
    /// A `char` that is not a Unicode scalar value.
    BadChar(u32),
    /// A length larger than the bytes left in the message.
    LengthPastEnd {
        /// The length the message claims.
        claimed: u64,
        /// The bytes left.
        left: usize,
    },
    /// Values nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// More sequence elements and map entries than the message's length
    /// plus [`EMPTY_ELEMENTS`].
    TooManyElements,
    /// The type needs a self-describing format (`deserialize_any`: untagged
    /// or internally tagged enums, `flatten`), which this one is not.
    NotSelfDescribing,
    /// The type's own `Deserialize` refused the value (a wrong enum
    /// variant, a bad handle, a failed check).
    Custom(String),
}

impl DecodeError {
    /// A message that carried `count` handles its type did not claim.
    pub(crate) fn unclaimed<T>(count: usize, len: usize) -> Self {
        Self {
            type_name: std::any::type_name::<T>(),
            offset: len,
            reason: Reason::Custom(format!(
                "it carried {count} handles (channel halves or descriptors) the type does not hold"
            )),
        }
    }

    fn new(offset: usize, reason: Reason) -> Self {
        Self {
            type_name: "",
            offset,
            reason,
        }
    }

    /// The type that was being decoded.
    pub fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The byte offset in the message where decoding stopped.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// What was wrong.
    pub fn reason(&self) -> &Reason {
        &self.reason
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a message did not decode as `{}` (at byte {}): ",
            self.type_name, self.offset
        )?;
        match &self.reason {
            Reason::Truncated => f.write_str("it ends early"),
            Reason::TrailingBytes(n) => write!(f, "{n} bytes are left after the value"),
            Reason::BadVarint => f.write_str("a varint overflows its type"),
            Reason::BadBool(b) => write!(f, "a bool is {b}, not 0 or 1"),
            Reason::BadOption(b) => write!(f, "an option tag is {b}, not 0 or 1"),
            Reason::BadUtf8 => f.write_str("a string is not UTF-8"),
            Reason::BadChar(c) => write!(f, "{c:#x} is not a char"),
            Reason::LengthPastEnd { claimed, left } => {
                write!(f, "a length of {claimed} with {left} bytes left")
            }
            Reason::TooDeep => write!(f, "values nest deeper than {MAX_DEPTH} levels"),
            Reason::TooManyElements => f.write_str("too many elements for its length"),
            Reason::NotSelfDescribing => {
                f.write_str("the type needs a self-describing format (untagged enums, flatten)")
            }
            Reason::Custom(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for DecodeError {}

impl serde::de::Error for DecodeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        // Where it stopped is filled in by the decode that returns it.
        Self::new(usize::MAX, Reason::Custom(msg.to_string()))
    }
}

/// Encodes `value` into a new `Vec`.
///
/// ```
/// let bytes = ferry::typed::encode(&(7u32, "seven"))?;
/// let back: (u32, String) = ferry::typed::decode(&bytes)?;
/// assert_eq!(back, (7, "seven".to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`EncodeError`] if the value is too deep, has a sequence of unknown
/// length, or its `Serialize` fails.
pub fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    encode_into(value, &mut out)?;
    Ok(out)
}

/// Encodes `value`, appending to `out`.
///
/// # Errors
///
/// As [`encode`].
pub fn encode_into<T: serde::Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let mut encoder = Encoder::new(&mut *out);
    value.serialize(&mut encoder)?;
    let elements = encoder.finish();
    check_elements(elements, out.len() - start)
}

/// The encoded length of `value` (a pass that writes nothing).
///
/// # Errors
///
/// As [`encode`].
pub fn encoded_len<T: serde::Serialize + ?Sized>(value: &T) -> Result<usize, EncodeError> {
    let mut encoder = Encoder::new(Counter(0));
    value.serialize(&mut encoder)?;
    let elements = encoder.finish();
    let len = encoder.into_out().0;
    check_elements(elements, len).map(|()| len)
}

/// Encodes `value` into `out`, which must be exactly its
/// [`encoded_len`].
pub(crate) fn encode_exact<T: serde::Serialize + ?Sized>(
    value: &T,
    out: &mut [u8],
) -> Result<(), EncodeError> {
    let len = out.len();
    let mut encoder = Encoder::new(SliceOut::new(out));
    value.serialize(&mut encoder)?;
    let elements = encoder.finish();
    match encoder.into_out().is_full() {
        true => check_elements(elements, len),
        false => Err(EncodeError::SizeChanged),
    }
}

pub(crate) fn check_elements(elements: usize, len: usize) -> Result<(), EncodeError> {
    match elements <= len.saturating_add(EMPTY_ELEMENTS) {
        true => Ok(()),
        false => Err(EncodeError::TooManyElements),
    }
}

/// Decodes a whole message as a `T`.
///
/// # Errors
///
/// [`DecodeError`] naming `T`, where decoding stopped and why, if the
/// bytes are not exactly one `T` (see the module docs for what is refused).
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, DecodeError> {
    decode_borrowed(bytes)
}

/// Decodes a whole message as a `T` that may borrow from it.
///
/// # Errors
///
/// As [`decode`].
pub fn decode_borrowed<'de, T: serde::Deserialize<'de>>(
    bytes: &'de [u8],
) -> Result<T, DecodeError> {
    decode_with(Decoder::new(bytes))
}

/// Decodes a received message over `place` (serde's `deserialize_in_place`:
/// buffers the type's fields already own are reused where its
/// `Deserialize` supports it); `shared` as for [`decode_message`]. On an
/// error `place` holds a valid but unspecified value.
pub(crate) fn decode_message_into<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    shared: bool,
    place: &mut T,
) -> Result<(), DecodeError> {
    let mut decoder = Decoder::new(bytes);
    decoder.in_place = shared;
    let named = |mut e: DecodeError, decoder: &Decoder<'_>| {
        e.type_name = std::any::type_name::<T>();
        if e.offset == usize::MAX {
            e.offset = decoder.offset();
        }
        e
    };
    T::deserialize_in_place(&mut decoder, place).map_err(|e| named(e, &decoder))?;
    decoder.finish().map_err(|e| named(e, &decoder))
}

/// Decodes a received message; `in_place` when it is read in shared
/// memory the sender can still write (then strings are copied before they
/// are checked, so what was checked is what is kept).
pub(crate) fn decode_message<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    in_place: bool,
) -> Result<T, DecodeError> {
    let mut decoder = Decoder::new(bytes);
    decoder.in_place = in_place;
    decode_with(decoder)
}

fn decode_with<'de, T: serde::Deserialize<'de>>(
    mut decoder: Decoder<'de>,
) -> Result<T, DecodeError> {
    let named = |mut e: DecodeError, decoder: &Decoder<'_>| {
        e.type_name = std::any::type_name::<T>();
        if e.offset == usize::MAX {
            e.offset = decoder.offset();
        }
        e
    };
    let value = T::deserialize(&mut decoder).map_err(|e| named(e, &decoder))?;
    decoder.finish().map_err(|e| named(e, &decoder))?;
    Ok(value)
}

#[cfg(test)]
mod tests;
