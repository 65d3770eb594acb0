//! The clients rows: one server in a child (on the parent's CPU when
//! pinned), and 100 clients in another (on the child's CPU), each a thread
//! making 144 B round trips as fast as it can for a fixed window, all at
//! once. The clients connect one after another before the window opens,
//! so it measures serving, not connecting. This process hands the clients
//! their addresses and collects their report.

use std::sync::{Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use ::ferry::{Pipe, RecvError, RecvTimeoutError};
use hdrhistogram::Histogram;

use super::child::{ChildArgs, Role, Seat, next_address, with_child};
use super::engine::{Conn, Server};
use super::timed::check_echo;
use super::{Case, SIZE, Sample};
use crate::error::{Context, Error};
use crate::payload;
use crate::progress::Bar;
use crate::stats::{empty_histogram, nanos, pooled, record};

/// How long past its window the clients' report may take (connecting
/// 100 clients on a busy machine included).
const GRACE: Duration = Duration::from_secs(60);
/// How often the bar moves while the clients run.
const TICK: Duration = Duration::from_millis(50);

/// Runs one clients row.
pub fn run(case: &Case, engine: &dyn Server, clients: usize, bar: &Bar) -> Result<Sample, Error> {
    let child = |role, seat| {
        ChildArgs::new(role, engine.name(), case.placement, seat).with_clients(clients, case.window)
    };
    with_child(&child(Role::Serve, Seat::Parent), |server, _| {
        let addresses: Vec<String> = (0..clients)
            .map(|_| next_address(server))
            .collect::<Result<_, _>>()?;
        with_child(&child(Role::Clients, Seat::Child), |fleet, _| {
            collect(fleet, &addresses, case.window, bar)
        })
    })
}

/// Hands the clients their addresses and waits for their report, moving
/// the bar as the window passes.
fn collect(ctl: &Pipe, addresses: &[String], window: Duration, bar: &Bar) -> Result<Sample, Error> {
    ctl.send(addresses.join("\n").as_bytes())
        .context("handing the clients their addresses")?;
    let started = Instant::now();
    let total = window.as_millis() as u64;
    let mut shown = 0;
    loop {
        match ctl.receiver().recv_timeout(TICK) {
            Ok(report) => {
                bar.advance(total - shown);
                return decode(&report);
            }
            Err(RecvTimeoutError::Timeout) if started.elapsed() < window + GRACE => {
                let now = (started.elapsed().as_millis() as u64).min(total);
                bar.advance(now - shown);
                shown = now;
            }
            Err(RecvTimeoutError::Timeout) => {
                return Err(Error::new(format!(
                    "no report from the clients within {:?}",
                    window + GRACE
                )));
            }
            Err(e) => return Err(e).context("waiting for the clients' report"),
        }
    }
}

/// In the clients' child: connects a client to each address the parent
/// sends, runs them all for `window`, reports, and waits for the parent
/// to hang up.
pub fn clients(ctl: &Pipe, engine: &dyn Server, window: Duration) -> Result<(), Error> {
    let addresses = ctl.recv().context("waiting for the addresses")?;
    let addresses = String::from_utf8(addresses).context("the addresses")?;
    let mut conns = Vec::new();
    let request = vec![payload::marker(0); SIZE];
    let mut reply = Vec::new();
    for (i, address) in addresses.lines().enumerate() {
        let conn = engine.connect(address, &request, &mut reply);
        conns.push(conn.map_err(|e| e.within(format!("client {i}")))?);
        check_echo(&request, &reply)?;
    }
    let report = run_all(conns, window)?;
    ctl.send(&encode(&report)).context("sending the report")?;
    match ctl.recv() {
        Err(RecvError::Disconnected) => Ok(()),
        Ok(_) => Err(Error::new("the parent sent more after the report")),
        Err(e) => Err(e).context("waiting for the parent to hang up"),
    }
}

/// One client's run.
struct Run {
    /// Every round trip it began in the window.
    histogram: Histogram<u64>,
    /// Those that ended in it.
    within: u64,
}

/// Runs every client on a thread of its own. The window opens once every
/// thread has started (so a client that then waits for a CPU is slowed,
/// as the server's load would slow it, not left out), and is the same for
/// all of them.
fn run_all(conns: Vec<Box<dyn Conn>>, window: Duration) -> Result<Sample, Error> {
    let go = Barrier::new(conns.len() + 1);
    let deadline = OnceLock::new();
    let runs: Vec<Result<Run, Error>> = thread::scope(|scope| {
        let threads: Vec<_> = conns
            .into_iter()
            .map(|conn| scope.spawn(|| client(conn, &go, &deadline)))
            .collect();
        go.wait();
        let _ = deadline.set(Instant::now() + window);
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(Error::new("a client panicked")))
            })
            .collect()
    });
    let runs: Vec<Run> = runs.into_iter().collect::<Result<_, _>>()?;
    let fewest = runs.iter().map(|r| r.within).min();
    Ok(Sample {
        histogram: pooled(runs.iter().map(|r| &r.histogram)),
        ops: runs.iter().map(|r| r.within).sum(),
        span: window,
        capped: false,
        fewest: Some(fewest.ok_or_else(|| Error::new("no clients"))?),
    })
}

