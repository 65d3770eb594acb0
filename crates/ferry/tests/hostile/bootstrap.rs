//! A hostile parent: at the bootstrap (this test plays the raw parent,
//! the victim is the child), and at a server's invitation (a child
//! invited to a server reads a note its parent wrote).

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::attacker;
use crate::attacker::report::{Report, Verdict, VictimRun, Watch, outcome, stage};
use crate::victim::{
    RUN_LIMIT, VICTIM_LIMIT, final_report, is_protocol, is_quota, settled_fd_count,
};
use ferry::Pipe;
use ferry_testkit::{Watchdog, secs, this_test};

/// This test plays a raw parent: it makes the control socket pair
/// itself, queues what an attack sends on it, and starts the victim with
/// a `FERRY_BOOTSTRAP` naming the socket, as `ferry::spawn` would. The
/// victim's `Pipe::from_parent` must return an error, never panic or
/// wait, and leave no descriptor behind:
/// - a descriptor record (kind 6) where the pipe end id 0 should be, or
///   a pipe end whose descriptor is a pipe, not a memfd, or one with two
///   descriptors: `Protocol`;
/// - 260 descriptor records ahead of the pipe end: `Io` (QuotaExceeded):
///   a parent cannot make its child hold more than 256 descriptors;
/// - nothing sent (the parent's end open, or closed): `Protocol`.
#[test]
fn hostile_parent_at_bootstrap() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return boot_victim(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    for attack in [
        "boot-fd-record",
        "boot-not-memfd",
        "boot-two-fds",
        "boot-fd-flood",
        "boot-nothing",
        "boot-hangup",
    ] {
        let run = run_raw_parent(&dog, test, attack);
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("from_parent");
        verdict.note(format!("{attack}: from_parent gave {got}"));
        let ok = match attack {
            "boot-fd-flood" => is_quota(got),
            _ => is_protocol(got),
        };
        verdict.check(ok, || format!("{attack}: from_parent gave {got}"));
    }
    verdict.finish();
}

/// Runs the victim of `attack` as the child of a raw parent: this process.
fn run_raw_parent(dog: &Watchdog, test: &str, attack: &str) -> VictimRun {
    use std::os::fd::AsRawFd;
    let (parent, theirs) = attacker::socket::inheritable_pair().expect("a socket pair");
    parent.grow_send_buffer();
    queue_bootstrap_attack(&parent, attack);
    // Held until the victim is done, unless the attack is to hang up.
    let parent = (attack != "boot-hangup").then_some(parent);
    let role = format!("victim-{attack}");
    let mut cmd = ferry_testkit::child_command(test, &role);
    let env = attacker::wire::bootstrap_env(theirs.as_raw_fd(), std::process::id());
    cmd.env(ferry_testkit::BOOTSTRAP_ENV, env)
        .stdout(Stdio::piped());
    // Only this thread spawns while the socket is inheritable (the test
    // holds `serial`), and it is closed here at once.
    let child = dog.watch(cmd.spawn().expect("spawn the victim"));
    drop(theirs);
    let run = Watch::new(child, &role, RUN_LIMIT).finish(|_| {});
    drop(parent);
    run
}

/// Queues on `parent` what `attack` sends the child before it starts.
fn queue_bootstrap_attack(parent: &attacker::socket::RawSocket, attack: &str) {
    use attacker::fd_records::fresh;
    use attacker::wire::{RecordKind, record};
    use std::os::fd::AsFd;
    let region = attacker::region::RawRegion::create(4096).expect("make a region");
    // The pipe end id 0, role 1: what `ferry::spawn` sends.
    let pipe_end = |fds: &[std::os::fd::BorrowedFd<'_>]| {
        parent
            .send_record(&record(RecordKind::PipeEnd, 1, 0), fds)
            .expect("queue a record");
    };
    match attack {
        "boot-fd-record" => {
            let fd = fresh(4096);
            parent
                .send_record(&record(RecordKind::Fd, 0, 0), &[fd.as_fd()])
                .expect("queue a record");
        }
        "boot-not-memfd" => {
            let (reader, _writer) = std::io::pipe().expect("a pipe");
            pipe_end(&[reader.as_fd()]);
        }
        "boot-two-fds" => pipe_end(&[region.fd(), region.fd()]),
        "boot-fd-flood" => {
            let count = ferry::wire::MAX_PENDING_FDS as u64 + 4;
            for id in 1..=count {
                let fd = fresh(id);
                let queued = parent.try_send_record(&record(RecordKind::Fd, 0, id), &[fd.as_fd()]);
                assert!(
                    matches!(queued, Ok(true)),
                    "the socket took only {} records before the child starts: {queued:?}",
                    id - 1
                );
            }
            pipe_end(&[region.fd()]);
        }
        _ => {}
    }
}

