//! The `liveness` workload: what waiting costs when nothing happens, and
//! how soon a peer's death is seen, beside the OS's own blocking reads.
//! Idle wakeups: this process's voluntary context switches per second with
//! a thread asleep in `recv` on each of 1 or 100 pipes to a silent child,
//! against as many threads asleep in a Unix socket `read`. Death: a child
//! holding 8 pipes (8 threads asleep in `recv` here) and its standard output
//! (a plain `read` here, the floor: the kernel closes both in the same exit)
//! is killed; each waiter's time from the kill to `Disconnected` or EOF.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::process::{Child, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::error::{Context, Error};
use crate::server::Tally;

/// Pipes each death trial's child holds.
const DEATH_PIPES: usize = 8;
/// How long blocked threads settle before counting starts.
const SETTLE: Duration = Duration::from_millis(300);

/// Flags of the `liveness` workload.
#[derive(Debug, Args)]
pub struct LivenessArgs {
    /// Seconds over which idle wakeups are counted [default: 10, or 1
    /// with --quick].
    #[arg(long, value_name = "SECONDS")]
    window: Option<f64>,
    /// Death-detection trials [default: 1000, or 20 with --quick].
    #[arg(long)]
    trials: Option<usize>,
    /// Small counts, for a check in seconds.
    #[arg(long)]
    quick: bool,
    /// Also write the results to this file as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<std::path::PathBuf>,
}

/// One idle row: wakeups per second of this process.
#[derive(Debug, Serialize)]
struct IdleRow {
    transport: &'static str,
    pipes: usize,
    wakeups_per_s: f64,
}

/// The death-detection distribution of one kind of waiter, in µs.
#[derive(Debug, Serialize)]
struct DeathRow {
    waiter: &'static str,
    samples: usize,
    p50_us: f64,
    p99_us: f64,
    max_us: f64,
}

#[derive(Debug, Serialize)]
struct LivenessReport {
    idle: Vec<IdleRow>,
    death: Vec<DeathRow>,
}

