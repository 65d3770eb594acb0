//! Linux backend of [`crate::sys`], built on `rustix`.

pub(crate) mod cpu;
pub(crate) mod futex;
pub(crate) mod memory;
pub(crate) mod process;
pub(crate) mod socket;
pub(crate) mod watch;
