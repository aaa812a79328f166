//! The row commands: `read`, `lookup`, `count` (ReadRows with a row range and a
//! filter chain) and `set`, `deleterow` (MutateRow).

use almanac_api::google::bigtable::v2 as data;
use anyhow::Context;

use super::{Conn, data_client, key_values, parse_number, rows, status_error};

/// The filter for `columns=fam:qual,fam2,...` (each part a regex, as in cbt).
fn columns_filter(spec: &str) -> data::RowFilter {
    use data::row_filter::{Chain, Filter, Interleave};
    let mut parts: Vec<data::RowFilter> = spec
        .split(',')
        .filter(|c| !c.is_empty())
        .map(|c| {
            let f = |filter| data::RowFilter {
                filter: Some(filter),
            };
            match c.split_once(':') {
                Some((fam, qual)) => f(Filter::Chain(Chain {
                    filters: vec![
                        f(Filter::FamilyNameRegexFilter(fam.to_string())),
                        f(Filter::ColumnQualifierRegexFilter(
                            qual.as_bytes().to_vec().into(),
                        )),
                    ],
                })),
                None => f(Filter::FamilyNameRegexFilter(c.to_string())),
            }
        })
        .collect();
    if parts.len() == 1 {
        parts.remove(0)
    } else {
        data::RowFilter {
            filter: Some(Filter::Interleave(Interleave { filters: parts })),
        }
    }
}

/// All of `filters` in a chain (`None` when empty).
fn chain(mut filters: Vec<data::RowFilter>) -> Option<data::RowFilter> {
    match filters.len() {
        0 => None,
        1 => filters.pop(),
        _ => Some(data::RowFilter {
            filter: Some(data::row_filter::Filter::Chain(data::row_filter::Chain {
                filters,
            })),
        }),
    }
}

/// The smallest key greater than every key starting with `prefix` (`None`: no bound).
fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// `read T [start=R] [end=R] [prefix=P] [regex=RE] [count=N] [columns=...] [cells-per-column=N] [reversed=true]`.
pub async fn handle_read(conn: &Conn, table: &str, options: &[String]) -> anyhow::Result<()> {
    use data::row_filter::Filter;
    use data::row_range::{EndKey, StartKey};
    const KEYS: [&str; 8] = [
        "start",
        "end",
        "prefix",
        "regex",
        "count",
        "columns",
        "cells-per-column",
        "reversed",
    ];
    let mut req = data::ReadRowsRequest {
        table_name: conn.table_name(table),
        ..Default::default()
    };
    let (mut start, mut end, mut prefix) = (None, None, None);
    let mut filters = Vec::new();
    for (key, value) in key_values(options, &KEYS)? {
        match key {
            "start" => start = Some(value),
            "end" => end = Some(value),
            "prefix" => prefix = Some(value),
            "regex" => filters.push(data::RowFilter {
                filter: Some(Filter::RowKeyRegexFilter(value.as_bytes().to_vec().into())),
            }),
            "count" => req.rows_limit = parse_number(key, value)?,
            "columns" => filters.push(columns_filter(value)),
            "cells-per-column" => filters.push(data::RowFilter {
                filter: Some(Filter::CellsPerColumnLimitFilter(parse_number(key, value)?)),
            }),
            _ => {
                req.reversed = value
                    .parse()
                    .map_err(|_| anyhow::anyhow!("reversed={value:?}: expected true or false"))?
            }
        }
    }
    anyhow::ensure!(
        prefix.is_none() || (start.is_none() && end.is_none()),
        "prefix cannot be combined with start or end"
    );
    let range = match prefix {
        Some(p) => Some(data::RowRange {
            start_key: Some(StartKey::StartKeyClosed(p.as_bytes().to_vec().into())),
            end_key: prefix_end(p.as_bytes()).map(|e| EndKey::EndKeyOpen(e.into())),
        }),
        None if start.is_some() || end.is_some() => Some(data::RowRange {
            start_key: start.map(|s| StartKey::StartKeyClosed(s.as_bytes().to_vec().into())),
            end_key: end.map(|e| EndKey::EndKeyOpen(e.as_bytes().to_vec().into())),
        }),
        None => None,
    };
    req.rows = range.map(|r| data::RowSet {
        row_ranges: vec![r],
        ..Default::default()
    });
    req.filter = chain(filters);
    let mut client = data_client(conn.channel().await?);
    rows::for_each_row(&mut client, req, |row| {
        print!("{}", rows::format_row(&row));
        Ok(())
    })
    .await
}

