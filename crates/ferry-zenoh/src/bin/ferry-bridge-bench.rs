//! `ferry-bridge-bench`: what leaving the machine costs. Between this
//! process and a child it starts, on loopback, in one run:
//!
//! - `zenoh`: raw Zenoh pub/sub (reliable, `CongestionControl::Block`), the
//!   child answering on a thread that receives from its subscriber, as the
//!   ferry server answers on its own thread;
//! - `ferry-bridge`: a ferry pipe through the two processes' bridges to a
//!   ferry server in the child (each process holds one bridge, on the same
//!   Zenoh sessions as the raw rows);
//! - `ferry-local`: the ferry pipe between the two processes.
//!
//! Round trips at 144 B (the median of each run's p50) and one-way
//! throughput at 1 MiB (messages sent back to back, until the child says
//! it has the last), each run of each row interleaved with the others'.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use ferry_zenoh::{Bridge, BridgeOptions};
use zenoh::Wait;
use zenoh::qos::CongestionControl;

/// Round trips and throughput over the bridge, against raw Zenoh and a
/// local ferry pipe, between two processes on loopback.
#[derive(Parser, Debug)]
#[command(name = "ferry-bridge-bench")]
struct Args {
    /// Fewer messages and runs, for a check in seconds.
    #[arg(long)]
    quick: bool,
    /// Runs of each row (interleaved); the medians are reported.
    #[arg(long)]
    repeat: Option<usize>,
    /// Internal: run as the child, listening on this port.
    #[arg(long, hide = true)]
    child: Option<u16>,
}

const PREFIX: &str = "ferry-bench/echo";
const PING: &str = "ferry-bench/raw/ping";
const PONG: &str = "ferry-bench/raw/pong";
const SMALL: usize = 144;
const LARGE: usize = 1 << 20;

/// The first byte of every message says what the child does with it.
const ECHO: u8 = 0;
const SWALLOW: u8 = 1;
const LAST: u8 = 2;

/// What the child answers to [`LAST`].
const DONE: &[u8] = b"done";

fn main() {
    let args = Args::parse();
    let result = match args.child {
        Some(port) => child(port),
        None => parent(&args),
    };
    if let Err(why) = result {
        eprintln!("ferry-bridge-bench: {why}");
        std::process::exit(1);
    }
}

type Result<T> = std::result::Result<T, String>;

fn fail(what: &str) -> impl Fn(&dyn std::fmt::Display) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// What the child does with `message`: its answer, if any.
fn answer(message: &[u8]) -> Option<&[u8]> {
    match message.first() {
        Some(&ECHO) => Some(message),
        Some(&LAST) => Some(DONE),
        _ => None,
    }
}

/// The child: a bridge listening on `port` that exports an echo server,
/// a raw Zenoh echo on the same session, and the local pipe's echo.
fn child(port: u16) -> Result<()> {
    let local = ferry::Pipe::from_parent().map_err(|e| fail("the parent's pipe")(&e))?;
    let bridge = Bridge::open(
        BridgeOptions::new()
            .listen(format!("tcp/127.0.0.1:{port}"))
            .log(|_| {}),
    )
    .map_err(|e| fail("the child's bridge")(&e))?;
    let name = format!("ferry-bridge-bench-{}", std::process::id());
    let server = ferry::Server::bind(name.as_str()).map_err(|e| fail("the echo server")(&e))?;
    std::thread::spawn(move || {
        while let Ok(connection) = server.accept() {
            std::thread::spawn(move || serve(&connection.pipe));
        }
    });
    let _export = bridge
        .export(name.as_str(), None, PREFIX)
        .map_err(|e| fail("exporting")(&e))?;
    let session = bridge.session();
    let pong = Arc::new(
        session
            .declare_publisher(PONG)
            .congestion_control(CongestionControl::Block)
            .wait()
            .map_err(|e| fail("the pong publisher")(&e))?,
    );
    // The raw echo answers on a thread of its own, as the ferry server
    // does (and as an application does with its work), not inside
    // Zenoh's callback.
    let ping = session
        .declare_subscriber(PING)
        .wait()
        .map_err(|e| fail("the ping subscriber")(&e))?;
    std::thread::spawn(move || {
        while let Ok(sample) = ping.recv() {
            let payload = sample.payload().to_bytes();
            if let Some(reply) = answer(&payload) {
                let _ = pong.put(reply.to_vec()).wait();
            }
        }
    });
    local.send(b"ready").map_err(|e| fail("ready")(&e))?;
    serve(&local);
    Ok(())
}

