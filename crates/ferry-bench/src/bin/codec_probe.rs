//! `codec_probe`: what each decoder compared by `ferry-bench codecs` does
//! with hostile input, the reason an encoding may be refused. Prints the
//! markdown section that `ferry-bench codecs` appends to its report:
//!
//! - huge length prefixes: a few bytes that claim a `Vec<u8>`, `Vec<u64>`
//!   or `String` of 2^31 (and of 2^20) elements; how many bytes the failed
//!   decode allocated, counted by this binary's `#[global_allocator]`;
//! - deep nesting: a recursive type nested as deep as ~1 MiB of input
//!   allows, decoded on a thread with an 8 MiB stack (the usual size of a
//!   main thread);
//! - panics: random byte strings, every truncation and random mutations of
//!   a valid encoding of the rich value, each decoded inside
//!   `catch_unwind`.
//!
//! Every probe runs in a child process (this binary, started with `case
//! ...`), so a stack overflow or an abort is reported instead of ending the
//! run. The allocator lives here rather than in `ferry-bench`, whose other
//! workloads should not pay for the counting.
//!
//! `codec_probe [--quick]`: the whole section; `--quick` runs fewer fuzz
//! inputs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rkyv::rancor;
use rkyv::util::AlignedVec;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use wincode::config::DefaultConfig;

// The types, the ferry row and the rkyv bounds are the comparison's own;
// its timing code goes unused here.
#[allow(dead_code)]
#[path = "../codecs.rs"]
mod codecs;
#[allow(dead_code)]
#[path = "../error.rs"]
mod error;

use codecs::{Rich, RkyvRead, RkyvWrite, Rng, Touch, thousands};

// ---------------------------------------------------------------------
// The counting allocator.

/// Bytes allocated and not yet freed.
static LIVE: AtomicUsize = AtomicUsize::new(0);
/// The most `LIVE` has been since the last [`measure`] began.
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Bytes allocated in all, freed or not.
static TOTAL: AtomicUsize = AtomicUsize::new(0);
/// The largest single request since the last [`measure`] began, granted or
/// not (a refused one aborts the process).
static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// Whether `PEAK` and `LARGEST` are being kept: from the start of a
/// [`measure`] until the decoder under test returns ([`stop_counting`]),
/// so that turning its error into text is not counted.
static COUNTING: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting.
struct Counting;

fn requested(bytes: usize) {
    if COUNTING.load(Relaxed) {
        LARGEST.fetch_max(bytes, Relaxed);
    }
}

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Relaxed) + bytes;
    if COUNTING.load(Relaxed) {
        PEAK.fetch_max(live, Relaxed);
    }
    TOTAL.fetch_add(bytes, Relaxed);
}

/// Ends the counting of the current [`measure`].
fn stop_counting() {
    COUNTING.store(false, Relaxed);
}

// SAFETY: every method forwards its arguments unchanged to `System` and
// returns what `System` returned, so `System`'s guarantees are this
// allocator's; the counting only touches atomics and never allocates.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        requested(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which is System's.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        requested(layout.size());
        // SAFETY: the caller upholds `alloc_zeroed`'s contract, System's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from System, with
        // `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        requested(new_size);
        // SAFETY: `ptr` came from System with `layout`, and the caller
        // upholds `realloc`'s contract for `new_size`.
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            match new_size >= layout.size() {
                true => grew(new_size - layout.size()),
                false => {
                    LIVE.fetch_sub(layout.size() - new_size, Relaxed);
                }
            }
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What one call allocated.
#[derive(Debug, Clone, Copy, Default)]
struct Allocated {
    /// The most bytes live at once, above those live when it began.
    peak: usize,
    /// The largest single request.
    largest: usize,
}

/// Runs `f`, counting its allocations (this process runs one probe at a
/// time, on one thread).
fn measure<R>(f: impl FnOnce() -> R) -> (R, Allocated) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    LARGEST.store(0, Relaxed);
    COUNTING.store(true, Relaxed);
    let result = f();
    stop_counting();
    let allocated = Allocated {
        peak: PEAK.load(Relaxed).saturating_sub(base),
        largest: LARGEST.load(Relaxed),
    };
    (result, allocated)
}

