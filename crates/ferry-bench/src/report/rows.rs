//! The rows of the report, one per case of a workload, built from its runs.
//!
//! A row's figures are the medians of its runs' (with the runs' min–max
//! beside the headline one), but a pingpong row's tail (p99, p99.9, max)
//! comes from every round trip of every run pooled, so p99.9 is a true
//! p99.9 of all the row's samples.

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::calls;
use crate::pingpong;
use crate::pool::PoolUse;
use crate::runner::Runs;
use crate::stats::{Spread, micros, nanos, pooled};
use crate::throughput;

/// A pingpong row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PingpongRow {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips (per run).
    pub count: usize,
    /// Median round trip (the median of the runs' medians), µs.
    pub p50_us: f64,
    /// 99th percentile of all runs' round trips pooled, µs.
    pub p99_us: f64,
    /// 99.9th percentile of all runs' round trips pooled, µs.
    pub p999_us: f64,
    /// Slowest of all runs, µs.
    pub max_us: f64,
    /// Mean, µs.
    pub mean_us: f64,
    /// CPU time of both processes per round trip, µs.
    pub cpu_us: f64,
    /// The smallest run's p50, µs.
    pub p50_min_us: f64,
    /// The largest run's p50, µs.
    pub p50_max_us: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs, start-up included.
    pub wall_s: f64,
    /// ferry's block pool in this process over the timed spans of all the
    /// row's runs; `null` where no block was used.
    pub pool: Option<PoolUse>,
    /// Each run's p50 (µs), and where its CPUs were.
    pub per_run: Vec<RunPoint>,
    /// Every timed round trip of all the row's runs (last: one long line).
    pub histogram_ns: Buckets,
}

/// One run of a row: its figure, a cache line's round trip between CPUs 0
/// and 1 around it (see `crate::distance`), and how often the two
/// processes shared a CPU, so scattered runs can be grouped by the state
/// the machine was in and by where the scheduler put the pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPoint {
    /// The run's figure, in the row's unit (p50 µs, or messages per second).
    pub value: f64,
    /// The line's round trip before the run, ns; `null` where not measured.
    pub line_before_ns: Option<u64>,
    /// The line's round trip after the run, ns.
    pub line_after_ns: Option<u64>,
    /// The share of the span's notes (each process noting its CPU every
    /// few round trips or messages) that found both on one CPU.
    pub one_cpu_share: Option<f64>,
    /// `"yes"` where that share is half or more, else `"no"`; `null` (as
    /// the share) for rows of one process.
    pub one_cpu: Option<&'static str>,
}

impl RunPoint {
    fn of<C: crate::matrix::Bench>(runs: &Runs<C>, value: impl Fn(&C::Sample) -> f64) -> Vec<Self> {
        let ns = |d: Option<std::time::Duration>| d.map(|d| d.as_nanos() as u64);
        runs.samples
            .iter()
            .zip(&runs.apart)
            .map(|(sample, apart)| {
                let seen = C::seen(sample);
                Self {
                    value: round(value(sample)),
                    line_before_ns: ns(apart.before),
                    line_after_ns: ns(apart.after),
                    one_cpu_share: seen.and_then(|s| s.share()).map(round),
                    one_cpu: seen.and_then(|s| s.one_cpu()).map(|one| match one {
                        true => "yes",
                        false => "no",
                    }),
                }
            })
            .collect()
    }
}

/// Round-trip times in nanoseconds, in an HDR histogram; in JSON, `[ns,
/// count]` per non-empty bucket on one line (see `json.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets(pub Histogram<u64>);

/// A throughput row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputRow {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Where the processes ran.
    pub placement: &'static str,
    /// Payload bytes per message.
    pub size: usize,
    /// Timed messages (per run).
    pub count: usize,
    /// Messages per second.
    pub msgs_per_s: f64,
    /// Payload GiB per second.
    pub gib_per_s: f64,
    /// The slowest run's GiB/s.
    pub gib_per_s_min: f64,
    /// The fastest run's GiB/s.
    pub gib_per_s_max: f64,
    /// CPU time of both processes per message, µs.
    pub cpu_us: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs, start-up included.
    pub wall_s: f64,
    /// As pingpong's.
    pub pool: Option<PoolUse>,
    /// Each run's messages per second, and where its CPUs were.
    pub per_run: Vec<RunPoint>,
}

/// A calls row, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallsRow {
    /// The function called.
    pub call: &'static str,
    /// How the call travels.
    pub via: &'static str,
    /// Where the caller (and callee thread) ran.
    pub placement: &'static str,
    /// Timed calls (per run).
    pub count: usize,
    /// Nanoseconds per call.
    pub ns_per_call: f64,
    /// The fastest run's ns per call.
    pub ns_min: f64,
    /// The slowest run's ns per call.
    pub ns_max: f64,
    /// Runs summarized.
    pub runs: usize,
    /// A run stopped at the row's time cap, before its count.
    pub capped: bool,
    /// Wall-clock seconds of all the row's runs.
    pub wall_s: f64,
}

