//! Every engine the benchmark measures, behind one trait declaring what it
//! can do: a **pipe** to a child it starts ([`Transport`]: pingpong,
//! throughput, instructions), a **server** and its clients ([`Server`]: the
//! connect and clients rows), messages carrying **fds** ([`Carrier`]: the fd
//! rows). A capability it lacks is `None`, and that workload has no row for
//! it. The workloads find engines only through [`ALL`], in report order; a
//! rival is there only with its feature.

use std::fmt::Debug;

use crate::server::{Carrier, Server};
use crate::transport::Transport;

/// An engine, and the capabilities it has. Each capability bears the
/// engine's name, the one on the command line and in reports.
pub trait Engine: Debug + Sync {
    /// Round trips and a stream with a child process.
    fn pipe(&self) -> Option<&dyn Transport> {
        None
    }

    /// A named server and its clients.
    fn server(&self) -> Option<&dyn Server> {
        None
    }

    /// Messages with a descriptor attached.
    fn fds(&self) -> Option<&dyn Carrier> {
        None
    }
}

/// Every engine, in report order.
pub const ALL: &[&dyn Engine] = crate::transport::ENGINES;

/// The pipe capabilities of every engine.
pub fn pipes() -> Vec<&'static dyn Transport> {
    ALL.iter().filter_map(|e| e.pipe()).collect()
}

/// The server capabilities of every engine.
pub fn servers() -> Vec<&'static dyn Server> {
    ALL.iter().filter_map(|e| e.server()).collect()
}

/// The descriptor-carrying capabilities of every engine.
pub fn carriers() -> Vec<&'static dyn Carrier> {
    ALL.iter().filter_map(|e| e.fds()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names an engine's capabilities bear.
    fn names(engine: &dyn Engine) -> Vec<&'static str> {
        let pipe = engine.pipe().map(|p| p.name());
        let server = engine.server().map(|s| s.name());
        [pipe, server, engine.fds().map(|c| c.name())]
            .into_iter()
            .flatten()
            .collect()
    }

    #[test]
    fn every_engine_has_a_capability_and_one_name_unique_to_it() {
        let mut seen = Vec::new();
        for engine in ALL {
            let names = names(*engine);
            assert!(!names.is_empty(), "{engine:?} can do nothing");
            assert!(names.iter().all(|n| *n == names[0]), "{names:?}");
            assert!(!seen.contains(&names[0]), "{} twice", names[0]);
            seen.push(names[0]);
        }
    }
}
