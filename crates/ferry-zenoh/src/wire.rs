//! The bridge's own wire format on Zenoh: the keys of a bridged pipe and
//! the few records that travel on them. Everything here comes from the far
//! bridge, which may be hostile: each record is decoded once, its length
//! exact, every field checked, before anything uses it.
//!
//! Under an exported prefix `P`:
//!
//! | key | who publishes | what |
//! |---|---|---|
//! | `P/open/<id>` | the importer asks (a query) | a new pipe `<id>`; the payload is an [`Open`], the reply another |
//! | `P/pipe/<id>/<d>/data` | the side `<d>` (`i`mporter or `e`xporter) | one message each; the attachment is a [`Header`] |
//! | `P/pipe/<id>/<d>/credit` | the other side | [`Credit`] records for direction `<d>` |
//! | `P/pipe/<id>/<d>/alive` | the side `<d>` | its liveliness token while the pipe lives |
//!
//! `<id>` is 128 random bits in hex: each bridged pipe has a key space of
//! its own that nobody else can guess.

use std::fmt;

/// The version both bridges of a pipe speak.
pub const VERSION: u8 = 1;

/// A side of a bridged pipe, and a direction: the side that sends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The bridge that imported the prefix: its local programs connect.
    Importer,
    /// The bridge that exported it: it connects to the local server.
    Exporter,
}

impl Side {
    /// The other side.
    pub fn far(self) -> Side {
        match self {
            Side::Importer => Side::Exporter,
            Side::Exporter => Side::Importer,
        }
    }

    fn letter(self) -> &'static str {
        match self {
            Side::Importer => "i",
            Side::Exporter => "e",
        }
    }
}

/// The keys of one bridged pipe.
#[derive(Debug, Clone)]
pub struct Keys {
    pipe: String,
}

impl Keys {
    /// The keys of pipe `id` under `prefix`.
    pub fn new(prefix: &str, id: &str) -> Self {
        Self {
            pipe: format!("{prefix}/pipe/{id}"),
        }
    }

    /// Messages sent by `side`.
    pub fn data(&self, side: Side) -> String {
        format!("{}/{}/data", self.pipe, side.letter())
    }

    /// Credit for the messages `side` sends (published by the other side).
    pub fn credit(&self, side: Side) -> String {
        format!("{}/{}/credit", self.pipe, side.letter())
    }

    /// `side`'s liveliness token.
    pub fn alive(&self, side: Side) -> String {
        format!("{}/{}/alive", self.pipe, side.letter())
    }
}

/// The key a new pipe is asked for on.
pub fn open_key(prefix: &str, id: &str) -> String {
    format!("{prefix}/open/{id}")
}

/// What every open queryable listens on.
pub fn open_keys(prefix: &str) -> String {
    format!("{prefix}/open/*")
}

/// The id in an open query's key, if the key is one (`prefix/open/<id>`
/// with a well-formed id).
pub fn id_of_open(prefix: &str, key: &str) -> Option<String> {
    let id = key.strip_prefix(prefix)?.strip_prefix("/open/")?;
    is_id(id).then(|| id.to_owned())
}

/// Whether `id` is a pipe id: 32 lowercase hex digits.
pub fn is_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A new pipe id.
pub fn new_id() -> std::io::Result<String> {
    let token = ferry::Token::random()?;
    Ok(token.as_bytes()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// How much one direction may have in flight: what its receiver will queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
}

/// Counts of one direction: messages and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
}

impl Count {
    /// This count with one more message of `len` bytes.
    pub fn plus(self, len: u64) -> Count {
        Count {
            messages: self.messages + 1,
            bytes: self.bytes + len,
        }
    }
}

/// An open query's payload (the importer's side) and its reply (the
/// exporter's): the version, and the window the sender of it grants the
/// other side, with the largest message it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open {
    /// What the far side may have in flight towards the side that sent this.
    pub window: Window,
    /// The largest message the side that sent this takes.
    pub max_message: u64,
}

const OPEN_LEN: usize = 1 + 8 + 8 + 8;

