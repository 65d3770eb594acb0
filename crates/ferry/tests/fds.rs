//! File descriptors inside messages, between real processes: every kind
//! arrives usable and in order with its message, and every path that
//! refuses one leaves the descriptor counts of both processes unchanged.
//!
//! The tests take [`ferry_testkit::serial`]: they count this process's
//! descriptors, which a test running beside them would disturb.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

use ferry::{Handle, Pipe, PipeOptions, SendError};
use ferry_testkit::{msg_u64, secs, this_test, u64_msg};
use serde::{Deserialize, Serialize};

/// Messages, each with a descriptor of every kind.
const ROUNDS: u64 = 200;
/// How much a process's descriptor count may move between two looks.
const FD_SLACK: usize = 2;

/// Requests on the bootstrap pipe, parent to child.
const KINDS: u8 = b'K';
const COUNT: u8 = b'C';
const DROP_ALL: u8 = b'D';
const TYPED: u8 = b'T';
const BYE: u8 = b'B';

fn memfd(text: &str) -> File {
    let fd = rustix::fs::memfd_create("ferry-test", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("memfd_create");
    let mut file = File::from(fd);
    file.write_all(text.as_bytes()).expect("write the memfd");
    file
}

/// A file of this test's own, unlinked at once.
fn temp_file(text: &str) -> File {
    let path =
        std::env::temp_dir().join(format!("ferry-fds-{}-{}", std::process::id(), text.len()));
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .expect("make a temporary file");
    std::fs::remove_file(&path).expect("unlink it");
    file.write_all(text.as_bytes()).expect("write it");
    file
}

fn read_from_start(fd: OwnedFd) -> String {
    let mut file = File::from(fd);
    file.rewind().expect("rewind");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("read");
    text
}

/// A file, a memfd, a socket, an eventfd and a pipe's write end, each
/// marked with round `i`, travel in one message; the child reads the
/// file and memfd back, writes into the socket, the eventfd and the pipe;
/// the parent checks all five, in order, for every round. Then the
/// descriptor counts of both processes are back where they began.
#[test]
fn descriptors_of_every_kind_arrive_usable_and_in_order() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    round(&main, 0); // what a first message opens lazily is not counted
    let before = (ferry_testkit::fd_count(), child_fds(&main));
    for i in 1..ROUNDS {
        round(&main, i);
    }
    let after = (ferry_testkit::settled_fd_count(), child_fds(&main));
    assert!(
        after.0 <= before.0 + FD_SLACK && after.1 <= before.1 + FD_SLACK,
        "descriptors leaked over {ROUNDS} rounds: (parent, child) before {before:?}, after {after:?}"
    );
    main.send(&[BYE]).expect("bye");
    child.wait_ok();
}

fn round(main: &Pipe, i: u64) {
    let (mine, theirs) = UnixStream::pair().expect("socketpair");
    let event = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).expect("eventfd");
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let ends: Vec<Handle> = vec![
        temp_file(&format!("file {i}")).into(),
        memfd(&format!("memfd {i}")).into(),
        OwnedFd::from(theirs).into(),
        event.try_clone().expect("dup the eventfd").into(),
        OwnedFd::from(writer).into(),
    ];
    let mut request = vec![KINDS];
    request.extend_from_slice(&u64_msg(i));
    main.sender()
        .send_with(&request, ends)
        .unwrap_or_else(|e| panic!("round {i}: send_with: {e}"));
    let reply = main.recv().expect("the child's reply");
    assert_eq!(
        String::from_utf8(reply).expect("text"),
        format!("file {i}|memfd {i}"),
        "round {i}"
    );
    let mut on_socket = [0u8; 64];
    let n = (&mine).read(&mut on_socket).expect("read the socket");
    assert_eq!(&on_socket[..n], format!("socket {i}").as_bytes());
    let mut counter = [0u8; 8];
    rustix::io::read(&event, &mut counter).expect("read the eventfd");
    assert_eq!(u64::from_ne_bytes(counter), i + 1, "eventfd of round {i}");
    let mut piped = String::new();
    reader
        .read_to_string(&mut piped)
        .expect("read the pipe to its end");
    assert_eq!(piped, format!("pipe {i}"));
}

