//! Doorbell records (what a `Select` or an async receiver sends): a bad
//! descriptor is `Protocol`, a flood of good ones costs no descriptors.

use crate::attacker::attacks;
use crate::attacker::report::{Report, Verdict, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, is_protocol, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};

/// (a) A doorbell record whose descriptor is a pipe, not a datagram
/// socket, is a `Protocol` error (ringing a pipe could block or fill it).
/// (b) A flood of valid doorbell records (hundreds per message, naming the
/// bootstrap region's every side and regions that do not exist, each with
/// a fresh socket) costs no descriptors: each replaces the one before it
/// or is dropped; the messages after them arrive.
#[test]
fn doorbell_records() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, doorbell_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in ["doorbell-pipe", "doorbell-flood"] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let got = r.str("recv_with");
        match attack {
            "doorbell-pipe" => verdict.check(is_protocol(got), || {
                format!("a doorbell that is a pipe must give Protocol: recv_with gave {got}")
            }),
            _ => {
                let (rounds, records) = (r.u64("rounds"), r.u64("doorbells"));
                verdict.note(format!(
                    "doorbell flood: {records} records over {rounds} messages"
                ));
                verdict.check(got == "Ok" && rounds == attacks::DOORBELL_ROUNDS, || {
                    format!(
                        "the messages after a doorbell flood must arrive: {rounds} did, then {got}"
                    )
                });
            }
        }
    }
    verdict.finish();
}

fn doorbell_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    let rounds = match attack {
        "doorbell-flood" => attacks::DOORBELL_ROUNDS,
        _ => 1,
    };
    let (mut got, mut ends, mut records) = (Ok(()), Vec::new(), 0u64);
    let mut done = 0u64;
    for _ in 0..rounds {
        stage("recv_with");
        match v.boot.receiver().recv_with() {
            Ok(mut msg) => {
                records += msg
                    .bytes
                    .get(..8)
                    .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
                ends.append(&mut msg.pipes);
                done += 1;
            }
            Err(e) => {
                got = Err(e);
                break;
            }
        }
    }
    let report = Report::new()
        .text("recv_with", outcome(&got))
        .num("rounds", done)
        .num("doorbells", records);
    v.finish(ends, report);
}
