//! Routing records from a forwarder that lies (the attacker holds the
//! sending side of the bootstrap pipe's ring 1 and says it moved): each lie
//! breaks only that link, with the rule it broke named by the first call
//! that follows the move (a message already in the ring that names no
//! handle may arrive before it); a count bumped with
//! no record behind it, and an introduction to a socket nobody holds, cost
//! nothing but that pipe. No descriptor is kept after any of them.

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::attacker::routes::{AFTER, BETWEEN, FRAMED_MOVES};
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
/// - a receiving side routed to the victim without the socket to its
///   sender's holder (only a sending side comes home, `RouteDescriptors`);
/// - more moves than a link keeps unfollowed (`TooManyPendingEnds`);
/// - a bumped `moved` count with no record: the message after it arrives;
/// - an introduction to a socket whose other end is closed: `Disconnected`
///   (after the message written after the move, if it is read first), not
///   a hang;
/// - a sender whose holder says, for good, that it moves it: the forward
///   of its receiver gives up, and the receiver stays (see
///   [`naming_forever`]);
/// - a whole end routed as its receiving side twice (`RouteJoin`), or
///   whose sending side never follows: the message naming it finds the end
///   never sent (`NeverSent`), not a hang;
/// - 3,000 moves in a chain, each to a new socket, with nothing written
///   between them: the victim follows them all and keeps no link of them
///   but the last (the message after them arrives, no descriptor kept);
/// - 200 moves with a message written before each, to a victim that
///   reads none of them first: it keeps links for unread frames up to its
///   bound (64 at a soft limit of 1,024), then the move past it breaks the
///   pipe (`RouteTooLong`), after the messages before it;
/// - a receiving side said to come with a prefix whose prefix is a
///   sending half (`RouteJoin`), or never comes (`NeverSent`);
/// - a sender that says it switched to the new link past everything its
///   ring holds, as the victim forwards its receiver: the forward is
///   refused and that pipe alone is broken (`RouteBoundary`) (see
///   [`naming_forever`]).
#[test]
fn routing_lies() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, route_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(120));
    let mut verdict = Verdict::new();
    naming_forever(&mut verdict, &dog, test);
    for (attack, got, then) in [
        ("route-boundary", "RouteBoundary", ""),
        ("route-no-socket", "Ok", "Timeout"),
        ("route-pipe-not-socket", "RouteDescriptors", ""),
        ("route-routed-consumer", "RouteDescriptors", ""),
        ("route-moved-flood", "TooManyPendingEnds", ""),
        ("route-bump-only", "Ok", "Timeout"),
        ("route-dead-end", "Ok", "Disconnected"),
        ("route-join-same-ring", "RouteJoin", ""),
        ("route-join-unfinished", "NeverSent", ""),
        ("route-move-churn", "Ok", "Timeout"),
        ("route-move-frames", "RouteTooLong", ""),
        ("route-prefix-not-receiver", "RouteJoin", ""),
        ("route-prefix-never", "NeverSent", ""),
    ] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check(&mut verdict, attack, (got, then), &run);
        }
    }
    verdict.finish();
}

