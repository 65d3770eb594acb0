//! Two `ferry-bridge` processes on 127.0.0.1 (TCP, multicast scouting
//! off), a ferry server behind one and clients in front of the other: the
//! bridge's promises across real processes.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use ferry_testkit::{ChildGuard, Watchdog, this_test};

/// Tests here start bridges on ports of their own, but each moves a lot of
/// data: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs the calling test alone, under a watchdog: a hang fails it in
/// `seconds`, and the watchdog kills its bridge processes too.
fn guarded(what: &str, seconds: u64) -> (MutexGuard<'static, ()>, Arc<Watchdog>) {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dog = Watchdog::start(what, Duration::from_secs(seconds));
    (serial, Arc::new(dog))
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `ferry-bridge`'s arguments, from (flag, value) pairs.
fn args(pairs: &[(&str, String)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [(*flag).to_owned(), value.clone()])
        .collect()
}

/// Waits (20 s at most) for `pipe` to say `Disconnected`, and nothing
/// else.
fn assert_disconnected(pipe: &ferry::Pipe, what: &str) {
    let err = pipe
        .receiver()
        .recv_timeout(Duration::from_secs(20))
        .unwrap_err();
    assert!(err.is_disconnected(), "{what}: {err:?}");
}

/// A key prefix of this test's own (`-` is not in a key's chunks here).
fn test_prefix(what: &str) -> String {
    format!("test/{}", unique(what).replace('-', "_"))
}

/// A bridge in this process, listening on 127.0.0.1:`port`, quiet.
fn library_bridge(port: u16) -> ferry_zenoh::Bridge {
    ferry_zenoh::Bridge::open(
        ferry_zenoh::BridgeOptions::new()
            .listen(format!("tcp/127.0.0.1:{port}"))
            .log(|_| {}),
    )
    .unwrap()
}

fn unique(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "ferry-zenoh-test-{what}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A `ferry-bridge` process, killed when dropped (or by the watchdog).
struct BridgeProcess {
    child: ChildGuard,
}

impl BridgeProcess {
    fn start(dog: &Watchdog, args: &[String]) -> Self {
        Self::start_in(dog, None, 1000, args)
    }

    /// A bridge with a lease of `lease_ms`, in the network namespace
    /// `netns` if given.
    fn start_in(dog: &Watchdog, netns: Option<&str>, lease_ms: u64, args: &[String]) -> Self {
        let bridge = env!("CARGO_BIN_EXE_ferry-bridge");
        let mut command = match netns {
            // `ip netns exec` enters the namespace and becomes the bridge
            // (same process: the watchdog's kill reaches it).
            Some(netns) => {
                let mut ip = Command::new("ip");
                ip.args(["netns", "exec", netns, bridge]);
                ip
            }
            None => Command::new(bridge),
        };
        let child = command
            .args(args)
            .args(["--lease-ms", &lease_ms.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("starting ferry-bridge");
        let mut child = dog.watch(child);
        let mut line = String::new();
        BufReader::new(child.child_mut().stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "ferry-bridge did not start");
        Self { child }
    }

    fn kill(&mut self) {
        self.child.kill();
        self.child.wait();
    }

    /// Resident memory, KiB.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }
}

/// An exporting bridge for `server` and an importing one that offers it
/// here as `local`; beside it, each carries a probe (an echo server in this
/// process) to see that the two found each other.
struct Pair {
    dog: Arc<Watchdog>,
    exporter: BridgeProcess,
    importer: BridgeProcess,
    port: u16,
    prefix: String,
    server: String,
    local: String,
    probe: String,
}

impl Pair {
    fn start(dog: &Arc<Watchdog>, server: &str) -> Self {
        let port = free_port();
        let prefix = test_prefix("svc");
        let local = unique("imported");
        let probe = echo_server();
        let mut pair = Self {
            exporter: Self::exporter(dog, port, &prefix, server, &probe),
            importer: Self::importer(dog, port, &prefix, &local),
            dog: Arc::clone(dog),
            port,
            prefix,
            server: server.to_owned(),
            local,
            probe,
        };
        pair.wait_connected();
        let _ = &mut pair;
        pair
    }

    fn exporter(
        dog: &Watchdog,
        port: u16,
        prefix: &str,
        server: &str,
        probe: &str,
    ) -> BridgeProcess {
        BridgeProcess::start(
            dog,
            &args(&[
                ("--listen", format!("tcp/127.0.0.1:{port}")),
                ("--export", format!("{prefix}={server}")),
                ("--export", format!("{prefix}/probe={probe}")),
            ]),
        )
    }

    fn importer(dog: &Watchdog, port: u16, prefix: &str, local: &str) -> BridgeProcess {
        BridgeProcess::start(
            dog,
            &args(&[
                ("--connect", format!("tcp/127.0.0.1:{port}")),
                ("--import", format!("{prefix}={local}")),
                ("--import", format!("{prefix}/probe={local}-probe")),
            ]),
        )
    }

    /// Restarts the exporting bridge (after a kill).
    fn restart_exporter(&mut self) {
        self.exporter = Self::exporter(
            &self.dog,
            self.port,
            &self.prefix,
            &self.server,
            &self.probe,
        );
        self.wait_connected();
    }

    /// Restarts the importing bridge (after a kill).
    fn restart_importer(&mut self) {
        self.importer = Self::importer(&self.dog, self.port, &self.prefix, &self.local);
        self.wait_connected();
    }

    /// Waits until a pipe through the probe opens end to end (a pipe the
    /// far bridge cannot open yet is disconnected).
    fn wait_connected(&self) {
        let probe = format!("{}-probe", self.local);
        wait_echoes(&probe.as_str().into(), Duration::from_secs(30));
    }
}

/// A ferry server in this process that echoes every message of every
/// client, on a thread each.
fn echo_server() -> String {
    let name = unique("echo");
    echo_at(name.as_str().into());
    name
}

/// [`echo_server`] at `address`.
fn echo_at(address: ferry::Address) {
    let server = ferry::Server::bind(address).unwrap();
    thread::spawn(move || {
        while let Ok(connection) = server.accept() {
            thread::spawn(move || {
                let pipe = connection.pipe;
                while let Ok(message) = pipe.receiver().recv_shared() {
                    if pipe.send(&message).is_err() {
                        break;
                    }
                }
            });
        }
    });
}

/// Message `seq`'s bytes: its length from `len`, its bytes from its
/// number, so any loss, reorder or corruption shows.
fn message(seq: u64, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    let mut x = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    if len >= 8 {
        bytes[..8].copy_from_slice(&seq.to_le_bytes());
    }
    bytes
}

/// Sizes from 0 to 8 MiB: mostly small, as traffic is, with every
/// power of two and the extremes.
fn size_of(seq: u64, rng: &mut u64) -> usize {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    match (seq, *rng % 1000) {
        (0, _) => 0,
        (1, _) => 8 << 20,
        (s, _) if s < 26 => 1 << (s - 2),
        (_, 0..=899) => (*rng >> 20) as usize % 1025,
        (_, 900..=994) => (*rng >> 20) as usize % (64 << 10),
        _ => (*rng >> 20) as usize % ((8 << 20) + 1),
    }
}

/// Sends `total` messages of sizes `size` on `pipe` (from a thread of
/// its own) to an echo, and checks each one that comes back: its length,
/// its bytes, its place. The pipe's halves come back, and the bytes sent.
fn echo_in_order(
    pipe: ferry::Pipe,
    total: u64,
    size: fn(u64, &mut u64) -> usize,
) -> (ferry::Sender, ferry::Receiver, u64) {
    const SEED: u64 = 0x2545_F491_4F6C_DD1D;
    let (tx, rx) = pipe.split();
    let started = Instant::now();
    let sender = thread::spawn(move || {
        let (mut rng, mut bytes) = (SEED, 0);
        for seq in 0..total {
            let len = size(seq, &mut rng);
            tx.send(&message(seq, len)).unwrap();
            bytes += len as u64;
        }
        (tx, bytes)
    });
    let mut rng = SEED;
    for seq in 0..total {
        let len = size(seq, &mut rng);
        let got = rx.recv_shared().unwrap();
        assert_eq!(got.len(), len, "message {seq}'s length");
        assert!(*got == *message(seq, len), "message {seq}'s bytes");
        if seq > 0 && seq % 20_000 == 0 {
            eprintln!(
                "{seq} of {total} messages back after {:?}",
                started.elapsed()
            );
        }
    }
    let (tx, bytes) = sender.join().unwrap();
    (tx, rx, bytes)
}

fn count(default: u64, var: &str) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn messages_of_random_sizes_round_trip_in_order_with_every_checksum_right() {
    let (_serial, dog) = guarded(this_test!(), 180);
    let pair = Pair::start(&dog, &echo_server());
    let total = count(100_000, "FERRY_BRIDGE_MESSAGES");
    let pipe = ferry::connect(pair.local.as_str()).unwrap();
    let started = Instant::now();
    let (_, _, bytes) = echo_in_order(pipe, total, size_of);
    eprintln!(
        "{total} messages ({:.1} MiB each way) back in order in {:?}",
        bytes as f64 / (1 << 20) as f64,
        started.elapsed()
    );
    drop(pair);
}

#[test]
fn a_slow_consumer_slows_the_sender_and_nothing_is_dropped_or_held() {
    let (_serial, dog) = guarded(this_test!(), 180);
    let total = count(1_000_000, "FERRY_BRIDGE_SLOW_MESSAGES");
    // A one-way consumer that reads slowly: a pause every 50,000 messages.
    let name = unique("slow");
    let server = ferry::Server::bind(name.as_str()).unwrap();
    let received = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&received);
    let consumer = thread::spawn(move || {
        let connection = server.accept().unwrap();
        let mut buf = Vec::new();
        for seq in 0..total {
            connection.pipe.receiver().recv_into(&mut buf).unwrap();
            assert!(buf == message(seq, 64), "message {seq}");
            seen.store(seq + 1, Ordering::Relaxed);
            if seq % 50_000 == 0 {
                thread::sleep(Duration::from_millis(300));
            }
        }
        connection.pipe
    });
    let pair = Pair::start(&dog, &name);
    let pipe = ferry::connect(pair.local.as_str()).unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&sent);
    let sender = thread::spawn(move || {
        for seq in 0..total {
            pipe.send(&message(seq, 64)).unwrap();
            counted.store(seq + 1, Ordering::Relaxed);
        }
        pipe
    });
    // Sample how far the sender runs ahead, and the bridges' memory.
    let started = Instant::now();
    let mut ahead = 0;
    let mut rss = Vec::new();
    while !sender.is_finished() {
        thread::sleep(Duration::from_millis(50));
        ahead = ahead.max(sent.load(Ordering::Relaxed) - received.load(Ordering::Relaxed));
        rss.push(pair.exporter.rss_kib() + pair.importer.rss_kib());
    }
    let _pipe = sender.join().unwrap();
    let _consumer_pipe = consumer.join().unwrap();
    assert_eq!(received.load(Ordering::Relaxed), total);
    let first = rss[rss.len() / 10];
    let peak = *rss.iter().max().unwrap();
    eprintln!(
        "{total} messages in {:?}; the sender ran at most {ahead} messages ahead; the two bridges' RSS {first} KiB at a tenth of the run, {peak} KiB at most",
        started.elapsed()
    );
    // Ahead by at most what the two local rings (256 KiB each by default,
    // a 64-byte message taking more than 64) and the exporting bridge's
    // window (256 messages, counting those on the wire) hold, and the few
    // in hand.
    let bound = 2 * (256 << 10) / 64 + 256 + 16;
    assert!(ahead <= bound, "ahead by {ahead} (bound {bound})");
    assert!(
        peak <= first + 16 * 1024,
        "the bridges grew from {first} to {peak} KiB"
    );
}

#[test]
fn a_killed_bridge_disconnects_both_sides_and_a_restarted_one_reconnects() {
    let (_serial, dog) = guarded(this_test!(), 120);
    let served = Arc::new(Mutex::new(Vec::new()));
    let name = unique("tally");
    let server = ferry::Server::bind(name.as_str()).unwrap();
    let outcomes = Arc::clone(&served);
    // Echoes each message, and records how each connection ended.
    thread::spawn(move || {
        while let Ok(connection) = server.accept() {
            let outcomes = Arc::clone(&outcomes);
            thread::spawn(move || {
                let pipe = connection.pipe;
                let mut echoed = 0u64;
                let end = loop {
                    match pipe.recv() {
                        Ok(m) if m == b"hello?" => {
                            let _ = pipe.send(&m);
                        }
                        Ok(m) => {
                            assert_eq!(m, message(echoed, 100), "the server got a gap");
                            echoed += 1;
                            if pipe.send(&m).is_err() {
                                break "send";
                            }
                        }
                        Err(e) => {
                            break if e.is_disconnected() {
                                "disconnected"
                            } else {
                                "error"
                            };
                        }
                    }
                };
                outcomes.lock().unwrap().push((end, echoed, Instant::now()));
            });
        }
    });
    let mut pair = Pair::start(&dog, &name);
    for victim in ["exporter", "importer"] {
        let pipe = ferry::connect(pair.local.as_str()).unwrap();
        for seq in 0..1000 {
            pipe.send(&message(seq, 100)).unwrap();
            assert_eq!(pipe.recv().unwrap(), message(seq, 100));
        }
        // Keep some in flight, then kill.
        for seq in 1000..1010 {
            pipe.send(&message(seq, 100)).unwrap();
        }
        let killed = Instant::now();
        match victim {
            "exporter" => pair.exporter.kill(),
            _ => pair.importer.kill(),
        }
        // The client receives an in-order prefix, then Disconnected.
        let mut next = 1000;
        loop {
            match pipe.receiver().recv_timeout(Duration::from_secs(10)) {
                Ok(m) => {
                    assert_eq!(m, message(next, 100), "after the kill");
                    next += 1;
                }
                Err(e) => {
                    assert!(e.is_disconnected(), "{victim}: {e:?}");
                    break;
                }
            }
        }
        let client_saw = killed.elapsed();
        // The server's side of that pipe ends too.
        let deadline = Instant::now() + Duration::from_secs(10);
        let server_saw = loop {
            if let Some(&(end, echoed, at)) = served.lock().unwrap().iter().find(|o| o.1 >= 1000) {
                assert_eq!(end, "disconnected");
                assert!(
                    echoed >= next,
                    "the server echoed {echoed}, the client got {next}"
                );
                break at - killed;
            }
            assert!(
                Instant::now() < deadline,
                "{victim}: the server's side never ended"
            );
            thread::sleep(Duration::from_millis(20));
        };
        served.lock().unwrap().clear();
        eprintln!(
            "killed the {victim}: the client saw Disconnected after {client_saw:?}, the server after {server_saw:?}"
        );
        assert!(client_saw < Duration::from_secs(5) && server_saw < Duration::from_secs(5));
        match victim {
            "exporter" => pair.restart_exporter(),
            _ => pair.restart_importer(),
        }
        let again = ferry::connect(pair.local.as_str()).unwrap();
        again.send(&message(0, 100)).unwrap();
        assert_eq!(again.recv().unwrap(), message(0, 100));
    }
}

#[test]
fn a_bridge_that_goes_silent_is_taken_for_dead_after_the_lease() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let pair = Pair::start(&dog, &echo_server());
    let pipe = ferry::connect(pair.local.as_str()).unwrap();
    pipe.send(b"before").unwrap();
    assert_eq!(pipe.recv().unwrap(), b"before");
    // Frozen, the exporting bridge keeps its TCP connection open but sends
    // nothing, as across a network that stopped carrying packets: only the
    // lease (1 s here) can tell.
    let pid = pair.exporter.child.id().to_string();
    let signal = |name: &str| {
        let status = Command::new("kill").args([name, &pid]).status().unwrap();
        assert!(status.success(), "kill {name}");
    };
    signal("-STOP");
    let frozen = Instant::now();
    pipe.send(b"into the silence").unwrap();
    let err = pipe
        .receiver()
        .recv_timeout(Duration::from_secs(15))
        .unwrap_err();
    let seen = frozen.elapsed();
    signal("-CONT");
    assert!(err.is_disconnected(), "{err:?}");
    eprintln!("a frozen bridge: the client saw Disconnected after {seen:?} (lease 1 s)");
    assert!(
        seen >= Duration::from_millis(500) && seen < Duration::from_secs(5),
        "Disconnected after {seen:?}"
    );
    // Thawed, the bridges meet again and new pipes work.
    pair.wait_connected();
    let again = ferry::connect(pair.local.as_str()).unwrap();
    again.send(b"after").unwrap();
    assert_eq!(again.recv().unwrap(), b"after");
}

#[test]
fn a_descriptor_is_refused_and_handed_back_and_the_pipe_goes_on() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let pair = Pair::start(&dog, &echo_server());
    let pipe = ferry::connect(pair.local.as_str()).unwrap();
    // The first message: the bridge's end took bytes only before `connect`
    // returned.
    let file = std::fs::File::open("/dev/null").unwrap();
    let fd = std::os::fd::OwnedFd::from(file);
    let err = pipe
        .sender()
        .send_with(b"with a descriptor", vec![ferry::Handle::Fd(fd)])
        .unwrap_err();
    assert!(
        matches!(err.error, ferry::SendError::NotTransferable(_)),
        "{err:?}"
    );
    assert_eq!(err.handles.len(), 1, "the descriptor comes back");
    let (a, _b) = ferry::pipe().unwrap();
    let err = pipe
        .sender()
        .send_with(b"with an end", vec![a])
        .unwrap_err();
    assert!(
        matches!(err.error, ferry::SendError::NotTransferable(_)),
        "{err:?}"
    );
    assert!(matches!(err.handles[0], ferry::Handle::Pipe(_)));
    pipe.send(b"after").unwrap();
    assert_eq!(pipe.recv().unwrap(), b"after");
}

