//! The round-trip workload: the parent sends a request, the child echoes a
//! reply of the same size, and every round trip after a warm-up is timed.
//!
//! Both sides write and read every payload byte (see [`crate::payload`]),
//! and the parent's timing covers its own writing and reading too, so a
//! transport that could skip a copy still pays for touching the data once.
//! Around the timed span the parent asks the child for its CPU time (see
//! [`crate::control`]); a row that runs past its time cap stops, and says so.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::child::{self, Workload};
use crate::control;
use crate::cpu;
use crate::definitions::DEFINITIONS;
use crate::error::Error;
use crate::matrix::Bench;
use crate::payload;
use crate::placement::{CpuLog, Placement, ROUND_TRIPS_PER_NOTE, Seen};
use crate::pool::{Mark, PoolUse};
use crate::progress::Bar;
use crate::stats::{Summary, histogram_of, micros, nanos};
use crate::transport::{Endpoint, Transport};

/// How long the child may take to exit once the parent closes its end.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Round trips between progress updates (outside the timed span).
const PROGRESS_EVERY: usize = 256;
/// The share of a row's time cap its warm-up may use.
const WARMUP_SHARE: u32 = 10;

/// The default round trips for `size`: those of the smallest listed size
/// at least as large; past the largest, fewer in proportion, so each row
/// moves about as many bytes.
pub fn default_count(size: usize) -> usize {
    let sizes = DEFINITIONS.pingpong.sizes;
    if let Some(spec) = sizes.iter().find(|s| s.size >= size) {
        return spec.count;
    }
    let last = sizes[sizes.len() - 1];
    (last.count * last.size / size).max(50)
}

/// Untimed round trips before the timed ones: a tenth, within 10..=1000.
pub fn default_warmup(count: usize) -> usize {
    (count / 10).clamp(10, 1000)
}

/// One row of the benchmark: a transport at one size and placement.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// What carries the messages.
    pub transport: &'static dyn Transport,
    /// Where the two processes run.
    pub placement: Placement,
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips.
    pub count: usize,
    /// Untimed round trips first.
    pub warmup: usize,
    /// The row stops once it has run this long, warm-up included.
    pub cap: Duration,
}

/// What one run of a row measured.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The timed round trips.
    pub summary: Summary,
    /// Every timed round trip, in nanoseconds, so a row's runs can be
    /// pooled.
    pub histogram: Histogram<u64>,
    /// CPU time of both processes per timed round trip.
    pub cpu: Duration,
    /// The time cap stopped the row before its count.
    pub capped: bool,
    /// ferry's block pool in this process over the timed round trips.
    pub pool: PoolUse,
    /// How often both processes were on one CPU in the timed round trips.
    pub seen: Seen,
}

impl Bench for Case {
    type Sample = Sample;

    fn label(&self) -> String {
        let (name, size) = (self.transport.name(), self.size);
        format!("{name} at {size} B ({})", self.placement.name())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn work(&self) -> u64 {
        (self.warmup + self.count) as u64
    }

    fn run(&self, bar: &Bar) -> Result<Sample, Error> {
        let parent = |endpoint: &mut dyn Endpoint| measure(endpoint, self, bar);
        child::run(Workload::Pingpong, self.transport, self.placement, parent)
    }

    fn brief(sample: &Sample) -> String {
        let s = &sample.summary;
        let capped = if sample.capped { " (capped)" } else { "" };
        format!(
            "p50 {:.2} µs, p99 {:.2} µs, max {:.2} µs, cpu {:.2} µs{capped}",
            micros(s.p50),
            micros(s.p99),
            micros(s.max),
            micros(sample.cpu)
        )
    }

    fn seen(sample: &Sample) -> Option<Seen> {
        Some(sample.seen)
    }
}

/// The parent's side of one row: the warm-up, then the timed round trips.
fn measure(endpoint: &mut dyn Endpoint, case: &Case, bar: &Bar) -> Result<Sample, Error> {
    let started = Instant::now();
    let mut ticker = Ticker::new(bar, case.warmup + case.count);
    let mut n = 0;
    for _ in 0..case.warmup {
        round_trip(endpoint, case.size, payload::marker(n))
            .map_err(|e| e.within(format!("warm-up round trip {n}")))?;
        n += 1;
        ticker.tick();
        if started.elapsed() > case.cap / WARMUP_SHARE {
            break;
        }
    }
    let child_before = control::child_cpu(endpoint)?;
    let own_before = cpu::process_time();
    let pool = Mark::now();
    let mut samples = Vec::with_capacity(case.count);
    let mut capped = false;
    let mut cpus = CpuLog::new(ROUND_TRIPS_PER_NOTE);
    for i in 0..case.count {
        let start = Instant::now();
        round_trip(endpoint, case.size, payload::marker(n))
            .map_err(|e| e.within(format!("round trip {i}")))?;
        let took = start.elapsed();
        samples.push(took);
        cpus.tick();
        n += 1;
        ticker.tick();
        if start + took - started > case.cap && i + 1 < case.count {
            capped = true;
            break;
        }
    }
    let pool = pool.since();
    let own = cpu::process_time().saturating_sub(own_before);
    let child = control::child_cpu(endpoint)?;
    ticker.finish();
    let summary =
        Summary::of(&mut samples).ok_or_else(|| Error::new("no round trips were timed"))?;
    Ok(Sample {
        summary,
        histogram: histogram_of(&samples),
        cpu: (own + child.cpu.saturating_sub(child_before.cpu)).div_f64(summary.count as f64),
        capped,
        pool,
        seen: Seen::of(&cpus.take(), &child.cpus),
    })
}

/// Advances the bar every [`PROGRESS_EVERY`] round trips, and at the end
/// by whatever the row did not run, so a capped row fills its share.
pub struct Ticker<'a> {
    bar: &'a Bar,
    total: usize,
    done: usize,
    pending: usize,
}