/// A sender that never leaves its naming section: the victim's forward of
/// its receiver gives up within its bound (5 s), not a hang, and that
/// pipe alone is broken (`RouteBoundary` on the receiver handed back). A
/// sender whose holder says it moves it, for good: the forward is refused
/// as soon (`NotTransferable`, saying why), nothing sent, and the receiver
/// handed back still works (its receive waits, as for any quiet sender).
fn naming_forever(verdict: &mut Verdict, dog: &Watchdog, test: &str) {
    for (attack, forward_want, then_want) in [
        ("route-naming-forever", "NotTransferable", "RouteBoundary"),
        ("route-moving-forever", "NotTransferable", "Timeout"),
        ("route-followed-lie", "NotTransferable", "RouteBoundary"),
    ] {
        let run = run_victim(dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if !verdict.survived(&run) {
            continue;
        }
        verdict.no_fd_growth(&run);
        let r = final_report(&run);
        let (forward, then, ms) = (r.str("forward"), r.str("then"), r.u64("forward_ms"));
        verdict.note(format!(
            "{attack}: the forward gave {forward} after {ms} ms, then recv {then}"
        ));
        verdict.check(
            forward.starts_with(forward_want) && ms < 8000 && then.contains(then_want),
            || format!("{attack}: expected {forward_want} within 8 s, then {then_want}: {forward} after {ms} ms, then {then}"),
        );
    }
}

fn check(verdict: &mut Verdict, attack: &str, (want, then_want): (&str, &str), run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (got, then) = (r.str("recv"), r.str("then"));
    verdict.note(format!("{attack}: recv gave {got}, then {then}"));
    // The message after a lie needs no link (it names no handle), so it
    // may arrive first; the lie is named by the call that follows the move.
    let named = |o: &str| o.starts_with("Protocol") && o.contains(want);
    if attack == "route-move-churn" {
        // The last link (a socket, no process handle), and room for the
        // closer's lag.
        let held = r.u64("held");
        verdict.note(format!("{attack}: {held} descriptors held after the moves"));
        verdict.check(held <= 4, || {
            format!("{attack}: the victim holds {held} descriptors after the moves")
        });
    }
    let ok = match want {
        // The new path is gone: the message written after the move may
        // arrive first, or the pipe may be seen ended before it is read.
        "Ok" if then_want == "Disconnected" => {
            (got == "Ok" && r.str("bytes") == "after" && then.starts_with(then_want))
                || got == "Disconnected"
        }
        "Ok" => got == "Ok" && r.str("bytes") == "after" && then.starts_with(then_want),
        _ => named(got) || (got == "Ok" && r.str("bytes") == "after" && named(then)),
    };
    verdict.check(ok, || {
        format!("{attack}: expected {want} (then {then_want}), got {got} (then {then})")
    });
}

fn route_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    if attack == "route-move-frames" {
        // The usual soft limit, whatever this machine's: the route's bound
        // is read from it.
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let hard = getrlimit(Resource::Nofile).maximum;
        let soft = Rlimit {
            current: Some(1024),
            maximum: hard,
        };
        setrlimit(Resource::Nofile, soft).expect("lower the descriptor limit");
    }
    let v = Victim::start(test, role, attack, &PipeOptions::new());
    v.boot.send(b"go").expect("go");
    if matches!(
        attack,
        "route-naming-forever" | "route-moving-forever" | "route-followed-lie"
    ) {
        return naming_victim(v);
    }
    if attack == "route-move-frames" {
        return framed_moves_victim(v);
    }
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
    // Descriptors held beyond those before the attack, with the pipe (and
    // its route) still here.
    let held = ferry_testkit::settled_fd_count().saturating_sub(v.fds_before);
    let report = Report::new()
        .text("recv", outcome(&got))
        .text("bytes", bytes)
        .text("then", then)
        .num("held", held as u64);
    v.finish(Vec::new(), report);
}

/// Reads nothing until the attacker has made its moves (a second is a
/// hundred times what 200 take), then counts the messages between them
/// until the pipe says otherwise, and reports what it said.
fn framed_moves_victim(v: Victim) {
    std::thread::sleep(Duration::from_secs(1));
    stage("recv");
    let mut count = 0;
    let end = loop {
        match v.boot.receiver().recv_timeout(Duration::from_secs(5)) {
            Ok(bytes) if bytes == BETWEEN => count += 1,
            other => break outcome(&other),
        }
    };
    let report = Report::new()
        .text("recv", end)
        .text("bytes", "")
        .text("then", format!("after {count} of {FRAMED_MOVES} messages"));
    v.finish(Vec::new(), report);
}

/// Forwards a receiving half whose sender the attacker holds (and never
/// ends naming in) over the bootstrap pipe, and reports how the forward
/// ended, how long it took, and what the receiver handed back says.
fn naming_victim(v: Victim) {
    let Victim {
        dog,
        fds_before,
        vm_before,
        attacker,
        boot,
    } = v;
    // A pipe of its own: its sending half goes to the attacker, which then
    // never leaves its naming section in it; its receiving half is then
    // forwarded (to the attacker too: the way does not matter).
    let (a, b) = ferry::pipe().expect("a pipe");
    let (a_tx, rx) = a.split();
    let (b_tx, b_rx) = b.split();
    boot.sender()
        .send_with(b"sender", vec![ferry::Handle::from(b_tx)])
        .expect("send the sending half");
    stage("naming");
    let naming = boot.receiver().recv_timeout(Duration::from_secs(10));
    assert!(
        matches!(&naming, Ok(bytes) if bytes == b"naming"),
        "the attacker never said it names: {naming:?}"
    );
    let (tx, _) = boot.split();
    stage("forward");
    let since = std::time::Instant::now();
    let sent = tx.send_with(b"", vec![ferry::Handle::from(rx)]);
    let ms = since.elapsed().as_millis() as u64;
    let (forward, then) = match sent {
        Ok(()) => ("Ok".to_string(), String::new()),
        Err(e) => {
            let then = match e.handles.into_iter().next() {
                Some(ferry::Handle::Receiver(rx)) => {
                    outcome(&rx.recv_timeout(Duration::from_secs(1)))
                }
                _ => "no receiver back".to_string(),
            };
            (format!("{:?}", e.error), then)
        }
    };
    let report = Report::new()
        .text("forward", forward)
        .num("forward_ms", ms)
        .text("then", then);
    let vm_growth = ferry_testkit::vm_peak().saturating_sub(vm_before);
    drop((tx, a_tx, b_rx));
    crate::victim::end_attack(dog, fds_before, vm_growth, attacker, report);
}
