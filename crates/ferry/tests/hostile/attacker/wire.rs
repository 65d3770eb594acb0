//! ferry's wire format, written out again by hand from the library's
//! documentation (`shm/region.rs`, `ring/control.rs`, `ring/mod.rs`,
//! `wire/frame.rs`, `wire/record.rs`, `wire/bootstrap.rs`,
//! `wire/handshake.rs`), so that the attacker is independent code: it
//! encodes what the victim will parse without sharing a line with the
//! parser.

/// The first 8 bytes of every pipe region.
pub const REGION_MAGIC: [u8; 8] = *b"FERRYPIP";
/// The region layout version in the header.
pub const REGION_VERSION: u32 = 1;
/// Where ring 0's control block starts; ring 1's follows it.
pub const CONTROL_AT: usize = 256;
/// Bytes of one ring control block (producer side, then consumer side).
pub const CONTROL_SIZE: usize = 256;
/// Where ring 0's data starts; ring 1's data follows it.
pub const DATA_AT: usize = 4096;

/// Offset of the consumer side inside a control block.
pub const CONSUMER_SIDE: usize = 128;
/// Offset of `pos` (u64) inside a side: tail for the producer, head for
/// the consumer.
pub const POS: usize = 0;
/// Offset of `signal` (u32): bumped by its side to wake the other.
pub const SIGNAL: usize = 64;
/// Offset of `waiting` (u32): non-zero while its side is about to sleep.
pub const WAITING: usize = 68;

/// Bytes of a ring frame header: body length u32, tag u32.
pub const FRAME_HEADER: usize = 8;
/// The frame version in every tag.
pub const FRAME_VERSION: u32 = 1;

/// Bytes a region with rings of `capacity` bytes needs.
pub const fn region_len(capacity: usize) -> usize {
    DATA_AT + 2 * capacity
}

/// The 16-byte region header: magic, version, ring capacity.
pub fn region_header(capacity: u32) -> [u8; 16] {
    let mut header = [0u8; 16];
    header[..8].copy_from_slice(&REGION_MAGIC);
    header[8..12].copy_from_slice(&REGION_VERSION.to_le_bytes());
    header[12..].copy_from_slice(&capacity.to_le_bytes());
    header
}

/// A frame's kind, the low byte of its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A whole message: handle ids, then the payload.
    Whole = 1,
    /// The first piece: total length u64, handle ids, the piece.
    First = 2,
    /// A middle piece.
    More = 3,
    /// The last piece.
    Last = 4,
    /// Drops the message begun by `First`.
    Abort = 5,
    /// A message in a pool block: id u32, generation u32, len u64, ids.
    Block = 6,
    /// Not a message: one id, a receiving half to read with this ring.
    Attach = 7,
}

/// A frame tag: `kind | version << 8 | handles << 16`.
pub fn tag(kind: Kind, handles: u16) -> u32 {
    kind as u32 | FRAME_VERSION << 8 | u32::from(handles) << 16
}

/// The 8-byte ring header of a frame whose body is `len` bytes.
pub fn frame_header(len: u32, tag: u32) -> [u8; FRAME_HEADER] {
    (u64::from(len) | u64::from(tag) << 32).to_le_bytes()
}

/// Bytes a frame with a `len`-byte body takes in the ring (padded to 8).
pub const fn frame_size(len: usize) -> u64 {
    ((FRAME_HEADER + len + 7) & !7) as u64
}

/// The body of a `Whole` frame carrying handle `ids` and `payload`.
pub fn whole_body(ids: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut body: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    body.extend_from_slice(payload);
    body
}

/// Bytes of one control record.
pub const RECORD_LEN: usize = 16;
/// "FRY" and the version, opening every record.
pub const RECORD_MAGIC: [u8; 4] = [b'F', b'R', b'Y', 1];

/// What a control record announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// A pipe region (arg: the end's role, id: claimed by a frame).
    PipeEnd = 1,
    /// A pool block (arg: size class, id: its number).
    Block = 2,
    /// The sender's release table.
    ReleaseTable = 3,
    /// A block the sender unmapped (no descriptor).
    Retire = 4,
    /// A doorbell (arg: 2 * ring + side, id: the region's inode).
    Doorbell = 5,
    /// A descriptor sent with a message (arg 0, id: claimed by a frame,
    /// from the ids pipe ends use).
    Fd = 6,
}

/// Encodes a control record: magic, kind u16, arg u16, id u64.
pub fn record(kind: RecordKind, arg: u16, id: u64) -> [u8; RECORD_LEN] {
    let mut out = [0u8; RECORD_LEN];
    out[..4].copy_from_slice(&RECORD_MAGIC);
    out[4..6].copy_from_slice(&(kind as u16).to_le_bytes());
    out[6..8].copy_from_slice(&arg.to_le_bytes());
    out[8..].copy_from_slice(&id.to_le_bytes());
    out
}

