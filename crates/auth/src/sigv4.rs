//! AWS Signature Version 4, as the Timestream endpoint verifies it.
//!
//! A request, step by step:
//! 1. [`Authorization::parse`] reads the `Authorization` header:
//!    `AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request,
//!    SignedHeaders=a;b;c, Signature=HEX`.
//! 2. [`verify`] checks the request's time (`X-Amz-Date`) is within [`MAX_SKEW`] of
//!    the server's, builds the canonical request (method, path, sorted query, the
//!    signed headers with their values trimmed, the body's SHA-256), the string to
//!    sign, and the signing key from the secret, date, region and service, and compares
//!    the HMAC-SHA256 with the signature in constant time.
//! 3. [`ReplayGuard`] refuses a signature it has seen before while it is still within
//!    the skew window. AWS SDKs sign a fresh invocation id and attempt number into every
//!    request (`amz-sdk-invocation-id`, `amz-sdk-request`), so two of their requests
//!    never share a signature; a captured request sent again does.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use almanac_engine::calendar::{civil_from_days, days_from_civil};
use ring::hmac;

/// The only algorithm SigV4 defines for headers.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// Furthest a request's time may be from the server's, either way: AWS's 15 minutes.
pub const MAX_SKEW_SECS: i64 = 15 * 60;
/// [`MAX_SKEW_SECS`] under the name the module docs use.
pub const MAX_SKEW: std::time::Duration = std::time::Duration::from_secs(MAX_SKEW_SECS as u64);
/// Most signatures the replay guard remembers (16 bytes of each and a time: about
/// 64 MB at most); past it the oldest are forgotten first. At a million signed requests
/// per 15 minutes (over 1,100 a second) a replay of the oldest could pass.
pub const MAX_REMEMBERED_SIGNATURES: usize = 1 << 20;
/// Longest `Authorization` header read.
pub const MAX_AUTHORIZATION_BYTES: usize = 4096;

/// Why a signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigError {
    /// No `Authorization` header.
    #[error("Missing Authentication Token")]
    Missing,
    /// The header or a header it depends on is not SigV4's.
    #[error("{0}")]
    Malformed(String),
    /// The access key id is not a principal's.
    #[error("The security token included in the request is invalid.")]
    UnknownKey,
    /// The request's time is too far from the server's.
    #[error("{0}")]
    Expired(String),
    /// The signature does not match.
    #[error(
        "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."
    )]
    Mismatch,
    /// The same signature arrived before.
    #[error(
        "This request has already been received (its signature was seen {0}); sign every request anew."
    )]
    Replayed(String),
}

/// The parts of an `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    /// The access key id.
    pub access_key_id: String,
    /// `YYYYMMDD` of the credential scope.
    pub date: String,
    /// The region signed for.
    pub region: String,
    /// The service signed for.
    pub service: String,
    /// Lowercase header names, as listed.
    pub signed_headers: Vec<String>,
    /// The signature.
    pub signature: Vec<u8>,
}

impl Authorization {
    /// Parses an `Authorization` header value.
    pub fn parse(header: &str) -> Result<Self, SigError> {
        let bad = |what: &str| SigError::Malformed(format!("Authorization header: {what}"));
        if header.len() > MAX_AUTHORIZATION_BYTES {
            return Err(bad(&format!("longer than {MAX_AUTHORIZATION_BYTES} bytes")));
        }
        let rest = header
            .strip_prefix(ALGORITHM)
            .ok_or_else(|| bad(&format!("the algorithm must be {ALGORITHM}")))?;
        let mut credential = None;
        let mut signed = None;
        let mut signature = None;
        for part in rest.split(',') {
            let part = part.trim();
            if let Some(v) = part.strip_prefix("Credential=") {
                credential = Some(v);
            } else if let Some(v) = part.strip_prefix("SignedHeaders=") {
                signed = Some(v);
            } else if let Some(v) = part.strip_prefix("Signature=") {
                signature = Some(v);
            }
        }
        let credential = credential.ok_or_else(|| bad("no Credential"))?;
        let scope: Vec<&str> = credential.split('/').collect();
        let [key, date, region, service, "aws4_request"] = scope[..] else {
            return Err(bad(
                "Credential must be KEY/DATE/REGION/SERVICE/aws4_request",
            ));
        };
        let signed_headers: Vec<String> = signed
            .ok_or_else(|| bad("no SignedHeaders"))?
            .split(';')
            .map(str::to_ascii_lowercase)
            .collect();
        if !signed_headers.iter().any(|h| h == "host") {
            return Err(bad("SignedHeaders must include host"));
        }
        let signature = hex::decode(signature.ok_or_else(|| bad("no Signature"))?)
            .map_err(|_| bad("Signature is not hex"))?;
        Ok(Self {
            access_key_id: key.to_string(),
            date: date.to_string(),
            region: region.to_string(),
            service: service.to_string(),
            signed_headers,
            signature,
        })
    }
}

