//! The default wait makes no system call but the futex (sleep and wake),
//! `sched_yield` and reading its own CPU, held to that by the kernel: two
//! processes make round trips through a pipe with [`Wait::Adaptive`] on
//! both ends, each from a thread under a seccomp filter that kills the
//! process on any other call (`clock_gettime` is allowed too: the vDSO may
//! fall back to it). Pinned both to one CPU, then split across two.
//!
//! The filter binds only the thread that installs it (no
//! `SECCOMP_FILTER_FLAG_TSYNC`): ferry's watcher thread, libtest and the
//! process's exit stay free. The round-trip thread warms up first (pages
//! mapped, lazy state made), and when done hands its outcome over through
//! a futex and parks; the process's main thread then exits it.
#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ferry::{Pipe, PipeOptions, Wait};
use ferry_testkit::{Watchdog, secs};

/// Round trips under the filter, per placement.
const ROUND_TRIPS: u32 = 20_000;
/// Round trips before the filter.
const WARM_UP: u32 = 1_000;
/// Bytes of each message.
const SIZE: usize = 144;
/// The exit code of the first child when its peer died of `SIGSYS`.
const PEER_SIGSYS: i32 = 3;

/// The test, which its children re-run in their roles.
const TEST: &str = "the_default_wait_calls_only_futex_sched_yield_and_getcpu";

const SIGSYS_MESSAGE: &str = "the default wait made a system call outside \
    futex/sched_yield/getcpu; rerun under strace -f to see which";

#[test]
fn the_default_wait_calls_only_futex_sched_yield_and_getcpu() {
    if let Some(role) = ferry_testkit::role() {
        return child(&role);
    }
    let cpus = allowed_cpus();
    let _serial = ferry_testkit::serial();
    let dog = Watchdog::start("wait_syscalls", secs(120));
    let mut placements = vec![("one CPU", cpus[0], cpus[0])];
    match cpus.get(1) {
        Some(&other) => placements.push(("two CPUs", cpus[0], other)),
        None => eprintln!(
            "wait_syscalls: only CPU {} may be used here; the two-CPU placement is skipped",
            cpus[0]
        ),
    }
    for (name, a, b) in placements {
        // The first child starts its peer itself: the pipe is theirs.
        let mut cmd = ferry_testkit::child_command(TEST, &format!("a:{a}:{b}"));
        let mut child = dog.watch(cmd.spawn().expect("spawn the first child"));
        let status = child.wait();
        if status.signal() == Some(libc::SIGSYS) {
            panic!("{name}, the first child: {SIGSYS_MESSAGE}");
        }
        if status.code() == Some(PEER_SIGSYS) {
            panic!("{name}, the second child: {SIGSYS_MESSAGE}");
        }
        assert!(status.success(), "{name}: the first child failed: {status}");
    }
}

/// The CPUs this process may run on, in order (at least one).
fn allowed_cpus() -> Vec<usize> {
    let set = rustix::thread::sched_getaffinity(None).expect("this process's CPUs");
    let cpus: Vec<usize> = (0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect();
    assert!(!cpus.is_empty(), "no CPU in this process's affinity");
    cpus
}

/// A child: `a:<cpu>:<cpu>` starts `b:<cpu>` and makes round trips with it
/// from the first CPU; `b` answers them from its own.
fn child(role: &str) {
    let parts: Vec<&str> = role.split(':').collect();
    let cpu = |i: usize| -> usize { parts[i].parse().expect("a CPU in the role") };
    match parts[0] {
        "a" => {
            let dog = Watchdog::start("child `a`", secs(90));
            let options = PipeOptions::new().wait(Wait::Adaptive);
            let (mut peer, pipe) =
                ferry_testkit::spawn_child(&dog, TEST, &format!("b:{}", cpu(2)), &options);
            let outcome = filtered(pipe, cpu(1), true);
            if outcome.is_err() {
                // The peer may be the one that died; else it waits for us.
                thread::sleep(Duration::from_millis(200));
                peer.kill();
            }
            let status: ExitStatus = peer.wait();
            if status.signal() == Some(libc::SIGSYS) {
                eprintln!("child `b`: {SIGSYS_MESSAGE}");
                std::process::exit(PEER_SIGSYS);
            }
            if let Err(e) = outcome {
                panic!("child `a`: {e}");
            }
            assert!(status.success(), "child `b` failed: {status}");
        }
        "b" => {
            let (_dog, pipe) = ferry_testkit::child_pipe("b", secs(90));
            // The parent's options reach this end; the default anyway.
            assert_eq!(pipe.receiver().wait(), Wait::Adaptive);
            assert_eq!(pipe.sender().wait(), Wait::Adaptive);
            if let Err(e) = filtered(pipe, cpu(1), false) {
                panic!("child `b`: {e}");
            }
        }
        other => panic!("unknown role {other}"),
    }
    // The round-trip thread is parked under its filter, holding the pipe:
    // end the process from here, which may make any call.
    std::process::exit(0);
}

/// Runs the round trips in a thread pinned to `cpu`, under the filter once
/// warmed up; `ask` makes the round trips, else answers them. Returns
/// their outcome once they are done (the thread stays, parked).
fn filtered(pipe: Pipe, cpu: usize, ask: bool) -> Result<(), String> {
    let outcome: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
    let (slot, waiter) = (Arc::clone(&outcome), thread::current());
    thread::Builder::new()
        .name("round trips".into())
        .spawn(move || {
            let result = round_trips(&pipe, cpu, ask);
            // A std mutex and an unpark: futex calls only.
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
            waiter.unpark();
            loop {
                thread::park();
            }
        })
        .expect("start the round-trip thread");
    loop {
        if let Some(result) = outcome.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return result;
        }
        thread::park_timeout(Duration::from_millis(100));
    }
}

