//! Helpers for the multi-process tests.
//!
//! A test re-runs its own test binary as the peer process (`--exact <test>`,
//! with [`ROLE_ENV`] naming the part the child plays), as ipc-channel's
//! `src/test.rs` does. Every blocking test runs under a [`Watchdog`], so a
//! hang fails in seconds instead of at CI's time limit.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::Write;
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use ferry::{Pipe, PipeOptions};

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

/// Whole seconds, for readable limits.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
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
pub fn spawn_child(
    dog: &Watchdog,
    test: &str,
    role: &str,
    options: &PipeOptions,
) -> (ChildGuard, Pipe) {
    spawn_command(dog, child_command(test, role), options)
}

/// Spawns `cmd` with `ferry`, watched by `dog`.
pub fn spawn_command(dog: &Watchdog, cmd: Command, options: &PipeOptions) -> (ChildGuard, Pipe) {
    let (child, pipe) = options.spawn(cmd).expect("ferry spawn of the child");
    (dog.watch(child), pipe)
}

/// In a child: starts its own watchdog and takes the pipe from the parent.
pub fn child_pipe(role: &str, limit: Duration) -> (Watchdog, Pipe) {
    let dog = Watchdog::start(format!("child `{role}`"), limit);
    let pipe = Pipe::from_parent().expect("pipe from the parent");
    (dog, pipe)
}

/// Number of open descriptors of this process (entries of `/proc/self/fd`,
/// including the one reading the directory), not counting the one epoll
/// descriptor of ferry's hang-up watcher, which the first link of a process
/// makes once and keeps (a second one is counted: that would be a leak).
pub fn fd_count() -> usize {
    let mut epolls = 0;
    let mut count = 0;
    for entry in std::fs::read_dir("/proc/self/fd").expect("read /proc/self/fd") {
        let entry = entry.expect("an entry of /proc/self/fd");
        count += 1;
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if target.as_os_str() == "anon_inode:[eventpoll]" {
            epolls += 1;
        }
    }
    count - epolls.min(1)
}

/// [`fd_count`] once it has stopped falling (for at most 2 s): the
/// descriptors a peer sent that this process refused are closed by
/// ferry's closer threads, a moment after the call that refused them.
pub fn settled_fd_count() -> usize {
    let start = std::time::Instant::now();
    let mut last = fd_count();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = fd_count();
        if now >= last || start.elapsed() > Duration::from_secs(2) {
            return now;
        }
        last = now;
    }
}

/// [`fd_count`] once it is back to `baseline` or below, or after 2 s:
/// for a check that refused descriptors were closed (ferry's closer
/// threads close them a moment after the call that refused them).
pub fn fd_count_back_to(baseline: usize) -> usize {
    let start = std::time::Instant::now();
    loop {
        let now = fd_count();
        if now <= baseline || start.elapsed() > Duration::from_secs(2) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Serializes the tests of one binary that must not share the machine with
/// each other (descriptor counts, latency measurements).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills this whole process, and the children it watches, if the test is
/// still running after a time limit; a hang then fails in seconds.
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

    /// Kills `child` too if the watchdog fires; kills it on drop unless it
    /// was waited for.
    pub fn watch(&self, child: Child) -> ChildGuard {
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(child.id());
        ChildGuard {
            child,
            reaped: false,
        }
    }
}

/// The watchdog's bite. Writes straight to the standard error descriptor:
/// libtest's capture would swallow `eprintln!` from a test's threads.
fn fire(what: &str, limit: Duration, pids: &Mutex<Vec<u32>>) -> ! {
    let _ = writeln!(
        std::io::stderr(),
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

/// A child process that is killed and reaped if the test ends (or panics)
/// without waiting for it.
pub struct ChildGuard {
    child: Child,
    reaped: bool,
}

impl ChildGuard {
    /// Sends `SIGKILL`.
    pub fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the child");
    }

    /// Waits for the child to end.
    pub fn wait(&mut self) -> ExitStatus {
        let status = self.child.wait().expect("wait for the child");
        self.reaped = true;
        status
    }

    /// Waits for the child and checks that it exited successfully (its test
    /// passed).
    pub fn wait_ok(mut self) {
        let status = self.wait();
        assert!(status.success(), "child failed: {status}");
    }

    /// The child's piped standard input.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.child.stdin.take().expect("child stdin was piped")
    }

    /// The child's piped standard output.
    pub fn take_stdout(&mut self) -> ChildStdout {
        self.child.stdout.take().expect("child stdout was piped")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// xorshift64*: a tiny deterministic generator, so a parent and its child
/// can derive the same message sizes and contents from one seed.
#[derive(Debug, Clone)]
pub struct XorShift(u64);

impl XorShift {
    /// A generator; any seed works (zero is remapped).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..=max`.
    pub fn upto(&mut self, max: usize) -> usize {
        (self.next_u64() % (max as u64 + 1)) as usize
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// An order-sensitive 64-bit checksum (FNV-1a over 8-byte words, seeded
/// with the length), fast enough for hundreds of megabytes in debug builds.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h = FNV_OFFSET ^ bytes.len() as u64;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word: [u8; 8] = word.try_into().expect("8-byte chunk");
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(FNV_PRIME);
    }
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    (h ^ u64::from_le_bytes(tail)).wrapping_mul(FNV_PRIME)
}

/// Folds one value into a running checksum.
pub fn mix(running: u64, value: u64) -> u64 {
    (running ^ value).wrapping_mul(FNV_PRIME).rotate_left(31)
}

/// A `u64` as a message.
pub fn u64_msg(value: u64) -> [u8; 8] {
    value.to_le_bytes()
}

/// A message that must be one `u64`.
pub fn msg_u64(bytes: &[u8]) -> u64 {
    u64::from_le_bytes(bytes.try_into().expect("an 8-byte message"))
}

/// This process's peak virtual memory size so far (`VmPeak` in
/// `/proc/self/status`), in bytes: how much address space it ever mapped.
pub fn vm_peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmPeak:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .expect("a VmPeak line in /proc/self/status");
    kib * 1024
}

/// CPU time the calling thread has used so far
/// (`clock_gettime(CLOCK_THREAD_CPUTIME_ID)`).
pub fn thread_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The system-wide monotonic clock in nanoseconds. Unlike `Instant`, its
/// readings compare between processes on one machine.
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl ChildGuard {
    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }
}
