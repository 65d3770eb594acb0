//! The C side, run by `cargo test` (so by the README's test command): the
//! library cargo just built is installed under the test's own prefix by
//! `install.sh`, then the system compiler builds the C tests
//! (`tests/c/*.c`, C99, warnings as errors), the header as C++11, and the
//! examples through `pkg-config`; every program runs for real, across
//! processes, and once more under AddressSanitizer and
//! UndefinedBehaviorSanitizer.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use ferry_testkit::Watchdog;

/// The hostile peers of ferry's own suite, which speak the wire by hand:
/// here they attack a C victim.
#[allow(dead_code, clippy::all)]
#[path = "../../ferry/tests/hostile/attacker/mod.rs"]
mod attacker;

/// How long any one test here may run before its watchdog ends it.
const LIMIT: Duration = Duration::from_secs(600);

/// The C compiler: `$CC`, else `cc`.
fn cc() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// The C++ compiler: `$CXX`, else `c++`.
fn cxx() -> String {
    std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned())
}

const WARNINGS: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// AddressSanitizer and UndefinedBehaviorSanitizer, every report fatal.
const SANITIZERS: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
];

/// `command` with the sanitizers' options: leaks checked, reports fatal.
fn sanitized(command: &mut Command) -> &mut Command {
    command
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:exitcode=23",
        )
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
}

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ferry-c")
}

/// Runs `command`, failing the test with its output unless it succeeds.
fn run(what: &str, command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run {command:?}: {e}"));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    if !out.status.success() {
        panic!(
            "{what} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    print!("{}", text(&out.stdout));
    eprint!("{}", text(&out.stderr));
    out
}

/// The prefix `install.sh` installed this source's library under (once
/// per test binary). The library is built here, by cargo, into a target
/// directory of its own (the outer `cargo test` holds the workspace's, and
/// does not always leave the `cdylib` and `staticlib` where a program
/// links them): so what the C tests link is always the source under test.
fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let target = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ferry-c-build");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        run(
            "building libferry (cargo build --release -p ferry-c)",
            Command::new(cargo)
                .args(["build", "--release", "--quiet", "-p", "ferry-c", "--lib"])
                .arg("--manifest-path")
                .arg(here().join("Cargo.toml"))
                .arg("--target-dir")
                .arg(&target),
        );
        let built = target.join("release");
        let prefix = scratch().join("prefix");
        run(
            "install.sh",
            Command::new(here().join("install.sh"))
                .arg(&prefix)
                .env("FERRY_LIB_DIR", built),
        );
        prefix
    })
}

/// Compiles the C sources `sources` into `out`, linked to the installed
/// shared library, with `extra` flags.
fn compile(sources: &[PathBuf], out: &Path, extra: &[&str]) -> PathBuf {
    build(&cc(), "-std=c99", sources, out, extra)
}

/// Compiles the C++ sources `sources` as C++11, as `compile` does C.
fn compile_cpp(sources: &[PathBuf], out: &Path, extra: &[&str]) -> PathBuf {
    build(&cxx(), "-std=c++11", sources, out, extra)
}

fn build(
    compiler: &str,
    standard: &str,
    sources: &[PathBuf],
    out: &Path,
    extra: &[&str],
) -> PathBuf {
    let prefix = prefix();
    let lib = prefix.join("lib");
    std::fs::create_dir_all(out.parent().expect("a directory"))
        .expect("making the build directory");
    run(
        &format!("compiling {}", out.display()),
        Command::new(compiler)
            .args([standard, "-g", "-O1"])
            .args(WARNINGS)
            .args(extra)
            .arg("-I")
            .arg(prefix.join("include"))
            .arg("-I")
            .arg(here().join("tests/c"))
            .args(sources)
            .arg("-o")
            .arg(out)
            .arg("-L")
            .arg(&lib)
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-lferry"),
    );
    out.to_path_buf()
}

fn test_source(name: &str) -> PathBuf {
    here().join("tests/c").join(name)
}

fn rust_peer() -> &'static str {
    env!("CARGO_BIN_EXE_ferry-c-peer")
}

