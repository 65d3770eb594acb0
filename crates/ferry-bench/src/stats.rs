//! Summaries of timed samples: percentiles by nearest rank, max and mean;
//! histograms that pool the samples of several runs.

use std::time::Duration;

use hdrhistogram::Histogram;

/// Significant digits the round-trip histograms keep: a bucket spans at
/// most a thousandth of its values.
const SIGNIFICANT_DIGITS: u8 = 3;

/// The distribution of one row's round-trip times.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples were summarized.
    pub count: usize,
    /// The median.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
    /// The 99.9th percentile.
    pub p999: Duration,
    /// The slowest sample.
    pub max: Duration,
    /// The arithmetic mean.
    pub mean: Duration,
}

impl Summary {
    /// Summarizes `samples` (sorting them); `None` when there are none.
    pub fn of(samples: &mut [Duration]) -> Option<Self> {
        let max = *samples.iter().max()?;
        samples.sort_unstable();
        Some(Self {
            count: samples.len(),
            p50: percentile(samples, 0.50),
            p99: percentile(samples, 0.99),
            p999: percentile(samples, 0.999),
            max,
            mean: samples.iter().sum::<Duration>() / samples.len() as u32,
        })
    }
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of sorted, non-empty samples:
/// the smallest sample with at least `q` of all samples at or below it.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// An empty histogram of nanoseconds, growing to fit what it records.
pub fn empty_histogram() -> Histogram<u64> {
    Histogram::new(SIGNIFICANT_DIGITS)
        .expect("3 significant digits are within hdrhistogram's range")
}

/// A histogram of `samples`, in nanoseconds.
pub fn histogram_of(samples: &[Duration]) -> Histogram<u64> {
    let mut histogram = empty_histogram();
    for sample in samples {
        record(&mut histogram, nanos(*sample));
    }
    histogram
}

/// Records `ns`, growing the histogram to fit it (`saturating_record`
/// would clamp it to the current range instead).
pub fn record(histogram: &mut Histogram<u64>, ns: u64) {
    if histogram.record(ns).is_err() {
        histogram.saturating_record(ns);
    }
}

/// The samples of every histogram in `runs`, pooled into one.
pub fn pooled<'a>(runs: impl IntoIterator<Item = &'a Histogram<u64>>) -> Histogram<u64> {
    let mut all = empty_histogram();
    for run in runs {
        all.add(run)
            .expect("an auto-resizing histogram takes any value");
    }
    all
}

/// A duration in whole nanoseconds, saturating.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A duration in microseconds, as reports show it.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The median of a value measured once per run, with the smallest and the
/// largest: what `--repeat` reports for each row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The median of the runs' values (the mean of the middle two when the
    /// number of runs is even).
    pub median: f64,
    /// The smallest run's value.
    pub min: f64,
    /// The largest run's value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().collect();
        values.sort_by(f64::total_cmp);
        let (&min, &max) = (values.first()?, values.last()?);
        let mid = values.len() / 2;
        let median = match values.len() % 2 {
            1 => values[mid],
            _ => (values[mid - 1] + values[mid]) / 2.0,
        };
        Some(Self { median, min, max })
    }
}

/// The median of `values`; `None` when there are none.
pub fn median(values: &mut [f64]) -> Option<f64> {
    Spread::of(values.iter().copied()).map(|s| s.median)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn percentiles_of_one_to_a_thousand() {
        let mut samples: Vec<Duration> = (1..=1000).rev().map(us).collect();
        let s = Summary::of(&mut samples).unwrap();
        assert_eq!(
            (s.count, s.p50, s.p99, s.p999, s.max),
            (1000, us(500), us(990), us(999), us(1000))
        );
        assert_eq!(s.mean, Duration::from_nanos(500_500));
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = Summary::of(&mut [us(7)]).unwrap();
        assert_eq!((s.p50, s.p999, s.max, s.mean), (us(7), us(7), us(7), us(7)));
    }

    #[test]
    fn no_samples_no_summary() {
        assert!(Summary::of(&mut []).is_none());
    }

    #[test]
    fn spreads_take_the_middle_run() {
        let s = Spread::of([3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of([4.0, 1.0, 2.0, 8.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 8.0));
        assert!(Spread::of([]).is_none());
        assert_eq!(median(&mut [5.0, 1.0, 9.0]), Some(5.0));
    }

    #[test]
    fn pooled_runs_give_the_percentiles_of_all_their_samples() {
        let slow: Vec<Duration> = (1..=1000).map(us).collect();
        let fast = vec![us(1); 1000];
        let all = pooled([&histogram_of(&slow), &histogram_of(&fast)]);
        assert_eq!(all.len(), 2000);
        // The slow run's p99.9 is 999 µs; pooled, 2 of 2000 lie above 998.
        let p999 = all.value_at_quantile(0.999);
        assert!(all.equivalent(p999, 998_000), "{p999}");
        assert!(all.equivalent(all.max(), 1_000_000));
        assert!(all.equivalent(all.value_at_quantile(0.5), 1_000));
    }

    #[test]
    fn micros_keeps_fractions() {
        assert_eq!(micros(Duration::from_nanos(1500)), 1.5);
    }
}
