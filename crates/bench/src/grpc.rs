//! `almanac-bench grpc`: a load generator over loopback gRPC against a running server.
//!
//! Steps:
//! 1. Open `--channels` tonic channels (HTTP/2; requests multiplex over each) and
//!    create two tables, `bench-<pid>` (preloaded; reads and scans) and
//!    `bench-<pid>-writes` (the write phases), each with one family `cf`.
//! 2. Preload `--rows` rows of one `--value-bytes` cell with MutateRows batches of
//!    `--batch-rows`, `--concurrency` requests in flight.
//! 3. Timed phases of `--secs` seconds, `--concurrency` tasks each issuing one request
//!    at a time: no-op calls (PingAndWarm, the floor any RPC costs), point reads
//!    (ReadRows of one random preloaded key), single-row writes (MutateRow), batched
//!    writes (MutateRows of `--batch-rows` rows), then full-table scans (one ReadRows
//!    stream at a time, repeated until the phase ends).
//! 4. Per phase print throughput (ops/s; rows/s for batches; MB/s for scans), p50
//!    and p99 request latency from the sorted latencies, and, with `--server-pid`,
//!    the server's CPU time (utime+stime from /proc/PID/stat) per operation.
//! 5. Delete both tables (unless `--keep`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use almanac_api::google::bigtable::admin::v2 as admin;
use almanac_api::google::bigtable::v2 as data;
use almanac_api::google::bigtable::v2::bigtable_client::BigtableClient;
use almanac_api::google::bigtable::v2::read_rows_response::cell_chunk::RowStatus;
use almanac_engine::clock::Rng;
use anyhow::Context;
use tonic::codegen::Bytes;
use tonic::transport::Channel;

use almanac_client::grpc::{Conn, admin_client, data_client};
use almanac_client::status_error;

use crate::measure::{fmt_latency, percentile, server_cpu_secs as server_cpu, spread_key};

/// Flags of `almanac-bench grpc`.
#[derive(Debug, clap::Args)]
pub struct GrpcArgs {
    #[command(flatten)]
    conn: Conn,
    /// Requests in flight (one task each).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Seconds per timed phase.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Rows preloaded for the read and scan phases.
    #[arg(long, default_value_t = 100_000)]
    rows: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 1024)]
    value_bytes: usize,
    /// Rows per MutateRows request (preload and batched writes).
    #[arg(long, default_value_t = 100)]
    batch_rows: u64,
    /// HTTP/2 connections to spread the tasks over.
    #[arg(long, default_value_t = 2)]
    channels: usize,
    /// The server's process id, to report its CPU time per operation.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Keep the benchmark tables instead of deleting them at the end.
    #[arg(long)]
    keep: bool,
}

/// What one timed phase measured.
struct Phase {
    /// Operations done (reads, writes, rows or scanned bytes, by phase).
    ops: u64,
    /// Requests issued.
    requests: u64,
    /// Every request's latency, sorted.
    latencies: Vec<Duration>,
    wall: Duration,
    /// Server CPU seconds over the phase (when `--server-pid` is given).
    server_cpu_secs: Option<f64>,
}

impl Phase {
    fn percentile(&self, q: f64) -> Duration {
        percentile(&self.latencies, q)
    }

    /// Prints one line: `rate` is the throughput already in its unit; server CPU time
    /// is divided by `cpu_unit.1` and shown per `cpu_unit.0`.
    fn print(&self, name: &str, rate: String, cpu_unit: (&str, u64)) {
        let cpu = match self.server_cpu_secs {
            Some(s) => format!(
                "{:>9.1} µs/{}",
                s * 1e6 / cpu_unit.1.max(1) as f64,
                cpu_unit.0
            ),
            None => "-".to_string(),
        };
        println!(
            "{name:<34} {rate:>16}   p50 {:>9}   p99 {:>9}   server CPU {cpu:<14} ({} requests in {:.2} s)",
            fmt_latency(self.percentile(0.50)),
            fmt_latency(self.percentile(0.99)),
            self.requests,
            self.wall.as_secs_f64()
        );
    }
}

fn key(i: u64) -> Bytes {
    Bytes::from(spread_key(i))
}

