//! `ferry-bench instructions`: user-space instructions per round trip,
//! counted by callgrind rather than timed, so a hot-path change shows as an
//! exact, repeatable number. Each transport makes the pingpong round trips
//! in two runs of N1 and N2 round trips (fresh processes, both on CPU 0);
//! (I(N2) − I(N1)) / (N2 − N1) is one round trip in both processes, and
//! callgrind counts only each process's [`counted`] span, so start-up, whose
//! work under valgrind depends on the other process, stays out.
//!
//! valgrind 3.19 faults on an ordinary build (rustix's raw-syscall backend
//! parses the vDSO at start-up), so callgrind runs a copy built with
//! `--cfg rustix_use_libc` into `target/instructions` of the workspace.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use clap::Args;

use crate::JsonRows;
use crate::child::{self, Workload};
use crate::definitions::DEFINITIONS;
use crate::error::{Context, Error};
use crate::placement::Placement;
use crate::report::{self, InstructionsRow, Report, RunInfo};
use crate::transport::{self, Connection, Endpoint, Transport};
use crate::{payload, pingpong};

/// The counting build's flags and target directory.
const RUSTFLAGS: &str = "--cfg rustix_use_libc";
const TARGET: &str = "target/instructions";

/// Flags of the `instructions` command.
#[derive(Debug, Args)]
pub struct InstructionsArgs {
    /// Transports, comma-separated [default: ferry,shm-futex,unix-stream].
    #[arg(long = "transport", value_delimiter = ',', value_parser = transport::by_name)]
    transports: Vec<&'static dyn Transport>,
    /// Payload bytes each way.
    #[arg(long, default_value_t = DEFINITIONS.instructions.size, value_parser = crate::positive)]
    size: usize,
    /// The round trips of the two runs, N1,N2 (N2 > N1) [default:
    /// 2000,4000, or 1000,2000 with --quick].
    #[arg(long, value_delimiter = ',', value_parser = crate::positive)]
    rounds: Vec<usize>,
    /// Fewer round trips, for a check in seconds (once the counting build
    /// exists).
    #[arg(long)]
    quick: bool,
    /// Write report.json, report.md and report.svg into DIR.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Also write the rows to this file as a JSON array.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
}

/// Flags of the hidden `instructions-run` subcommand: one counted run.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// The transport to the child.
    #[arg(long, value_parser = transport::by_name)]
    transport: &'static dyn Transport,
    /// Round trips to make.
    #[arg(long)]
    rounds: usize,
    /// Payload bytes each way.
    #[arg(long, value_parser = crate::positive)]
    size: usize,
}

/// Runs the command: counts every transport, prints the table, writes the
/// files asked for, and fails if any transport could not be counted.
pub fn run(args: &InstructionsArgs) -> Result<(), Error> {
    let started = Instant::now();
    let rounds = match (args.rounds.as_slice(), args.quick) {
        ([], false) => DEFINITIONS.instructions.rounds,
        ([], true) => DEFINITIONS.instructions.quick_rounds,
        (&[n1, n2], _) if n2 > n1 => [n1, n2],
        (given, _) => {
            let e = format!("--rounds takes two counts N1,N2 with N2 > N1, not {given:?}");
            return Err(Error::new(e));
        }
    };
    let mut transports = args.transports.clone();
    if transports.is_empty() {
        let named = DEFINITIONS.instructions.transports.iter();
        let named: Result<_, _> = named.map(|n| transport::by_name(n)).collect();
        transports = named.map_err(Error::new)?;
    }
    let lean = !transports
        .iter()
        .any(|t| transport::needs_default_features(t.name()));
    let exe = prepare(lean)?;
    let (mut rows, mut failures) = (Vec::new(), Vec::new());
    for transport in transports {
        match count_transport(&exe, transport, rounds, args.size) {
            Ok(row) => rows.push(row),
            Err(e) => {
                let e = e.within(transport.name());
                eprintln!("instructions: FAILED: {e}");
                failures.push(e.to_string());
            }
        }
    }
    let mut info = RunInfo::here(args.quick, 1, 0.0);
    info.failures = failures.clone();
    info.wall_s = started.elapsed().as_secs_f64();
    info.workload_wall_s.insert("instructions", info.wall_s);
    let report = Report {
        pingpong: Vec::new(),
        throughput: Vec::new(),
        calls: Vec::new(),
        server: Vec::new(),
        instructions: rows,
        moves: Vec::new(),
        run: info,
    };
    let write: JsonRows = |path, report| report::write_json(path, &report.instructions);
    let json = args.json.as_deref().map(|path| (path, write));
    crate::publish(&report, args.out.as_deref(), json)?;
    crate::none_failed("transport(s) could not be counted", &failures)
}

