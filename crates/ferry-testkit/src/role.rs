//! A test binary re-run as its own peer: the part a child plays, and
//! spawning it.

use std::process::{Command, Stdio};
#[cfg(not(loom))]
use std::time::Duration;

#[cfg(not(loom))]
use ferry::{Pipe, PipeOptions};

#[cfg(not(loom))]
use crate::guard::{ChildGuard, Watchdog};

/// The environment variable telling a re-run test binary which child role
/// to play.
pub const ROLE_ENV: &str = "FERRY_TEST_ROLE";
/// The variable through which `ferry::spawn` hands a child its pipe.
pub const BOOTSTRAP_ENV: &str = "FERRY_BOOTSTRAP";

/// The name libtest knows the enclosing test function by (its path without
/// the crate), for re-running just that test in a child.
#[macro_export]
macro_rules! this_test {
    () => {{
        fn here() {}
        let path = std::any::type_name_of_val(&here);
        let path = path.strip_suffix("::here").unwrap_or(path);
        path.split_once("::").map_or(path, |(_crate, rest)| rest)
    }};
}

/// The role this process plays, if a test started it as a child.
pub fn role() -> Option<String> {
    std::env::var(ROLE_ENV).ok()
}

/// A command that re-runs this test binary as the child playing `role` in
/// `test`. Its standard output (libtest's chatter) goes nowhere; standard
/// error stays shared, so a child's panic message shows.
pub fn child_command(test: &str, role: &str) -> Command {
    let exe = std::env::current_exe().expect("path of the test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        test,
        "--nocapture",
        "--test-threads=1",
        "--include-ignored",
    ])
    .env(ROLE_ENV, role)
    .env_remove(BOOTSTRAP_ENV)
    .stdin(Stdio::null())
    .stdout(Stdio::null());
    cmd
}

/// Spawns this test binary as the child playing `role` in `test`, holding
/// the other end of a pipe made with `options`.
#[cfg(not(loom))]
pub fn spawn_child(
    dog: &Watchdog,
    test: &str,
    role: &str,
    options: &PipeOptions,
) -> (ChildGuard, Pipe) {
    spawn_command(dog, child_command(test, role), options)
}

/// Spawns `cmd` with `ferry`, watched by `dog`.
#[cfg(not(loom))]
pub fn spawn_command(dog: &Watchdog, cmd: Command, options: &PipeOptions) -> (ChildGuard, Pipe) {
    let (child, pipe) = options.spawn(cmd).expect("ferry spawn of the child");
    (dog.watch(child), pipe)
}

/// In a child: starts its own watchdog and takes the pipe from the parent.
#[cfg(not(loom))]
pub fn child_pipe(role: &str, limit: Duration) -> (Watchdog, Pipe) {
    let dog = Watchdog::start(format!("child `{role}`"), limit);
    let pipe = Pipe::from_parent().expect("pipe from the parent");
    (dog, pipe)
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_test_names_the_test_as_libtest_does() {
        assert_eq!(
            this_test!(),
            "role::tests::this_test_names_the_test_as_libtest_does"
        );
    }
}
