//! The merger against Google's ReadRows acceptance cases (`tests/data/readrows.json`),
//! and a few cases of our own.

#![expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]

use std::sync::Arc;

use prost::bytes::Bytes;
use serde_json::Value;

use super::{MergeError, RowMerger};
use almanac_api::google::bigtable::v2::ReadRowsResponse;
use almanac_api::google::bigtable::v2::read_rows_response::CellChunk;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use almanac_engine::{Cell, Row};

/// Google's acceptance cases, vendored (see `tests/data/README.md`).
const CASES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/readrows.json"
));

/// Standard base64 (with `=` padding), as proto3 JSON writes bytes.
fn base64(text: &str) -> Vec<u8> {
    let sextet = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => unreachable!("not base64: {text:?}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(sextet).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for group in digits.chunks(4) {
        let bits = group
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &d)| acc | u32::from(d) << (18 - 6 * i));
        out.extend_from_slice(&bits.to_be_bytes()[1..group.len()]);
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64(""), b"");
    assert_eq!(base64("Uks="), b"RK");
    assert_eq!(base64("UktfMQ=="), b"RK_1");
    assert_eq!(base64("dmFsdWUtVkFM"), b"value-VAL");
}

/// A `CellChunk` from its proto3 JSON form; an unknown field fails the test.
fn chunk_from_json(json: &Value) -> CellChunk {
    let mut chunk = CellChunk::default();
    for (name, v) in json.as_object().unwrap() {
        match name.as_str() {
            "rowKey" => chunk.row_key = base64(v.as_str().unwrap()).into(),
            "familyName" => chunk.family_name = Some(v.as_str().unwrap().to_owned()),
            "qualifier" => chunk.qualifier = Some(base64(v.as_str().unwrap())),
            "timestampMicros" => chunk.timestamp_micros = v.as_str().unwrap().parse().unwrap(),
            "labels" => {
                chunk.labels = v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_str().unwrap().to_owned())
                    .collect();
            }
            "value" => chunk.value = base64(v.as_str().unwrap()).into(),
            "valueSize" => chunk.value_size = i32::try_from(v.as_i64().unwrap()).unwrap(),
            "commitRow" => chunk.row_status = Some(RowStatus::CommitRow(v.as_bool().unwrap())),
            "resetRow" => chunk.row_status = Some(RowStatus::ResetRow(v.as_bool().unwrap())),
            other => unreachable!("unknown CellChunk field {other:?}"),
        }
    }
    chunk
}

/// A case's expected rows (its results, one per cell, grouped by row key), and
/// whether it ends with an error.
fn expected_rows(results: &[Value]) -> (Vec<Row>, bool) {
    let mut rows: Vec<Row> = Vec::new();
    for result in results {
        if result["error"].as_bool() == Some(true) {
            return (rows, true);
        }
        let text = |field: &str| result[field].as_str().unwrap_or_default().to_owned();
        let key = text("rowKey").into_bytes();
        let cell = Cell {
            family: Arc::from(text("familyName")),
            qualifier: Arc::from(text("qualifier").into_bytes()),
            timestamp_us: result["timestampMicros"]
                .as_str()
                .map_or(0, |t| t.parse().unwrap()),
            value: text("value").into_bytes(),
            labels: Some(text("label"))
                .filter(|l| !l.is_empty())
                .into_iter()
                .collect(),
        };
        match rows.last_mut() {
            Some(row) if row.key == key => row.cells.push(cell),
            _ => rows.push(Row {
                key,
                cells: vec![cell],
            }),
        }
    }
    (rows, false)
}

/// The rows a merger makes of `responses` and how the stream ended: the first
/// error from `push` or `finish`.
fn merge(reversed: bool, responses: Vec<ReadRowsResponse>) -> (Vec<Row>, Result<(), MergeError>) {
    let mut merger = RowMerger::new(reversed);
    let mut rows = Vec::new();
    for resp in responses {
        if let Err(e) = merger.push(resp, &mut rows) {
            return (rows, Err(e));
        }
    }
    let end = merger.finish();
    (rows, end)
}

/// A response of `chunks`.
fn response(chunks: Vec<CellChunk>) -> ReadRowsResponse {
    ReadRowsResponse {
        chunks,
        ..ReadRowsResponse::default()
    }
}

