//! The report of fixed rows, covering every table, rendered to the
//! terminal, report.md, report.json and report.svg and compared byte for
//! byte with `tests/golden/`. `GOLDEN=write` rewrites those files after a
//! change the report is meant to show.

use super::rows::{Buckets, CallsRow, PingpongRow, RunPoint, ThroughputRow};
use super::{InstructionsRow, Report, RunInfo, ServerRow};
use crate::pool::PoolUse;
use crate::stats::{empty_histogram, record};

/// A histogram of `us`, and of ten times it once.
fn buckets(us: f64) -> Buckets {
    let mut histogram = empty_histogram();
    for ns in [us * 1e3, us * 1e3, us * 1e4] {
        record(&mut histogram, ns as u64);
    }
    Buckets(histogram)
}

/// Runs of the given values, each on one CPU (`Some(true)`), two or unsaid.
fn runs(runs: &[(f64, Option<bool>)]) -> Vec<RunPoint> {
    let point = |&(value, one): &(f64, Option<bool>)| RunPoint {
        value,
        line_before_ns: one.map(|_| 80),
        line_after_ns: None,
        one_cpu_share: one.map(|one| if one { 0.9 } else { 0.1 }),
        one_cpu: one.map(|one| if one { "yes" } else { "no" }),
    };
    runs.iter().map(point).collect()
}

/// Some of the pool's blocks, scaled by `n`.
fn pool(n: u64) -> PoolUse {
    PoolUse {
        blocks: 10 * n,
        reused: 7 * n,
        from_reserve: 2 * n,
        mapped_on_send_path: n,
        made_in_background: 3 * n,
        ring_fallbacks: n / 2,
    }
}

/// A name in a row.
type Name = &'static str;

fn pingpong(transport: Name, placement: Name, size: usize, us: f64, capped: bool) -> PingpongRow {
    let spun = transport.ends_with("spin");
    PingpongRow {
        transport,
        wait: if spun { "spin" } else { "sleep" },
        placement,
        size,
        count: 1000,
        p50_us: us,
        p99_us: us * 1.5,
        p999_us: us * 2.5,
        max_us: us * 10.0,
        mean_us: us * 1.1,
        cpu_us: us * 1.9,
        p50_min_us: us * 0.9,
        p50_max_us: us * 1.2,
        runs: 3,
        capped,
        wall_s: 1.5,
        pool: (size > 1000 && transport == "ferry").then(|| pool(1)),
        per_run: runs(&[(us * 0.9, Some(true)), (us, Some(false)), (us * 1.2, None)]),
        histogram_ns: buckets(us),
    }
}

fn throughput(
    transport: Name,
    placement: Name,
    size: usize,
    gib: f64,
    capped: bool,
) -> ThroughputRow {
    let rate = gib * (1u64 << 30) as f64 / size as f64;
    ThroughputRow {
        transport,
        wait: "sleep",
        placement,
        size,
        count: 5000,
        msgs_per_s: rate,
        gib_per_s: gib,
        gib_per_s_min: gib * 0.8,
        gib_per_s_max: gib * 1.1,
        cpu_us: 1e6 / rate,
        runs: 3,
        capped,
        wall_s: 2.25,
        pool: (transport == "ferry").then(|| pool(100)),
        per_run: runs(&[(rate, Some(false)), (rate * 0.8, Some(false))]),
    }
}

fn calls(call: Name, via: Name, placement: Name, ns: f64, capped: bool) -> CallsRow {
    CallsRow {
        call,
        via,
        placement,
        count: 100_000,
        ns_per_call: ns,
        ns_min: ns * 0.95,
        ns_max: ns * 1.3,
        runs: 3,
        capped,
        wall_s: 0.5,
    }
}

