//! How a victim process tells the test that started it what happened: one
//! line per report on its standard output, `VICTIM {"key": value, ...}`
//! (numbers bare, text quoted), and how that test reads them back, with a
//! deadline, and judges the run.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use ferry_testkit::{ChildGuard, Watchdog};

/// What opens every report line.
const PREFIX: &str = "VICTIM ";

/// One report: ordered keys with numeric or text values.
#[derive(Debug, Clone, Default)]
pub struct Report {
    fields: Vec<(String, String)>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a number.
    pub fn num(mut self, key: &str, value: u64) -> Self {
        self.fields.push((key.into(), value.to_string()));
        self
    }

    /// Adds a text (any control character becomes a space).
    pub fn text(mut self, key: &str, value: impl std::fmt::Display) -> Self {
        let clean: String = value
            .to_string()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        self.fields.push((key.into(), format!("{clean:?}")));
        self
    }

    /// Prints the report as one line and flushes it, so the test sees it
    /// even if this process dies next.
    pub fn print(&self) {
        let mut line = String::from(PREFIX);
        line.push('{');
        for (i, (key, value)) in self.fields.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(line, "{sep}{key:?}: {value}");
        }
        line.push('}');
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }

    /// Parses a report line (as [`Report::print`] writes it; libtest's
    /// `test <name> ... ` may precede it on the same line).
    pub fn parse(line: &str) -> Option<Self> {
        let at = line.find(PREFIX)?;
        let body = line[at + PREFIX.len()..]
            .strip_prefix('{')?
            .strip_suffix('}')?;
        let mut fields = Vec::new();
        let mut rest = body.trim_start();
        while !rest.is_empty() {
            let (key, after) = quoted(rest)?;
            let after = after.strip_prefix(": ")?;
            let (value, after) = match after.starts_with('"') {
                true => quoted(after)?,
                false => {
                    let end = after.find(", \"").unwrap_or(after.len());
                    (after[..end].to_string(), &after[end..])
                }
            };
            fields.push((key, value));
            rest = after.strip_prefix(", ").unwrap_or(after);
        }
        Some(Self { fields })
    }

    /// The value of `key`, unquoted, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The number under `key`; panics naming the key if it is missing.
    pub fn u64(&self, key: &str) -> u64 {
        self.get(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("report has no number {key:?}: {self:?}"))
    }

    /// The text under `key`; panics naming the key if it is missing.
    pub fn str(&self, key: &str) -> &str {
        self.get(key)
            .unwrap_or_else(|| panic!("report has no field {key:?}: {self:?}"))
    }
}

/// Splits a leading `"..."` (Rust-escaped, as `{:?}` writes) off `s`.
fn quoted(s: &str) -> Option<(String, &str)> {
    let s = s.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &s[i + 1..])),
            '\\' => {
                let (_, escaped) = chars.next()?;
                out.push(match escaped {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
            }
            c => out.push(c),
        }
    }
    None
}

/// In a victim: says which step it starts, so a hang can be placed.
pub fn stage(name: &str) {
    Report::new().text("stage", name).print();
}

/// What became of one victim process.
#[derive(Debug)]
pub struct VictimRun {
    /// The role it played.
    pub role: String,
    /// How it ended (`None` if it was killed for running past its limit).
    pub status: Option<ExitStatus>,
    /// Every report it printed, in order.
    pub reports: Vec<Report>,
    /// Wall time from start to end.
    pub elapsed: Duration,
}

impl VictimRun {
    /// The last report holding `key`.
    pub fn find(&self, key: &str) -> Option<&Report> {
        self.reports.iter().rev().find(|r| r.get(key).is_some())
    }

    /// The last stage the victim announced.
    pub fn last_stage(&self) -> &str {
        self.find("stage").map_or("(none)", |r| r.str("stage"))
    }

