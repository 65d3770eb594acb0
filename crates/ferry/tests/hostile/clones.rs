//! A travelled clone's ring, attached to a receiver by its `Attach` frame,
//! flooded by its hostile holder: the receiver reads its rings in turns,
//! so the flood cannot starve the receiver's own ring.

use crate::attacker::attacks::OWN_MESSAGES;
use crate::attacker::report::{Report, Verdict, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};
use std::time::{Duration, Instant};

/// The attacker attaches a ring of its own to the victim's bootstrap
/// receiver (a clone of the victim's peer's sender, as it would arrive
/// from another process) and keeps it full, while it puts ten messages on
/// the bootstrap ring itself. The victim gets all ten, in order, with at
/// most a turn of the clone's between two of them (its full ring, 4 KiB,
/// holds about 170 messages: were the clone first whenever it has one,
/// the ten would wait behind the whole flood), and then hangs up; no
/// descriptor stays.
#[test]
fn a_flooding_clone_cannot_starve_its_receivers_other_rings() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, flood_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(60));
    let mut verdict = Verdict::new();
    let run = run_victim(&dog, test, "victim-clone-flood", RUN_LIMIT, |_| {});
    if verdict.survived(&run) {
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let (own, before_last) = (r.u64("own"), r.u64("clone_before_last_own"));
        verdict.check(own == OWN_MESSAGES && r.str("order") == "Ok", || {
            format!(
                "the victim's own ring gave {own} of {OWN_MESSAGES} messages (order {}), \
                 ending with {}",
                r.str("order"),
                r.str("end")
            )
        });
        verdict.check(before_last <= OWN_MESSAGES + 1, || {
            format!(
                "{before_last} of the clone's messages came before the last of the ten \
                 (turns allow {})",
                OWN_MESSAGES + 1
            )
        });
        verdict.check(r.u64("clone") > 0, || {
            "no message of the attached ring arrived".to_string()
        });
    }
    verdict.finish();
}

fn flood_victim(test: &str, role: &str) {
    let v = Victim::start(test, role, "clone-flood", &PipeOptions::new());
    stage("receive");
    // The attacker fills the clone's ring, attaches it and puts the ten on
    // the bootstrap ring within microseconds; a victim that began reading
    // sooner would drain the clone's ring before the ten exist (a race of
    // the test, not a starvation: turns only share between rings that have
    // messages). So it lets the attacker set the scene first.
    std::thread::sleep(Duration::from_millis(100));
    let rx = v.boot.receiver();
    let (mut own, mut clone, mut clone_before_last) = (0u64, 0u64, 0u64);
    let mut order = "Ok".to_string();
    let start = Instant::now();
    let mut end = String::from("-");
    while own < OWN_MESSAGES && start.elapsed() < secs(10) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(message) => match message.strip_prefix(b"own ") {
                Some(n) => {
                    if n != own.to_string().as_bytes() {
                        order = format!("own {own} was {}", String::from_utf8_lossy(n));
                    }
                    own += 1;
                    clone_before_last = clone;
                }
                None => clone += 1,
            },
            Err(ferry::RecvTimeoutError::Timeout) => {}
            Err(e) => {
                end = format!("{e:?}");
                break;
            }
        }
    }
    let report = Report::new()
        .num("own", own)
        .num("clone", clone)
        .num("clone_before_last_own", clone_before_last)
        .text("order", order)
        .text("end", end);
    v.finish(Vec::new(), report);
}
