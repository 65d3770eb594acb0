//! The handshake between a client and a named server, and the note that
//! invites a spawned child to a server.
//!
//! On a new connection the client speaks first, with one `Hello` datagram
//! (40 bytes) carrying one descriptor: the shared memory of a pipe the
//! client has made, whose end 1 the server takes (as a `PipeEnd` record
//! of role 1 would hand it), so the client may write its first message
//! before the server has read anything:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `"FRYH"` |
//! | 4 | [`VERSION`] |
//! | 5 | 1 if a token follows, else 0 |
//! | 6..8 | zero |
//! | 8..40 | the token, or zeros |
//!
//! The server answers with one 8-byte datagram and no descriptor: a
//! welcome (magic `"FRYW"`, [`VERSION`], three zero bytes) once it has
//! taken the pipe, or a `Refusal` (magic `"FRYN"`, [`VERSION`], the
//! [`Refusal`] code, two zero bytes), then closes. After a welcome the
//! socket carries control records, as between a spawned child and its
//! parent.
//!
//! The invitation note (what [`Invite::encode`] writes into a pipe a
//! spawned child inherits) is `"FRYI"`, [`VERSION`], the name's kind
//! (0 abstract, 1 a socket file), 1 if a token follows, a zero byte, the
//! name's length (`u16`), the token (32 bytes, zeros if none), the name.

use super::VERSION;
use super::Violation;

/// Bytes of a token.
pub const TOKEN_LEN: usize = 32;
/// Bytes of a `Hello`.
pub const HELLO_LEN: usize = 8 + TOKEN_LEN;
/// Bytes of a `Refusal`, and of a server's answer of either kind.
pub const REFUSAL_LEN: usize = 8;
/// Longest name an invitation carries (a socket address holds 108 bytes).
pub const MAX_NAME: usize = 107;
/// Bytes before the name in an invitation.
const INVITE_HEAD: usize = 10 + TOKEN_LEN;
/// Longest invitation.
pub const MAX_INVITE: usize = INVITE_HEAD + MAX_NAME;

const HELLO_MAGIC: [u8; 4] = *b"FRYH";
const REFUSAL_MAGIC: [u8; 4] = *b"FRYN";
const WELCOME_MAGIC: [u8; 4] = *b"FRYW";

/// A server's welcome: it has taken the client's pipe.
pub fn welcome() -> [u8; REFUSAL_LEN] {
    let mut out = [0u8; REFUSAL_LEN];
    out[..4].copy_from_slice(&WELCOME_MAGIC);
    out[4] = VERSION;
    out
}

/// Decodes and checks a server's answer: `Ok(None)` for a welcome,
/// `Ok(Some(why))` for a refusal.
pub fn decode_answer(bytes: &[u8]) -> Result<Option<Refusal>, Violation> {
    if bytes == welcome() {
        return Ok(None);
    }
    Refusal::decode(bytes).map(Some)
}
const INVITE_MAGIC: [u8; 4] = *b"FRYI";

/// A client's opening datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// The secret the client was given, if any.
    pub token: Option<[u8; TOKEN_LEN]>,
}

impl Hello {
    /// The datagram.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..4].copy_from_slice(&HELLO_MAGIC);
        out[4] = VERSION;
        if let Some(token) = &self.token {
            out[5] = 1;
            out[8..].copy_from_slice(token);
        }
        out
    }

    /// Decodes and checks a datagram: this length, magic and version, a
    /// flag of 0 or 1, zero padding, and zeros where no token is.
    pub fn decode(bytes: &[u8]) -> Result<Self, Violation> {
        let bytes: &[u8; HELLO_LEN] = bytes.try_into().map_err(|_| Violation::BadHandshake)?;
        let [m0, m1, m2, m3, version, flag, p0, p1, token @ ..] = *bytes;
        if [m0, m1, m2, m3] != HELLO_MAGIC || version != VERSION || [p0, p1] != [0, 0] {
            return Err(Violation::BadHandshake);
        }
        match flag {
            1 => Ok(Self { token: Some(token) }),
            0 if token == [0; TOKEN_LEN] => Ok(Self { token: None }),
            _ => Err(Violation::BadHandshake),
        }
    }
}

