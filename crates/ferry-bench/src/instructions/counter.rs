//! What counts instructions (the CPU's own counter through `perf stat`, or
//! callgrind), which one this machine can use, and the counted run as a
//! process this one starts and waits for.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::ValueEnum;

use super::{Job, callgrind, perf};
use crate::error::{Context, Error};
use crate::report::{Column, Table, format_count};
use crate::transport::{ChildGuard, Exit};

/// A counted run still going after this long is killed (a callgrind run of
/// 4,000 round trips takes seconds).
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// Lines of each log shown when a counted run fails.
const LOG_TAIL: usize = 20;
/// Longest function name in a functions table.
const NAME_WIDTH: usize = 100;

/// The `--counter` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CounterChoice {
    /// perf where its instructions:u counts on this machine, else callgrind.
    Auto,
    /// The CPU's counter, through perf stat.
    Perf,
    /// valgrind's callgrind, on a build it can run.
    Callgrind,
}

/// A counter this machine can use.
#[derive(Debug)]
pub enum Counter {
    /// `perf stat -e instructions:u`, of this very binary.
    Perf,
    /// callgrind, of the counting build at `exe`.
    Callgrind {
        /// ferry-bench built with rustix's libc backend.
        exe: PathBuf,
    },
}

/// What one counted run executed in user space.
#[derive(Debug, Clone, Default)]
pub struct Count {
    /// Both processes' instructions.
    pub total: u64,
    /// The parent's, where the counter tells the processes apart.
    pub parent: Option<u64>,
    /// The child's, likewise.
    pub child: Option<u64>,
    /// Instructions executed in each function's own code (not in what it
    /// calls), in the parent and in the child (callgrind only).
    pub functions: Option<[BTreeMap<String, u64>; 2]>,
}

impl Counter {
    /// The counter `choice` asks for, checked (and, for callgrind, built);
    /// an error naming what is missing if none can be had.
    pub fn choose(choice: CounterChoice) -> Result<Self, Error> {
        let callgrind = || callgrind::prepare().map(|exe| Self::Callgrind { exe });
        match choice {
            CounterChoice::Perf => perf::check().map(|()| Self::Perf),
            CounterChoice::Callgrind => callgrind(),
            CounterChoice::Auto => match perf::check() {
                Ok(()) => Ok(Self::Perf),
                Err(no_perf) => {
                    eprintln!("instructions: {no_perf}; counting with callgrind instead");
                    callgrind().map_err(|no_callgrind| {
                        Error::new(format!(
                            "no way to count instructions on this machine: {no_perf}; and {no_callgrind}"
                        ))
                    })
                }
            },
        }
    }

    /// `perf` or `callgrind`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Perf => "perf",
            Self::Callgrind { .. } => "callgrind",
        }
    }

    /// Whether its counts break down by function.
    pub fn sees_functions(&self) -> bool {
        matches!(self, Self::Callgrind { .. })
    }

    /// Runs `job` under the counter; its files go to a directory of their
    /// own under `keep`, or to a temporary one that is removed.
    pub fn count(&self, job: &Job, keep: Option<&Path>) -> Result<Count, Error> {
        let name = job.transport.name();
        let scratch = Scratch::new(&format!("{name}-{}", job.rounds), keep)?;
        eprintln!(
            "instructions: {name}, {} round trips of {} B, under {}",
            job.rounds,
            job.size,
            self.name()
        );
        let started = Instant::now();
        let count = match self {
            Self::Perf => perf::count(job, &scratch.0),
            Self::Callgrind { exe } => callgrind::count(exe, job, &scratch.0),
        }
        .map_err(|e| e.within(format!("{} round trips", job.rounds)))?;
        eprintln!(
            "instructions: {name}: {} instructions in {:.1} s",
            count.total,
            started.elapsed().as_secs_f64()
        );
        Ok(count)
    }
}

/// A directory for one counted run's files: removed when dropped, unless
/// it is under a directory the user asked to keep them in.
struct Scratch(PathBuf, bool);

impl Scratch {
    fn new(name: &str, keep: Option<&Path>) -> Result<Self, Error> {
        let (path, kept) = match keep {
            Some(dir) => (dir.join(name), true),
            None => {
                let base = format!("ferry-bench-instructions-{}", std::process::id());
                (std::env::temp_dir().join(base).join(name), false)
            }
        };
        // Files of an earlier run would be counted with this one's.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).context(format!("creating {}", path.display()))?;
        Ok(Self(path, kept))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
            if let Some(parent) = self.0.parent() {
                let _ = std::fs::remove_dir(parent); // once empty
            }
        }
    }
}