fn set_cell(value: &Bytes) -> data::Mutation {
    data::Mutation {
        mutation: Some(data::mutation::Mutation::SetCell(data::mutation::SetCell {
            family_name: "cf".to_string(),
            column_qualifier: Bytes::from_static(b"v"),
            timestamp_micros: -1,
            value: value.clone(),
        })),
        ..Default::default()
    }
}

/// Sends one MutateRows request and fails on the first row the server refused.
async fn mutate_rows(
    mut client: BigtableClient<Channel>,
    table_name: String,
    keys: impl Iterator<Item = Bytes>,
    value: &Bytes,
) -> anyhow::Result<u64> {
    let entries: Vec<_> = keys
        .map(|row_key| data::mutate_rows_request::Entry {
            row_key,
            mutations: vec![set_cell(value)],
            ..Default::default()
        })
        .collect();
    let n = entries.len() as u64;
    let req = data::MutateRowsRequest {
        table_name,
        entries,
        ..Default::default()
    };
    let mut stream = client
        .mutate_rows(req)
        .await
        .map_err(|s| status_error("MutateRows", s))?
        .into_inner();
    let mut acked = 0;
    while let Some(resp) = stream
        .message()
        .await
        .map_err(|s| status_error("MutateRows", s))?
    {
        for e in resp.entries {
            let status = e.status.unwrap_or_default();
            anyhow::ensure!(
                status.code == 0,
                "MutateRows entry {}: code {}: {}",
                e.index,
                status.code,
                status.message
            );
            acked += 1;
        }
    }
    anyhow::ensure!(acked == n, "MutateRows acknowledged {acked} of {n} rows");
    Ok(n)
}

/// Streams one ReadRows request; returns (rows, bytes of keys, qualifiers and values).
async fn read_rows(
    mut client: BigtableClient<Channel>,
    req: data::ReadRowsRequest,
) -> anyhow::Result<(u64, u64)> {
    let mut stream = client
        .read_rows(req)
        .await
        .map_err(|s| status_error("ReadRows", s))?
        .into_inner();
    let (mut rows, mut bytes) = (0u64, 0u64);
    while let Some(resp) = stream
        .message()
        .await
        .map_err(|s| status_error("ReadRows", s))?
    {
        for c in resp.chunks {
            bytes +=
                (c.row_key.len() + c.value.len() + c.qualifier.as_ref().map_or(0, Vec::len)) as u64;
            if c.row_status == Some(RowStatus::CommitRow(true)) {
                rows += 1;
            }
        }
    }
    Ok((rows, bytes))
}

/// Runs `op` in `tasks` concurrent loops until `secs` have passed (at least one
/// request per task). `op` gets a client, the task number, the task's request
/// sequence number and a random number, and returns the operations it did.
async fn timed<F, Fut>(
    clients: &[BigtableClient<Channel>],
    tasks: usize,
    secs: u64,
    pid: Option<u32>,
    op: F,
) -> anyhow::Result<Phase>
where
    F: Fn(BigtableClient<Channel>, u64, u64, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<u64>> + Send + 'static,
{
    let op = Arc::new(op);
    let cpu0 = server_cpu(pid)?;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(secs);
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let client = clients[task % clients.len()].clone();
        let op = Arc::clone(&op);
        handles.push(tokio::spawn(async move {
            let rng = Rng::new(task as u64 * 7919 + 1);
            let (mut ops, mut latencies) = (0u64, Vec::new());
            let mut seq = 0;
            loop {
                let start = Instant::now();
                ops += op(client.clone(), task as u64, seq, rng.next_u64()).await?;
                latencies.push(start.elapsed());
                seq += 1;
                if Instant::now() >= deadline {
                    return anyhow::Ok((ops, latencies));
                }
            }
        }));
    }
    let (mut ops, mut latencies) = (0, Vec::new());
    for h in handles {
        let (n, l) = h.await.context("load task panicked")??;
        ops += n;
        latencies.extend(l);
    }
    let wall = t0.elapsed();
    let server_cpu_secs = match (cpu0, server_cpu(pid)?) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    latencies.sort_unstable();
    Ok(Phase {
        ops,
        requests: latencies.len() as u64,
        latencies,
        wall,
        server_cpu_secs,
    })
}

