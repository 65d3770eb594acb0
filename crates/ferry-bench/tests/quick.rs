//! The pingpong suite in a tiny mode, through the built binary, so it cannot
//! rot: every transport at two sizes must produce a sane row, and the
//! process must fail, naming the problem, when asked for something wrong.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use serde_json::Value;

const TRANSPORTS: &[&str] = &["ferry", "ferry-spin", "ferry-block", "unix-stream", "pipe"];
const SIZES: &[u64] = &[12, 20_736];
const COUNT: u64 = 50;
/// A hang fails the test after this long instead of stalling CI.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Runs ferry-bench with `args`, killing it if it outlives the watchdog.
fn ferry_bench(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry-bench starts");
    let deadline = Instant::now() + WATCHDOG;
    while child.try_wait().expect("polling ferry-bench").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ferry-bench {args:?} ran longer than {WATCHDOG:?}");
        }
        sleep(Duration::from_millis(20));
    }
    child
        .wait_with_output()
        .expect("collecting ferry-bench's output")
}

/// A JSON path of this test's own, removed when dropped.
struct TempJson(PathBuf);

impl TempJson {
    fn new(name: &str) -> Self {
        let file = format!("ferry-bench-{name}-{}.json", std::process::id());
        Self(std::env::temp_dir().join(file))
    }
}

impl Drop for TempJson {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn check_row(row: &Value) {
    let us = |key: &str| {
        row[key]
            .as_f64()
            .unwrap_or_else(|| panic!("{key} in {row}"))
    };
    let (p50, p99, p999, max, mean) = (
        us("p50_us"),
        us("p99_us"),
        us("p999_us"),
        us("max_us"),
        us("mean_us"),
    );
    assert!(
        p50 > 0.0 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{row}"
    );
    assert!(mean > 0.0 && mean <= max, "{row}");
    assert!(max < 1e6, "a round trip took over a second: {row}");
    assert_eq!(row["count"], COUNT, "{row}");
    assert_eq!(row["placement"], "unpinned", "{row}");
    let wait = row["wait"].as_str().unwrap_or_default();
    assert!(["adaptive", "spin", "block"].contains(&wait), "{row}");
}

#[test]
fn quick_pingpong_has_a_sane_row_per_transport_and_size() {
    let json = TempJson::new("quick");
    let path = json.0.to_str().expect("a UTF-8 temp path");
    let args = [
        "pingpong", "--quick", "--count", "50", "--size", "12,20736", "--json", path,
    ];
    let out = ferry_bench(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ferry-bench failed:\n{stderr}");

    let rows: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&json.0).expect("JSON written")).expect("valid JSON");
    assert_eq!(rows.len(), TRANSPORTS.len() * SIZES.len(), "{rows:?}");
    for &transport in TRANSPORTS {
        for &size in SIZES {
            let row = rows
                .iter()
                .find(|r| r["transport"] == transport && r["size"] == size)
                .unwrap_or_else(|| panic!("no row for {transport} at {size} B"));
            check_row(row);
        }
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.starts_with("transport") && table.contains("p50 ×unix-stream"),
        "{table}"
    );
}

#[test]
fn an_unknown_transport_is_refused_by_name() {
    let out = ferry_bench(&["pingpong", "--transport", "ferry,carrier-pigeon"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("carrier-pigeon") && stderr.contains("unix-stream"),
        "{stderr}"
    );
}

#[test]
fn a_child_not_started_by_the_benchmark_fails_clearly() {
    let out = ferry_bench(&[
        "child",
        "--workload",
        "pingpong",
        "--transport",
        "unix-stream",
        "--placement",
        "unpinned",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("child (unix-stream)") && stderr.contains("FERRY_BENCH_SOCKET"),
        "{stderr}"
    );
}
