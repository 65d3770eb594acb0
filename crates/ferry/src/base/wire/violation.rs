//! Every way a peer can break the protocol, as a stable code.
//!
//! A decoder, the ring, the pool or the link that refuses what a peer sent
//! names the rule with one [`Violation`]; [`crate::ProtocolError`] carries
//! it to the caller. Each has a number ([`Violation::code`]) that never
//! changes once released (new ones are appended), for logs and for a C ABI,
//! and a message ([`Violation::message`]) for people.

use std::fmt;

/// A rule of the ferry protocol that a peer broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u16)]
pub enum Violation {
    /// Producer published an impossible write position.
    BadWritePosition = 1,
    /// Consumer published an impossible read position.
    BadReadPosition = 2,
    /// Frame length runs past the published data.
    FrameOverrun = 3,
    /// Ring position is not a multiple of 8.
    UnalignedPosition = 4,
    /// Ring positions are further apart than its capacity.
    PositionsTooFarApart = 5,
    /// Peer sent a pipe end this process already holds.
    EndHeldTwice = 6,
    /// Unknown frame kind.
    UnknownFrameKind = 7,
    /// Unsupported frame version.
    UnsupportedFrameVersion = 8,
    /// Too many handles in one message.
    TooManyHandles = 9,
    /// Handles on a continuation frame.
    HandlesOnContinuation = 10,
    /// Frame shorter than its own header fields.
    FrameTooShort = 11,
    /// Message length out of range.
    MessageLengthOutOfRange = 12,
    /// Message pieces longer than announced.
    PiecesTooLong = 13,
    /// Message pieces shorter than announced.
    PiecesTooShort = 14,
    /// Frame out of sequence.
    FrameOutOfSequence = 15,
    /// Message longer than the receiver's limit.
    MessageTooLarge = 16,
    /// Pipe ends or blocks sent over a pipe inside one process.
    HandlesWithinProcess = 17,
    /// Control record of the wrong length.
    RecordLength = 18,
    /// Control record with a bad magic number or version.
    RecordMagic = 19,
    /// Unknown control record kind.
    UnknownRecordKind = 20,
    /// Pipe end record names no end or half of a pipe.
    BadPipeEndRole = 21,
    /// Block class out of range.
    BlockClassOutOfRange = 22,
    /// Release table record with a non-zero argument or id.
    ReleaseTableRecordArgs = 23,
    /// Retire record with a non-zero argument.
    RetireRecordArg = 24,
    /// Malformed control record.
    MalformedRecord = 25,
    /// Retire record with a descriptor.
    RetireWithDescriptor = 26,
    /// Control record without exactly one descriptor.
    RecordDescriptorCount = 27,
    /// Control record vanished after it was read.
    RecordVanished = 28,
    /// Frame names a pipe end or block that was never sent.
    NeverSent = 29,
    /// Link closed before a named pipe end or block arrived.
    ClosedBeforeArrival = 30,
    /// A message names one pipe end twice.
    PipeEndNamedTwice = 31,
    /// Peer sent too many unclaimed pipe ends.
    TooManyPendingEnds = 32,
    /// Peer sent a pipe end id twice.
    PipeEndIdTwice = 33,
    /// Pipe region has a bad magic number or version.
    RegionMagic = 34,
    /// Pipe region's capacity is not a power of two in range.
    RegionCapacityRange = 35,
    /// Pipe region's capacity does not match its size.
    RegionCapacityMismatch = 36,
    /// Peer's pipe regions exceed this link's map budget (PipeOptions::max_mapped).
    RegionsOverBudget = 37,
    /// Object is not sealable shared memory.
    NotSealable = 38,
    /// Shared memory is not sealed against resizing.
    NotSealedAgainstResize = 39,
    /// Shared memory both sides must write is sealed against writes.
    SealedAgainstWrites = 40,
    /// Shared memory is not a plain memfd (tmpfs).
    NotTmpfs = 41,
    /// Fstatfs failed on shared memory.
    StatfsFailed = 42,
    /// Fstat failed on shared memory.
    StatFailed = 43,
    /// Shared memory size is negative.
    NegativeSize = 44,
    /// Shared memory size out of range.
    SizeOutOfRange = 45,
    /// The peer's shared memory could not be mapped.
    Unmappable = 46,
    /// Peer's shared memory exceeds this link's map budget (PipeOptions::max_mapped).
    MapBudgetExceeded = 47,
    /// Block id out of range.
    BlockIdOutOfRange = 48,
    /// Block announced twice.
    BlockAnnouncedTwice = 49,
    /// Peer's blocks exceed this link's shared-memory cap.
    PoolCapExceeded = 50,
    /// Release table announced twice.
    ReleaseTableTwice = 51,
    /// Retire of a block never announced.
    RetireUnannounced = 52,
    /// Block frame before the release table.
    BlockBeforeReleaseTable = 53,
    /// Frame names a block never announced.
    BlockNeverAnnounced = 54,
    /// Block frame length out of range.
    BlockLengthOutOfRange = 55,
    /// Block frame length past the block's end.
    BlockPastEnd = 56,
    /// Block frame with a stale generation.
    StaleGeneration = 57,
    /// Block sent again while this side still holds it.
    BlockHeldTwice = 58,
    /// No pipe from the parent.
    NoBootstrapPipe = 59,
    /// Doorbell record names no side of a ring.
    BadDoorbellSide = 60,
    /// Doorbell descriptor is not a Unix datagram socket.
    DoorbellNotDatagramSocket = 61,
    /// Descriptor record with a non-zero argument.
    FdRecordArg = 62,
    /// Handshake record malformed (length, magic or version).
    BadHandshake = 63,
    /// Routing record with an all-zero token.
    RouteTokenZero = 64,
    /// Routing record with a field its kind does not allow.
    RouteRecordFields = 65,
    /// Routing record names no side of a ring.
    RouteSide = 66,
    /// A moved side's boundary lies past what the ring holds, or before
    /// the route's last one.
    RouteBoundary = 67,
    /// Routing record without the descriptors its kind carries (or one
    /// that is not a Unix packet socket where a socket belongs).
    RouteDescriptors = 68,
    /// Routing record of a kind not expected here.
    RouteUnexpected = 69,
    /// The two sides of a whole pipe end sent as two `Routed` records
    /// (see `wire/route.rs`) do not make one end: another region, the same
    /// ring twice, a side that arrives home, or a second side with no
    /// first.
    RouteJoin = 70,
    /// An `Attach` frame that does not carry exactly one receiving half
    /// (see `wire/frame.rs`).
    BadAttach = 71,
    /// The other side of a ring moved on more times than this side keeps
    /// links for while frames it has not read yet name them (see
    /// `api/channel/route.rs`).
    RouteTooLong = 72,
}

