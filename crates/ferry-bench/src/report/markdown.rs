//! `report.md`: how the run was made, the charts, every table, and the
//! failures.

use std::fmt::Write as _;

use super::{Report, RunInfo};

impl Report {
    /// The whole report as Markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::from("# ferry-bench report\n\n");
        out.push_str(&self.run.markdown());
        out.push_str("\n![charts](report.svg)\n\n");
        for table in self.tables() {
            out.push_str(&table.markdown());
            out.push('\n');
        }
        if !self.run.failures.is_empty() {
            out.push_str("## Failures\n\n");
            for failure in &self.run.failures {
                let _ = writeln!(out, "- {}", failure.replace('\n', " "));
            }
        }
        out
    }
}

impl RunInfo {
    /// The command, machine, runs and time taken, as a list.
    fn markdown(&self) -> String {
        let mut out = format!("- command: `{}`\n", self.command);
        let _ = writeln!(
            out,
            "- machine: {} CPUs online, {}, Linux {}",
            self.online_cpus, self.cpu_model, self.kernel
        );
        let runs = match self.repeat {
            1 => "1".to_string(),
            n => format!("{n}, interleaved; each figure is the median of the runs'"),
        };
        let quick = if self.quick { "; quick counts" } else { "" };
        // Counted rows (instructions) run to their count, with no cap.
        let cap = match self.row_cap_s > 0.0 {
            true => format!("; time cap {} s per row", self.row_cap_s),
            false => String::new(),
        };
        let _ = writeln!(out, "- runs: {runs}{cap}{quick}");
        if let Some([fast, median, slow]) = self.line_round_trip_ns {
            let _ = writeln!(
                out,
                "- a cache line between CPUs 0 and 1, around each run: {fast}–{slow} ns round \
                 trip, median {median} (where it moves, the host moves the CPUs apart and \
                 together; `per_run` in report.json pairs each run with it)"
            );
        }
        let walls: Vec<String> = self
            .workload_wall_s
            .iter()
            .map(|(name, s)| format!("{name} {s:.1} s"))
            .collect();
        let _ = writeln!(out, "- took: {:.1} s ({})", self.wall_s, walls.join(", "));
        out
    }
}
