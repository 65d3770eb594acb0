//! The one-way stream: the parent sends messages of one size as fast as
//! the transport takes them; the child folds every byte into a checksum,
//! which it sends back when the stream ends, for the parent to compare.
//!
//! The timed span starts after a warm-up, once the child has answered a
//! CPU query (so it has drained the warm-up), and ends when its answer to
//! the end of the stream arrives (so every timed message has been read).

use std::time::{Duration, Instant};

use crate::child::{self, Workload};
use crate::control::{self, StreamReport};
use crate::cpu;
use crate::error::Error;
use crate::matrix::Bench;
use crate::payload;
use crate::placement::{CpuLog, MESSAGES_PER_NOTE, Placement, Seen};
use crate::pool::{Mark, PoolUse};
use crate::progress::Bar;
use crate::stats::{micros, nanos};
use crate::transport::{Endpoint, Transport};

/// The share of the timed span (or count) a row warms up for first.
const WARMUP_SHARE: u32 = 10;
/// Messages between looks at the clock, for small ones: about this many
/// bytes.
const CLOCK_EVERY_BYTES: usize = 64 * 1024;
/// The most messages sent between looks at the clock.
const CLOCK_EVERY_MAX: usize = 64;

/// How much a row streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// This many messages (after a tenth as many untimed), unless the
    /// row's time cap stops it first.
    Count(usize),
    /// As many messages as fit in this long (after a tenth as long
    /// untimed).
    Time(Duration),
}

/// One row: a transport streaming messages of one size.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// What carries the messages.
    pub transport: &'static dyn Transport,
    /// Where the two processes run.
    pub placement: Placement,
    /// Payload bytes per message.
    pub size: usize,
    /// How much it streams.
    pub amount: Amount,
    /// A row of a fixed count stops once it has run this long.
    pub cap: Duration,
}

/// What one run of a row measured.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Timed messages sent and received.
    pub messages: usize,
    /// The timed span.
    pub elapsed: Duration,
    /// Both processes' CPU time over the timed span.
    pub cpu: Duration,
    /// The time cap stopped a row of a fixed count before its count.
    pub capped: bool,
    /// ferry's block pool in this process (the sender) over the timed span.
    pub pool: PoolUse,
    /// How often both processes were on one CPU in the timed span.
    pub seen: Seen,
}

impl Sample {
    /// Messages per second.
    pub fn rate(&self) -> f64 {
        self.messages as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// GiB per second, for messages of `size` bytes.
    pub fn gib_per_s(&self, size: usize) -> f64 {
        self.rate() * size as f64 / (1u64 << 30) as f64
    }

    /// CPU time per message, both processes.
    pub fn cpu_per_message(&self) -> Duration {
        self.cpu.div_f64(self.messages.max(1) as f64)
    }
}

impl Bench for Case {
    type Sample = Sample;

