//! Bad ring positions in a pipe end the attacker sends: refused with
//! `Protocol`, or (consistent, near `u64::MAX`) working across the wrap.

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{RUN_LIMIT, Victim, final_report, is_protocol, pattern, play};
use ferry::{Pipe, PipeOptions};
use ferry_testkit::{Watchdog, secs, this_test};

/// Round trips through the end whose positions start near `u64::MAX`.
const ROUND_TRIPS: u64 = 20;

/// The attacker sends a pipe end of its own 4 KiB region whose ring
/// positions are (a) not multiples of 8, (b) near `u64::MAX` and
/// inconsistent, or (c) aligned, consistent and near `u64::MAX`. (a) and
/// (b) must be refused with `Protocol` (at `recv_with` or at the end's
/// first use) without a crash; (c) must work: 20 messages of 1,000 bytes
/// (5 ring capacities, so positions wrap past `u64::MAX`) go round trip
/// through the attacker, which echoes them by hand.
#[test]
fn bad_ring_positions_in_a_received_pipe_end() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, positions_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for case in ["a", "b", "c"] {
        let role = format!("victim-positions-{case}");
        let run = run_victim(&dog, test, &role, RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_positions(&mut verdict, case, &run);
        }
    }
    verdict.finish();
}

fn check_positions(verdict: &mut Verdict, case: &str, run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let field = |key| r.get(key).unwrap_or("-");
    let recv_with = r.str("recv_with");
    if case == "c" {
        verdict.check(recv_with == "Ok" && field("echo") == "Ok", || {
            format!(
                "(c) aligned positions near u64::MAX must work: recv_with {recv_with}, \
                 {} of {ROUND_TRIPS} round trips, then {}",
                field("round_trips"),
                field("echo")
            )
        });
        return;
    }
    let at_once = is_protocol(recv_with);
    let on_use =
        recv_with == "Ok" && is_protocol(field("try_send")) && is_protocol(field("try_recv"));
    verdict.check(at_once || on_use, || {
        format!(
            "({case}) impossible positions must give Protocol: recv_with {recv_with}, \
             then try_send {}, try_recv {}",
            field("try_send"),
            field("try_recv")
        )
    });
}

fn positions_victim(test: &str, role: &str) {
    let case = role.trim_start_matches("victim-positions-");
    let v = Victim::start(
        test,
        role,
        &format!("positions-{case}"),
        &PipeOptions::new(),
    );
    stage("recv_with");
    let got = v.boot.receiver().recv_with();
    let report = Report::new().text("recv_with", outcome(&got));
    let pipes = got.map(|m| m.pipes).unwrap_or_default();
    let mut report = report.num("ends", pipes.len() as u64);
    if let Some(end) = pipes.first() {
        report = match case {
            "c" => round_trips(end, report),
            _ => first_use(end, report),
        };
    }
    v.finish(pipes, report);
}

/// `try_send` (the write that would land out of bounds), then `try_recv`.
fn first_use(end: &Pipe, report: Report) -> Report {
    stage("try_send");
    let sent = end.sender().try_send(b"hello");
    stage("try_recv");
    let got = end.receiver().try_recv();
    report
        .text("try_send", outcome(&sent))
        .text("try_recv", outcome(&got))
}

fn round_trips(end: &Pipe, report: Report) -> Report {
    stage("round trips");
    for i in 0..ROUND_TRIPS {
        let msg = pattern(i, 1000);
        // Every other round trip writes and reads in place, in the
        // attacker's ring (some frames cross its end: those are copied).
        let sent = match i % 2 {
            0 => end.send(&msg),
            _ => end
                .sender()
                .send_in_place(msg.len(), |slot| slot.copy_from_slice(&msg)),
        };
        if let Err(e) = sent {
            return report
                .num("round_trips", i)
                .text("echo", format!("send: {e:?}"));
        }
        let got = match i % 2 {
            0 => end.receiver().recv_timeout(secs(2)),
            // No deadline here: an attacker that stops echoing leaves the
            // victim to its run limit, which fails the test as a hang.
            _ => match end.receiver().recv_in_place(|reply| reply.to_vec()) {
                Ok(reply) => Ok(reply),
                Err(e) => Err(ferry::RecvTimeoutError::from(e)),
            },
        };
        let why = match got {
            Ok(reply) if reply == msg => continue,
            Ok(reply) => format!("recv: a wrong reply of {} bytes", reply.len()),
            Err(e) => format!("recv: {e:?}"),
        };
        return report.num("round_trips", i).text("echo", why);
    }
    report.num("round_trips", ROUND_TRIPS).text("echo", "Ok")
}