/// Pins, warms up, installs the filter, then makes (or answers)
/// [`ROUND_TRIPS`] round trips; reports instead of panicking, since a
/// panic's message is written with a call the filter forbids.
fn round_trips(pipe: &Pipe, cpu: usize, ask: bool) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(|e| format!("pin to CPU {cpu}: {e}"))?;
    let mut message = vec![0u8; SIZE];
    let mut reply = Vec::with_capacity(SIZE);
    let mut one = |i: u32| -> Result<(), String> {
        message[..4].copy_from_slice(&i.to_le_bytes());
        if ask {
            pipe.send(&message).map_err(|e| format!("send {i}: {e}"))?;
            pipe.receiver()
                .recv_into(&mut reply)
                .map_err(|e| format!("reply {i}: {e}"))?;
        } else {
            pipe.receiver()
                .recv_into(&mut reply)
                .map_err(|e| format!("request {i}: {e}"))?;
            pipe.send(&reply).map_err(|e| format!("answer {i}: {e}"))?;
        }
        match reply[..] == message[..] {
            true => Ok(()),
            false => Err(format!("round trip {i}: a different message came back")),
        }
    };
    for i in 0..WARM_UP {
        one(i)?;
    }
    install_filter()?;
    for i in WARM_UP..WARM_UP + ROUND_TRIPS {
        one(i)?;
    }
    Ok(())
}

/// `AUDIT_ARCH_*` of this target (`linux/audit.h`).
#[cfg(target_arch = "x86_64")]
const ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const ARCH: u32 = 0xC000_00B7;

/// The calls the filtered thread may make.
const ALLOWED: &[libc::c_long] = &[
    libc::SYS_futex,
    libc::SYS_sched_yield,
    libc::SYS_getcpu,
    // The vDSO's fallback.
    libc::SYS_clock_gettime,
    // A thread's or a process's end, and a signal handler's return.
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_rt_sigreturn,
];

/// Installs, on this thread only, a seccomp filter that kills the process
/// on any call outside [`ALLOWED`] (or from another architecture).
#[allow(unsafe_code)]
fn install_filter() -> Result<(), String> {
    const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let stmt = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |k, jt, jf| libc::sock_filter {
        code: JEQ_K,
        jt,
        jf,
        k,
    };
    let kill = stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS);
    // `seccomp_data`: the call's number at offset 0, the architecture at 4.
    let mut program = vec![stmt(LD_W_ABS, 4), jump(ARCH, 1, 0), kill, stmt(LD_W_ABS, 0)];
    let n = ALLOWED.len();
    for (i, &call) in ALLOWED.iter().enumerate() {
        // On a match, skip the rest of the list and the kill, to the allow.
        let rest = (n - i - 1) as u8;
        program.push(jump(call as u32, rest + 1, 0));
    }
    program.push(kill);
    program.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
    let fprog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    // SAFETY: PR_SET_NO_NEW_PRIVS takes integer arguments only and changes
    // nothing of this program's memory.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "PR_SET_NO_NEW_PRIVS: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `fprog` points at `program`, a valid array of `len` BPF
    // instructions that outlives the call (the kernel copies it); flags 0
    // binds this thread only.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(format!(
            "seccomp(SET_MODE_FILTER): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}
