use ferry::typed::{Bytes, Duplex};
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Serialize, Deserialize, Default, Clone)]
struct Msg {
    topic: u32,
    data: Bytes,
}

fn main() {
    let n: u32 = std::env::var("N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000_000);
    let which = std::env::args().nth(1).unwrap_or_default();
    let (a, b) = ferry::pipe().unwrap();
    if which == "bytes" {
        let out = vec![7u8; 144];
        let mut inbox = Vec::new();
        let t = Instant::now();
        for _ in 0..n {
            a.send(&out).unwrap();
            b.recv_into(&mut inbox).unwrap();
        }
        println!("bytes {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    } else if which == "raw" {
        let mut out = Msg {
            topic: 0,
            data: vec![7u8; 144].into(),
        };
        let mut buf = Vec::new();
        let mut inbox = Vec::new();
        let t = Instant::now();
        for i in 0..n {
            out.topic = i;
            buf.clear();
            ferry::typed::encode_into(&out, &mut buf).unwrap();
            a.send(&buf).unwrap();
            b.recv_into(&mut inbox).unwrap();
            let m: Msg = ferry::typed::decode(&inbox).unwrap();
            std::hint::black_box(m);
        }
        println!(
            "raw encode/decode {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    } else if which == "ref" {
        let a = Duplex::<Msg, Msg>::from_pipe(a);
        let (_, b) = Duplex::<Msg, Msg>::from_pipe(b).split();
        let (atx, _) = a.split();
        let mut out = Msg {
            topic: 0,
            data: vec![7u8; 144].into(),
        };
        let mut inbox = Msg::default();
        let t = Instant::now();
        for i in 0..n {
            out.topic = i;
            atx.send_ref(&out).unwrap();
            b.recv_into(&mut inbox).unwrap();
        }
        println!(
            "typed ref/into {:.1} ns",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    } else {
        let a = Duplex::<Msg, Msg>::from_pipe(a);
        let b = Duplex::<Msg, Msg>::from_pipe(b);
        let mut out = vec![7u8; 144];
        let t = Instant::now();
        for i in 0..n {
            a.send(Msg {
                topic: i,
                data: Bytes(std::mem::take(&mut out)),
            })
            .unwrap();
            let m = b.recv().unwrap();
            out = m.data.0;
        }
        println!("typed {:.1} ns", t.elapsed().as_nanos() as f64 / n as f64);
    }
}
