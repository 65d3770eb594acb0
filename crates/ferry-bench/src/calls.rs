//! In-process call costs, the table of the Mojo in-process study: a
//! trivial `add(i32, i32)` and an `echo(String)` called directly, through
//! a boxed closure, on another thread (std's mpsc, crossbeam, ferry's typed
//! channels) and through ferry pipes whose ends are all in this process.
//! Every row makes the same argument and checks the same result, so the
//! rows differ only in how the call travels; a run reports the median
//! batch's nanoseconds per call.

use std::hint::black_box;
use std::sync::mpsc::{self, Receiver as StdReceiver, Sender as StdSender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ::ferry::typed::{Receiver as FerryReceiver, Sender as FerrySender};
use ::ferry::{Pipe, RecvError};
use crossbeam_channel::{Receiver as CrossbeamReceiver, Sender as CrossbeamSender};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::definitions::DEFINITIONS;
use crate::error::{Context, Error};
use crate::matrix::Bench;
use crate::placement::Placement;
use crate::progress::Bar;
use crate::stats::median;

/// Timed batches per run (after one untimed batch).
const BATCHES: usize = DEFINITIONS.calls.batches;
/// What `echo` is called with: 12 bytes, the smallest pingpong message.
const TEXT: &str = "hello, ferry";

/// The function called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `add(i32, i32) -> i32`.
    Add,
    /// `echo(String) -> String`, the string moved in and back out.
    Echo,
}

impl Call {
    /// Both functions, in report order.
    pub const ALL: [Self; 2] = [Self::Add, Self::Echo];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add(i32, i32)",
            Self::Echo => "echo(String)",
        }
    }
}

/// How the call travels; [`Via::meaning`] says what each way does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Direct,
    Closure,
    StdMpsc,
    Crossbeam,
    FerryThreads,
    FerryOneThread,
    /// Over the receiving ends of this many pipes, one of them ready.
    FerrySelect(usize),
    FerryTypedThreads,
    FerryTypedOneThread,
}

impl Via {
    /// Every way, in report order.
    pub const ALL: [Self; 11] = [
        Self::Direct,
        Self::Closure,
        Self::StdMpsc,
        Self::Crossbeam,
        Self::FerryThreads,
        Self::FerryOneThread,
        Self::FerrySelect(1),
        Self::FerrySelect(10),
        Self::FerrySelect(100),
        Self::FerryTypedThreads,
        Self::FerryTypedOneThread,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Closure => "boxed-closure",
            Self::StdMpsc => "std-mpsc",
            Self::Crossbeam => "crossbeam",
            Self::FerryThreads => "ferry-2-threads",
            Self::FerryOneThread => "ferry-1-thread",
            Self::FerrySelect(1) => "ferry-select-1",
            Self::FerrySelect(10) => "ferry-select-10",
            Self::FerrySelect(_) => "ferry-select-100",
            Self::FerryTypedThreads => "ferry-typed-2-threads",
            Self::FerryTypedOneThread => "ferry-typed-1-thread",
        }
    }

    /// What the name means, for the report's legend.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Direct => "a plain function call, not inlined",
            Self::Closure => "a `Box<dyn Fn>` called through its vtable",
            Self::StdMpsc => "another thread: request and reply through `std::sync::mpsc` channels",
            Self::Crossbeam => "another thread: request and reply through `crossbeam-channel`",
            Self::FerryThreads => {
                "another thread: request and reply through the two ends of a `ferry::pipe()`"
            }
            Self::FerryOneThread => {
                "one thread: send on one end of a `ferry::pipe()`, receive on the other, reply, receive"
            }
            Self::FerrySelect(_) => {
                "as ferry-1-thread, the request found by a `ferry::Select` over the receiving ends of N pipes"
            }
            Self::FerryTypedThreads => {
                "another thread: request and reply through typed channels, `ferry::channel::<T>(16)` (values moved, not encoded)"
            }
            Self::FerryTypedOneThread => {
                "one thread: send the request on a typed channel, receive it, reply on another, receive the reply"
            }
        }
    }

    /// Calls per run by default (see [`DEFINITIONS`]).
    pub fn default_count(self, quick: bool) -> usize {
        let counts = DEFINITIONS.calls.counts;
        let count = match self {
            Self::Direct | Self::Closure | Self::FerryTypedOneThread => counts.in_thread,
            Self::FerryOneThread | Self::FerrySelect(_) => counts.pipe_in_thread,
            Self::StdMpsc | Self::Crossbeam | Self::FerryThreads | Self::FerryTypedThreads => {
                counts.other_thread
            }
        };
        match quick {
            true => (count / DEFINITIONS.calls.quick_share).max(BATCHES),
            false => count,
        }
    }
}