/// The request as signed.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `POST`, …
    pub method: &'a str,
    /// The path, as sent (already percent-encoded).
    pub path: &'a str,
    /// The query string without `?`, as sent.
    pub query: &'a str,
    /// Every header, names in any case, repeated names as they came.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: &'a [u8],
}

impl Request<'_> {
    fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
            .collect()
    }
}

/// Checks `auth`'s signature of `request` with `secret`, the server's clock at
/// `now_secs`; returns the request's time (seconds since the epoch).
pub fn verify(
    request: &Request<'_>,
    auth: &Authorization,
    secret: &str,
    now_secs: i64,
) -> Result<i64, SigError> {
    let amz_date = request
        .header_values("x-amz-date")
        .first()
        .copied()
        .ok_or_else(|| SigError::Malformed("the X-Amz-Date header is missing".into()))?;
    let at = parse_amz_date(amz_date).ok_or_else(|| {
        SigError::Malformed(format!("X-Amz-Date {amz_date:?} is not YYYYMMDDTHHMMSSZ"))
    })?;
    if !amz_date.starts_with(&auth.date) {
        return Err(SigError::Malformed(format!(
            "the credential's date {} is not X-Amz-Date's {amz_date}",
            auth.date
        )));
    }
    if let Some(claimed) = request.header_values("x-amz-content-sha256").first()
        && !claimed.eq_ignore_ascii_case(&hex::encode(sha256(request.body)))
    {
        return Err(SigError::Malformed(
            "X-Amz-Content-Sha256 is not the SHA-256 of the body (an unsigned payload is not accepted)".into(),
        ));
    }
    if at < now_secs - MAX_SKEW_SECS {
        return Err(SigError::Expired(format!(
            "Signature expired: {amz_date} is now earlier than {} ({} - 15 min.)",
            format_amz_date(now_secs - MAX_SKEW_SECS),
            format_amz_date(now_secs)
        )));
    }
    if at > now_secs + MAX_SKEW_SECS {
        return Err(SigError::Expired(format!(
            "Signature not yet current: {amz_date} is still later than {} ({} + 15 min.)",
            format_amz_date(now_secs + MAX_SKEW_SECS),
            format_amz_date(now_secs)
        )));
    }
    let (key, to_sign) = signing_parts(request, auth, secret, amz_date);
    hmac::verify(&key, to_sign.as_bytes(), &auth.signature).map_err(|_| SigError::Mismatch)?;
    Ok(at)
}

/// The signing key and the string to sign of `request` under `auth`'s scope.
fn signing_parts(
    request: &Request<'_>,
    auth: &Authorization,
    secret: &str,
    amz_date: &str,
) -> (hmac::Key, String) {
    let canonical = canonical_request(request, &auth.signed_headers);
    let scope = format!(
        "{}/{}/{}/aws4_request",
        auth.date, auth.region, auth.service
    );
    let to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        hex::encode(sha256(canonical.as_bytes()))
    );
    let mut key = hmac_sha256(format!("AWS4{secret}").as_bytes(), auth.date.as_bytes());
    for part in [auth.region.as_str(), auth.service.as_str(), "aws4_request"] {
        key = hmac_sha256(&key, part.as_bytes());
    }
    (hmac::Key::new(hmac::HMAC_SHA256, &key), to_sign)
}

