//! Spawns a copy of itself as a child and echoes a message through it.

use std::process::Command;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("child") {
        // The child: echo every message back until the parent hangs up.
        let pipe = ferry::Pipe::from_parent()?;
        let mut buf = Vec::new();
        while pipe.receiver().recv_into(&mut buf).is_ok() {
            pipe.send(&buf)?;
        }
        return Ok(());
    }
    let mut command = Command::new(std::env::current_exe()?);
    command.arg("child");
    let (mut child, pipe) = ferry::spawn(command)?;
    pipe.send(b"hello")?;
    assert_eq!(pipe.recv()?, b"hello");
    drop(pipe); // the child sees Disconnected and exits
    child.wait()?;
    println!("echoed through a child process");
    Ok(())
}
