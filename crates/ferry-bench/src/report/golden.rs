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
fn pool(n: u64) -> Option<PoolUse> {
    Some(PoolUse {
        blocks: 10 * n,
        reused: 7 * n,
        from_reserve: 2 * n,
        mapped_on_send_path: n,
        made_in_background: 3 * n,
        ring_fallbacks: n / 2,
    })
}

type Case = (&'static str, &'static str, usize, f64, bool);

fn pingpong((transport, placement, size, us, capped): Case) -> PingpongRow {
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
        pool: (size > 1000 && transport == "ferry")
            .then(|| pool(1))
            .flatten(),
        per_run: runs(&[(us * 0.9, Some(true)), (us, Some(false)), (us * 1.2, None)]),
        histogram_ns: buckets(us),
    }
}

fn throughput((transport, placement, size, gib, capped): Case) -> ThroughputRow {
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
        pool: (transport == "ferry").then(|| pool(100)).flatten(),
        per_run: runs(&[(rate, Some(false)), (rate * 0.8, Some(false))]),
    }
}

fn calls((call, via, placement, ns): (&'static str, &'static str, &'static str, f64)) -> CallsRow {
    CallsRow {
        call,
        via,
        placement,
        count: 100_000,
        ns_per_call: ns,
        ns_min: ns * 0.95,
        ns_max: ns * 1.3,
        runs: 3,
        capped: via == "std-mpsc",
        wall_s: 0.5,
    }
}

type ServerCase = (&'static str, &'static str, bool, usize, &'static str, f64);

fn server((test, engine, fd, clients, placement, us): ServerCase) -> ServerRow {
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
        capped: engine == "ipc-channel",
        wall_s: 3.0,
        histogram_ns: buckets(us),
    }
}

fn instructions((transport, per_round_trip): (&'static str, f64)) -> InstructionsRow {
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

fn report(repeat: usize) -> Report {
    let sizes = [12, 4096];
    let pingpong_cases = sizes.iter().flat_map(|&size| {
        let us = |base: f64| base * (1.0 + size as f64 / 1000.0);
        [
            ("ferry", "unpinned", size, us(0.05), false),
            ("unix-stream", "unpinned", size, us(20.0), false),
            ("shm-futex", "unpinned", size, us(2.0), false),
            ("shm-spin", "unpinned", size, us(0.9), size == 12),
            ("ferry", "split", size, us(30.0), false),
            ("ferry-spin", "split", size, us(150.0), false),
        ]
    });
    let throughput_cases = [
        ("ferry", "unpinned", 4096, 3.21, false),
        ("unix-stream", "unpinned", 4096, 0.456, false),
        ("shm-futex", "unpinned", 4096, 0.0042, true),
        ("ferry", "split", 1 << 20, 12.5, false),
        ("pipe", "split", 1 << 20, 1.5, false),
    ];
    let calls_cases = [
        ("add(i32, i32)", "direct", "unpinned", 1.234),
        ("add(i32, i32)", "boxed-closure", "unpinned", 2.5),
        ("add(i32, i32)", "std-mpsc", "unpinned", 15_000.0),
        ("echo(String)", "direct", "unpinned", 45.6),
        ("echo(String)", "ferry-2-threads", "unpinned", 987.0),
        ("add(i32, i32)", "ferry-1-thread", "split", 150.0),
    ];
    let server_cases = [
        ("connect", "ferry", false, 1, "unpinned", 50.0),
        ("connect", "unix-seqpacket", false, 1, "unpinned", 25.0),
        ("connect", "ipc-channel", false, 1, "unpinned", 400.0),
        ("connect", "ferry", false, 1, "split", 60.0),
        ("fd", "ferry", false, 1, "unpinned", 2.0),
        ("fd", "ferry", true, 1, "unpinned", 5.0),
        ("fd", "unix-seqpacket", true, 1, "unpinned", 10.0),
        ("clients", "ferry", false, 10, "unpinned", 4.0),
        ("clients", "unix-seqpacket", false, 10, "unpinned", 8.0),
        ("clients", "ferry", false, 100, "unpinned", 40.0),
        ("clients", "ipc-channel", false, 100, "unpinned", 900.0),
    ];
    let instructions_cases = [
        ("ferry", 3000.0),
        ("shm-futex", 2000.0),
        ("unix-stream", 61_234.5),
    ];
    let run = RunInfo {
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
    };
    Report {
        pingpong: pingpong_cases.map(pingpong).collect(),
        throughput: throughput_cases.map(throughput).to_vec(),
        calls: calls_cases.map(calls).to_vec(),
        server: server_cases.map(server).to_vec(),
        instructions: instructions_cases.map(instructions).to_vec(),
        run,
    }
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