#[test]
fn google_acceptance_cases() {
    let file: Value = serde_json::from_str(CASES).unwrap();
    let cases = file["readRowsTests"].as_array().unwrap();
    assert_eq!(cases.len(), 48, "the vendored file has changed");
    for case in cases {
        let name = case["description"].as_str().unwrap();
        let chunks: Vec<CellChunk> = case["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(chunk_from_json)
            .collect();
        let results = case["results"].as_array().map_or(&[][..], Vec::as_slice);
        let (want, want_error) = expected_rows(results);
        // All the chunks in one response, then each in a response of its own.
        let one = vec![response(chunks.clone())];
        let many = chunks.into_iter().map(|c| response(vec![c])).collect();
        for (framing, responses) in [("one response", one), ("a response each", many)] {
            let (got, end) = merge(false, responses);
            assert_eq!(got, want, "{name} ({framing}): rows");
            assert_eq!(end.is_err(), want_error, "{name} ({framing}): {end:?}");
        }
    }
}

/// A chunk that starts a cell of row `key` (empty: the row in progress).
fn chunk(key: &str, family: Option<&str>, qualifier: Option<&str>, value: &str) -> CellChunk {
    CellChunk {
        row_key: Bytes::copy_from_slice(key.as_bytes()),
        family_name: family.map(str::to_owned),
        qualifier: qualifier.map(|q| q.as_bytes().to_vec()),
        timestamp_micros: 1_000,
        value: Bytes::copy_from_slice(value.as_bytes()),
        ..CellChunk::default()
    }
}

/// `c` with `commit_row` set.
fn committed(mut c: CellChunk) -> CellChunk {
    c.row_status = Some(RowStatus::CommitRow(true));
    c
}

/// A complete one-cell row `key`.
fn row(key: &str) -> CellChunk {
    committed(chunk(key, Some("f"), Some("q"), "v"))
}

/// A response carrying only `last_scanned_row_key`.
fn scanned(key: &str) -> ReadRowsResponse {
    ReadRowsResponse {
        last_scanned_row_key: Bytes::copy_from_slice(key.as_bytes()),
        ..ReadRowsResponse::default()
    }
}

/// The keys of `rows`, as text.
fn keys(rows: &[Row]) -> Vec<String> {
    rows.iter()
        .map(|r| String::from_utf8_lossy(&r.key).into_owned())
        .collect()
}

#[test]
fn reversed_reads_want_descending_keys() {
    let (rows, end) = merge(true, vec![response(vec![row("c"), row("b"), row("a")])]);
    assert_eq!(
        (keys(&rows), end),
        (vec!["c".into(), "b".into(), "a".into()], Ok(()))
    );

    let (rows, end) = merge(true, vec![response(vec![row("b"), row("c")])]);
    assert_eq!(keys(&rows), ["b"]);
    assert!(end.unwrap_err().0.contains("out of order"));

    // A repeated key is out of order either way.
    for reversed in [false, true] {
        let (rows, end) = merge(reversed, vec![response(vec![row("b"), row("b")])]);
        assert_eq!(keys(&rows), ["b"]);
        assert!(end.is_err());
    }
    // And a forward read rejects what a reversed one accepts.
    let (_, end) = merge(false, vec![response(vec![row("c"), row("b")])]);
    assert!(end.is_err());
}

#[test]
fn last_scanned_row_key_moves_the_resume_point() {
    let mut merger = RowMerger::new(false);
    let mut rows = Vec::new();
    assert_eq!(merger.resume_key(), None);
    merger.push(scanned("a"), &mut rows).unwrap();
    assert_eq!(merger.resume_key(), Some(&b"a"[..]));
    merger.push(response(vec![row("b")]), &mut rows).unwrap();
    assert_eq!(merger.resume_key(), Some(&b"b"[..]));
    merger.push(scanned("m"), &mut rows).unwrap();
    assert_eq!(merger.resume_key(), Some(&b"m"[..]));
    // The same key again changes nothing; an earlier one is an error.
    merger.push(scanned("m"), &mut rows).unwrap();
    assert!(merger.push(scanned("c"), &mut rows).is_err());
    assert_eq!(merger.resume_key(), Some(&b"m"[..]));
    // Rows must come after the scanned key, not only after the last row.
    assert!(merger.push(response(vec![row("c")]), &mut rows).is_err());
    merger.push(response(vec![row("n")]), &mut rows).unwrap();
    assert_eq!(keys(&rows), ["b", "n"]);
    assert_eq!(merger.resume_key(), Some(&b"n"[..]));
    merger.finish().unwrap();

    // In a reversed read the resume point moves down.
    let mut merger = RowMerger::new(true);
    merger.push(response(vec![row("x")]), &mut rows).unwrap();
    merger.push(scanned("p"), &mut rows).unwrap();
    assert_eq!(merger.resume_key(), Some(&b"p"[..]));
    assert!(merger.push(scanned("q"), &mut rows).is_err());

    // Chunks first, then the response's last_scanned_row_key.
    let mut merger = RowMerger::new(false);
    let mut resp = scanned("z");
    resp.chunks = vec![row("k")];
    merger.push(resp, &mut rows).unwrap();
    assert_eq!(merger.resume_key(), Some(&b"z"[..]));

    // A scanned key while a row is open is an error.
    let mut merger = RowMerger::new(false);
    let mut resp = scanned("z");
    resp.chunks = vec![chunk("k", Some("f"), Some("q"), "v")];
    assert!(merger.push(resp, &mut rows).is_err());
}

#[test]
fn discard_partial_then_a_new_row() {
    let mut merger = RowMerger::new(false);
    let mut rows = Vec::new();
    merger.push(response(vec![row("a")]), &mut rows).unwrap();
    // Row "b" breaks off in the middle of a split value.
    let mut split = chunk("b", Some("f"), Some("q"), "par");
    split.value_size = 7;
    merger.push(response(vec![split]), &mut rows).unwrap();
    assert!(merger.finish().is_err());
    merger.discard_partial();
    merger.finish().unwrap();
    assert_eq!(merger.resume_key(), Some(&b"a"[..]));
    // The retry sends "b" again from its start; the order check still holds.
    assert!(merger.push(response(vec![row("a")]), &mut rows).is_err());
    merger
        .push(
            response(vec![committed(chunk("b", Some("g"), Some("r"), "whole"))]),
            &mut rows,
        )
        .unwrap();
    merger.finish().unwrap();
    assert_eq!(keys(&rows), ["a", "b"]);
    assert_eq!(rows[1].cells.len(), 1);
    assert_eq!(&*rows[1].cells[0].family, "g");
    assert_eq!(rows[1].cells[0].value, b"whole");
}

#[test]
fn cells_share_family_and_qualifier_allocations() {
    let responses = vec![response(vec![
        chunk("a", Some("f"), Some("q"), "1"),
        chunk("", None, None, "2"),
        chunk("", Some("f"), Some("q"), "3"),
        chunk("", None, Some("r"), "4"),
        committed(chunk("", Some("g"), Some("r"), "5")),
        committed(chunk("b", Some("g"), Some("r"), "6")),
    ])];
    let (rows, end) = merge(false, responses);
    end.unwrap();
    let cells: Vec<&Cell> = rows.iter().flat_map(|r| &r.cells).collect();
    let families: Vec<&str> = cells.iter().map(|c| &*c.family).collect();
    assert_eq!(families, ["f", "f", "f", "f", "g", "g"]);
    let qualifiers: Vec<&[u8]> = cells.iter().map(|c| &*c.qualifier).collect();
    assert_eq!(qualifiers, [b"q", b"q", b"q", b"r", b"r", b"r"]);
    // One allocation per run of the same name, across rows too.
    assert!(Arc::ptr_eq(&cells[0].family, &cells[1].family));
    assert!(Arc::ptr_eq(&cells[0].family, &cells[2].family));
    assert!(Arc::ptr_eq(&cells[0].family, &cells[3].family));
    assert!(!Arc::ptr_eq(&cells[3].family, &cells[4].family));
    assert!(Arc::ptr_eq(&cells[4].family, &cells[5].family));
    assert!(Arc::ptr_eq(&cells[0].qualifier, &cells[2].qualifier));
    assert!(Arc::ptr_eq(&cells[3].qualifier, &cells[4].qualifier));
    assert!(Arc::ptr_eq(&cells[3].qualifier, &cells[5].qualifier));
}

#[test]
fn bad_value_sizes_are_errors_not_panics() {
    let mut negative = chunk("a", Some("f"), Some("q"), "v");
    negative.value_size = -1;
    let (_, end) = merge(false, vec![response(vec![committed(negative)])]);
    assert!(end.unwrap_err().0.contains("negative value_size"));

    // A huge announced size pre-allocates only so much, and the value is what came.
    let mut huge = chunk("a", Some("f"), Some("q"), "he");
    huge.value_size = i32::MAX;
    let rest = committed(CellChunk {
        value: Bytes::from_static(b"llo"),
        ..CellChunk::default()
    });
    let (rows, end) = merge(false, vec![response(vec![huge]), response(vec![rest])]);
    end.unwrap();
    assert_eq!(rows[0].cells[0].value, b"hello");
    assert_eq!(rows[0].cells[0].timestamp_us, 1_000);
}
