//! A named server that accepts N clients, receives a memfd full of data
//! from each, and replies with what it read.
//!
//! The server starts its clients itself (`Server::spawn`), so they connect
//! with the server's secret token, handed to each through a pipe only it
//! inherits; any other process of this user that tried would be refused.
//!
//! Run it: `cargo run --release -p ferry --example server [N]`.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::process::Command;

const DEFAULT_CLIENTS: usize = 4;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    match args.next().as_deref() {
        Some("client") => client(),
        count => server(count.map_or(Ok(DEFAULT_CLIENTS), str::parse)?),
    }
}

fn server(clients: usize) -> Result<(), Box<dyn std::error::Error>> {
    let server = ferry::ServerOptions::new()
        .token(ferry::Token::random()?)
        .bind(format!("example-{}", std::process::id()))?;
    println!("server: listening at {}", server.address());
    let mut children = Vec::new();
    for _ in 0..clients {
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("client");
        children.push(server.spawn(command)?);
    }
    let mut served = 0;
    while served < clients {
        let client = match server.accept() {
            Ok(client) => client,
            Err(refused @ ferry::AcceptError::Refused { .. }) => {
                eprintln!("server: {refused}");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut message = client.pipe.receiver().recv_with()?;
        let fd = message.fds.pop().ok_or("a client sent no descriptor")?;
        let mut data = String::new();
        let mut file = File::from(fd);
        file.rewind()?;
        file.read_to_string(&mut data)?;
        println!(
            "server: client ({}) sent {:?} with a memfd holding {} bytes",
            client.peer,
            String::from_utf8_lossy(&message.bytes),
            data.len()
        );
        client
            .pipe
            .send(format!("read {} bytes: {data:?}", data.len()).as_bytes())?;
        served += 1;
    }
    for mut child in children {
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("a client failed: {status}").into());
        }
    }
    println!("server: served {served} clients");
    Ok(())
}

fn client() -> Result<(), Box<dyn std::error::Error>> {
    let pipe = ferry::connect_invited()?;
    let memfd = rustix::fs::memfd_create("example-data", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut file = File::from(memfd);
    write!(file, "hello from process {}", std::process::id())?;
    pipe.sender()
        .send_with(b"here is my data", vec![ferry::Handle::from(file)])?;
    let reply = pipe.recv()?;
    println!(
        "client {}: {}",
        std::process::id(),
        String::from_utf8_lossy(&reply)
    );
    Ok(())
}
