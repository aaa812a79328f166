//! Change streams (`GenerateInitialChangeStreamPartitions`, `ReadChangeStream`) over
//! the engine's change log ([`almanac_engine::changes`]).
//!
//! A table's change stream is one partition, the whole key space. `ReadChangeStream`,
//! step by step:
//! 1. The start: `start_time` (within the retention, not in the future), a
//!    continuation token (the commit timestamp of the last change read, in µs), or now.
//! 2. A task reads up to [`CHANGES_PER_READ`] changes below the low watermark on a
//!    blocking thread and sends one `DataChange` per change (split into several
//!    messages past [`MESSAGE_BYTES`], `SetCell` values chunked past [`VALUE_CHUNK_BYTES`]),
//!    each final message carrying its token and low watermark.
//! 3. With nothing new, it sends a `Heartbeat` every `heartbeat_duration` (default
//!    [`DEFAULT_HEARTBEAT_SECS`]) whose token is the low watermark less one: every
//!    change below the watermark has been sent. It polls every [`POLL_MS`].
//! 4. Past `end_time`, a `CloseStream` with status OK ends the stream; a client that
//!    goes away ends the task.

use std::time::Duration;

use almanac_api::google::bigtable::v2 as pb;
use almanac_api::google::bigtable::v2::read_change_stream_response as rcs;
use almanac_engine::Engine;
use almanac_engine::changes::ChangeRecord;
use almanac_engine::mutation::{AggregateInput, Mutation};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;
use tonic::codegen::BoxStream;

use crate::convert::{micros, timestamp};
use crate::data::blocking;
use crate::names;
use crate::namespaces::DEFAULT_CLUSTER;
use crate::status::{IntoStatus, invalid};

/// Changes read from the engine at a time.
const CHANGES_PER_READ: usize = 1_000;
/// How often a stream with nothing to send looks for new changes.
const POLL_MS: u64 = 50;
/// Heartbeat interval when the request sets none.
const DEFAULT_HEARTBEAT_SECS: i64 = 10;
/// Shortest heartbeat interval a request may ask for.
const MIN_HEARTBEAT_MS: i64 = 100;
/// A change larger than this is split across messages.
const MESSAGE_BYTES: usize = 1024 * 1024;
/// A `SetCell` value larger than this is sent in chunks of this size.
const VALUE_CHUNK_BYTES: usize = 1024 * 1024;
/// Responses a stream buffers before waiting for its client.
const STREAM_DEPTH: usize = 16;

/// The one partition of every change stream: the whole key space.
fn whole_table() -> pb::StreamPartition {
    pb::StreamPartition {
        row_range: Some(pb::RowRange {
            start_key: Some(pb::row_range::StartKey::StartKeyClosed(Bytes::new())),
            end_key: Some(pb::row_range::EndKey::EndKeyOpen(Bytes::new())),
        }),
    }
}

/// Whether `p` is the whole key space (however the client spells it).
fn is_whole_table(p: Option<&pb::StreamPartition>) -> bool {
    use pb::row_range::{EndKey, StartKey};
    let Some(r) = p.and_then(|p| p.row_range.as_ref()) else {
        return true;
    };
    let start = match &r.start_key {
        None => true,
        Some(StartKey::StartKeyClosed(k)) => k.is_empty(),
        Some(StartKey::StartKeyOpen(_)) => false,
    };
    let end = match &r.end_key {
        None => true,
        Some(EndKey::EndKeyOpen(k) | EndKey::EndKeyClosed(k)) => k.is_empty(),
    };
    start && end
}

fn partition_error() -> Status {
    invalid(
        "Almanac streams each table's changes as one partition, the whole key space \
         (start_key_closed \"\", end_key_open \"\"); use the partition \
         GenerateInitialChangeStreamPartitions returns",
    )
}

/// `GenerateInitialChangeStreamPartitions`: the table's one partition.
pub async fn partitions(
    engine: &Engine,
    req: pb::GenerateInitialChangeStreamPartitionsRequest,
) -> Result<BoxStream<pb::GenerateInitialChangeStreamPartitionsResponse>, Status> {
    let name = names::table(&req.table_name)?;
    let engine = engine.clone();
    blocking(move || {
        engine
            .read_changes(&name.instance, &name.table, i64::MAX - 1, 0)
            .status()
    })
    .await?;
    let one = pb::GenerateInitialChangeStreamPartitionsResponse {
        partition: Some(whole_table()),
    };
    Ok(Box::pin(tokio_stream::iter(vec![Ok(one)])))
}

