//! Senders that clone: many threads send into one receiver through clones
//! of one byte sender, each clone's messages in order, none lost, none
//! starved; the receiver sees the end only when the last clone is gone;
//! a sender with clones travels as a clone of its own, in as many
//! processes as hold one.

use std::time::Duration;

use ferry::{PipeOptions, RecvError, RecvTimeoutError, SendError};
use ferry_testkit::{secs, this_test};

const CLONES: usize = 8;
const EACH: u32 = 100_000;

/// Sends `EACH` messages `[id, seq (4 bytes LE)]` from each of `CLONES`
/// threads, each through its own clone of `tx`, all starting together.
fn send_from_clones(tx: &ferry::Sender) {
    let start = std::sync::Barrier::new(CLONES);
    std::thread::scope(|s| {
        for id in 0..CLONES {
            let tx = tx.clone();
            let start = &start;
            s.spawn(move || {
                start.wait();
                let mut message = [id as u8, 0, 0, 0, 0];
                for seq in 0..EACH {
                    message[1..].copy_from_slice(&seq.to_le_bytes());
                    tx.send(&message).expect("send through a clone");
                }
            });
        }
    });
}

/// What the receiver saw: per sender, the order kept and the count, and
/// where (in arrival order) each sender's first and last messages came.
#[derive(Debug, Default)]
struct Tally {
    next: [u32; CLONES],
    first_at: [Option<u64>; CLONES],
    last_at: [u64; CLONES],
    received: u64,
}

impl Tally {
    fn take(&mut self, message: &[u8]) {
        assert_eq!(message.len(), 5, "message length");
        let id = usize::from(message[0]);
        assert!(id < CLONES, "sender id {id}");
        let seq = u32::from_le_bytes(message[1..].try_into().unwrap());
        assert_eq!(seq, self.next[id], "sender {id}: out of order");
        self.next[id] += 1;
        self.first_at[id].get_or_insert(self.received);
        self.last_at[id] = self.received;
        self.received += 1;
    }

    /// Every message arrived, and no sender was starved while the others
    /// sent: each one's first message came before any sender had sent
    /// all of its own. (When each one starts, and how evenly they share
    /// the stream after that, is the scheduler's: on a loaded machine a
    /// thread may start late, or run alone on a CPU for a while.)
    fn check(&self) -> String {
        assert_eq!(self.next, [EACH; CLONES], "messages lost");
        let total = self.received;
        let latest_first = self.first_at.iter().map(|f| f.unwrap()).max().unwrap();
        let earliest_last = *self.last_at.iter().min().unwrap();
        assert!(
            latest_first < earliest_last,
            "a sender was starved: the last first message came at {latest_first}, the first \
             sender was done at {earliest_last}, of {total} ({self:?})"
        );
        format!(
            "first messages by {latest_first}, first sender done at {earliest_last}, of {total}"
        )
    }
}

/// Takes about half a microsecond per message, so the channel stays full
/// and the senders contend for room and for the send lock (a receiver as
/// fast as the senders would leave that to the OS scheduler: a thread that
/// runs first may send all its messages in one time slice).
fn pace() {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_nanos(500) {
        std::hint::spin_loop();
    }
}

#[test]
fn eight_clones_send_in_order_into_one_receiver_in_one_process() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (tx, rx) = ferry::bytes::channel(64).unwrap();
    let tally = std::thread::scope(|s| {
        let receiver = s.spawn(|| {
            let mut tally = Tally::default();
            for _ in 0..CLONES as u64 * u64::from(EACH) {
                tally.take(&rx.recv().expect("receive"));
                pace();
            }
            tally
        });
        send_from_clones(&tx);
        receiver.join().unwrap()
    });
    eprintln!("{}", tally.check());
    // The clones are gone, the first sender is not: no end yet.
    assert!(matches!(
        rx.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    ));
    tx.send(b"last").unwrap();
    drop(tx);
    assert_eq!(rx.recv().unwrap(), b"last");
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