/// The victim of a raw parent: takes its pipe, and reports how that went
/// with its descriptor counts before (not counting the inherited socket,
/// which a failed `from_parent` must close too) and after.
fn boot_victim(role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
    let fds_before = ferry_testkit::fd_count() - 1;
    stage("from_parent");
    let got = Pipe::from_parent();
    let report = Report::new().text("from_parent", outcome(&got));
    drop(got);
    let fds_after = settled_fd_count(fds_before);
    report
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}

/// How long an invited victim gives `connect_invited_with`.
const INVITE_TIMEOUT: Duration = Duration::from_millis(500);

/// A raw parent starts the victim as if invited to a server
/// (`FERRY_INVITE` names a pipe it inherits), and writes into that pipe:
/// - nothing, holding its end open, or 10 bytes and holding it: the
///   victim's `connect_invited_with` keeps its timeout (500 ms; before, it
///   waited for the end of the pipe for ever) and says `Timeout`;
/// - 60 bytes of garbage, or a note over the longest invitation (before:
///   a local `Io` error), then closes: `BadInvitation` naming the parent.
#[test]
fn hostile_parent_at_invitation() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return invite_victim(&role);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in [
        "invite-held-open",
        "invite-partial",
        "invite-garbage",
        "invite-too-long",
    ] {
        let run = run_inviting_parent(&dog, test, attack);
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("connect_invited");
        let took = Duration::from_millis(r.u64("took_ms"));
        verdict.note(format!("{attack}: connect_invited gave {got} in {took:?}"));
        let ok = match attack {
            "invite-held-open" | "invite-partial" => got == "Timeout",
            _ => {
                got.starts_with("BadInvitation")
                    && got.contains(&format!("parent: {}", std::process::id()))
            }
        };
        verdict.check(ok, || format!("{attack}: connect_invited gave {got}"));
        verdict.check(took < INVITE_TIMEOUT + secs(2), || {
            format!("{attack}: connect_invited took {took:?}, its timeout {INVITE_TIMEOUT:?}")
        });
    }
    verdict.finish();
}

/// Runs the victim of `attack` as a child invited by a raw parent: this
/// process, which holds the note pipe's write end until the victim is
/// done, unless the attack closes it.
fn run_inviting_parent(dog: &Watchdog, test: &str, attack: &str) -> VictimRun {
    use std::os::fd::AsRawFd;
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).expect("a pipe");
    // The child's copy, without close-on-exec.
    let theirs = rustix::io::dup(&read).expect("dup the read end");
    drop(read);
    let note = invitation_note(attack);
    rustix::io::write(&write, &note).expect("write the note");
    let write = matches!(attack, "invite-held-open" | "invite-partial").then_some(write);
    let role = format!("victim-{attack}");
    let mut cmd = ferry_testkit::child_command(test, &role);
    let env = format!("fd={},parent={}", theirs.as_raw_fd(), std::process::id());
    cmd.env("FERRY_INVITE", env).stdout(Stdio::piped());
    // Only this thread spawns while the pipe is inheritable (the test
    // holds `serial`), and it is closed here at once.
    let child = dog.watch(cmd.spawn().expect("spawn the victim"));
    drop(theirs);
    let run = Watch::new(child, &role, RUN_LIMIT).finish(|_| {});
    drop(write);
    run
}

/// What the raw parent writes into the note's pipe for `attack`.
fn invitation_note(attack: &str) -> Vec<u8> {
    // "FRYI", version 1, abstract, no token, 0, the name's length, the
    // (absent) token, the name.
    let note = |name_len: usize, name: &[u8]| {
        let mut out = b"FRYI".to_vec();
        out.extend_from_slice(&[1, 0, 0, 0]);
        out.extend_from_slice(&(name_len as u16).to_le_bytes());
        out.extend_from_slice(&[0; 32]);
        out.extend_from_slice(name);
        out
    };
    match attack {
        "invite-partial" => note(4, b"none")[..10].to_vec(),
        "invite-garbage" => vec![0xa5; 60],
        "invite-too-long" => note(300, &[b'x'; 300]),
        _ => Vec::new(),
    }
}

/// The victim of a raw inviting parent: connects as invited, and reports
/// what came of it, how long it took, and its descriptor counts.
fn invite_victim(role: &str) {
    let dog = Watchdog::start(format!("victim `{role}`"), VICTIM_LIMIT);
    // Not counting the inherited pipe, which a failed connect closes too.
    let fds_before = ferry_testkit::fd_count() - 1;
    stage("connect_invited");
    let start = Instant::now();
    let got = ferry::connect_invited_with(ferry::ConnectOptions::new().timeout(INVITE_TIMEOUT));
    let took = start.elapsed();
    let report = Report::new()
        .text("connect_invited", outcome(&got))
        .num("took_ms", took.as_millis() as u64);
    drop(got);
    let fds_after = settled_fd_count(fds_before);
    report
        .num("fds_before", fds_before as u64)
        .num("fds_after", fds_after as u64)
        .print();
    drop(dog);
}
