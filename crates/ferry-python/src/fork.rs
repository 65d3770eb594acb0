//! What `fork` does to an end: nothing good. A forked child shares its
//! parent's mappings and descriptors, so two processes would hold one end;
//! ferry's ends are one process's each. The package registers
//! [`after_fork_in_child`] with `os.register_at_fork`: it starts a new
//! generation, and every end of an older one refuses every call in the
//! child (`RuntimeError`, naming the way out) and is left alone when the
//! child drops it, so the parent's pipe goes on. Ends made in the child
//! after the fork are its own.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current generation: bumped in each forked child.
pub(crate) fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Refuses an end of generation `born` in a later one.
pub(crate) fn check(born: u64) -> PyResult<()> {
    match born == generation() {
        true => Ok(()),
        false => Err(PyRuntimeError::new_err(
            "this ferry end was inherited through fork: it is the parent's. \
             Pass ends to a child as arguments under the 'spawn' or 'forkserver' \
             start method (they are picklable), or send them over a pipe",
        )),
    }
}

/// Run in a forked child (registered by the package).
#[pyfunction]
pub(crate) fn after_fork_in_child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    crate::handoff::forget_after_fork();
}
