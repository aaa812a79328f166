//! Row keys as the console shows them.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Printable ASCII as it is, a backslash as `\\`, other bytes as `\xNN`.
pub fn display(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for &b in key {
        match b {
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// Standard base64.
pub fn b64(key: &[u8]) -> String {
    STANDARD.encode(key)
}

/// Reads standard base64 (`what` names the parameter in the error).
pub fn from_b64(text: &str, what: &str) -> crate::Result<Vec<u8>> {
    STANDARD
        .decode(text)
        .map_err(|e| crate::Error::Request(format!("{what} is not base64: {e}")))
}

/// The longest common prefix of `a` and `b`.
pub fn common_prefix<'a>(a: &'a [u8], b: &[u8]) -> &'a [u8] {
    let n = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    &a[..n]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_display_and_prefixes() {
        assert_eq!(display(b"hot#01"), "hot#01");
        assert_eq!(display(&[0, b'a', 0xff, b'\\']), "\\x00a\\xff\\\\");
        assert_eq!(common_prefix(b"hot#01", b"hot#9"), b"hot#");
        assert_eq!(common_prefix(b"", b"a"), b"");
    }
}