#[test]
fn the_header_compiles_as_c99_and_as_cpp11() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("the header compiles", LIMIT);
    let include = prefix().join("include");
    let dir = scratch().join("header");
    std::fs::create_dir_all(&dir).expect("making a directory");
    let source = dir.join("include.c");
    std::fs::write(
        &source,
        "#include \"ferry.h\"\nint main(void) { return ferry_abi_version() >> 16 == FERRY_ABI_MAJOR ? 0 : 1; }\n",
    )
    .expect("writing a source");
    for (compiler, standard, language) in [(cc(), "-std=c99", "c"), (cxx(), "-std=c++11", "c++")] {
        run(
            &format!("the header as {standard}"),
            Command::new(compiler)
                .arg(standard)
                .args(WARNINGS)
                .args(["-x", language, "-fsyntax-only", "-I"])
                .arg(&include)
                .arg(&source),
        );
    }
    let source = dir.join("include.cpp");
    std::fs::write(
        &source,
        "#include \"ferry.hpp\"\nint main() { return ferry::forever.count() < 0 ? 0 : 1; }\n",
    )
    .expect("writing a source");
    run(
        "ferry.hpp as -std=c++11",
        Command::new(cxx())
            .arg("-std=c++11")
            .args(WARNINGS)
            .args(["-fsyntax-only", "-I"])
            .arg(&include)
            .arg(&source),
    );
}

#[test]
fn the_c_tests_pass() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("the C tests", LIMIT);
    let dir = scratch().join("plain");
    let pipe = compile(&[test_source("test_pipe.c")], &dir.join("test_pipe"), &[]);
    run("test_pipe", &mut Command::new(pipe));
    let procs = compile(
        &[test_source("test_processes.c")],
        &dir.join("test_processes"),
        &[],
    );
    run(
        "test_processes",
        Command::new(procs).arg(rust_peer()).arg("1000000"),
    );
}

#[test]
fn the_cpp_wrapper_works() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("the C++ wrapper", LIMIT);
    let source = here().join("tests/cpp/test_wrapper.cpp");
    let dir = scratch().join("cpp");
    let test = compile_cpp(
        std::slice::from_ref(&source),
        &dir.join("test_wrapper"),
        &[],
    );
    run("test_wrapper", &mut Command::new(test));
    // Once more under the sanitizers: a handle closed twice would show.
    let test = compile_cpp(&[source], &dir.join("test_wrapper-sanitized"), SANITIZERS);
    run(
        "test_wrapper under sanitizers",
        sanitized(&mut Command::new(test)),
    );
}

#[test]
fn the_c_tests_pass_under_address_and_undefined_behaviour_sanitizers() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("the C tests under sanitizers", LIMIT);
    let dir = scratch().join("sanitized");
    let peer = [rust_peer(), "100000"];
    let tests: [(&str, &[&str]); 3] = [
        ("test_pipe", &[]),
        ("test_messages", &[]),
        ("test_processes", &peer),
    ];
    for (name, args) in tests {
        let test = compile(
            &[test_source(&format!("{name}.c"))],
            &dir.join(name),
            SANITIZERS,
        );
        run(
            &format!("{name} under sanitizers"),
            sanitized(Command::new(test).args(args)),
        );
    }
}