/// One row: a function called one way.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// The function.
    pub call: Call,
    /// How the call travels.
    pub via: Via,
    /// Where the caller runs (and the callee's thread, where there is one).
    pub placement: Placement,
    /// Timed calls per run.
    pub count: usize,
    /// The row stops once it has run this long.
    pub cap: Duration,
}

/// What one run of a row measured.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// The median batch's nanoseconds per call.
    pub ns_per_call: f64,
    /// Timed calls.
    pub calls: usize,
    /// The time cap stopped the row before its count.
    pub capped: bool,
}

impl Bench for Case {
    type Sample = Sample;

    fn label(&self) -> String {
        format!(
            "{} via {} ({})",
            self.call.name(),
            self.via.name(),
            self.placement.name()
        )
    }

    fn placement(&self) -> Placement {
        self.placement
    }

    fn work(&self) -> u64 {
        BATCHES as u64 + 1
    }

    fn run(&self, bar: &Bar) -> Result<Sample, Error> {
        match self.call {
            Call::Add => run::<Add>(self, bar),
            Call::Echo => run::<Echo>(self, bar),
        }
    }

    fn brief(sample: &Sample) -> String {
        let capped = if sample.capped { " (capped)" } else { "" };
        format!("{:.1} ns per call{capped}", sample.ns_per_call)
    }
}

/// A function, its argument and its result.
trait Func: 'static {
    type Arg: Value;
    type Ret: Value;
    /// The argument of call `i`.
    fn arg(i: u32) -> Self::Arg;
    /// The function itself.
    fn compute(arg: Self::Arg) -> Self::Ret;
    /// Whether `ret` is the right result of call `i`.
    fn check(i: u32, ret: &Self::Ret) -> bool;
}

struct Add;

impl Func for Add {
    type Arg = (i32, i32);
    type Ret = i32;

    fn arg(i: u32) -> (i32, i32) {
        (i as i32, 1)
    }
    #[inline]
    fn compute((a, b): (i32, i32)) -> i32 {
        a.wrapping_add(b)
    }
    fn check(i: u32, ret: &i32) -> bool {
        *ret == (i as i32).wrapping_add(1)
    }
}

struct Echo;

impl Func for Echo {
    type Arg = String;
    type Ret = String;

    fn arg(_: u32) -> String {
        TEXT.to_string()
    }
    #[inline]
    fn compute(text: String) -> String {
        text
    }
    fn check(_: u32, ret: &String) -> bool {
        ret == TEXT
    }
}

/// What a call's argument and result are: movable to another thread,
/// encodable for a typed channel, and written as bytes on a ferry pipe.
trait Value: Send + Serialize + DeserializeOwned + Sized + 'static {
    /// Appends the value's bytes to `out`.
    fn put(&self, out: &mut Vec<u8>);
    /// The value `put` wrote into `bytes`.
    fn take(bytes: &[u8]) -> Result<Self, Error>;
}

impl Value for i32 {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Result<Self, Error> {
        let n = bytes
            .first_chunk::<4>()
            .ok_or_else(|| Error::new("an i32 is cut short"))?;
        Ok(i32::from_le_bytes(*n))
    }
}

impl Value for (i32, i32) {
    fn put(&self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }
    fn take(bytes: &[u8]) -> Result<Self, Error> {
        let (a, b) = bytes
            .split_first_chunk::<4>()
            .ok_or_else(|| Error::new("a pair of i32 is cut short"))?;
        Ok((i32::from_le_bytes(*a), i32::take(b)?))
    }
}