/// Counts `transport`'s two runs and makes its row.
fn count_transport(
    exe: &Path,
    transport: &'static dyn Transport,
    rounds: [usize; 2],
    size: usize,
) -> Result<InstructionsRow, Error> {
    let fewer = count(exe, transport, rounds[0], size)?;
    let more = count(exe, transport, rounds[1], size)?;
    let n = (rounds[1] - rounds[0]) as f64;
    let per = |side: usize| (more[side] as f64 - fewer[side] as f64) / n;
    Ok(InstructionsRow {
        transport: transport.name(),
        wait: transport.wait(),
        size,
        placement: Placement::Same.name(),
        counter: "callgrind",
        round_trips: rounds,
        instructions: [fewer[0] + fewer[1], more[0] + more[1]],
        per_round_trip: per(0) + per(1),
        parent_per_round_trip: Some(per(0)),
        child_per_round_trip: Some(per(1)),
    })
}

/// Checks valgrind is here, and builds (or brings up to date) the copy of
/// this program callgrind runs, without the rivals' features when `lean`
/// (none of the transports counted needs them: a shorter build); returns
/// its path.
fn prepare(lean: bool) -> Result<PathBuf, Error> {
    let version = Command::new("valgrind").arg("--version").output();
    if !version.is_ok_and(|out| out.status.success()) {
        return Err(Error::new(
            "valgrind is not installed, and callgrind counts the instructions: install it (apt-get install -y valgrind)",
        ));
    }
    let workspace = crate::workspace().ok_or_else(|| {
        Error::new("callgrind needs a build of ferry-bench from its sources, but the workspace it was built in is gone")
    })?;
    let target = workspace.join(TARGET);
    eprintln!(
        "instructions: building ferry-bench for callgrind into {} (RUSTFLAGS=\"{RUSTFLAGS}\": rustix's libc backend, which valgrind can run); minutes the first time",
        target.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let to_stderr = std::io::stderr().as_fd().try_clone_to_owned();
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "ferry-bench"])
        .args(["--bin", "ferry-bench"])
        .args(lean.then_some("--no-default-features"))
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTFLAGS", RUSTFLAGS)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdin(Stdio::null())
        .stdout(to_stderr.map_or_else(|_| Stdio::null(), Stdio::from))
        .status()
        .context("running cargo build")?;
    match status.success() {
        true => Ok(target.join("release/ferry-bench")),
        false => Err(Error::new(format!("the counting build failed: {status}"))),
    }
}