// ---------------------------------------------------------------------
// The decoders.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Decoder {
    Postcard,
    BitcodeSerde,
    Bitcode,
    Wincode,
    Rkyv,
    Ferry,
}

const DECODERS: [Decoder; 6] = [
    Decoder::Postcard,
    Decoder::BitcodeSerde,
    Decoder::Bitcode,
    Decoder::Wincode,
    Decoder::Rkyv,
    Decoder::Ferry,
];

impl Decoder {
    fn name(self) -> &'static str {
        match self {
            Self::Postcard => "postcard",
            Self::BitcodeSerde => "bitcode-serde",
            Self::Bitcode => "bitcode-derive",
            Self::Wincode => "wincode",
            Self::Rkyv => "rkyv",
            Self::Ferry => "ferry",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Postcard => "postcard `from_bytes`",
            Self::BitcodeSerde => "bitcode serde `deserialize`",
            Self::Bitcode => "bitcode derive `decode`",
            Self::Wincode => "wincode `deserialize`",
            Self::Rkyv => "rkyv `from_bytes` (validated)",
            Self::Ferry => "ferry typed",
        }
    }

    fn by_name(name: &str) -> Option<Self> {
        DECODERS.into_iter().find(|d| d.name() == name)
    }

    fn is_serde(self) -> bool {
        matches!(self, Self::Postcard | Self::BitcodeSerde | Self::Ferry)
    }
}

/// A type every codec here can encode and decode.
trait Probed:
    Serialize
    + DeserializeOwned
    + bitcode::Encode
    + bitcode::DecodeOwned
    + wincode::SchemaWrite<DefaultConfig, Src = Self>
    + for<'de> wincode::SchemaRead<'de, DefaultConfig, Dst = Self>
    + RkyvWrite
    + RkyvRead
{
}

impl<T> Probed for T where
    T: Serialize
        + DeserializeOwned
        + bitcode::Encode
        + bitcode::DecodeOwned
        + wincode::SchemaWrite<DefaultConfig, Src = T>
        + for<'de> wincode::SchemaRead<'de, DefaultConfig, Dst = T>
        + RkyvWrite
        + RkyvRead
{
}

