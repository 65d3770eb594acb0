//! Which encoding the typed-message layer should use, chosen by
//! measurement: `ferry-bench codecs` encodes and decodes the same values
//! with postcard, bitcode (through serde and through its own derive),
//! wincode, rkyv (validated access only) and ferry's own typed layer, and
//! prints a markdown report of sizes and times, followed by what each
//! decoder does with hostile input.
//!
//! The hostile-input section comes from the `codec_probe` binary beside
//! this one (`src/bin/codec_probe.rs`), which counts every allocation with
//! a `#[global_allocator]` (kept out of `ferry-bench` itself, whose other
//! workloads should not pay for the counting) and runs each probe in a
//! child process, so a stack overflow or an abort is reported rather than
//! ending the run. That binary compiles this file too, for the types and
//! the ferry row.
//!
//! Method: each encoder and each decoder is warmed up, then timed in
//! batches sized for about 5 ms each (0.5 ms with `--quick`), at least 11
//! batches; the figure is the median batch's time per operation. Encoders
//! write every byte of their output; each decode is followed by the same
//! fold over every byte of the decoded value ([`Touch`]), so neither side
//! can skip the payload. Before timing, every row's decode is checked to
//! fold to the same value as the original.
//!
//! The crates here are dependencies of ferry-bench for this comparison
//! only; ferry itself depends on none of them.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use rkyv::api::high::{HighDeserializer, HighSerializer, HighValidator};
use rkyv::bytecheck::CheckBytes;
use rkyv::rancor;
use rkyv::ser::allocator::ArenaHandle;
use rkyv::util::AlignedVec;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wincode::config::DefaultConfig;

use crate::error::Error;

/// The versions compared (as in `Cargo.lock` when this was written; keep
/// in step with it).
pub const VERSIONS: &str = "postcard 1.2.0, bitcode 0.6.9, wincode 0.6.3, rkyv 0.8.18";

// ---------------------------------------------------------------------
// FERRY ROW: the typed layer under test, `ferry::typed`.

/// Encodes `v` into `out` (cleared first) the way ferry's typed layer does.
pub fn ferry_encode<T: Serialize>(v: &T, out: &mut Vec<u8>) {
    out.clear();
    ferry::typed::encode_into(v, out).expect("the ferry row encodes every value compared");
}

/// Decodes bytes that [`ferry_encode`] wrote.
pub fn ferry_decode<T: DeserializeOwned>(b: &[u8]) -> T {
    ferry_try_decode(b).expect("the ferry row decodes what it encoded")
}

/// What [`ferry_try_decode`] fails with.
pub type FerryDecodeError = ferry::typed::DecodeError;

/// [`ferry_decode`], failing with an error: for input that may be hostile.
pub fn ferry_try_decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, FerryDecodeError> {
    ferry::typed::decode(b)
}
// END FERRY ROW
// ---------------------------------------------------------------------

/// A fold over every byte of a value (and of its archived form, for rkyv's
/// zero-copy row): what each decode is followed by, the same for all.
pub trait Touch {
    fn touch(&self) -> u64;
}

/// Reads every byte, eight at a time: cheap next to any decode, and the
/// same for every row.
pub fn fold_bytes(bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    let sum = words.by_ref().fold(0u64, |sum, w| {
        sum.wrapping_add(u64::from_le_bytes(w.try_into().expect("8 bytes")))
    });
    let tail = words.remainder();
    tail.iter()
        .fold(sum.rotate_left(7), |sum, &b| sum.wrapping_add(u64::from(b)))
}

fn mix(acc: u64, x: u64) -> u64 {
    acc.wrapping_mul(31).wrapping_add(x)
}

/// The seed message, its payload a byte buffer to serde (`serde_bytes`).
#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
    wincode::SchemaWrite,
    wincode::SchemaRead,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Msg {
    pub topic: u32,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// The seed message with a plain `Vec<u8>`: serde sees a sequence of `u8`,
/// one call per element. Only the serde codecs differ between the two.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MsgSeq {
    pub topic: u32,
    pub data: Vec<u8>,
}

