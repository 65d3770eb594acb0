//! Hostile peers: an attacker process that writes its own shared memory and
//! control socket by hand (`attacker/`, no ferry code) against a victim
//! process that uses ferry normally. One file per thing attacked, one test
//! binary (`cargo test -p ferry --test hostile`).
//!
//! Most attacks run in three processes: the test (the orchestrator)
//! re-runs the test binary as the VICTIM, which spawns it once more, with
//! `ferry::spawn`, as the ATTACKER. A crash, hang or address-space growth
//! of the victim is thus isolated and measured. The victim may end only
//! with messages, `Protocol`, `Disconnected`, `Timeout`/`Empty`/`Full`;
//! within its deadline; with no more descriptors than it began with; and
//! with bounded address space. It prints what it saw as one-line reports
//! (`attacker::report`), and the orchestrator judges them, gathering every
//! finding before it fails ([`victim`] holds what every attack shares).
//!
//! Every test takes [`ferry_testkit::serial`]: the attacks bound times and
//! count descriptors, and no other attack may run beside one.
//!
//! What is attacked:
//! - [`ring`]: a received pipe end's ring positions;
//! - [`handles`]: the address space, through pipe ends and handle claims;
//! - [`frames`]: receives and selects, with frames that never complete;
//! - [`control_socket`]: the control socket, never read (backpressure);
//! - [`wakes`]: a sleeper, with a storm of wakes;
//! - [`doorbells`]: the doorbell records of a `Select` or async receiver;
//! - [`fd_records`]: descriptor records, in a flood and malformed;
//! - [`fds`]: descriptors whose close blocks, and descriptors sent ahead
//!   by many peers;
//! - [`bootstrap`]: a child, by a hostile parent at the bootstrap or at a
//!   server's invitation;
//! - [`server`]: a named server's handshake, both ways;
//! - [`death`]: the victim's sense of its peer's death, by a peer that
//!   hides it;
//! - [`routes`]: the routing records of a forwarder that lies;
//! - [`clones`]: a receiver's rings, by a travelled clone that floods its
//!   own;
//! - [`local_faults`]: two local faults with an honest peer (out of
//!   descriptors, `Disconnected` sticky).
//!
//! (Writable read-only blocks are attacked in `tests/sealed_blocks.rs`.)

// clippy.toml's rule on atomics is for the library (loom must see all of
// them); this test and the attacker use std's, as any other program would.
#![allow(clippy::disallowed_types)]

mod attacker;
mod victim;

mod bootstrap;
mod clones;
mod control_socket;
mod death;
mod doorbells;
mod fd_records;
mod fds;
mod frames;
mod handles;
mod local_faults;
mod ring;
mod routes;
mod server;
mod wakes;