#[test]
fn the_examples_build_with_pkg_config_and_run() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("the examples", LIMIT);
    let pc_path = prefix().join("lib/pkgconfig");
    let flags = run(
        "pkg-config",
        Command::new("pkg-config")
            .args(["--cflags", "--libs", "ferry"])
            .env("PKG_CONFIG_PATH", &pc_path),
    );
    let flags = String::from_utf8(flags.stdout).expect("pkg-config's flags");
    let dir = scratch().join("examples");
    std::fs::create_dir_all(&dir).expect("making a directory");
    let echo = dir.join("echo");
    let lib = prefix().join("lib");
    run(
        "building examples/echo.c",
        Command::new(cc())
            .arg("-std=c99")
            .args(WARNINGS)
            .arg(here().join("examples/echo.c"))
            .arg("-o")
            .arg(&echo)
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    let out = run("examples/echo", &mut Command::new(&echo));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sent three, got three back"), "{said}");

    // The server with three clients.
    let server = dir.join("server");
    run(
        "building examples/server.c",
        Command::new(cc())
            .arg("-std=c99")
            .args(WARNINGS)
            .arg(here().join("examples/server.c"))
            .arg("-o")
            .arg(&server)
            .args(flags.split_whitespace())
            .arg(format!("-Wl,-rpath,{}", lib.display())),
    );
    let out = run("examples/server", &mut Command::new(&server));
    let said = String::from_utf8_lossy(&out.stdout);
    for n in 1..=3 {
        assert!(
            said.contains(&format!("client {n} got {}", 2 * n)),
            "{said}"
        );
    }

    // Linked statically, through `pkg-config --static`.
    let flags = run(
        "pkg-config --static",
        Command::new("pkg-config")
            .args(["--static", "--cflags", "--libs", "ferry"])
            .env("PKG_CONFIG_PATH", &pc_path),
    );
    let flags = String::from_utf8(flags.stdout).expect("pkg-config's flags");
    let echo_static = dir.join("echo-static");
    run(
        "building examples/echo.c statically",
        Command::new(cc())
            .arg("-std=c99")
            .args(WARNINGS)
            .arg(here().join("examples/echo.c"))
            .arg("-o")
            .arg(&echo_static)
            .args(flags.split_whitespace().map(
                |f| {
                    if f == "-lferry" { "-l:libferry.a" } else { f }
                },
            )),
    );
    let out = run("examples/echo, static", &mut Command::new(&echo_static));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sent three, got three back"));
}

#[test]
fn a_c_child_echoes_for_a_rust_parent() {
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("a C child of a Rust parent", LIMIT);
    let dir = scratch().join("examples");
    let echo = compile(
        &[here().join("examples/echo.c")],
        &dir.join("echo-for-rust"),
        &[],
    );
    let mut command = Command::new(echo);
    command.arg("child");
    let (mut child, pipe) = ferry::spawn(command).expect("spawning the C child");
    for size in [0usize, 1, 12, 144, 255] {
        let message: Vec<u8> = (0..size).map(|i| i as u8).collect();
        pipe.send(&message).expect("sending to the C child");
        let back = pipe
            .receiver()
            .recv_timeout(Duration::from_secs(10))
            .expect("the C child's reply");
        assert_eq!(back, message, "{size} bytes came back changed");
    }
    drop(pipe);
    let status = child.wait().expect("waiting for the C child");
    assert!(status.success(), "the C child exited with {status}");
}

/// The hostile peers of the Rust suite against a C victim
/// (`tests/c/hostile_victim.c`): an end with impossible ring positions
/// (both kinds), a message claiming 32,767 handles, garbage records for
/// ever. Each call gives an error (or times out) within its bound, the
/// victim never crashes, and it leaves no descriptor behind; it runs under
/// AddressSanitizer and UndefinedBehaviorSanitizer.
#[test]
fn a_c_victim_of_hostile_peers_gets_errors_never_a_crash() {
    let test = ferry_testkit::this_test!();
    if let Some(role) = ferry_testkit::role() {
        // This binary, started by the C victim: the attacker.
        attacker::attacks::run(&role);
        return;
    }
    // One at a time: they count descriptors, wakeups and latencies.
    let _serial = ferry_testkit::serial();
    let _dog = Watchdog::start("a C victim of hostile peers", LIMIT);
    let dir = scratch().join("hostile");
    let victim = compile(
        &[test_source("hostile_victim.c")],
        &dir.join("hostile_victim"),
        SANITIZERS,
    );
    for attack in ["positions-a", "positions-b", "handles-32767", "records"] {
        let role = format!("attacker-{attack}");
        let attacker = ferry_testkit::child_command(test, &role);
        let out = run(
            &format!("the C victim of {attack}"),
            sanitized(
                Command::new(&victim)
                    .arg(attack)
                    .arg(attacker.get_program())
                    .args(attacker.get_args())
                    .env(ferry_testkit::ROLE_ENV, &role),
            ),
        );
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(said.contains(&format!("{attack}: survived")), "{said}");
    }
}
