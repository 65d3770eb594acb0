//! The backend for every OS that has no real one yet: it compiles, so the
//! crate builds everywhere, and every call that would need shared memory,
//! a futex or a control socket fails with `ErrorKind::Unsupported` (or, for
//! the few calls that cannot fail, gives the answer of a machine with one
//! CPU). A new backend replaces these items one folder over, with the same
//! names and signatures (see [`crate::base::sys`] for what each must promise).
//!
//! The types that stand for a live object (`SharedMemory`, `Mapping`,
//! `ControlSocket`) hold an `Infallible`: no value of them can exist here,
//! so their methods are never called and need no body.

use std::io;

fn unsupported<T>() -> io::Result<T> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "ferry has no backend for this operating system yet (Linux only)",
    ))
}

pub(crate) mod cpu {
    #[cfg(feature = "internals")]
    use std::io;

    /// The CPU this thread runs on: unknown here, so always 0.
    #[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
    pub fn current_cpu() -> usize {
        0
    }

    /// CPUs this process may run on, as the standard library sees them.
    #[cfg_attr(not(feature = "internals"), allow(unreachable_pub))]
    pub fn online_cpus() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Whether this thread may run on `cpu`: no affinity is seen here, so
    /// any.
    pub(crate) fn may_run_on(_cpu: usize) -> bool {
        true
    }

    /// Whether this thread may run on more than one CPU: no affinity is
    /// seen here, so yes.
    pub(crate) fn may_move() -> bool {
        true
    }

    /// Gives the CPU to another runnable thread, if any.
    pub(crate) fn yield_cpu() {
        std::thread::yield_now();
    }

    /// Pins this thread to one CPU: not possible here, so `Unsupported`.
    ///
    /// # Errors
    ///
    /// Always `ErrorKind::Unsupported`.
    #[cfg(feature = "internals")]
    pub fn pin_to_cpu(_cpu: usize) -> io::Result<()> {
        super::unsupported()
    }
}

pub(crate) mod futex {
    use std::time::Duration;

    use crate::base::sync::AtomicU32;

    /// Never reached (no ring can be shared here); sleeps a little, as a
    /// spurious wakeup would, rather than spin.
    pub(crate) fn futex_wait(_word: &AtomicU32, _expected: u32, timeout: Duration) -> bool {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        true
    }

    pub(crate) fn futex_wake(_word: &AtomicU32, _n: u32) {}

    /// Sleeps a little, as a spurious wakeup would: the caller looks again.
    pub(crate) fn private_wait(_word: &AtomicU32, _expected: u32, timeout: Duration) {
        std::thread::sleep(timeout.min(Duration::from_micros(100)));
    }

    /// Wakes no one (no thread sleeps in `private_wait` here).
    pub(crate) fn private_wake(_word: &AtomicU32, _n: u32) -> usize {
        0
    }
}

pub(crate) mod memory {
    use std::convert::Infallible;
    use std::io;
    use std::os::fd::BorrowedFd;

    use crate::base::sys::{Access, PeerAccess};

    #[derive(Debug)]
    pub(crate) struct SharedMemory(Infallible);

    impl SharedMemory {
        pub(crate) fn create(_name: &str, _len: usize) -> io::Result<Self> {
            super::unsupported()
        }
        pub(crate) fn create_sole_writer(_name: &str, _len: usize) -> io::Result<(Self, Mapping)> {
            super::unsupported()
        }
        pub(crate) fn from_peer(
            _fd: crate::base::sys::PeerFd,
            _min_len: usize,
            _max_len: usize,
            _access: PeerAccess,
        ) -> Result<Self, crate::base::wire::Violation> {
            Err(crate::base::wire::Violation::NotSealable)
        }
        pub(crate) fn len(&self) -> usize {
            match self.0 {}
        }
        pub(crate) fn fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
        pub(crate) fn identity(&self) -> io::Result<(u64, u64)> {
            match self.0 {}
        }
        pub(crate) fn map(&self) -> io::Result<Mapping> {
            match self.0 {}
        }
        pub(crate) fn map_with(&self, _access: Access) -> io::Result<Mapping> {
            match self.0 {}
        }
    }

    pub(crate) fn is_shortage(_e: &io::Error) -> bool {
        false
    }

    #[derive(Debug)]
    pub(crate) struct Mapping(Infallible);