/// The `Authorization` header that signs `request` (whose headers must include
/// `host` and `x-amz-date`, the time `amz_date`) with a key pair, as an AWS SDK would:
/// every header is signed.
pub fn sign(
    request: &Request<'_>,
    access_key_id: &str,
    secret: &str,
    region: &str,
    service: &str,
    amz_date: &str,
) -> String {
    let mut signed: Vec<String> = request
        .headers
        .iter()
        .map(|(n, _)| n.to_ascii_lowercase())
        .collect();
    signed.sort_unstable();
    signed.dedup();
    let auth = Authorization {
        access_key_id: access_key_id.to_string(),
        date: amz_date.get(..8).unwrap_or("").to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed,
        signature: Vec::new(),
    };
    let (key, to_sign) = signing_parts(request, &auth, secret, amz_date);
    let signature = hex::encode(hmac::sign(&key, to_sign.as_bytes()).as_ref());
    format!(
        "{ALGORITHM} Credential={access_key_id}/{}/{region}/{service}/aws4_request, SignedHeaders={}, Signature={signature}",
        auth.date,
        auth.signed_headers.join(";")
    )
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .to_vec()
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

/// SigV4's canonical request.
fn canonical_request(request: &Request<'_>, signed: &[String]) -> String {
    let path = if request.path.is_empty() {
        "/"
    } else {
        request.path
    };
    let mut query: Vec<(&str, &str)> = request
        .query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    query.sort_unstable();
    let query = query
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut headers = String::new();
    for name in signed {
        let values: Vec<String> = request
            .header_values(name)
            .iter()
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        headers.push_str(name);
        headers.push(':');
        headers.push_str(&values.join(","));
        headers.push('\n');
    }
    // The body's own hash, never a header's claim of it: a signed
    // `X-Amz-Content-Sha256` that differs from the body fails the comparison with the
    // signature (and `verify` refuses it first, naming it).
    let payload = hex::encode(sha256(request.body));
    format!(
        "{}\n{path}\n{query}\n{headers}\n{}\n{payload}",
        request.method,
        signed.join(";")
    )
}

/// `YYYYMMDDTHHMMSSZ` as seconds since the epoch.
pub fn parse_amz_date(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, s) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
}