/// Runs `command` (the counter around `instructions-run`) to its end, its
/// output into `dir/output.log`; fails with the logs' tails unless it
/// succeeds.
pub fn run_counted(mut command: Command, dir: &Path) -> Result<(), Error> {
    let log_path = dir.join("output.log");
    let log = File::create(&log_path).context(format!("creating {}", log_path.display()))?;
    let log2 = log.try_clone().context("sharing the log")?;
    command.stdin(Stdio::null()).stdout(log2).stderr(log);
    let program = command.get_program().to_string_lossy().into_owned();
    let child = command.spawn().context(format!("starting {program}"))?;
    let why = match ChildGuard::new(child).wait_or_kill(RUN_TIMEOUT)? {
        Exit::Exited(status) if status.success() => return Ok(()),
        Exit::Exited(status) => format!("{program} exited with {status}"),
        Exit::Killed => format!("{program} still ran after {RUN_TIMEOUT:?}, and was killed"),
    };
    Err(Error::new(format!("{why}; its logs end:\n{}", tails(dir))))
}

/// The last lines of every log in `dir`.
fn tails(dir: &Path) -> String {
    let mut out = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut logs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    logs.retain(|p| p.extension().is_some_and(|e| e == "log"));
    logs.sort();
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL)..];
        out.push_str(&format!(
            "  {}:\n    {}\n",
            log.display(),
            tail.join("\n    ")
        ));
    }
    out
}

/// A table of the `top` functions with the most instructions of their own
/// per round trip in `transport`'s two processes, from the difference of
/// its two runs (`rounds` round trips apart); `None` without per-function
/// counts.
pub fn top_functions(
    transport: &str,
    fewer: &Count,
    more: &Count,
    rounds: f64,
    top: usize,
) -> Option<Table> {
    let (fewer, more) = (fewer.functions.as_ref()?, more.functions.as_ref()?);
    let mut per: BTreeMap<&str, [f64; 2]> = BTreeMap::new();
    for side in 0..2 {
        for (name, &n) in &more[side] {
            let before = fewer[side].get(name).copied().unwrap_or(0);
            per.entry(name).or_default()[side] = (n as f64 - before as f64) / rounds;
        }
    }
    // Those the extra round trips did not run (shown as 0.0) are left out.
    let ran = |(_, n): &(&str, [f64; 2])| n[0].abs().max(n[1].abs()) >= 0.05;
    let mut rows: Vec<(&str, [f64; 2])> = per.into_iter().filter(ran).collect();
    rows.sort_by(|a, b| (b.1[0] + b.1[1]).total_cmp(&(a.1[0] + a.1[1])));
    rows.truncate(top);
    Some(functions_table(transport, &rows))
}

fn functions_table(transport: &str, rows: &[(&str, [f64; 2])]) -> Table {
    let columns = [
        Column::name("function", |r: &(&str, [f64; 2])| shorten(r.0)),
        Column::number("parent", |r: &(&str, [f64; 2])| format_count(r.1[0])),
        Column::number("child", |r: &(&str, [f64; 2])| format_count(r.1[1])),
        Column::number("both", |r: &(&str, [f64; 2])| format_count(r.1[0] + r.1[1])),
    ];
    let title = format!("{transport}: instructions per round trip by function (its own code)");
    Table::new(&title, &columns, rows)
}

fn shorten(name: &str) -> String {
    match name.char_indices().nth(NAME_WIDTH) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(parent: &[(&str, u64)], child: &[(&str, u64)]) -> Count {
        let map = |f: &[(&str, u64)]| f.iter().map(|&(n, c)| (n.to_string(), c)).collect();
        Count {
            functions: Some([map(parent), map(child)]),
            ..Count::default()
        }
    }

    #[test]
    fn functions_rank_by_what_the_extra_round_trips_added() {
        let fewer = count(&[("send", 1000), ("setup", 5000)], &[("recv", 100)]);
        let more = count(
            &[("send", 3000), ("setup", 5000)],
            &[("recv", 2100), ("new", 1)],
        );
        let table = top_functions("t", &fewer, &more, 100.0, 3).unwrap();
        assert_eq!(table.rows.len(), 2);
        assert_eq!(table.rows[0], ["recv", "0.0", "20.0", "20.0"]);
        assert_eq!(table.rows[1], ["send", "20.0", "0.0", "20.0"]);
        assert!(top_functions("t", &Count::default(), &more, 1.0, 2).is_none());
    }

    #[test]
    fn long_names_are_cut() {
        assert_eq!(shorten("abc"), "abc");
        let long = "x".repeat(NAME_WIDTH + 5);
        assert_eq!(shorten(&long).chars().count(), NAME_WIDTH + 1);
    }
}
