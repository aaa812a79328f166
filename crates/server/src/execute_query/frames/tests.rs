#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use prost::Message;

use super::*;

fn int(i: i64) -> pb::Value {
    pb::Value {
        r#type: None,
        kind: Some(pb::value::Kind::IntValue(i)),
    }
}

fn blob(len: usize, fill: u8) -> pb::Value {
    pb::Value {
        r#type: None,
        kind: Some(pb::value::Kind::BytesValue(Bytes::from(vec![fill; len]))),
    }
}

/// Two columns: (i, -i) for i in `rows`.
fn columns(rows: std::ops::Range<i64>) -> Vec<Vec<pb::Value>> {
    vec![
        rows.clone().map(int).collect(),
        rows.map(|i| int(-i)).collect(),
    ]
}

fn frame(resume: Option<ResumePoint>, input: &[Vec<Vec<pb::Value>>]) -> Vec<pb::PartialResultSet> {
    let mut framer = Framer::new(resume);
    let mut out = Vec::new();
    for cols in input {
        framer.push(cols, &mut out).unwrap();
    }
    framer.finish(&mut out).unwrap();
    out
}

fn data(m: &pb::PartialResultSet) -> &[u8] {
    match &m.partial_rows {
        Some(pb::partial_result_set::PartialRows::ProtoRowsBatch(b)) => &b.batch_data,
        None => &[],
    }
}

/// Checks the protocol the way the client does and returns the values of each batch.
fn batches(messages: &[pb::PartialResultSet]) -> Vec<Vec<pb::Value>> {
    let mut out = Vec::new();
    let mut buffer = Vec::new();
    for m in messages {
        buffer.extend_from_slice(data(m));
        match m.batch_checksum {
            Some(crc) => {
                assert_eq!(crc, crc32c::checksum(&buffer), "batch checksum");
                assert!(!m.resume_token.is_empty(), "a closed batch carries a token");
                out.push(pb::ProtoRows::decode(&buffer[..]).unwrap().values);
                buffer.clear();
            }
            None => assert!(m.resume_token.is_empty() || data(m).is_empty()),
        }
        assert!(data(m).len() <= MESSAGE_MAX_BYTES);
    }
    assert!(buffer.is_empty(), "data left without a checksum");
    out
}

#[test]
fn rows_close_batches_by_count() {
    let messages = frame(None, &[columns(0..1_500), columns(1_500..2_500)]);
    let got = batches(&messages);
    assert_eq!(
        got.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2 * BATCH_MAX_ROWS, 2 * BATCH_MAX_ROWS, 1_000]
    );
    let values: Vec<pb::Value> = got.into_iter().flatten().collect();
    assert_eq!(values[0], int(0));
    assert_eq!(values[1], int(0));
    assert_eq!(values[4_998], int(2_499));
    assert_eq!(values[4_999], int(-2_499));
    assert!(messages.iter().all(|m| !m.reset));
}

#[test]
fn large_batches_split_across_messages() {
    let row_bytes = 300 * 1024;
    let cols = vec![(0..20).map(|i| blob(row_bytes, i as u8)).collect()];
    let messages = frame(None, &[cols]);
    let got = batches(&messages);
    let per_batch = BATCH_TARGET_BYTES.div_ceil(row_bytes + 8);
    assert_eq!(got[0].len(), per_batch);
    assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 20);
    assert!(
        messages.len() > got.len(),
        "a batch over {MESSAGE_MAX_BYTES} bytes is split"
    );
    let first_len: usize = messages
        .iter()
        .take_while(|m| m.batch_checksum.is_none())
        .chain(messages.iter().find(|m| m.batch_checksum.is_some()))
        .map(|m| data(m).len())
        .sum();
    assert_eq!(messages[0].estimated_batch_size as usize, first_len);
    assert_eq!(messages[1].estimated_batch_size, 0);
}

#[test]
fn resuming_skips_what_the_client_has() {
    let input = [columns(0..2_500)];
    let first = frame(None, &input);
    let token = &first
        .iter()
        .find(|m| !m.resume_token.is_empty())
        .unwrap()
        .resume_token;
    let point = ResumePoint::open(token).unwrap();
    assert_eq!(point.rows, BATCH_MAX_ROWS as u64);
    let resumed = frame(Some(point), &input);
    assert!(
        resumed[0].reset,
        "the first message of a resumed call resets"
    );
    assert!(resumed[1..].iter().all(|m| !m.reset));
    let rest: Vec<pb::Value> = batches(&resumed).into_iter().flatten().collect();
    assert_eq!(rest.len(), 2 * 1_500);
    assert_eq!(rest[0], int(1_000));
    // The final token resumes to nothing: the token again, alone.
    let last = ResumePoint::open(&first.last().unwrap().resume_token).unwrap();
    let sentinel = frame(Some(last), &input);
    assert_eq!(sentinel.len(), 1);
    assert!(sentinel[0].reset && data(&sentinel[0]).is_empty());
    assert_eq!(ResumePoint::open(&sentinel[0].resume_token).unwrap(), last);
}

#[test]
fn resuming_over_changed_rows_fails() {
    let first = frame(None, &[columns(0..2_000)]);
    let point = ResumePoint::open(&first[0].resume_token).unwrap();
    // Different rows before the resume point.
    let mut framer = Framer::new(Some(point));
    let err = framer
        .push(&columns(1..2_001), &mut Vec::new())
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    // Fewer rows than the client already has.
    let mut framer = Framer::new(Some(point));
    framer.push(&columns(0..10), &mut Vec::new()).unwrap();
    let err = framer.finish(&mut Vec::new()).unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
}

#[test]
fn nulls_and_empty_results() {
    let messages = frame(None, &[vec![vec![pb::Value::default(), int(1)]]]);
    assert_eq!(batches(&messages), vec![vec![pb::Value::default(), int(1)]]);
    assert!(frame(None, &[]).is_empty());
    assert!(frame(None, &[vec![vec![]]]).is_empty());
}