/// Answers every message on `pipe` until it hangs up.
fn serve(pipe: &ferry::Pipe) {
    while let Ok(message) = pipe.receiver().recv_shared() {
        if let Some(reply) = answer(&message)
            && pipe.send(reply).is_err()
        {
            return;
        }
    }
}

/// One way to reach the child's echo.
trait Path {
    fn send(&mut self, message: &[u8]) -> Result<()>;
    fn recv(&mut self) -> Result<Vec<u8>>;
}

struct FerryPath(ferry::Pipe);

impl Path for FerryPath {
    fn send(&mut self, message: &[u8]) -> Result<()> {
        self.0.send(message).map_err(|e| fail("send")(&e))
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        self.0
            .receiver()
            .recv_timeout(Duration::from_secs(30))
            .map_err(|e| fail("recv")(&e))
    }
}

struct ZenohPath {
    ping: zenoh::pubsub::Publisher<'static>,
    pong: zenoh::pubsub::Subscriber<zenoh::handlers::FifoChannelHandler<zenoh::sample::Sample>>,
}

impl Path for ZenohPath {
    fn send(&mut self, message: &[u8]) -> Result<()> {
        self.ping
            .put(message.to_vec())
            .wait()
            .map_err(|e| fail("put")(&e))
    }

    fn recv(&mut self) -> Result<Vec<u8>> {
        let sample = self
            .pong
            .recv_timeout(Duration::from_secs(30))
            .map_err(|e| fail("recv")(&e))?
            .ok_or("recv: timed out")?;
        Ok(sample.payload().to_bytes().into_owned())
    }
}

/// The p50 of `count` round trips of `SMALL` bytes, µs.
fn round_trips(path: &mut dyn Path, count: usize) -> Result<f64> {
    let mut message = vec![0u8; SMALL];
    message[0] = ECHO;
    for _ in 0..count / 10 {
        path.send(&message)?;
        path.recv()?;
    }
    let mut times = Vec::with_capacity(count);
    for i in 0..count {
        message[1..9].copy_from_slice(&(i as u64).to_le_bytes());
        let started = Instant::now();
        path.send(&message)?;
        let reply = path.recv()?;
        times.push(started.elapsed().as_secs_f64() * 1e6);
        if reply != message {
            return Err(format!("round trip {i}: the echo differs"));
        }
    }
    Ok(median(&mut times))
}

