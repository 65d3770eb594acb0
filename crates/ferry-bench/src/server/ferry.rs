//! ferry's named server: `Server::bind` at an abstract name, clients by
//! `ferry::connect`, each one a pipe of its own. Served with a thread per
//! client (`ferry`) or by one thread waiting on every client's receiver
//! with a `ferry::Select` (`ferry-select`).

use std::collections::HashMap;
use std::thread;

use ::ferry::{AcceptError, Pipe, Receiver, RecvError, Select, TryRecvError};

use super::engine::{self, Conn, Listening, Server};
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

impl Server for Ferry {
    fn name(&self) -> &'static str {
        match self.select {
            false => "ferry",
            true => "ferry-select",
        }
    }

    fn connects(&self) -> bool {
        !self.select
    }

    fn serve(&self, clients: usize) -> Result<Listening, Error> {
        let name = engine::fresh_name("ferry");
        let server = ::ferry::Server::bind(name.as_str())
            .context(format!("binding a ferry server at {name}"))?;
        match self.select {
            false => thread::spawn(move || accept_each(&server, clients)),
            true => thread::spawn(move || serve_selected(&server, clients)),
        };
        Ok(engine::fixed(name))
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
        self.0
            .receiver()
            .recv_into(reply)
            .context("receiving a reply")
    }
}

/// The next client to pass the server's checks.
fn accept(server: &::ferry::Server) -> Result<Pipe, AcceptError> {
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
fn accept_each(server: &::ferry::Server, clients: usize) {
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
    match pipe.receiver().recv_into(buf) {
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
fn serve_selected(server: &::ferry::Server, clients: usize) {
    let mut pipes = Vec::with_capacity(clients);
    let mut buf = Vec::new();
    while pipes.len() < clients {
        match accept(server) {
            Ok(pipe) if echo_one(&pipe, &mut buf) => pipes.push(pipe),
            Ok(_) => {}
            Err(e) => return engine::report("accepting a ferry client", e),
        }
    }
    if let Err(e) = serve_all(pipes) {
        engine::report("serving ferry clients through a Select", e);
    }
}

/// Serves `pipes` until every client has gone: each client's receiving
/// half in one `Select`, removed once its client goes.
fn serve_all(pipes: Vec<Pipe>) -> Result<(), Error> {
    let mut select = Select::new().context("making a Select")?;
    let mut senders = HashMap::new();
    for pipe in pipes {
        let (tx, rx) = pipe.split();
        let key = select.add(rx).context("adding a receiver to the Select")?;
        senders.insert(key, tx);
    }
    let mut buf = Vec::new();
    while !select.is_empty() {
        let key = select.ready().context("waiting in the Select")?;
        let rx = select
            .get::<Receiver>(key)
            .ok_or_else(|| Error::new("the Select returned a key not its own"))?;
        let served = match rx.try_recv_into(&mut buf) {
            Ok(()) => senders.get(&key).is_some_and(|tx| tx.send(&buf).is_ok()),
            Err(TryRecvError::Empty) => true,
            // Gone, or broke the rules: either way, no longer served.
            Err(_) => false,
        };
        if !served {
            select.remove::<Receiver>(key);
            senders.remove(&key);
        }
    }
    Ok(())
}