impl Touch for Msg {
    fn touch(&self) -> u64 {
        mix(u64::from(self.topic), fold_bytes(&self.data))
    }
}

impl Touch for ArchivedMsg {
    fn touch(&self) -> u64 {
        mix(u64::from(self.topic.to_native()), fold_bytes(&self.data))
    }
}

impl Touch for MsgSeq {
    fn touch(&self) -> u64 {
        mix(u64::from(self.topic), fold_bytes(&self.data))
    }
}

impl Touch for (i32, i32) {
    fn touch(&self) -> u64 {
        mix(self.0 as u64, self.1 as u64)
    }
}

impl Touch for rkyv::tuple::ArchivedTuple2<rkyv::rend::i32_le, rkyv::rend::i32_le> {
    fn touch(&self) -> u64 {
        mix(self.0.to_native() as u64, self.1.to_native() as u64)
    }
}

impl Touch for String {
    fn touch(&self) -> u64 {
        fold_bytes(self.as_bytes())
    }
}

impl Touch for rkyv::string::ArchivedString {
    fn touch(&self) -> u64 {
        fold_bytes(self.as_bytes())
    }
}

/// A rich value of about 1 KB: strings, integers of every magnitude, a
/// map, an enum of every variant kind, an optional box, a float and a bool.
#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
    wincode::SchemaWrite,
    wincode::SchemaRead,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Rich {
    pub id: u64,
    pub name: String,
    pub tags: Vec<String>,
    pub samples: Vec<u64>,
    pub counters: BTreeMap<String, u32>,
    pub shapes: Vec<Shape>,
    pub origin: Option<Box<Origin>>,
    pub ratio: f64,
    pub enabled: bool,
}

#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
    wincode::SchemaWrite,
    wincode::SchemaRead,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub struct Origin {
    pub host: String,
    pub pid: u32,
    pub started: Option<u64>,
}

#[derive(
    Debug,
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
    wincode::SchemaWrite,
    wincode::SchemaRead,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
pub enum Shape {
    Empty,
    Point(i32, i32),
    Circle {
        x: f64,
        y: f64,
        radius: f64,
        label: String,
    },
}

impl Touch for Rich {
    fn touch(&self) -> u64 {
        let mut acc = mix(self.id, fold_bytes(self.name.as_bytes()));
        for tag in &self.tags {
            acc = mix(acc, fold_bytes(tag.as_bytes()));
        }
        for &s in &self.samples {
            acc = mix(acc, s);
        }
        for (k, &v) in &self.counters {
            acc = mix(mix(acc, fold_bytes(k.as_bytes())), u64::from(v));
        }
        for shape in &self.shapes {
            acc = match shape {
                Shape::Empty => mix(acc, 1),
                Shape::Point(x, y) => mix(mix(acc, *x as u64), *y as u64),
                Shape::Circle {
                    x,
                    y,
                    radius,
                    label,
                } => {
                    let acc = mix(mix(acc, x.to_bits()), y.to_bits());
                    mix(mix(acc, radius.to_bits()), fold_bytes(label.as_bytes()))
                }
            };
        }
        if let Some(origin) = &self.origin {
            acc = mix(acc, fold_bytes(origin.host.as_bytes()));
            acc = mix(mix(acc, u64::from(origin.pid)), origin.started.unwrap_or(7));
        }
        mix(mix(acc, self.ratio.to_bits()), u64::from(self.enabled))
    }
}