impl Value for String {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn take(bytes: &[u8]) -> Result<Self, Error> {
        String::from_utf8(bytes.to_vec()).context("a string's bytes")
    }
}

/// The function, called for real: a call the compiler may not inline.
#[inline(never)]
fn direct<F: Func>(arg: F::Arg) -> F::Ret {
    F::compute(arg)
}

/// One way of making the call.
trait Caller<F: Func> {
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error>;
    /// Stops the callee's thread, if any, and returns what it failed with.
    fn close(self) -> Result<(), Error>
    where
        Self: Sized,
    {
        Ok(())
    }
}

fn run<F: Func>(case: &Case, bar: &Bar) -> Result<Sample, Error> {
    let placement = case.placement;
    match case.via {
        Via::Direct => time::<F, _>(Direct, case, bar),
        Via::Closure => time::<F, _>(Closure::<F>(Box::new(F::compute)), case, bar),
        Via::StdMpsc => time::<F, _>(Hop::<F, StdChannels>::start(placement), case, bar),
        Via::Crossbeam => time::<F, _>(Hop::<F, CrossbeamChannels>::start(placement), case, bar),
        Via::FerryThreads => time::<F, _>(FerryThreads::start::<F>(placement)?, case, bar),
        Via::FerryOneThread => time::<F, _>(FerryOneThread::new()?, case, bar),
        Via::FerryTypedThreads => {
            time::<F, _>(Hop::<F, FerryTypedChannels>::start(placement), case, bar)
        }
        Via::FerryTypedOneThread => {
            time::<F, _>(OneThread::<F, FerryTypedChannels>::new(), case, bar)
        }
        Via::FerrySelect(n) => time::<F, _>(FerrySelect::new(n)?, case, bar),
    }
}

/// Times the row's batches, then closes the caller.
fn time<F: Func, C: Caller<F>>(mut caller: C, case: &Case, bar: &Bar) -> Result<Sample, Error> {
    let timed = batches::<F, C>(&mut caller, case, bar);
    let closed = caller.close();
    let sample = timed?;
    closed.map(|()| sample)
}

fn batches<F: Func, C: Caller<F>>(caller: &mut C, case: &Case, bar: &Bar) -> Result<Sample, Error> {
    let per_batch = (case.count / BATCHES).max(1);
    batch::<F, C>(caller, per_batch).map_err(|e| e.within("warming up"))?;
    bar.advance(1);
    let started = Instant::now();
    let mut per_call = Vec::with_capacity(BATCHES);
    let mut capped = false;
    for b in 0..BATCHES {
        let start = Instant::now();
        batch::<F, C>(caller, per_batch).map_err(|e| e.within(format!("batch {b}")))?;
        per_call.push(start.elapsed().as_nanos() as f64 / per_batch as f64);
        bar.advance(1);
        if started.elapsed() > case.cap && b + 1 < BATCHES {
            capped = true;
            bar.advance((BATCHES - b - 1) as u64);
            break;
        }
    }
    let calls = per_batch * per_call.len();
    let ns_per_call = median(&mut per_call).unwrap_or(f64::NAN);
    Ok(Sample {
        ns_per_call,
        calls,
        capped,
    })
}

fn batch<F: Func, C: Caller<F>>(caller: &mut C, calls: usize) -> Result<(), Error> {
    for i in 0..calls as u32 {
        let ret = black_box(caller.call(F::arg(black_box(i)))?);
        if !F::check(i, &ret) {
            return Err(Error::new(format!("call {i} returned a wrong result")));
        }
    }
    Ok(())
}

struct Direct;

impl<F: Func> Caller<F> for Direct {
    #[inline]
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        Ok(direct::<F>(arg))
    }
}

type BoxedFn<F> = Box<dyn Fn(<F as Func>::Arg) -> <F as Func>::Ret>;

struct Closure<F: Func>(BoxedFn<F>);

impl<F: Func> Caller<F> for Closure<F> {
    #[inline]
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        // Hidden from the optimizer, so the call stays indirect.
        let f = black_box(&self.0);
        Ok(f(arg))
    }
}