fn text(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn encode<T: Probed>(decoder: Decoder, value: &T) -> Vec<u8> {
    match decoder {
        Decoder::Postcard => postcard::to_allocvec(value).expect("postcard encodes"),
        Decoder::BitcodeSerde => bitcode::serialize(value).expect("bitcode serde encodes"),
        Decoder::Bitcode => bitcode::encode(value),
        Decoder::Wincode => wincode::serialize(value).expect("wincode encodes"),
        Decoder::Rkyv => rkyv::to_bytes::<rancor::Error>(value)
            .expect("rkyv encodes")
            .to_vec(),
        Decoder::Ferry => {
            let mut out = Vec::new();
            codecs::ferry_encode(value, &mut out);
            out
        }
    }
}

/// A decoder's result, the counting stopped before its error becomes text.
fn done<T, E: std::fmt::Display>(result: Result<T, E>) -> Result<T, String> {
    stop_counting();
    result.map_err(text)
}

fn decode<T: Probed>(decoder: Decoder, bytes: &[u8]) -> Result<T, String> {
    match decoder {
        Decoder::Postcard => done(postcard::from_bytes(bytes)),
        Decoder::BitcodeSerde => done(bitcode::deserialize(bytes)),
        Decoder::Bitcode => done(bitcode::decode(bytes)),
        Decoder::Wincode => done(wincode::deserialize(bytes)),
        Decoder::Rkyv => done(rkyv::from_bytes::<T, rancor::Error>(bytes)),
        Decoder::Ferry => done(codecs::ferry_try_decode(bytes)),
    }
}

/// Encoders and decoders of a serde-only type (`None` for the others).
fn encode_serde<T: Serialize>(decoder: Decoder, value: &T) -> Option<Vec<u8>> {
    match decoder {
        Decoder::Postcard => Some(postcard::to_allocvec(value).expect("postcard encodes")),
        Decoder::BitcodeSerde => Some(bitcode::serialize(value).expect("bitcode encodes")),
        Decoder::Ferry => {
            let mut out = Vec::new();
            codecs::ferry_encode(value, &mut out);
            Some(out)
        }
        _ => None,
    }
}

fn decode_serde<T: DeserializeOwned>(decoder: Decoder, bytes: &[u8]) -> Result<T, String> {
    match decoder {
        Decoder::Postcard => done(postcard::from_bytes(bytes)),
        Decoder::BitcodeSerde => done(bitcode::deserialize(bytes)),
        Decoder::Ferry => done(codecs::ferry_try_decode(bytes)),
        _ => Err("not a serde decoder".to_string()),
    }
}

/// A copy at rkyv's alignment: every decoder here reads from one, so rkyv
/// is not refused on alignment alone.
fn aligned(bytes: &[u8]) -> AlignedVec {
    let mut copy = AlignedVec::<16>::with_capacity(bytes.len());
    copy.extend_from_slice(bytes);
    copy
}

/// The first line of an error or panic message, cut to a table cell.
fn cell(message: &str) -> String {
    let line = message.lines().next().unwrap_or("").replace('|', "/");
    match line.chars().count() > 90 {
        true => format!("{}…", line.chars().take(90).collect::<String>()),
        false => line,
    }
}

// ---------------------------------------------------------------------
// (a) Huge length prefixes.

#[derive(Debug, Clone, Copy, PartialEq)]
enum Claim {
    /// `Vec<u8>` as serde bytes (`serde_bytes::ByteBuf`): serde decoders.
    Bytes,
    /// `Vec<u8>` (a serde sequence of u8).
    Seq,
    U64s,
    Str,
    /// `Vec<String>`: elements of no fixed size, so the input's length
    /// cannot bound their count.
    Strings,
}

const CLAIMS: [Claim; 5] = [
    Claim::Bytes,
    Claim::Seq,
    Claim::U64s,
    Claim::Str,
    Claim::Strings,
];

impl Claim {
    fn name(self) -> &'static str {
        match self {
            Self::Bytes => "bytes",
            Self::Seq => "seq",
            Self::U64s => "u64s",
            Self::Str => "string",
            Self::Strings => "strings",
        }
    }

    fn label(self, decoder: Decoder) -> &'static str {
        match (self, decoder.is_serde()) {
            (Self::Bytes, _) => "`Vec<u8>` (`serde_bytes`)",
            (Self::Seq, true) => "`Vec<u8>` (serde seq)",
            (Self::Seq, false) => "`Vec<u8>`",
            (Self::U64s, _) => "`Vec<u64>`",
            (Self::Str, _) => "`String`",
            (Self::Strings, _) => "`Vec<String>`",
        }
    }

    fn by_name(name: &str) -> Option<Self> {
        CLAIMS.into_iter().find(|c| c.name() == name)
    }

    /// The valid encoding that gets its length overwritten, and that
    /// length.
    fn valid(self, decoder: Decoder) -> Option<(Vec<u8>, usize)> {
        match self {
            Self::Bytes => {
                encode_serde(decoder, &serde_bytes::ByteBuf::from(vec![1, 2, 3, 4])).map(|b| (b, 4))
            }
            Self::Seq => Some((encode(decoder, &vec![1u8, 2, 3, 4]), 4)),
            Self::U64s => Some((encode(decoder, &vec![1u64]), 1)),
            Self::Str => Some((encode(decoder, &"hello, ferry".to_string()), 12)),
            Self::Strings => Some((encode(decoder, &vec!["ab".to_string()]), 1)),
        }
    }

    /// Decodes `bytes` as the claimed type: `Ok(())` or the error.
    fn decode(self, decoder: Decoder, bytes: &[u8]) -> Result<(), String> {
        match self {
            Self::Bytes => decode_serde::<serde_bytes::ByteBuf>(decoder, bytes).map(drop),
            Self::Seq => decode::<Vec<u8>>(decoder, bytes).map(drop),
            Self::U64s => decode::<Vec<u64>>(decoder, bytes).map(drop),
            Self::Str => decode::<String>(decoder, bytes).map(drop),
            Self::Strings => decode::<Vec<String>>(decoder, bytes).map(drop),
        }
    }
}

/// The largest length rkyv's archived `String` can state (two bits of its
/// 32 mark the representation).
const RKYV_STRING_MAX: usize = (1 << 30) - 1;

