//! This process's resource limits
//! ([`getrlimit(2)`](https://man7.org/linux/man-pages/man2/getrlimit.2.html)).

/// The soft limit on this process's descriptors (`RLIMIT_NOFILE`): one
/// more than the highest descriptor number it may open. `None` if it
/// cannot be read or is unlimited.
pub(crate) fn descriptor_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}