fn child_fds(main: &Pipe) -> usize {
    main.send(&[COUNT])
        .expect("ask for the child's descriptor count");
    msg_u64(&main.recv().expect("the child's count")) as usize
}

fn child() {
    let (_dog, main) = ferry_testkit::child_pipe("child", secs(60));
    loop {
        let message = main.receiver().recv_with().expect("a request");
        match message.bytes[0] {
            KINDS => {
                let i = msg_u64(&message.bytes[1..]);
                let reply = serve_kinds(i, message.fds);
                main.send(reply.as_bytes()).expect("reply");
            }
            // The next message is received as bytes only: its descriptors
            // are closed (by ferry's closer, a moment later).
            DROP_ALL => {
                let bytes = main.recv().expect("a message with descriptors");
                main.send(&bytes).expect("reply");
            }
            COUNT => main
                .send(&u64_msg(ferry_testkit::settled_fd_count() as u64))
                .expect("count"),
            TYPED => serve_typed(&main),
            BYE => return,
            other => panic!("unknown request {other}"),
        }
    }
}

fn serve_kinds(i: u64, fds: Vec<OwnedFd>) -> String {
    let [file, memfd, socket, event, pipe]: [OwnedFd; 5] =
        fds.try_into().expect("five descriptors, in order");
    let texts = format!("{}|{}", read_from_start(file), read_from_start(memfd));
    UnixStream::from(socket)
        .write_all(format!("socket {i}").as_bytes())
        .expect("write the socket");
    rustix::io::write(&event, &(i + 1).to_ne_bytes()).expect("write the eventfd");
    File::from(pipe)
        .write_all(format!("pipe {i}").as_bytes())
        .expect("write the pipe");
    texts
}

/// A descriptor field of a typed value, both ways it can be declared.
#[derive(Serialize, Deserialize)]
struct Upload {
    name: String,
    data: ferry::typed::Fd,
    #[serde(with = "ferry::typed::fd")]
    log: File,
}

/// What the child's decoder expects next: the same message, its handles
/// read as plain numbers. Such a message is refused (the type holds no
/// handle), and the descriptors that came with it are closed.
#[derive(Debug, Serialize, Deserialize)]
struct NameOnly {
    name: String,
    data: u32,
    log: u32,
}

fn serve_typed(main: &Pipe) {
    let pipe = main
        .receiver()
        .recv_with()
        .expect("the typed pipe")
        .pipes
        .pop()
        .expect("one pipe");
    let (tx, rx) = pipe.split();
    let uploads = ferry::typed::Receiver::<Upload>::from_bytes(rx);
    let replies = ferry::typed::Sender::<String>::from_bytes(tx);
    for _ in 0..3 {
        let Upload {
            name,
            data,
            mut log,
        } = uploads.recv().expect("an upload");
        let text = read_from_start(data.into_owned());
        log.write_all(format!("logged {name}").as_bytes())
            .expect("write the log");
        replies.send(format!("{name}: {text}")).expect("reply");
    }
    let before = ferry_testkit::fd_count();
    // The next values carry descriptors this type does not hold.
    let (tx, rx) = (
        replies.into_bytes().expect("the byte half"),
        uploads.into_bytes().expect("the byte half"),
    );
    let names = ferry::typed::Receiver::<NameOnly>::from_bytes(rx);
    let replies = ferry::typed::Sender::<String>::from_bytes(tx);
    for _ in 0..3 {
        let refused = names.recv().expect_err("handles the type does not hold");
        assert!(refused.to_string().contains("2 handles"), "{refused}");
        replies
            .send(format!(
                "refused: {}",
                ferry_testkit::fd_count_back_to(before) as i64 - before as i64
            ))
            .expect("reply");
    }
}