/// `valid` (an encoding of `claim` with `len` elements) with its length
/// overwritten by `claimed`: the rest of the input stays as it was.
fn with_length(
    decoder: Decoder,
    claim: Claim,
    valid: &[u8],
    len: usize,
    claimed: usize,
) -> Vec<u8> {
    match decoder {
        // A varint, first.
        Decoder::Postcard | Decoder::Ferry => {
            assert!(len < 128, "a one-byte varint to replace");
            let mut out = Vec::new();
            let mut v = claimed;
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
            out.extend_from_slice(&valid[1..]);
            out
        }
        // The lengths column comes first: one byte per length, 255 meaning
        // "in the large-lengths column that follows", whose header byte 2
        // says little-endian u32s.
        Decoder::Bitcode | Decoder::BitcodeSerde => {
            assert!(
                len < 255 && usize::from(valid[0]) == len,
                "a short length first"
            );
            let mut out = vec![255, 2];
            out.extend_from_slice(&u32::try_from(claimed).expect("fits u32").to_le_bytes());
            out.extend_from_slice(&valid[1..]);
            out
        }
        // A u64, first (bincode's default).
        Decoder::Wincode => {
            let mut out = (claimed as u64).to_le_bytes().to_vec();
            out.extend_from_slice(&valid[8..]);
            out
        }
        // The root is the last 8 bytes: a vec's relative pointer, then its
        // u32 length; a string's u32 length (two tag bits, the low 6 bits,
        // the rest shifted up by 8), then its relative pointer.
        Decoder::Rkyv => {
            let mut out = valid.to_vec();
            let n = out.len();
            match claim {
                Claim::Str => {
                    let claimed = claimed.min(RKYV_STRING_MAX) as u32;
                    let raw = 0x80 | (claimed & 0x3f) | ((claimed >> 6) << 8);
                    out[n - 8..n - 4].copy_from_slice(&raw.to_le_bytes());
                }
                _ => {
                    let claimed = u32::try_from(claimed).expect("fits u32");
                    out[n - 4..].copy_from_slice(&claimed.to_le_bytes());
                }
            }
            out
        }
    }
}

/// One huge-prefix case, in this (child) process: prints one line,
/// `outcome \t input bytes \t peak \t largest \t control`.
fn huge_case(decoder: Decoder, claim: Claim, claimed: usize) -> Result<(), String> {
    let Some((valid, len)) = claim.valid(decoder) else {
        return Err("not applicable".to_string());
    };
    // The same crafting with the true length must decode: the length, not
    // the crafting, is what the hostile input gets wrong.
    let control = aligned(&with_length(decoder, claim, &valid, len, len));
    let control = match claim.decode(decoder, &control) {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("control failed: {}", cell(&e)),
    };
    let input = aligned(&with_length(decoder, claim, &valid, len, claimed));
    let (result, allocated) =
        measure(|| catch_unwind(AssertUnwindSafe(|| claim.decode(decoder, &input))));
    let outcome = match result {
        Ok(Ok(())) => "decoded".to_string(),
        Ok(Err(e)) => format!("error: {}", cell(&e)),
        Err(_) => "panicked".to_string(),
    };
    println!(
        "{outcome}\t{}\t{}\t{}\t{control}",
        input.len(),
        allocated.peak,
        allocated.largest
    );
    Ok(())
}

// ---------------------------------------------------------------------
// (b) Deep nesting.

/// A list as a tree: every level one box deeper. Neither bitcode's nor
/// wincode's derive takes it: both refuse recursive types through a `Box`
/// at compile time (a cycle computing bitcode's encoder layout, and
/// wincode's `TYPE_META` constant).
#[derive(Serialize, Deserialize, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    __S::Error: rkyv::rancor::Source,
))]
#[rkyv(deserialize_bounds(__D::Error: rkyv::rancor::Source))]
#[rkyv(bytecheck(bounds(__C: rkyv::validation::ArchiveContext, __C::Error: rkyv::rancor::Source)))]
enum BoxTree {
    Leaf,
    Node(#[rkyv(omit_bounds)] Box<BoxTree>),
}

/// The same through a `Vec` (of one element a level), which wincode's
/// derive takes too. bitcode's still does not.
#[derive(
    Serialize,
    Deserialize,
    wincode::SchemaWrite,
    wincode::SchemaRead,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(serialize_bounds(
    __S: rkyv::ser::Writer + rkyv::ser::Allocator,
    __S::Error: rkyv::rancor::Source,
))]
#[rkyv(deserialize_bounds(__D::Error: rkyv::rancor::Source))]
#[rkyv(bytecheck(bounds(__C: rkyv::validation::ArchiveContext, __C::Error: rkyv::rancor::Source)))]
enum VecTree {
    Leaf,
    Node(#[rkyv(omit_bounds)] Vec<VecTree>),
}

/// A recursive type for the deep-nesting probe.
trait Deep: Serialize + DeserializeOwned + RkyvWrite + RkyvRead + Send + 'static {
    /// `depth` levels deep, built without recursion.
    fn nest(depth: usize) -> Self;
    fn wincode_encode(&self) -> Option<Vec<u8>>;
    fn wincode_decode(bytes: &[u8]) -> Result<Self, String>;
}

