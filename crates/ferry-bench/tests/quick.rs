//! Every workload in a tiny mode, through the built binary, so the suite
//! cannot rot: every transport must produce a sane row at each size, the
//! full run must write its three report files, `--repeat` and
//! `--placement` must shape the rows, and the process must fail, naming
//! the problem, when a transport fails or something wrong is asked for.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use ferry_testkit::Watchdog;
use serde_json::Value;

/// The transports that every build has; others are added as files.
const CORE_TRANSPORTS: &[&str] = &[
    "ferry",
    "ferry-spin",
    "ferry-sleep",
    "ferry-loan",
    "ferry-loan-borrowed",
    "ferry-in-place",
    "unix-stream",
    "pipe",
];
/// A hang fails the test after this long instead of stalling CI.
const WATCHDOG: Duration = Duration::from_secs(300);
/// Each row's time cap in these tests, so two spinners sharing a CPU while
/// other tests run cannot stall them.
const ROW_SECONDS: &str = "--row-seconds 3";

/// Runs ferry-bench with `args` (and `env`) under a watchdog, which kills
/// it (and fails the tests) if it hangs.
fn ferry_bench_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let dog = Watchdog::start(format!("ferry-bench {args:?}"), WATCHDOG);
    let child = Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry-bench starts");
    let mut child = dog.watch(child);
    let mut stderr = child.child_mut().stderr.take().expect("a piped stderr");
    // Drained on a thread of its own, so a full pipe cannot stall it.
    let stderr = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    let mut stdout = Vec::new();
    let _ = child.take_stdout().read_to_end(&mut stdout);
    Output {
        status: child.wait(),
        stdout,
        stderr: stderr.join().expect("the stderr drain"),
    }
}

fn ferry_bench(args: &[&str]) -> Output {
    ferry_bench_with(args, &[])
}

/// Fails the test, with ferry-bench's stderr, unless it succeeded.
fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "ferry-bench failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Checks ferry-bench failed and its stderr says every one of `words`.
fn failed_saying(out: &Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "it should have failed: {stderr}");
    contains_all(&stderr, words);
}

/// Checks `text` (a table, a report, stderr) holds every one of `parts`.
fn contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
}

/// A path of this test's own in the temporary directory, removed (file or
/// folder) when dropped.
struct Temp(PathBuf);