impl Touch for ArchivedRich {
    fn touch(&self) -> u64 {
        let mut acc = mix(self.id.to_native(), fold_bytes(self.name.as_bytes()));
        for tag in self.tags.iter() {
            acc = mix(acc, fold_bytes(tag.as_bytes()));
        }
        for s in self.samples.iter() {
            acc = mix(acc, s.to_native());
        }
        for (k, v) in self.counters.iter() {
            acc = mix(mix(acc, fold_bytes(k.as_bytes())), u64::from(v.to_native()));
        }
        for shape in self.shapes.iter() {
            acc = match shape {
                ArchivedShape::Empty => mix(acc, 1),
                ArchivedShape::Point(x, y) => {
                    mix(mix(acc, x.to_native() as u64), y.to_native() as u64)
                }
                ArchivedShape::Circle {
                    x,
                    y,
                    radius,
                    label,
                } => {
                    let acc = mix(mix(acc, x.to_native().to_bits()), y.to_native().to_bits());
                    mix(
                        mix(acc, radius.to_native().to_bits()),
                        fold_bytes(label.as_bytes()),
                    )
                }
            };
        }
        if let Some(origin) = self.origin.as_ref() {
            acc = mix(acc, fold_bytes(origin.host.as_bytes()));
            let started = origin.started.as_ref().map_or(7, |s| s.to_native());
            acc = mix(mix(acc, u64::from(origin.pid.to_native())), started);
        }
        mix(
            mix(acc, self.ratio.to_native().to_bits()),
            u64::from(self.enabled),
        )
    }
}

/// `len` bytes from xorshift, so no encoder can pack them (bitcode packs
/// a buffer of low-entropy bytes into fewer bits).
pub fn payload(len: usize) -> Vec<u8> {
    let mut rng = Rng::new(0x5eed);
    (0..len).map(|_| rng.next() as u8).collect()
}

pub fn msg(len: usize) -> Msg {
    Msg {
        topic: 42,
        data: payload(len),
    }
}

/// The rich value: 1 KB or so in every encoding.
pub fn rich() -> Rich {
    let mut rng = Rng::new(0x1c4);
    Rich {
        id: 0x0123_4567_89ab_cdef,
        name: "ferry.typed.rich-value/sample #1".to_string(),
        tags: [
            "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        // Small, medium and large magnitudes, as varints see them.
        samples: (0..64u32)
            .map(|i| match i % 3 {
                0 => u64::from(i),
                1 => rng.next() >> 40,
                _ => rng.next(),
            })
            .collect(),
        counters: (0..20u32)
            .map(|i| (format!("counter-{i:02}"), i * 1000 + 7))
            .collect(),
        shapes: (0..18)
            .map(|i| match i % 3 {
                0 => Shape::Empty,
                1 => Shape::Point(i * 3, -i * 5),
                _ => Shape::Circle {
                    x: f64::from(i) * 1.5,
                    y: -f64::from(i) / 3.0,
                    radius: 0.25 + f64::from(i),
                    label: format!("circle {i}"),
                },
            })
            .collect(),
        origin: Some(Box::new(Origin {
            host: "build-host.example".to_string(),
            pid: 31337,
            started: Some(1_700_000_000),
        })),
        ratio: 0.618_033_988_75,
        enabled: true,
    }
}

/// xorshift64*: deterministic, fast, good enough for payloads and fuzzing.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// What the encoders write into, kept across calls so that the rows that
/// reuse a buffer can.
pub struct Scratch {
    vec: Vec<u8>,
    slice: Vec<u8>,
    aligned: AlignedVec,
    bitcode: bitcode::Buffer,
}

/// The room of the preallocated buffer the `to_slice` rows write into.
const SLICE_ROOM: usize = 4 << 20;

impl Scratch {
    pub fn new() -> Self {
        Self {
            vec: Vec::new(),
            slice: vec![0; SLICE_ROOM],
            aligned: AlignedVec::new(),
            bitcode: bitcode::Buffer::new(),
        }
    }
}

/// What a decoder may keep across calls (bitcode's `Buffer`).
pub struct Decoding {
    bitcode: bitcode::Buffer,
}

impl Decoding {
    pub fn new() -> Self {
        Self {
            bitcode: bitcode::Buffer::new(),
        }
    }
}

/// Encodes into the scratch space, returning the encoding.
type EncodeFn<T> = for<'s> fn(&T, &'s mut Scratch) -> Result<&'s [u8], String>;
/// Decodes and folds over the result ([`Touch`]).
type DecodeFn = fn(&[u8], &mut Decoding) -> Result<u64, String>;