/// The server behind the exporting bridge is refused too, on its first
/// message: the bridge's end of its pipe took bytes only before the
/// server was told of it.
#[test]
fn a_server_that_sends_a_descriptor_first_is_refused_and_handed_it_back() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let name = unique("fd-first");
    let server = ferry::Server::bind(name.as_str()).unwrap();
    let (told, outcomes) = std::sync::mpsc::channel();
    thread::spawn(move || {
        while let Ok(connection) = server.accept() {
            let pipe = connection.pipe;
            let fd = std::os::fd::OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
            let outcome = match pipe
                .sender()
                .send_with(b"a descriptor", vec![ferry::Handle::Fd(fd)])
            {
                Ok(()) => "sent".to_owned(),
                Err(e) if matches!(e.error, ferry::SendError::NotTransferable(_)) => {
                    format!("refused, {} handed back", e.handles.len())
                }
                Err(e) => format!("failed: {e}"),
            };
            let _ = told.send(outcome);
            let _ = pipe.send(b"bytes go on");
        }
    });
    let pair = Pair::start(&dog, &name);
    let pipe = ferry::connect(pair.local.as_str()).unwrap();
    assert_eq!(
        outcomes.recv_timeout(Duration::from_secs(20)).unwrap(),
        "refused, 1 handed back"
    );
    assert_eq!(pipe.recv().unwrap(), b"bytes go on");
}

