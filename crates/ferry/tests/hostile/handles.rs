//! Address-space exhaustion by handles: pipe ends of maximal regions,
//! and frames claiming more handles than were sent; the victim maps no
//! more than its link's budget.

use std::time::Instant;

use crate::attacker::report::{Report, Verdict, VictimRun, outcome, run_victim, stage};
use crate::victim::{GIB, RUN_LIMIT, Victim, final_report, is_protocol, play};
use ferry::PipeOptions;
use ferry_testkit::{Watchdog, secs, this_test};

/// The attacker sends pipe ends of maximal regions (rings of 1 GiB, a
/// sparse 2 GiB + 4 KiB memfd each), as many as the socket takes, and
/// then a `Whole` frame whose tag claims (a) 254 or 32,767 handles: the
/// victim must answer `Protocol` within 1 s; or (b) one handle, the last
/// end sent. Either way the victim stops mapping at the link's map budget
/// (`PipeOptions::max_mapped`, set to 4 GiB here): a receiver that is
/// waiting reads the control records ahead of the message that claims them
/// (so a sender never blocks on a full socket), and maps each end's region
/// as it reads it (so it holds no descriptor for it), so the attack may
/// cost up to the budget, never more.
#[test]
fn address_space_exhaustion_by_handles() {
    let test = this_test!();
    if let Some(role) = ferry_testkit::role() {
        return play(test, &role, handles_victim);
    }
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start(test, secs(90));
    let mut verdict = Verdict::new();
    for attack in ["handles-254", "handles-32767", "regions-ahead"] {
        let run = run_victim(&dog, test, &format!("victim-{attack}"), RUN_LIMIT, |_| {});
        if verdict.survived(&run) {
            check_handles(&mut verdict, attack, &run);
        }
    }
    verdict.finish();
}

fn check_handles(verdict: &mut Verdict, attack: &str, run: &VictimRun) {
    verdict.no_fd_growth(run);
    let r = final_report(run);
    let (recv_with, micros) = (r.str("recv_with"), r.u64("recv_with_us"));
    let growth = r.u64("vm_growth");
    verdict.note(format!(
        "{attack}: recv_with {recv_with} with {} ends in {} ms; address space +{:.1} GiB",
        r.u64("ends"),
        micros / 1000,
        growth as f64 / GIB as f64
    ));
    if attack != "regions-ahead" {
        verdict.check(is_protocol(recv_with) && micros < 1_000_000, || {
            format!(
                "{attack}: a tag claiming too many handles must give Protocol within \
                 1 s: got {recv_with} after {} ms",
                micros / 1000
            )
        });
    }
    // The victim's map budget (4 GiB), and 1 GiB for the rest of it.
    let bound = 5 * GIB;
    verdict.check(growth < bound, || {
        format!(
            "{attack}: address space grew by {:.1} GiB (bound {} GiB)",
            growth as f64 / GIB as f64,
            bound / GIB
        )
    });
}

fn handles_victim(test: &str, role: &str) {
    let attack = role.trim_start_matches("victim-");
    // A map budget of 4 GiB, so the bound below stays tight.
    let options = PipeOptions::new().max_mapped(4 << 30);
    let v = Victim::start(test, role, attack, &options);
    stage("recv_with");
    let start = Instant::now();
    let got = v.boot.receiver().recv_with();
    let micros = start.elapsed().as_micros() as u64;
    stage("try_recv after the attack");
    let after = v.boot.receiver().try_recv();
    let report = Report::new()
        .text("recv_with", outcome(&got))
        .num("recv_with_us", micros)
        .text("try_recv", outcome(&after));
    let pipes = got.map(|m| m.pipes).unwrap_or_default();
    let report = report.num("ends", pipes.len() as u64);
    v.finish(pipes, report);
}
