//! Emptying a control socket before it is closed, so that its close never
//! waits ([`recvmsg(2)`](https://man7.org/linux/man-pages/man2/recvmsg.2.html),
//! `SO_PASSCRED` in [`unix(7)`](https://man7.org/linux/man-pages/man7/unix.7.html)).
//!
//! Closing a socket releases the records still queued in it, and with
//! them the descriptors those records carry; the last close of such a
//! descriptor runs its file's release on the closing thread, which a peer
//! can make wait (a lingering TCP socket, a FUSE file). So a socket is
//! first shut both ways (no record can be queued after that), then every
//! queued record is taken, its descriptors handed to the caller (who
//! sends them to the closer), and only a socket known to be empty is
//! closed here.
//!
//! Knowing it is empty: after the shutdown, `recvmsg` returns 0 bytes both
//! at the end of the queue and for an empty record (which may carry
//! descriptors). With `SO_PASSCRED` set on the reading socket, the kernel
//! attaches `SCM_CREDENTIALS` to every record it hands out, queued before
//! or after the option was set, and nothing at the end: a return with no
//! control data at all is the end. rustix's parser of `SCM_CREDENTIALS`
//! builds a non-zero pid from what the kernel wrote, which is 0 here (the
//! sender's credentials were not recorded), so this reads the control data
//! itself.
//!
//! Soundness: `recvmsg` gets a `msghdr` whose `iov` and `control` point at
//! two local buffers with their true lengths; the returned
//! `msg_controllen` is the kernel's (at most the buffer's), and headers
//! are walked with `CMSG_FIRSTHDR`/`CMSG_NXTHDR` over that same `msghdr`,
//! each header's payload read as `int`s only within its `cmsg_len`,
//! unaligned; every descriptor read from `SCM_RIGHTS` was installed in this
//! process by that call (`MSG_CMSG_CLOEXEC`) and is owned at once.
#![allow(unsafe_code)]

use std::mem::{MaybeUninit, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Most descriptors one record can carry (the kernel's `SCM_MAX_FD`).
const SCM_MAX_FD: usize = 253;
/// Most records taken before giving up: a connected socket's queue holds
/// at most its peer's send buffer (a few hundred records).
const MOST_RECORDS: usize = 4096;

/// Control buffer room: `SCM_RIGHTS` for [`SCM_MAX_FD`] descriptors and
/// `SCM_CREDENTIALS`, with headers and padding (in `u64`s, for alignment).
const CONTROL_WORDS: usize = (SCM_MAX_FD * 4 + 12 + 4 * 16) / 8 + 1;

/// What a socket held when it was emptied.
pub(crate) struct Drained {
    /// The descriptors its queued records carried.
    pub fds: Vec<OwnedFd>,
    /// Whether the queue is known to be empty (else the socket must be
    /// closed where a wait does no harm).
    pub empty: bool,
}

/// Shuts `socket` both ways and takes every record queued in it.
pub(crate) fn drain(socket: BorrowedFd<'_>) -> Drained {
    let mut out = Drained {
        fds: Vec::new(),
        empty: false,
    };
    let _ = rustix::net::shutdown(socket, rustix::net::Shutdown::Both);
    if rustix::net::sockopt::set_socket_passcred(socket, true).is_err() {
        return out;
    }
    for _ in 0..MOST_RECORDS {
        match take_one(socket, &mut out.fds) {
            Some(true) => {}
            Some(false) => {
                out.empty = true;
                return out;
            }
            None => return out,
        }
    }
    out
}

/// Takes one record: `Some(true)` if there was one, `Some(false)` at the
/// end of the queue, `None` if it cannot be told (an error, or
/// descriptors the kernel could not install here).
fn take_one(socket: BorrowedFd<'_>, fds: &mut Vec<OwnedFd>) -> Option<bool> {
    let mut data = [0u8; 64];
    let mut control = [MaybeUninit::<u64>::uninit(); CONTROL_WORDS];
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: an all-zero `msghdr` is valid (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &raw mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
    let flags = libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC;
    // SAFETY: `msg` points at `iov` (which points at `data`) and at
    // `control`, each with its true length, all alive for the call.
    let got = unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut msg, flags) };
    if got < 0 {
        return None;
    }
    let mut record = false;
    // SAFETY: `msg` is the header the kernel just filled; `CMSG_FIRSTHDR`
    // and `CMSG_NXTHDR` stay within its `msg_controllen` bytes of `control`.
    let mut header = unsafe { libc::CMSG_FIRSTHDR(&raw const msg) };
    while !header.is_null() {
        record = true;
        // SAFETY: `header` is non-null and within the control data (see
        // above); the read is unaligned-safe.
        let cmsg = unsafe { header.read_unaligned() };
        if cmsg.cmsg_level == libc::SOL_SOCKET && cmsg.cmsg_type == libc::SCM_RIGHTS {
            // SAFETY: `CMSG_LEN(0)` is a constant computation.
            let start = unsafe { libc::CMSG_LEN(0) } as usize;
            let count = (cmsg.cmsg_len as usize).saturating_sub(start) / size_of::<libc::c_int>();
            // SAFETY: the payload of `header` spans `cmsg_len - CMSG_LEN(0)`
            // bytes inside the control data.
            let payload = unsafe { libc::CMSG_DATA(header) };
            for i in 0..count {
                // SAFETY: `i` < `count`, so the `int` lies within the
                // payload; read unaligned.
                let raw = unsafe {
                    payload
                        .add(i * size_of::<libc::c_int>())
                        .cast::<libc::c_int>()
                        .read_unaligned()
                };
                if raw >= 0 {
                    // SAFETY: the kernel installed `raw` in this process
                    // for this call; nothing else owns it.
                    fds.push(unsafe { OwnedFd::from_raw_fd(raw) });
                }
            }
        }
        // SAFETY: as for `CMSG_FIRSTHDR` above.
        header = unsafe { libc::CMSG_NXTHDR(&raw const msg, header) };
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return None;
    }
    Some(record || got > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sys::socket_pair;
    use std::os::fd::AsFd;

    /// Empty records (one with a descriptor) ahead of a record with data
    /// and two descriptors: every descriptor is taken out, and the queue is
    /// then known empty (an empty record is not the end).
    #[test]
    fn every_queued_descriptor_is_taken_out_past_empty_records() {
        let (ours, theirs) = socket_pair().unwrap();
        let (r, w) = rustix::pipe::pipe().unwrap();
        theirs.try_send(&[], &[]).unwrap();
        theirs.try_send(&[], &[r.as_fd()]).unwrap();
        theirs.try_send(&[7; 40], &[r.as_fd(), w.as_fd()]).unwrap();
        let drained = drain(ours.as_fd());
        assert_eq!(drained.fds.len(), 3);
        assert!(drained.empty);
        // Shut both ways: nothing more can be queued.
        assert!(theirs.try_send(&[1], &[w.as_fd()]).is_err());
    }

    /// A socket whose peer has gone, with nothing queued, is empty.
    #[test]
    fn a_hung_up_socket_with_nothing_queued_is_empty() {
        let (ours, theirs) = socket_pair().unwrap();
        drop(theirs);
        let drained = drain(ours.as_fd());
        assert!(drained.fds.is_empty() && drained.empty);
    }
}
