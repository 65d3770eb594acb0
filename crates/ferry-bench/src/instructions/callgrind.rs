//! Counting with callgrind, on machines without hardware counters.
//!
//! Callgrind counts each process's span only ([`super::counted`]: zeroed on
//! entering it, dumped on leaving it), so start-up, whose work under
//! valgrind depends on how long the other process takes to start (a
//! listener polled until the child connects), stays out of the count.
//!
//! valgrind 3.19 crashes on an ordinary build: rustix's raw-syscall backend
//! parses the vDSO at start-up (`vdso_wrappers::init_getcpu`) and faults in
//! `check_elf_base` under valgrind. So callgrind runs a copy of this
//! program built with `--cfg rustix_use_libc` (rustix's libc backend),
//! into `target/instructions` of the workspace ([`prepare`]); the two
//! builds differ only in how rustix reaches the kernel.

use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::Job;
use super::cgfile::{self, CgFile};
use super::counter::{Count, run_counted};
use crate::error::{Context, Error};

/// The flags of the counting build.
const RUSTFLAGS: &str = "--cfg rustix_use_libc";
/// Its target directory, under the workspace.
const TARGET: &str = "target/instructions";

/// Checks valgrind is here, and builds (or brings up to date) the copy of
/// this program callgrind runs; returns its path.
pub fn prepare() -> Result<PathBuf, Error> {
    let version = Command::new("valgrind").arg("--version").output();
    match version {
        Ok(out) if out.status.success() => {}
        _ => {
            return Err(Error::new(
                "valgrind is not installed, and callgrind counts where the CPU's counters cannot: install it (apt-get install -y valgrind)",
            ));
        }
    }
    build()
}

/// `cargo build --release -p ferry-bench` with [`RUSTFLAGS`] into
/// [`TARGET`], its progress on stderr.
fn build() -> Result<PathBuf, Error> {
    let workspace = crate::workspace().ok_or_else(|| {
        Error::new("callgrind needs a build of ferry-bench from its sources, but the workspace it was built in is gone")
    })?;
    let target = workspace.join(TARGET);
    eprintln!(
        "instructions: building ferry-bench for callgrind into {} (RUSTFLAGS=\"{RUSTFLAGS}\": rustix's libc backend, which valgrind can run); minutes the first time",
        target.display()
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let stderr = std::io::stderr();
    let to_stderr = stderr.as_fd().try_clone_to_owned();
    let mut command = Command::new(cargo);
    command
        .args([
            "build",
            "--release",
            "-p",
            "ferry-bench",
            "--bin",
            "ferry-bench",
        ])
        .current_dir(&workspace)
        .env("CARGO_TARGET_DIR", &target)
        .env("RUSTFLAGS", RUSTFLAGS)
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .stdin(Stdio::null())
        .stdout(to_stderr.map_or_else(|_| Stdio::null(), Stdio::from));
    let status = command.status().context("running cargo build")?;
    if !status.success() {
        return Err(Error::new(format!(
            "the counting build (cargo build in {}) failed: {status}",
            target.display()
        )));
    }
    let exe = target.join("release/ferry-bench");
    match exe.is_file() {
        true => Ok(exe),
        false => Err(Error::new(format!(
            "the counting build left no {}",
            exe.display()
        ))),
    }
}

/// Runs `job` in `exe` under callgrind, following the child, and adds up
/// the parent's and the child's counted spans ([`super::counted`]): each
/// process's costs are zeroed on entering it and written to
/// `dir/cg.<pid>.<part>` on leaving it.
pub fn count(exe: &Path, job: &Job, dir: &Path) -> Result<Count, Error> {
    let span = span();
    let mut command = Command::new("valgrind");
    command
        .arg("--tool=callgrind")
        .arg("--trace-children=yes")
        .arg(format!("--zero-before={span}"))
        .arg(format!("--dump-after={span}"))
        .arg(format!("--callgrind-out-file={}/cg.%p", dir.display()))
        .arg(format!("--log-file={}/valgrind.%p.log", dir.display()))
        .arg(exe)
        .args(job.args());
    run_counted(command, dir)?;
    collect(dir, &format!("--dump-after={span}"))
}

/// The name callgrind knows the counted span's function by.
fn span() -> &'static str {
    std::any::type_name_of_val(&super::counted)
}

/// The parent's (`instructions-run`) and the child's (`child`) dumps of
/// their spans in `dir`, which `trigger` wrote; any other file is left out.
fn collect(dir: &Path, trigger: &str) -> Result<Count, Error> {
    let (mut parent, mut child) = (Vec::new(), Vec::new());
    for entry in std::fs::read_dir(dir).context(format!("listing {}", dir.display()))? {
        let path = entry.context("listing callgrind's files")?.path();
        let name = path.file_name().and_then(|n| n.to_str());
        if !name.is_some_and(|n| n.starts_with("cg.")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).context(format!("reading {}", path.display()))?;
        let file = cgfile::parse(&text).map_err(|e| e.within(path.display()))?;
        match (file.subcommand(), file.trigger == trigger) {
            (Some("instructions-run"), true) => parent.push(file),
            (Some("child"), true) => child.push(file),
            _ => {}
        }
    }
    let (Some(parent), Some(child)) = (one(parent), one(child)) else {
        return Err(Error::new(format!(
            "expected one dump of the counted span ({trigger}) from the parent and one from the child in {}",
            dir.display()
        )));
    };
    Ok(Count {
        total: parent.total + child.total,
        parent: Some(parent.total),
        child: Some(child.total),
        functions: Some([parent.functions, child.functions]),
    })
}

fn one(mut files: Vec<CgFile>) -> Option<CgFile> {
    match files.len() {
        1 => files.pop(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_is_named_as_callgrind_shows_it() {
        assert_eq!(span(), "ferry_bench::instructions::counted");
    }
}
