//! The hand parser against serde_json's derive on the same bodies: well-formed bodies
//! of every shape, then a fuzz of random and mutated bodies. Either both give the
//! same request or both refuse it.

#![expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]

use super::*;
use almanac_timeseries::Record;
use oracle::WriteRecordsIn;

/// xorshift64: a seeded stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

/// What a parse gives, comparable: the request, or that it failed.
fn outcome(r: std::result::Result<WriteRequest<'_>, String>) -> Option<WriteRequest<'_>> {
    r.ok()
}

fn check(body: &[u8]) {
    if body.is_empty() {
        // An empty body is an empty request (the operation then says what is missing).
        assert_eq!(parse_write_records(body), Ok(WriteRequest::default()));
        return;
    }
    if std::str::from_utf8(body).is_err() {
        // The second deliberate difference: serde_json skips an ignored member's
        // bytes without checking them.
        assert!(parse_write_records(body).is_err());
        return;
    }
    let ours = outcome(parse_write_records(body));
    let theirs = outcome(
        serde_json::from_slice::<WriteRecordsIn<'_>>(body)
            .map(Into::into)
            .map_err(|e| e.to_string()),
    );
    assert_eq!(
        ours,
        theirs,
        "the parsers disagree on {:?}",
        String::from_utf8_lossy(body)
    );
}

/// Whitespace, sometimes.
fn ws(rng: &mut Rng, out: &mut String) {
    const WS: [&str; 5] = ["", " ", "\n", "\t ", "\r\n  "];
    if rng.chance(3) {
        out.push_str(WS[rng.below(WS.len() as u64) as usize]);
    }
}

/// A JSON string literal: plain text, escapes, non-ASCII, surrogate pairs.
fn string(rng: &mut Rng, out: &mut String) {
    const PIECES: [&str; 14] = [
        "host",
        "h_1",
        "us-west2",
        "58.25",
        "1700000000000",
        "DOUBLE",
        "MULTI",
        "\\\"",
        "\\\\",
        "\\n\\t\\/",
        "\\u00e4",
        "\\ud83d\\ude00",
        "ä€",
        " ",
    ];
    out.push('"');
    for _ in 0..rng.below(4) {
        out.push_str(PIECES[rng.below(PIECES.len() as u64) as usize]);
    }
    out.push('"');
}

/// Any value, for members the parsers skip or for a wrong type.
fn any_value(rng: &mut Rng, depth: u32, out: &mut String) {
    const SCALARS: [&str; 9] = [
        "null", "true", "false", "0", "-12", "3.5", "1e9", "-0.25E-3", "17",
    ];
    match rng.below(if depth > 3 { 2 } else { 4 }) {
        0 => out.push_str(SCALARS[rng.below(SCALARS.len() as u64) as usize]),
        1 => string(rng, out),
        2 => {
            out.push('[');
            for i in 0..rng.below(3) {
                if i > 0 {
                    out.push(',');
                }
                ws(rng, out);
                any_value(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            for i in 0..rng.below(3) {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!("\"x{i}\":"));
                any_value(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
}

/// An object of `members`, each written by its function, in random order, some left
/// out, some unknown members added; a member is rarely written with a wrong type.
/// Writes one member's value.
type Gen<'a> = &'a dyn Fn(&mut Rng, &mut String);

/// An object of some of `members` in some order with whitespace here and there; or,
/// one time in three, all of them in order without whitespace, as the SDKs write
/// them (the parser's fast path), with the same chances of wrong and unknown values.
fn object(rng: &mut Rng, out: &mut String, members: &[(&str, Gen<'_>)]) {
    let canonical = rng.chance(3);
    let ws = |rng: &mut Rng, out: &mut String| {
        if !canonical {
            ws(rng, out);
        }
    };
    let mut order: Vec<usize> = (0..members.len())
        .filter(|_| canonical || !rng.chance(4))
        .collect();
    for i in (1..order.len()).rev() {
        if !canonical {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
    }
    out.push('{');
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
    };
    for i in order {
        sep(out);
        ws(rng, out);
        let (name, value) = members[i];
        out.push_str(&format!("\"{name}\""));
        ws(rng, out);
        out.push(':');
        ws(rng, out);
        if rng.chance(40) {
            // A wrong type, never an array: serde's derive would read a struct from
            // one (the deliberate difference in the module docs).
            loop {
                let mut v = String::new();
                any_value(rng, 0, &mut v);
                if !v.starts_with('[') {
                    out.push_str(&v);
                    break;
                }
            }
        } else {
            value(rng, out);
        }
        ws(rng, out);
    }
    if rng.chance(5) {
        sep(out);
        out.push_str("\"Unknown\":");
        any_value(rng, 0, out);
    }
    out.push('}');
}

fn optional_string(rng: &mut Rng, out: &mut String) {
    if rng.chance(8) {
        out.push_str("null");
    } else {
        string(rng, out);
    }
}

fn array_of(rng: &mut Rng, out: &mut String, max: u64, elem: &dyn Fn(&mut Rng, &mut String)) {
    out.push('[');
    for i in 0..rng.below(max + 1) {
        if i > 0 {
            out.push(',');
        }
        ws(rng, out);
        elem(rng, out);
    }
    out.push(']');
}

fn dimension(rng: &mut Rng, out: &mut String) {
    object(
        rng,
        out,
        &[
            ("Name", &string),
            ("Value", &string),
            ("DimensionValueType", &optional_string),
        ],
    );
}

fn measure_value(rng: &mut Rng, out: &mut String) {
    object(
        rng,
        out,
        &[("Name", &string), ("Value", &string), ("Type", &string)],
    );
}

fn version(rng: &mut Rng, out: &mut String) {
    const V: [&str; 8] = [
        "1",
        "42",
        "-3",
        "null",
        "9223372036854775807",
        "9223372036854775808",
        "1.0",
        "01",
    ];
    out.push_str(V[rng.below(V.len() as u64) as usize]);
}

fn record(rng: &mut Rng, out: &mut String) {
    object(
        rng,
        out,
        &[
            ("Dimensions", &|r: &mut Rng, o: &mut String| {
                array_of(r, o, 4, &dimension)
            }),
            ("MeasureName", &optional_string),
            ("MeasureValue", &optional_string),
            ("MeasureValueType", &optional_string),
            ("MeasureValues", &|r: &mut Rng, o: &mut String| {
                array_of(r, o, 4, &measure_value)
            }),
            ("Time", &optional_string),
            ("TimeUnit", &optional_string),
            ("Version", &version),
        ],
    );
}

fn body(rng: &mut Rng) -> String {
    let mut out = String::new();
    ws(rng, &mut out);
    object(
        rng,
        &mut out,
        &[
            ("DatabaseName", &optional_string),
            ("TableName", &optional_string),
            ("CommonAttributes", &|r: &mut Rng, o: &mut String| {
                if r.chance(6) {
                    o.push_str("null");
                } else {
                    record(r, o);
                }
            }),
            ("Records", &|r: &mut Rng, o: &mut String| {
                array_of(r, o, 5, &record)
            }),
        ],
    );
    ws(rng, &mut out);
    out
}

/// The word-at-a-time scan finds the byte a byte-at-a-time scan finds, from every
/// start, on bytes dense in the ones that end a run and in their neighbours.
#[test]
fn run_end_agrees_with_a_byte_scan() {
    const ALPHABET: [u8; 12] = [
        b'"', b'\\', 0x00, 0x1f, 0x20, 0x21, 0x23, 0x5b, 0x5d, 0x7f, 0x80, 0xff,
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut found = 0;
    for _ in 0..2000 {
        let len = rng.below(40) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                if rng.chance(6) {
                    ALPHABET[rng.below(ALPHABET.len() as u64) as usize]
                } else {
                    b'a' + rng.below(26) as u8
                }
            })
            .collect();
        for from in 0..=len {
            let want = bytes[from..]
                .iter()
                .position(|&b| ENDS_RUN[usize::from(b)])
                .map(|n| from + n);
            assert_eq!(run_end(&bytes, from), want, "{bytes:?} from {from}");
            found += usize::from(want.is_some());
        }
    }
    assert!(found > 10_000, "only {found} scans found a byte");
}

#[test]
fn a_plain_body_borrows_its_text() {
    let body = br#"{"DatabaseName":"db","TableName":"t","Records":[{"Dimensions":[{"Name":"host","Value":"h1"}],"MeasureName":"cpu","MeasureValue":"1.5","Time":"17"}]}"#;
    let req = parse_write_records(body).unwrap();
    assert_eq!(req.database_name.as_deref(), Some("db"));
    let r = &req.records[0];
    assert!(matches!(r.dimensions[0].value, Cow::Borrowed("h1")));
    assert!(matches!(r.time, Some(Cow::Borrowed("17"))));
}

#[test]
fn escaped_text_is_unescaped_into_owned_strings() {
    let body = br#"{"DatabaseName":"db","TableName":"t","Records":[
        {"Dimensions":[{"Name":"host","Value":"h\"1\u00e4","DimensionValueType":"VARCHAR"}],
         "MeasureName":"cpu","MeasureValue":"1.5","Time":"17","Version":3}]}"#;
    let req = parse_write_records(body).unwrap();
    let r = &req.records[0];
    assert!(matches!(r.dimensions[0].name, Cow::Borrowed("host")));
    assert_eq!(r.dimensions[0].value, "h\"1\u{e4}");
    assert!(matches!(r.dimensions[0].value, Cow::Owned(_)));
    assert_eq!(r.measure_name.as_deref(), Some("cpu"));
    assert_eq!(r.version, Some(3));
    let e = parse_write_records(br#"{"Records":[{"Time":17}]}"#).unwrap_err();
    assert!(e.contains("expected `\"`"), "{e}");
}

#[test]
fn records_keep_their_lists_apart() {
    let body = br#"{"CommonAttributes":{"Dimensions":[{"Name":"region","Value":"eu"}]},"Records":[
        {"Dimensions":[{"Name":"a","Value":"1"},{"Name":"b","Value":"2"}],"MeasureValues":[{"Name":"x","Value":"1","Type":"BIGINT"}]},
        {"Dimensions":[],"MeasureValues":[{"Name":"y","Value":"2","Type":"BIGINT"},{"Name":"z","Value":"3","Type":"BIGINT"}]},
        {"Dimensions":[{"Name":"c","Value":"3"}]}]}"#;
    let req = parse_write_records(body).unwrap();
    let names = |r: &Record<'_>| -> Vec<String> {
        r.dimensions.iter().map(|d| d.name.to_string()).collect()
    };
    let attrs = |r: &Record<'_>| -> Vec<String> {
        r.measure_values
            .iter()
            .map(|m| m.name.to_string())
            .collect()
    };
    assert_eq!(names(req.common_attributes.as_ref().unwrap()), ["region"]);
    assert_eq!(names(&req.records[0]), ["a", "b"]);
    assert_eq!(attrs(&req.records[0]), ["x"]);
    assert!(names(&req.records[1]).is_empty());
    assert_eq!(attrs(&req.records[1]), ["y", "z"]);
    assert_eq!(names(&req.records[2]), ["c"]);
    assert!(attrs(&req.records[2]).is_empty());
    assert_eq!(parse_write_records(b"").unwrap(), WriteRequest::default());
}

#[test]
fn errors_say_what_and_where() {
    let cases: [(&[u8], &str); 7] = [
        (br#"{"Records":[{"Version":1.5}]}"#, "floating point"),
        (br#"{"Records":[{"Time":"a"}],}"#, "expected `\"`"),
        (br#"{"Records":[{"Time":"a"}]} x"#, "trailing characters"),
        (
            br#"{"TableName":"a","TableName":"b"}"#,
            "duplicate field `TableName`",
        ),
        (b"{\"TableName\":\"a\x01\"}", "control character"),
        (br#"{"TableName":"\ud800"}"#, "lone leading surrogate"),
        (b"{\"TableName\":\"\xff\"}", "not UTF-8"),
    ];
    for (body, want) in cases {
        let e = parse_write_records(body).unwrap_err();
        assert!(e.contains(want), "{:?}: {e}", String::from_utf8_lossy(body));
    }
    let deep = format!("{{\"X\":{}{}}}", "[".repeat(200), "]".repeat(200));
    assert!(
        parse_write_records(deep.as_bytes())
            .unwrap_err()
            .contains("recursion limit")
    );
}

#[test]
fn agrees_with_serde_on_generated_bodies() {
    let mut rng = Rng(0x5eed_0f4e_c04d_5eed);
    let mut parsed = 0;
    for _ in 0..4000 {
        let b = body(&mut rng);
        parsed += usize::from(parse_write_records(b.as_bytes()).is_ok());
        check(b.as_bytes());
    }
    // The generator must mostly make good bodies, or the comparison proves little.
    assert!(
        parsed > 1000,
        "only {parsed} of 4000 generated bodies parsed"
    );
}

/// Rounds of the mutation fuzz: `ALMANAC_JSON_FUZZ_ROUNDS` (default 6000), from seed
/// `ALMANAC_JSON_FUZZ_SEED`, for longer runs by hand.
fn fuzz_setup() -> (Rng, u64) {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = env("ALMANAC_JSON_FUZZ_SEED").unwrap_or(0x0f22_1e55_9e37_79b9) | 1;
    (Rng(seed), env("ALMANAC_JSON_FUZZ_ROUNDS").unwrap_or(6000))
}

#[test]
fn agrees_with_serde_on_mutated_bodies() {
    let (mut rng, rounds) = fuzz_setup();
    const BYTES: &[u8] = b"{}[],:\"\\ 0123456789-.eEnulltruefalsu\x00\x1f\xc3\xa4\xff";
    for _ in 0..rounds {
        let mut b = body(&mut rng).into_bytes();
        for _ in 0..=rng.below(3) {
            if b.is_empty() {
                break;
            }
            let at = rng.below(b.len() as u64) as usize;
            match rng.below(3) {
                0 => b[at] = BYTES[rng.below(BYTES.len() as u64) as usize],
                1 => {
                    b.remove(at);
                }
                _ => b.insert(at, BYTES[rng.below(BYTES.len() as u64) as usize]),
            }
        }
        check(&b);
    }
}