/// One row: an encoder and the decoder of what it wrote.
pub struct Codec<T> {
    name: &'static str,
    encode: EncodeFn<T>,
    decode: DecodeFn,
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

// The encoders.

fn postcard_slice<'s, T: Serialize>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    postcard::to_slice(v, &mut s.slice)
        .map(|b| &*b)
        .map_err(text)
}

fn postcard_vec<'s, T: Serialize>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    s.vec = postcard::to_allocvec(v).map_err(text)?;
    Ok(&s.vec)
}

fn bitcode_serde<'s, T: Serialize>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    s.vec = bitcode::serialize(v).map_err(text)?;
    Ok(&s.vec)
}

fn ferry_vec<'s, T: Serialize>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    ferry_encode(v, &mut s.vec);
    Ok(&s.vec)
}

fn bitcode_derive<'s, T: bitcode::Encode>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    s.vec = bitcode::encode(v);
    Ok(&s.vec)
}

fn bitcode_buffer<'s, T: bitcode::Encode>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    Ok(s.bitcode.encode(v))
}

fn wincode_vec<'s, T>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String>
where
    T: wincode::SchemaWrite<DefaultConfig, Src = T>,
{
    s.vec = wincode::serialize(v).map_err(text)?;
    Ok(&s.vec)
}

fn wincode_slice<'s, T>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String>
where
    T: wincode::SchemaWrite<DefaultConfig, Src = T>,
{
    let mut rest: &mut [u8] = &mut s.slice;
    wincode::serialize_into(&mut rest, v).map_err(text)?;
    let written = SLICE_ROOM - rest.len();
    Ok(&s.slice[..written])
}

/// What rkyv's high-level API asks of a value it serializes.
pub trait RkyvWrite:
    for<'a> rkyv::Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>
{
}
impl<T> RkyvWrite for T where
    T: for<'a> rkyv::Serialize<HighSerializer<AlignedVec, ArenaHandle<'a>, rancor::Error>>
{
}

fn rkyv_bytes<'s, T: RkyvWrite>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    s.aligned = rkyv::to_bytes::<rancor::Error>(v).map_err(text)?;
    Ok(&s.aligned)
}

fn rkyv_reuse<'s, T: RkyvWrite>(v: &T, s: &'s mut Scratch) -> Result<&'s [u8], String> {
    let mut buf = std::mem::take(&mut s.aligned);
    buf.clear();
    s.aligned = rkyv::api::high::to_bytes_in::<_, rancor::Error>(v, buf).map_err(text)?;
    Ok(&s.aligned)
}

// The decoders, each followed by the fold.

fn postcard_de<T: DeserializeOwned + Touch>(b: &[u8], _: &mut Decoding) -> Result<u64, String> {
    postcard::from_bytes::<T>(b)
        .map(|v| v.touch())
        .map_err(text)
}

fn bitcode_serde_de<T: DeserializeOwned + Touch>(
    b: &[u8],
    _: &mut Decoding,
) -> Result<u64, String> {
    bitcode::deserialize::<T>(b)
        .map(|v| v.touch())
        .map_err(text)
}

fn ferry_de<T: DeserializeOwned + Touch>(b: &[u8], _: &mut Decoding) -> Result<u64, String> {
    Ok(ferry_decode::<T>(b).touch())
}

fn bitcode_de<T: bitcode::DecodeOwned + Touch>(b: &[u8], _: &mut Decoding) -> Result<u64, String> {
    bitcode::decode::<T>(b).map(|v| v.touch()).map_err(text)
}

fn bitcode_buffer_de<T: bitcode::DecodeOwned + Touch>(
    b: &[u8],
    d: &mut Decoding,
) -> Result<u64, String> {
    d.bitcode.decode::<T>(b).map(|v| v.touch()).map_err(text)
}

fn wincode_de<T>(b: &[u8], _: &mut Decoding) -> Result<u64, String>
where
    T: for<'de> wincode::SchemaRead<'de, DefaultConfig, Dst = T> + Touch,
{
    wincode::deserialize::<T>(b)
        .map(|v| v.touch())
        .map_err(text)
}

