//! The two opaque tokens a client hands back: `prepared_query` (from PrepareQuery) and
//! `resume_token` (from a batch boundary of ExecuteQuery).
//!
//! Both are envelopes, version 1:
//!
//! ```text
//! magic (3 bytes: "AQP" prepared query, "AQR" resume token) | version (1 byte = 1)
//! | CRC-32C of the payload (4 bytes, big-endian) | payload
//! ```
//!
//! A prepared query's payload is a [`PreparedQuery`] protobuf: Almanac keeps no
//! per-query state, so ExecuteQuery plans again from the text. A resume token's payload
//! is 12 bytes: the rows delivered before it (u64, big-endian) and the CRC-32C of their
//! encoded values (u32, big-endian), which lets a resumed call check that the rows it
//! skips are the ones the client already has. Bytes that are not such an envelope are
//! refused with `INVALID_ARGUMENT`, never guessed at.
//!
//! Byte layout: docs/format.md#executequery-tokens

use std::collections::BTreeMap;

use almanac_api::google::bigtable::v2 as pb;
use prost::Message;
use tonic::Status;

use crate::crc32c;
use crate::status::invalid;

/// Envelope version written and accepted.
const VERSION: u8 = 1;
/// Magic of a prepared query.
const PREPARED_MAGIC: &[u8; 3] = b"AQP";
/// Magic of a resume token.
const RESUME_MAGIC: &[u8; 3] = b"AQR";
/// Magic, version and checksum.
const HEADER_BYTES: usize = 8;
/// Payload of a resume token: rows (u64) and checksum (u32).
const RESUME_PAYLOAD_BYTES: usize = 12;

/// What a `prepared_query` token holds.
#[derive(Clone, PartialEq, Message)]
pub struct PreparedQuery {
    /// `projects/{p}/instances/{i}` the query was prepared for.
    #[prost(string, tag = "1")]
    pub instance: String,
    /// The SQL text.
    #[prost(string, tag = "2")]
    pub query: String,
    /// Declared parameter types, by name (without `@`).
    #[prost(btree_map = "string, message", tag = "3")]
    pub param_types: BTreeMap<String, pb::Type>,
    /// CRC-32C of the encoded `ResultSetMetadata` PrepareQuery answered: ExecuteQuery
    /// refuses to send rows of another shape than the client was told.
    #[prost(uint32, tag = "4")]
    pub metadata_crc: u32,
}

/// Where a resumed ExecuteQuery picks up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePoint {
    /// Rows the client already has.
    pub rows: u64,
    /// CRC-32C of those rows' encoded values.
    pub crc: u32,
}

fn seal(magic: &[u8; 3], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.extend_from_slice(magic);
    out.push(VERSION);
    out.extend_from_slice(&crc32c::checksum(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The payload of an envelope, if `bytes` is one with `magic`.
fn open<'a>(magic: &[u8; 3], bytes: &'a [u8]) -> Option<&'a [u8]> {
    if bytes.len() < HEADER_BYTES || &bytes[..3] != magic || bytes[3] != VERSION {
        return None;
    }
    let crc = u32::from_be_bytes(bytes[4..HEADER_BYTES].try_into().ok()?);
    let payload = &bytes[HEADER_BYTES..];
    (crc32c::checksum(payload) == crc).then_some(payload)
}

impl PreparedQuery {
    /// The token bytes.
    pub fn seal(&self) -> Vec<u8> {
        seal(PREPARED_MAGIC, &self.encode_to_vec())
    }

    /// Reads a token; anything Almanac did not issue is `INVALID_ARGUMENT`.
    pub fn open(bytes: &[u8]) -> Result<Self, Status> {
        let refused = || invalid("prepared_query is not a query prepared by this server");
        let payload = open(PREPARED_MAGIC, bytes).ok_or_else(refused)?;
        Self::decode(payload).map_err(|_| refused())
    }
}

impl ResumePoint {
    /// The token bytes.
    pub fn seal(&self) -> Vec<u8> {
        let mut payload = [0u8; RESUME_PAYLOAD_BYTES];
        payload[..8].copy_from_slice(&self.rows.to_be_bytes());
        payload[8..].copy_from_slice(&self.crc.to_be_bytes());
        seal(RESUME_MAGIC, &payload)
    }

    /// Reads a token; anything Almanac did not issue is `INVALID_ARGUMENT`.
    pub fn open(bytes: &[u8]) -> Result<Self, Status> {
        let refused = || invalid("resume_token is not one this server sent");
        let payload: &[u8; RESUME_PAYLOAD_BYTES] = open(RESUME_MAGIC, bytes)
            .and_then(|p| p.try_into().ok())
            .ok_or_else(refused)?;
        let mut rows = [0u8; 8];
        rows.copy_from_slice(&payload[..8]);
        let mut crc = [0u8; 4];
        crc.copy_from_slice(&payload[8..]);
        Ok(Self {
            rows: u64::from_be_bytes(rows),
            crc: u32::from_be_bytes(crc),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prepared() -> PreparedQuery {
        let mut param_types = BTreeMap::new();
        param_types.insert(
            "k".to_string(),
            pb::Type {
                kind: Some(pb::r#type::Kind::BytesType(pb::r#type::Bytes {
                    encoding: None,
                })),
            },
        );
        PreparedQuery {
            instance: "projects/p/instances/i".into(),
            query: "SELECT _key FROM t WHERE _key = @k".into(),
            param_types,
            metadata_crc: 7,
        }
    }

    #[test]
    fn prepared_queries_round_trip() {
        let p = prepared();
        assert_eq!(PreparedQuery::open(&p.seal()).ok(), Some(p));
    }

    #[test]
    fn garbage_and_tampering_are_refused() {
        let sealed = prepared().seal();
        for bad in [
            &b""[..],
            &b"hello world"[..],
            &sealed[..sealed.len() - 1],
            &ResumePoint { rows: 1, crc: 2 }.seal(),
        ] {
            assert!(PreparedQuery::open(bad).is_err(), "{bad:?}");
        }
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(PreparedQuery::open(&flipped).is_err());
        let mut version = sealed;
        version[3] = 2;
        assert!(PreparedQuery::open(&version).is_err());
    }

    #[test]
    fn resume_points_round_trip() {
        let r = ResumePoint {
            rows: 20_000,
            crc: 0xDEAD_BEEF,
        };
        assert_eq!(ResumePoint::open(&r.seal()).ok(), Some(r));
        assert!(ResumePoint::open(&prepared().seal()).is_err());
        assert!(ResumePoint::open(b"AQR\x01").is_err());
    }
}