impl Open {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(OPEN_LEN);
        out.push(VERSION);
        out.extend_from_slice(&self.window.messages.to_le_bytes());
        out.extend_from_slice(&self.window.bytes.to_le_bytes());
        out.extend_from_slice(&self.max_message.to_le_bytes());
        out
    }

    /// The record in `bytes`, checked.
    pub fn decode(bytes: &[u8]) -> Result<Open, Malformed> {
        let bytes: &[u8; OPEN_LEN] = bytes.try_into().map_err(|_| Malformed::Length {
            what: "an open record",
            len: bytes.len(),
            want: OPEN_LEN,
        })?;
        if bytes[0] != VERSION {
            return Err(Malformed::Version(bytes[0]));
        }
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let open = Open {
            window: Window {
                messages: word(1),
                bytes: word(9),
            },
            max_message: word(17),
        };
        let closed = open.window == Open::CLOSED;
        if !closed && (open.window.messages == 0 || open.window.bytes == 0) {
            return Err(Malformed::Field("a window of zero in one of its terms"));
        }
        if open.max_message == 0 {
            return Err(Malformed::Field("a largest message of zero"));
        }
        Ok(open)
    }

    /// The window of a side that takes nothing (an exported channel's
    /// receiving half): the other side closes that direction at once,
    /// so its program's sends fail `Disconnected` instead of vanishing.
    pub const CLOSED: Window = Window {
        messages: 0,
        bytes: 0,
    };

    /// Whether the side that sent this takes nothing.
    pub fn takes_nothing(&self) -> bool {
        self.window == Open::CLOSED
    }
}

/// A data record's attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// Message number `seq` (from 0) of its direction; the payload is it.
    Data {
        /// Its number.
        seq: u64,
    },
    /// The sender's local end is gone after `count` messages: once they
    /// are delivered, the direction is over.
    Fin {
        /// The messages sent.
        count: u64,
    },
    /// The sender broke the pipe; the payload says why (UTF-8, at most
    /// [`MAX_REASON`] bytes).
    Break,
}

/// The longest reason a [`Header::Break`] carries.
pub const MAX_REASON: usize = 512;

const HEADER_LEN: usize = 1 + 8;

impl Header {
    /// The attachment's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let (kind, word) = match *self {
            Header::Data { seq } => (1, seq),
            Header::Fin { count } => (2, count),
            Header::Break => (3, 0),
        };
        let mut out = [0; HEADER_LEN];
        out[0] = kind;
        out[1..].copy_from_slice(&u64::to_le_bytes(word));
        out
    }

    /// The attachment in `bytes`, checked.
    pub fn decode(bytes: &[u8]) -> Result<Header, Malformed> {
        let bytes: &[u8; HEADER_LEN] = bytes.try_into().map_err(|_| Malformed::Length {
            what: "a data header",
            len: bytes.len(),
            want: HEADER_LEN,
        })?;
        let word = u64::from_le_bytes(bytes[1..].try_into().expect("8 bytes"));
        match bytes[0] {
            1 => Ok(Header::Data { seq: word }),
            2 => Ok(Header::Fin { count: word }),
            3 if word == 0 => Ok(Header::Break),
            kind => Err(Malformed::Kind {
                what: "a data header",
                kind,
            }),
        }
    }
}

/// A record on a credit key, from the receiver of that direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credit {
    /// The sender may have sent up to this many messages and bytes in all
    /// (cumulative, so a later grant replaces an earlier one).
    Grant(Count),
    /// The receiver's local end is gone: send nothing more.
    Stop,
}

/// A record on a credit key, from the sender of that direction: it waits
/// for credit, having sent `Count` (the receiver grants once its queue is
/// empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want(pub Count);

const CREDIT_LEN: usize = 1 + 8 + 8;

fn counted(kind: u8, count: Count) -> Vec<u8> {
    let mut out = Vec::with_capacity(CREDIT_LEN);
    out.push(kind);
    out.extend_from_slice(&count.messages.to_le_bytes());
    out.extend_from_slice(&count.bytes.to_le_bytes());
    out
}

/// One record on a credit key: from the receiver (a [`Credit`]) or the
/// sender (a [`Want`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditRecord {
    /// From the receiver.
    Credit(Credit),
    /// From the sender.
    Want(Want),
}

impl CreditRecord {
    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            CreditRecord::Credit(Credit::Grant(count)) => counted(1, count),
            CreditRecord::Credit(Credit::Stop) => counted(2, Count::default()),
            CreditRecord::Want(Want(count)) => counted(3, count),
        }
    }

    /// The record in `bytes`, checked.
    pub fn decode(bytes: &[u8]) -> Result<CreditRecord, Malformed> {
        let bytes: &[u8; CREDIT_LEN] = bytes.try_into().map_err(|_| Malformed::Length {
            what: "a credit record",
            len: bytes.len(),
            want: CREDIT_LEN,
        })?;
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let count = Count {
            messages: word(1),
            bytes: word(9),
        };
        match bytes[0] {
            1 => Ok(CreditRecord::Credit(Credit::Grant(count))),
            2 if count == Count::default() => Ok(CreditRecord::Credit(Credit::Stop)),
            3 => Ok(CreditRecord::Want(Want(count))),
            kind => Err(Malformed::Kind {
                what: "a credit record",
                kind,
            }),
        }
    }
}

