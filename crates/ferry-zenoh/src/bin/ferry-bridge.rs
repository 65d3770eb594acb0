//! `ferry-bridge`: carries ferry pipes between machines over Zenoh.
//!
//! ```text
//! # machine A: export the local server "camera" under robot/camera
//! ferry-bridge --listen tcp/0.0.0.0:7447 --export robot/camera=camera
//! # machine B: programs here connect to "camera"
//! ferry-bridge --connect tcp/machine-a:7447 --import robot/camera=camera
//! ```

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use ferry_zenoh::{Bridge, BridgeOptions};

/// Carries ferry pipes between machines over Zenoh: exports local ferry
/// servers under key prefixes, and imports prefixes as local server names.
/// Prints "ready" on standard output once every export and import is in
/// place, and runs until killed.
#[derive(Parser, Debug)]
#[command(name = "ferry-bridge", version)]
struct Args {
    /// Listen for other bridges at this Zenoh endpoint (tcp/0.0.0.0:7447).
    #[arg(long, value_name = "ENDPOINT")]
    listen: Vec<String>,
    /// Connect to another bridge at this endpoint (retried until it answers).
    #[arg(long, value_name = "ENDPOINT")]
    connect: Vec<String>,
    /// Export the local ferry server SERVER under the key prefix PREFIX. A
    /// name that begins with '/' is a socket file; any other, an abstract
    /// name (as `ferry::Address` has it).
    #[arg(long, value_name = "PREFIX=SERVER", value_parser = pair)]
    export: Vec<(String, String)>,
    /// Import PREFIX as the local ferry server name NAME ('/…': a socket
    /// file).
    #[arg(long, value_name = "PREFIX=NAME", value_parser = pair)]
    import: Vec<(String, String)>,
    /// The token the exported servers ask for: a file of 64 hex digits
    /// (never on the command line, which other users can read).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The token the imported names ask every local program for (a file
    /// of 64 hex digits): only programs given it can connect through this
    /// bridge.
    #[arg(long, value_name = "FILE")]
    import_token_file: Option<PathBuf>,
    /// How long the link to another bridge may be silent before its pipes
    /// end, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    lease_ms: u64,
    /// What each pipe's incoming direction may queue here: messages.
    #[arg(long, value_name = "N", default_value_t = 256)]
    window_messages: u64,
    /// What each pipe's incoming direction may queue here: bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 64 << 20)]
    window_bytes: u64,
    /// A Zenoh configuration file (JSON5): TLS, authentication, access
    /// control. The options above apply on top of it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

fn pair(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((a, b)) if !a.is_empty() && !b.is_empty() => Ok((a.to_owned(), b.to_owned())),
        _ => Err(format!("{text:?} is not PREFIX=NAME")),
    }
}

/// A server's name as given: a socket file if it begins with '/'.
fn address(name: &str) -> ferry::Address {
    if name.starts_with('/') {
        ferry::Address::file(name)
    } else {
        ferry::Address::named(name)
    }
}

fn read_token(path: &PathBuf) -> Result<ferry::Token, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = text.trim();
    let mut bytes = [0u8; 32];
    if text.len() != 64 || !text.is_ascii() {
        return Err(format!("{}: not 64 hex digits", path.display()));
    }
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)
            .map_err(|_| format!("{}: not 64 hex digits", path.display()))?;
    }
    Ok(ferry::Token::from_bytes(bytes))
}

fn run(args: Args) -> Result<(), String> {
    if args.export.is_empty() && args.import.is_empty() {
        return Err("nothing to do: give --export PREFIX=SERVER or --import PREFIX=NAME".into());
    }
    let token = args.token_file.as_ref().map(read_token).transpose()?;
    let import_token = args
        .import_token_file
        .as_ref()
        .map(read_token)
        .transpose()?;
    let mut options = BridgeOptions::new()
        .lease(Duration::from_millis(args.lease_ms))
        .window(args.window_messages, args.window_bytes);
    for endpoint in args.listen {
        options = options.listen(endpoint);
    }
    for endpoint in args.connect {
        options = options.connect(endpoint);
    }
    if let Some(config) = args.config {
        options = options.config_file(config);
    }
    let bridge = Bridge::open(options).map_err(|e| e.to_string())?;
    let mut held = (Vec::new(), Vec::new());
    for (prefix, server) in &args.export {
        let export = bridge
            .export(address(server), token.clone(), prefix)
            .map_err(|e| format!("exporting {server} as {prefix}: {e}"))?;
        eprintln!("ferry-bridge: exporting the local server {server} as {prefix}");
        held.0.push(export);
    }
    for (prefix, name) in &args.import {
        let import = bridge
            .import(
                prefix,
                address(name),
                import_token
                    .clone()
                    .map(|token| ferry::ServerOptions::new().token(token)),
            )
            .map_err(|e| format!("importing {prefix} as {name}: {e}"))?;
        eprintln!("ferry-bridge: importing {prefix} as the local server {name}");
        held.1.push(import);
    }
    println!("ready");
    loop {
        std::thread::park();
    }
}

fn main() {
    if let Err(why) = run(Args::parse()) {
        eprintln!("ferry-bridge: {why}");
        std::process::exit(1);
    }
}
