//! What the benchmark runs, as data: each workload's sizes, counts,
//! durations and placements, in one table; the command line's flags
//! override them row by row.

use std::time::Duration;

use crate::placement::Placement;

/// Every workload's definition.
#[derive(Debug, Clone, Copy)]
pub struct Definitions {
    /// Where rows run when `--placement` is not given.
    pub placements: &'static [Placement],
    /// Each row stops after this long (some transports, such as two
    /// spinners sharing one CPU, take milliseconds per round trip).
    pub row_seconds: f64,
    /// Each row's time cap with `--quick`.
    pub quick_row_seconds: f64,
    pub pingpong: Pingpong,
    pub throughput: Throughput,
    pub calls: Calls,
    pub server: Server,
    pub instructions: Instructions,
}

/// The round trips between two processes.
#[derive(Debug, Clone, Copy)]
pub struct Pingpong {
    /// Chromium's IPC ping-pong sizes (12 × 12ⁿ bytes) and 1 MiB, each with
    /// its timed round trips.
    pub sizes: &'static [SizeSpec],
    /// Round trips per size with `--quick`.
    pub quick_count: usize,
}

/// A message size and the round trips it runs by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeSpec {
    /// Payload bytes each way.
    pub size: usize,
    /// Timed round trips.
    pub count: usize,
}

/// The one-way stream.
#[derive(Debug, Clone, Copy)]
pub struct Throughput {
    /// The stream's message sizes.
    pub sizes: &'static [usize],
    /// How long each row streams: every transport gets the same time,
    /// whatever its speed (ferry sends millions of small messages a
    /// second; a slot handed over with a futex wake, tens of thousands).
    pub duration: Duration,
    /// How long each row streams with `--quick`.
    pub quick_duration: Duration,
}

/// The in-process calls.
#[derive(Debug, Clone, Copy)]
pub struct Calls {
    /// Calls per run by way of calling: enough for some tens of
    /// milliseconds. Direct calls, closures and typed channels on one
    /// thread; a ferry pipe within one thread (alone or in a select);
    /// anything that hops to another thread.
    pub counts: CallCounts,
    /// Timed batches per run (after one untimed batch).
    pub batches: usize,
    /// With `--quick`, this share of the count (at least one call a batch).
    pub quick_share: usize,
}

/// Calls per run, by how far a call goes.
#[derive(Debug, Clone, Copy)]
pub struct CallCounts {
    pub in_thread: usize,
    pub pipe_in_thread: usize,
    pub other_thread: usize,
}

/// The named server.
#[derive(Debug, Clone, Copy)]
pub struct Server {
    /// Payload bytes of every request and reply.
    pub size: usize,
    /// Connects per connect row.
    pub connects: usize,
    /// Round trips per fd row.
    pub fd_round_trips: usize,
    /// Timed operations per connect or fd row with `--quick`.
    pub quick_count: usize,
    /// Clients of the one server in a clients row.
    pub clients: usize,
    /// How long the clients make round trips, per row.
    pub window: Duration,
    /// The window with `--quick`.
    pub quick_window: Duration,
}

/// The instructions command (always at placement `same`).
#[derive(Debug, Clone, Copy)]
pub struct Instructions {
    /// The transports counted by default: ferry, the floor, the socket.
    pub transports: &'static [&'static str],
    /// Payload bytes each way.
    pub size: usize,
    /// Round trips of the two runs.
    pub rounds: [usize; 2],
    /// Round trips of the two runs with `--quick`: a few seconds per
    /// transport under callgrind. Fewer (200 and 400) left ferry's count to
    /// a handful of waits that found the peer slow under valgrind and slept.
    pub quick_rounds: [usize; 2],
}

/// The benchmark.
pub const DEFINITIONS: Definitions = Definitions {
    placements: &[Placement::Unpinned],
    row_seconds: 10.0,
    quick_row_seconds: 1.0,
    pingpong: Pingpong {
        sizes: &[
            SizeSpec::new(12, 50_000),
            SizeSpec::new(144, 50_000),
            SizeSpec::new(1_728, 50_000),
            SizeSpec::new(20_736, 12_000),
            SizeSpec::new(248_832, 1_000),
            SizeSpec::new(1_048_576, 500),
        ],
        quick_count: 300,
    },
    throughput: Throughput {
        sizes: &[64, 1_024, 65_536, 1_048_576],
        duration: Duration::from_secs(1),
        quick_duration: Duration::from_millis(100),
    },
    calls: Calls {
        counts: CallCounts {
            in_thread: 2_000_000,
            pipe_in_thread: 200_000,
            other_thread: 20_000,
        },
        batches: 20,
        quick_share: 20,
    },
    server: Server {
        size: 144,
        connects: 2_000,
        fd_round_trips: 20_000,
        quick_count: 100,
        clients: 100,
        window: Duration::from_secs(2),
        quick_window: Duration::from_millis(200),
    },
    instructions: Instructions {
        transports: &["ferry", "shm-futex", "unix-stream"],
        size: 144,
        rounds: [2_000, 4_000],
        quick_rounds: [1_000, 2_000],
    },
};

impl SizeSpec {
    /// A size and its default count.
    pub const fn new(size: usize, count: usize) -> Self {
        Self { size, count }
    }
}
