//! A signed Timestream request as the endpoint checks it (`almanac_auth::sigv4`): the
//! `Authorization` header parsed, `X-Amz-Date` read, and the signature verified
//! (canonical request, scope, signing key); and a property: any request signed as an
//! AWS SDK signs it verifies.
//!
//! The input is a request in text: the first line `METHOD PATH[?QUERY]`, then header
//! lines `name: value` up to an empty line, then the body (bytes). The server's clock
//! is 2024-06-01T00:00:00Z; the secret of every key is `SECRET`.
#![no_main]

use almanac_auth::sigv4::{Authorization, Request, format_amz_date, parse_amz_date, sign, verify};
use libfuzzer_sys::fuzz_target;

const NOW_SECS: i64 = 1_717_200_000;
const SECRET: &str = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";

/// Whether `name` is an HTTP header name (RFC 9110 token): what a client can send.
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fuzz_target!(|data: &[u8]| {
    let split = data.windows(2).position(|w| w == b"\n\n");
    let (head, body) = match split {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let Ok(head) = std::str::from_utf8(head) else {
        return;
    };
    let mut lines = head.split('\n');
    let request_line = lines.next().unwrap_or_default();
    let (method, target) = request_line.split_once(' ').unwrap_or((request_line, "/"));
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers: Vec<(&str, &str)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim(), v.trim()))
        .collect();
    let request = Request {
        method,
        path,
        query,
        headers: &headers,
        body,
    };
    for (name, value) in &headers {
        if name.eq_ignore_ascii_case("x-amz-date") {
            let _ = parse_amz_date(value);
        }
        if name.eq_ignore_ascii_case("authorization")
            && let Ok(auth) = Authorization::parse(value)
        {
            let _ = verify(&request, &auth, SECRET, NOW_SECS);
        }
    }

    // The property, over the headers a client could send (and sign).
    let amz_date = format_amz_date(NOW_SECS);
    let mut signed: Vec<(&str, &str)> = headers
        .iter()
        .copied()
        .filter(|(n, v)| {
            is_token(n)
                && v.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
                && !["x-amz-date", "x-amz-content-sha256", "authorization"]
                    .iter()
                    .any(|h| n.eq_ignore_ascii_case(h))
        })
        .collect();
    signed.push(("host", "localhost:8086"));
    signed.push(("X-Amz-Date", amz_date.as_str()));
    let request = Request {
        headers: &signed,
        ..request
    };
    let header = sign(
        &request,
        "AKIDEXAMPLE",
        SECRET,
        "us-east-1",
        "timestream",
        &amz_date,
    );
    let auth = Authorization::parse(&header);
    let verified = auth
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|a| verify(&request, a, SECRET, NOW_SECS));
    if header.len() <= almanac_auth::sigv4::MAX_AUTHORIZATION_BYTES {
        assert!(
            verified.is_ok(),
            "a request signed as an SDK signs it does not verify: {verified:?}\n{header}"
        );
    }
});