impl Violation {
    /// The stable number of this violation (1 and up).
    pub const fn code(self) -> u16 {
        self as u16
    }

    /// What the peer did, in words.
    pub const fn message(self) -> &'static str {
        match self {
            Self::BadWritePosition => "producer published an impossible write position",
            Self::BadReadPosition => "consumer published an impossible read position",
            Self::FrameOverrun => "frame length runs past the published data",
            Self::UnalignedPosition => "ring position is not a multiple of 8",
            Self::PositionsTooFarApart => "ring positions are further apart than its capacity",
            Self::EndHeldTwice => "peer sent a pipe end this process already holds",
            Self::UnknownFrameKind => "unknown frame kind",
            Self::UnsupportedFrameVersion => "unsupported frame version",
            Self::TooManyHandles => "too many handles in one message",
            Self::HandlesOnContinuation => "handles on a continuation frame",
            Self::FrameTooShort => "frame shorter than its own header fields",
            Self::MessageLengthOutOfRange => "message length out of range",
            Self::PiecesTooLong => "message pieces longer than announced",
            Self::PiecesTooShort => "message pieces shorter than announced",
            Self::FrameOutOfSequence => "frame out of sequence",
            Self::MessageTooLarge => "message longer than the receiver's limit",
            Self::HandlesWithinProcess => "pipe ends or blocks sent over a pipe inside one process",
            Self::RecordLength => "control record of the wrong length",
            Self::RecordMagic => "control record with a bad magic number or version",
            Self::UnknownRecordKind => "unknown control record kind",
            Self::BadPipeEndRole => "pipe end record names no end or half of a pipe",
            Self::BlockClassOutOfRange => "block class out of range",
            Self::ReleaseTableRecordArgs => "release table record with a non-zero argument or id",
            Self::RetireRecordArg => "retire record with a non-zero argument",
            Self::MalformedRecord => "malformed control record",
            Self::RetireWithDescriptor => "retire record with a descriptor",
            Self::RecordDescriptorCount => "control record without exactly one descriptor",
            Self::RecordVanished => "control record vanished after it was read",
            Self::NeverSent => "frame names a pipe end or block that was never sent",
            Self::ClosedBeforeArrival => "link closed before a named pipe end or block arrived",
            Self::PipeEndNamedTwice => "a message names one pipe end twice",
            Self::TooManyPendingEnds => "peer sent too many unclaimed pipe ends",
            Self::PipeEndIdTwice => "peer sent a pipe end id twice",
            Self::RegionMagic => "pipe region has a bad magic number or version",
            Self::RegionCapacityRange => "pipe region's capacity is not a power of two in range",
            Self::RegionCapacityMismatch => "pipe region's capacity does not match its size",
            Self::RegionsOverBudget => {
                "peer's pipe regions exceed this link's map budget (PipeOptions::max_mapped)"
            }
            Self::NotSealable => "object is not sealable shared memory",
            Self::NotSealedAgainstResize => "shared memory is not sealed against resizing",
            Self::SealedAgainstWrites => {
                "shared memory both sides must write is sealed against writes"
            }
            Self::NotTmpfs => "shared memory is not a plain memfd (tmpfs)",
            Self::StatfsFailed => "fstatfs failed on shared memory",
            Self::StatFailed => "fstat failed on shared memory",
            Self::NegativeSize => "shared memory size is negative",
            Self::SizeOutOfRange => "shared memory size out of range",
            Self::Unmappable => "the peer's shared memory could not be mapped",
            Self::MapBudgetExceeded => {
                "peer's shared memory exceeds this link's map budget (PipeOptions::max_mapped)"
            }
            Self::BlockIdOutOfRange => "block id out of range",
            Self::BlockAnnouncedTwice => "block announced twice",
            Self::PoolCapExceeded => "peer's blocks exceed this link's shared-memory cap",
            Self::ReleaseTableTwice => "release table announced twice",
            Self::RetireUnannounced => "retire of a block never announced",
            Self::BlockBeforeReleaseTable => "block frame before the release table",
            Self::BlockNeverAnnounced => "frame names a block never announced",
            Self::BlockLengthOutOfRange => "block frame length out of range",
            Self::BlockPastEnd => "block frame length past the block's end",
            Self::StaleGeneration => "block frame with a stale generation",
            Self::BlockHeldTwice => "block sent again while this side still holds it",
            Self::NoBootstrapPipe => "no pipe from the parent",
            Self::BadDoorbellSide => "doorbell record names no side of a ring",
            Self::DoorbellNotDatagramSocket => "doorbell descriptor is not a Unix datagram socket",
            Self::FdRecordArg => "descriptor record with a non-zero argument",
            Self::BadHandshake => "handshake record malformed (length, magic or version)",
            Self::RouteTokenZero => "routing record with an all-zero token",
            Self::RouteRecordFields => "routing record with a field its kind does not allow",
            Self::RouteSide => "routing record names no side of a ring",
            Self::RouteBoundary => {
                "moved side's boundary past what the ring holds, or before the route's last one"
            }
            Self::RouteDescriptors => {
                "routing record without the descriptors its kind carries (a socket, a region)"
            }
            Self::RouteUnexpected => "routing record of a kind not expected here",
            Self::RouteJoin => "the two routed sides of a pipe end do not make one end",
            Self::BadAttach => "an attach frame that does not carry exactly one receiving half",
            Self::RouteTooLong => {
                "the other side moved on more times than links are kept for unread frames"
            }
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for Violation {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_and_messages_distinct() {
        assert_eq!(Violation::BadWritePosition.code(), 1);
        assert_eq!(Violation::TooManyHandles.code(), 9);
        assert_eq!(Violation::NoBootstrapPipe.code(), 59);
        assert_eq!(
            Violation::TooManyHandles.to_string(),
            "too many handles in one message"
        );
    }
}
