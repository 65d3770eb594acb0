//! Typed request and reply across two processes: the parent sends `Add`
//! requests, each with its own reply channel inside it, to a child it
//! spawned; the child answers on each request's channel.
//!
//! `cargo run --example typed`

use std::process::Command;

use ferry::typed::{Pipe as TypedPipe, Sender};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Add {
    a: i64,
    b: i64,
    /// Where the sum goes: a typed half, travelling as a handle.
    reply: Sender<i64>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("child") {
        // The child: answer every request until the parent hangs up.
        let end = TypedPipe::<(), Add>::from_pipe(ferry::Pipe::from_parent()?);
        while let Ok(Add { a, b, reply }) = end.recv() {
            reply.send(a + b)?;
        }
        return Ok(());
    }
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("child");
    let (mut child, pipe) = ferry::spawn(command)?;
    let end = TypedPipe::<Add, ()>::from_pipe(pipe);
    for i in 0..10 {
        let (reply, answer) = ferry::channel(1)?;
        end.send(Add {
            a: i,
            b: 100,
            reply,
        })?;
        assert_eq!(answer.recv()?, i + 100);
    }
    drop(end); // the child sees Disconnected and exits
    assert!(child.wait()?.success());
    println!("10 typed calls answered by the child");
    Ok(())
}
