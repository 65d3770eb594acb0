//! Descriptor records: a flood the victim cannot hold, and malformed
//! records, each failing the link with its own violation and leaking
//! nothing.

use std::time::Instant;

use crate::attacker;
use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, is_protocol, is_quota, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};
// ---------------------------------------------------------------------
// A flood of descriptor records.

/// Slack over the pending-descriptor cap a victim's count may show while
/// it reads (the duplicate a peek takes, the directory `fd_count` reads).
const FD_SLACK: u64 = 4;

/// The attacker sends a side pipe, then 1,000 descriptor records (each a
/// fresh memfd) that the message on the bootstrap pipe cannot reach
/// without holding them all. The victim's `recv_with` there must give a
/// local `Io` error (`QuotaExceeded`, not `Protocol`) once 256 are
/// pending, having grown its descriptor count by at most that; the side
/// pipe's message claiming 10 of them must still arrive with those 10
/// (each the memfd sent under its id); a second receive on the bootstrap
/// pipe must again be the local error (the link stays up); and once the
/// pipes are dropped the count is back to where it began.
#[test]
fn descriptor_record_flood() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, fd_flood_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    let run = run_victim(&dog, test, "victim-fd-flood", RUN_LIMIT, |_| {});
    if verdict.survived(&run) {
        check_fd_flood(&mut verdict, &run);
    }
    verdict.finish();
}

fn check_fd_flood(verdict: &mut Verdict, run: &VictimRun) {
    use attacker::fd_records::CLAIMED;
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (flood, held) = (r.str("flood"), r.u64("held"));
    verdict.note(format!(
        "fd flood: recv_with gave {flood} after {} ms, holding {held} more descriptors",
        r.u64("flood_us") / 1000
    ));
    verdict.check(is_quota(flood), || {
        format!("a flood of unclaimed descriptors must give a local Io(QuotaExceeded): got {flood}")
    });
    let cap = ferry::wire::MAX_PENDING_FDS as u64;
    verdict.check(held <= cap + FD_SLACK, || {
        format!("the flood made the victim hold {held} descriptors (cap {cap})")
    });
    let (claimed, count) = (r.str("claimed"), r.u64("claimed_fds"));
    verdict.check(
        claimed == "Ok" && count == CLAIMED && r.str("claimed_ids") == "yes",
        || {
            format!(
                "the side pipe's message must arrive with the {CLAIMED} descriptors it claims: \
                 {claimed} with {count} fds, ids match: {}",
                r.str("claimed_ids")
            )
        },
    );
    let (again, held_again) = (r.str("again"), r.u64("held_again"));
    verdict.check(is_quota(again) && held_again <= cap + FD_SLACK, || {
        format!(
            "the link must stay up: a second receive gave {again}, holding {held_again} descriptors"
        )
    });
}

fn fd_flood_victim(test: &str, role: &str) {
    use attacker::fd_records::FD_BASE;
    let v = Victim::start(test, role, "fd-flood", &PipeOptions::new());
    stage("side pipe");
    let side = v
        .boot
        .receiver()
        .recv_with()
        .ok()
        .and_then(|mut m| m.pipes.pop())
        .expect("the side pipe");
    let linked = ferry_testkit::settled_fd_count() as u64;
    v.boot.send(b"go").expect("go");
    stage("recv_with under the flood");
    let start = Instant::now();
    let flood = v.boot.receiver().recv_with();
    let micros = start.elapsed().as_micros() as u64;
    let held = (ferry_testkit::settled_fd_count() as u64).saturating_sub(linked);
    stage("recv_with on the side pipe");
    let claimed = side.receiver().recv_with();
    let (count, ids_match) = match &claimed {
        Ok(msg) => {
            let sizes = msg
                .fds
                .iter()
                .map(|fd| rustix::fs::fstat(fd).map(|s| s.st_size as u64));
            let ids_match = sizes.zip(FD_BASE..).all(|(size, id)| size.ok() == Some(id));
            (msg.fds.len() as u64, ids_match)
        }
        Err(_) => (0, false),
    };
    let claimed = {
        let text = outcome(&claimed);
        drop(claimed);
        text
    };
    stage("recv_timeout after the side message");
    let again = v.boot.receiver().recv_timeout(secs(2));
    let held_again = (ferry_testkit::settled_fd_count() as u64).saturating_sub(linked);
    let report = Report::new()
        .text("flood", outcome(&flood))
        .num("flood_us", micros)
        .num("held", held)
        .text("claimed", claimed)
        .num("claimed_fds", count)
        .text("claimed_ids", if ids_match { "yes" } else { "no" })
        .text("again", outcome(&again))
        .num("held_again", held_again);
    v.finish(vec![side], report);
}