#[test]
fn a_prefix_nobody_exports_disconnects_the_client() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let port = free_port();
    let local = unique("nobody");
    let _importer = BridgeProcess::start(
        &dog,
        &args(&[
            ("--listen", format!("tcp/127.0.0.1:{port}")),
            (
                "--import",
                format!("test/nobody/{}={local}", std::process::id()),
            ),
        ]),
    );
    let pipe = ferry::connect(local.as_str()).unwrap();
    let started = Instant::now();
    let err = pipe
        .receiver()
        .recv_timeout(Duration::from_secs(20))
        .unwrap_err();
    assert!(err.is_disconnected(), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

/// Two network namespaces joined by a veth pair, made for one test and
/// removed when dropped, with loss on both ends set by a classic BPF
/// program on each end's ingress (`tc ... bpf da`: drop when a random
/// number falls under a threshold; on egress a drop is the sender's own,
/// and its TCP just sends again). The kernels this runs on lack `netem`;
/// this needs only `clsact` and `cls_bpf`.
struct Namespaces {
    names: [String; 2],
    ends: [String; 2],
}

/// The exporting bridge's address, inside the first namespace.
const NETNS_ADDRESSES: [&str; 2] = ["10.213.0.1", "10.213.0.2"];

impl Namespaces {
    /// `Err` (and why) where this machine cannot: not root, no `ip`, or a
    /// kernel without `clsact` or `cls_bpf` (what was made is removed).
    fn make() -> Result<Self, String> {
        let uid = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Uid:"))
                    .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_owned())
            })
            .unwrap_or_default();
        if uid != "0" {
            return Err(format!("not root (effective uid {uid})"));
        }
        if Command::new("ip").arg("-V").output().is_err() {
            return Err("no `ip` command".into());
        }
        let tag = std::process::id() % 100_000;
        let made = Self {
            names: [
                format!("ferry-zenoh-{tag}-a"),
                format!("ferry-zenoh-{tag}-b"),
            ],
            ends: [format!("fz{tag}a"), format!("fz{tag}b")],
        };
        // Left by a run that was killed with this process id, if any.
        for name in &made.names {
            let _ = Command::new("ip").args(["netns", "delete", name]).output();
        }
        let [a, b] = &made.names;
        let [va, vb] = &made.ends;
        made.try_run("ip", &["netns", "add", a])?;
        made.try_run("ip", &["netns", "add", b])?;
        made.try_run(
            "ip",
            &[
                "link", "add", va, "netns", a, "type", "veth", "peer", "name", vb, "netns", b,
            ],
        )?;
        for ((ns, end), address) in made.names.iter().zip(&made.ends).zip(NETNS_ADDRESSES) {
            let address = format!("{address}/24");
            made.try_run("ip", &["-n", ns, "addr", "add", &address, "dev", end])?;
            made.try_run("ip", &["-n", ns, "link", "set", end, "up"])?;
            made.try_run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            made.try_run("tc", &["-n", ns, "qdisc", "add", "dev", end, "clsact"])?;
        }
        // A kernel without `cls_bpf` says so here.
        made.set_loss(0)?;
        Ok(made)
    }

    fn try_run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| format!("{program}: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{program} {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// [`Namespaces::set_loss`], which worked once already.
    fn loss(&self, percent: u64) {
        self.set_loss(percent).unwrap();
    }

    /// Drops `percent` of the packets arriving at each end (100: none
    /// pass).
    fn set_loss(&self, percent: u64) -> Result<(), String> {
        // Classic BPF, in tc's `bytecode` form: A = random (the ancillary
        // load at SKF_AD_OFF + SKF_AD_RANDOM); if A >= threshold pass
        // (TC_ACT_OK, 0) else drop (TC_ACT_SHOT, 2).
        let program = if percent >= 100 {
            "1,6 0 0 2".to_owned()
        } else {
            let threshold = (u64::from(u32::MAX) + 1) * percent / 100;
            format!("4,32 0 0 4294963256,53 0 1 {threshold},6 0 0 0,6 0 0 2")
        };
        for (ns, end) in self.names.iter().zip(&self.ends) {
            self.try_run(
                "tc",
                &[
                    "-n", ns, "filter", "replace", "dev", end, "ingress", "pref", "1", "handle",
                    "1", "bpf", "da", "bytecode", &program,
                ],
            )?;
        }
        Ok(())
    }
}