impl Temp {
    fn new(name: &str) -> Self {
        let name = format!("ferry-bench-test-{name}-{}", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        Self(path)
    }

    fn arg(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for Temp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the benchmark with the words of `line` and `--json` into a file of
/// its own named after `name`, checks it succeeded, and returns its output
/// and the rows it wrote.
fn run_to_json(line: &str, name: &str) -> (Output, Vec<Value>) {
    let json = Temp::new(name);
    let out = ferry_bench(&words(line, &["--json", json.arg()]));
    succeeded(&out);
    let rows = rows(&read_json(&json.0)).clone();
    (out, rows)
}

/// The words of `line`, then `more`.
fn words<'a>(line: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    line.split_whitespace()
        .chain(more.iter().copied())
        .collect()
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("valid JSON")
}

fn rows(json: &Value) -> &Vec<Value> {
    json.as_array()
        .unwrap_or_else(|| panic!("not an array: {json}"))
}

/// The field `key` of `row`, as `as_type` reads it.
fn field<T>(row: &Value, key: &str, as_type: fn(&Value) -> Option<T>) -> T {
    as_type(&row[key]).unwrap_or_else(|| panic!("{key} in {row}"))
}

fn num(row: &Value, key: &str) -> f64 {
    field(row, key, Value::as_f64)
}

fn capped(row: &Value) -> bool {
    field(row, "capped", Value::as_bool)
}

/// The row `is` picks; the test fails naming `what` where none does.
fn find<'a>(rows: &'a [Value], what: &str, is: impl Fn(&Value) -> bool) -> &'a Value {
    rows.iter()
        .find(|r| is(r))
        .unwrap_or_else(|| panic!("no row for {what}"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The transports the rows cover; every core transport must be there.
fn transports_of(rows: &[Value]) -> BTreeSet<String> {
    let name = |r: &Value| r["transport"].as_str().expect("a transport").to_string();
    let names: BTreeSet<String> = rows.iter().map(name).collect();
    for core in CORE_TRANSPORTS {
        assert!(names.contains(*core), "no rows for {core}: {names:?}");
    }
    names
}

fn check_count(row: &Value, count: u64) {
    let got = field(row, "count", Value::as_u64);
    assert!(
        got == count || (capped(row) && got >= 1 && got < count),
        "count {got}, expected {count}: {row}"
    );
}

fn check_pingpong_row(row: &Value, count: u64) {
    let figures = ["p50_us", "p99_us", "p999_us", "max_us", "mean_us", "cpu_us"];
    let [p50, p99, p999, max, mean, cpu] = figures.map(|key| num(row, key));
    assert!(
        p50 > 0.0 && p50 <= p99 && p99 <= p999 && p999 <= max,
        "{row}"
    );
    assert!(mean > 0.0 && mean <= max, "{row}");
    assert!(cpu > 0.0, "no CPU time: {row}");
    check_count(row, count);
    let wait = row["wait"].as_str().unwrap_or_default();
    assert!(
        ["adaptive", "tuned", "spin", "sleep", "tokio", "select"].contains(&wait),
        "{row}"
    );
}

#[test]
fn quick_pingpong_has_a_sane_row_per_transport_and_size() {
    let line = format!("pingpong --quick --count 50 --size 12,20736 {ROW_SECONDS}");
    let (out, rows) = &run_to_json(&line, "pingpong.json");
    let transports = transports_of(rows);
    assert_eq!(rows.len(), transports.len() * 2, "{rows:?}");
    for transport in &transports {
        for size in [12, 20_736] {
            let what = format!("{transport} at {size} B");
            let row = find(rows, &what, |r| {
                r["transport"] == **transport && r["size"] == size
            });
            check_pingpong_row(row, 50);
            assert_eq!(row["placement"], "unpinned", "{row}");
        }
    }
    let table = stdout(out);
    assert!(table.starts_with("pingpong\ntransport"), "{table}");
    contains_all(&table, &["p50 ×unix-stream", "p50 ×shm-futex"]);
}

/// Each run says how often both processes were on one CPU: on a pinned
/// placement, always (same) or never (split).
#[test]
fn runs_record_whether_both_processes_shared_a_cpu() {
    let two = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let placements = if two {
        "same,split,unpinned"
    } else {
        "same,unpinned"
    };
    let check = |workload: &str, size: &str| {
        let line = format!(
            "{workload} --count 200 --size {size} --transport ferry,unix-stream \
             --placement {placements} --repeat 2 {ROW_SECONDS}"
        );
        let (out, rows) = &run_to_json(&line, &format!("cpus-{workload}.json"));
        assert_eq!(rows.len(), 2 * placements.split(',').count(), "{rows:?}");
        for row in rows {
            let runs = row["per_run"].as_array().expect("per_run");
            assert_eq!(runs.len(), 2, "{row}");
            for run in runs {
                let share = num(run, "one_cpu_share");
                assert!((0.0..=1.0).contains(&share), "{row}");
                let said = if share >= 0.5 { "yes" } else { "no" };
                assert_eq!(run["one_cpu"], said, "{row}");
                match row["placement"].as_str().unwrap() {
                    "same" => assert_eq!(share, 1.0, "{row}"),
                    "split" => assert_eq!(share, 0.0, "{row}"),
                    _ => {}
                }
            }
        }
        contains_all(&stdout(out), &["one CPU", " on two"]);
    };
    check("pingpong", "144");
    check("throughput", "64");
}

#[test]
fn quick_throughput_checks_every_stream() {
    let line = format!("throughput --count 50 --size 64,65536 {ROW_SECONDS}");
    let (out, rows) = &run_to_json(&line, "throughput.json");
    let transports = transports_of(rows);
    assert_eq!(rows.len(), transports.len() * 2, "{rows:?}");
    for row in rows {
        let size = num(row, "size");
        let [rate, gib, cpu] = ["msgs_per_s", "gib_per_s", "cpu_us"].map(|key| num(row, key));
        assert!(rate > 0.0 && cpu > 0.0, "{row}");
        let expected = rate * size / (1u64 << 30) as f64;
        assert!((gib - expected).abs() <= expected * 0.01, "{row}");
        check_count(row, 50);
        // ferry's 64 KiB messages (and loans) go out of line in pool
        // blocks, each counted once; 64 B ones (loans too) go through the
        // ring; nothing else touches the pool.
        let transport = row["transport"].as_str().unwrap();
        let pool = &row["pool"];
        if transport.starts_with("ferry") && size >= 65_536.0 {
            let blocks = num(pool, "blocks") + num(pool, "ring_fallbacks");
            let sources =
                num(pool, "reused") + num(pool, "from_reserve") + num(pool, "mapped_on_send_path");
            assert!(blocks >= 50.0 && sources == num(pool, "blocks"), "{row}");
        } else {
            assert!(pool.is_null(), "{row}");
        }
    }
    contains_all(
        &stdout(out),
        &["GiB/s ×unix-stream", "ferry pool (throughput)"],
    );
}

#[test]
fn a_timed_stream_sends_for_its_time_and_is_not_capped() {
    let line = "throughput --transport ferry,unix-stream --size 1024 --seconds 0.2";
    let (_, rows) = &run_to_json(line, "timed.json");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        assert!(!capped(row), "{row}");
        let (count, rate) = (num(row, "count"), num(row, "msgs_per_s"));
        // 0.2 s at the measured rate, give or take the clock's stride.
        assert!(count > 0.0 && (count / rate - 0.2).abs() < 0.05, "{row}");
    }
}

#[test]
fn quick_calls_time_every_way_of_calling() {
    let (_, rows) = &run_to_json("calls --quick", "calls.json");
    let ways = [
        "direct",
        "boxed-closure",
        "std-mpsc",
        "crossbeam",
        "ferry-2-threads",
        "ferry-1-thread",
        "ferry-select-1",
        "ferry-select-10",
        "ferry-select-100",
        "ferry-typed-2-threads",
        "ferry-typed-1-thread",
    ];
    assert_eq!(rows.len(), 2 * ways.len(), "{rows:?}");
    for call in ["add(i32, i32)", "echo(String)"] {
        for via in ways {
            let row = find(rows, &format!("{call} via {via}"), |r| {
                r["call"] == call && r["via"] == via
            });
            assert!(num(row, "ns_per_call") > 0.0, "{row}");
        }
    }
}

/// The server workload's rows: test, engine, and whether a descriptor
/// rode along.
const SERVER_ROWS: &[(&str, &str, bool)] = &[
    ("connect", "ferry", false),
    ("connect", "unix-seqpacket", false),
    ("connect", "ipc-channel", false),
    ("connect", "shm-floor", false),
    ("connect", "shm-floor-unsealed", false),
    ("connect", "shm-floor-4k", false),
    ("connect", "shm-floor-eager", false),
    ("connect", "shm-floor-min", false),
    ("connect", "shm-floor-spare", false),
    ("connect", "shm-floor-min-spare", false),
    ("fd", "ferry", false),
    ("fd", "ferry", true),
    ("fd", "unix-seqpacket", false),
    ("fd", "unix-seqpacket", true),
    ("clients", "ferry", false),
    ("clients", "ferry-select", false),
    ("clients", "unix-seqpacket", false),
    ("clients", "ipc-channel", false),
];

#[test]
fn quick_server_connects_passes_descriptors_and_serves_many_clients() {
    let line = format!("server --quick --count 50 {ROW_SECONDS}");
    let (out, rows) = &run_to_json(&line, "server.json");
    // ipc-channel's rows only where its feature is on.
    let expected: Vec<_> = SERVER_ROWS
        .iter()
        .filter(|(_, engine, _)| cfg!(feature = "ipc-channel") || *engine != "ipc-channel")
        .collect();
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for &&(test, engine, fd) in &expected {
        let row = find(rows, &format!("{test} of {engine} (fd: {fd})"), |r| {
            r["test"] == test && r["engine"] == engine && r["fd"] == fd
        });
        let [p50, p99, max] = ["p50_us", "p99_us", "max_us"].map(|key| num(row, key));
        assert!(p50 > 0.0 && p50 <= p99 && p99 <= max, "{row}");
        assert!(num(row, "per_s") > 0.0, "{row}");
        match test {
            "clients" => {
                assert_eq!(row["clients"], 100, "{row}");
                assert!(row["slowest_client_per_s"].as_f64().is_some(), "{row}");
            }
            _ => check_count(row, 50),
        }
    }
    let titles_and_columns = [
        "connect + first round trip (144 B)\nengine",
        "fd passing round trip (144 B)\nengine",
        "one server, many clients (144 B round trips)\nengine",
        "p50 ×unix-seqpacket",
        "fd adds µs",
        "rt/s ×unix-seqpacket",
    ];
    contains_all(&stdout(out), &titles_and_columns);
}

#[test]
fn the_full_run_writes_every_workload_and_the_three_files() {
    let dir = Temp::new("report");
    let line = format!("--quick --count 20 {ROW_SECONDS}");
    let out = ferry_bench(&words(&line, &["--out", dir.arg()]));
    succeeded(&out);
    let report = read_json(&dir.0.join("report.json"));
    for workload in ["pingpong", "throughput", "calls", "server"] {
        assert!(
            !rows(&report[workload]).is_empty(),
            "no {workload} rows: {report}"
        );
    }
    assert_eq!(report["run"]["quick"], true);
    let transports = transports_of(rows(&report["pingpong"]));
    let markdown = std::fs::read_to_string(dir.0.join("report.md")).expect("report.md");
    let headings = [
        "# ferry-bench report",
        "## pingpong",
        "## throughput",
        "## calls",
        "## connect + first round trip (144 B)",
    ];
    contains_all(&markdown, &headings);
    let svg = std::fs::read_to_string(dir.0.join("report.svg")).expect("report.svg");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // plotters writes each text on a line of its own inside <text>.
    let texts: Vec<&str> = svg.lines().collect();
    for transport in &transports {
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with(&format!("{transport} ("))),
            "{transport} is not in the chart's legend"
        );
    }
    for title in [
        "Round trip p50 against message size (unpinned; lower is better)",
        "One-way throughput against message size (unpinned; higher is better)",
        "In-process calls: ns per call (log; lower is better)",
    ] {
        assert!(texts.contains(&title), "no chart titled {title}");
    }
    let lines = svg.matches("<polyline").count();
    assert!(lines >= 2 * transports.len(), "{lines} lines drawn");
    contains_all(&stdout(&out), &["pingpong\n", "throughput\n", "calls\n"]);
}