/// Seconds since the epoch as `YYYYMMDDTHHMMSSZ`.
pub fn format_amz_date(secs: i64) -> String {
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Remembers the signatures of accepted requests while they could still be replayed.
#[derive(Debug, Default)]
pub struct ReplayGuard {
    inner: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    /// A signature's first 16 bytes (an HMAC's output is uniform: 128 bits do not
    /// collide by chance) and its request's time.
    times: HashMap<u128, i64>,
    order: VecDeque<(i64, u128)>,
}

/// The part of a signature the guard keeps.
fn fingerprint(signature: &[u8]) -> u128 {
    let mut bytes = [0u8; 16];
    for (b, s) in bytes.iter_mut().zip(signature) {
        *b = *s;
    }
    u128::from_le_bytes(bytes)
}

impl ReplayGuard {
    /// Records `signature` of a request made at `at`; refuses one seen before.
    pub fn admit(&self, signature: &[u8], at: i64, now_secs: i64) -> Result<(), SigError> {
        let mut seen = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Forget what can no longer pass the time check anyway.
        while let Some((t, _)) = seen.order.front() {
            if *t >= now_secs - MAX_SKEW_SECS && seen.order.len() < MAX_REMEMBERED_SIGNATURES {
                break;
            }
            if let Some((_, sig)) = seen.order.pop_front() {
                seen.times.remove(&sig);
            }
        }
        let key = fingerprint(signature);
        if let Some(t) = seen.times.get(&key) {
            return Err(SigError::Replayed(format!(
                "with X-Amz-Date {}",
                format_amz_date(*t)
            )));
        }
        seen.times.insert(key, at);
        seen.order
            .push_back((at.max(now_secs - MAX_SKEW_SECS), key));
        Ok(())
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "test")]
mod tests {
    use super::*;

    /// AWS's published example (the `get-vanilla` case of its SigV4 test suite).
    #[test]
    fn the_aws_test_suite_example_verifies() {
        let auth = Authorization::parse(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
             SignedHeaders=host;x-amz-date, \
             Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
        )
        .unwrap();
        let headers = [
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123600Z"),
        ];
        let request = Request {
            method: "GET",
            path: "/",
            query: "",
            headers: &headers,
            body: b"",
        };
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        let at = parse_amz_date("20150830T123600Z").unwrap();
        assert_eq!(verify(&request, &auth, secret, at + 60), Ok(at));
        assert_eq!(
            verify(&request, &auth, "wrong", at),
            Err(SigError::Mismatch)
        );
        let late = verify(&request, &auth, secret, at + MAX_SKEW_SECS + 1);
        assert!(
            matches!(late, Err(SigError::Expired(m)) if m.starts_with("Signature expired: 20150830T123600Z"))
        );
        let tampered = [
            ("Host", "example.amazonaws.com"),
            ("X-Amz-Date", "20150830T123601Z"),
        ];
        let request = Request {
            headers: &tampered,
            ..request
        };
        assert_eq!(verify(&request, &auth, secret, at), Err(SigError::Mismatch));
    }

    #[test]
    fn what_sign_makes_verify_accepts() {
        let amz_date = "20261127T080000Z";
        let headers = [
            ("Host", "127.0.0.1:8087"),
            ("X-Amz-Date", amz_date),
            ("X-Amz-Target", "Timestream_20181101.WriteRecords"),
            ("Content-Type", "application/x-amz-json-1.0"),
        ];
        let request = Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &headers,
            body: br#"{"DatabaseName":"db"}"#,
        };
        let header = sign(
            &request,
            "AKIDEXAMPLE",
            "secret",
            "us-east-1",
            "timestream",
            amz_date,
        );
        let auth = Authorization::parse(&header).unwrap();
        let at = parse_amz_date(amz_date).unwrap();
        assert_eq!(verify(&request, &auth, "secret", at), Ok(at));
        let other = Request {
            body: br#"{"DatabaseName":"other"}"#,
            ..request
        };
        assert_eq!(verify(&other, &auth, "secret", at), Err(SigError::Mismatch));
    }

    #[test]
    fn a_body_other_than_the_one_signed_is_refused_whatever_its_hash_header_says() {
        let amz_date = "20261127T080000Z";
        let signed_body = br#"{"DatabaseName":"db"}"#;
        let claimed = hex::encode(sha256(signed_body));
        let headers = [
            ("Host", "h"),
            ("X-Amz-Date", amz_date),
            ("X-Amz-Content-Sha256", claimed.as_str()),
        ];
        let request = Request {
            method: "POST",
            path: "/",
            query: "",
            headers: &headers,
            body: signed_body,
        };
        let header = sign(&request, "K", "secret", "us-east-1", "timestream", amz_date);
        let auth = Authorization::parse(&header).unwrap();
        let at = parse_amz_date(amz_date).unwrap();
        assert_eq!(verify(&request, &auth, "secret", at), Ok(at));
        let forged = Request {
            body: br#"{"DatabaseName":"other"}"#,
            ..request
        };
        assert!(matches!(
            verify(&forged, &auth, "secret", at),
            Err(SigError::Malformed(_))
        ));
    }

    #[test]
    fn dates_round_trip() {
        for text in [
            "19700101T000000Z",
            "20150830T123600Z",
            "20261127T235959Z",
            "20240229T120000Z",
        ] {
            assert_eq!(format_amz_date(parse_amz_date(text).unwrap()), text);
        }
        assert_eq!(parse_amz_date("20150830T123600Z"), Some(1_440_938_160));
        assert_eq!(parse_amz_date("2015-08-30"), None);
    }

    #[test]
    fn a_signature_is_admitted_once() {
        let guard = ReplayGuard::default();
        assert!(guard.admit(b"sig", 100, 100).is_ok());
        assert!(matches!(
            guard.admit(b"sig", 100, 101),
            Err(SigError::Replayed(_))
        ));
        assert!(guard.admit(b"other", 100, 101).is_ok());
    }

    #[test]
    fn malformed_headers_are_named() {
        for (header, why) in [
            ("Basic xyz", "algorithm"),
            (
                "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=00",
                "Credential",
            ),
            (
                "AWS4-HMAC-SHA256 Credential=K/D/R/S/aws4_request, SignedHeaders=x-amz-date, Signature=00",
                "host",
            ),
            (
                "AWS4-HMAC-SHA256 Credential=K/D/R/S/aws4_request, SignedHeaders=host, Signature=zz",
                "hex",
            ),
        ] {
            let err = Authorization::parse(header).unwrap_err();
            assert!(err.to_string().contains(why), "{header}: {err}");
        }
    }
}