/// The callee's thread, placed where the placement puts the child.
struct Callee(JoinHandle<Result<(), Error>>);

impl Callee {
    fn spawn(
        placement: Placement,
        serve: impl FnOnce() -> Result<(), Error> + Send + 'static,
    ) -> Self {
        Self(thread::spawn(move || {
            placement.pin_child()?;
            serve()
        }))
    }

    fn join(self) -> Result<(), Error> {
        self.0
            .join()
            .unwrap_or_else(|_| Err(Error::new("the callee's thread panicked")))
            .map_err(|e| e.within("the callee's thread"))
    }
}

/// The error of a call whose callee has gone: its thread's own error if it
/// ended with one.
fn callee_gone(callee: Option<Callee>) -> Error {
    match callee.map(Callee::join) {
        Some(Err(e)) => e,
        _ => Error::new("the callee's thread stopped answering"),
    }
}

/// A flavour of in-process channel a [`Hop`] sends its calls through.
trait Channel: 'static {
    type Sender<T: Value>: Send + 'static;
    type Receiver<T: Value>: Send + 'static;
    fn channel<T: Value>() -> (Self::Sender<T>, Self::Receiver<T>);
    /// Sends `value`; `false` once the receiver has gone.
    fn send<T: Value>(sender: &Self::Sender<T>, value: T) -> bool;
    /// The next value; `None` once the sender has gone.
    fn recv<T: Value>(receiver: &Self::Receiver<T>) -> Option<T>;
}

/// A call through two of `C`'s channels on one thread: the request sent,
/// received, answered, and the answer received.
struct OneThread<F: Func, C: Channel> {
    requests: C::Sender<F::Arg>,
    inbox: C::Receiver<F::Arg>,
    outbox: C::Sender<F::Ret>,
    replies: C::Receiver<F::Ret>,
}

impl<F: Func, C: Channel> OneThread<F, C> {
    fn new() -> Self {
        let (requests, inbox) = C::channel::<F::Arg>();
        let (outbox, replies) = C::channel::<F::Ret>();
        Self {
            requests,
            inbox,
            outbox,
            replies,
        }
    }
}

impl<F: Func, C: Channel> Caller<F> for OneThread<F, C> {
    #[inline]
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        if !C::send(&self.requests, arg) {
            return Err(Error::new("the request channel closed"));
        }
        let arg = C::recv(&self.inbox).ok_or_else(|| Error::new("no request"))?;
        if !C::send(&self.outbox, F::compute(arg)) {
            return Err(Error::new("the reply channel closed"));
        }
        C::recv(&self.replies).ok_or_else(|| Error::new("no reply"))
    }
}

