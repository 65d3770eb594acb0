//! The value of `FERRY_BOOTSTRAP`: what a spawned child learns from its
//! parent. A pure codec (no I/O, no check of the actual parent process):
//!
//! ```text
//! fd=3,parent=4242,limit=268435456,out_of_line=65536,pool_cap=67108864,max_mapped=4294967296,wait=2
//! ```
//!
//! Named fields, in a fixed order, each a decimal number written the one
//! way [`BootstrapEnv::encode`] writes it. [`BootstrapEnv::decode`] refuses
//! anything else (a missing, extra, misnamed or reordered field, a sign, a
//! leading zero, a space, a number too large for its field), so that a
//! child built with a ferry whose fields differ says so instead of misreading
//! them; whatever it accepts, encoding gives back unchanged. The environment
//! is the child's input like any other: a forged value is refused with a
//! reason, never a panic.
//!
//! To carry one more option, add one line to the list in
//! `bootstrap_fields!` below (and, if some values of it are meaningless,
//! a check to `BootstrapEnv::check`).

/// Between fields.
const SEPARATOR: char = ',';
/// Between a field's name and its value.
const EQUALS: char = '=';

/// `Wait` as the wire carries it: 0 `Sleep`, 1 `Spin`, 2 `Adaptive`, 3
/// `Tuned`; values
/// from this one up are refused.
pub const WAIT_KINDS: u8 = 4;

/// Defines [`BootstrapEnv`], its `encode` and its `decode`, from one list
/// of fields (documentation, name, type), in wire order.
macro_rules! bootstrap_fields {
    ($($(#[doc = $doc:literal])+ $name:ident: $ty:ty,)+) => {
        /// Everything a spawned child learns from its parent's environment.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct BootstrapEnv {
            $($(#[doc = $doc])+ pub $name: $ty,)+
        }

        impl BootstrapEnv {
            /// The value for the child's environment.
            pub fn encode(&self) -> String {
                let fields = [$(format!("{}{EQUALS}{}", stringify!($name), self.$name),)+];
                fields.join(&SEPARATOR.to_string())
            }

            /// Reads a value [`encode`](Self::encode) wrote, or says why it
            /// cannot be one.
            pub fn decode(value: &str) -> Result<Self, &'static str> {
                let mut fields = value.split(SEPARATOR);
                let env = Self {
                    $($name: parse_field(fields.next(), &field!($name))?,)+
                };
                if fields.next().is_some() {
                    return Err("more fields than this version of ferry knows");
                }
                env.check()?;
                Ok(env)
            }
        }
    };
}

/// The [`Field`] named `$name`, its reasons spelled out at compile time.
macro_rules! field {
    ($name:ident) => {
        Field {
            name: stringify!($name),
            missing: concat!("field `", stringify!($name), "` is missing"),
            misnamed: concat!("expected field `", stringify!($name), "` here"),
            malformed: concat!(
                "field `",
                stringify!($name),
                "` is not a plain decimal number"
            ),
            too_large: concat!("field `", stringify!($name), "` is too large"),
        }
    };
}

bootstrap_fields! {
    /// The number of the control socket's descriptor inherited by the child.
    fd: i32,
    /// The process id of the parent that spawned the child.
    parent: u32,
    /// The largest message the child's end sends or accepts.
    limit: usize,
    /// The size from which the child's messages travel out of line.
    out_of_line: usize,
    /// Most bytes of pool blocks mapped per direction on the child's link.
    pool_cap: usize,
    /// Most bytes of the parent's memory the child's link may map.
    max_mapped: usize,
    /// How the child's end waits (see [`WAIT_KINDS`]).
    wait: u8,
}

impl BootstrapEnv {
    /// The checks beyond each field's syntax.
    fn check(&self) -> Result<(), &'static str> {
        if self.wait >= WAIT_KINDS {
            return Err("field `wait` names no known wait strategy");
        }
        Ok(())
    }
}

/// One field's name, and the reasons its decoding can fail.
struct Field {
    name: &'static str,
    missing: &'static str,
    misnamed: &'static str,
    malformed: &'static str,
    too_large: &'static str,
}

/// The value of `field` in `text` (`"<name>=<digits>"`).
fn parse_field<T: std::str::FromStr>(text: Option<&str>, field: &Field) -> Result<T, &'static str> {
    let text = text.ok_or(field.missing)?;
    let digits = text
        .strip_prefix(field.name)
        .and_then(|rest| rest.strip_prefix(EQUALS))
        .ok_or(field.misnamed)?;
    if !is_canonical_decimal(digits) {
        return Err(field.malformed);
    }
    // Only digits, so the one way left to fail is overflow.
    digits.parse().map_err(|_| field.too_large)
}

