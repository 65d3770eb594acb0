//! The instructions command's rows and table: user-space instructions per
//! round trip, counted rather than timed, beside the floor's and the
//! socket's.

use serde::Serialize;

use super::columns::ratio_column;
use super::format::{format_count, format_ratio};
use super::table::{Column, Table};

/// The transports each count is compared with: the floor of a hand-written
/// shared-memory slot with a futex, and the OS's everyday socket.
const BASELINES: &[&str] = &["shm-futex", "unix-stream"];

/// What ferry's count may be, at most, over the floor's.
pub const TARGET_OVER_FLOOR: f64 = 1.5;

const NOTE: &str = "User-space instructions per round trip of both processes (the parent and the child echoing it), as (I(N2) − I(N1)) / (N2 − N1) over two runs of N1 and N2 round trips, so what is done once per run cancels out. Both processes are pinned to CPU 0 (placement same): no waiter spins there (ferry's adaptive wait yields to a peer on its CPU, then sleeps), so the count barely depends on timing. Both sides write and read every payload byte, as in pingpong. Kernel instructions are not counted.";

const CALLGRIND_NOTE: &str = "callgrind: valgrind's count of every instruction executed in each process's round-trip span (the parent's loop; the child's echo loop, from its first receive to the hang-up), on a build with rustix's libc backend (target/instructions), which valgrind can run. Repeatable to about 1% (exactly, where no waiter sleeps on a futex): whether a waiter finds its message already there or sleeps for it depends on whether the wake-up preempted its peer.";

/// One transport's count, as written to JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InstructionsRow {
    /// The transport's name.
    pub transport: &'static str,
    /// How it waits.
    pub wait: &'static str,
    /// Payload bytes each way.
    pub size: usize,
    /// Where the processes ran (always `same`).
    pub placement: &'static str,
    /// What counted: `callgrind`.
    pub counter: &'static str,
    /// The round trips of the two runs, N1 then N2.
    pub round_trips: [usize; 2],
    /// Both processes' user-space instructions in each run, over each
    /// process's round-trip span.
    pub instructions: [u64; 2],
    /// Both processes' instructions per round trip.
    pub per_round_trip: f64,
    /// The parent's share.
    pub parent_per_round_trip: Option<f64>,
    /// The child's share, likewise.
    pub child_per_round_trip: Option<f64>,
}

/// The instructions table, or none without rows.
pub fn table(rows: &[InstructionsRow]) -> Option<Table> {
    let first = rows.first()?;
    let share = |f: fn(&InstructionsRow) -> Option<f64>| {
        move |r: &InstructionsRow| f(r).map_or_else(|| "-".to_string(), format_count)
    };
    let mut columns = vec![
        Column::name("transport", |r: &InstructionsRow| r.transport.to_string()),
        Column::name("wait", |r: &InstructionsRow| r.wait.to_string()),
        Column::name("counter", |r: &InstructionsRow| r.counter.to_string()),
        Column::number("N1→N2", |r: &InstructionsRow| {
            format!("{}→{}", r.round_trips[0], r.round_trips[1])
        }),
        Column::number("instr/rt", |r: &InstructionsRow| {
            format_count(r.per_round_trip)
        }),
        Column::number("parent", share(|r| r.parent_per_round_trip)),
        Column::number("child", share(|r| r.child_per_round_trip)),
    ];
    columns.extend(BASELINES.iter().map(|&baseline| {
        let base = move |_: &InstructionsRow, r: &InstructionsRow| r.transport == baseline;
        ratio_column(rows, &format!("×{baseline}"), base, |r| r.per_round_trip)
    }));
    let title = format!(
        "instructions per round trip at {} B (placement {})",
        first.size, first.placement
    );
    Some(
        Table::new(&title, &columns, rows)
            .noted([NOTE.to_string()])
            .noted([CALLGRIND_NOTE.to_string()])
            .noted(target_note(rows)),
    )
}

/// Whether ferry meets its target over the floor, when both were counted.
fn target_note(rows: &[InstructionsRow]) -> Option<String> {
    let of = |name: &str| rows.iter().find(|r| r.transport == name);
    let (ferry, floor) = (of("ferry")?, of("shm-futex")?);
    if floor.per_round_trip <= 0.0 {
        return None;
    }
    let ratio = ferry.per_round_trip / floor.per_round_trip;
    let verdict = match ratio <= TARGET_OVER_FLOOR {
        true => "met",
        false => "NOT met",
    };
    Some(format!(
        "Target: ferry ≤ {TARGET_OVER_FLOOR}× shm-futex's instructions per round trip: {}×, {verdict}.",
        format_ratio(ratio)
    ))
}