// ---------------------------------------------------------------------
// Malformed descriptor records.

/// Each attack leaves three valid descriptors pending (or one, or none)
/// and then breaks a rule; the victim's `recv_with` must give `Protocol`
/// naming it, close the pending descriptors at once (its count, taken
/// right after the error, is no higher than before the attack), and the
/// link must stay closed (`recv_timeout` gives `Protocol` at once):
/// - a descriptor record with 0, 2 or 5 descriptors
///   (`RecordDescriptorCount`), or with 8, more than the receive buffer
///   takes (`MSG_CTRUNC`: `MalformedRecord`);
/// - a descriptor record whose id a pending descriptor or pipe end holds,
///   or a pipe end whose id a pending descriptor holds (`PipeEndIdTwice`);
/// - a message naming one descriptor twice (`PipeEndNamedTwice`).
///
/// And one honest use a victim must survive: a message with three
/// descriptors and a pipe end received with the bytes-only `recv` arrives,
/// its descriptors closed at once; the next message arrives too.
#[test]
fn malformed_descriptor_records() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, fd_record_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    // A record's receive buffer holds 4 to 6 descriptors (`CMSG_SPACE`
    // rounding, and where the buffer falls): 5 may arrive whole (one too
    // many) or cut short (`MSG_CTRUNC`); 8 are always cut short.
    let count = &["RecordDescriptorCount"][..];
    let id_twice = &["PipeEndIdTwice"][..];
    for (attack, expected) in [
        ("fd-none", count),
        ("fd-two", count),
        ("fd-five", &["RecordDescriptorCount", "MalformedRecord"]),
        ("fd-eight", &["MalformedRecord"]),
        ("fd-id-twice", id_twice),
        ("fd-id-of-pipe-end", id_twice),
        ("pipe-end-id-of-fd", id_twice),
        ("fd-named-twice", &["PipeEndNamedTwice"]),
        ("fd-bytes-only", &["Ok"]),
    ] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_fd_record(&mut verdict, attack, expected, &run);
        }
    }
    verdict.finish();
}

fn check_fd_record(verdict: &mut Verdict, attack: &str, expected: &[&str], run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (got, then) = (r.str("recv"), r.str("then"));
    let (linked, at_error) = (r.u64("linked"), r.u64("at_error"));
    verdict.note(format!(
        "{attack}: recv gave {got}, then {then}; descriptors {linked} before, {at_error} after"
    ));
    verdict.check(at_error <= linked, || {
        format!(
            "{attack}: the victim holds {at_error} descriptors after the receive, {linked} before"
        )
    });
    if expected == ["Ok"] {
        let after = String::from_utf8_lossy(attacker::fd_records::AFTER).into_owned();
        return verdict.check(got == "Ok" && then == after, || {
            format!("{attack}: both messages must arrive as bytes: got {got}, then {then}")
        });
    }
    let named = expected.iter().any(|why| got.contains(why));
    verdict.check(is_protocol(got) && named, || {
        format!(
            "{attack}: expected Protocol({}), got {got}",
            expected.join(" or ")
        )
    });
    verdict.check(is_protocol(then), || {
        format!("{attack}: the link must stay closed after a violation: recv_timeout gave {then}")
    });
}

fn fd_record_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    let linked = ferry_testkit::settled_fd_count() as u64;
    v.boot.send(b"go").expect("go");
    stage("recv");
    let (got, pipes) = match attack {
        "fd-bytes-only" => match v.boot.recv() {
            Ok(bytes) if bytes == attacker::fd_records::BYTES_ONLY => (Ok(()), Vec::new()),
            Ok(bytes) => (Err(format!("wrong bytes: {bytes:?}")), Vec::new()),
            Err(e) => (Err(format!("{e:?}")), Vec::new()),
        },
        _ => match v.boot.receiver().recv_with() {
            Ok(msg) => (Err(format!("Ok with {} fds", msg.fds.len())), msg.pipes),
            Err(e) => (Err(format!("{e:?}")), Vec::new()),
        },
    };
    let at_error = ferry_testkit::fd_count_back_to(linked as usize) as u64;
    stage("then");
    let then = match v.boot.receiver().recv_timeout(secs(2)) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => format!("{e:?}"),
    };
    let got = match got {
        Ok(()) => "Ok".to_string(),
        Err(e) => e,
    };
    let report = Report::new()
        .text("recv", got)
        .text("then", then)
        .num("linked", linked)
        .num("at_error", at_error);
    v.finish(pipes, report);
}