/// Why a server turned a client away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The server's policy does not accept the client's user (by default,
    /// only the server's own user is accepted).
    Credentials = 1,
    /// The server asks for a token and the client's was missing or wrong.
    Token = 2,
    /// The client's opening was malformed or of another ferry version.
    Handshake = 3,
}

impl Refusal {
    /// The datagram.
    pub fn encode(self) -> [u8; REFUSAL_LEN] {
        let mut out = [0u8; REFUSAL_LEN];
        out[..4].copy_from_slice(&REFUSAL_MAGIC);
        out[4] = VERSION;
        out[5] = self as u8;
        out
    }

    /// Decodes and checks a refusal datagram.
    pub fn decode(bytes: &[u8]) -> Result<Self, Violation> {
        let bytes: &[u8; REFUSAL_LEN] = bytes.try_into().map_err(|_| Violation::BadHandshake)?;
        let [m0, m1, m2, m3, version, code, 0, 0] = *bytes else {
            return Err(Violation::BadHandshake);
        };
        if [m0, m1, m2, m3] != REFUSAL_MAGIC || version != VERSION {
            return Err(Violation::BadHandshake);
        }
        match code {
            1 => Ok(Self::Credentials),
            2 => Ok(Self::Token),
            3 => Ok(Self::Handshake),
            _ => Err(Violation::BadHandshake),
        }
    }

    /// What it means, in words.
    pub fn message(self) -> &'static str {
        match self {
            Self::Credentials => "the server does not accept this user",
            Self::Token => "the server asks for a token, and this one is missing or wrong",
            Self::Handshake => "the handshake was malformed or of another ferry version",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

/// Where a server listens and the token it asks for: what a child it
/// spawned reads from its inherited note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invite {
    /// True for a socket file, false for an abstract name.
    pub file: bool,
    /// The name (abstract) or path bytes, at most [`MAX_NAME`].
    pub name: Vec<u8>,
    /// The token, if the server asks for one.
    pub token: Option<[u8; TOKEN_LEN]>,
}

impl Invite {
    /// The note, or `None` if the name is too long to carry.
    pub fn encode(&self) -> Option<Vec<u8>> {
        if self.name.len() > MAX_NAME || self.name.is_empty() {
            return None;
        }
        let mut out = Vec::with_capacity(INVITE_HEAD + self.name.len());
        out.extend_from_slice(&INVITE_MAGIC);
        out.extend_from_slice(&[
            VERSION,
            u8::from(self.file),
            u8::from(self.token.is_some()),
            0,
        ]);
        out.extend_from_slice(&(self.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.token.unwrap_or([0; TOKEN_LEN]));
        out.extend_from_slice(&self.name);
        Some(out)
    }

    /// Decodes and checks a note: magic, version, flags of 0 or 1, zeros
    /// where no token is, a name of 1 to [`MAX_NAME`] bytes that fills the
    /// rest exactly.
    pub fn decode(bytes: &[u8]) -> Result<Self, Violation> {
        let Some((head, name)) = bytes.split_first_chunk::<INVITE_HEAD>() else {
            return Err(Violation::BadHandshake);
        };
        let (fixed, token) = head.split_at(10);
        let [m0, m1, m2, m3, version, file, has_token, 0, l0, l1] = *fixed else {
            return Err(Violation::BadHandshake);
        };
        let len = usize::from(u16::from_le_bytes([l0, l1]));
        if [m0, m1, m2, m3] != INVITE_MAGIC
            || version != VERSION
            || file > 1
            || has_token > 1
            || len != name.len()
            || !(1..=MAX_NAME).contains(&len)
            || (has_token == 0 && token.iter().any(|&b| b != 0))
        {
            return Err(Violation::BadHandshake);
        }
        let token: [u8; TOKEN_LEN] = token.try_into().map_err(|_| Violation::BadHandshake)?;
        Ok(Self {
            file: file == 1,
            name: name.to_vec(),
            token: (has_token == 1).then_some(token),
        })
    }
}

/// The value of the environment variable that tells a spawned child where
/// its invitation note is: `fd=<descriptor>,parent=<pid>`, each a decimal
/// number without sign or leading zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InviteEnv {
    /// The inherited read end of the note's pipe.
    pub fd: i32,
    /// The process that spawned the child (a grandchild that merely
    /// inherited the environment is refused).
    pub parent: u32,
}

impl InviteEnv {
    /// The value.
    pub fn encode(&self) -> String {
        format!("fd={},parent={}", self.fd, self.parent)
    }