impl Deep for BoxTree {
    fn nest(depth: usize) -> Self {
        let mut tree = Self::Leaf;
        for _ in 0..depth {
            tree = Self::Node(Box::new(tree));
        }
        tree
    }

    fn wincode_encode(&self) -> Option<Vec<u8>> {
        None
    }

    fn wincode_decode(_: &[u8]) -> Result<Self, String> {
        Err("wincode's derive has no recursive types through a Box".to_string())
    }
}

impl Deep for VecTree {
    fn nest(depth: usize) -> Self {
        let mut tree = Self::Leaf;
        for _ in 0..depth {
            tree = Self::Node(vec![tree]);
        }
        tree
    }

    fn wincode_encode(&self) -> Option<Vec<u8>> {
        Some(wincode::serialize(self).expect("wincode encodes"))
    }

    fn wincode_decode(bytes: &[u8]) -> Result<Self, String> {
        wincode::deserialize(bytes).map_err(text)
    }
}

/// `tree` encoded by `decoder`'s codec; `None` where its derive has no
/// such type.
fn encode_tree<T: Deep>(decoder: Decoder, tree: &T) -> Option<Vec<u8>> {
    Some(match decoder {
        Decoder::Bitcode => return None,
        Decoder::Wincode => return tree.wincode_encode(),
        Decoder::Postcard => postcard::to_allocvec(tree).expect("postcard encodes"),
        Decoder::BitcodeSerde => bitcode::serialize(tree).expect("bitcode encodes"),
        Decoder::Rkyv => rkyv::to_bytes::<rancor::Error>(tree)
            .expect("rkyv encodes")
            .to_vec(),
        // ferry's encoder refuses values deeper than its decoder takes;
        // for these two trees its format is postcard's byte for byte
        // (varint variant index, varint length, the box transparent).
        Decoder::Ferry => postcard::to_allocvec(tree).expect("postcard encodes"),
    })
}

fn decode_tree<T: Deep>(decoder: Decoder, bytes: &[u8]) -> Result<T, String> {
    match decoder {
        Decoder::Bitcode => Err("bitcode's derive has no recursive types".to_string()),
        Decoder::Wincode => T::wincode_decode(bytes),
        Decoder::Postcard => postcard::from_bytes(bytes).map_err(text),
        Decoder::BitcodeSerde => bitcode::deserialize(bytes).map_err(text),
        Decoder::Rkyv => rkyv::from_bytes::<T, rancor::Error>(bytes).map_err(text),
        Decoder::Ferry => codecs::ferry_try_decode(bytes).map_err(text),
    }
}

/// The input the deep-nesting probe aims at.
const DEEP_INPUT: usize = 1 << 20;
/// The deepest tree it builds, whatever the encoding's bytes per level.
const DEEP_MAX: usize = 2_000_000;

/// Runs `f` on a thread with a stack of `size` bytes; `Err` if it panicked.
fn on_stack<R: Send + 'static>(
    size: usize,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<R, String> {
    std::thread::Builder::new()
        .stack_size(size)
        .spawn(f)
        .map_err(|e| format!("spawning a thread: {e}"))?
        .join()
        .map_err(|_| "panicked".to_string())
}