/// The receiver is in the child; it tallies and reports.
#[test]
fn eight_clones_send_in_order_into_one_receiver_in_a_child() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(120));
        let mut msg = main.receiver().recv_with().expect("the receiver");
        let rx = msg.receivers.pop().expect("a receiver");
        let mut tally = Tally::default();
        loop {
            match rx.recv() {
                Ok(message) => {
                    tally.take(&message);
                    pace();
                }
                Err(RecvError::Disconnected) => break,
                Err(e) => panic!("receive: {e}"),
            }
        }
        main.send(tally.check().as_bytes()).unwrap();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(120));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (tx, rx) = ferry::bytes::channel(64).unwrap();
    main.sender().send_with(b"the receiver", vec![rx]).unwrap();
    send_from_clones(&tx);
    drop(tx);
    let report = main.recv().expect("the child's tally");
    eprintln!("{}", String::from_utf8_lossy(&report));
    child.wait_ok();
}

/// A pipe end dropped while a clone of its sender lives: the clone still
/// sends, and the peer sees the end only once the clone goes too.
#[test]
fn a_clone_outlives_its_pipe_end() {
    let (a, b) = ferry::pipe().unwrap();
    let tx = a.sender().clone();
    drop(a);
    tx.send(b"after the end").unwrap();
    assert_eq!(b.recv().unwrap(), b"after the end");
    // The end's receiving half is gone with it.
    assert!(matches!(b.send(b"x"), Err(SendError::Disconnected)));
    // Its sending half is not: a clone of it lives.
    assert!(matches!(
        b.receiver().recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    ));
    tx.send(b"still here").unwrap();
    assert_eq!(b.recv().unwrap(), b"still here");
    drop(tx);
    assert!(matches!(b.recv(), Err(RecvError::Disconnected)));
}

/// A sender with clones travels as a clone of its own: the child sends
/// through it into the receiver here, beside the clone that stayed; the
/// receiver sees the end once both are gone. A pipe end whose sender has
/// clones is still refused, handed back whole.
#[test]
fn a_sender_with_clones_travels_as_a_clone_of_its_own() {
    if ferry_testkit::role().is_some() {
        let (_dog, main) = ferry_testkit::child_pipe("child", secs(30));
        let mut msg = main.receiver().recv_with().expect("the sender");
        let tx = msg.senders.pop().expect("a sender");
        tx.send(b"from the child").unwrap();
        return;
    }
    let dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (tx, rx) = ferry::bytes::channel(4).unwrap();
    let clone = tx.clone();
    main.sender()
        .send_with(b"the sender", vec![tx])
        .expect("a sender with clones travels");
    clone.send(b"from here").unwrap();
    let mut got = vec![rx.recv().unwrap(), rx.recv().unwrap()];
    got.sort();
    assert_eq!(got, [b"from here".to_vec(), b"from the child".to_vec()]);
    child.wait_ok();
    // The child's clone is gone, this one is not: no end yet.
    assert!(matches!(
        rx.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    ));
    drop(clone);
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));

    let (child, main) =
        ferry_testkit::spawn_child(&dog, this_test!(), "child", &PipeOptions::new());
    let (a, _b) = ferry::pipe().unwrap();
    let pipe_clone = a.sender().clone();
    let refused = main.sender().send_with(b"the pipe", vec![a]).unwrap_err();
    assert!(
        matches!(refused.error, SendError::NotTransferable(why) if why.contains("clones")),
        "{:?}",
        refused.error
    );
    assert_eq!(refused.handles.len(), 1);
    drop(pipe_clone);
    let (tx, rx) = ferry::bytes::channel(4).unwrap();
    main.sender().send_with(b"the sender", vec![tx]).unwrap();
    assert_eq!(rx.recv().unwrap(), b"from the child");
    child.wait_ok();
}