    /// Reads a value [`InviteEnv::encode`] wrote, or says why it is not one.
    pub fn decode(value: &str) -> Result<Self, &'static str> {
        let (fd, parent) = value
            .strip_prefix("fd=")
            .and_then(|rest| rest.split_once(",parent="))
            .ok_or("not of the form fd=<descriptor>,parent=<pid>")?;
        Ok(Self {
            fd: decimal(fd)?,
            parent: decimal(parent)?,
        })
    }
}

/// A canonical decimal number (no sign, no leading zero) that fits `T`.
fn decimal<T: std::str::FromStr>(text: &str) -> Result<T, &'static str> {
    let canonical = !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    match canonical {
        true => text.parse().map_err(|_| "number out of range"),
        false => Err("not a decimal number"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_every_other_byte_string_is_refused_or_canonical() {
        for hello in [
            Hello { token: None },
            Hello {
                token: Some([7; TOKEN_LEN]),
            },
        ] {
            assert_eq!(Hello::decode(&hello.encode()), Ok(hello));
        }
        let good = Hello {
            token: Some([1; TOKEN_LEN]),
        }
        .encode();
        for i in 0..8 {
            let mut bad = good;
            bad[i] ^= 0x40;
            assert_eq!(
                Hello::decode(&bad),
                Err(Violation::BadHandshake),
                "byte {i}"
            );
        }
        let mut untokened = Hello { token: None }.encode();
        untokened[20] = 1;
        assert_eq!(Hello::decode(&untokened), Err(Violation::BadHandshake));
        assert_eq!(
            Hello::decode(&good[..HELLO_LEN - 1]),
            Err(Violation::BadHandshake)
        );
        assert_eq!(Hello::decode(&[]), Err(Violation::BadHandshake));
    }

    #[test]
    fn refusals_round_trip_and_unknown_codes_are_refused() {
        for r in [Refusal::Credentials, Refusal::Token, Refusal::Handshake] {
            assert_eq!(Refusal::decode(&r.encode()), Ok(r));
        }
        let mut bad = Refusal::Token.encode();
        bad[5] = 9;
        assert_eq!(Refusal::decode(&bad), Err(Violation::BadHandshake));
        bad[5] = 2;
        bad[7] = 1;
        assert_eq!(Refusal::decode(&bad), Err(Violation::BadHandshake));
        assert_ne!(
            REFUSAL_LEN,
            super::super::record::RECORD_LEN,
            "told apart by length"
        );
    }

    #[test]
    fn invites_round_trip_and_lengths_are_checked() {
        let invite = Invite {
            file: true,
            name: b"/run/user/1000/x.sock".to_vec(),
            token: Some([9; TOKEN_LEN]),
        };
        let note = invite.encode().unwrap();
        assert_eq!(Invite::decode(&note), Ok(invite.clone()));
        assert_eq!(
            Invite::decode(&note[..note.len() - 1]),
            Err(Violation::BadHandshake)
        );
        let mut longer = note.clone();
        longer.push(b'x');
        assert_eq!(Invite::decode(&longer), Err(Violation::BadHandshake));
        for cut in 0..INVITE_HEAD {
            assert!(Invite::decode(&note[..cut]).is_err());
        }
        let mut untokened = Invite {
            token: None,
            ..invite.clone()
        }
        .encode()
        .unwrap();
        untokened[20] = 0xff;
        assert_eq!(
            Invite::decode(&untokened),
            Err(Violation::BadHandshake),
            "a token without its flag"
        );
        let long = Invite {
            name: vec![b'a'; MAX_NAME + 1],
            ..invite
        };
        assert_eq!(long.encode(), None);
    }

    #[test]
    fn invite_env_round_trips_and_refuses_what_it_did_not_write() {
        let env = InviteEnv {
            fd: 7,
            parent: 4242,
        };
        assert_eq!(InviteEnv::decode(&env.encode()), Ok(env));
        for bad in [
            "",
            "fd=7",
            "fd=07,parent=1",
            "fd=-1,parent=1",
            "fd=7,parent=",
            "fd=7,parent=1,x=2",
            "parent=1,fd=7",
            "fd=99999999999,parent=1",
            "fd= 7,parent=1",
        ] {
            assert!(InviteEnv::decode(bad).is_err(), "{bad:?}");
        }
    }
}
