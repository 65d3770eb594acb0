//! Summaries of timed samples: percentiles by nearest rank, max and mean.

use std::time::Duration;

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
            mean: mean(samples),
        })
    }
}

/// The nearest-rank percentile `q` (0 < q ≤ 1) of sorted, non-empty samples:
/// the smallest sample with at least `q` of all samples at or below it.
fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn mean(samples: &[Duration]) -> Duration {
    let total: u128 = samples.iter().map(Duration::as_nanos).sum();
    let nanos = total / samples.len() as u128;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
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
        Some(Self {
            median: median_of_sorted(&values),
            min,
            max,
        })
    }
}

/// The median of sorted, non-empty values.
fn median_of_sorted(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// The median of `values` (reordering them); `None` when there are none.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(median_of_sorted(values))
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
    fn micros_keeps_fractions() {
        assert_eq!(micros(Duration::from_nanos(1500)), 1.5);
    }
}