    /// Why the run itself failed (crash, panic, hang), if it did.
    pub fn crashed(&self) -> Option<String> {
        let stage = self.last_stage();
        let Some(status) = self.status else {
            return Some(format!(
                "victim `{}` HUNG in stage {stage:?}: killed after {:?}",
                self.role, self.elapsed
            ));
        };
        if let Some(signal) = status.signal() {
            return Some(format!(
                "victim `{}` CRASHED with signal {signal} ({}) in stage {stage:?}",
                self.role,
                signal_name(signal)
            ));
        }
        match status.code() {
            Some(0) => None,
            Some(101) => Some(format!(
                "victim `{}` PANICKED in stage {stage:?} (see its stderr above)",
                self.role
            )),
            Some(code) => Some(format!(
                "victim `{}` exited with {code} in stage {stage:?} (1: its watchdog fired)",
                self.role
            )),
            None => Some(format!("victim `{}` ended oddly: {status}", self.role)),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        6 => "SIGABRT",
        7 => "SIGBUS",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        _ => "?",
    }
}

/// A running victim whose reports are being collected.
pub struct Watch {
    child: ChildGuard,
    role: String,
    lines: mpsc::Receiver<String>,
    started: Instant,
    limit: Duration,
}

impl Watch {
    /// Starts collecting the reports of `child`, whose standard output
    /// must be piped; it may run for `limit`.
    pub fn new(mut child: ChildGuard, role: &str, limit: Duration) -> Self {
        let stdout = child.take_stdout();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            role: role.into(),
            lines,
            started: Instant::now(),
            limit,
        }
    }

    /// Collects reports until the victim ends (or kills it at its limit).
    /// `on_event` sees each report as it comes, and `None` every 20 ms.
    pub fn finish(mut self, mut on_event: impl FnMut(Option<&Report>)) -> VictimRun {
        let mut reports = Vec::new();
        let mut hung = false;
        loop {
            let left = self.limit.saturating_sub(self.started.elapsed());
            if left.is_zero() {
                hung = true;
                self.child.kill();
                break;
            }
            match self.lines.recv_timeout(left.min(Duration::from_millis(20))) {
                Ok(line) => {
                    if let Some(report) = Report::parse(&line) {
                        on_event(Some(&report));
                        reports.push(report);
                    }
                }
                Err(RecvTimeoutError::Timeout) => on_event(None),
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = self.child.wait();
        VictimRun {
            role: self.role,
            status: (!hung).then_some(status),
            reports,
            elapsed: self.started.elapsed(),
        }
    }
}

/// Runs this test binary as the victim playing `role` in `test`, for at
/// most `limit`, and collects its reports.
pub fn run_victim(
    dog: &Watchdog,
    test: &str,
    role: &str,
    limit: Duration,
    on_event: impl FnMut(Option<&Report>),
) -> VictimRun {
    let mut cmd = ferry_testkit::child_command(test, role);
    cmd.stdout(Stdio::piped());
    let child = dog.watch(cmd.spawn().expect("spawn the victim"));
    Watch::new(child, role, limit).finish(on_event)
}

/// The findings of one test, all gathered before it fails, so one run
/// tells every way the code under test falls short.
#[derive(Debug, Default)]
pub struct Verdict {
    failures: Vec<String>,
}

impl Verdict {
    /// A verdict with nothing wrong yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `failure` unless `ok`.
    pub fn check(&mut self, ok: bool, failure: impl FnOnce() -> String) {
        if !ok {
            let failure = failure();
            eprintln!("FAIL: {failure}");
            self.failures.push(failure);
        }
    }

    /// Records a finding that is a failure outright.
    pub fn fail(&mut self, failure: String) {
        self.check(false, || failure);
    }

    /// Prints a measurement worth reading even when it passes.
    pub fn note(&self, what: impl std::fmt::Display) {
        eprintln!("note: {what}");
    }

    /// Checks the victim ran to its end; `false` if it crashed or hung
    /// (recorded), so the caller skips checks of reports that never came.
    pub fn survived(&mut self, run: &VictimRun) -> bool {
        match run.crashed() {
            Some(why) => {
                self.fail(why);
                false
            }
            None => true,
        }
    }

    /// Checks the victim's descriptor count did not grow (`fds_before`,
    /// `fds_after` in its final report).
    pub fn no_fd_growth(&mut self, run: &VictimRun) {
        if let Some(r) = run.find("fds_after") {
            let (before, after) = (r.u64("fds_before"), r.u64("fds_after"));
            self.check(after <= before, || {
                format!("{}: descriptors grew from {before} to {after}", run.role)
            });
        }
    }

    /// Fails the test if anything was recorded.
    pub fn finish(self) {
        assert!(
            self.failures.is_empty(),
            "{} finding(s):\n  - {}",
            self.failures.len(),
            self.failures.join("\n  - ")
        );
    }
}

/// How a call ended, as a victim reports it: `Ok`, or the error's
/// `Debug` form (`Protocol(ProtocolError("..."))`, `Disconnected`, ...).
pub fn outcome<T, E: std::fmt::Debug>(result: &Result<T, E>) -> String {
    match result {
        Ok(_) => "Ok".into(),
        Err(e) => format!("{e:?}"),
    }
}
