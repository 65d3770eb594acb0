//! A receiver that takes bytes only (`Receiver::set_bytes_only`): a send
//! to it that attaches handles (pipe ends, halves, descriptors) fails
//! with `NotTransferable` and hands every handle back, usable; plain
//! sends go on. In one process and across real processes, for a receiver
//! that says so in the child, one that moved there after saying so, and
//! the ring of a sender's clone in another process.

use std::io::{Read, Seek, Write};
use std::os::fd::OwnedFd;
use std::time::Duration;

use ferry::{Handle, Pipe, PipeOptions, SendError, SendTimeoutError, TrySendError};
use ferry_testkit::{secs, this_test};

/// Requests on the bootstrap pipe, parent to child; the byte after one
/// that sets a flag is the flag.
const SET_MAIN: u8 = b'M';
const TAKE_RX: u8 = b'R';
const SET_HELD: u8 = b'S';
const READ_HELD: u8 = b'D';
const TAKE_TX: u8 = b'T';
const TX_FD: u8 = b'F';
const TX_PLAIN: u8 = b'P';
const BYE: u8 = b'B';

/// The child's answers to `TX_FD`.
const REFUSED: &[u8] = b"refused, the fd handed back";
const SENT: &[u8] = b"sent";

/// A pipe's read end, and its write end as a descriptor to send.
fn os_pipe() -> (std::io::PipeReader, OwnedFd) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    (reader, OwnedFd::from(writer))
}

/// Writes through `fd` (a write end of `reader`'s pipe, handed back by a
/// refused send) and reads it back: the descriptor is still open.
fn assert_still_open(fd: OwnedFd, reader: &mut std::io::PipeReader) {
    let mut writer = std::io::PipeWriter::from(fd);
    writer
        .write_all(b"still open")
        .expect("write the handed-back fd");
    drop(writer);
    let mut text = String::new();
    reader.read_to_string(&mut text).expect("read the pipe");
    assert_eq!(text, "still open");
}

fn memfd(text: &str) -> OwnedFd {
    let fd = rustix::fs::memfd_create("ferry-bytes-only", rustix::fs::MemfdFlags::CLOEXEC)
        .expect("memfd_create");
    let mut file = std::fs::File::from(fd);
    file.write_all(text.as_bytes()).expect("write the memfd");
    OwnedFd::from(file)
}

fn read_from_start(fd: OwnedFd) -> String {
    let mut file = std::fs::File::from(fd);
    file.rewind().expect("rewind");
    let mut text = String::new();
    file.read_to_string(&mut text).expect("read");
    text
}

/// The one handle a refused send handed back.
fn only(mut handles: Vec<Handle>) -> Handle {
    assert_eq!(handles.len(), 1, "every handle handed back");
    handles.pop().expect("one")
}

fn says_bytes_only(text: String) {
    assert!(text.contains("takes bytes only"), "the reason: {text}");
}

