//! The protocol's limits: what a sender never exceeds and a receiver
//! refuses past, on either side of a link.

/// Most handles (pipe ends) one message may carry: the kernel's
/// `SCM_MAX_FD`, the most descriptors one socket message can pass. A sender
/// refuses more, and so does [`super::frame::Tag::decode`].
pub const MAX_HANDLES: usize = 253;

/// Most pipe ends one pipe direction has in flight: sent, and not yet
/// received by the peer (one message may always carry up to
/// [`MAX_HANDLES`] when none are). Each end crosses the link's control socket as a
/// record before the message naming it, and the socket is shared by every
/// pipe of the link; this window keeps one pipe's ends from filling it
/// (it holds a few hundred records), and it is the backpressure of
/// `Sender::send_with`: past it, the send waits for the receiver as it
/// would for room in a full pipe.
pub const HANDLE_WINDOW: usize = 64;

/// Most pipe ends a peer may send ahead of the messages that claim them,
/// over one link; past it the link is closed as a protocol violation.
pub const MAX_PENDING: usize = 4096;

/// Most descriptors (sent with messages, [`super::record::Record::Fd`])
/// one link holds for this process while no message has claimed them yet
/// (fewer under a low descriptor limit: each link's share of what all
/// peers together may hold is a quarter of half the soft `RLIMIT_NOFILE`).
/// Unlike a pipe end, whose region is mapped and its descriptor closed at
/// once, such a descriptor stays open until the application takes it, so
/// this bounds the slots of this process's descriptor table a peer can
/// fill (D-Bus allows 64 per connection; this is one message's worth).
/// Past it, the receiver leaves the record queued on the socket and reports
/// a local shortage: an honest peer with many pipes on one link may reach
/// it if the application leaves their messages unread.
pub const MAX_PENDING_FDS: usize = 256;

/// The first id a link gives a pipe end it sends; the ids below it are
/// reserved (0 names the pipe a spawned child receives from its parent).
pub const FIRST_PIPE_ID: u64 = 1;

const _: () = assert!(
    MAX_HANDLES <= u16::MAX as usize,
    "a tag counts handles in 16 bits"
);
const _: () = assert!(HANDLE_WINDOW <= MAX_PENDING);
const _: () = assert!(
    MAX_HANDLES <= MAX_PENDING_FDS,
    "one message's descriptors fit"
);
