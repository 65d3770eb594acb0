//! The named server's handshake from arbitrary bytes: a client's opening
//! (`Hello`), a server's refusal, an invitation note, and (as text) the
//! environment value naming the note. Decoding never panics, and whatever
//! decodes encodes back to exactly the same bytes (each decoder is
//! canonical: every field checked, none ignored).
#![no_main]

use ferry::wire::handshake::{Hello, Invite, InviteEnv, Refusal};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(hello) = Hello::decode(data) {
        assert_eq!(hello.encode()[..], *data, "{hello:?}");
    }
    if let Ok(refusal) = Refusal::decode(data) {
        assert_eq!(refusal.encode()[..], *data, "{refusal:?}");
    }
    if let Ok(invite) = Invite::decode(data) {
        assert_eq!(invite.encode().as_deref(), Some(data), "{invite:?}");
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(env) = InviteEnv::decode(text)
    {
        assert_eq!(env.encode(), text, "{env:?}");
    }
});
