//! The loop of the connect and fd rows: untimed operations first, then
//! timed ones, one at a time, until the count or the row's time cap.

use std::time::{Duration, Instant};

use super::{Case, Sample};
use crate::error::Error;
use crate::pingpong::Ticker;
use crate::progress::Bar;
use crate::stats::{empty_histogram, nanos, record};

/// The share of a row's time cap its warm-up may use.
const WARMUP_SHARE: u32 = 10;

/// Runs `op` for the case's warm-up, then for its count, each call given
/// its index and returning how long its timed part took (an operation
/// times itself, so what it does before and after, such as asking for an
/// address or hanging up, stays out of the figure).
pub fn repeat(
    case: &Case,
    bar: &Bar,
    mut op: impl FnMut(usize) -> Result<Duration, Error>,
) -> Result<Sample, Error> {
    let started = Instant::now();
    let mut ticker = Ticker::new(bar, case.warmup + case.count);
    for i in 0..case.warmup {
        op(i).map_err(|e| e.within(format!("warm-up {i}")))?;
        ticker.tick();
        if started.elapsed() > case.cap / WARMUP_SHARE {
            break;
        }
    }
    let mut sample = Sample {
        histogram: empty_histogram(),
        ops: 0,
        span: Duration::ZERO,
        capped: false,
        fewest: None,
    };
    for i in 0..case.count {
        let took = op(case.warmup + i).map_err(|e| e.within(format!("timed {i}")))?;
        record(&mut sample.histogram, nanos(took));
        sample.ops += 1;
        sample.span += took;
        ticker.tick();
        if started.elapsed() > case.cap && i + 1 < case.count {
            sample.capped = true;
            break;
        }
    }
    ticker.finish();
    Ok(sample)
}