/// One deep-nesting case: prints `depth \t input bytes` once the input is
/// encoded (on a stack big enough for the encoders' recursion; the trees
/// are leaked, as dropping them recurses too), then the outcome.
fn deep_case<T: Deep>(decoder: Decoder, stack: usize) -> Result<(), String> {
    let encoded = on_stack(4 << 30, move || {
        let short = encode_tree(decoder, &T::nest(1000))?.len();
        let long = encode_tree(decoder, &T::nest(2000))?.len();
        let per_level = (long - short) as f64 / 1000.0;
        let depth = ((DEEP_INPUT as f64 / per_level) as usize).min(DEEP_MAX);
        let deep = T::nest(depth);
        let bytes = encode_tree(decoder, &deep);
        std::mem::forget(deep);
        Some((depth, bytes?))
    })?;
    let Some((depth, bytes)) = encoded else {
        println!("-\t-\nnot applicable: the derive refuses this recursive type at compile time");
        return Ok(());
    };
    println!("{depth}\t{}", bytes.len());
    std::io::stdout().flush().map_err(text)?;
    let outcome = on_stack(stack, move || {
        let input = aligned(&bytes);
        match decode_tree::<T>(decoder, &input) {
            Ok(tree) => {
                std::mem::forget(tree);
                "ok".to_string()
            }
            Err(e) => format!("error: {}", cell(&e)),
        }
    })?;
    println!("{outcome}");
    Ok(())
}

// ---------------------------------------------------------------------
// (c) Panics on random, truncated and mutated input.

/// The first panic's message.
static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// One fuzz case: prints `inputs \t ok \t errors \t panics \t largest peak
/// \t first panic`.
fn panic_case(decoder: Decoder, random: usize) -> Result<(), String> {
    std::panic::set_hook(Box::new(|info| {
        let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some(info.to_string().replace('\n', " "));
        }
    }));
    let valid = encode(decoder, &codecs::rich());
    let mut rng = Rng::new(0xf022);
    let mut inputs: Vec<Vec<u8>> = Vec::new();
    for _ in 0..random {
        let len = (rng.next() % (2 * valid.len() as u64)) as usize;
        inputs.push((0..len).map(|_| rng.next() as u8).collect());
    }
    inputs.extend((0..valid.len()).map(|n| valid[..n].to_vec()));
    for _ in 0..random {
        let mut mutated = valid.clone();
        for _ in 0..=(rng.next() % 4) {
            let at = (rng.next() % valid.len() as u64) as usize;
            mutated[at] = rng.next() as u8;
        }
        inputs.push(mutated);
    }
    let (mut ok, mut errors, mut panics, mut peak) = (0usize, 0usize, 0usize, 0usize);
    for input in &inputs {
        let input = aligned(input);
        let (result, allocated) = measure(|| {
            catch_unwind(AssertUnwindSafe(|| {
                decode::<Rich>(decoder, &input).map(|v| v.touch())
            }))
        });
        peak = peak.max(allocated.peak);
        match result {
            Ok(Ok(_)) => ok += 1,
            Ok(Err(_)) => errors += 1,
            Err(_) => panics += 1,
        }
    }
    let first = FIRST_PANIC
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .unwrap_or_default();
    println!(
        "{}\t{ok}\t{errors}\t{panics}\t{peak}\t{}",
        inputs.len(),
        cell(&first)
    );
    Ok(())
}

// ---------------------------------------------------------------------
// The parent: one child per case, and the tables.

/// How a child ended.
struct Child {
    stdout: String,
    stderr: String,
    /// `None` when it succeeded.
    failure: Option<String>,
}