impl Namespaces {
    /// TCP segments retransmitted in both namespaces so far: loss that
    /// happened, and was repaired.
    fn retransmits(&self) -> u64 {
        self.names
            .iter()
            .map(|ns| {
                let out = Command::new("ip")
                    .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout).into_owned();
                let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
                let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
                let at = names
                    .split_whitespace()
                    .position(|n| n == "RetransSegs")
                    .unwrap();
                values
                    .split_whitespace()
                    .nth(at)
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            })
            .sum()
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the veth, and so both.
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "delete", name]).status();
        }
    }
}

/// A directory of this test's socket files, removed when dropped.
struct SocketDir(std::path::PathBuf);

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits until a pipe through `local` echoes.
fn wait_echoes(local: &ferry::Address, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let answer = ferry::connect(local.clone()).map(|pipe| {
            pipe.send(b"hello?")
                .map(|()| pipe.receiver().recv_timeout(Duration::from_secs(3)))
        });
        match answer {
            Ok(Ok(Ok(reply))) if reply == b"hello?" => return,
            other => assert!(
                Instant::now() < deadline,
                "no echo through the bridges: {other:?}"
            ),
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The bridges in two network namespaces joined by a veth pair that loses
/// 5% of the packets each way: every message comes back in order with
/// every byte right (TCP under Zenoh repairs the loss). Then the link
/// drops everything: the pipe breaks cleanly, `Disconnected` within the
/// lease and a margin, after an in-order prefix. Healed, the bridges meet
/// again and a new pipe works.
#[test]
fn over_a_lossy_link_between_namespaces_loss_is_repaired_and_a_partition_breaks_cleanly() {
    let (_serial, dog) = guarded(this_test!(), 240);
    let namespaces = match Namespaces::make() {
        Ok(namespaces) => namespaces,
        Err(why) => {
            eprintln!(
                "SKIPPED: this needs root, iproute2 and a kernel with clsact and cls_bpf: {why}"
            );
            return;
        }
    };
    // Socket files: an abstract name lives in one network namespace, a
    // file is seen from all.
    let dir = SocketDir(std::env::temp_dir().join(unique("netns")));
    std::fs::create_dir(&dir.0).unwrap();
    let (served, local) = (dir.0.join("echo.sock"), dir.0.join("imported.sock"));
    echo_at(ferry::Address::file(&served));
    let prefix = test_prefix("netns");
    // A lease of 3 s: TCP's retransmission backs off from 200 ms, and a
    // 5% loss must not read as a dead link.
    let lease_ms = 3000;
    namespaces.loss(5);
    let _exporter = BridgeProcess::start_in(
        &dog,
        Some(&namespaces.names[0]),
        lease_ms,
        &args(&[
            ("--listen", format!("tcp/{}:7447", NETNS_ADDRESSES[0])),
            ("--export", format!("{prefix}={}", served.display())),
        ]),
    );
    let _importer = BridgeProcess::start_in(
        &dog,
        Some(&namespaces.names[1]),
        lease_ms,
        &args(&[
            ("--connect", format!("tcp/{}:7447", NETNS_ADDRESSES[0])),
            ("--import", format!("{prefix}={}", local.display())),
        ]),
    );
    let local = ferry::Address::file(&local);
    wait_echoes(&local, Duration::from_secs(60));

    let total = count(20_000, "FERRY_BRIDGE_NETNS_MESSAGES");
    let pipe = ferry::connect(local.clone()).unwrap();
    let started = Instant::now();
    // Sizes to 64 KiB: a lossy link's TCP is slow with large ones.
    let (tx, rx, bytes) = echo_in_order(pipe, total, |seq, rng| size_of(seq, rng) % (64 << 10));
    let repaired = namespaces.retransmits();
    eprintln!(
        "5% loss each way: {total} messages ({:.1} MiB each way) back in order in {:?}; TCP retransmitted {repaired} segments",
        bytes as f64 / (1 << 20) as f64,
        started.elapsed()
    );
    assert!(
        repaired > 0,
        "the link lost nothing: the loss is not in place"
    );

    // A partition: nothing passes. The client sees an in-order prefix of
    // what is in flight, then Disconnected.
    namespaces.loss(100);
    let cut = Instant::now();
    for seq in 0..10 {
        tx.send(&message(seq, 100)).unwrap();
    }
    let mut next = 0;
    let err = loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(m) => {
                assert_eq!(m, message(next, 100), "across the partition");
                next += 1;
            }
            Err(e) => break e,
        }
    };
    let seen = cut.elapsed();
    assert!(err.is_disconnected(), "{err:?}");
    eprintln!(
        "a partition: {next} of 10 messages in flight came back, then Disconnected after {seen:?} (lease {lease_ms} ms)"
    );
    assert!(
        seen < Duration::from_millis(lease_ms + 3000),
        "Disconnected after {seen:?}"
    );

    // Healed: the bridges meet again, and a new pipe works.
    namespaces.loss(0);
    let healed = Instant::now();
    wait_echoes(&local, Duration::from_secs(60));
    eprintln!("healed: a new pipe echoes after {:?}", healed.elapsed());
    drop(namespaces);
}