/// `0`, or ASCII digits without a leading zero.
fn is_canonical_decimal(digits: &str) -> bool {
    match digits.as_bytes() {
        [] => false,
        [b'0'] => true,
        [b'0', ..] => false,
        bytes => bytes.iter().all(u8::is_ascii_digit),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> BootstrapEnv {
        BootstrapEnv {
            fd: 3,
            parent: 4242,
            limit: 256 << 20,
            out_of_line: 64 << 10,
            pool_cap: 64 << 20,
            max_mapped: 4 << 30,
            wait: 2,
        }
    }

    #[test]
    fn the_format_is_named_fields_in_order() {
        assert_eq!(
            example().encode(),
            "fd=3,parent=4242,limit=268435456,out_of_line=65536,pool_cap=67108864,max_mapped=4294967296,wait=2"
        );
    }

    #[test]
    fn values_round_trip() {
        let extremes = BootstrapEnv {
            fd: i32::MAX,
            parent: u32::MAX,
            limit: usize::MAX,
            out_of_line: usize::MAX,
            pool_cap: 0,
            max_mapped: 0,
            wait: WAIT_KINDS - 1,
        };
        let zeros = BootstrapEnv {
            fd: 0,
            parent: 0,
            limit: 0,
            out_of_line: 0,
            pool_cap: 0,
            max_mapped: 0,
            wait: 0,
        };
        for env in [example(), extremes, zeros] {
            assert_eq!(BootstrapEnv::decode(&env.encode()), Ok(env));
        }
    }

    /// `value` must be refused for `reason`.
    fn refused(value: &str, reason: &str) {
        assert_eq!(BootstrapEnv::decode(value), Err(reason), "{value:?}");
    }

    #[test]
    fn missing_and_extra_fields_are_refused() {
        let good = example().encode();
        refused("", "expected field `fd` here");
        refused("fd=3", "field `parent` is missing");
        let without_wait = good.rsplit_once(',').expect("fields").0;
        refused(without_wait, "field `wait` is missing");
        refused(
            &format!("{good},"),
            "more fields than this version of ferry knows",
        );
        refused(
            &format!("{good},map_budget=1"),
            "more fields than this version of ferry knows",
        );
        // The format of earlier versions: positional, colon-separated.
        refused(
            "3:4242:268435456:65536:67108864:2",
            "expected field `fd` here",
        );
    }

    #[test]
    fn misnamed_and_reordered_fields_are_refused() {
        let good = example().encode();
        let swapped = good.replace("limit=", "LIMIT=");
        refused(&swapped, "expected field `limit` here");
        let reordered = "parent=4242,fd=3,limit=1,out_of_line=1,pool_cap=1,max_mapped=1,wait=0";
        refused(reordered, "expected field `fd` here");
        refused(&good.replace("fd=3", "fd 3"), "expected field `fd` here");
        refused(&good.replace("fd=3", "fd:3"), "expected field `fd` here");
    }

    #[test]
    fn numbers_written_any_other_way_are_refused() {
        let good = example().encode();
        for bad in ["", "-1", "+3", "03", " 3", "3 ", "0x3", "3.0", "٣", "3e0"] {
            let value = good.replace("fd=3", &format!("fd={bad}"));
            refused(&value, "field `fd` is not a plain decimal number");
        }
    }

    #[test]
    fn overflowing_numbers_are_refused() {
        let good = example().encode();
        let fd = good.replace("fd=3", "fd=2147483648");
        refused(&fd, "field `fd` is too large");
        let parent = good.replace("parent=4242", "parent=4294967296");
        refused(&parent, "field `parent` is too large");
        let huge = "1".repeat(40);
        let limit = good.replace("limit=268435456", &format!("limit={huge}"));
        refused(&limit, "field `limit` is too large");
        refused(
            &good.replace("wait=2", "wait=256"),
            "field `wait` is too large",
        );
        refused(
            &good.replace("wait=2", "wait=4"),
            "field `wait` names no known wait strategy",
        );
    }

    /// Random edits of a good value: never a panic, and whatever decodes
    /// encodes back to the very same text.
    #[test]
    fn random_edits_never_panic_and_accepted_values_are_canonical() {
        let good = example().encode();
        let alphabet = b"0123456789=,-+ fdlimtwaxyz_\xff";
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let (mut accepted, mut refused) = (0, 0);
        let rounds = if cfg!(miri) { 400 } else { 20_000 };
        for _ in 0..rounds {
            let mut bytes = good.clone().into_bytes();
            for _ in 0..=next(3) {
                let at = next(bytes.len() + 1);
                match next(3) {
                    0 if at < bytes.len() => drop(bytes.remove(at)),
                    1 if at < bytes.len() => bytes[at] = alphabet[next(alphabet.len())],
                    _ => bytes.insert(at, alphabet[next(alphabet.len())]),
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            match BootstrapEnv::decode(&text) {
                Ok(env) => {
                    assert_eq!(env.encode(), text, "accepted a non-canonical value");
                    accepted += 1;
                }
                Err(_) => refused += 1,
            }
        }
        assert!(
            accepted > rounds / 200 && refused > rounds / 200,
            "{accepted} accepted, {refused} refused"
        );
    }
}