    impl Mapping {
        pub(crate) fn as_ptr(&self) -> *mut u8 {
            match self.0 {}
        }
        pub(crate) fn len(&self) -> usize {
            match self.0 {}
        }
    }
}

pub(crate) mod thread {
    use std::io;
    use std::thread::JoinHandle;

    /// Starts a thread: no signal mask is set here (no signals to block
    /// are known on this OS yet).
    pub(crate) fn spawn_quiet<F>(
        name: &str,
        stack: Option<usize>,
        f: F,
    ) -> io::Result<JoinHandle<()>>
    where
        F: FnOnce() + Send + 'static,
    {
        let mut builder = std::thread::Builder::new().name(name.into());
        if let Some(stack) = stack {
            builder = builder.stack_size(stack);
        }
        builder.spawn(f)
    }
}

pub(crate) mod rlimit {
    /// The descriptor limit: not seen here.
    pub(crate) fn descriptor_limit() -> Option<u64> {
        None
    }
}

pub(crate) mod process {
    use std::io;
    use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
    use std::process::Command;

    pub(crate) fn inherit_in_child(_cmd: &mut Command, _fd: BorrowedFd<'_>) -> RawFd {
        -1
    }

    pub(crate) fn adopt_inherited(_raw: RawFd) -> io::Result<OwnedFd> {
        super::unsupported()
    }

    pub(crate) fn adopt_inherited_pipe(_raw: RawFd) -> io::Result<OwnedFd> {
        super::unsupported()
    }

    // Used by typed descriptor fields and async clones only.
    #[cfg_attr(not(any(feature = "serde", feature = "tokio")), allow(dead_code))]
    pub(crate) fn duplicate(_fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
        super::unsupported()
    }

    pub(crate) fn parent_pid() -> Option<u32> {
        None
    }
}

pub(crate) mod peer {
    use std::convert::Infallible;
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd};

    use crate::base::sys::Credentials;

    /// No process handle here: `open` and `of_peer` find none, so links
    /// fall back to their socket's hang-up.
    #[derive(Debug)]
    pub(crate) struct Process(Infallible);

    impl Process {
        pub(crate) fn open(_pid: u32) -> io::Result<Option<Self>> {
            Ok(None)
        }
        pub(crate) fn of_peer(_socket: BorrowedFd<'_>) -> io::Result<Option<Self>> {
            Ok(None)
        }
        pub(crate) fn from_peer(_fd: crate::base::sys::PeerFd) -> Self {
            unreachable!("no descriptor reaches this backend: socket_pair and adopt_inherited fail")
        }
        pub(crate) fn exited(&self) -> bool {
            match self.0 {}
        }
    }

    impl AsFd for Process {
        fn as_fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
    }

    pub(crate) fn credentials(_fd: BorrowedFd<'_>) -> io::Result<Credentials> {
        super::unsupported()
    }
}

pub(crate) mod listener {
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::time::{Duration, Instant};

    use super::socket::ControlSocket;
    use crate::base::sys::{Credentials, SocketName};

    #[derive(Debug)]
    pub(crate) struct Listener {
        fd: OwnedFd,
    }

    impl Listener {
        pub(crate) fn bind(_name: &SocketName<'_>, _backlog: i32) -> io::Result<Self> {
            super::unsupported()
        }

        pub(crate) fn accept(&self) -> io::Result<Option<(ControlSocket, Credentials)>> {
            super::unsupported()
        }
    }

    impl AsFd for Listener {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    pub(crate) fn connect(_name: &SocketName<'_>, _timeout: Duration) -> io::Result<ControlSocket> {
        super::unsupported()
    }

    pub(crate) fn effective_uid() -> u32 {
        u32::MAX
    }

    pub(crate) fn random_bytes(_buf: &mut [u8]) -> io::Result<()> {
        super::unsupported()
    }

    pub(crate) fn wait_readable(
        _fds: &[BorrowedFd<'_>],
        _deadline: Option<Instant>,
    ) -> io::Result<Vec<bool>> {
        super::unsupported()
    }

    pub(crate) fn note_pipe(_note: &[u8]) -> io::Result<OwnedFd> {
        super::unsupported()
    }

    pub(crate) fn read_note(
        _fd: &OwnedFd,
        _most: usize,
        _deadline: Instant,
    ) -> io::Result<Vec<u8>> {
        super::unsupported()
    }
}

pub(crate) mod socket {
    use std::convert::Infallible;
    use std::io;
    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::time::Instant;

