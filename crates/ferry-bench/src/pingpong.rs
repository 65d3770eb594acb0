//! The round-trip workload: the parent sends a request, the child echoes a
//! reply of the same size, and every round trip after a warm-up is timed.
//!
//! Both sides write every byte they send and read every byte they receive
//! (see [`crate::payload`]), and the parent's timing covers its own writing
//! and reading too, so a transport that could skip a copy still pays for
//! touching the data once.

use std::time::{Duration, Instant};

use crate::child::{self, Workload};
use crate::error::Error;
use crate::payload;
use crate::placement::Placement;
use crate::progress::Progress;
use crate::stats::Summary;
use crate::transport::{Connection, Endpoint, Exit, Transport};

/// A message size and the round trips it runs by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeSpec {
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips.
    pub count: usize,
}

/// Chromium's IPC ping-pong sizes (12 × 12ⁿ bytes) and 1 MiB.
pub const SIZES: &[SizeSpec] = &[
    SizeSpec::new(12, 50_000),
    SizeSpec::new(144, 50_000),
    SizeSpec::new(1_728, 50_000),
    SizeSpec::new(20_736, 12_000),
    SizeSpec::new(248_832, 1_000),
    SizeSpec::new(1_048_576, 500),
];

/// Round trips per size with `--quick`.
pub const QUICK_COUNT: usize = 300;

/// How long the child may take to exit once the parent closes its end.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// Round trips between progress updates (outside the timed span).
const PROGRESS_EVERY: usize = 256;

impl SizeSpec {
    const fn new(size: usize, count: usize) -> Self {
        Self { size, count }
    }
}

/// The default round trips for `size`: those of the smallest listed size
/// at least as large; past the largest, fewer in proportion, so each row
/// moves about as many bytes.
pub fn default_count(size: usize) -> usize {
    if let Some(spec) = SIZES.iter().find(|s| s.size >= size) {
        return spec.count;
    }
    let last = SIZES[SIZES.len() - 1];
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
}

impl Case {
    /// Names the row in progress lines and errors.
    pub fn label(&self) -> String {
        format!(
            "{} at {} B ({})",
            self.transport.name(),
            self.size,
            self.placement.name()
        )
    }

    /// Every round trip the row makes, timed or not.
    pub fn round_trips(&self) -> usize {
        self.warmup + self.count
    }
}

/// Runs one case: starts the child, times the round trips, closes, and
/// checks the child exited cleanly. The caller has placed this thread.
pub fn run(case: &Case, progress: &Progress) -> Result<Summary, Error> {
    let command = child::command(Workload::Pingpong, case.transport, case.placement)?;
    let Connection {
        child,
        mut endpoint,
    } = case.transport.spawn(command)?;
    let measured = measure(&mut *endpoint, case, progress);
    drop(endpoint);
    let exit = child.wait_or_kill(EXIT_TIMEOUT)?;
    finish(measured, exit)
}

fn measure(
    endpoint: &mut dyn Endpoint,
    case: &Case,
    progress: &Progress,
) -> Result<Vec<Duration>, Error> {
    let mut samples = Vec::with_capacity(case.count);
    for i in 0..case.round_trips() {
        let start = Instant::now();
        round_trip(endpoint, case.size, payload::marker(i))
            .map_err(|e| e.within(format!("round trip {i}")))?;
        let took = start.elapsed();
        if i >= case.warmup {
            samples.push(took);
        }
        if (i + 1) % PROGRESS_EVERY == 0 {
            progress.advance(PROGRESS_EVERY);
        }
    }
    progress.advance(case.round_trips() % PROGRESS_EVERY);
    Ok(samples)
}

/// One request and its reply, every byte written and read on this side.
fn round_trip(endpoint: &mut dyn Endpoint, size: usize, marker: u8) -> Result<(), Error> {
    payload::fill(endpoint.prepare(size)?, marker);
    endpoint.send()?;
    let reply = endpoint
        .recv()?
        .ok_or_else(|| Error::new("the child closed its end before replying"))?;
    if reply.len() != size {
        return Err(Error::new(format!(
            "the reply has {} bytes, the request had {size}",
            reply.len()
        )));
    }
    payload::check(reply, payload::reply_marker(marker))
}

/// Joins what the parent measured with how the child ended.
fn finish(measured: Result<Vec<Duration>, Error>, exit: Exit) -> Result<Summary, Error> {
    let trouble = match exit {
        Exit::Exited(status) if status.success() => None,
        Exit::Exited(status) => Some(format!("the child exited with {status}")),
        Exit::Killed => Some(format!(
            "the child was still running {EXIT_TIMEOUT:?} after the parent closed, and was killed"
        )),
    };
    match (measured, trouble) {
        (Ok(mut samples), None) => {
            Summary::of(&mut samples).ok_or_else(|| Error::new("no round trips were timed"))
        }
        (Ok(_), Some(why)) => Err(Error::new(why)),
        (Err(e), None) => Err(e),
        (Err(e), Some(why)) => Err(Error::new(format!("{e} ({why})"))),
    }
}

/// In the child: echoes every request, until the parent closes its end.
pub fn echo(endpoint: &mut dyn Endpoint) -> Result<(), Error> {
    while let Some((len, marker)) = next_request(endpoint)? {
        payload::fill(endpoint.prepare(len)?, payload::reply_marker(marker));
        endpoint.send()?;
    }
    Ok(())
}

/// The next request's length and marker, every byte read and checked.
fn next_request(endpoint: &mut dyn Endpoint) -> Result<Option<(usize, u8)>, Error> {
    match endpoint.recv()? {
        Some(request) => Ok(Some((request.len(), payload::read_request(request)?))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_sizes_keep_their_counts() {
        for spec in SIZES {
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