/// Runs the workload and prints its two tables.
pub fn run(args: &LivenessArgs) -> Result<(), Error> {
    let window =
        Duration::from_secs_f64(args.window.unwrap_or(if args.quick { 1.0 } else { 10.0 }));
    let trials = args.trials.unwrap_or(if args.quick { 20 } else { 1000 });
    let mut idle = Vec::new();
    for pipes in [1, 100] {
        eprintln!(
            "liveness: {pipes} idle ferry pipes and {pipes} idle socket reads, {window:?} each"
        );
        idle.push(IdleRow {
            transport: "ferry",
            pipes,
            wakeups_per_s: idle_ferry(pipes, window)?,
        });
        idle.push(IdleRow {
            transport: "unix-stream",
            pipes,
            wakeups_per_s: idle_sockets(pipes, window)?,
        });
    }
    let death = death_rows(trials)?;
    let report = LivenessReport { idle, death };
    print(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).context("encoding the liveness report")?;
        std::fs::write(path, text).context(format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print(report: &LivenessReport) {
    println!("\nIdle wakeups of this whole process (threads asleep, nothing sent)\n");
    println!("{:<12} {:>6} {:>12}", "transport", "pipes", "wakeups/s");
    for r in &report.idle {
        println!(
            "{:<12} {:>6} {:>12.2}",
            r.transport, r.pipes, r.wakeups_per_s
        );
    }
    println!("\nPeer death seen after SIGKILL (µs from the kill)\n");
    println!(
        "{:<34} {:>8} {:>9} {:>9} {:>9}",
        "waiter", "samples", "p50", "p99", "max"
    );
    for r in &report.death {
        println!(
            "{:<34} {:>8} {:>9.0} {:>9.0} {:>9.0}",
            r.waiter, r.samples, r.p50_us, r.p99_us, r.max_us
        );
    }
}

/// Wakeups (voluntary context switches) per second of this whole process
/// over `window`, minus the measuring thread's own one sleep.
fn count_wakeups(window: Duration) -> Result<f64, Error> {
    thread::sleep(SETTLE);
    let before = Tally::of(std::process::id())?.voluntary;
    thread::sleep(window);
    let after = Tally::of(std::process::id())?.voluntary;
    let woke = after.saturating_sub(before).saturating_sub(1);
    Ok(woke as f64 / window.as_secs_f64())
}

/// The child of this workload: takes the pipe ends the parent sends, says
/// ready, and holds them until it is killed.
pub fn serve_child() -> Result<(), Error> {
    let main = ferry::Pipe::from_parent().context("taking the pipe from the parent")?;
    let mut held = Vec::new();
    loop {
        let msg = main.receiver().recv_with().context("receiving pipe ends")?;
        if msg.bytes == b"done" {
            break;
        }
        held.extend(msg.pipes.into_iter().map(ferry::Handle::from));
        held.extend(msg.senders.into_iter().map(ferry::Handle::from));
    }
    main.send(b"ready").context("saying ready")?;
    let _ = main.recv(); // until killed, or the parent goes
    Ok(())
}

/// The forwarder of the forwarded death trials: starts the holder (the
/// liveness child), says its pid, and forwards to it every sender the
/// parent sends, then the parent's "done"; says "ready" once the holder
/// has; stays until the parent goes (the holder's death is seen without
/// it all the same).
pub fn serve_forwarder() -> Result<(), Error> {
    let main = ferry::Pipe::from_parent().context("taking the pipe from the parent")?;
    let command = crate::child::rerun("liveness-child", &[])?;
    let (mut holder, down) = ferry::spawn(command).context("starting the holder")?;
    main.send(&holder.id().to_le_bytes())
        .context("saying the holder's pid")?;
    loop {
        let msg = main.receiver().recv_with().context("receiving senders")?;
        if msg.bytes == b"done" {
            break;
        }
        down.sender()
            .send_with(b"ends", msg.senders)
            .context("forwarding senders to the holder")?;
    }
    down.send(b"done")
        .context("telling the holder it has all")?;
    let ready = down.recv().context("waiting for the holder")?;
    main.send(&ready)
        .context("passing the holder's answer on")?;
    let _ = main.recv(); // until the parent goes
    let _ = holder.kill();
    let _ = holder.wait();
    Ok(())
}

/// A child holding the far ends of `pipes` fresh pipes; its standard
/// output is piped to this process.
fn spawn_holder(pipes: usize) -> Result<(Child, ferry::Pipe, Vec<ferry::Pipe>), Error> {
    let mut command = crate::child::rerun("liveness-child", &[])?;
    command.stdout(Stdio::piped());
    let (child, main) = ferry::spawn(command).context("starting the liveness child")?;
    let mut near = Vec::new();
    let mut far = Vec::new();
    for i in 0..pipes {
        let (a, b) = ferry::pipe().context("making a pipe")?;
        near.push(a);
        far.push(b);
        if far.len() == 16 || i + 1 == pipes {
            main.sender()
                .send_with(b"ends", std::mem::take(&mut far))
                .context("moving pipe ends to the child")?;
        }
    }
    main.send(b"done").context("telling the child it has all")?;
    let ready = main.recv().context("waiting for the child")?;
    if ready != b"ready" {
        return Err(Error::new(
            "the liveness child said something other than ready",
        ));
    }
    Ok((child, main, near))
}

fn idle_ferry(pipes: usize, window: Duration) -> Result<f64, Error> {
    let (mut child, _main, near) = spawn_holder(pipes)?;
    let waiters: Vec<_> = near
        .into_iter()
        .map(|pipe| thread::spawn(move || pipe.recv().is_err()))
        .collect();
    let rate = count_wakeups(window);
    child.kill().context("killing the liveness child")?;
    let _ = child.wait();
    for w in waiters {
        if !w.join().unwrap_or(false) {
            return Err(Error::new(
                "an idle ferry waiter got a message from a silent child",
            ));
        }
    }
    rate
}

fn idle_sockets(pipes: usize, window: Duration) -> Result<f64, Error> {
    let mut writers = Vec::new();
    let mut waiters = Vec::new();
    for _ in 0..pipes {
        let (mut reader, writer) = UnixStream::pair().context("making a socket pair")?;
        writers.push(writer);
        waiters.push(thread::spawn(move || reader.read(&mut [0u8; 64]).is_ok()));
    }
    let rate = count_wakeups(window);
    drop(writers); // each read ends with end of file
    for w in waiters {
        let _ = w.join();
    }
    rate
}

/// Runs `trials` death trials and summarizes each kind of waiter.
fn death_rows(trials: usize) -> Result<Vec<DeathRow>, Error> {
    let (mut ferry, mut floor, mut extra) = (Vec::new(), Vec::new(), Vec::new());
    for trial in 0..trials {
        if trial % 100 == 0 {
            eprintln!("liveness: death trial {trial} of {trials}");
        }
        let (seen, eof) = death_trial()?;
        floor.push(eof);
        for s in seen {
            ferry.push(s);
            extra.push(s.saturating_sub(eof));
        }
    }
    let mut forwarded = Vec::new();
    for trial in 0..trials {
        if trial % 100 == 0 {
            eprintln!("liveness: forwarded death trial {trial} of {trials}");
        }
        forwarded.extend(forwarded_death_trial()?);
    }
    Ok(vec![
        summarize("ferry recv (8 threads, one link)", ferry),
        summarize("pipe read (the floor)", floor),
        summarize("ferry minus the floor, same trial", extra),
        summarize("ferry recv, senders forwarded", forwarded),
    ])
}

/// One trial of a holder whose 8 senders came through a forwarder (its
/// parent): µs from the kill of the holder to each waiter's
/// `Disconnected` here, seen over the links the forwarder introduced.
fn forwarded_death_trial() -> Result<Vec<Duration>, Error> {
    let command = crate::child::rerun("liveness-forwarder", &[])?;
    let (mut forwarder, main) = ferry::spawn(command).context("starting the forwarder")?;
    let pid = main.recv().context("the holder's pid")?;
    let pid = pid
        .get(..4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        .ok_or_else(|| Error::new("the forwarder sent no pid"))?;
    let mut near = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..DEATH_PIPES {
        let (a, b) = ferry::pipe().context("making a pipe")?;
        let (tx, _rx) = a.split();
        senders.push(tx);
        near.push(b);
    }
    main.sender()
        .send_with(b"senders", senders)
        .context("sending the senders to the forwarder")?;
    main.send(b"done")
        .context("telling the forwarder it has all")?;
    if main.recv().context("waiting for the holder")? != b"ready" {
        return Err(Error::new("the holder said something other than ready"));
    }
    let (seen, _) = time_disconnects(near, || {
        rustix::process::kill_process(pid, rustix::process::Signal::KILL)
            .context("killing the holder")
    })?;
    drop(main);
    let _ = forwarder.wait();
    Ok(seen)
}

/// One trial: µs from the kill to each ferry waiter's `Disconnected`, and
/// to the end of file on the child's standard output.
fn death_trial() -> Result<(Vec<Duration>, Duration), Error> {
    let (mut child, _main, near) = spawn_holder(DEATH_PIPES)?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::new("the child's stdout"))?;
    let floor = thread::spawn(move || {
        let _ = stdout.read(&mut [0u8; 16]);
        Instant::now()
    });
    let (seen, killed) =
        time_disconnects(near, || child.kill().context("killing the liveness child"))?;
    let eof = floor
        .join()
        .map_err(|_| Error::new("the floor's thread panicked"))?;
    let _ = child.wait();
    Ok((seen, eof.saturating_duration_since(killed)))
}

/// A thread asleep in `recv` on each of `near`; then `kill`, and the time
/// from it to each one's `Disconnected`, with when the kill was.
fn time_disconnects(
    near: Vec<ferry::Pipe>,
    kill: impl FnOnce() -> Result<(), Error>,
) -> Result<(Vec<Duration>, Instant), Error> {
    let waiters: Vec<_> = near
        .into_iter()
        .map(|pipe| {
            thread::spawn(move || {
                let gone = matches!(pipe.recv(), Err(ferry::RecvError::Disconnected));
                (gone, Instant::now())
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    let killed = Instant::now();
    kill()?;
    let mut seen = Vec::new();
    for w in waiters {
        let (gone, at) = w
            .join()
            .map_err(|_| Error::new("a waiter thread panicked"))?;
        if !gone {
            return Err(Error::new("a ferry waiter ended without Disconnected"));
        }
        seen.push(at.saturating_duration_since(killed));
    }
    Ok((seen, killed))
}

fn summarize(waiter: &'static str, mut samples: Vec<Duration>) -> DeathRow {
    samples.sort();
    let at = |q: f64| match samples.len() {
        0 => 0.0,
        n => samples[((n - 1) as f64 * q).round() as usize].as_secs_f64() * 1e6,
    };
    DeathRow {
        waiter,
        samples: samples.len(),
        p50_us: at(0.5),
        p99_us: at(0.99),
        max_us: at(1.0),
    }
}