/// Eight processes each hold a clone of one sender (each sent from here,
/// where the sender and its receiver stay), and send 100,000 messages
/// each, starting together: the receiver here takes them all, each
/// clone's in order, none starved (when the first clone is done, the
/// slowest has sent at least half as many as the fastest), then sees the
/// end once the last clone anywhere is gone.
#[test]
fn eight_clones_in_eight_processes_send_into_one_receiver() {
    if let Some(role) = ferry_testkit::role() {
        let (_dog, main) = ferry_testkit::child_pipe(&role, secs(120));
        let mut msg = main.receiver().recv_with().expect("the clone");
        let id: u8 = msg.bytes[0];
        let tx = msg.senders.pop().expect("a clone");
        main.send(b"ready").unwrap();
        assert_eq!(main.recv().unwrap(), b"go");
        let mut message = [id, 0, 0, 0, 0];
        for seq in 0..EACH {
            message[1..].copy_from_slice(&seq.to_le_bytes());
            tx.send(&message).expect("send through a clone");
        }
        return;
    }
    let test = this_test!();
    let dog = ferry_testkit::Watchdog::start(test, secs(120));
    let (tx, rx) = ferry::bytes::channel(64).unwrap();
    let children: Vec<_> = (0..CLONES)
        .map(|id| {
            let (child, main) =
                ferry_testkit::spawn_child(&dog, test, &format!("clone-{id}"), &PipeOptions::new());
            main.sender()
                .send_with(&[id as u8], vec![tx.clone()])
                .expect("send a clone");
            (child, main)
        })
        .collect();
    drop(tx);
    for (_, main) in &children {
        assert_eq!(main.recv().unwrap(), b"ready");
    }
    for (_, main) in &children {
        main.send(b"go").unwrap();
    }
    let mut tally = Tally::default();
    let mut at_first_done = None;
    for _ in 0..CLONES as u64 * u64::from(EACH) {
        tally.take(&rx.recv().expect("receive"));
        if at_first_done.is_none() && tally.next.contains(&EACH) {
            at_first_done = Some(tally.next);
        }
        pace();
    }
    eprintln!("{}", tally.check());
    let counts = at_first_done.expect("a clone finished");
    let (slowest, fastest) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    eprintln!("when the first clone was done: {counts:?}");
    assert!(
        2 * slowest >= *fastest,
        "a clone was starved: {counts:?} when the first was done"
    );
    for (child, _) in children {
        child.wait_ok();
    }
    assert!(matches!(rx.recv(), Err(RecvError::Disconnected)));
}

/// Clones of one sender, each made async in one runtime, wait for room on
/// their shared doorbell side by side, and each gets its messages through.
#[cfg(feature = "tokio")]
#[test]
fn clones_send_from_async_tasks_in_one_runtime() {
    let _dog = ferry_testkit::Watchdog::start(this_test!(), secs(30));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let (tx, rx) = ferry::bytes::channel(2).unwrap();
    let reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        while let Ok(message) = rx.recv() {
            got.push(message);
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    });
    runtime.block_on(async {
        let clones: Vec<_> = (0..3u8)
            .map(|_| tx.clone().into_async().expect("a clone made async"))
            .collect();
        let tasks = clones.into_iter().enumerate().map(|(id, tx)| async move {
            for seq in 0..20u8 {
                tx.send(&[id as u8, seq]).await.expect("async send");
            }
        });
        futures_join_all(tasks).await;
    });
    drop(tx);
    let got = reader.join().unwrap();
    assert_eq!(got.len(), 60);
    for id in 0..3u8 {
        let seqs: Vec<u8> = got.iter().filter(|m| m[0] == id).map(|m| m[1]).collect();
        assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "sender {id}");
    }
}

/// Polls every future to completion on this task (no `futures` crate).
#[cfg(feature = "tokio")]
async fn futures_join_all<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    let mut futures: Vec<_> = futures.map(Box::pin).map(Some).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for slot in &mut futures {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(()) => *slot = None,
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
}

/// Messages each holder sends in
/// [`clones_made_anywhere_reach_a_receiver_waiting_in_a_select`].
const SPREAD: u32 = 2_000;

