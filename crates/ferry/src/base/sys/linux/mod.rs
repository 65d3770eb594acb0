//! Linux backend of [`crate::base::sys`], built on `rustix`.

pub(crate) mod cpu;
pub(crate) mod doorbell;
pub(crate) mod drain;
pub(crate) mod futex;
pub(crate) mod listener;
pub(crate) mod memory;
pub(crate) mod peer;
pub(crate) mod poller;
pub(crate) mod process;
pub(crate) mod rlimit;
pub(crate) mod socket;
pub(crate) mod thread;