#[test]
fn repeats_interleave_and_report_the_median_with_its_range() {
    let line = format!(
        "pingpong --transport ferry,unix-stream --size 12 --count 50 --repeat 3 \
         --placement split,same {ROW_SECONDS}"
    );
    let (out, rows) = &run_to_json(&line, "repeat.json");
    assert_eq!(rows.len(), 4, "{rows:?}");
    for row in rows {
        assert_eq!(row["runs"], 3, "{row}");
        let [lo, mid, hi] = ["p50_min_us", "p50_us", "p50_max_us"].map(|key| num(row, key));
        assert!(lo <= mid && mid <= hi, "{row}");
        // The histogram pools every timed round trip of the three runs.
        let buckets = row["histogram_ns"].as_array().expect("a histogram");
        let pooled: u64 = buckets.iter().map(|b| b[1].as_u64().unwrap()).sum();
        match capped(row) {
            false => assert_eq!(pooled, 3 * row["count"].as_u64().unwrap(), "{row}"),
            true => assert!(pooled >= 3, "{row}"),
        }
        assert!(num(row, "p999_us") <= num(row, "max_us"), "{row}");
    }
    for placement in ["split", "same"] {
        assert!(rows.iter().any(|r| r["placement"] == placement), "{rows:?}");
    }
    // Run 1 of every row comes before run 2 of any.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = |pattern: &str| {
        stderr
            .find(pattern)
            .unwrap_or_else(|| panic!("{pattern} not in:\n{stderr}"))
    };
    assert!(first("[4/4 run 1/3]") < first("[1/4 run 2/3]"), "{stderr}");
    contains_all(&stdout(out), &["p50 min–max"]);
}