/// A row's transport, wait, placement and size.
pub type RowKey = (&'static str, &'static str, &'static str, usize);

/// The median of `f` over the samples (at least one), rounded.
pub(super) fn med<S>(samples: &[S], f: impl Fn(&S) -> f64) -> f64 {
    round(Spread::of(samples.iter().map(f)).map_or(f64::NAN, |s| s.median))
}

/// `x` to four significant digits: no more than a run can tell.
pub fn round(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 12);
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}

/// The median of the runs' counts.
pub(super) fn median_count<S>(samples: &[S], f: impl Fn(&S) -> usize) -> usize {
    let spread = Spread::of(samples.iter().map(|s| f(s) as f64));
    spread.map_or(0, |s| s.median.round() as usize)
}

/// The pool's use over some runs, if it was used.
fn pool_of(uses: impl Iterator<Item = PoolUse>) -> Option<PoolUse> {
    let sum = PoolUse::sum(uses);
    sum.is_used().then_some(sum)
}

/// A row's pooled p99, p99.9 and max, µs, each at most the slowest round
/// trip (a bucket's highest value can lie above it).
pub(super) fn tail(all: &Histogram<u64>, slowest_ns: u64) -> [f64; 3] {
    let at = |q: f64| round(slowest_ns.min(all.value_at_quantile(q)) as f64 / 1e3);
    [at(0.99), at(0.999), round(slowest_ns as f64 / 1e3)]
}

impl PingpongRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<pingpong::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let p50 = Spread::of(s.iter().map(|x| micros(x.summary.p50)))?;
        let all = pooled(s.iter().map(|x| &x.histogram));
        let slowest = s.iter().map(|x| nanos(x.summary.max)).max()?;
        let [p99, p999, max] = tail(&all, slowest);
        Some(Self {
            transport: case.transport.name(),
            wait: case.transport.wait(),
            placement: case.placement.name(),
            size: case.size,
            count: median_count(s, |x| x.summary.count),
            p50_us: round(p50.median),
            p99_us: p99,
            p999_us: p999,
            max_us: max,
            mean_us: med(s, |x| micros(x.summary.mean)),
            cpu_us: med(s, |x| micros(x.cpu)),
            p50_min_us: round(p50.min),
            p50_max_us: round(p50.max),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
            pool: pool_of(s.iter().map(|x| x.pool)),
            per_run: RunPoint::of(runs, |x| micros(x.summary.p50)),
            histogram_ns: Buckets(all),
        })
    }

    /// The row's transport, wait, placement and size.
    pub fn key(&self) -> RowKey {
        (self.transport, self.wait, self.placement, self.size)
    }
}

impl ThroughputRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<throughput::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let gib = Spread::of(s.iter().map(|x| x.gib_per_s(case.size)))?;
        Some(Self {
            transport: case.transport.name(),
            wait: case.transport.wait(),
            placement: case.placement.name(),
            size: case.size,
            count: median_count(s, |x| x.messages),
            msgs_per_s: med(s, throughput::Sample::rate),
            gib_per_s: round(gib.median),
            gib_per_s_min: round(gib.min),
            gib_per_s_max: round(gib.max),
            cpu_us: med(s, |x| micros(x.cpu_per_message())),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
            pool: pool_of(s.iter().map(|x| x.pool)),
            per_run: RunPoint::of(runs, throughput::Sample::rate),
        })
    }

    /// The row's transport, wait, placement and size.
    pub fn key(&self) -> RowKey {
        (self.transport, self.wait, self.placement, self.size)
    }
}

impl CallsRow {
    /// The row of a case's runs; `None` if none succeeded.
    pub fn of(runs: &Runs<calls::Case>) -> Option<Self> {
        let (case, s) = (&runs.case, &runs.samples[..]);
        let ns = Spread::of(s.iter().map(|x| x.ns_per_call))?;
        Some(Self {
            call: case.call.name(),
            via: case.via.name(),
            placement: case.placement.name(),
            count: median_count(s, |x| x.calls),
            ns_per_call: round(ns.median),
            ns_min: round(ns.min),
            ns_max: round(ns.max),
            runs: s.len(),
            capped: s.iter().any(|x| x.capped),
            wall_s: round(runs.wall.as_secs_f64()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{empty_histogram, record};

    #[test]
    fn the_tail_comes_from_all_runs_and_never_passes_the_slowest() {
        let mut all = empty_histogram();
        for i in 1..=10_000 {
            record(&mut all, i * 10);
        }
        let near = |got: f64, want: f64| (got - want).abs() <= want * 1e-3;
        let [p99, p999, max] = tail(&all, 100_000);
        assert!(near(p99, 99.0) && near(p999, 99.9), "{p99} {p999}");
        assert_eq!(max, 100.0);
        let [_, p999, max] = tail(&all, 99_901);
        assert_eq!((p999, max), (99.9, 99.9));
    }

    #[test]
    fn json_numbers_keep_four_digits() {
        assert_eq!(round(21.691999999999997), 21.69);
        assert_eq!(round(4788.281999999999), 4788.0);
        assert_eq!(round(0.012345678), 0.01235);
        assert_eq!(round(6_847_298.4), 6_847_298.0);
        assert_eq!(round(0.0), 0.0);
    }
}