/// What every timed phase runs against: the clients, how many tasks, for how long,
/// and the server whose CPU time is measured.
struct Load<'a> {
    clients: &'a [BigtableClient<Channel>],
    tasks: usize,
    secs: u64,
    pid: Option<u32>,
}

/// Runs one timed phase of `op` (see [`timed`]) and prints its line: `unit`s per
/// second and the server's CPU per `unit`.
async fn rate_phase<F, Fut>(load: &Load<'_>, name: &str, unit: &str, op: F) -> anyhow::Result<()>
where
    F: Fn(BigtableClient<Channel>, u64, u64, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<u64>> + Send + 'static,
{
    let p = timed(load.clients, load.tasks, load.secs, load.pid, op).await?;
    let rate = p.ops as f64 / p.wall.as_secs_f64();
    p.print(name, format!("{rate:.0} {unit}s/s"), (unit, p.ops));
    Ok(())
}

async fn create_table(conn: &Conn, channel: Channel, table: &str) -> anyhow::Result<()> {
    let mut table_proto = admin::Table::default();
    table_proto
        .column_families
        .insert("cf".to_string(), admin::ColumnFamily::default());
    let req = admin::CreateTableRequest {
        parent: conn.instance_name(),
        table_id: table.to_string(),
        table: Some(table_proto),
        ..Default::default()
    };
    admin_client(channel)
        .create_table(req)
        .await
        .map_err(|s| status_error("CreateTable", s))?;
    Ok(())
}

/// Runs the load generator.
pub fn run(args: GrpcArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.concurrency > 0 && args.channels > 0 && args.batch_rows > 0,
        "--concurrency, --channels and --batch-rows must be positive"
    );
    anyhow::ensure!(args.rows > 0, "--rows must be positive");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let mut channels = Vec::with_capacity(args.channels);
        for _ in 0..args.channels {
            channels.push(args.conn.channel().await?);
        }
        let table = format!("bench-{}", std::process::id());
        let writes_table = format!("{table}-writes");
        create_table(&args.conn, channels[0].clone(), &table).await?;
        create_table(&args.conn, channels[0].clone(), &writes_table).await?;
        let result = run_phases(&args, &channels, &table, &writes_table).await;
        if !args.keep {
            for t in [&table, &writes_table] {
                let req = admin::DeleteTableRequest {
                    name: args.conn.table_name(t),
                };
                if let Err(s) = admin_client(channels[0].clone()).delete_table(req).await {
                    eprintln!(
                        "almanac-bench grpc: could not delete table {t}: {}",
                        status_error("DeleteTable", s)
                    );
                }
            }
        }
        result
    })
}