    fn label(&self) -> String {
        let (name, size) = (self.transport.name(), self.size);
        format!("{name} streaming {size} B ({})", self.placement.name())
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn work(&self) -> u64 {
        Meter::total(self)
    }

    fn run(&self, bar: &Bar) -> Result<Sample, Error> {
        let parent = |endpoint: &mut dyn Endpoint| stream(endpoint, self, bar);
        child::run(Workload::Throughput, self.transport, self.placement, parent)
    }

    fn brief(sample: &Sample) -> String {
        let capped = if sample.capped { " (capped)" } else { "" };
        format!(
            "{:.0} msg/s, cpu {:.2} µs/msg{capped}",
            sample.rate(),
            micros(sample.cpu_per_message())
        )
    }

    fn seen(sample: &Sample) -> Option<Seen> {
        Some(sample.seen)
    }
}

/// A position-weighted sum of every byte of every message: the `i`-th
/// message (from 1) adds `i` times the sum of its bytes, so a lost,
/// repeated, reordered or altered message changes it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checksum {
    /// Messages folded in.
    pub messages: u64,
    /// The weighted sum, wrapping.
    pub sum: u64,
}

impl Checksum {
    /// Folds in the next message, given the sum of its bytes.
    pub fn add(&mut self, byte_sum: u64) {
        self.messages += 1;
        self.sum = self.sum.wrapping_add(self.messages.wrapping_mul(byte_sum));
    }
}

/// The sum of every byte of `buf`, read a vector at a time.
pub fn byte_sum(buf: &[u8]) -> u64 {
    // A u32 lane cannot overflow within a chunk: 255 × 2^16 < 2^32.
    buf.chunks(1 << 16)
        .map(|chunk| u64::from(chunk.iter().map(|&b| u32::from(b)).sum::<u32>()))
        .sum()
}

fn stream(endpoint: &mut dyn Endpoint, case: &Case, bar: &Bar) -> Result<Sample, Error> {
    let mut meter = Meter::new(case, bar);
    let mut sent = Checksum::default();
    let mut send = |endpoint: &mut dyn Endpoint| -> Result<(), Error> {
        let marker = payload::marker(sent.messages as usize);
        endpoint
            .send_filled(case.size, &mut |buf| payload::fill(buf, marker))
            .map_err(|e| e.within(format!("message {}", sent.messages)))?;
        sent.add(u64::from(marker) * case.size as u64);
        Ok(())
    };
    let every = (CLOCK_EVERY_BYTES / case.size.max(1)).clamp(1, CLOCK_EVERY_MAX);
    let (count, deadline) = match case.amount {
        Amount::Count(count) => (count, case.cap),
        Amount::Time(time) => (usize::MAX, time),
    };
    // Warm-up: a tenth of the count (for a timed row, without end) and of
    // the time.
    let (warmup, warmup_time) = (count / WARMUP_SHARE as usize, deadline / WARMUP_SHARE);
    let mut n = 0;
    while n < warmup {
        send(endpoint)?;
        n += 1;
        if n % every == 0 {
            meter.at(n, 0);
            if meter.elapsed() > warmup_time {
                break;
            }
        }
    }
    // The child answers only after reading every message before the query.
    let child_before = control::child_cpu(endpoint)?;
    let own_before = cpu::process_time();
    let pool = Mark::now();
    let start = Instant::now();
    let mut messages = 0;
    let mut capped = false;
    let mut cpus = CpuLog::new(MESSAGES_PER_NOTE);
    while messages < count {
        send(endpoint)?;
        cpus.tick();
        messages += 1;
        if messages % every == 0 {
            meter.at(n, messages);
            if start.elapsed() > deadline {
                capped = matches!(case.amount, Amount::Count(_)) && messages < count;
                break;
            }
        }
    }
    let pool = pool.since();
    let report = control::end_stream(endpoint)?;
    let elapsed = start.elapsed();
    let own = cpu::process_time().saturating_sub(own_before);
    meter.finish();
    verify(&report, sent)?;
    Ok(Sample {
        messages,
        elapsed,
        cpu: own + report.cpu.saturating_sub(child_before.cpu),
        capped,
        pool,
        seen: Seen::of(&cpus.take(), &report.cpus),
    })
}

/// Moves a row's progress bar: in messages for a fixed count, in
/// milliseconds for a fixed time.
struct Meter<'a> {
    bar: &'a Bar,
    amount: Amount,
    total: u64,
    shown: u64,
    started: Instant,
}

impl<'a> Meter<'a> {
    fn new(case: &Case, bar: &'a Bar) -> Self {
        Self {
            bar,
            amount: case.amount,
            total: Self::total(case),
            shown: 0,
            started: Instant::now(),
        }
    }

