//! The ABI's option structs (versioned by their `size` field: see
//! `raw::options`).

use crate::status::{Failure, Result};

/// Options for a new pipe (`ferry_pipe_new`, `ferry_spawn`). Set `size`
/// to `sizeof(ferry_pipe_options)` and every field you do not set to 0
/// (its default): `ferry_pipe_options o = { sizeof o };` then the fields.
/// A NULL pointer means every default.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types)]
pub struct ferry_pipe_options {
    /// `sizeof(ferry_pipe_options)` as the caller's header has it.
    pub size: usize,
    /// Each direction's ring, in bytes (a power of two from 4 KiB; 0: the
    /// default, 256 KiB).
    pub ring_size: usize,
    /// The largest message either end sends or accepts (0: the default,
    /// 256 MiB); a peer that sends a larger one broke the rules.
    pub max_message: usize,
}

impl ferry_pipe_options {
    /// ferry's options for these.
    pub(crate) fn to_ferry(self) -> Result<ferry::PipeOptions> {
        let mut options = ferry::PipeOptions::new();
        if self.ring_size != 0 {
            if !self.ring_size.is_power_of_two() || !(4096..=1 << 30).contains(&self.ring_size) {
                return Err(Failure::invalid(format!(
                    "ring_size {} is not a power of two from 4096 to 2^30",
                    self.ring_size
                )));
            }
            options = options.ring_size(self.ring_size);
        }
        if self.max_message != 0 {
            options = options.max_message(self.max_message);
        }
        Ok(options)
    }
}
