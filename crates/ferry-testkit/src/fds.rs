//! Counting this process's open descriptors, for leak checks.

use std::time::Duration;

/// Number of open descriptors of this process (entries of `/proc/self/fd`,
/// including the one reading the directory), not counting the one epoll
/// descriptor of ferry's hang-up watcher, which the first link of a process
/// makes once and keeps (a second one is counted: that would be a leak).
pub fn fd_count() -> usize {
    let mut epolls = 0;
    let mut count = 0;
    for entry in std::fs::read_dir("/proc/self/fd").expect("read /proc/self/fd") {
        let entry = entry.expect("an entry of /proc/self/fd");
        count += 1;
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        if target.as_os_str() == "anon_inode:[eventpoll]" {
            epolls += 1;
        }
    }
    count - epolls.min(1)
}

/// [`fd_count`] once it has stopped falling (for at most 2 s): the
/// descriptors a peer sent that this process refused are closed by
/// ferry's closer threads, a moment after the call that refused them.
pub fn settled_fd_count() -> usize {
    let start = std::time::Instant::now();
    let mut last = fd_count();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = fd_count();
        if now >= last || start.elapsed() > Duration::from_secs(2) {
            return now;
        }
        last = now;
    }
}

/// [`fd_count`] once it is back to `baseline` or below, or after 2 s:
/// for a check that refused descriptors were closed (ferry's closer
/// threads close them a moment after the call that refused them).
pub fn fd_count_back_to(baseline: usize) -> usize {
    let start = std::time::Instant::now();
    loop {
        let now = fd_count();
        if now <= baseline || start.elapsed() > Duration::from_secs(2) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
