//! GoogleSQL's lexical forms the tokenizer does not read, put into forms it does
//! before tokenizing (GoogleSQL only): `#` comments become `--` comments; every quoted
//! literal — `'…'`, `"…"`, triple-quoted `'''…'''` / `"""…"""`, with the prefixes `r`
//! (raw), `b` (bytes) or both — becomes single-quoted with quotes doubled, its
//! backslash escapes kept for the rewrite to read (raw literals keep their `r`, bytes
//! their `b`; raw bytes become a hex literal `X'…'`). Backquoted names and comments
//! are copied as they are.

/// Rewrites the lexical forms of the module docs.
pub(super) fn normalize(sql: &str) -> String {
    let b = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 8);
    let mut i = 0;
    // Where the text not yet copied starts.
    let mut copied = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        match c {
            b'-' if next == Some(b'-') => i = line_end(b, i),
            b'/' if next == Some(b'*') => {
                i = sql[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            }
            b'#' => {
                out.push_str(&sql[copied..i]);
                out.push_str("--");
                copied = i + 1;
                i = line_end(b, i);
            }
            b'`' => i = sql[i + 1..].find('`').map_or(b.len(), |e| i + 1 + e + 1),
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'@' || c == b'$' => {
                let start = i;
                let word_end = (i..b.len())
                    .find(|&j| {
                        !(b[j].is_ascii_alphanumeric()
                            || b[j] == b'_'
                            || b[j] == b'@'
                            || b[j] == b'$')
                    })
                    .unwrap_or(b.len());
                let prefix = &sql[start..word_end];
                let is_prefix = prefix.len() <= 2
                    && prefix
                        .bytes()
                        .all(|p| matches!(p, b'r' | b'R' | b'b' | b'B'))
                    && matches!(b.get(word_end), Some(b'\'' | b'"'));
                if is_prefix {
                    let raw = prefix.bytes().any(|p| p == b'r' || p == b'R');
                    let bytes = prefix.bytes().any(|p| p == b'b' || p == b'B');
                    if let Some((text, end)) = literal(sql, word_end, raw, bytes) {
                        out.push_str(&sql[copied..start]);
                        out.push_str(&text);
                        copied = end;
                        i = end;
                        continue;
                    }
                }
                i = word_end;
            }
            b'\'' | b'"' => match literal(sql, i, false, false) {
                Some((text, end)) => {
                    out.push_str(&sql[copied..i]);
                    out.push_str(&text);
                    copied = end;
                    i = end;
                }
                None => i = b.len(),
            },
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    out
}

fn line_end(b: &[u8], from: usize) -> usize {
    (from..b.len()).find(|&j| b[j] == b'\n').unwrap_or(b.len())
}

/// The literal whose opening quote is at `at`: its single-quoted form and the offset
/// just past it; None when it is not closed (left for the tokenizer to report).
fn literal(sql: &str, at: usize, raw: bool, bytes: bool) -> Option<(String, usize)> {
    let b = sql.as_bytes();
    let q = b[at];
    let triple = b.get(at..at + 3) == Some(&[q, q, q][..]);
    let open = if triple { 3 } else { 1 };
    let start = at + open;
    let mut k = start;
    let end = loop {
        if k >= b.len() {
            return None;
        }
        if !raw && b[k] == b'\\' {
            k += 2;
            continue;
        }
        if triple {
            if b.get(k..k + 3) == Some(&[q, q, q][..]) {
                break k;
            }
        } else if b[k] == q {
            // A doubled quote inside a single-quoted literal stays part of it.
            if q == b'\'' && b.get(k + 1) == Some(&q) {
                k += 2;
                continue;
            }
            break k;
        }
        k += 1;
    };
    let content = &sql[start..end.min(b.len())];
    let past = end + open;
    if raw && bytes {
        let hex: String = content.bytes().map(|c| format!("{c:02X}")).collect();
        return Some((format!("X'{hex}'"), past));
    }
    let mut value = String::with_capacity(content.len() + 2);
    let mut chars = content.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if !raw => match chars.next() {
                Some('\'') => value.push_str("''"),
                Some(other) => {
                    value.push('\\');
                    value.push(other);
                }
                None => value.push('\\'),
            },
            '\'' if !triple && q == b'\'' && chars.peek() == Some(&'\'') => {
                chars.next();
                value.push_str("''");
            }
            '\'' => value.push_str("''"),
            other => value.push(other),
        }
    }
    let prefix = match (raw, bytes) {
        (true, _) => "r",
        (_, true) => "b",
        _ => "",
    };
    Some((format!("{prefix}'{value}'"), past))
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn comments_and_quotes() {
        assert_eq!(normalize("SELECT 1 # one\n, 2"), "SELECT 1 -- one\n, 2");
        assert_eq!(
            normalize("SELECT '#', `a#b`, \"x#\" -- #"),
            "SELECT '#', `a#b`, 'x#' -- #"
        );
        assert_eq!(normalize("SELECT '''it's'''"), "SELECT 'it''s'");
        assert_eq!(normalize(r#"SELECT """a "b" c""""#), r#"SELECT 'a "b" c'"#);
        assert_eq!(
            normalize(r"SELECT 'it\'s', 'a''b'"),
            r"SELECT 'it''s', 'a''b'"
        );
        assert_eq!(
            normalize(r"SELECT r'\d+', R'''\d'x'''"),
            r"SELECT r'\d+', r'\d''x'"
        );
        assert_eq!(normalize(r"SELECT rb'\x', BR'a'"), "SELECT X'5C78', X'61'");
        assert_eq!(normalize(r"SELECT b'''\x00'''"), r"SELECT b'\x00'");
        assert_eq!(normalize("SELECT rabbit, b, 'é'"), "SELECT rabbit, b, 'é'");
        assert_eq!(normalize("SELECT 'open"), "SELECT 'open");
    }
}