/// Runs `rounds` round trips of `size` bytes over `transport` in `exe`
/// under callgrind, following the child; returns the instructions of the
/// parent's and the child's counted spans.
fn count(
    exe: &Path,
    transport: &dyn Transport,
    rounds: usize,
    size: usize,
) -> Result<[u64; 2], Error> {
    let name = transport.name();
    let dir = std::env::temp_dir().join(format!(
        "ferry-bench-instructions-{}-{name}-{rounds}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).context(format!("creating {}", dir.display()))?;
    eprintln!("instructions: {name}, {rounds} round trips of {size} B, under callgrind");
    let span = std::any::type_name_of_val(&counted);
    let (rounds, size) = (rounds.to_string(), size.to_string());
    let out = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--trace-children=yes")
        .arg(format!("--zero-before={span}"))
        .arg(format!("--dump-after={span}"))
        .arg(format!("--callgrind-out-file={}/cg.%p", dir.display()))
        .arg(exe)
        .args(["instructions-run", "--transport", name])
        .args(["--rounds", &rounds, "--size", &size])
        .stdin(Stdio::null())
        .output()
        .context("running valgrind")?;
    let counts = match out.status.success() {
        true => spans(&dir, span),
        false => Err(Error::new(format!(
            "valgrind exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ))),
    };
    let _ = std::fs::remove_dir_all(&dir);
    counts.map_err(|e| e.within(format!("{rounds} round trips")))
}

/// The instructions of the parent's (`instructions-run`) and the child's
/// (`child`) dumps of `span` among callgrind's files in `dir`.
fn spans(dir: &Path, span: &str) -> Result<[u64; 2], Error> {
    let mut found = [None, None];
    for entry in std::fs::read_dir(dir).context(format!("listing {}", dir.display()))? {
        let text = std::fs::read_to_string(entry.context("listing")?.path()).unwrap_or_default();
        if let Some((command, n)) = dump(&text, span) {
            match command {
                "instructions-run" => found[0] = Some(n),
                "child" => found[1] = Some(n),
                _ => {}
            }
        }
    }
    match found {
        [Some(parent), Some(child)] => Ok([parent, child]),
        _ => Err(Error::new(format!(
            "no dump of {span} from both the parent and the child in {}",
            dir.display()
        ))),
    }
}

/// The subcommand and the instructions (`Ir`) of a callgrind file that
/// `--dump-after=span` wrote; `None` for any other file.
fn dump<'t>(text: &'t str, span: &str) -> Option<(&'t str, u64)> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let trigger = field("desc: Trigger:")?;
    let command = field("cmd:")?.split_whitespace().nth(1)?;
    let ir = field("events:")?
        .split_whitespace()
        .position(|e| e == "Ir")?;
    let total = field("summary:").or_else(|| field("totals:"))?;
    let n = total
        .split_whitespace()
        .nth(ir)
        .unwrap_or("0")
        .parse()
        .ok()?;
    (trigger == format!("--dump-after={span}")).then_some((command, n))
}

/// The counted run (`instructions-run`): this process and the child it
/// starts, both on CPU 0, make exactly `rounds` round trips; then this
/// process hangs up and waits for the child to exit, without polling, so
/// the teardown executes the same instructions in every run.
pub fn count_here(args: &CountArgs) -> Result<(), Error> {
    let placement = Placement::Same;
    placement.pin_parent()?;
    let command = child::command(Workload::Pingpong, args.transport, placement)?;
    let Connection {
        mut child,
        mut endpoint,
    } = args.transport.spawn(command)?;
    counted(&mut || round_trips(&mut *endpoint, args.rounds, args.size))?;
    drop(endpoint);
    let status = child.reap().context("waiting for the child")?;
    match status.success() {
        true => Ok(()),
        false => Err(Error::new(format!("the child exited with {status}"))),
    }
}

/// The parent's round trips.
fn round_trips(endpoint: &mut dyn Endpoint, rounds: usize, size: usize) -> Result<(), Error> {
    for n in 0..rounds {
        pingpong::round_trip(endpoint, size, payload::marker(n))
            .map_err(|e| e.within(format!("round trip {n}")))?;
    }
    Ok(())
}

/// Runs `work`: the span of each process that callgrind counts, from
/// entering this function to leaving it (the parent's round trips, and the
/// child's echoing them, from its first receive to the parent's hang-up).
/// One function for both, never inlined, because callgrind 3.19 honours
/// only one `--zero-before` pattern.
#[inline(never)]
pub fn counted(work: &mut dyn FnMut() -> Result<(), Error>) -> Result<(), Error> {
    work()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_is_named_as_callgrind_shows_it() {
        let span = std::any::type_name_of_val(&counted);
        assert_eq!(span, "ferry_bench::instructions::counted");
    }

    #[test]
    fn a_dump_of_the_span_is_read_and_others_are_not() {
        let file = |trigger: &str| {
            format!(
                "cmd: /x/ferry-bench child --t\ndesc: Trigger: {trigger}\nevents: Ir\nfn=f\n0 5\nsummary: 170\n"
            )
        };
        assert_eq!(dump(&file("--dump-after=s"), "s"), Some(("child", 170)));
        assert_eq!(dump(&file("Program termination"), "s"), None);
    }

    #[test]
    fn the_default_transports_exist() {
        for name in DEFINITIONS.instructions.transports {
            assert!(transport::by_name(name).is_ok(), "{name}");
            // So the counting build leaves the rivals out.
            assert!(!transport::needs_default_features(name), "{name}");
        }
    }
}