async fn run_phases(
    args: &GrpcArgs,
    channels: &[Channel],
    table: &str,
    writes_table: &str,
) -> anyhow::Result<()> {
    let clients: Vec<_> = channels.iter().cloned().map(data_client).collect();
    let value = Bytes::from(vec![0xA5u8; args.value_bytes]);
    let (table_name, writes_name) = (
        args.conn.table_name(table),
        args.conn.table_name(writes_table),
    );
    let (rows, batch, secs, pid) = (args.rows, args.batch_rows, args.secs, args.server_pid);
    println!(
        "almanac-bench grpc: {} at {}, {rows} rows of {} B values, {secs} s phases, {} tasks over {} channels, server pid {}",
        table,
        args.conn.addr(),
        args.value_bytes,
        args.concurrency,
        channels.len(),
        pid.map_or_else(|| "not given".to_string(), |p| p.to_string())
    );

    // Preload: batch b holds rows b*batch .. (b+1)*batch; task t takes batches t, t+C, ...
    let batches = rows.div_ceil(batch);
    let tasks = args.concurrency.min(batches as usize);
    let cpu0 = server_cpu(pid)?;
    let t0 = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for task in 0..tasks {
        let (client, name, value) = (
            clients[task % clients.len()].clone(),
            table_name.clone(),
            value.clone(),
        );
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            for b in (task as u64..batches).step_by(tasks) {
                let start = Instant::now();
                mutate_rows(
                    client.clone(),
                    name.clone(),
                    (b * batch..((b + 1) * batch).min(rows)).map(key),
                    &value,
                )
                .await?;
                latencies.push(start.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for h in handles {
        latencies.extend(h.await.context("preload task panicked")??);
    }
    latencies.sort_unstable();
    let server_cpu_secs = match (cpu0, server_cpu(pid)?) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let load = Phase {
        ops: rows,
        requests: latencies.len() as u64,
        latencies,
        wall: t0.elapsed(),
        server_cpu_secs,
    };
    let per_sec = |p: &Phase| p.ops as f64 / p.wall.as_secs_f64();
    load.print(
        &format!("preload (MutateRows x{batch})"),
        format!("{:.0} rows/s", per_sec(&load)),
        ("row", load.ops),
    );

    let each = Load {
        clients: &clients,
        tasks: args.concurrency,
        secs,
        pid,
    };
    let instance = args.conn.instance_name();
    rate_phase(
        &each,
        "no-op RPC floor (PingAndWarm)",
        "call",
        move |mut client, _, _, _| {
            let req = data::PingAndWarmRequest {
                name: instance.clone(),
                ..Default::default()
            };
            async move {
                client
                    .ping_and_warm(req)
                    .await
                    .map_err(|s| status_error("PingAndWarm", s))?;
                Ok(1)
            }
        },
    )
    .await?;

    let name = table_name.clone();
    rate_phase(
        &each,
        "point reads (ReadRows)",
        "read",
        move |client, _, _, r| {
            let req = data::ReadRowsRequest {
                table_name: name.clone(),
                rows: Some(data::RowSet {
                    row_keys: vec![key(r % rows)],
                    ..Default::default()
                }),
                rows_limit: 1,
                ..Default::default()
            };
            async move {
                let (n, _) = read_rows(client, req).await?;
                anyhow::ensure!(n == 1, "point read found {n} rows, expected 1");
                Ok(1)
            }
        },
    )
    .await?;

    let (name, v) = (writes_name.clone(), value.clone());
    rate_phase(
        &each,
        "single-row writes (MutateRow)",
        "write",
        move |mut client, task, seq, _| {
            let req = data::MutateRowRequest {
                table_name: name.clone(),
                row_key: Bytes::from(format!("w{task:03}-{seq:010}")),
                mutations: vec![set_cell(&v)],
                ..Default::default()
            };
            async move {
                client
                    .mutate_row(req)
                    .await
                    .map_err(|s| status_error("MutateRow", s))?;
                Ok(1)
            }
        },
    )
    .await?;

    let (name, v) = (writes_name.clone(), value.clone());
    rate_phase(
        &each,
        &format!("batched writes (MutateRows x{batch})"),
        "row",
        move |client, task, seq, _| {
            let (name, v) = (name.clone(), v.clone());
            async move {
                let keys =
                    (0..batch).map(move |i| Bytes::from(format!("b{task:03}-{seq:08}-{i:04}")));
                mutate_rows(client, name, keys, &v).await
            }
        },
    )
    .await?;

    // Scans run one at a time: the figure is one stream's throughput.
    let (scan_rows, name) = (
        Arc::new(std::sync::atomic::AtomicU64::new(0)),
        table_name.clone(),
    );
    let counted = Arc::clone(&scan_rows);
    let p = timed(&clients, 1, secs, pid, move |client, _, _, _| {
        let req = data::ReadRowsRequest {
            table_name: name.clone(),
            ..Default::default()
        };
        let counted = Arc::clone(&counted);
        async move {
            let (n, bytes) = read_rows(client, req).await?;
            anyhow::ensure!(n == rows, "scan saw {n} rows, expected {rows}");
            counted.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            Ok(bytes)
        }
    })
    .await?;
    let scanned = scan_rows.load(std::sync::atomic::Ordering::Relaxed);
    p.print(
        "full scan (ReadRows)",
        format!("{:.1} MB/s", p.ops as f64 / 1e6 / p.wall.as_secs_f64()),
        ("row", scanned),
    );
    Ok(())
}
