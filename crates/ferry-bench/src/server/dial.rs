//! The connect rows: a server of one engine in a child, and this process
//! connecting to it over and over. Each time it asks the child where to
//! connect (untimed), connects and makes one 144 B round trip (timed
//! together), checks the reply, and hangs up (untimed).

use std::time::Instant;

use super::child::{ChildArgs, Helper, Role, Seat, next_address};
use super::engine::Server;
use super::{Case, SIZE, Sample, timed};
use crate::error::Error;
use crate::payload;
use crate::progress::Bar;

/// Runs one connect row.
pub fn run(case: &Case, engine: &dyn Server, bar: &Bar) -> Result<Sample, Error> {
    let args = ChildArgs::new(Role::Serve, engine.name(), case.placement, Seat::Child);
    let server = Helper::start(&args)?;
    let measured = measure(case, engine, &server.ctl, bar);
    server.finish(measured)
}

fn measure(
    case: &Case,
    engine: &dyn Server,
    ctl: &::ferry::Pipe,
    bar: &Bar,
) -> Result<Sample, Error> {
    let mut request = vec![0; SIZE];
    let mut reply = Vec::with_capacity(SIZE);
    timed::repeat(case, bar, |i| {
        let address = next_address(ctl)?;
        payload::fill(&mut request, payload::marker(i));
        let start = Instant::now();
        let conn = engine.connect(&address, &request, &mut reply)?;
        let took = start.elapsed();
        check_echo(&request, &reply)?;
        drop(conn);
        Ok(took)
    })
}

/// Checks that `reply` is `request`, echoed whole.
pub fn check_echo(request: &[u8], reply: &[u8]) -> Result<(), Error> {
    if reply.len() != request.len() {
        return Err(Error::new(format!(
            "a {}-byte reply to a {}-byte request",
            reply.len(),
            request.len()
        )));
    }
    payload::check(reply, request.first().copied().unwrap_or_default())
}
