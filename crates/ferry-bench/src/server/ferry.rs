//! ferry's named server: `Server::bind` at an abstract name, clients by
//! `ferry::connect`, each one a pipe of its own. Served with a thread per
//! client (`ferry`) or by one thread waiting on every client's receiver
//! with a `ferry::Select` (`ferry-select`).

use std::thread;

use ::ferry::{AcceptError, Pipe, RecvError, Select, Server, TryRecvError};

use super::engine::{self, Conn, Engine, Fixed, Listening};
use crate::error::{Context, Error};

/// ferry's server, with one of two ways of serving.
#[derive(Debug)]
pub struct Ferry {
    select: bool,
}

impl Ferry {
    /// A thread per client, asleep in `recv`.
    pub const THREADS: Self = Self { select: false };
    /// One thread for every client, waiting in `Select::ready`.
    pub const SELECT: Self = Self { select: true };
}

impl Engine for Ferry {
    fn name(&self) -> &'static str {
        match self.select {
            false => "ferry",
            true => "ferry-select",
        }
    }

    fn serve(&self, clients: usize) -> Result<Box<dyn Listening>, Error> {
        let name = engine::fresh_name("ferry");
        let server =
            Server::bind(name.as_str()).context(format!("binding a ferry server at {name}"))?;
        match self.select {
            false => thread::spawn(move || accept_each(&server, clients)),
            true => thread::spawn(move || serve_selected(&server, clients)),
        };
        Ok(Box::new(Fixed(name)))
    }

    fn connect(
        &self,
        address: &str,
        request: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Box<dyn Conn>, Error> {
        let pipe = ::ferry::connect(address).context(format!("connecting to {address}"))?;
        let mut conn = FerryConn(pipe);
        conn.round_trip(request, reply)?;
        Ok(Box::new(conn))
    }
}

struct FerryConn(Pipe);

impl Conn for FerryConn {
    fn round_trip(&mut self, request: &[u8], reply: &mut Vec<u8>) -> Result<(), Error> {
        self.0.send(request).context("sending a request")?;
        self.0.recv_into(reply).context("receiving a reply")
    }
}

/// The next client to pass the server's checks.
fn accept(server: &Server) -> Result<Pipe, AcceptError> {
    loop {
        match server.accept() {
            Ok(client) => return Ok(client.pipe),
            // Turned away (never one of ours): the server goes on.
            Err(AcceptError::Refused { .. }) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Accepts clients forever: the first request of each here, the rest on
/// a thread of its own, or here too when they come one at a time (see
/// [`engine::one_at_a_time`]).
fn accept_each(server: &Server, clients: usize) {
    let mut buf = Vec::new();
    loop {
        match accept(server) {
            Ok(pipe) if engine::one_at_a_time(clients) => while echo_one(&pipe, &mut buf) {},
            Ok(pipe) if echo_one(&pipe, &mut buf) => {
                thread::spawn(move || {
                    let mut buf = Vec::new();
                    while echo_one(&pipe, &mut buf) {}
                });
            }
            Ok(_) => {}
            Err(e) => return engine::report("accepting a ferry client", e),
        }
    }
}

/// Receives one request and sends it back; false once the client has gone.
fn echo_one(pipe: &Pipe, buf: &mut Vec<u8>) -> bool {
    match pipe.recv_into(buf) {
        Ok(()) => pipe.send(buf).is_ok(),
        Err(RecvError::Disconnected) => false,
        Err(e) => {
            engine::report("receiving from a ferry client", e);
            false
        }
    }
}

/// Accepts `clients` clients (the first request of each here), then serves
/// them all from this thread through a `Select`.
fn serve_selected(server: &Server, clients: usize) {
    let mut pipes = Vec::with_capacity(clients);
    let mut buf = Vec::new();
    while pipes.len() < clients {
        match accept(server) {
            Ok(pipe) if echo_one(&pipe, &mut buf) => pipes.push(pipe),
            Ok(_) => {}
            Err(e) => return engine::report("accepting a ferry client", e),
        }
    }
    if let Err(e) = serve_all(&pipes) {
        engine::report("serving ferry clients through a Select", e);
    }
}

/// Serves `pipes` until every client has gone.
fn serve_all(pipes: &[Pipe]) -> Result<(), Error> {
    let mut live: Vec<usize> = (0..pipes.len()).collect();
    let mut buf = Vec::new();
    while !live.is_empty() {
        let gone = serve_until_one_goes(pipes, &live, &mut buf)?;
        live.retain(|&i| i != gone);
    }
    Ok(())
}

/// Serves the `live` pipes until one's client goes; returns which. A
/// `Select` keeps reporting a gone receiver as ready, so the caller makes
/// a new one without it (clients go only at the end of a row).
fn serve_until_one_goes(pipes: &[Pipe], live: &[usize], buf: &mut Vec<u8>) -> Result<usize, Error> {
    let mut select = Select::new().context("making a Select")?;
    for &i in live {
        select
            .add(pipes[i].receiver())
            .context("adding a receiver to the Select")?;
    }
    loop {
        let i = live[select.ready().context("waiting in the Select")?];
        match pipes[i].receiver().try_recv_into(buf) {
            Ok(()) if pipes[i].send(buf).is_ok() => {}
            Err(TryRecvError::Empty) => {}
            // Gone, or broke the rules: either way, no longer served.
            Ok(()) | Err(_) => return Ok(i),
        }
    }
}
