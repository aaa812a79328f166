//! Golden SQL tests (GreptimeDB's way): each `testdata/golden/*.sql` file is a list of
//! statements ending in `;`, run against fixture data loaded through the public APIs
//! (engine mutations for Bigtable tables, `write_records` for Timestream tables). The
//! results, errors and storage counters (rows and cells read for the rows returned,
//! which pins pushdown) are printed and compared with the `.result` file beside it.
//! `bigtable.sql` and `googlesql.sql` run in GoogleSQL's dialect (as ExecuteQuery
//! does), the others in Timestream's (as the Query API does).
//! `UPDATE_GOLDEN=1 cargo test -p almanac-sql --test golden` rewrites the files.
//!
//! The same files run again with every table in a remote Bigtable (an Almanac node in
//! this process, reached through `RemoteStore`, as `serve --bigtable` does): the
//! answers and errors must be the same; only the storage counters differ.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod common;

use almanac_engine::Engine;
use almanac_engine::RowMutations;
use almanac_engine::mutation::{AggregateInput, Mutation};
use almanac_engine::schema::{Aggregate, FamilySpec, TableSpec, ValueType};
use almanac_sql::{Scope, SqlEngine};
use almanac_timeseries::{Layout, NewTable, Pattern, Retention, SharedStore, TimeSeries};
use common::{Result, TempDir, multi, single};
use datafusion::arrow::util::pretty::pretty_format_batches;

/// 2023-11-14T22:13:20Z, the fixture's "now".
const NOW_MS: i64 = 1_700_000_000_000;
/// The Bigtable instance of the fixture's tables.
const INSTANCE: &str = "projects/golden/instances/i";

fn set(family: &str, qualifier: &str, ts_us: i64, value: &[u8]) -> Mutation {
    Mutation::SetCell {
        family: family.into(),
        qualifier: qualifier.as_bytes().to_vec(),
        timestamp_us: ts_us,
        value: value.to_vec(),
    }
}

/// The Bigtable fixture's table.
fn users_spec() -> TableSpec {
    let bytes = FamilySpec::default();
    let sum = FamilySpec {
        value_type: ValueType::Aggregate(Aggregate::Sum),
        ..FamilySpec::default()
    };
    TableSpec {
        families: vec![("info".into(), bytes), ("counts".into(), sum)],
        ..TableSpec::default()
    }
}

/// The Bigtable fixture: `users` (family `info` of bytes, family `counts` an int64 sum).
fn load_bigtable(engine: &Engine) -> Result {
    engine.create_table(INSTANCE, "users", users_spec())?;
    for r in engine.mutate_rows(INSTANCE, "users", &users_rows())? {
        r?;
    }
    Ok(())
}

/// The rows of `users`.
fn users_rows() -> Vec<RowMutations> {
    let base_us = NOW_MS * 1000;
    let mut rows = Vec::new();
    for (i, (name, city)) in [
        ("ada", "london"),
        ("grace", "arlington"),
        ("linus", "helsinki"),
        ("margaret", "boston"),
        ("ken", "berkeley"),
    ]
    .iter()
    .enumerate()
    {
        let i = i as i64;
        let mut m = vec![
            set("info", "name", base_us, name.as_bytes()),
            set("info", "city", base_us, city.as_bytes()),
            set("info", "age", base_us, &(30 + i * 7).to_be_bytes()),
            set(
                "info",
                "score",
                base_us,
                &(1.5 * (i as f64 + 1.0)).to_be_bytes(),
            ),
        ];
        for v in 0..=i {
            m.push(Mutation::AddToCell {
                family: "counts".into(),
                qualifier: b"visits".to_vec(),
                timestamp_us: base_us,
                input: AggregateInput::Int(10 + v),
            });
        }
        rows.push(RowMutations {
            key: format!("user#{:03}", i + 1).into_bytes(),
            mutations: m,
        });
    }
    // An older version of one cell: the latest wins in the map columns.
    rows.push(RowMutations {
        key: b"user#001".to_vec(),
        mutations: vec![set("info", "city", base_us - 60_000_000, b"paris")],
    });
    rows.push(RowMutations {
        key: b"zz-other".to_vec(),
        mutations: vec![set("info", "name", base_us, b"not a user")],
    });
    rows
}

