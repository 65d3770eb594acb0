//! The victim's side of every attack: a process that uses ferry normally,
//! started by the test, that spawns the attacker and reports what it saw.

use std::thread;
use std::time::{Duration, Instant};

use crate::attacker::attacks;
use crate::attacker::report::{Report, VictimRun};
use ferry::{Pipe, PipeOptions};
use ferry_testkit::{ChildGuard, Watchdog, secs};

/// How long a victim process may run before its own watchdog fires.
pub(crate) const VICTIM_LIMIT: Duration = Duration::from_secs(25);
/// How long the orchestrator lets a victim run before killing it as hung.
pub(crate) const RUN_LIMIT: Duration = Duration::from_secs(30);
pub(crate) const GIB: u64 = 1 << 30;

/// Plays `role` in `test`: an attack, or the victim.
pub(crate) fn play(test: &str, role: &str, victim: fn(&str, &str)) {
    if role.starts_with("attacker-") {
        attacks::run(role);
    } else {
        victim(test, role);
    }
}

/// Whether a reported outcome is a `Protocol` error.
pub(crate) fn is_protocol(outcome: &str) -> bool {
    outcome.starts_with("Protocol")
}

/// The variant name of a reported outcome (`Protocol(...)` → `Protocol`).
pub(crate) fn kind(outcome: &str) -> &str {
    outcome.split('(').next().unwrap_or(outcome)
}

/// A victim process under attack: its watchdog, what it measured before
/// the attack, the attacker it spawned, and the pipe to it.
pub(crate) struct Victim {
    pub(crate) dog: Watchdog,
    pub(crate) fds_before: usize,
    pub(crate) vm_before: u64,
    pub(crate) attacker: ChildGuard,
    pub(crate) boot: Pipe,
}

impl Victim {
    /// Starts the victim: spawns this test as `attacker-<attack>`, with
    /// `options` for the bootstrap pipe.
    pub(crate) fn start(test: &str, role: &str, attack: &str, options: &PipeOptions) -> Self {
        let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
        let fds_before = ferry_testkit::fd_count();
        let vm_before = ferry_testkit::vm_peak();
        let cmd = ferry_testkit::child_command(test, &format!("attacker-{attack}"));
        let (attacker, boot) = ferry_testkit::spawn_command(&dog, cmd, options);
        Self {
            dog,
            fds_before,
            vm_before,
            attacker,
            boot,
        }
    }

    /// Ends the attack: drops `pipes` and the bootstrap pipe, kills and
    /// reaps the attacker, and prints `report` (the final one) with the
    /// address-space growth and the descriptor counts.
    pub(crate) fn finish(self, pipes: Vec<Pipe>, report: Report) {
        let vm_growth = ferry_testkit::vm_peak().saturating_sub(self.vm_before);
        let Self {
            dog,
            fds_before,
            attacker,
            boot,
            ..
        } = self;
        drop(pipes);
        drop(boot);
        end_attack(dog, fds_before, vm_growth, attacker, report);
    }
}

/// The end of every attack: kills and reaps the attacker, and prints
/// `report` with the address-space growth and the descriptor counts.
pub(crate) fn end_attack(
    dog: Watchdog,
    fds_before: usize,
    vm_growth: u64,
    mut attacker: ChildGuard,
    report: Report,
) {
    attacker.kill();
    attacker.wait();
    let fds_after = settled_fd_count(fds_before);
    report
        .num("vm_growth", vm_growth)
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

/// The descriptor count once it is back to `before`, or after 4 s: the
/// pool's background reserve gives idle blocks (and their descriptors)
/// back within about 3 s.
pub(crate) fn settled_fd_count(before: usize) -> usize {
    let start = Instant::now();
    loop {
        let now = ferry_testkit::fd_count();
        if now <= before || start.elapsed() > secs(4) {
            return now;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// The victim's final report (the one with its descriptor counts).
pub(crate) fn final_report(run: &VictimRun) -> &Report {
    run.find("fds_after")
        .unwrap_or_else(|| panic!("victim `{}` ended without its final report", run.role))
}

// ---------------------------------------------------------------------

/// Whether a reported outcome is the local shortage of pending
/// descriptors: `Io` with `QuotaExceeded`.
pub(crate) fn is_quota(outcome: &str) -> bool {
    kind(outcome) == "Io" && outcome.contains("QuotaExceeded")
}

/// Message `seq` of `len` bytes, stamped so any mix-up shows.
pub(crate) fn pattern(seq: u64, len: usize) -> Vec<u8> {
    let mut msg = vec![(seq % 251) as u8; len];
    msg[..8].copy_from_slice(&seq.to_le_bytes());
    msg
}