/// `lookup T ROW [columns=...] [cells-per-column=N]`; a missing row is an error.
pub async fn handle_lookup(
    conn: &Conn,
    table: &str,
    row: &str,
    options: &[String],
) -> anyhow::Result<()> {
    let mut filters = Vec::new();
    for (key, value) in key_values(options, &["columns", "cells-per-column"])? {
        filters.push(match key {
            "columns" => columns_filter(value),
            _ => data::RowFilter {
                filter: Some(data::row_filter::Filter::CellsPerColumnLimitFilter(
                    parse_number(key, value)?,
                )),
            },
        });
    }
    let req = data::ReadRowsRequest {
        table_name: conn.table_name(table),
        rows: Some(data::RowSet {
            row_keys: vec![row.as_bytes().to_vec().into()],
            ..Default::default()
        }),
        filter: chain(filters),
        rows_limit: 1,
        ..Default::default()
    };
    let mut client = data_client(conn.channel().await?);
    let mut found = false;
    rows::for_each_row(&mut client, req, |r| {
        found = true;
        print!("{}", rows::format_row(&r));
        Ok(())
    })
    .await?;
    anyhow::ensure!(found, "row {:?} not found in table {table}", row);
    Ok(())
}

/// `set T ROW fam:qual=value[@ts] ...`.
pub async fn handle_set(
    conn: &Conn,
    table: &str,
    row: &str,
    cells: &[String],
) -> anyhow::Result<()> {
    let mut mutations = Vec::with_capacity(cells.len());
    for c in cells {
        let (column, value) = c
            .split_once('=')
            .with_context(|| format!("expected fam:qual=value[@ts], got {c:?}"))?;
        let (family, qualifier) = column
            .split_once(':')
            .with_context(|| format!("column {column:?} must be fam:qual"))?;
        // As in cbt, a trailing `@ts` is a timestamp only if it parses; otherwise it is value.
        let (value, timestamp_micros) = match value.rsplit_once('@') {
            Some((v, ts)) => match ts.parse::<i64>() {
                Ok(ts) => (v, ts),
                Err(_) => (value, -1),
            },
            None => (value, -1),
        };
        mutations.push(data::mutation::Mutation::SetCell(data::mutation::SetCell {
            family_name: family.to_string(),
            column_qualifier: qualifier.as_bytes().to_vec().into(),
            timestamp_micros,
            value: value.as_bytes().to_vec().into(),
        }));
    }
    mutate_row(conn, table, row, mutations).await
}

async fn mutate_row(
    conn: &Conn,
    table: &str,
    row: &str,
    mutations: Vec<data::mutation::Mutation>,
) -> anyhow::Result<()> {
    let req = data::MutateRowRequest {
        table_name: conn.table_name(table),
        row_key: row.as_bytes().to_vec().into(),
        mutations: mutations
            .into_iter()
            .map(|m| data::Mutation {
                mutation: Some(m),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let mut client = data_client(conn.channel().await?);
    client
        .mutate_row(req)
        .await
        .map_err(|s| status_error("MutateRow", s))?;
    Ok(())
}

/// `count T`: the number of rows.
pub async fn handle_count(conn: &Conn, table: &str) -> anyhow::Result<()> {
    use data::row_filter::Filter;
    // One stripped cell per row is enough to see the row.
    let filter = chain(vec![
        data::RowFilter {
            filter: Some(Filter::CellsPerRowLimitFilter(1)),
        },
        data::RowFilter {
            filter: Some(Filter::StripValueTransformer(true)),
        },
    ]);
    let req = data::ReadRowsRequest {
        table_name: conn.table_name(table),
        filter,
        ..Default::default()
    };
    let mut client = data_client(conn.channel().await?);
    let mut n = 0u64;
    rows::for_each_row(&mut client, req, |_| {
        n += 1;
        Ok(())
    })
    .await?;
    println!("{n}");
    Ok(())
}

/// `deleterow T ROW`.
pub async fn handle_delete_row(conn: &Conn, table: &str, row: &str) -> anyhow::Result<()> {
    let delete = data::mutation::Mutation::DeleteFromRow(data::mutation::DeleteFromRow {});
    mutate_row(conn, table, row, vec![delete]).await
}