    /// The units of a whole row.
    fn total(case: &Case) -> u64 {
        match case.amount {
            Amount::Count(count) => (count + count / WARMUP_SHARE as usize) as u64,
            Amount::Time(time) => (time + time / WARMUP_SHARE).as_millis() as u64,
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Shows the row `warmup` messages and `timed` messages in.
    fn at(&mut self, warmup: usize, timed: usize) {
        let units = match self.amount {
            Amount::Count(_) => (warmup + timed) as u64,
            Amount::Time(_) => self.elapsed().as_millis() as u64,
        };
        let units = units.min(self.total);
        if units > self.shown {
            self.bar.advance(units - self.shown);
            self.shown = units;
        }
    }

    fn finish(self) {
        self.bar.advance(self.total.saturating_sub(self.shown));
    }
}

/// Checks the child received exactly what was sent.
fn verify(report: &StreamReport, sent: Checksum) -> Result<(), Error> {
    if report.messages != sent.messages {
        return Err(Error::new(format!(
            "the child received {} messages, {} were sent",
            report.messages, sent.messages
        )));
    }
    if report.checksum != sent.sum {
        return Err(Error::new(format!(
            "the child's checksum is {:#018x}, what was sent sums to {:#018x}",
            report.checksum, sent.sum
        )));
    }
    Ok(())
}

/// Counts a payload into `received` (`None`), or says which control
/// message came: whether it ends the stream.
#[inline]
fn take(received: &mut Checksum, message: &[u8]) -> Option<bool> {
    match message {
        control::CPU_QUERY => Some(false),
        control::STREAM_END => Some(true),
        _ => {
            received.add(byte_sum(message));
            None
        }
    }
}

/// In the child: reads and sums every message, answering the parent's
/// control messages (with the CPUs it noted since the last), until the
/// parent closes its end.
pub fn receive(endpoint: &mut dyn Endpoint) -> Result<(), Error> {
    let mut received = Checksum::default();
    let mut cpus = CpuLog::new(MESSAGES_PER_NOTE);
    loop {
        let step = if endpoint.reads_in_scope() {
            let mut step = None;
            if !endpoint.recv_read(&mut |message| step = take(&mut received, message))? {
                return Ok(());
            }
            step
        } else {
            match endpoint.recv()? {
                None => return Ok(()),
                Some(message) => take(&mut received, message),
            }
        };
        let Some(ends) = step else {
            cpus.tick();
            continue;
        };
        let words = [received.messages, received.sum, nanos(cpu::process_time())];
        // A CPU query is answered with the CPU time alone.
        let words = if ends { &words[..] } else { &words[2..] };
        control::answer(endpoint, words, &mut cpus)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definitions::DEFINITIONS;

    #[test]
    fn byte_sums_cover_every_byte() {
        assert_eq!(byte_sum(&[]), 0);
        assert_eq!(byte_sum(&vec![255; 1 << 20]), 255 << 20);
        let mut buf = vec![1u8; 100_001];
        buf[100_000] = 9;
        assert_eq!(byte_sum(&buf), 100_000 + 9);
    }

    #[test]
    fn the_checksum_sees_order_and_loss() {
        let fold = |sums: &[u64]| {
            let mut c = Checksum::default();
            sums.iter().for_each(|&s| c.add(s));
            c
        };
        assert_ne!(fold(&[1, 2, 3]), fold(&[2, 1, 3]));
        assert_ne!(fold(&[1, 2, 3]).sum, fold(&[1, 2]).sum);
        assert_eq!(fold(&[1, 2, 3]).messages, 3);
    }

    #[test]
    fn a_row_warms_up_for_a_tenth_more() {
        let case = |amount| Case {
            transport: crate::engine::pipes()[0],
            placement: Placement::Unpinned,
            size: 64,
            amount,
            cap: Duration::from_secs(1),
        };
        assert_eq!(Meter::total(&case(Amount::Count(1000))), 1100);
        assert_eq!(
            Meter::total(&case(Amount::Time(DEFINITIONS.throughput.duration))),
            1100
        );
    }
}