#[test]
fn a_failing_transport_fails_the_run_after_reporting_the_others() {
    let json = Temp::new("failing.json");
    let line = "pingpong --transport ferry,unix-stream --size 12 --count 20";
    let args = words(line, &["--json", json.arg()]);
    let out = ferry_bench_with(&args, &[("FERRY_BENCH_FAIL_CHILD", "unix-stream")]);
    // A failed row fails the run.
    failed_saying(&out, &["1 row run(s) failed", "unix-stream at 12 B"]);
    let json = read_json(&json.0);
    let rows = rows(&json);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["transport"], "ferry");
}

/// `--help` names the transports `--transport` takes.
#[test]
fn help_lists_the_transports() {
    let out = ferry_bench(&["pingpong", "--help"]);
    succeeded(&out);
    let help = stdout(&out);
    for name in CORE_TRANSPORTS {
        contains_all(&help, &[&format!(" {name},")]);
    }
}

#[test]
fn an_unknown_transport_is_refused_by_name() {
    let out = ferry_bench(&["pingpong", "--transport", "ferry,carrier-pigeon"]);
    failed_saying(&out, &["carrier-pigeon", "unix-stream"]);
}

#[test]
fn a_child_not_started_by_the_benchmark_fails_clearly() {
    let line = "child --workload pingpong --transport unix-stream --placement unpinned";
    let out = ferry_bench(&words(line, &[]));
    failed_saying(&out, &["child (unix-stream)", "FERRY_BENCH_SOCKET"]);
}

/// The counted run of `ferry-bench instructions`, without a counter: the
/// counting itself needs a build for callgrind (minutes), so CI runs
/// `instructions --quick` as a step of its own.
#[test]
fn the_counted_run_makes_its_round_trips_for_each_default_transport() {
    for transport in ["ferry", "shm-futex", "unix-stream"] {
        let line = format!("instructions-run --transport {transport} --rounds 50 --size 144");
        let out = ferry_bench(&words(&line, &[]));
        succeeded(&out);
    }
}

#[test]
fn instructions_refuses_round_trip_counts_that_cannot_be_differenced() {
    let out = ferry_bench(&["instructions", "--rounds", "400,200"]);
    failed_saying(&out, &["N2 > N1"]);
}