/// What rkyv's validated, high-level API asks of a value it reads back.
pub trait RkyvRead:
    rkyv::Archive<
        Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
                      + rkyv::Deserialize<Self, HighDeserializer<rancor::Error>>,
    > + Sized
{
}
impl<T> RkyvRead for T where
    T: rkyv::Archive<
            Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>>
                          + rkyv::Deserialize<T, HighDeserializer<rancor::Error>>,
        >
{
}

fn rkyv_de<T: RkyvRead + Touch>(b: &[u8], _: &mut Decoding) -> Result<u64, String> {
    rkyv::from_bytes::<T, rancor::Error>(b)
        .map(|v| v.touch())
        .map_err(text)
}

/// Validated access, no deserialize: the fold reads the archive in place.
fn rkyv_access<T>(b: &[u8], _: &mut Decoding) -> Result<u64, String>
where
    T: rkyv::Archive<Archived: for<'a> CheckBytes<HighValidator<'a, rancor::Error>> + Touch>,
{
    rkyv::access::<T::Archived, rancor::Error>(b)
        .map(|a| a.touch())
        .map_err(text)
}

/// The rows every serde type gets.
fn serde_rows<T: Serialize + DeserializeOwned + Touch>() -> Vec<Codec<T>> {
    vec![
        Codec {
            name: "postcard `to_slice` (preallocated) / `from_bytes`",
            encode: postcard_slice::<T>,
            decode: postcard_de::<T>,
        },
        Codec {
            name: "postcard `to_allocvec` / `from_bytes`",
            encode: postcard_vec::<T>,
            decode: postcard_de::<T>,
        },
        Codec {
            name: "bitcode serde (`serialize` / `deserialize`)",
            encode: bitcode_serde::<T>,
            decode: bitcode_serde_de::<T>,
        },
        Codec {
            name: "ferry typed (`encode_into` a reused Vec / `decode`)",
            encode: ferry_vec::<T>,
            decode: ferry_de::<T>,
        },
    ]
}

/// The rows of the codecs with derives of their own.
fn native_rows<T>() -> Vec<Codec<T>>
where
    T: bitcode::Encode + bitcode::DecodeOwned,
    T: wincode::SchemaWrite<DefaultConfig, Src = T>
        + for<'de> wincode::SchemaRead<'de, DefaultConfig, Dst = T>,
    T: RkyvWrite + RkyvRead + Touch,
    T::Archived: Touch,
{
    vec![
        Codec {
            name: "bitcode derive (`encode` / `decode`)",
            encode: bitcode_derive::<T>,
            decode: bitcode_de::<T>,
        },
        Codec {
            name: "bitcode derive, reused `Buffer`",
            encode: bitcode_buffer::<T>,
            decode: bitcode_buffer_de::<T>,
        },
        Codec {
            name: "wincode (`serialize` / `deserialize`)",
            encode: wincode_vec::<T>,
            decode: wincode_de::<T>,
        },
        Codec {
            name: "wincode `serialize_into` (preallocated)",
            encode: wincode_slice::<T>,
            decode: wincode_de::<T>,
        },
        Codec {
            name: "rkyv `to_bytes` / `from_bytes` (validated)",
            encode: rkyv_bytes::<T>,
            decode: rkyv_de::<T>,
        },
        Codec {
            name: "rkyv `to_bytes_in` (reused) / `from_bytes` (validated)",
            encode: rkyv_reuse::<T>,
            decode: rkyv_de::<T>,
        },
        Codec {
            name: "rkyv, validated `access` only (zero-copy, no deserialize)",
            encode: rkyv_reuse::<T>,
            decode: rkyv_access::<T>,
        },
    ]
}

/// Every row for a type that has all the derives.
fn all_rows<T>() -> Vec<Codec<T>>
where
    T: Serialize + DeserializeOwned,
    T: bitcode::Encode + bitcode::DecodeOwned,
    T: wincode::SchemaWrite<DefaultConfig, Src = T>
        + for<'de> wincode::SchemaRead<'de, DefaultConfig, Dst = T>,
    T: RkyvWrite + RkyvRead + Touch,
    T::Archived: Touch,
{
    let mut rows = serde_rows::<T>();
    rows.extend(native_rows::<T>());
    rows
}