/// Runs this binary with `args`, killing it after `limit`.
fn child(args: &[String], limit: Duration) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(text)?;
    let mut process = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting a probe: {e}"))?;
    let mut out = process.stdout.take().expect("piped");
    let mut err = process.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = process.try_wait().map_err(text)? {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = process.kill();
            let _ = process.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let failure = match status {
        None => Some(format!("timed out after {} s", limit.as_secs())),
        Some(s) if s.success() => None,
        Some(_) if stderr.contains("overflowed its stack") => {
            Some("**crashed (stack overflow)**".to_string())
        }
        Some(_) if stderr.contains("memory allocation of") => Some(format!(
            "**crashed (allocation failure: {})**",
            cell(stderr.trim())
        )),
        Some(s) => Some(format!("**crashed ({s})**")),
    };
    Ok(Child {
        stdout,
        stderr,
        failure,
    })
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The element counts each huge-prefix input claims.
const CLAIMED: [usize; 3] = [1 << 31, 1 << 20, 1 << 16];

fn huge_table(out: &mut String) -> Result<(), String> {
    let _ = writeln!(
        out,
        "### (a) Huge length prefixes\n\n\
         Each input is a valid encoding of a short value (4 bytes, one u64, the 12-byte string, \
         one 2-byte string) \
         whose length field was overwritten with a claim of 2^31, 2^20 or 2^16 elements; the \
         same crafting with the true length decodes (\"control\"). Each cell is the outcome and \
         the most bytes the decode had allocated at once (counted by a `#[global_allocator]`, up \
         to the decoder's return). rkyv's `String` cannot state more than 2^30−1 bytes, so that \
         is its first claim.\n"
    );
    let _ = writeln!(
        out,
        "| decoder | claims | input B | 2^31 elements | 2^20 | 2^16 | worst peak ÷ input | error (2^31) | control |"
    );
    let _ = writeln!(out, "|---|---|---:|---|---|---|---:|---|---|");
    for decoder in DECODERS {
        for claim in CLAIMS {
            if claim == Claim::Bytes && !decoder.is_serde() {
                continue;
            }
            let (mut cells, mut input, mut worst) = (Vec::new(), 0u64, 0u64);
            let (mut error, mut control) = (String::new(), String::new());
            for claimed in CLAIMED {
                let run = child(
                    &args(&[
                        "case",
                        "huge",
                        decoder.name(),
                        claim.name(),
                        &claimed.to_string(),
                    ]),
                    Duration::from_secs(120),
                )?;
                if let Some(failure) = &run.failure {
                    cells.push(failure.clone());
                    continue;
                }
                let f: Vec<&str> = run.stdout.trim_end_matches('\n').split('\t').collect();
                let [outcome, bytes, peak, _largest, checked] = f[..] else {
                    return Err(format!("a huge-prefix probe printed {:?}", run.stdout));
                };
                let bytes: u64 = bytes.parse().map_err(text)?;
                let peak: u64 = peak.parse().map_err(text)?;
                input = input.max(bytes);
                worst = worst.max(peak / bytes.max(1));
                let short = match outcome.strip_prefix("error: ") {
                    Some(message) => {
                        if error.is_empty() {
                            error = message.to_string();
                        }
                        "error"
                    }
                    None => outcome,
                };
                let peak = match peak >= 1 << 16 {
                    true => format!("**{} B**", thousands(peak)),
                    false => format!("{} B", thousands(peak)),
                };
                cells.push(format!("{short}, {peak}"));
                control = checked.to_string();
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                decoder.label(),
                claim.label(decoder),
                input,
                cells.join(" | "),
                thousands(worst),
                format_args!("{error} | {control}"),
            );
        }
    }
    out.push('\n');
    Ok(())
}

/// The stacks the deep-nesting decode runs on: the usual main thread's,
/// and `std::thread::spawn`'s default.
const DECODE_STACKS: [usize; 2] = [8 << 20, 2 << 20];

fn deep_table(out: &mut String) -> Result<(), String> {
    let _ = writeln!(
        out,
        "### (b) Deep nesting\n\n\
         A recursive type nested as deep as ~1 MiB of input allows (at most {} levels), encoded \
         by each codec itself, then decoded in a child process on a thread with an 8 MiB stack \
         (a main thread's usual size) and with a 2 MiB one (`std::thread::spawn`'s default). Two \
         shapes: through a `Box` (the natural one) and through a one-element `Vec` (which \
         wincode's derive also takes).\n",
        thousands(DEEP_MAX as u64),
    );
    let _ = writeln!(
        out,
        "| decoder | type | depth | input B | 8 MiB stack | 2 MiB stack |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---|---|");
    for decoder in DECODERS {
        for (shape, label) in [
            ("box", "`enum BoxTree { Leaf, Node(Box<BoxTree>) }`"),
            ("vec", "`enum VecTree { Leaf, Node(Vec<VecTree>) }`"),
        ] {
            let (mut depth, mut input, mut outcomes) = (String::new(), String::new(), Vec::new());
            for stack in DECODE_STACKS {
                let run = child(
                    &args(&["case", "deep", decoder.name(), shape, &stack.to_string()]),
                    Duration::from_secs(300),
                )?;
                let mut lines = run.stdout.lines();
                let count = |s: &str| s.parse().map(thousands).unwrap_or_else(|_| s.to_string());
                if let Some([d, i]) = lines
                    .next()
                    .map(|l| l.split('\t').collect::<Vec<_>>())
                    .as_deref()
                {
                    (depth, input) = (count(d), count(i));
                }
                outcomes.push(match (&run.failure, lines.next()) {
                    (None, Some(outcome)) => outcome.to_string(),
                    (Some(failure), _) if depth.is_empty() => {
                        format!("{failure} while encoding: {}", cell(run.stderr.trim()))
                    }
                    (Some(failure), _) => failure.clone(),
                    (None, None) => format!("no outcome printed: {}", cell(run.stderr.trim())),
                });
            }
            let _ = writeln!(
                out,
                "| {} | {label} | {depth} | {input} | {} |",
                decoder.label(),
                outcomes.join(" | ")
            );
        }
    }
    out.push('\n');
    Ok(())
}

fn panic_table(out: &mut String, random: usize) -> Result<(), String> {
    let _ = writeln!(
        out,
        "### (c) Panics on random, truncated and mutated input\n\n\
         Per decoder, decoding the rich value: {} random byte strings (0 to twice the valid \
         length), every truncation of a valid encoding, and {} copies of it with 1 to 4 bytes \
         overwritten at random, each inside `catch_unwind`, in a child process. \"Largest peak\" \
         is the most any one input made the decoder hold at once.\n",
        thousands(random as u64),
        thousands(random as u64),
    );
    let _ = writeln!(
        out,
        "| decoder | inputs | decoded | errors | panics | largest peak B | first panic |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---|");
    for decoder in DECODERS {
        let run = child(
            &args(&["case", "panics", decoder.name(), &random.to_string()]),
            Duration::from_secs(600),
        )?;
        let row = match &run.failure {
            Some(failure) => format!("{failure} | | | | | {}", cell(run.stderr.trim())),
            None => {
                let f: Vec<&str> = run.stdout.trim_end_matches('\n').split('\t').collect();
                let [inputs, ok, errors, panics, peak, first] = f[..] else {
                    return Err(format!("a fuzz probe printed {:?}", run.stdout));
                };
                let n = |s: &str| s.parse::<u64>().map(thousands).map_err(text);
                let panics = match panics {
                    "0" => "0".to_string(),
                    p => format!("**{}**", n(p)?),
                };
                format!(
                    "{} | {} | {} | {panics} | {} | {first}",
                    n(inputs)?,
                    n(ok)?,
                    n(errors)?,
                    n(peak)?
                )
            }
        };
        let _ = writeln!(out, "| {} | {row} |", decoder.label());
    }
    out.push('\n');
    Ok(())
}

fn report(quick: bool) -> Result<String, String> {
    let mut out = String::from("## Hostile input\n\n");
    eprintln!("codec_probe: huge length prefixes");
    huge_table(&mut out)?;
    eprintln!("codec_probe: deep nesting");
    deep_table(&mut out)?;
    eprintln!("codec_probe: random, truncated and mutated input");
    panic_table(&mut out, if quick { 10_000 } else { 100_000 })?;
    Ok(out)
}

fn run_case(args: &[String]) -> Result<(), String> {
    let decoder = |name: &str| Decoder::by_name(name).ok_or_else(|| format!("no decoder {name:?}"));
    let number = |s: &str| s.parse::<usize>().map_err(text);
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["huge", d, claim, claimed] => {
            let claim = Claim::by_name(claim).ok_or_else(|| format!("no claim {claim:?}"))?;
            huge_case(decoder(d)?, claim, number(claimed)?)
        }
        ["deep", d, "box", stack] => deep_case::<BoxTree>(decoder(d)?, number(stack)?),
        ["deep", d, "vec", stack] => deep_case::<VecTree>(decoder(d)?, number(stack)?),
        ["panics", d, random] => panic_case(decoder(d)?, number(random)?),
        _ => Err(format!("unknown case {args:?}")),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("case") => run_case(&args[1..]),
        Some("--quick") => report(true).map(|r| print!("{r}")),
        None => report(false).map(|r| print!("{r}")),
        Some(other) => Err(format!("unknown argument {other:?} (try --quick)")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("codec_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