/// One client: round trips from the window's opening until it closes.
fn client(
    mut conn: Box<dyn Conn>,
    go: &Barrier,
    deadline: &OnceLock<Instant>,
) -> Result<Run, Error> {
    let mut run = Run {
        histogram: empty_histogram(),
        within: 0,
    };
    let mut request = vec![0; SIZE];
    let mut reply = Vec::with_capacity(SIZE);
    go.wait();
    let deadline = *deadline.wait();
    let mut now = Instant::now();
    let mut i = 0;
    while now < deadline {
        i += 1;
        payload::fill(&mut request, payload::marker(i));
        conn.round_trip(&request, &mut reply)?;
        let end = Instant::now();
        record(&mut run.histogram, nanos(end - now));
        check_echo(&request, &reply)?;
        run.within += u64::from(end <= deadline);
        now = end;
    }
    Ok(run)
}

/// The clients' report on the wire: the window in nanoseconds, the round
/// trips that ended in it, the fewest of one client, then each bucket of
/// the histogram as its highest value and its count; little-endian `u64`s.
fn encode(report: &Sample) -> Vec<u8> {
    let fewest = report.fewest.unwrap_or_default();
    let mut words = vec![nanos(report.span), report.ops, fewest];
    for bucket in report.histogram.iter_recorded() {
        words.extend([bucket.value_iterated_to(), bucket.count_at_value()]);
    }
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// The sample a report describes.
fn decode(report: &[u8]) -> Result<Sample, Error> {
    let (words, rest) = report.as_chunks::<8>();
    let words: Vec<u64> = words.iter().map(|w| u64::from_le_bytes(*w)).collect();
    let [window, within, fewest, buckets @ ..] = &words[..] else {
        return Err(Error::new("a report from the clients cut short"));
    };
    if !rest.is_empty() || buckets.len() % 2 != 0 {
        return Err(Error::new("a malformed report from the clients"));
    }
    let mut histogram = empty_histogram();
    for pair in buckets.chunks_exact(2) {
        histogram
            .record_n(pair[0], pair[1])
            .context("rebuilding the clients' histogram")?;
    }
    Ok(Sample {
        histogram,
        ops: *within,
        span: Duration::from_nanos(*window),
        capped: false,
        fewest: Some(*fewest),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_comes_back_as_it_went() {
        let mut histogram = empty_histogram();
        for ns in [900, 1_000, 1_000, 250_000, 7_000_000] {
            record(&mut histogram, ns);
        }
        let report = Sample {
            histogram: histogram.clone(),
            span: Duration::from_millis(200),
            ops: 4,
            capped: false,
            fewest: Some(2),
        };
        let sample = decode(&encode(&report)).unwrap();
        assert_eq!(sample.span, Duration::from_millis(200));
        assert_eq!((sample.ops, sample.fewest), (4, Some(2)));
        assert_eq!(sample.histogram, histogram);
        assert_eq!(sample.rate(), 20.0);
        assert_eq!(sample.slowest_client_rate(), Some(10.0));
    }

    #[test]
    fn a_malformed_report_is_refused() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0; 12]).is_err());
        assert!(decode(&[0; 16]).is_err());
        assert!(decode(&[0; 32]).is_err());
        assert!(decode(&[0; 24]).is_ok());
    }
}
