//! Two OS pipes: the child's standard input and output, length-prefixed.

use std::fs::File;
use std::io::{stdin, stdout};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use super::framed::Framed;
use super::{ChildGuard, Connection, Endpoint, Transport};
use crate::error::{Context, Error};

/// The child's stdin carries requests and its stdout replies.
#[derive(Debug)]
pub struct Pipe;

impl Transport for Pipe {
    fn name(&self) -> &'static str {
        "pipe"
    }

    fn spawn(&self, mut command: Command) -> Result<Connection, Error> {
        command.stdin(Stdio::piped()).stdout(Stdio::piped());
        let child = command.spawn().context("spawning the child")?;
        let mut child = ChildGuard::new(child);
        let process = child.child_mut();
        let streams = process.stdin.take().zip(process.stdout.take());
        let (to_child, from_child) =
            streams.ok_or_else(|| Error::new("the child's stdin or stdout is not a pipe"))?;
        let endpoint = Box::new(Framed::new(from_child, to_child));
        Ok(Connection { child, endpoint })
    }

    fn connect_to_parent(&self) -> Result<Box<dyn Endpoint>, Error> {
        // Unbuffered handles of their own: `Stdin` buffers and `Stdout`
        // flushes by line, and framing wants neither.
        let input = stdin().as_fd().try_clone_to_owned();
        let output = stdout().as_fd().try_clone_to_owned();
        let input = File::from(input.context("duplicating stdin")?);
        let output = File::from(output.context("duplicating stdout")?);
        Ok(Box::new(Framed::new(input, output)))
    }
}