/// Sends `SPREAD` messages `[id, seq]` through `tx`.
fn send_tagged(tx: &ferry::Sender, id: u8) {
    let mut message = [id, 0, 0, 0, 0];
    for seq in 0..SPREAD {
        message[1..].copy_from_slice(&seq.to_le_bytes());
        tx.send(&message).expect("send through a clone");
    }
}

/// The receiver lives in a child that waits for it in a `Select`; a clone
/// goes from here to a second child, which clones it again and sends that
/// to a grandchild: the sender here, its clone and the clone's clone all
/// reach the receiver (the last one's ring attached through the ring of
/// the one before), each in order, and the receiver's one descriptor
/// wakes for all of them; it sees the end once all three are gone.
#[test]
fn clones_made_anywhere_reach_a_receiver_waiting_in_a_select() {
    let test = this_test!();
    match ferry_testkit::role().as_deref() {
        Some("receiver") => {
            let (_dog, main) = ferry_testkit::child_pipe("receiver", secs(60));
            let mut msg = main.receiver().recv_with().expect("the receiver");
            let rx = msg.receivers.pop().expect("a receiver");
            let mut select = ferry::Select::new().expect("a select");
            let key = select.add(rx).map_err(|e| e.to_string()).expect("add");
            let mut next = [0u32; 3];
            let end = loop {
                select
                    .ready_timeout(Duration::from_secs(20))
                    .expect("a wake");
                let rx: &ferry::Receiver = select.get(key).expect("the receiver");
                let mut ended = None;
                loop {
                    match rx.try_recv() {
                        Ok(m) => {
                            let id = usize::from(m[0]);
                            let seq = u32::from_le_bytes(m[1..].try_into().unwrap());
                            assert_eq!(seq, next[id], "holder {id}: out of order");
                            next[id] += 1;
                        }
                        Err(ferry::TryRecvError::Empty) => break,
                        Err(e) => {
                            ended = Some(format!("{e:?}"));
                            break;
                        }
                    }
                }
                if let Some(end) = ended {
                    break end;
                }
            };
            main.send(format!("{next:?} {end}").as_bytes()).unwrap();
        }
        Some("cloner") => {
            let (dog, main) = ferry_testkit::child_pipe("cloner", secs(60));
            let mut msg = main.receiver().recv_with().expect("the clone");
            let tx = msg.senders.pop().expect("a clone");
            let (grandchild, down) =
                ferry_testkit::spawn_child(&dog, test, "grandchild", &PipeOptions::new());
            down.sender()
                .send_with(b"yours", vec![tx.clone()])
                .expect("send the clone's clone");
            send_tagged(&tx, 1);
            drop(tx);
            grandchild.wait_ok();
        }
        Some("grandchild") => {
            let (_dog, main) = ferry_testkit::child_pipe("grandchild", secs(60));
            let mut msg = main.receiver().recv_with().expect("the clone's clone");
            let tx = msg.senders.pop().expect("a clone");
            send_tagged(&tx, 2);
        }
        Some(other) => panic!("no role {other}"),
        None => {
            let dog = ferry_testkit::Watchdog::start(test, secs(60));
            let (receiver, to_receiver) =
                ferry_testkit::spawn_child(&dog, test, "receiver", &PipeOptions::new());
            let (cloner, to_cloner) =
                ferry_testkit::spawn_child(&dog, test, "cloner", &PipeOptions::new());
            let (tx, rx) = ferry::bytes::channel(64).unwrap();
            to_receiver
                .sender()
                .send_with(b"the receiver", vec![rx])
                .expect("send the receiver");
            to_cloner
                .sender()
                .send_with(b"a clone", vec![tx.clone()])
                .expect("send a clone");
            send_tagged(&tx, 0);
            drop(tx);
            cloner.wait_ok();
            let report = String::from_utf8(to_receiver.recv().expect("the receiver's report"))
                .expect("text");
            assert_eq!(
                report,
                format!("[{SPREAD}, {SPREAD}, {SPREAD}] Disconnected")
            );
            receiver.wait_ok();
        }
    }
}
