//! The store calls the time-series layer does not make itself, ReadModifyWriteRow and
//! SampleRowKeys, answer over a remote Bigtable (an Almanac node in this process) as
//! over the embedded engine.
#![expect(
    clippy::expect_used,
    reason = "a test should stop loudly at the first surprise"
)]

mod common;

use std::sync::Arc;

use almanac_engine::mutation::{Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::schema::GcRule;
use almanac_engine::{Durability, Engine, Options, Row, RowMutations};
use almanac_remote::RemoteStore;
use almanac_timeseries::{EmbeddedStore, SharedStore, WideColumnStore};

use common::{Backend, Dir};

const INSTANCE: &str = "projects/remote/instances/calls";

/// A row's cells as (family, qualifier, value): the stores stamp them at their own
/// clocks.
type Values = Vec<(String, Vec<u8>, Vec<u8>)>;
/// `(row key, bytes before it)` samples.
type Samples = Vec<(Vec<u8>, u64)>;

fn values(row: &Row) -> Values {
    row.cells
        .iter()
        .map(|c| (c.family.to_string(), c.qualifier.to_vec(), c.value.clone()))
        .collect()
}

/// The same calls on `store`: what ReadModifyWriteRow answered, and the samples.
fn exercise(store: &SharedStore) -> (Vec<Values>, Samples) {
    store
        .create_table("t", &[("cf", GcRule::MaxVersions(3))])
        .expect("create");
    let rows: Vec<RowMutations> = (0..2000)
        .map(|i| RowMutations {
            key: format!("row{i:05}").into_bytes(),
            mutations: vec![Mutation::SetCell {
                family: "cf".into(),
                qualifier: b"v".to_vec(),
                timestamp_us: 1_000,
                value: vec![b'x'; 4096],
            }],
        })
        .collect();
    for r in store.mutate_rows("t", &rows).expect("mutate") {
        r.expect("row");
    }
    let rule = |qualifier: &[u8], op| ReadModifyWriteRule {
        family: "cf".into(),
        qualifier: qualifier.to_vec(),
        op,
    };
    let mut answers = Vec::new();
    for _ in 0..2 {
        let row = store
            .read_modify_write(
                "t",
                b"counter",
                &[
                    rule(b"n", ReadModifyWriteOp::Increment(5)),
                    rule(b"s", ReadModifyWriteOp::Append(b"ab".to_vec())),
                ],
            )
            .expect("read-modify-write");
        assert_eq!(row.key, b"counter");
        answers.push(values(&row));
    }
    let samples = store.sample_row_keys("t").expect("sample");
    (answers, samples)
}

#[test]
fn read_modify_write_and_samples_answer_as_the_engine_does() {
    let backend = Backend::start();
    let remote: SharedStore =
        Arc::new(RemoteStore::connect(INSTANCE, &backend.addr.to_string()).expect("connect"));
    let dir = Dir::new("calls");
    let engine = Engine::open(
        &dir.0,
        Options {
            durability: Durability::None,
            sweep_interval: None,
            ..Options::default()
        },
    )
    .expect("engine");
    let embedded: SharedStore = Arc::new(EmbeddedStore::new(Arc::new(engine), INSTANCE));

    let (remote_answers, remote_samples) = exercise(&remote);
    let (embedded_answers, embedded_samples) = exercise(&embedded);
    assert_eq!(remote_answers, embedded_answers);
    assert_eq!(
        remote_answers[1],
        vec![
            (
                "cf".to_string(),
                b"n".to_vec(),
                10i64.to_be_bytes().to_vec()
            ),
            ("cf".to_string(), b"s".to_vec(), b"abab".to_vec()),
        ],
        "the second call adds to and appends to the first's cells"
    );
    // The same split keys; sizes as each engine stores them (within 1%).
    let keys = |s: &[(Vec<u8>, u64)]| s.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(keys(&remote_samples), keys(&embedded_samples));
    for ((_, a), (_, b)) in remote_samples.iter().zip(&embedded_samples) {
        assert!(a.abs_diff(*b) * 100 <= *b, "offsets {a} and {b}");
    }
    assert!(
        remote_samples.len() > 2,
        "8 MB of rows split: {remote_samples:?}"
    );
    let (last, total) = remote_samples.last().expect("a last sample");
    assert!(last.is_empty() && *total > 8_000_000, "{last:?} {total}");
    assert!(
        remote_samples.windows(2).all(|w| w[0].1 < w[1].1),
        "offsets grow"
    );
}