/// Channels whose `send` and `recv` take `&self` and fail only once the
/// other half has gone, made by `$make`.
macro_rules! channels {
    ($($(#[$doc:meta])* $name:ident: $sender:ident, $receiver:ident, $make:expr;)*) => {$(
        $(#[$doc])*
        struct $name;

        impl Channel for $name {
            type Sender<T: Value> = $sender<T>;
            type Receiver<T: Value> = $receiver<T>;
            fn channel<T: Value>() -> (Self::Sender<T>, Self::Receiver<T>) {
                $make
            }
            #[inline]
            fn send<T: Value>(sender: &Self::Sender<T>, value: T) -> bool {
                sender.send(value).is_ok()
            }
            #[inline]
            fn recv<T: Value>(receiver: &Self::Receiver<T>) -> Option<T> {
                receiver.recv().ok()
            }
        }
    )*};
}

channels! {
    /// std's mpsc channels.
    StdChannels: StdSender, StdReceiver, mpsc::channel();
    /// crossbeam's unbounded channels.
    CrossbeamChannels: CrossbeamSender, CrossbeamReceiver, crossbeam_channel::unbounded();
    /// ferry's typed channels, both halves in this process; one request or
    /// reply is in flight at a time.
    FerryTypedChannels: FerrySender, FerryReceiver, ::ferry::channel(16).expect("16 is a valid capacity");
}

/// A call on another thread: the argument there and the result back,
/// through a pair of `C`'s channels.
struct Hop<F: Func, C: Channel> {
    requests: Option<C::Sender<F::Arg>>,
    replies: C::Receiver<F::Ret>,
    callee: Option<Callee>,
}

impl<F: Func, C: Channel> Hop<F, C> {
    fn start(placement: Placement) -> Self {
        let (requests, inbox) = C::channel::<F::Arg>();
        let (outbox, replies) = C::channel::<F::Ret>();
        let callee = Callee::spawn(placement, move || {
            while let Some(arg) = C::recv(&inbox) {
                if !C::send(&outbox, F::compute(arg)) {
                    break;
                }
            }
            Ok(())
        });
        Self {
            requests: Some(requests),
            replies,
            callee: Some(callee),
        }
    }
}

impl<F: Func, C: Channel> Caller<F> for Hop<F, C> {
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        let sent = self.requests.as_ref().map(|r| C::send(r, arg));
        match (sent, C::recv(&self.replies)) {
            (Some(true), Some(ret)) => Ok(ret),
            _ => Err(callee_gone(self.callee.take())),
        }
    }
    fn close(mut self) -> Result<(), Error> {
        drop(self.requests.take());
        self.callee.take().map_or(Ok(()), Callee::join)
    }
}

/// Receives the next message into `buf`; `false` once the other end closed.
fn recv_into(pipe: &Pipe, buf: &mut Vec<u8>) -> Result<bool, Error> {
    match pipe.receiver().recv_into(buf) {
        Ok(()) => Ok(true),
        Err(RecvError::Disconnected) => Ok(false),
        Err(e) => Err(e).context("receiving on the ferry pipe"),
    }
}

/// Receives the next message into `buf`, failing once the other end closed.
#[inline]
fn recv_open(pipe: &Pipe, buf: &mut Vec<u8>) -> Result<(), Error> {
    match recv_into(pipe, buf)? {
        true => Ok(()),
        false => Err(Error::new("the pipe closed")),
    }
}

/// Answers one call whose argument is in `inbox`, on `to`.
fn answer<F: Func>(to: &::ferry::Sender, inbox: &[u8], out: &mut Vec<u8>) -> Result<(), Error> {
    let ret = F::compute(F::Arg::take(inbox)?);
    out.clear();
    ret.put(out);
    to.send(out).context("answering on the ferry pipe")
}

/// `arg`'s bytes in `out`, replacing what it held.
#[inline]
fn request<'o, F: Func>(arg: &F::Arg, out: &'o mut Vec<u8>) -> &'o [u8] {
    out.clear();
    arg.put(out);
    out
}

/// Another thread, through the two ends of a ferry pipe.
struct FerryThreads {
    pipe: Option<Pipe>,
    out: Vec<u8>,
    inbox: Vec<u8>,
    callee: Option<Callee>,
}

impl FerryThreads {
    fn start<F: Func>(placement: Placement) -> Result<Self, Error> {
        let (pipe, theirs) = ::ferry::pipe().context("making a ferry pipe")?;
        let callee = Callee::spawn(placement, move || {
            let (mut inbox, mut out) = (Vec::new(), Vec::new());
            while recv_into(&theirs, &mut inbox)? {
                answer::<F>(theirs.sender(), &inbox, &mut out)?;
            }
            Ok(())
        });
        Ok(Self {
            pipe: Some(pipe),
            out: Vec::new(),
            inbox: Vec::new(),
            callee: Some(callee),
        })
    }

    fn exchange<F: Func>(&mut self, arg: &F::Arg) -> Result<bool, Error> {
        let Some(pipe) = &self.pipe else {
            return Ok(false);
        };
        if pipe.send(request::<F>(arg, &mut self.out)).is_err() {
            return Ok(false);
        }
        recv_into(pipe, &mut self.inbox)
    }
}

