//! Reading one callgrind output file (`cg.<pid>`, or `cg.<pid>.<part>`
//! when a process dumps more than once): the command it ran, what made it
//! dump, the instructions counted, and each function's own share.
//!
//! The format (valgrind's docs, "Callgrind Format Specification"): header
//! lines (`cmd:`, `positions:`, `events:`, `summary:`/`totals:`), then
//! `fn=` naming the function whose costs follow, one cost line per source
//! position (the positions, then a count per event). A `calls=` line says
//! the next cost line is a call's inclusive cost, which belongs to the
//! callee, not to the function's own code. Names may be compressed: the
//! first use reads `(id) name`, later ones `(id)`.

use std::collections::{BTreeMap, HashMap};

use crate::error::Error;

/// What one process's file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgFile {
    /// The command line the process ran.
    pub cmd: String,
    /// What made callgrind write it (`Program termination`,
    /// `--dump-after=<function>`, ...).
    pub trigger: String,
    /// Its instructions (`Ir`) in all.
    pub total: u64,
    /// Instructions of each function's own code.
    pub functions: BTreeMap<String, u64>,
}

impl CgFile {
    /// The subcommand the process ran (`instructions-run`, `child`, ...).
    pub fn subcommand(&self) -> Option<&str> {
        self.cmd.split_whitespace().nth(1)
    }
}

/// Reads a callgrind file with an `Ir` event.
pub fn parse(text: &str) -> Result<CgFile, Error> {
    let mut file = CgFile::default();
    let mut names = Names::default();
    let (mut positions, mut ir) = (1, None);
    let mut total = None;
    let mut current = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("fn=") {
            current = names.resolve(rest);
        } else if let Some(rest) = line.strip_prefix("cfn=") {
            names.resolve(rest);
        } else if line.starts_with("calls=") {
            lines.next(); // the call's inclusive cost
        } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
            let ir = ir.ok_or_else(|| Error::new("costs before the events: line"))?;
            *file.functions.entry(current.clone()).or_default() += field(line, positions + ir);
        } else if let Some(rest) = line.strip_prefix("cmd:") {
            file.cmd = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("desc: Trigger:") {
            file.trigger = rest.trim().to_string();
        } else if let Some(rest) = line.strip_prefix("positions:") {
            positions = rest.split_whitespace().count();
        } else if let Some(rest) = line.strip_prefix("events:") {
            ir = rest.split_whitespace().position(|e| e == "Ir");
        } else if let Some(rest) = line.strip_prefix("summary:") {
            total = Some(field(rest, ir.unwrap_or(0)));
        } else if let Some(rest) = line.strip_prefix("totals:") {
            total = total.or(Some(field(rest, ir.unwrap_or(0))));
        }
    }
    if ir.is_none() {
        return Err(Error::new("no Ir event: not a callgrind file?"));
    }
    file.total = total.unwrap_or_else(|| file.functions.values().sum());
    Ok(file)
}

/// The `at`th whitespace-separated number of `line`; a trailing count left
/// out is 0.
fn field(line: &str, at: usize) -> u64 {
    let word = line.split_whitespace().nth(at);
    word.and_then(|w| w.parse().ok()).unwrap_or(0)
}

/// Compressed function names seen so far.
#[derive(Debug, Default)]
struct Names(HashMap<String, String>);

impl Names {
    /// The name `spec` stands for: `(id) name` defines `id`, `(id)` uses it.
    fn resolve(&mut self, spec: &str) -> String {
        let Some(rest) = spec.strip_prefix('(') else {
            return spec.to_string();
        };
        let Some((id, name)) = rest.split_once(')') else {
            return spec.to_string();
        };
        let name = name.trim();
        if name.is_empty() {
            return self.0.get(id).cloned().unwrap_or_else(|| spec.to_string());
        }
        self.0.insert(id.to_string(), name.to_string());
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 42
cmd:  /t/ferry-bench child --workload pingpong
part: 1
desc: I1 cache: 
desc: Trigger: --dump-after=f

positions: line
events: Ir
summary: 170

ob=(1) /t/ferry-bench
fl=(1) src/main.rs
fn=(1) main
15 10
+1 5
cfl=(2) src/lib.rs
cfn=(2) helper
calls=3 20
16 100
* 2
fl=(2)
fn=(2)
20 30
21
fn=(3) other
1 20
totals: 170
";

    #[test]
    fn self_costs_leave_out_calls_and_follow_compressed_names() {
        let file = parse(FILE).unwrap();
        assert_eq!(file.cmd, "/t/ferry-bench child --workload pingpong");
        assert_eq!(file.subcommand(), Some("child"));
        assert_eq!(file.trigger, "--dump-after=f");
        assert_eq!(file.total, 170);
        let functions: Vec<(&str, u64)> = file
            .functions
            .iter()
            .map(|(n, c)| (n.as_str(), *c))
            .collect();
        assert_eq!(functions, [("helper", 30), ("main", 17), ("other", 20)]);
    }

    #[test]
    fn the_ir_column_is_found_among_events_and_positions() {
        let text = "positions: instr line\nevents: Bc Ir\nfn=f\n0x10 3 1 7\nsummary: 1 7\n";
        let file = parse(text).unwrap();
        assert_eq!(file.total, 7);
        assert_eq!(file.functions["f"], 7);
        assert!(parse("cmd: x\n").is_err());
    }
}