/// Single ends exported by a bridge in this process (the library), each
/// reached through a `ferry-bridge` process that imports it: a pipe end
/// (both ways, once: a second connection is refused), a channel's
/// receiving half (what is sent here reaches the far program, then
/// `Disconnected`), a channel's sending half (what the far program sends
/// arrives here, in order).
#[test]
fn single_ends_export_once_each_way_they_carry() {
    let (_serial, dog) = guarded(this_test!(), 120);
    let port = free_port();
    let bridge = library_bridge(port);
    let prefix = test_prefix("ends");
    let probe = echo_server();
    let _probe = bridge
        .export(probe.as_str(), None, &format!("{prefix}/probe"))
        .unwrap();
    let (here, there) = ferry::pipe().unwrap();
    let _pipe = bridge.export_end(there, &format!("{prefix}/pipe")).unwrap();
    let (log_tx, log_rx) = ferry::bytes::channel(64).unwrap();
    let _log = bridge.export_end(log_rx, &format!("{prefix}/log")).unwrap();
    let (sink_tx, sink_rx) = ferry::bytes::channel(64).unwrap();
    let _sink = bridge
        .export_end(sink_tx, &format!("{prefix}/sink"))
        .unwrap();
    let local = unique("end");
    let mut imports = vec!["--connect".into(), format!("tcp/127.0.0.1:{port}")];
    for what in ["probe", "pipe", "log", "sink"] {
        imports.push("--import".into());
        imports.push(format!("{prefix}/{what}={local}-{what}"));
    }
    let _importer = BridgeProcess::start(&dog, &imports);
    wait_echoes(
        &format!("{local}-probe").as_str().into(),
        Duration::from_secs(30),
    );

    // The pipe end: both ways; its holder here is refused a descriptor.
    let far = ferry::connect(format!("{local}-pipe").as_str()).unwrap();
    far.send(b"to the end").unwrap();
    assert_eq!(here.recv().unwrap(), b"to the end");
    here.send(b"from the end").unwrap();
    assert_eq!(far.recv().unwrap(), b"from the end");
    let fd = std::os::fd::OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
    let err = here
        .sender()
        .send_with(b"a descriptor", vec![ferry::Handle::Fd(fd)])
        .unwrap_err();
    assert!(matches!(err.error, ferry::SendError::NotTransferable(_)));
    let again = ferry::connect(format!("{local}-pipe").as_str()).unwrap();
    assert_disconnected(&again, "a second pipe to one end");
    // The first goes on.
    here.send(b"still here").unwrap();
    assert_eq!(far.recv().unwrap(), b"still here");

    // The receiving half: what is sent here, in order, then Disconnected.
    let reader = ferry::connect(format!("{local}-log").as_str()).unwrap();
    for seq in 0..1000 {
        log_tx.send(&message(seq, 200)).unwrap();
    }
    drop(log_tx);
    for seq in 0..1000 {
        assert_eq!(reader.recv().unwrap(), message(seq, 200), "log {seq}");
    }
    assert_disconnected(&reader, "after the last");
    // It takes nothing, and said so as the pipe opened: the reader's sends
    // fail, rather than vanish.
    let refused = reader.send(b"anyone there?").unwrap_err();
    assert!(refused.is_disconnected(), "{refused:?}");

    // The sending half: what the far program sends arrives here; it reads
    // nothing back.
    let writer = ferry::connect(format!("{local}-sink").as_str()).unwrap();
    for seq in 0..1000 {
        writer.send(&message(seq, 300)).unwrap();
    }
    for seq in 0..1000 {
        assert_eq!(sink_rx.recv().unwrap(), message(seq, 300), "sink {seq}");
    }
    assert_disconnected(&writer, "nothing comes back");
}

