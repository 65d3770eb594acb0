//! Counting with the CPU's own counter: `perf stat -x, -e instructions:u`
//! around the counted run (the parent and, inherited, the child).
//!
//! Many virtual machines expose no performance counters; perf then prints
//! `<not supported>` where the count belongs, and [`check`] says so.

use std::path::Path;
use std::process::{Command, Stdio};

use super::Job;
use super::counter::{Count, run_counted};
use crate::error::{Context, Error};

/// The event: instructions retired in user space.
const EVENT: &str = "instructions:u";

/// Succeeds if perf counts [`EVENT`] here; else says why not.
pub fn check() -> Result<(), Error> {
    let exe = std::env::current_exe().context("finding this program")?;
    let out = std::env::temp_dir().join(format!("ferry-bench-perf-{}.csv", std::process::id()));
    let ran = perf_stat(&out)
        .arg(exe)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let _ = std::fs::remove_file(&out);
    match ran {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::new("perf is not installed"))
        }
        Err(e) => Err(Error::new(format!("perf cannot be run ({e})"))),
        Ok(status) if !status.success() => Err(Error::new(format!(
            "perf stat -e {EVENT} failed ({status}): {}",
            text.trim()
        ))),
        Ok(_) => match parse(&text) {
            Ok(n) if n > 0 => Ok(()),
            Ok(_) => Err(Error::new(format!("perf stat counted no {EVENT}"))),
            Err(why) => Err(Error::new(format!(
                "perf stat cannot count {EVENT} here: {why}"
            ))),
        },
    }
}

/// Runs `job` under perf stat; its CSV goes to `dir/perf.csv`.
pub fn count(job: &Job, dir: &Path) -> Result<Count, Error> {
    let exe = std::env::current_exe().context("finding this program")?;
    let csv = dir.join("perf.csv");
    let mut command = perf_stat(&csv);
    command.arg(exe).args(job.args());
    run_counted(command, dir)?;
    let text = std::fs::read_to_string(&csv).context(format!("reading {}", csv.display()))?;
    let total = parse(&text).map_err(|why| Error::new(format!("perf stat's output: {why}")))?;
    Ok(Count {
        total,
        ..Count::default()
    })
}

/// `perf stat` counting [`EVENT`] as CSV into `out`, before the program.
fn perf_stat(out: &Path) -> Command {
    let mut command = Command::new("perf");
    command
        .args(["stat", "-x,", "-e", EVENT, "-o"])
        .arg(out)
        .arg("--");
    command
}

/// The count on [`EVENT`]'s line of perf stat's CSV output.
fn parse(text: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|l| !l.starts_with('#') && l.split(',').nth(2) == Some(EVENT))
        .ok_or_else(|| format!("no {EVENT} line"))?;
    let value = line.split(',').next().unwrap_or_default();
    value.trim().parse::<u64>().map_err(|_| match value {
        v if v.starts_with('<') => format!("{v} (no hardware counters, as in many VMs)"),
        v => format!("{v:?} is not a count"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_read_from_its_line() {
        let text = "# started on Mon\n\n4213077,,instructions:u,1002,100.00,,\n";
        assert_eq!(parse(text), Ok(4_213_077));
    }

    #[test]
    fn an_unsupported_event_says_why() {
        let why = parse("<not supported>,,instructions:u,0,100.00,,\n").unwrap_err();
        assert!(why.contains("<not supported>"), "{why}");
        assert!(parse("").is_err());
    }
}