/// How long to time each operation.
struct Plan {
    warmup: Duration,
    batch: Duration,
    batches: usize,
}

impl Plan {
    fn new(quick: bool) -> Self {
        match quick {
            true => Self {
                warmup: Duration::from_millis(2),
                batch: Duration::from_micros(500),
                batches: 11,
            },
            false => Self {
                warmup: Duration::from_millis(30),
                batch: Duration::from_millis(5),
                batches: 15,
            },
        }
    }

    /// The median over the batches of ns per `op`.
    fn median_ns(&self, mut op: impl FnMut()) -> f64 {
        let start = Instant::now();
        let mut warm = 0u64;
        while warm < 3 || start.elapsed() < self.warmup {
            op();
            warm += 1;
        }
        let per_op = start.elapsed().as_secs_f64() / warm as f64;
        let iters = ((self.batch.as_secs_f64() / per_op).ceil() as u64).max(1);
        let mut samples: Vec<f64> = (0..self.batches)
            .map(|_| {
                let batch = Instant::now();
                for _ in 0..iters {
                    op();
                }
                batch.elapsed().as_nanos() as f64 / iters as f64
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    }
}

struct Row {
    name: &'static str,
    size: usize,
    encode_ns: f64,
    decode_ns: f64,
}

/// Times every row on `value` and appends its table to `out`.
fn section<T: Touch>(
    out: &mut String,
    title: &str,
    value: &T,
    codecs: &[Codec<T>],
    plan: &Plan,
) -> Result<(), Error> {
    eprintln!("codecs: {title}");
    let expected = value.touch();
    let mut scratch = Scratch::new();
    let mut decoding = Decoding::new();
    let mut rows = Vec::new();
    for codec in codecs {
        let fail = |e: String| Error::new(format!("{title}, {}: {e}", codec.name));
        // Decoded from an aligned copy, as rkyv requires; the same for all.
        let mut encoded = AlignedVec::<16>::new();
        encoded.extend_from_slice((codec.encode)(value, &mut scratch).map_err(fail)?);
        let folded = (codec.decode)(&encoded, &mut decoding).map_err(fail)?;
        if folded != expected {
            return Err(fail("decoded a different value".to_string()));
        }
        let encode_ns = plan.median_ns(|| {
            let written = (codec.encode)(black_box(value), &mut scratch);
            black_box(written.map(|b| b.len()).ok());
        });
        let decode_ns = plan.median_ns(|| {
            black_box((codec.decode)(black_box(&encoded), &mut decoding).ok());
        });
        rows.push(Row {
            name: codec.name,
            size: encoded.len(),
            encode_ns,
            decode_ns,
        });
    }
    let fastest = rows
        .iter()
        .map(|r| r.encode_ns + r.decode_ns)
        .fold(f64::INFINITY, f64::min);
    let _ = writeln!(out, "### {title}\n");
    let _ = writeln!(
        out,
        "| encoder / decoder | size (B) | encode ns | decode ns | enc+dec × fastest |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|");
    for r in &rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.2} |",
            r.name,
            thousands(r.size as u64),
            ns(r.encode_ns),
            ns(r.decode_ns),
            (r.encode_ns + r.decode_ns) / fastest
        );
    }
    out.push('\n');
    Ok(())
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ns(v: f64) -> String {
    match v < 100.0 {
        true => format!("{v:.1}"),
        false => thousands(v.round() as u64),
    }
}

/// The CPU's model name, for the report's header.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