/// A typed channel half in another process gets `Fd` and
/// `#[serde(with = "ferry::typed::fd")]` fields usable; a type that does
/// not hold them closes the descriptors that came.
#[test]
fn typed_descriptor_fields_travel_and_unclaimed_ones_are_closed() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (near, far) = ferry::pipe().expect("a pipe");
    main.send(&[TYPED]).expect("typed");
    main.sender()
        .send_with(b"", vec![far])
        .expect("send the typed pipe");
    let (tx, rx) = near.split();
    let uploads = ferry::typed::Sender::<Upload>::from_bytes(tx);
    let replies = ferry::typed::Receiver::<String>::from_bytes(rx);
    for i in 0..3 {
        let log = memfd("");
        let upload = Upload {
            name: format!("u{i}"),
            data: memfd(&format!("data {i}")).into(),
            log: log.try_clone().expect("dup"),
        };
        uploads.send(upload).expect("send an upload");
        assert_eq!(replies.recv().expect("reply"), format!("u{i}: data {i}"));
        assert_eq!(read_from_start(log.into()), format!("logged u{i}"));
    }
    for i in 0..3 {
        let upload = Upload {
            name: format!("n{i}"),
            data: memfd("x").into(),
            log: memfd("y"),
        };
        uploads.send(upload).expect("send");
        // No growth: the child's count is back to (or, once a pool block
        // of its own was given back meanwhile, below) what it was.
        let reply = replies.recv().expect("reply");
        let growth: i64 = reply
            .strip_prefix("refused: ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the child's reply: {reply}"));
        assert!(
            growth <= 0,
            "the child's descriptor count after refusing message {i} grew by {growth}"
        );
    }
    drop((uploads, replies));
    main.send(&[BYE]).expect("bye");
    child.wait_ok();
}

/// Every refusal hands the descriptors back or closes them: too many for
/// one message, a pipe within this process, a receiver that does not take
/// them (`recv`), and the counts of both processes stay put.
#[test]
fn refusals_leave_descriptor_counts_unchanged() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let _serial = ferry_testkit::serial();
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(60));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    round(&main, 0);
    let before = (ferry_testkit::fd_count(), child_fds(&main));

    // One past the kernel's limit: refused before anything is sent, every
    // descriptor handed back.
    let many: Vec<Handle> = (0..=ferry::MAX_HANDLES)
        .map(|_| Handle::Fd(memfd("").into()))
        .collect();
    let refused = main.sender().send_with(b"", many).expect_err("254 handles");
    assert!(
        matches!(refused.error, SendError::NotTransferable(_)),
        "{}",
        refused.error
    );
    assert_eq!(
        refused.handles.len(),
        ferry::MAX_HANDLES + 1,
        "every descriptor handed back"
    );
    drop(refused);

    // Within one process a descriptor rides the pipe too (in its own
    // queue, no socket).
    let (a, b) = ferry::pipe().expect("a pipe");
    a.sender()
        .send_with(b"x", vec![Handle::Fd(memfd("").into())])
        .expect("in-process");
    let fd = b
        .receiver()
        .recv_with()
        .expect("x")
        .fds
        .pop()
        .expect("delivered");
    assert!(rustix::fs::fstat(fd.as_fd()).is_ok(), "still open");
    drop((fd, a, b));

    // The most one message may carry, received and dropped by the child.
    for _ in 0..3 {
        let full: Vec<Handle> = (0..ferry::MAX_HANDLES)
            .map(|_| Handle::Fd(memfd("").into()))
            .collect();
        main.send(&[DROP_ALL]).expect("drop");
        main.sender()
            .send_with(b"dropped", full)
            .expect("253 descriptors");
        assert_eq!(main.recv().expect("dropped"), b"dropped");
    }
    let after = (ferry_testkit::settled_fd_count(), child_fds(&main));
    assert!(
        after.0 <= before.0 + FD_SLACK && after.1 <= before.1 + FD_SLACK,
        "(parent, child) before {before:?}, after {after:?}"
    );
    main.send(&[BYE]).expect("bye");
    child.wait_ok();
}
