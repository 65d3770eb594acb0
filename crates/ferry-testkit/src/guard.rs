//! A watchdog over a whole test, and the children it starts.

use std::io::{self, Write};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often [`ChildGuard::wait_or_kill`] looks at the child.
const POLL: Duration = Duration::from_millis(1);

/// Kills this whole process, and the children it watches, if the test is
/// still running after a time limit; a hang then fails in seconds. Dropping
/// it stops the watch.
#[derive(Debug)]
pub struct Watchdog {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    pids: Arc<Mutex<Vec<u32>>>,
}

impl Watchdog {
    /// Starts watching `what` (named in the failure message) for `limit`.
    pub fn start(what: impl Into<String>, limit: Duration) -> Self {
        let what = what.into();
        let (stop, stopped) = mpsc::channel::<()>();
        let pids = Arc::new(Mutex::new(Vec::new()));
        let watched = Arc::clone(&pids);
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                if let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(limit) {
                    fire(&what, limit, &watched);
                }
            })
            .expect("start the watchdog thread");
        Self {
            stop: Some(stop),
            thread: Some(thread),
            pids,
        }
    }

    /// Guards `child`, and kills it too if the watchdog fires.
    pub fn watch(&self, child: Child) -> ChildGuard {
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        ChildGuard::new(child)
    }
}

/// The watchdog's bite. Writes straight to the standard error descriptor:
/// libtest's capture would swallow `eprintln!` from a test's threads.
fn fire(what: &str, limit: Duration, pids: &Mutex<Vec<u32>>) -> ! {
    let _ = writeln!(
        io::stderr(),
        "\nWATCHDOG: {what} still running after {limit:?}: a hang; killing its children and exiting"
    );
    for &pid in pids.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    std::process::exit(1);
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How a child ended under [`ChildGuard::wait_or_kill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited on its own.
    Exited(ExitStatus),
    /// It was still running at the deadline, and was killed.
    Killed,
}

/// A child process that is killed and reaped if dropped while running (the
/// test ended, or panicked, without waiting for it).
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    reaped: bool,
}

impl ChildGuard {
    /// Guards `child` (without a watchdog: see [`Watchdog::watch`]).
    pub fn new(child: Child) -> Self {
        Self {
            child,
            reaped: false,
        }
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child, for taking its standard streams.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Sends `SIGKILL`.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the child");
    }

    /// Waits for the child to end.
    pub fn wait(&mut self) -> ExitStatus {
        self.reap().expect("wait for the child")
    }

    /// Waits for the child to end, however long it takes, and says why not
    /// if the wait itself failed.
    pub fn reap(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        self.reaped = true;
        Ok(status)
    }

    /// Waits for the child and checks that it exited successfully (its test
    /// passed).
    pub fn wait_ok(mut self) {
        let status = self.wait();
        assert!(status.success(), "child failed: {status}");
    }

    /// The child's exit status if it has exited, without waiting.
    pub fn try_status(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Waits up to `timeout` for the child to exit, then kills it.
    pub fn wait_or_kill(mut self, timeout: Duration) -> io::Result<Exit> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.try_status()? {
                return Ok(Exit::Exited(status));
            }
            std::thread::sleep(POLL);
        }
        self.end();
        Ok(Exit::Killed)
    }

    /// The child's piped standard input.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.child.stdin.take().expect("child stdin was piped")
    }

    /// The child's piped standard output.
    pub fn take_stdout(&mut self) -> ChildStdout {
        self.child.stdout.take().expect("child stdout was piped")
    }

    /// Kills and reaps the child unless it was reaped already.
    fn end(&mut self) {
        if !self.reaped {
            // Either may fail only because the child already exited.
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_child_past_its_deadline_is_killed_and_one_within_it_is_not() {
        let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let start = Instant::now();
        let exit = ChildGuard::new(sleeper).wait_or_kill(Duration::from_millis(50));
        assert_eq!(exit.unwrap(), Exit::Killed);
        assert!(start.elapsed() < Duration::from_secs(5));
        let quick = Command::new("true").spawn().unwrap();
        match ChildGuard::new(quick).wait_or_kill(Duration::from_secs(10)) {
            Ok(Exit::Exited(status)) => assert!(status.success()),
            other => panic!("`true` did not exit on its own: {other:?}"),
        }
    }

    #[test]
    fn a_dropped_guard_kills_and_reaps_its_child() {
        let sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = rustix::process::Pid::from_raw(sleeper.id() as i32).unwrap();
        drop(ChildGuard::new(sleeper));
        // Reaped: the pid no longer names a process (nor a zombie).
        let probe = rustix::process::test_kill_process(pid);
        assert!(probe.is_err(), "the child outlived its guard");
    }
}