/// Runs the comparison and returns its markdown report: the timing tables,
/// then the hostile-input section from `codec_probe`.
pub fn run(quick: bool) -> Result<String, Error> {
    // First, so that a failed build costs no timing run.
    build_probe()?;
    let plan = Plan::new(quick);
    let mut out = String::new();
    let _ = writeln!(out, "# Typed-message encodings compared\n");
    let _ = writeln!(
        out,
        "{VERSIONS}; {} build; {}; {} CPUs{}.\n",
        match cfg!(debug_assertions) {
            true => "**debug**",
            false => "release",
        },
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        match quick {
            true => "; **--quick** (short batches: indicative only)",
            false => "",
        },
    );
    let _ = writeln!(
        out,
        "Each figure is the median of {} batches of ~{} µs each, after a {} ms warm-up, in ns per \
         operation. Every decode is followed by the same fold over every byte of the decoded \
         value (rkyv's zero-copy row folds over the archive in place). Payload bytes are \
         pseudo-random, so no encoder can pack them. \"enc+dec × fastest\" is the row's \
         encode+decode time over that of the fastest row of its table.\n",
        plan.batches,
        plan.batch.as_micros(),
        plan.warmup.as_millis(),
    );
    let _ = writeln!(out, "## Sizes and times\n");

    for len in [144, 248_832, 1_048_576] {
        let title = format!(
            "`Msg {{ topic: u32, data: Vec<u8> }}`, {} B payload (`serde_bytes`)",
            thousands(len as u64)
        );
        section(&mut out, &title, &msg(len), &all_rows::<Msg>(), &plan)?;
        if len == 144 {
            let plain = MsgSeq {
                topic: 42,
                data: payload(len),
            };
            let title = "`Msg`, 144 B payload as a plain `Vec<u8>` (a serde sequence: one call per \
                         byte; serde codecs only, the others encode it as above)";
            section(&mut out, title, &plain, &serde_rows::<MsgSeq>(), &plan)?;
        }
    }
    section(
        &mut out,
        "The call argument `(i32, i32)` = `(20, 22)`",
        &(20i32, 22i32),
        &all_rows::<(i32, i32)>(),
        &plan,
    )?;
    section(
        &mut out,
        "A 12-byte `String` (`\"hello, ferry\"`)",
        &"hello, ferry".to_string(),
        &all_rows::<String>(),
        &plan,
    )?;
    section(
        &mut out,
        "The rich value (nested struct: strings, `Vec<u64>`, `BTreeMap<String, u32>`, an enum \
         of unit/tuple/struct variants, `Option<Box<_>>`, f64, bool)",
        &rich(),
        &all_rows::<Rich>(),
        &plan,
    )?;

    out.push_str(&hostile_section(quick)?);
    Ok(out)
}

/// Under `cargo run`, which builds only the binary it runs, builds
/// `codec_probe` too (with the same profile), so that the probe is never
/// stale. Elsewhere the probe is taken as it is.
fn build_probe() -> Result<(), Error> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    let mut command = std::process::Command::new(cargo);
    command
        .args(["build", "-p", "ferry-bench", "--bin", "codec_probe"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if !cfg!(debug_assertions) {
        command.arg("--release");
    }
    eprintln!("codecs: building codec_probe ({command:?})");
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(Error::new(format!("building codec_probe: {status}"))),
        Err(e) => Err(Error::new(format!("building codec_probe: {e}"))),
    }
}

/// The hostile-input section, from the `codec_probe` binary beside this one.
fn hostile_section(quick: bool) -> Result<String, Error> {
    let exe = std::env::current_exe().map_err(|e| Error::new(format!("finding myself: {e}")))?;
    let probe = exe.with_file_name(format!("codec_probe{}", std::env::consts::EXE_SUFFIX));
    if !probe.is_file() {
        return Ok(format!(
            "## Hostile input\n\nNot run: `{}` is missing; build it with `cargo build --release -p \
             ferry-bench --bins`.\n",
            probe.display()
        ));
    }
    eprintln!("codecs: hostile inputs ({})", probe.display());
    let mut command = std::process::Command::new(&probe);
    if quick {
        command.arg("--quick");
    }
    let output = command
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| Error::new(format!("running {}: {e}", probe.display())))?;
    if !output.status.success() {
        return Err(Error::new(format!(
            "{} failed: {}",
            probe.display(),
            output.status
        )));
    }
    String::from_utf8(output.stdout).map_err(|e| Error::new(format!("codec_probe's report: {e}")))
}