/// Dropping an import stops taking connections at once (its thread waits
/// in `accept`, with no timer): the name is gone, and a pipe opened
/// before goes on.
#[test]
fn a_dropped_import_lets_its_name_go_and_open_pipes_go_on() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let port = free_port();
    let bridge = library_bridge(port);
    let prefix = test_prefix("drop");
    let _exporter = BridgeProcess::start(
        &dog,
        &args(&[
            ("--connect", format!("tcp/127.0.0.1:{port}")),
            ("--export", format!("{prefix}={}", echo_server())),
        ]),
    );
    let name = unique("dropped");
    let import = bridge.import(&prefix, name.as_str(), None).unwrap();
    wait_echoes(&name.as_str().into(), Duration::from_secs(30));
    let open = ferry::connect(name.as_str()).unwrap();
    let dropped = Instant::now();
    drop(import);
    let deadline = Instant::now() + Duration::from_secs(5);
    // Until the name is gone (a connection that meets the server as it
    // closes is `Closed`).
    loop {
        match ferry::connect(name.as_str()) {
            Err(ferry::ConnectError::NoServer(_)) => break,
            Ok(_) | Err(ferry::ConnectError::Closed) => {
                assert!(Instant::now() < deadline, "the name still answers");
            }
            Err(e) => panic!("{e:?}"),
        }
        thread::sleep(Duration::from_millis(10));
    }
    let gone = dropped.elapsed();
    eprintln!("the name went {gone:?} after the drop");
    // Not a timer's tick (the loop before this woke once a second).
    assert!(
        gone < Duration::from_millis(500),
        "the name went after {gone:?}"
    );
    open.send(b"still open").unwrap();
    assert_eq!(open.recv().unwrap(), b"still open");
}