/// The Timestream fixture: database `devops` with `cpu` (multi-measure, one table per
/// pattern) and `events` (single measures of every type).
fn load_timeseries(ts: &TimeSeries<SharedStore>) -> Result {
    ts.create_database("devops", None)?;
    let retention = Some(Retention {
        memory_hours: 24,
        magnetic_days: 30,
    });
    for (name, pattern) in [
        ("cpu", Pattern::RowSerialized),
        ("cpu_bucket_cells", Pattern::BucketCells),
        ("cpu_bucket_columns", Pattern::BucketColumns),
        ("cpu_row_columns", Pattern::RowColumns),
    ] {
        ts.create_table(
            "devops",
            name,
            NewTable {
                layout: Layout {
                    pattern,
                    bucket_secs: 600,
                    reverse_time: false,
                    seal: true,
                },
                retention,
                ..NewTable::default()
            },
        )?;
        let start = NOW_MS - 3_600_000;
        let mut records = Vec::new();
        for (h, (host, region)) in [("h1", "eu"), ("h2", "eu"), ("h3", "us")]
            .iter()
            .enumerate()
        {
            for step in 0..30i64 {
                let user = (h as i64 * 10 + step % 7) as f64 + 0.5;
                let system = (step % 5) as f64;
                let mut values = vec![
                    ("usage_user", format!("{user}"), "DOUBLE"),
                    ("usage_system", format!("{system}"), "DOUBLE"),
                ];
                if step % 10 == 0 {
                    values.push(("procs", format!("{}", 100 + step), "BIGINT"));
                }
                records.push(multi(
                    &[("hostname", host), ("region", region)],
                    "cpu",
                    &values,
                    start + step * 60_000,
                ));
                if records.len() == 100 {
                    ts.write_records("devops", name, None, &records)?;
                    records.clear();
                }
            }
        }
        ts.write_records("devops", name, None, &records)?;
    }
    ts.create_table(
        "devops",
        "events",
        NewTable {
            retention,
            ..NewTable::default()
        },
    )?;
    let t = NOW_MS - 600_000;
    ts.write_records(
        "devops",
        "events",
        None,
        &[
            single(&[("device", "d1")], "temperature", "DOUBLE", "21.5", t),
            single(
                &[("device", "d1")],
                "temperature",
                "DOUBLE",
                "22.25",
                t + 1000,
            ),
            single(&[("device", "d2")], "temperature", "DOUBLE", "19", t + 2000),
            single(&[("device", "d1")], "count", "BIGINT", "42", t + 3000),
            single(&[("device", "d2")], "status", "VARCHAR", "ok", t + 4000),
            single(&[("device", "d2")], "online", "BOOLEAN", "true", t + 5000),
        ],
    )?;
    Ok(())
}

fn open() -> Result<(SqlEngine, TempDir)> {
    let (engine, ts, dir) = common::open("golden", NOW_MS)?;
    load_bigtable(&engine)?;
    load_timeseries(&ts)?;
    Ok((SqlEngine::new(engine, ts)?, dir))
}

/// The statements of a `.sql` file: split at `;` ending a line; `--` lines are comments.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("--") && current.trim().is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.trim_end().ends_with(';') {
            out.push(current.trim().to_string());
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

async fn run_file(sql: &SqlEngine, path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)?;
    let mut out = String::new();
    // Bigtable tables are read in GoogleSQL, as ExecuteQuery does; the rest in
    // Timestream's SQL, as the Query API does.
    let google = ["bigtable.sql", "googlesql.sql"]
        .iter()
        .any(|f| path.ends_with(f));
    let scope = if google {
        Scope::googlesql(INSTANCE)
    } else {
        Scope::instance(INSTANCE)
    };
    for stmt in statements(&text) {
        writeln!(out, "{stmt}")?;
        let query = stmt.trim_end_matches(';');
        match sql.query(query, &scope).await {
            Ok(result) => {
                writeln!(out, "{}", pretty_format_batches(&result.batches)?)?;
                let s = result.scan;
                writeln!(
                    out,
                    "-- {} rows; storage read {} rows, {} cells for {} table rows",
                    result.num_rows(),
                    s.rows_read,
                    s.cells_read,
                    s.rows_produced
                )?;
            }
            Err(e) => writeln!(out, "Error: {e}")?,
        }
        out.push('\n');
    }
    Ok(out)
}