/// A pipe end, a sending half, a receiving half and a descriptor are each
/// refused and come back usable; bytes go on; once the receiver takes
/// handles again, the same end goes and works from the other side.
#[test]
fn every_kind_of_handle_is_refused_and_comes_back_usable() {
    let (a, b) = ferry::pipe().unwrap();
    assert!(!b.receiver().bytes_only(), "a fresh receiver takes handles");
    b.receiver().set_bytes_only(true);
    assert!(b.receiver().bytes_only());

    let (x, y) = ferry::pipe().unwrap();
    let refused = a.sender().send_with(b"an end", vec![x]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    says_bytes_only(refused.to_string());
    let Handle::Pipe(x) = only(refused.handles) else {
        panic!("the pipe end comes back as one");
    };
    x.send(b"x to y").unwrap();
    assert_eq!(y.recv().unwrap(), b"x to y");
    y.send(b"y to x").unwrap();
    assert_eq!(x.recv().unwrap(), b"y to x");

    let (tx, rx) = ferry::bytes::channel(4).unwrap();
    let refused = a.sender().send_with(b"a sender", vec![tx]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let Handle::Sender(tx) = only(refused.handles) else {
        panic!("the sender comes back as one");
    };
    let refused = a.sender().send_with(b"a receiver", vec![rx]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let Handle::Receiver(rx) = only(refused.handles) else {
        panic!("the receiver comes back as one");
    };
    tx.send(b"halves").unwrap();
    assert_eq!(rx.recv().unwrap(), b"halves");

    let (mut reader, fd) = os_pipe();
    let refused = a.sender().send_with(b"an fd", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let Handle::Fd(fd) = only(refused.handles) else {
        panic!("the descriptor comes back as one");
    };
    assert_still_open(fd, &mut reader);

    // None of it reached the ring: the next message is the plain one.
    a.send(b"bytes").unwrap();
    a.sender()
        .send_with::<Handle>(b"no handles", vec![])
        .unwrap();
    assert_eq!(b.recv().unwrap(), b"bytes");
    assert_eq!(b.recv().unwrap(), b"no handles");

    b.receiver().set_bytes_only(false);
    a.sender().send_with(b"now it goes", vec![x]).unwrap();
    let mut got = b.receiver().recv_with().unwrap();
    assert_eq!(got.bytes, b"now it goes");
    let x = got.pipes.pop().expect("the end arrived");
    x.send(b"moved").unwrap();
    assert_eq!(y.recv().unwrap(), b"moved");
}

/// `try_send_with` and `send_with_timeout` refuse too, at once, even with
/// no room in the ring: nothing is waited for.
#[test]
fn the_try_and_timeout_forms_refuse_without_waiting() {
    let (a, b) = PipeOptions::new().ring_size(4096).pipe().unwrap();
    b.receiver().set_bytes_only(true);
    let (mut reader, fd) = os_pipe();
    let refused = a.sender().try_send_with(b"an fd", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, TrySendError::NotTransferable(_)));
    says_bytes_only(refused.error.to_string());
    let fd = only(refused.handles);
    let refused = a
        .sender()
        .send_with_timeout(b"an fd", vec![fd], Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(
        refused.error,
        SendTimeoutError::NotTransferable(_)
    ));
    says_bytes_only(refused.error.to_string());
    let fd = only(refused.handles);

    while a.sender().try_send(&[0; 1000]).is_ok() {}
    let refused = a.sender().try_send_with(b"full", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, TrySendError::NotTransferable(_)));
    let started = std::time::Instant::now();
    let refused = a
        .sender()
        .send_with_timeout(b"full", refused.handles, Duration::from_secs(5))
        .unwrap_err();
    assert!(matches!(
        refused.error,
        SendTimeoutError::NotTransferable(_)
    ));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "no wait for room"
    );
    let Handle::Fd(fd) = only(refused.handles) else {
        panic!("the descriptor comes back as one");
    };
    assert_still_open(fd, &mut reader);
    assert_eq!(b.recv().unwrap(), [0; 1000]);
}

/// The typed layer's send of a value holding a descriptor, over a byte
/// sender whose receiver takes bytes only: `NotTransferable`, and the
/// value comes back with its descriptor.
#[cfg(feature = "serde")]
#[test]
fn a_typed_value_with_a_descriptor_comes_back_whole() {
    use ferry::typed::{SendFailure, Sender};
    let (tx, rx) = ferry::bytes::channel(4).unwrap();
    rx.set_bytes_only(true);
    let typed = Sender::<(String, ferry::typed::Fd)>::from_bytes(tx);
    let (mut reader, fd) = os_pipe();
    let value = ("with an fd".to_string(), ferry::typed::Fd(fd));
    let Err(ferry::typed::SendError::Failed(value, why)) = typed.send(value) else {
        panic!("a value with a descriptor is refused");
    };
    assert!(matches!(why, SendFailure::NotTransferable(_)), "{why}");
    assert_eq!(value.0, "with an fd");
    assert_still_open(value.1.into_owned(), &mut reader);
}

/// `PipeOptions::bytes_only` under a server's and a client's options:
/// each side's end takes bytes only before the other can write, so even
/// the first message's descriptor is refused and handed back; the other
/// direction, not so declared, carries a descriptor.
#[test]
fn options_declare_bytes_only_before_the_first_message() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let name = format!("bytes-only-options-{}", std::process::id());
    let server = ferry::ServerOptions::new()
        .pipe_options(PipeOptions::new().bytes_only(true))
        .bind(name.as_str())
        .unwrap();
    let accepting = std::thread::spawn(move || server.accept().unwrap().pipe);
    let client = ferry::connect(name.as_str()).unwrap();
    let (mut reader, fd) = os_pipe();
    // The very first send: no round trip could have told the client.
    let refused = client.sender().send_with(b"an fd", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    says_bytes_only(refused.to_string());
    let Handle::Fd(fd) = only(refused.handles) else {
        panic!("the descriptor comes back as one");
    };
    assert_still_open(fd, &mut reader);
    let near = accepting.join().unwrap();
    assert!(near.receiver().bytes_only());
    assert!(!client.receiver().bytes_only());
    assert_a_descriptor_goes(&near, &client, "server to client");

    // The client's side, declared by its connect options.
    let name = format!("bytes-only-connect-{}", std::process::id());
    let server = ferry::Server::bind(name.as_str()).unwrap();
    let accepting = std::thread::spawn(move || server.accept().unwrap().pipe);
    let client = ferry::ConnectOptions::new()
        .pipe_options(PipeOptions::new().bytes_only(true))
        .connect(name.as_str())
        .unwrap();
    let near = accepting.join().unwrap();
    assert!(client.receiver().bytes_only());
    assert!(!near.receiver().bytes_only());
    let refused = near
        .sender()
        .send_with(b"an fd", vec![Handle::Fd(memfd("refused"))])
        .unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    assert_eq!(read_from_start(handle_fd(only(refused.handles))), "refused");
    assert_a_descriptor_goes(&client, &near, "client to server");
}

/// A descriptor sent from `from` arrives at `to` with the message, open.
fn assert_a_descriptor_goes(from: &Pipe, to: &Pipe, text: &str) {
    from.sender()
        .send_with(text.as_bytes(), vec![Handle::Fd(memfd(text))])
        .unwrap();
    let mut message = to.receiver().recv_with().unwrap();
    assert_eq!(message.bytes, text.as_bytes());
    assert_eq!(
        read_from_start(message.fds.pop().expect("the descriptor came")),
        text
    );
}

fn handle_fd(handle: Handle) -> OwnedFd {
    match handle {
        Handle::Fd(fd) => fd,
        _ => panic!("a descriptor comes back as one"),
    }
}

/// The child sets bytes only on its end of the bootstrap pipe: the
/// parent's sends of a descriptor (every form) and of a pipe end are
/// refused and hand them back, usable; bytes go on; once the child
/// clears it, a descriptor goes and the child reads it.
#[test]
fn a_receiver_in_another_process_refuses_handles_sent_to_it() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    ask(&main, &[SET_MAIN, 1]);

    let (mut reader, fd) = os_pipe();
    let refused = main.sender().send_with(b"an fd", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    says_bytes_only(refused.to_string());
    let refused = main
        .sender()
        .try_send_with(b"an fd", refused.handles)
        .unwrap_err();
    assert!(matches!(refused.error, TrySendError::NotTransferable(_)));
    let refused = main
        .sender()
        .send_with_timeout(b"an fd", refused.handles, secs(5))
        .unwrap_err();
    assert!(matches!(
        refused.error,
        SendTimeoutError::NotTransferable(_)
    ));
    let Handle::Fd(fd) = only(refused.handles) else {
        panic!("the descriptor comes back as one");
    };
    assert_still_open(fd, &mut reader);

    let (x, y) = ferry::pipe().unwrap();
    let refused = main.sender().send_with(b"an end", vec![x]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let Handle::Pipe(x) = only(refused.handles) else {
        panic!("the pipe end comes back as one");
    };
    x.send(b"kept").unwrap();
    assert_eq!(y.recv().unwrap(), b"kept");

    // Bytes go on (the requests are bytes); cleared, an fd goes.
    ask(&main, &[SET_MAIN, 0]);
    main.sender()
        .send_with(&[READ_HELD], vec![memfd("through the child")])
        .unwrap();
    assert_eq!(main.recv().unwrap(), b"through the child");
    main.send(&[BYE]).unwrap();
    child.wait_ok();
}

/// A receiver that said it takes bytes only, sent to the child, still
/// does there (the word is in the ring): its sender here is refused. The
/// child clears it, and a descriptor goes and arrives.
#[test]
fn a_receiver_sent_on_keeps_taking_bytes_only() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (tx, rx) = ferry::bytes::channel(16).unwrap();
    rx.set_bytes_only(true);
    main.sender().send_with(&[TAKE_RX], vec![rx]).unwrap();
    assert_eq!(main.recv().unwrap(), [1], "bytes only, there too");

    let (mut reader, fd) = os_pipe();
    let refused = tx.send_with(b"an fd", vec![fd]).unwrap_err();
    assert!(matches!(refused.error, SendError::NotTransferable(_)));
    let Handle::Fd(fd) = only(refused.handles) else {
        panic!("the descriptor comes back as one");
    };
    assert_still_open(fd, &mut reader);

    ask(&main, &[SET_HELD, 0]);
    tx.send_with(b"an fd", vec![memfd("moved receiver")])
        .unwrap();
    main.send(&[READ_HELD]).unwrap();
    assert_eq!(main.recv().unwrap(), b"moved receiver");
    main.send(&[BYE]).unwrap();
    child.wait_ok();
}

/// A clone of a sender whose receiver takes bytes only, sent to the child
/// (it travels as the sender of a ring of its own, read along with the
/// receiver's): the child's send of a descriptor on it is refused. Once
/// the receiver here clears the flag (after it has attached the clone's
/// ring), the child's descriptor goes and arrives here.
#[test]
fn a_senders_clone_elsewhere_is_refused_too() {
    if ferry_testkit::role().is_some() {
        return child();
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (tx, rx) = ferry::bytes::channel(16).unwrap();
    rx.set_bytes_only(true);
    main.sender()
        .send_with(&[TAKE_TX], vec![tx.clone()])
        .unwrap();
    assert_eq!(main.recv().unwrap(), b"taken");
    ask_for(&main, &[TX_FD], REFUSED);
    ask(&main, &[TX_PLAIN]);
    assert_eq!(rx.recv().unwrap(), b"plain");

    rx.set_bytes_only(false);
    ask_for(&main, &[TX_FD], SENT);
    let mut got = rx.recv_with().unwrap();
    assert_eq!(got.bytes, b"an fd");
    let fd = got.fds.pop().expect("the descriptor arrived");
    assert_eq!(read_from_start(fd), "from the clone");
    main.send(&[BYE]).unwrap();
    child.wait_ok();
    drop(tx);
}

/// Sends `request` and waits for the child's `ok`.
fn ask(main: &Pipe, request: &[u8]) {
    ask_for(main, request, b"ok");
}

fn ask_for(main: &Pipe, request: &[u8], answer: &[u8]) {
    main.send(request).expect("a request");
    let reply = main.recv().expect("the child's answer");
    assert_eq!(
        String::from_utf8_lossy(&reply),
        String::from_utf8_lossy(answer),
        "the answer to {:?}",
        request[0] as char
    );
}

fn child() {
    let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
    let mut held = None;
    let mut held_tx = None;
    loop {
        let mut message = main.receiver().recv_with().expect("a request");
        let reply: Vec<u8> = match message.bytes[0] {
            SET_MAIN => {
                main.receiver().set_bytes_only(message.bytes[1] != 0);
                b"ok".to_vec()
            }
            TAKE_RX => {
                let rx = message.receivers.pop().expect("a receiver");
                let bytes_only = rx.bytes_only();
                held = Some(rx);
                vec![u8::from(bytes_only)]
            }
            SET_HELD => {
                let rx = held.as_ref().expect("a receiver taken");
                rx.set_bytes_only(message.bytes[1] != 0);
                b"ok".to_vec()
            }
            // The descriptor comes with this request, or on the receiver
            // taken before.
            READ_HELD => {
                let fd = match message.fds.pop() {
                    Some(fd) => fd,
                    None => {
                        let rx = held.as_ref().expect("a receiver taken");
                        let mut got = rx.recv_with().expect("a message on it");
                        got.fds.pop().expect("with a descriptor")
                    }
                };
                read_from_start(fd).into_bytes()
            }
            TAKE_TX => {
                held_tx = Some(message.senders.pop().expect("a sender"));
                b"taken".to_vec()
            }
            TX_FD => {
                let tx = held_tx.as_ref().expect("a sender taken");
                match tx.send_with(b"an fd", vec![memfd("from the clone")]) {
                    Ok(()) => SENT.to_vec(),
                    Err(refused) => {
                        assert!(
                            matches!(refused.error, SendError::NotTransferable(_)),
                            "{refused}"
                        );
                        let Handle::Fd(fd) = only(refused.handles) else {
                            panic!("the descriptor comes back as one");
                        };
                        assert_eq!(read_from_start(fd), "from the clone");
                        REFUSED.to_vec()
                    }
                }
            }
            TX_PLAIN => {
                let tx = held_tx.as_ref().expect("a sender taken");
                tx.send(b"plain").expect("bytes go on");
                b"ok".to_vec()
            }
            BYE => return,
            other => panic!("unknown request {other}"),
        };
        main.send(&reply).expect("the answer");
    }
}