/// `ReadChangeStream`.
pub async fn read(
    engine: &Engine,
    req: pb::ReadChangeStreamRequest,
) -> Result<BoxStream<pb::ReadChangeStreamResponse>, Status> {
    use pb::read_change_stream_request::StartFrom;
    let name = names::table(&req.table_name)?;
    if !is_whole_table(req.partition.as_ref()) {
        return Err(partition_error());
    }
    let now = engine.now_us();
    let after = match &req.start_from {
        None => None,
        Some(StartFrom::StartTime(t)) => {
            let us = micros(t);
            if us > now {
                return Err(invalid("start_time is in the future"));
            }
            Some(us.saturating_sub(1))
        }
        Some(StartFrom::ContinuationTokens(tokens)) => {
            let [token] = tokens.tokens.as_slice() else {
                return Err(invalid(format!(
                    "{} continuation tokens given; a table's stream has one partition, so one token",
                    tokens.tokens.len()
                )));
            };
            if !is_whole_table(token.partition.as_ref()) {
                return Err(partition_error());
            }
            Some(token.token.parse::<i64>().map_err(|_| {
                invalid(format!(
                    "continuation token {:?} is not one this server gave",
                    token.token
                ))
            })?)
        }
    };
    let heartbeat_ms = match &req.heartbeat_duration {
        None => DEFAULT_HEARTBEAT_SECS * 1_000,
        Some(d) => {
            (d.seconds.saturating_mul(1_000) + i64::from(d.nanos) / 1_000_000).max(MIN_HEARTBEAT_MS)
        }
    };
    let end_us = req.end_time.as_ref().map(micros);
    // The first read checks the table, its stream and the start's retention.
    let probe = {
        let (engine, name) = (engine.clone(), name.clone());
        blocking(move || {
            engine
                .read_changes(&name.instance, &name.table, i64::MAX - 1, 0)
                .status()
        })
        .await?
    };
    let after = after.unwrap_or(probe.low_watermark_us.saturating_sub(1));
    if after.saturating_add(1) < probe.retained_from_us {
        return Err(Status::out_of_range(format!(
            "the stream starts at {} µs, before the table's change stream retention \
             (changes are kept from {} µs)",
            after.saturating_add(1),
            probe.retained_from_us
        )));
    }
    let (tx, rx) = mpsc::channel(STREAM_DEPTH);
    let stream = Stream {
        engine: engine.clone(),
        name,
        after,
        end_us,
        heartbeat: Duration::from_millis(heartbeat_ms as u64),
        tx,
    };
    tokio::spawn(stream.run());
    Ok(Box::pin(ReceiverStream::new(rx)))
}

/// One ReadChangeStream in progress.
struct Stream {
    engine: Engine,
    name: names::TableName,
    /// Every change up to here (µs, inclusive) has been sent.
    after: i64,
    end_us: Option<i64>,
    heartbeat: Duration,
    tx: mpsc::Sender<Result<pb::ReadChangeStreamResponse, Status>>,
}

