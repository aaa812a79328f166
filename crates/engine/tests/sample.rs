//! SampleRowKeys sizes: offsets count every cell's key and value, also values stored
//! apart from their keys (blobs), which the sampler sizes from the index unread.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod common;

use almanac_engine::Durability;
use almanac_engine::clock::Rng;
use almanac_engine::mutation::Mutation;
use almanac_engine::rowset::RowRange;
use almanac_engine::sample::SAMPLE_PIECE_BYTES;
use almanac_engine::schema::{FamilySpec, TableSpec};
use common::ScratchEngine;

const I: &str = "projects/p/instances/sample";

/// Incompressible bytes, so the stored size is the written size.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let rng = Rng::new(seed);
    (0..n.div_ceil(8))
        .flat_map(|_| rng.next_u64().to_le_bytes())
        .take(n)
        .collect()
}

#[test]
fn offsets_count_large_and_small_values() {
    let e = ScratchEngine::quiet("sample", Durability::None);
    let spec = TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        ..TableSpec::default()
    };
    e.create_table(I, "t", spec).unwrap();
    // 24 rows of 1 MiB (blobs) between rows of 100 bytes (inline).
    let mut written = 0u64;
    for i in 0..48u64 {
        let len = if i % 2 == 0 { 1 << 20 } else { 100 };
        let set = Mutation::SetCell {
            family: "cf".into(),
            qualifier: b"q".to_vec(),
            timestamp_us: 1000,
            value: noise(len, i + 1),
        };
        e.mutate_row(I, "t", format!("r{i:03}").as_bytes(), &[set])
            .unwrap();
        written += len as u64;
    }
    for flushed in [false, true] {
        if flushed {
            e.flush().unwrap();
        }
        let samples = e.sample_row_keys(I, "t", &RowRange::all()).unwrap();
        let (last_key, total) = samples.last().unwrap();
        assert!(last_key.is_empty(), "{samples:?}");
        // Values, plus a key of a few dozen bytes per cell.
        assert!(
            *total >= written && *total <= written + 48 * 100,
            "flushed {flushed}: total {total}, values {written}"
        );
        // One sample at least every SAMPLE_PIECE_BYTES + one row.
        let pieces = written / (SAMPLE_PIECE_BYTES + (1 << 20));
        assert!(
            samples.len() as u64 > pieces,
            "flushed {flushed}: {} samples",
            samples.len()
        );
        let offsets: Vec<u64> = samples.iter().map(|(_, o)| *o).collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{offsets:?}");
    }
}

#[test]
fn a_small_table_samples_its_last_row_then_the_empty_key() {
    let e = ScratchEngine::quiet("sample-small", Durability::None);
    let spec = TableSpec {
        families: vec![("cf".into(), FamilySpec::default())],
        ..TableSpec::default()
    };
    e.create_table(I, "t", spec).unwrap();
    assert_eq!(
        e.sample_row_keys(I, "t", &RowRange::all()).unwrap(),
        vec![(Vec::new(), 0)],
        "an empty table has only the end"
    );
    for key in ["a", "b", "c"] {
        let set = Mutation::SetCell {
            family: "cf".into(),
            qualifier: b"q".to_vec(),
            timestamp_us: 1000,
            value: noise(100, 7),
        };
        e.mutate_row(I, "t", key.as_bytes(), &[set]).unwrap();
    }
    let samples = e.sample_row_keys(I, "t", &RowRange::all()).unwrap();
    let keys: Vec<&[u8]> = samples.iter().map(|(k, _)| k.as_slice()).collect();
    assert_eq!(keys, [&b"c"[..], b""], "{samples:?}");
    // `c`'s offset counts the rows before it: two of the three equal rows.
    let (before_c, total) = (samples[0].1, samples[1].1);
    assert!(before_c > 0 && before_c * 3 == total * 2, "{samples:?}");
}