/// A token's file, as `--token-file` and `--import-token-file` read it.
fn token_file(dir: &std::path::Path, name: &str, token: &ferry::Token) -> String {
    let hex: String = token
        .as_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let path = dir.join(name);
    std::fs::write(&path, hex).unwrap();
    path.display().to_string()
}

/// Tokens on both sides: the exported server asks for one, which the
/// exporting bridge presents (`--token-file`); the imported name asks
/// local programs for another (`--import-token-file`): without it a
/// program is refused, with it the pipe reaches the server.
#[test]
fn tokens_are_checked_on_both_sides() {
    let (_serial, dog) = guarded(this_test!(), 60);
    let dir = SocketDir(std::env::temp_dir().join(unique("tokens")));
    std::fs::create_dir(&dir.0).unwrap();
    let (server_token, import_token) = (
        ferry::Token::random().unwrap(),
        ferry::Token::random().unwrap(),
    );
    let name = unique("guarded");
    let server = ferry::ServerOptions::new()
        .token(server_token.clone())
        .bind(name.as_str())
        .unwrap();
    thread::spawn(move || {
        while let Ok(connection) = server.accept() {
            thread::spawn(move || {
                while let Ok(message) = connection.pipe.recv() {
                    let _ = connection.pipe.send(&message);
                }
            });
        }
    });
    let (port, local) = (free_port(), unique("guarded-import"));
    let prefix = test_prefix("tokens");
    let _exporter = BridgeProcess::start(
        &dog,
        &args(&[
            ("--listen", format!("tcp/127.0.0.1:{port}")),
            ("--token-file", token_file(&dir.0, "server", &server_token)),
            ("--export", format!("{prefix}={name}")),
        ]),
    );
    let _importer = BridgeProcess::start(
        &dog,
        &args(&[
            ("--connect", format!("tcp/127.0.0.1:{port}")),
            (
                "--import-token-file",
                token_file(&dir.0, "import", &import_token),
            ),
            ("--import", format!("{prefix}={local}")),
        ]),
    );
    let refused = ferry::connect(local.as_str()).unwrap_err();
    assert!(
        matches!(refused, ferry::ConnectError::Refused(ferry::Refusal::Token)),
        "{refused:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pipe = ferry::ConnectOptions::new()
            .token(import_token.clone())
            .connect(local.as_str())
            .unwrap();
        pipe.send(b"past both tokens").unwrap();
        match pipe.receiver().recv_timeout(Duration::from_secs(3)) {
            Ok(reply) => {
                assert_eq!(reply, b"past both tokens");
                break;
            }
            // The bridges have not met yet.
            Err(e) => assert!(Instant::now() < deadline, "{e:?}"),
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A certificate authority `ca` in `dir`, and a certificate it signs for
/// `name` (`name.crt`, `name.key`) that serves and connects as localhost.
fn certificates(dir: &std::path::Path, ca: &str, names: &[&str]) {
    let (ca_key, ca_crt) = (format!("{ca}.key"), format!("{ca}.crt"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &ca_key,
            "-out",
            &ca_crt,
            "-days",
            "2",
            "-subj",
            &format!("/CN={ca}"),
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    .unwrap();
    for name in names {
        let (key, csr, crt) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.crt"),
        );
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                "/CN=localhost",
            ],
        );
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &ca_crt,
                "-CAkey",
                &ca_key,
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                "leaf.ext",
            ],
        );
    }
}

