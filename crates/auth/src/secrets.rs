//! New credentials from the system's random source, and the hash a bearer token is
//! kept as.

use ring::rand::{SecureRandom, SystemRandom};

use crate::{Error, Result};

/// Random bytes in a bearer token: 256 bits, as an AWS secret key's 240.
const TOKEN_BYTES: usize = 32;
/// Characters after `AKIA` in an access key id (AWS's length: 20 in all).
const KEY_ID_CHARS: usize = 16;
/// Random bytes in a secret access key: 30, which base64 spells in AWS's 40 characters.
const SECRET_BYTES: usize = 30;
/// The alphabet of access key ids, as AWS's.
const KEY_ID_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn random<const N: usize>() -> Result<[u8; N]> {
    let mut out = [0u8; N];
    SystemRandom::new()
        .fill(&mut out)
        .map_err(|_| Error::Random)?;
    Ok(out)
}

/// A bearer token: `alm_` and 64 hex digits.
pub fn new_token() -> Result<String> {
    Ok(format!("alm_{}", hex::encode(random::<TOKEN_BYTES>()?)))
}

/// An access key id in AWS's shape: `AKIA` and 16 characters of A–Z, 2–7.
pub fn new_access_key_id() -> Result<String> {
    let bytes = random::<KEY_ID_CHARS>()?;
    let tail: String = bytes
        .iter()
        .map(|b| char::from(KEY_ID_ALPHABET[usize::from(b % 32)]))
        .collect();
    Ok(format!("AKIA{tail}"))
}

/// A secret access key: 40 characters of base64.
pub fn new_secret_access_key() -> Result<String> {
    use base64::Engine as _;
    Ok(base64::engine::general_purpose::STANDARD.encode(random::<SECRET_BYTES>()?))
}

/// The SHA-256 of a token, as stored.
pub fn token_hash(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "test")]
mod tests {
    use super::*;

    #[test]
    fn credentials_have_their_shapes_and_differ() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert!(a.starts_with("alm_") && a.len() == 68 && a != b);
        let id = new_access_key_id().unwrap();
        assert!(id.starts_with("AKIA") && id.len() == 20);
        assert!(id[4..].bytes().all(|c| KEY_ID_ALPHABET.contains(&c)));
        assert_eq!(new_secret_access_key().unwrap().len(), 40);
        assert_eq!(token_hash("x"), token_hash("x"));
        assert_ne!(token_hash("x"), token_hash("y"));
    }
}