/// The golden `.sql` files, sorted.
fn golden_files_in_order() -> Result<Vec<PathBuf>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sql"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no .sql files in {}", root.display());
    Ok(files)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_files() -> Result {
    let (sql, _dir) = open()?;
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let files = golden_files_in_order()?;
    let mut failed = Vec::new();
    for file in files {
        let got = run_file(&sql, &file).await?;
        let expected_path = file.with_extension("result");
        if update {
            std::fs::write(&expected_path, &got)?;
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if got != expected {
            let actual_path = file.with_extension("actual");
            std::fs::write(&actual_path, &got)?;
            failed.push(format!(
                "{} differs; see {} (UPDATE_GOLDEN=1 to accept)",
                expected_path.display(),
                actual_path.display()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}

/// A golden output without its storage counters, which a remote Bigtable does not
/// report the same way (it counts the cells it returns, not those it examined).
fn without_counters(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("; storage read") {
            Some(at) if line.starts_with("-- ") => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every golden file again with the time-series tables and `users` in a remote
/// Bigtable: an Almanac node in this process, its clock at the fixture's "now" (a
/// remote judges cell ages by its own clock), reached through `RemoteStore` as
/// `almanac serve --bigtable` reaches one. The SQL service reads the fixture instance's
/// Bigtable tables from the remote (`BigtableSources::with_remote`) and no table is in
/// the local engine.
#[test]
fn golden_files_over_a_remote_bigtable() -> Result {
    use almanac_engine::clock::{Clock, ManualClock};
    use almanac_remote::RemoteStore;
    use almanac_sql::BigtableSources;
    use almanac_timeseries::WideColumnStore;

    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(NOW_MS * 1000));
    let backend_dir = common::TempDir(
        std::env::temp_dir().join(format!("almanac-sql-golden-backend-{}", std::process::id())),
    );
    let backend = tokio::runtime::Runtime::new()?;
    let any: std::net::SocketAddr = "127.0.0.1:0".parse()?;
    let node = backend.block_on(almanac_server::Node::start(almanac_server::NodeConfig {
        durability: almanac_engine::Durability::None,
        seal_interval: None,
        console_addr: None,
        clock: clock.clone(),
        ..almanac_server::NodeConfig::new(backend_dir.0.clone(), any, any)
    }))?;
    let endpoint = node.grpc_addr().to_string();
    backend.spawn(node.run(std::future::pending::<()>()));

    let series = RemoteStore::connect(almanac_timeseries::DEFAULT_INSTANCE, &endpoint)?
        .with_clock(clock.clone());
    let ts = Arc::new(TimeSeries::open(
        Arc::new(Arc::new(series) as SharedStore),
        clock.clone(),
    )?);
    load_timeseries(&ts)?;
    let tables = RemoteStore::connect(INSTANCE, &endpoint)?.with_clock(clock.clone());
    tables.create_table_spec("users", &users_spec())?;
    for r in tables.mutate_rows("users", &users_rows())? {
        r?;
    }
    // The front-end's own engine stays empty: every table SQL reads is remote.
    let (engine, _, _dir) = common::open("golden-front", NOW_MS)?;
    let sources = BigtableSources::embedded(engine).with_remote(Arc::new(tables));
    let sql = SqlEngine::over(sources, ts)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mut failed = Vec::new();
    for file in golden_files_in_order()? {
        let got = runtime.block_on(run_file(&sql, &file))?;
        let expected = std::fs::read_to_string(file.with_extension("result"))?;
        if without_counters(&got) != without_counters(&expected) {
            let actual_path = file.with_extension("remote.actual");
            std::fs::write(&actual_path, &got)?;
            failed.push(format!(
                "{} differs over a remote Bigtable; see {}",
                file.display(),
                actual_path.display()
            ));
        }
    }
    backend.shutdown_background();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    Ok(())
}