/// A bridge's Zenoh configuration: mutual TLS, trusting `ca`, presenting
/// `name`'s certificate either way.
fn tls_config(dir: &std::path::Path, ca: &str, name: &str) -> String {
    let path = |file: String| dir.join(file).display().to_string();
    let config = format!(
        "{{ transport: {{ link: {{ tls: {{ root_ca_certificate: {:?}, enable_mtls: true, \
         listen_private_key: {:?}, listen_certificate: {:?}, \
         connect_private_key: {:?}, connect_certificate: {:?} }} }} }} }}",
        path(format!("{ca}.crt")),
        path(format!("{name}.key")),
        path(format!("{name}.crt")),
        path(format!("{name}.key")),
        path(format!("{name}.crt")),
    );
    let file = dir.join(format!("{name}.json5"));
    std::fs::write(&file, config).unwrap();
    file.display().to_string()
}

/// Bridges over mutual TLS (`tls/` endpoints, `--config`): one whose
/// certificate the deployment's authority signed reaches the exported
/// server; one with a certificate of another authority (though it trusts
/// the right one) is turned away by the exporting bridge, and its
/// program sees `Disconnected`.
#[test]
fn bridges_over_mutual_tls_let_only_certified_bridges_in() {
    let (_serial, dog) = guarded(this_test!(), 120);
    if Command::new("openssl").arg("version").output().is_err() {
        eprintln!("SKIPPED: no `openssl` command to make the test's certificates");
        return;
    }
    let dir = SocketDir(std::env::temp_dir().join(unique("tls")));
    std::fs::create_dir(&dir.0).unwrap();
    certificates(&dir.0, "deployment-ca", &["exporter", "importer"]);
    certificates(&dir.0, "other-ca", &["intruder"]);
    let port = free_port();
    let prefix = test_prefix("tls");
    let _exporter = BridgeProcess::start(
        &dog,
        &args(&[
            ("--config", tls_config(&dir.0, "deployment-ca", "exporter")),
            ("--listen", format!("tls/localhost:{port}")),
            ("--export", format!("{prefix}={}", echo_server())),
        ]),
    );
    // Trusts the deployment's authority, but another signed its own.
    let intruded = unique("intruder");
    let _intruder = BridgeProcess::start(
        &dog,
        &args(&[
            ("--config", tls_config(&dir.0, "deployment-ca", "intruder")),
            ("--connect", format!("tls/localhost:{port}")),
            ("--import", format!("{prefix}={intruded}")),
        ]),
    );
    let local = unique("certified");
    let _importer = BridgeProcess::start(
        &dog,
        &args(&[
            ("--config", tls_config(&dir.0, "deployment-ca", "importer")),
            ("--connect", format!("tls/localhost:{port}")),
            ("--import", format!("{prefix}={local}")),
        ]),
    );
    wait_echoes(&local.as_str().into(), Duration::from_secs(60));
    // Not late: turned away, try after try, while Zenoh retries its
    // connection.
    for _ in 0..3 {
        let pipe = ferry::connect(intruded.as_str()).unwrap();
        pipe.send(b"let me in").unwrap();
        let err = pipe
            .receiver()
            .recv_timeout(Duration::from_secs(30))
            .unwrap_err();
        assert!(err.is_disconnected(), "the intruder's pipe: {err:?}");
        thread::sleep(Duration::from_secs(1));
    }
}
