//! A Rust peer for the C tests (`tests/c/`): started by `ferry_spawn`, it
//! echoes every message its parent sends until the parent closes the pipe.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pipe = ferry::Pipe::from_parent()?;
    loop {
        match pipe.recv() {
            Ok(message) => pipe.send(&message)?,
            Err(ferry::RecvError::Disconnected) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}
