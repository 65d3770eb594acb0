//! The fd rows: 144 B round trips with a child, with one descriptor in
//! each message or none, through the same calls either way. The descriptor
//! is a memfd: this process sends it, the child sends back the descriptor
//! it received, which this process sends next time; each side closes what
//! it sent, and at the end the descriptor held must still name the memfd.

use std::fmt::Debug;
use std::os::fd::OwnedFd;
use std::time::Instant;

use ::ferry::{Handle, Pipe, RecvError};
use rustix::fs::{MemfdFlags, fstat, memfd_create};

use super::child::{ChildArgs, Role, Seat, with_child};
use super::{Case, Sample, timed};
use crate::error::{Context, Error};
use crate::progress::Bar;

/// A way to carry a message and maybe a descriptor to the child and back:
/// an engine's fds capability ([`crate::engine::Engine::fds`]).
pub trait Carrier: Debug + Sync {
    /// The name on the command line and in reports.
    fn name(&self) -> &'static str;

    /// In this process: what the round trips go through, set up over the
    /// child's control pipe.
    fn open<'a>(&self, ctl: &'a Pipe) -> Result<Box<dyn Trip + 'a>, Error>;

    /// In the child: echoes every message with its descriptor until the
    /// parent hangs up.
    fn echo(&self, ctl: &Pipe) -> Result<(), Error>;
}

/// The parent's end of a carrier.
pub trait Trip {
    /// Sends `request` with `fd`, and receives the echo into `reply`;
    /// returns the descriptor that came back with it.
    fn round_trip(
        &mut self,
        request: &[u8],
        fd: Option<OwnedFd>,
        reply: &mut Vec<u8>,
    ) -> Result<Option<OwnedFd>, Error>;
}

/// The carrier called `name`.
pub fn by_name(name: &str) -> Result<&'static dyn Carrier, Error> {
    let found = crate::engine::carriers()
        .into_iter()
        .find(|c| c.name() == name);
    found.ok_or_else(|| Error::new(format!("no descriptor carrier is called `{name}`")))
}

/// Runs one fd row.
pub fn run(case: &Case, carrier: &dyn Carrier, fd: bool, bar: &Bar) -> Result<Sample, Error> {
    let args = ChildArgs::new(Role::Echo, carrier.name(), case.placement, Seat::Child);
    with_child(&args, |ctl, _| {
        let mut trip = carrier.open(ctl)?;
        let memfd = fd.then(|| memfd_create("ferry-bench-fd", MemfdFlags::CLOEXEC));
        let mut held = memfd.transpose().context("memfd_create")?;
        let inode = held.as_ref().map(inode_of).transpose()?;
        let sample = timed::repeat(case, bar, |request, reply| {
            let start = Instant::now();
            held = trip.round_trip(request, held.take(), reply)?;
            let took = start.elapsed();
            match held.is_some() == fd {
                true => Ok(took),
                false => Err(Error::new("the descriptor did not come back as sent")),
            }
        })?;
        match held.as_ref().map(inode_of).transpose()? == inode {
            true => Ok(sample),
            false => Err(Error::new(
                "the descriptor that came back names another file",
            )),
        }
    })
}

fn inode_of(fd: &OwnedFd) -> Result<u64, Error> {
    Ok(fstat(fd).context("fstat")?.st_ino)
}

/// ferry's pipe to the child: `send_with` and `recv_with`, the descriptor
/// as an [`Handle::Fd`].
#[derive(Debug)]
pub struct FerryCarrier;

impl Carrier for FerryCarrier {
    fn name(&self) -> &'static str {
        "ferry"
    }

    fn open<'a>(&self, ctl: &'a Pipe) -> Result<Box<dyn Trip + 'a>, Error> {
        Ok(Box::new(FerryTrip(ctl)))
    }

    fn echo(&self, ctl: &Pipe) -> Result<(), Error> {
        loop {
            match ctl.receiver().recv_with() {
                Ok(message) => ctl
                    .sender()
                    .send_with(&message.bytes, message.fds)
                    .context("echoing a message")?,
                Err(RecvError::Disconnected) => return Ok(()),
                Err(e) => return Err(e).context("receiving a message"),
            }
        }
    }
}

struct FerryTrip<'a>(&'a Pipe);

impl Trip for FerryTrip<'_> {
    fn round_trip(
        &mut self,
        request: &[u8],
        fd: Option<OwnedFd>,
        reply: &mut Vec<u8>,
    ) -> Result<Option<OwnedFd>, Error> {
        let ends: Vec<Handle> = fd.map(Handle::Fd).into_iter().collect();
        self.0
            .sender()
            .send_with(request, ends)
            .context("send_with")?;
        let mut message = self.0.receiver().recv_with().context("recv_with")?;
        *reply = message.bytes;
        let back = message.fds.pop();
        match message.fds.is_empty() {
            true => Ok(back),
            false => Err(Error::new("more than one descriptor came back")),
        }
    }
}