/// A decoded control record, unchecked beyond its magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawRecord {
    /// The kind field.
    pub kind: u16,
    /// The arg field.
    pub arg: u16,
    /// The id field.
    pub id: u64,
}

/// Decodes a control record, if it is one.
pub fn parse_record(bytes: &[u8]) -> Option<RawRecord> {
    let bytes: &[u8; RECORD_LEN] = bytes.try_into().ok()?;
    if bytes[..4] != RECORD_MAGIC {
        return None;
    }
    Some(RawRecord {
        kind: u16::from_le_bytes([bytes[4], bytes[5]]),
        arg: u16::from_le_bytes([bytes[6], bytes[7]]),
        id: u64::from_le_bytes(bytes[8..].try_into().ok()?),
    })
}

/// The `FERRY_BOOTSTRAP` value a parent gives a child whose control socket
/// is descriptor `fd`: the parent's pid, then ferry's default pipe options
/// (256 MiB messages, out of line from 64 KiB, a 64 MiB pool, 8 GiB of the
/// parent's memory mapped, the adaptive wait).
pub fn bootstrap_env(fd: i32, parent: u32) -> String {
    format!(
        "fd={fd},parent={parent},limit=268435456,out_of_line=65536,\
         pool_cap=67108864,max_mapped=8589934592,wait=2"
    )
}

/// The handshake's version byte (the records' version).
pub const HANDSHAKE_VERSION: u8 = 1;
/// Bytes of a token.
pub const TOKEN_LEN: usize = 32;
/// Bytes of a client's opening.
pub const HELLO_LEN: usize = 8 + TOKEN_LEN;
/// Bytes of a server's refusal.
pub const REFUSAL_LEN: usize = 8;
/// The refusal code for a malformed opening.
pub const REFUSED_HANDSHAKE: u8 = 3;

/// A client's opening: "FRYH", the version, a token flag, two zero bytes,
/// the token (or zeros).
pub fn hello(version: u8, token: Option<[u8; TOKEN_LEN]>) -> [u8; HELLO_LEN] {
    let mut out = [0u8; HELLO_LEN];
    out[..4].copy_from_slice(b"FRYH");
    out[4] = version;
    if let Some(token) = token {
        out[5] = 1;
        out[8..].copy_from_slice(&token);
    }
    out
}

/// A server's welcome: "FRYW", the version, three zero bytes.
pub fn welcome() -> [u8; REFUSAL_LEN] {
    let mut out = [0u8; REFUSAL_LEN];
    out[..4].copy_from_slice(b"FRYW");
    out[4] = HANDSHAKE_VERSION;
    out
}

/// A server's refusal: "FRYN", the version, the code, two zero bytes.
pub fn refusal(code: u8) -> [u8; REFUSAL_LEN] {
    let mut out = [0u8; REFUSAL_LEN];
    out[..4].copy_from_slice(b"FRYN");
    out[4] = HANDSHAKE_VERSION;
    out[5] = code;
    out
}

/// Bytes in a routing record (`wire/route.rs`).
pub const ROUTE_RECORD_LEN: usize = 40;
/// "FRR" and the version, opening every routing record.
pub const ROUTE_MAGIC: [u8; 4] = [b'F', b'R', b'R', 1];
/// Offset of a side's `moved` word.
pub const MOVED: usize = 88;
/// Offset of a producer side's `naming` word.
pub const NAMING: usize = 92;
/// A ring side's `moving` word.
pub const MOVING: usize = 96;
/// The producer's `followed` and `followed_at` words.
pub const FOLLOWED: usize = 100;
/// See [`FOLLOWED`].
pub const FOLLOWED_AT: usize = 104;

/// Encodes a routing record: magic, kind u16, arg u16, a token (never all
/// zero here), `a` u64, `b` u64.
pub fn route_record(kind: u16, arg: u16, a: u64, b: u64) -> [u8; ROUTE_RECORD_LEN] {
    let mut out = [0u8; ROUTE_RECORD_LEN];
    out[..4].copy_from_slice(&ROUTE_MAGIC);
    out[4..6].copy_from_slice(&kind.to_le_bytes());
    out[6..8].copy_from_slice(&arg.to_le_bytes());
    out[8..24].copy_from_slice(&[0x5a; 16]);
    out[24..32].copy_from_slice(&a.to_le_bytes());
    out[32..].copy_from_slice(&b.to_le_bytes());
    out
}