    use crate::base::sys::Received;

    #[derive(Debug)]
    pub(crate) struct ControlSocket(Infallible);

    pub(crate) fn socket_pair() -> io::Result<(ControlSocket, ControlSocket)> {
        super::unsupported()
    }

    impl crate::base::sys::Emptied for ControlSocket {
        fn empty_out(&self) -> (Vec<OwnedFd>, bool) {
            match self.0 {}
        }
    }

    // As the real one, which closes its descriptor.
    impl Drop for ControlSocket {
        fn drop(&mut self) {
            match self.0 {}
        }
    }

    impl ControlSocket {
        pub(crate) fn from_fd(_fd: OwnedFd) -> Self {
            unreachable!("no descriptor reaches this backend: socket_pair and adopt_inherited fail")
        }
        pub(crate) fn from_peer(
            fd: crate::base::sys::PeerFd,
        ) -> Result<Self, crate::base::sys::PeerFd> {
            Err(fd)
        }
        pub(crate) fn as_fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
        pub(crate) fn try_send(&self, _bytes: &[u8], _fds: &[BorrowedFd<'_>]) -> io::Result<()> {
            match self.0 {}
        }
        pub(crate) fn wait_writable(&self, _deadline: Option<Instant>) -> io::Result<()> {
            match self.0 {}
        }
        pub(crate) fn try_recv(&self, _buf: &mut [u8]) -> io::Result<Received> {
            match self.0 {}
        }
        pub(crate) fn peek(&self, _buf: &mut [u8]) -> io::Result<Received> {
            match self.0 {}
        }
        pub(crate) fn shutdown(&self) {
            match self.0 {}
        }
        pub(crate) fn peer_hung_up(&self) -> bool {
            match self.0 {}
        }
    }
}

pub(crate) mod poller {
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd};
    use std::time::Duration;

    /// What a registered descriptor is watched for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Interest {
        /// Its peer's hang-up.
        HangUp,
        /// Readable.
        Readable,
        /// A process handle's process exited.
        Exited,
    }

    /// No poller here: `new` fails, so none exists.
    #[derive(Debug)]
    pub(crate) struct Poller(std::convert::Infallible);

    impl Poller {
        pub(crate) fn new() -> io::Result<Self> {
            super::unsupported()
        }
        pub(crate) fn add(&self, _fd: BorrowedFd<'_>, _key: u64, _i: Interest) -> io::Result<()> {
            match self.0 {}
        }
        pub(crate) fn add_or_take_over(
            &self,
            _fd: BorrowedFd<'_>,
            _key: u64,
            _i: Interest,
        ) -> io::Result<()> {
            match self.0 {}
        }
        pub(crate) fn delete(&self, _fd: BorrowedFd<'_>) -> io::Result<()> {
            match self.0 {}
        }
        pub(crate) fn wait(&self, _keys: &mut Vec<u64>, _t: Option<Duration>) -> io::Result<()> {
            match self.0 {}
        }
    }

    impl AsFd for Poller {
        fn as_fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
    }
}

pub(crate) mod doorbell {
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd};

    /// No doorbell here: `new` fails, so none exists.
    #[derive(Debug)]
    pub(crate) struct Doorbell(std::convert::Infallible);

    /// No ringer here either.
    #[derive(Debug)]
    pub(crate) struct Ringer(std::convert::Infallible);

    impl Doorbell {
        pub(crate) fn new() -> io::Result<(Self, Ringer)> {
            super::unsupported()
        }
        pub(crate) fn clear(&self) {
            match self.0 {}
        }
        pub(crate) fn ring_known(&self, _ringer: &Ringer) {
            match self.0 {}
        }
        pub(crate) fn known_readable(&self) -> bool {
            match self.0 {}
        }
    }

    impl Ringer {
        pub(crate) fn from_peer(
            _fd: crate::base::sys::PeerFd,
        ) -> Result<Self, crate::base::wire::Violation> {
            Err(crate::base::wire::Violation::DoorbellNotDatagramSocket)
        }
        pub(crate) fn ring(&self) {
            match self.0 {}
        }
    }

    impl AsFd for Doorbell {
        fn as_fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
    }

    impl AsFd for Ringer {
        fn as_fd(&self) -> BorrowedFd<'_> {
            match self.0 {}
        }
    }
}