impl Stream {
    async fn run(mut self) {
        let mut last_sent = tokio::time::Instant::now();
        loop {
            let (engine, name, after) = (self.engine.clone(), self.name.clone(), self.after);
            let batch = match blocking(move || {
                engine
                    .read_changes(&name.instance, &name.table, after, CHANGES_PER_READ)
                    .status()
            })
            .await
            {
                Ok(b) => b,
                Err(e) => {
                    let _ = self.tx.send(Err(e)).await;
                    return;
                }
            };
            let full = batch.records.len() >= CHANGES_PER_READ;
            for record in &batch.records {
                if self.end_us.is_some_and(|end| record.commit_us >= end) {
                    self.close().await;
                    return;
                }
                for msg in data_change(record) {
                    if self.tx.send(Ok(msg)).await.is_err() {
                        return;
                    }
                }
                self.after = record.commit_us;
                last_sent = tokio::time::Instant::now();
            }
            if full {
                continue;
            }
            // Every change below the watermark has been sent.
            self.after = self.after.max(batch.low_watermark_us.saturating_sub(1));
            if self
                .end_us
                .is_some_and(|end| self.after.saturating_add(1) >= end)
            {
                self.close().await;
                return;
            }
            if last_sent.elapsed() >= self.heartbeat {
                if self.tx.send(Ok(self.heartbeat_message())).await.is_err() {
                    return;
                }
                last_sent = tokio::time::Instant::now();
            }
            if self.tx.is_closed() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    fn heartbeat_message(&self) -> pb::ReadChangeStreamResponse {
        pb::ReadChangeStreamResponse {
            stream_record: Some(rcs::StreamRecord::Heartbeat(rcs::Heartbeat {
                continuation_token: Some(pb::StreamContinuationToken {
                    partition: Some(whole_table()),
                    token: self.after.to_string(),
                }),
                estimated_low_watermark: Some(timestamp(self.after.saturating_add(1))),
            })),
        }
    }

    async fn close(&self) {
        let close = pb::ReadChangeStreamResponse {
            stream_record: Some(rcs::StreamRecord::CloseStream(rcs::CloseStream {
                status: Some(almanac_api::google::rpc::Status::default()),
                continuation_tokens: Vec::new(),
                new_partitions: Vec::new(),
            })),
        };
        let _ = self.tx.send(Ok(close)).await;
    }
}

/// The messages of one change: one, or several when it is large.
fn data_change(record: &ChangeRecord) -> Vec<pb::ReadChangeStreamResponse> {
    let mut chunks: Vec<rcs::MutationChunk> = Vec::new();
    for m in &record.mutations {
        match m {
            Mutation::SetCell {
                family,
                qualifier,
                timestamp_us,
                value,
            } if value.len() > VALUE_CHUNK_BYTES => {
                let total = i32::try_from(value.len()).unwrap_or(i32::MAX);
                let pieces = value.len().div_ceil(VALUE_CHUNK_BYTES);
                for (i, piece) in value.chunks(VALUE_CHUNK_BYTES).enumerate() {
                    let offset = i * VALUE_CHUNK_BYTES;
                    chunks.push(rcs::MutationChunk {
                        chunk_info: Some(rcs::mutation_chunk::ChunkInfo {
                            chunked_value_size: total,
                            chunked_value_offset: i32::try_from(offset).unwrap_or(i32::MAX),
                            last_chunk: i + 1 == pieces,
                        }),
                        mutation: Some(set_cell(family, qualifier, *timestamp_us, piece)),
                    });
                }
            }
            other => chunks.push(rcs::MutationChunk {
                chunk_info: None,
                mutation: Some(mutation_proto(other)),
            }),
        }
    }
    // Split into messages of about MESSAGE_BYTES.
    let mut groups: Vec<Vec<rcs::MutationChunk>> = vec![Vec::new()];
    let mut bytes = 0usize;
    for c in chunks {
        let n = prost::Message::encoded_len(&c);
        if bytes + n > MESSAGE_BYTES && groups.last().is_some_and(|g| !g.is_empty()) {
            groups.push(Vec::new());
            bytes = 0;
        }
        bytes += n;
        if let Some(g) = groups.last_mut() {
            g.push(c);
        }
    }
    let kind = if record.garbage_collection {
        rcs::data_change::Type::GarbageCollection
    } else {
        rcs::data_change::Type::User
    };
    let last = groups.len() - 1;
    groups
        .into_iter()
        .enumerate()
        .map(|(i, chunks)| {
            let first = i == 0;
            let done = i == last;
            let change = rcs::DataChange {
                r#type: if first {
                    kind as i32
                } else {
                    rcs::data_change::Type::Continuation as i32
                },
                source_cluster_id: if first && !record.garbage_collection {
                    DEFAULT_CLUSTER.to_owned()
                } else {
                    String::new()
                },
                row_key: if first {
                    Bytes::copy_from_slice(&record.row_key)
                } else {
                    Bytes::new()
                },
                commit_timestamp: first.then(|| timestamp(record.commit_us)),
                tiebreaker: 0,
                chunks,
                done,
                token: if done {
                    record.commit_us.to_string()
                } else {
                    String::new()
                },
                estimated_low_watermark: done.then(|| timestamp(record.commit_us)),
            };
            pb::ReadChangeStreamResponse {
                stream_record: Some(rcs::StreamRecord::DataChange(change)),
            }
        })
        .collect()
}

fn set_cell(family: &str, qualifier: &[u8], ts: i64, value: &[u8]) -> pb::Mutation {
    pb::Mutation {
        mutation: Some(pb::mutation::Mutation::SetCell(pb::mutation::SetCell {
            family_name: family.to_owned(),
            column_qualifier: Bytes::copy_from_slice(qualifier),
            timestamp_micros: ts,
            value: Bytes::copy_from_slice(value),
        })),
        ..pb::Mutation::default()
    }
}

fn value(kind: pb::value::Kind) -> Option<pb::Value> {
    Some(pb::Value {
        kind: Some(kind),
        ..pb::Value::default()
    })
}

fn input(i: &AggregateInput) -> Option<pb::Value> {
    value(match i {
        AggregateInput::Int(n) => pb::value::Kind::IntValue(*n),
        AggregateInput::Bytes(b) => pb::value::Kind::RawValue(Bytes::copy_from_slice(b)),
    })
}

/// A mutation as the Data API spells it.
fn mutation_proto(m: &Mutation) -> pb::Mutation {
    use pb::mutation::Mutation as M;
    let m = match m {
        Mutation::SetCell {
            family,
            qualifier,
            timestamp_us,
            value,
        } => return set_cell(family, qualifier, *timestamp_us, value),
        Mutation::DeleteFromColumn {
            family,
            qualifier,
            start_us,
            end_us,
        } => M::DeleteFromColumn(pb::mutation::DeleteFromColumn {
            family_name: family.clone(),
            column_qualifier: Bytes::copy_from_slice(qualifier),
            time_range: Some(pb::TimestampRange {
                start_timestamp_micros: *start_us,
                end_timestamp_micros: end_us.unwrap_or(0),
            }),
        }),
        Mutation::DeleteFromFamily { family } => {
            M::DeleteFromFamily(pb::mutation::DeleteFromFamily {
                family_name: family.clone(),
            })
        }
        Mutation::DeleteFromRow => M::DeleteFromRow(pb::mutation::DeleteFromRow {}),
        Mutation::AddToCell {
            family,
            qualifier,
            timestamp_us,
            input: i,
        } => M::AddToCell(pb::mutation::AddToCell {
            family_name: family.clone(),
            column_qualifier: value(pb::value::Kind::RawValue(Bytes::copy_from_slice(qualifier))),
            timestamp: value(pb::value::Kind::RawTimestampMicros(*timestamp_us)),
            input: input(i),
        }),
        Mutation::MergeToCell {
            family,
            qualifier,
            timestamp_us,
            input: i,
        } => M::MergeToCell(pb::mutation::MergeToCell {
            family_name: family.clone(),
            column_qualifier: value(pb::value::Kind::RawValue(Bytes::copy_from_slice(qualifier))),
            timestamp: value(pb::value::Kind::RawTimestampMicros(*timestamp_us)),
            input: input(i),
        }),
    };
    pb::Mutation {
        mutation: Some(m),
        ..pb::Mutation::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]
    use super::*;

    #[test]
    fn large_changes_split_into_chunks_and_messages() {
        let big = vec![7u8; 2 * VALUE_CHUNK_BYTES + 5];
        let record = ChangeRecord {
            commit_us: 42,
            row_key: b"r".to_vec(),
            garbage_collection: false,
            mutations: vec![
                Mutation::DeleteFromRow,
                Mutation::SetCell {
                    family: "cf".into(),
                    qualifier: b"q".to_vec(),
                    timestamp_us: 1,
                    value: big.clone(),
                },
            ],
        };
        let msgs = data_change(&record);
        assert!(msgs.len() >= 3, "{} messages", msgs.len());
        let mut value = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            let Some(rcs::StreamRecord::DataChange(c)) = &m.stream_record else {
                panic!("not a data change");
            };
            assert_eq!(c.done, i + 1 == msgs.len());
            assert_eq!(c.row_key.is_empty(), i > 0);
            for chunk in &c.chunks {
                if let Some(pb::mutation::Mutation::SetCell(s)) =
                    chunk.mutation.as_ref().and_then(|m| m.mutation.as_ref())
                {
                    value.extend_from_slice(&s.value);
                }
            }
            if c.done {
                assert_eq!(c.token, "42");
            }
        }
        assert_eq!(value, big);
    }

    #[test]
    fn only_the_whole_key_space_is_a_partition() {
        assert!(is_whole_table(None));
        assert!(is_whole_table(Some(&whole_table())));
        let part = pb::StreamPartition {
            row_range: Some(pb::RowRange {
                start_key: Some(pb::row_range::StartKey::StartKeyClosed(Bytes::from("a"))),
                end_key: None,
            }),
        };
        assert!(!is_whole_table(Some(&part)));
    }
}