impl<F: Func> Caller<F> for FerryThreads {
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        match self.exchange::<F>(&arg)? {
            true => F::Ret::take(&self.inbox),
            false => Err(callee_gone(self.callee.take())),
        }
    }
    fn close(mut self) -> Result<(), Error> {
        drop(self.pipe.take());
        self.callee.take().map_or(Ok(()), Callee::join)
    }
}

/// One thread: send on one end of a ferry pipe, receive on the other,
/// answer, and receive the answer.
struct FerryOneThread {
    caller: Pipe,
    callee: Pipe,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl FerryOneThread {
    fn new() -> Result<Self, Error> {
        let (caller, callee) = ::ferry::pipe().context("making a ferry pipe")?;
        let (out, inbox) = (Vec::new(), Vec::new());
        Ok(Self {
            caller,
            callee,
            out,
            inbox,
        })
    }
}

impl<F: Func> Caller<F> for FerryOneThread {
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        let sent = self.caller.send(request::<F>(&arg, &mut self.out));
        sent.context("sending the call")?;
        recv_open(&self.callee, &mut self.inbox)?;
        answer::<F>(self.callee.sender(), &self.inbox, &mut self.out)?;
        recv_open(&self.caller, &mut self.inbox)?;
        F::Ret::take(&self.inbox)
    }
}

/// One thread: each request goes out on one of many pipes (a different one
/// each call), a `Select` over their far ends finds it, and the answer
/// comes back on the same pipe.
struct FerrySelect {
    /// The near ends, where calls go out and answers come back.
    near: Vec<Pipe>,
    /// The far ends' sending halves (their receiving halves are in the
    /// `Select`, under `keys`, in the same order).
    far: Vec<::ferry::Sender>,
    keys: Vec<::ferry::Key>,
    select: ::ferry::Select,
    /// The pipe of the next request.
    next: usize,
    out: Vec<u8>,
    inbox: Vec<u8>,
}

impl FerrySelect {
    fn new(pipes: usize) -> Result<Self, Error> {
        let mut select = ::ferry::Select::new().context("making a select")?;
        let (mut near, mut far, mut keys) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..pipes {
            let (a, b) = ::ferry::pipe().context("making ferry pipes")?;
            let (tx, rx) = b.split();
            keys.push(select.add(rx).context("adding a receiver")?);
            near.push(a);
            far.push(tx);
        }
        let (out, inbox) = (Vec::new(), Vec::new());
        Ok(Self {
            near,
            far,
            keys,
            select,
            next: 0,
            out,
            inbox,
        })
    }
}

impl<F: Func> Caller<F> for FerrySelect {
    fn call(&mut self, arg: F::Arg) -> Result<F::Ret, Error> {
        let n = self.near.len();
        let near = &self.near[self.next];
        self.next = (self.next + 7) % n;
        let sent = near.send(request::<F>(&arg, &mut self.out));
        sent.context("sending the call")?;
        let key = self.select.ready().context("selecting")?;
        let far = self
            .select
            .get::<::ferry::Receiver>(key)
            .ok_or_else(|| Error::new("the select returned a key not its own"))?;
        far.try_recv_into(&mut self.inbox)
            .context("receiving the selected call")?;
        let i = self.keys.binary_search(&key).unwrap_or(0);
        answer::<F>(&self.far[i], &self.inbox, &mut self.out)?;
        recv_open(near, &mut self.inbox)?;
        F::Ret::take(&self.inbox)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn through_bytes<F: Func>(i: u32) -> bool {
        let mut buf = Vec::new();
        F::arg(i).put(&mut buf);
        let ret = F::compute(F::Arg::take(&buf).unwrap());
        buf.clear();
        ret.put(&mut buf);
        F::check(i, &F::Ret::take(&buf).unwrap())
    }

    #[test]
    fn calls_survive_their_encoding() {
        assert!(through_bytes::<Add>(41));
        assert!(through_bytes::<Add>(u32::MAX));
        assert!(through_bytes::<Echo>(0));
        assert!(<(i32, i32)>::take(&[1, 2, 3]).is_err());
        assert!(<(i32, i32)>::take(&[1, 2, 3, 4, 5]).is_err());
        assert!(String::take(&[0xff]).is_err());
    }
}
