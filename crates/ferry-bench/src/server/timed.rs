//! The connect rows, and the loop they share with the fd rows: untimed
//! operations first, then timed ones, one at a time, until the count or
//! the row's time cap. Each operation times itself, so what it does
//! before and after (asking for an address, hanging up) stays out.

use std::time::{Duration, Instant};

use super::child::{ChildArgs, Role, Seat, next_address, with_child};
use super::engine::Server;
use super::{Case, SIZE, Sample};
use crate::error::Error;
use crate::payload;
use crate::pingpong::Ticker;
use crate::progress::Bar;
use crate::stats::{empty_histogram, nanos, record};

/// The share of a row's time cap its warm-up may use.
const WARMUP_SHARE: u32 = 10;

/// Runs one connect row: a server in a child; each time, this process asks
/// it where to connect, then connects and makes the first round trip
/// (timed together), and hangs up.
pub fn connect(case: &Case, engine: &dyn Server, bar: &Bar) -> Result<Sample, Error> {
    let args = ChildArgs::new(Role::Serve, engine.name(), case.placement, Seat::Child);
    with_child(&args, |ctl, _| {
        repeat(case, bar, |request, reply| {
            let address = next_address(ctl)?;
            let start = Instant::now();
            let conn = engine.connect(&address, request, reply)?;
            let took = start.elapsed();
            drop(conn);
            Ok(took)
        })
    })
}

/// Runs `op` for the case's warm-up, then for its count, each time with a
/// fresh request to send and a buffer for its echo, which is checked after;
/// `op` returns how long its timed part took.
pub fn repeat(
    case: &Case,
    bar: &Bar,
    mut op: impl FnMut(&[u8], &mut Vec<u8>) -> Result<Duration, Error>,
) -> Result<Sample, Error> {
    let mut request = vec![0; SIZE];
    let mut reply = Vec::with_capacity(SIZE);
    let mut op = |i: usize| {
        payload::fill(&mut request, payload::marker(i));
        let took = op(&request, &mut reply)?;
        check_echo(&request, &reply)?;
        Ok::<_, Error>(took)
    };
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

/// Checks that `reply` is `request`, echoed whole.
pub fn check_echo(request: &[u8], reply: &[u8]) -> Result<(), Error> {
    if reply.len() != request.len() {
        return Err(Error::new(format!(
            "a {}-byte reply to a {}-byte request",
            reply.len(),
            request.len()
        )));
    }
    payload::check(reply, request.first().copied().unwrap_or_default())
}