/// A record from the far bridge that cannot be one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Malformed {
    /// Its length is not its kind's.
    Length {
        /// The record.
        what: &'static str,
        /// Its length.
        len: usize,
        /// Its kind's.
        want: usize,
    },
    /// Its kind is unknown (or its fields do not fit the kind).
    Kind {
        /// The record.
        what: &'static str,
        /// Its kind byte.
        kind: u8,
    },
    /// It speaks another version.
    Version(u8),
    /// A field cannot be true.
    Field(&'static str),
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformed::Length { what, len, want } => {
                write!(f, "{what} of {len} bytes (it has {want})")
            }
            Malformed::Kind { what, kind } => write!(f, "{what} of unknown kind {kind}"),
            Malformed::Version(v) => write!(
                f,
                "bridge protocol version {v} (this bridge speaks {VERSION})"
            ),
            Malformed::Field(why) => f.write_str(why),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let open = Open {
            window: Window {
                messages: 256,
                bytes: 1 << 26,
            },
            max_message: 1 << 30,
        };
        assert_eq!(Open::decode(&open.encode()), Ok(open));
        for header in [
            Header::Data { seq: 7 },
            Header::Fin { count: u64::MAX },
            Header::Break,
        ] {
            assert_eq!(Header::decode(&header.encode()), Ok(header));
        }
        let count = Count {
            messages: 3,
            bytes: 99,
        };
        for record in [
            CreditRecord::Credit(Credit::Grant(count)),
            CreditRecord::Credit(Credit::Stop),
            CreditRecord::Want(Want(count)),
        ] {
            assert_eq!(CreditRecord::decode(&record.encode()), Ok(record));
        }
    }

    #[test]
    fn every_short_long_or_unknown_record_is_refused() {
        let open = Open {
            window: Window {
                messages: 1,
                bytes: 1,
            },
            max_message: 1,
        }
        .encode();
        for len in 0..open.len() + 2 {
            let mut bytes = open.clone();
            bytes.resize(len, 0);
            assert_eq!(Open::decode(&bytes).is_ok(), len == open.len(), "{len}");
        }
        // One term of the window zero: malformed; both: a closed direction.
        let mut zero_window = open.clone();
        zero_window[1..9].fill(0);
        assert!(Open::decode(&zero_window).is_err());
        zero_window[9..17].fill(0);
        assert!(Open::decode(&zero_window).unwrap().takes_nothing());
        let mut zero_largest = open.clone();
        zero_largest[17..25].fill(0);
        assert!(Open::decode(&zero_largest).is_err());
        let mut other_version = open;
        other_version[0] = 9;
        assert_eq!(Open::decode(&other_version), Err(Malformed::Version(9)));
        for kind in [0, 4, 255] {
            let mut header = Header::Data { seq: 1 }.encode();
            header[0] = kind;
            assert!(Header::decode(&header).is_err());
            let mut credit = CreditRecord::Want(Want(Count::default())).encode();
            credit[0] = kind;
            assert!(CreditRecord::decode(&credit).is_err());
        }
        let mut stop_with_count = CreditRecord::Credit(Credit::Stop).encode();
        stop_with_count[3] = 1;
        assert!(CreditRecord::decode(&stop_with_count).is_err());
        assert!(Header::decode(&[3, 1, 0, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(Header::decode(&[1; 8]).is_err());
        assert!(Header::decode(&[1; 10]).is_err());
    }

    #[test]
    fn ids_are_checked_where_they_arrive() {
        let id = new_id().unwrap();
        assert!(is_id(&id));
        assert_eq!(id_of_open("a/b", &open_key("a/b", &id)), Some(id.clone()));
        assert_eq!(id_of_open("a/b", "a/b/open/xyz"), None);
        assert_eq!(id_of_open("a/b", &format!("a/c/open/{id}")), None);
        assert_eq!(
            id_of_open("a/b", &format!("a/b/open/{}", id.to_uppercase())),
            None
        );
        assert_ne!(new_id().unwrap(), id);
    }
}