impl<'a> Ticker<'a> {
    /// A ticker for a row of `total` units.
    pub fn new(bar: &'a Bar, total: usize) -> Self {
        Self {
            bar,
            total,
            done: 0,
            pending: 0,
        }
    }

    /// Counts one unit done.
    pub fn tick(&mut self) {
        self.pending += 1;
        if self.pending == PROGRESS_EVERY {
            self.flush();
        }
    }

    fn flush(&mut self) {
        self.bar.advance(self.pending as u64);
        self.done += self.pending;
        self.pending = 0;
    }

    /// Fills the row's share of the bar.
    pub fn finish(mut self) {
        self.flush();
        self.bar
            .advance(self.total.saturating_sub(self.done) as u64);
    }
}

/// One request and its reply, every byte written and read on this side.
pub fn round_trip(endpoint: &mut dyn Endpoint, size: usize, marker: u8) -> Result<(), Error> {
    endpoint.send_filled(size, &mut |buf| payload::fill(buf, marker))?;
    let closed = || Error::new("the child closed its end before replying");
    if endpoint.reads_in_scope() {
        let mut checked = Ok(());
        let open = endpoint.recv_read(&mut |reply| checked = check_reply(reply, size, marker))?;
        return if open { checked } else { Err(closed()) };
    }
    let reply = endpoint.recv()?.ok_or_else(closed)?;
    check_reply(reply, size, marker)
}

/// Checks a reply to a request of `size` bytes stamped with `marker`.
#[inline]
fn check_reply(reply: &[u8], size: usize, marker: u8) -> Result<(), Error> {
    if reply.len() != size {
        return Err(Error::new(format!(
            "the reply has {} bytes, the request had {size}",
            reply.len()
        )));
    }
    payload::check(reply, payload::reply_marker(marker))
}

/// What the child does with one message.
enum Step {
    Echo { len: usize, marker: u8 },
    ReportCpu,
}

/// What to do with `message`.
#[inline]
fn step_for(message: &[u8]) -> Result<Step, Error> {
    if message == control::CPU_QUERY {
        return Ok(Step::ReportCpu);
    }
    Ok(Step::Echo {
        len: message.len(),
        marker: payload::read_request(message)?,
    })
}

/// In the child: echoes every request, and answers CPU queries (with the
/// CPUs it noted since the last), until the parent closes its end.
pub fn echo(endpoint: &mut dyn Endpoint) -> Result<(), Error> {
    let mut cpus = CpuLog::new(ROUND_TRIPS_PER_NOTE);
    loop {
        let step = if endpoint.reads_in_scope() {
            let mut step = Ok(Step::ReportCpu);
            if !endpoint.recv_read(&mut |message| step = step_for(message))? {
                return Ok(());
            }
            step?
        } else {
            match endpoint.recv()? {
                None => return Ok(()),
                Some(message) => step_for(message)?,
            }
        };
        match step {
            Step::Echo { len, marker } => {
                cpus.tick();
                let marker = payload::reply_marker(marker);
                endpoint.send_filled(len, &mut |buf| payload::fill(buf, marker))?;
            }
            Step::ReportCpu => {
                let time = nanos(cpu::process_time());
                control::answer(endpoint, &[time], &mut cpus)?;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sizes_keep_their_counts() {
        for spec in DEFINITIONS.pingpong.sizes {
            assert_eq!(default_count(spec.size), spec.count);
        }
    }

    #[test]
    fn other_sizes_borrow_the_next_size_up() {
        assert_eq!(default_count(1), 50_000);
        assert_eq!(default_count(64), 50_000);
        assert_eq!(default_count(100_000), 1_000);
        assert_eq!(default_count(2 << 20), 250);
        assert_eq!(default_count(1 << 40), 50);
    }

    #[test]
    fn warmups_are_a_tenth_within_bounds() {
        assert_eq!(default_warmup(50), 10);
        assert_eq!(default_warmup(500), 50);
        assert_eq!(default_warmup(50_000), 1_000);
    }
}
