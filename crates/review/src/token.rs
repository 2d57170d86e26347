//! Reviewer tokens and review set ids.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use rand::TryRngCore;
use sha2::{Digest, Sha256};

/// A new reviewer token: 32 bytes from the operating system's generator, URL-safe base64 (43 characters).
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .expect("the operating system's random generator works");
    URL_SAFE_NO_PAD.encode(bytes)
}

/// What the store keeps of a token: its SHA-256, hex. A token is 256 random bits, so no salt or slow hash is
/// needed for a stolen table not to reveal it.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.trim().as_bytes()))
}

/// A new review set id: `rv-` and 12 random hex digits.
pub fn new_set_id() -> String {
    let mut bytes = [0u8; 6];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .expect("the operating system's random generator works");
    format!("rv-{}", hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_distinct_and_hash_to_hex() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        let h = hash_token(&a);
        assert_eq!(h.len(), 64);
        assert_ne!(h, hash_token(&b));
        assert_eq!(h, hash_token(&format!(" {a}\n")));
    }

    #[test]
    fn set_ids_differ() {
        assert_ne!(new_set_id(), new_set_id());
        assert!(new_set_id().starts_with("rv-"));
    }
}