/// A server row of `engine`, `+fd` where a descriptor rode along.
fn server(
    test: Name,
    engine: Name,
    clients: usize,
    placement: Name,
    us: f64,
    capped: bool,
) -> ServerRow {
    let (engine, fd) = engine
        .strip_suffix("+fd")
        .map_or((engine, false), |engine| (engine, true));
    let per_s = clients as f64 * 1e6 / us;
    ServerRow {
        test,
        engine,
        fd,
        clients,
        placement,
        count: 400,
        p50_us: us,
        p99_us: us * 3.0,
        max_us: us * 7.0,
        per_s,
        p50_min_us: us * 0.9,
        p50_max_us: us * 1.1,
        per_s_min: per_s * 0.9,
        per_s_max: per_s * 1.1,
        slowest_client_per_s: (test == "clients" && engine != "ipc-channel")
            .then_some(per_s / 200.0),
        runs: 3,
        capped,
        wall_s: 3.0,
        histogram_ns: buckets(us),
    }
}

fn instructions(transport: Name, per_round_trip: f64) -> InstructionsRow {
    InstructionsRow {
        transport,
        wait: "sleep",
        size: 144,
        placement: "same",
        counter: "callgrind",
        round_trips: [2000, 4000],
        instructions: [1_000_000, 1_000_000 + (per_round_trip * 2000.0) as u64],
        per_round_trip,
        parent_per_round_trip: Some(per_round_trip * 0.6),
        child_per_round_trip: (transport != "unix-stream").then_some(per_round_trip * 0.4),
    }
}

/// The report of the rows in `tests/golden/rows.txt`: a line per row,
/// its workload, names and figures between ` | `.
fn report(repeat: usize) -> Report {
    let mut report = Report {
        pingpong: Vec::new(),
        throughput: Vec::new(),
        calls: Vec::new(),
        server: Vec::new(),
        instructions: Vec::new(),
        moves: Vec::new(),
        run: RunInfo {
            command: "ferry-bench --golden".to_string(),
            quick: repeat == 1,
            repeat,
            row_cap_s: 5.0,
            online_cpus: 2,
            cpu_model: "A Processor @ 1.00GHz".to_string(),
            kernel: "6.1.0".to_string(),
            wall_s: 12.25,
            workload_wall_s: [("pingpong", 5.5), ("server", 2.0)].into_iter().collect(),
            failures: vec!["pipe 12 B split: the child\nhung up".to_string()],
            line_round_trip_ns: Some([60, 80, 140]),
        },
    };
    for line in include_str!("../../tests/golden/rows.txt").lines() {
        let f: Vec<&'static str> = line.split(" | ").collect();
        let n = |i: usize| f[i].parse::<f64>().expect(line);
        let capped = f.last() == Some(&"capped");
        match f[0] {
            "pingpong" => report
                .pingpong
                .push(pingpong(f[1], f[2], n(3) as usize, n(4), capped)),
            "throughput" => {
                report
                    .throughput
                    .push(throughput(f[1], f[2], n(3) as usize, n(4), capped))
            }
            "calls" => report.calls.push(calls(f[1], f[2], f[3], n(4), capped)),
            "server" => report
                .server
                .push(server(f[1], f[2], n(3) as usize, f[4], n(5), capped)),
            _ => report.instructions.push(instructions(f[1], n(2))),
        }
    }
    report
}

#[test]
fn the_report_of_fixed_rows_is_unchanged() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for repeat in [1, 3] {
        let report = report(repeat);
        let outputs = [
            ("txt", report.text()),
            ("md", report.markdown()),
            ("json", report.json().unwrap()),
            ("svg", super::chart::svg(&report).unwrap()),
        ];
        for (ext, got) in outputs {
            let path = dir.join(format!("report-{repeat}.{ext}"));
            if std::env::var_os("GOLDEN").is_some_and(|v| v == "write") {
                std::fs::write(&path, &got).unwrap();
            }
            let want = std::fs::read_to_string(&path).unwrap();
            assert!(got == want, "{} differs from {}", ext, path.display());
        }
    }
}
