//! Routing records from a forwarder that lies (the attacker holds the
//! sending side of the bootstrap pipe's ring 1 and says it moved): each lie
//! breaks only that link, with the rule it broke named by the first call
//! that follows the move (a message already in the ring that names no
//! handle may arrive before it); a count bumped with
//! no record behind it, and an introduction to a socket nobody holds, cost
//! nothing but that pipe. No descriptor is kept after any of them.

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::attacker::routes::AFTER;
use crate::victim::{RUN_LIMIT, Victim, final_report, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};
use std::time::Duration;

/// Every lie a forwarder can tell in a `Moved` or `Routed` record:
/// - a boundary past what the ring holds (`RouteBoundary`);
/// - a pipe where the socket to the new holder belongs
///   (`RouteDescriptors`);
/// - a move with no socket at all, which says the side came to the
///   victim's own process: nothing changes until the side itself arrives
///   (the message after it arrives, the link still watches the attacker);
/// - a receiving side routed to the victim, which ferry does not send yet
///   (`RouteUnexpected`);
/// - more moves than a link keeps unfollowed (`TooManyPendingEnds`);
/// - a bumped `moved` count with no record: the message after it arrives;
/// - an introduction to a socket whose other end is closed: the message
///   already in the ring arrives, then `Disconnected` (not a hang).
#[test]
fn routing_lies() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, route_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(120));
    let mut verdict = Verdict::new();
    for (attack, got, then) in [
        ("route-boundary", "RouteBoundary", ""),
        ("route-no-socket", "Ok", "Timeout"),
        ("route-pipe-not-socket", "RouteDescriptors", ""),
        ("route-routed-consumer", "RouteUnexpected", ""),
        ("route-moved-flood", "TooManyPendingEnds", ""),
        ("route-bump-only", "Ok", "Timeout"),
        ("route-dead-end", "Ok", "Disconnected"),
    ] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check(&mut verdict, attack, (got, then), &run);
        }
    }
    verdict.finish();
}

fn check(verdict: &mut Verdict, attack: &str, (want, then_want): (&str, &str), run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (got, then) = (r.str("recv"), r.str("then"));
    verdict.note(format!("{attack}: recv gave {got}, then {then}"));
    // The message after a lie needs no link (it names no handle), so it
    // may arrive first; the lie is named by the call that follows the move.
    let named = |o: &str| o.starts_with("Protocol") && o.contains(want);
    let ok = match want {
        "Ok" => got == "Ok" && r.str("bytes") == "after" && then.starts_with(then_want),
        _ => named(got) || (got == "Ok" && r.str("bytes") == "after" && named(then)),
    };
    verdict.check(ok, || {
        format!("{attack}: expected {want} (then {then_want}), got {got} (then {then})")
    });
}

fn route_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    v.boot.send(b"go").expect("go");
    stage("recv");
    let got = v.boot.recv();
    let bytes = match &got {
        Ok(bytes) if bytes == AFTER => "after",
        Ok(_) => "other",
        Err(_) => "",
    };
    stage("then");
    let then = match got {
        Ok(_) => outcome(&v.boot.receiver().recv_timeout(Duration::from_secs(2))),
        Err(_) => String::new(),
    };
    let report = Report::new()
        .text("recv", outcome(&got))
        .text("bytes", bytes)
        .text("then", then);
    v.finish(Vec::new(), report);
}
