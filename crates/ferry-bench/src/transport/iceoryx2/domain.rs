//! A private iceoryx2 domain for each row, so that the row can remove every
//! file iceoryx2 made for it: its root directory (by default
//! `/tmp/iceoryx2`) and its shared memory under `/dev/shm` (by default
//! prefixed `iox2_`), some of which outlive every node by design or are left
//! by a killed process. Each row gets the root
//! `$TMPDIR/ferry-bench-iceoryx2-<pid>_<n>` and the prefix
//! `iox2_fb_<pid>_<n>_` (`<pid>` the parent's), removed once the child has
//! exited; those of a dead run are swept when the next domain is made.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use ::iceoryx2::prelude::*;

use super::Peer;
use crate::error::{Context, Error};

/// The start of each row's root directory's name, in the temporary
/// directory.
const ROOT_PREFIX: &str = "ferry-bench-iceoryx2-";
/// The start of the names of each row's shared memory files.
const SHM_PREFIX: &str = "iox2_fb_";
/// Where POSIX shared memory lives on Linux.
const SHM_DIR: &str = "/dev/shm";
/// How long the parent waits for the child to exit before removing the
/// domain; a child still running then leaves it to a later sweep.
const EXIT_WAIT: Duration = Duration::from_secs(2);
/// How often it looks meanwhile.
const POLL: Duration = Duration::from_millis(1);

/// One row's iceoryx2 domain.
#[derive(Debug)]
pub struct Domain {
    /// `<pid>_<n>`: the parent's pid and its count of domains.
    tag: String,
    /// In the parent: the domain is removed when dropped, after this child
    /// (once started) has exited.
    owner: Option<Option<u32>>,
}

impl Domain {
    /// A new domain for a row of this process, with what dead runs left
    /// swept away first.
    pub fn create() -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        sweep();
        // Relaxed: only uniqueness matters.
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{}_{n}", std::process::id());
        // Left only by an earlier process that had this pid.
        remove(&tag);
        Self {
            tag,
            owner: Some(None),
        }
    }

    /// The domain `tag`, made by the parent.
    pub fn join(tag: String) -> Self {
        Self { tag, owner: None }
    }

    /// What [`Domain::join`] takes.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// In the parent: the child that must exit before the domain is removed.
    pub fn set_child(&mut self, pid: u32) {
        if let Some(child) = &mut self.owner {
            *child = Some(pid);
        }
    }

    /// iceoryx2's default configuration, in this domain.
    pub fn config(&self) -> Result<Config, Error> {
        let mut config = Config::default();
        let prefix = prefix(&self.tag);
        config.global.prefix = FileName::new(prefix.as_bytes())
            .context(format!("making {prefix:?} an iceoryx2 file name prefix"))?;
        let root = root(&self.tag);
        let path = Path::new(root.as_os_str().as_bytes())
            .context(format!("making {} an iceoryx2 path", root.display()))?;
        config.global.set_root_path(&path);
        Ok(config)
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        let Some(child) = self.owner else { return };
        if let Some(pid) = child {
            let deadline = Instant::now() + EXIT_WAIT;
            while Peer::Child(pid).gone().is_none() {
                if Instant::now() > deadline {
                    return;
                }
                sleep(POLL);
            }
        }
        remove(&self.tag);
    }
}

fn prefix(tag: &str) -> String {
    format!("{SHM_PREFIX}{tag}_")
}

fn root(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{ROOT_PREFIX}{tag}"))
}

/// Removes the files of domain `tag`, whatever of them exist.
fn remove(tag: &str) {
    // Absent if the domain was never used.
    let _ = fs::remove_dir_all(root(tag));
    let prefix = prefix(tag);
    for name in names_in(SHM_DIR.as_ref(), &prefix) {
        // Gone already if another sweep was first.
        let _ = fs::remove_file(PathBuf::from(SHM_DIR).join(name));
    }
}

/// Removes the domains whose parent process is gone.
fn sweep() {
    let dead = |rest: &str| {
        let pid = rest.split('_').next().unwrap_or_default();
        !pid.is_empty() && !PathBuf::from(format!("/proc/{pid}")).exists()
    };
    let temp = std::env::temp_dir();
    for name in names_in(&temp, ROOT_PREFIX) {
        if dead(&name[ROOT_PREFIX.len()..]) {
            let _ = fs::remove_dir_all(temp.join(&name));
        }
    }
    for name in names_in(SHM_DIR.as_ref(), SHM_PREFIX) {
        if dead(&name[SHM_PREFIX.len()..]) {
            let _ = fs::remove_file(PathBuf::from(SHM_DIR).join(&name));
        }
    }
}

/// The names in `dir` that start with `prefix`; none if it cannot be read.
fn names_in(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(prefix))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_is_removed_with_its_files_and_a_dead_runs_are_swept() {
        let domain = Domain::create();
        let (root, shm) = (root(domain.tag()), PathBuf::from(SHM_DIR));
        fs::create_dir_all(root.join("nodes")).unwrap();
        let file = shm.join(format!("{}x", prefix(domain.tag())));
        fs::write(&file, b"").unwrap();
        drop(domain);
        assert!(!root.exists() && !file.exists());

        // No process has pid u32::MAX (pids stop at 2^22).
        let stale = format!("{}_0", u32::MAX);
        fs::create_dir_all(super::root(&stale)).unwrap();
        let file = shm.join(format!("{}x", prefix(&stale)));
        fs::write(&file, b"").unwrap();
        drop(Domain::create());
        assert!(!super::root(&stale).exists() && !file.exists());
    }
}
