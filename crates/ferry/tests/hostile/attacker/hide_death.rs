//! A peer that hides its own death: it sends its own end of the control
//! socket to the victim as a descriptor record (so the victim holds it
//! open, and no hang-up can come), then exits or kills itself.
//!
//! The attack's name says whether a message names the record (the victim
//! then holds the socket as a received descriptor) or none does (it stays
//! in the victim's socket queue or inbox), and how the attacker ends:
//! `hide-<named|unclaimed>-<exit|kill>`.

use super::RawPeer;
use super::named;
use super::socket::RawSocket;
use super::wire::{self, RecordKind};

/// The attacks this file plays.
pub const ATTACKS: &[&str] = &[
    "hide-named-exit",
    "hide-unclaimed-exit",
    "hide-named-kill",
    "hide-unclaimed-kill",
];

/// The id the attacker's own socket is sent under.
pub const HIDDEN_ID: u64 = 1;
/// The payload of the message that names the socket (`named`).
pub const NAMING: &[u8] = b"here is my socket";
/// The payload of the message that names nothing (`unclaimed`).
pub const LAST: &[u8] = b"last words";

/// Plays `attack` as a child the victim spawned.
pub fn run(attack: &str) -> ! {
    hide(&RawPeer::from_bootstrap(), attack)
}

/// Plays `attack` as a client of the ferry server named `name`.
pub fn client(name: &str, attack: &str) -> ! {
    let socket: RawSocket = named::connect(name).expect("connect to the server");
    hide(&RawPeer::open_to_server(socket), attack)
}

/// Sends the peer's own socket under [`HIDDEN_ID`], a message, and ends.
fn hide(peer: &RawPeer, attack: &str) -> ! {
    let record = wire::record(RecordKind::Fd, 0, HIDDEN_ID);
    peer.socket
        .send_record(&record, &[peer.socket.fd()])
        .expect("send the attacker's own socket");
    match attack.contains("-named-") {
        true => peer.send_message(&[HIDDEN_ID], NAMING),
        false => peer.send_message(&[], LAST),
    }
    if attack.ends_with("-kill") {
        let me = rustix::process::getpid();
        let _ = rustix::process::kill_process(me, rustix::process::Signal::KILL);
    }
    std::process::exit(0)
}