/// MiB/s of `count` messages of `LARGE` bytes sent one way, until the
/// child has the last.
fn throughput(path: &mut dyn Path, count: usize) -> Result<f64> {
    let mut message = vec![7u8; LARGE];
    message[0] = SWALLOW;
    let started = Instant::now();
    for i in 0..count {
        if i + 1 == count {
            message[0] = LAST;
        }
        path.send(&message)?;
    }
    if path.recv()? != DONE {
        return Err("the child's answer to the last message".into());
    }
    Ok(count as f64 * (LARGE as f64 / (1 << 20) as f64) / started.elapsed().as_secs_f64())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn parent(args: &Args) -> Result<()> {
    let repeat = args.repeat.unwrap_or(if args.quick { 3 } else { 7 });
    let (trips, sends) = if args.quick { (300, 30) } else { (3000, 300) };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| fail("a free port")(&e))?
        .port();
    let exe = std::env::current_exe().map_err(|e| fail("this program")(&e))?;
    let mut command = Command::new(exe);
    command.args(["--child", &port.to_string()]);
    let (mut kid, local) = ferry::spawn(command).map_err(|e| fail("starting the child")(&e))?;
    let ready = local
        .receiver()
        .recv_timeout(Duration::from_secs(30))
        .map_err(|e| fail("the child's ready")(&e))?;
    if ready != b"ready" {
        return Err("the child did not start".into());
    }
    let bridge = Bridge::open(
        BridgeOptions::new()
            .connect(format!("tcp/127.0.0.1:{port}"))
            .log(|_| {}),
    )
    .map_err(|e| fail("the bridge")(&e))?;
    let name = format!("ferry-bridge-bench-import-{}", std::process::id());
    let _import = bridge
        .import(PREFIX, name.as_str(), None)
        .map_err(|e| fail("importing")(&e))?;
    let session = bridge.session();
    let mut zenoh_path = ZenohPath {
        ping: session
            .declare_publisher(PING)
            .congestion_control(CongestionControl::Block)
            .wait()
            .map_err(|e| fail("the ping publisher")(&e))?,
        pong: session
            .declare_subscriber(PONG)
            .wait()
            .map_err(|e| fail("the pong subscriber")(&e))?,
    };
    let bridged = connect_bridged(&name)?;
    // A put with no subscriber known yet goes nowhere: probe until the
    // child's subscriber answers.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let probe = [ECHO, 4, 5, 6];
        Path::send(&mut zenoh_path, &probe)?;
        match zenoh_path.pong.recv_timeout(Duration::from_millis(500)) {
            Ok(Some(sample)) if *sample.payload().to_bytes() == probe => break,
            _ if Instant::now() > deadline => return Err("raw Zenoh never answered".into()),
            _ => {}
        }
    }
    while let Ok(Some(_)) = zenoh_path.pong.try_recv() {}
    let mut paths: Vec<(&str, Box<dyn Path>)> = vec![
        ("zenoh", Box::new(zenoh_path)),
        ("ferry-bridge", Box::new(FerryPath(bridged))),
        ("ferry-local", Box::new(FerryPath(local))),
    ];
    eprintln!(
        "ferry-bridge-bench: {repeat} runs of each row: {trips} round trips of {SMALL} B, {sends} messages of 1 MiB"
    );
    let mut rtt = vec![Vec::new(); paths.len()];
    let mut mib_s = vec![Vec::new(); paths.len()];
    for run in 0..repeat {
        for (i, (name, path)) in paths.iter_mut().enumerate() {
            let p50 = round_trips(path.as_mut(), trips).map_err(|e| format!("{name}: {e}"))?;
            let rate = throughput(path.as_mut(), sends).map_err(|e| format!("{name}: {e}"))?;
            eprintln!(
                "[run {}/{repeat}] {name}: round trip p50 {p50:.1} µs, {rate:.0} MiB/s",
                run + 1
            );
            rtt[i].push(p50);
            mib_s[i].push(rate);
        }
    }
    let rtt: Vec<f64> = rtt.iter_mut().map(|v| median(v)).collect();
    let mib_s: Vec<f64> = mib_s.iter_mut().map(|v| median(v)).collect();
    println!("transport      round trip {SMALL} B p50 µs  ×zenoh  throughput 1 MiB MiB/s  ×zenoh");
    for (i, (name, _)) in paths.iter().enumerate() {
        println!(
            "{name:<14} {:>24.1}  {:>6.2}  {:>22.0}  {:>6.2}",
            rtt[i],
            rtt[i] / rtt[0],
            mib_s[i],
            mib_s[i] / mib_s[0]
        );
    }
    println!(
        "Medians of {repeat} interleaved runs between this process and its child on 127.0.0.1 (TCP); ×zenoh is the row over raw Zenoh pub/sub's (round trip: below 1 is faster; throughput: above 1 is faster). Targets: ferry-bridge round trip ≤ 1.3× and throughput ≥ 0.8× zenoh."
    );
    drop(paths);
    let _ = kid.wait();
    Ok(())
}

/// A pipe through the bridges, once they found each other.
fn connect_bridged(name: &str) -> Result<ferry::Pipe> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pipe = ferry::connect(name).map_err(|e| fail("connecting to the import")(&e))?;
        let probe = [ECHO, 1, 2, 3];
        let answered = pipe.send(&probe).is_ok()
            && pipe
                .receiver()
                .recv_timeout(Duration::from_secs(5))
                .is_ok_and(|reply| reply == probe);
        if answered {
            return Ok(pipe);
        }
        if Instant::now() > deadline {
            return Err("the bridges never connected".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
