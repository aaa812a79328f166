//! MutateRows against the remote Bigtable: batches within the service's mutation limit,
//! one result per entry, and retries of the entries that failed with a retryable status
//! and are idempotent (a server timestamp or an aggregate input is never sent twice).

use almanac_api::google::bigtable::v2 as data;
use almanac_engine::limits::MAX_MUTATIONS_PER_REQUEST;
use almanac_engine::{Error, RowMutations};
use almanac_timeseries::StoreResult;
use tonic::{Code, Status};

use crate::retry::{self, ATTEMPT_TIMEOUT, Backoff, Call};
use crate::store::{DataClient, routed};
use crate::wire;

/// Applies `rows` (each entry atomically) and returns one result per entry, in order.
pub(crate) async fn mutate_rows(
    client: DataClient,
    table_name: String,
    rows: Vec<RowMutations>,
) -> StoreResult<Vec<StoreResult<()>>> {
    let call = Call {
        rpc: "MutateRows",
        table: table_name.clone(),
    };
    let entries: Vec<data::mutate_rows_request::Entry> = rows
        .iter()
        .map(|r| data::mutate_rows_request::Entry {
            row_key: r.key.clone().into(),
            mutations: r.mutations.iter().map(wire::mutation).collect(),
            ..Default::default()
        })
        .collect();
    let idempotent: Vec<bool> = rows
        .iter()
        .map(|r| r.mutations.iter().all(wire::idempotent))
        .collect();
    let mut results: Vec<Option<Result<(), Status>>> = vec![None; entries.len()];
    for batch in batches(&rows) {
        send_batch(
            &client,
            &table_name,
            &entries,
            &idempotent,
            batch,
            &mut results,
        )
        .await;
    }
    // A table that does not exist fails the whole call, as on one node.
    if let Some(Some(Err(s))) = results.first()
        && s.code() == Code::NotFound
        && results.iter().all(|r| matches!(r, Some(Err(_))))
    {
        return Err(retry::store_error(s, &call));
    }
    Ok(results
        .into_iter()
        .map(|r| match r {
            Some(Ok(())) => Ok(()),
            Some(Err(s)) => Err(retry::store_error(&s, &call)),
            None => Err(Error::Storage(format!(
                "remote Bigtable: MutateRows on {table_name} gave no result for an entry"
            ))),
        })
        .collect())
}

/// Index ranges of `rows` whose mutations fit one request.
fn batches(rows: &[RowMutations]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut count) = (0, 0);
    for (i, r) in rows.iter().enumerate() {
        let n = r.mutations.len().max(1);
        if count + n > MAX_MUTATIONS_PER_REQUEST && i > start {
            out.push(start..i);
            (start, count) = (i, 0);
        }
        count += n;
    }
    if start < rows.len() {
        out.push(start..rows.len());
    }
    out
}

/// Sends one batch, then again the entries that may be retried, until each has a
/// result or the tries are used.
async fn send_batch(
    client: &DataClient,
    table_name: &str,
    entries: &[data::mutate_rows_request::Entry],
    idempotent: &[bool],
    batch: std::ops::Range<usize>,
    results: &mut [Option<Result<(), Status>>],
) {
    let mut pending: Vec<usize> = batch.collect();
    let mut backoff = Backoff::new();
    loop {
        let request = data::MutateRowsRequest {
            table_name: table_name.to_string(),
            entries: pending.iter().map(|&i| entries[i].clone()).collect(),
            ..Default::default()
        };
        let failure = one_try(client.clone(), request, table_name, &pending, results).await;
        // Entries without a result share the call's failure.
        for &i in &pending {
            if results[i].is_none() {
                results[i] = Some(Err(failure.clone().unwrap_or_else(|| {
                    Status::internal("the stream ended without this entry's result")
                })));
            }
        }
        let again: Vec<usize> = pending
            .iter()
            .copied()
            .filter(|&i| {
                idempotent[i] && matches!(&results[i], Some(Err(s)) if retry::retryable(s))
            })
            .collect();
        if again.is_empty() {
            return;
        }
        match backoff.next_wait() {
            Some(wait) => tokio::time::sleep(wait).await,
            None => return,
        }
        for &i in &again {
            results[i] = None;
        }
        pending = again;
    }
}

/// One MutateRows call: records each entry's status; returns the call's own failure.
async fn one_try(
    mut client: DataClient,
    request: data::MutateRowsRequest,
    table_name: &str,
    pending: &[usize],
    results: &mut [Option<Result<(), Status>>],
) -> Option<Status> {
    let mut stream = match tokio::time::timeout(
        ATTEMPT_TIMEOUT,
        client.mutate_rows(routed(request, table_name)),
    )
    .await
    {
        Ok(Ok(r)) => r.into_inner(),
        Ok(Err(s)) => return Some(s),
        Err(_) => return Some(retry::timed_out()),
    };
    loop {
        let msg = match tokio::time::timeout(ATTEMPT_TIMEOUT, stream.message()).await {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) => return None,
            Ok(Err(s)) => return Some(s),
            Err(_) => return Some(retry::timed_out()),
        };
        for e in msg.entries {
            let Some(&i) = usize::try_from(e.index).ok().and_then(|k| pending.get(k)) else {
                continue;
            };
            let status = e.status.unwrap_or_default();
            results[i] = Some(if status.code == 0 {
                Ok(())
            } else {
                Err(Status::new(Code::from_i32(status.code), status.message))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use almanac_engine::mutation::Mutation;

    fn row(n: usize) -> RowMutations {
        RowMutations {
            key: b"k".to_vec(),
            mutations: vec![Mutation::DeleteFromRow; n],
        }
    }

    #[test]
    fn batches_stay_within_the_mutation_limit() {
        let rows = vec![
            row(60_000),
            row(50_000),
            row(10),
            row(MAX_MUTATIONS_PER_REQUEST),
        ];
        assert_eq!(batches(&rows), vec![0..1, 1..3, 3..4]);
        assert!(batches(&[]).is_empty());
    }
}
