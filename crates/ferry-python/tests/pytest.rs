//! The Python suite (`tests/*.py`), run by `cargo test`: so the README's
//! one test command runs it too, on a fresh clone.
//!
//! It makes a virtual environment of its own (once, under cargo's target
//! directory), installs maturin, pytest and numpy into it from the package
//! registry (and trio and pyzmq, for the event-loop test and the benchmark's
//! pyzmq row), builds and installs the `ferry` package with
//! `maturin develop --release` (into a target directory of its own, which
//! later runs reuse: the outer `cargo test` holds the workspace's), and
//! runs pytest with its output shown as it goes. Python 3.11 or later must
//! be on the `PATH` as `python3` (or named by `FERRY_PYTHON`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use ferry_testkit::Watchdog;

/// What the virtual environment is made with, and holds.
const REQUIREMENTS: &[&str] = &[
    "maturin>=1.9.4,<2",
    "pytest>=8",
    "numpy>=1.26",
    "trio>=0.25",
    "pyzmq>=26",
];

/// The longest the whole suite may take, its set-up included (a fresh
/// venv and a release build take a few minutes); past it the watchdog
/// kills what runs and fails the test, rather than let CI hang.
const LIMIT: Duration = Duration::from_secs(30 * 60);

fn run(watchdog: &Watchdog, what: &str, command: &mut Command) {
    eprintln!("pytest driver: {what}");
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: could not start {command:?}: {e}"));
    let mut child = watchdog.watch(child);
    let status = child.wait();
    assert!(status.success(), "{what} failed ({status}): {command:?}");
}

/// The virtual environment, made and filled on first use.
fn venv(watchdog: &Watchdog, target: &Path) -> PathBuf {
    let venv = target.join("ferry-python-venv");
    let marker = venv.join(".ferry-requirements");
    let wanted = REQUIREMENTS.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(wanted.as_str()) {
        return venv;
    }
    let python = std::env::var("FERRY_PYTHON").unwrap_or_else(|_| "python3".into());
    run(
        watchdog,
        "making the virtual environment",
        Command::new(&python)
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
    );
    run(
        watchdog,
        "installing maturin, pytest, numpy, trio and pyzmq",
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(REQUIREMENTS),
    );
    std::fs::write(&marker, wanted).expect("writing the requirements marker");
    venv
}

#[test]
fn the_python_suite_passes() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let watchdog = Watchdog::start("the Python suite", LIMIT);
    let venv = venv(&watchdog, &target);
    run(
        &watchdog,
        "building and installing the ferry package (maturin develop --release)",
        Command::new(venv.join("bin/maturin"))
            .args(["develop", "--release", "--quiet", "--manifest-path"])
            .arg(here.join("Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("CARGO_TARGET_DIR", target.join("ferry-python-build"))
            .env_remove("CARGO_PRIMARY_PACKAGE"),
    );
    run(
        &watchdog,
        "running pytest",
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(here.join("tests"))
            .env("FERRY_PEER", env!("CARGO_BIN_EXE_ferry-python-peer"))
            .current_dir(&target),
    );
}
