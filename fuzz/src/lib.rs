//! What Almanac's fuzz targets share (docs/fuzzing.md): a data directory under the
//! system's temporary directory holding a small fixture, the services over it, and one
//! tokio runtime, built once per fuzzing process.
//!
//! The fixture, at the fixed time [`NOW_US`]:
//! - Bigtable instance [`INSTANCE`]: table [`TABLE`] (MILLIS; families `cf` keeping 3
//!   versions, `old` kept an hour, `sum` a Sum aggregate, `hll` an HLL aggregate; a
//!   change stream) with [`ROW_KEYS`], and table [`MICROS_TABLE`] (MICROS; family `cf`).
//! - Time-series database [`DATABASE`]: one table per layout ([`SERIES_TABLES`]), each
//!   with single-value and MULTI records three hours ago (sealed into blocks) and ten
//!   minutes ago (still rows).
//! - The SQL engine over both, with each query bounded by [`QUERY_TIME_LIMIT`] and
//!   [`QUERY_MEMORY_BYTES`]; the Data API's service over the engine.
//!
//! Targets that write reset what they wrote every [`RESET_EVERY`] inputs, so the
//! state an input meets stays close to the fixture.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use almanac_engine::clock::ManualClock;
use almanac_engine::mutation::{AggregateInput, Mutation};
use almanac_engine::schema::{Aggregate, FamilySpec, GcRule, Granularity, TableSpec, ValueType};
use almanac_engine::{DropRows, Durability, Engine, Options};
use almanac_server::DataService;
use almanac_sql::{QueryLimits, SqlEngine};
use almanac_timeseries::{
    Dimension, EmbeddedStore, Layout, MagneticWrites, MeasureValue, NewTable, Pattern, Record,
    Retention, SharedStore, TimeSeries,
};

/// The fixture's "now": 2024-06-01T00:00:00Z, in µs.
pub const NOW_US: i64 = 1_717_200_000_000_000;
/// The Bigtable instance of the fixture.
pub const INSTANCE: &str = "projects/fuzz/instances/fuzz";
/// Its main table (MILLIS, four families, a change stream).
pub const TABLE: &str = "t";
/// [`TABLE`]'s resource name: what a request without a table name is given.
pub const TABLE_NAME: &str = "projects/fuzz/instances/fuzz/tables/t";
/// Its MICROS table.
pub const MICROS_TABLE: &str = "m";
/// The rows of [`TABLE`].
pub const ROW_KEYS: [&[u8]; 6] = [b"a", b"b", b"row1", b"row2", b"z\x00\xff", b"zz"];
/// The time-series database of the fixture.
pub const DATABASE: &str = "tsdb";
/// Its tables: name, pattern, reversed time.
pub const SERIES_TABLES: [(&str, Pattern, bool); 4] = [
    ("rows", Pattern::RowSerialized, false),
    ("cells", Pattern::BucketCells, false),
    ("cols", Pattern::BucketColumns, true),
    ("rowcols", Pattern::RowColumns, false),
];
/// Time limit of one SQL query: long enough to plan and start any query, short enough
/// that a runaway one costs the fuzzer little.
pub const QUERY_TIME_LIMIT: Duration = Duration::from_millis(500);
/// Memory one SQL query may reserve.
pub const QUERY_MEMORY_BYTES: usize = 64 * 1024 * 1024;
/// Inputs between two resets of what the writing targets wrote.
pub const RESET_EVERY: u64 = 1024;

/// Errors while building the fixture (it is built once; a failure stops the run).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The fixture; see the crate docs.
pub struct Fixture {
    /// The data directory (under [`process_dir`]).
    pub dir: PathBuf,
    /// The engine.
    pub engine: Engine,
    /// Its clock, at [`NOW_US`].
    pub clock: Arc<ManualClock>,
    /// The time-series layer.
    pub ts: Arc<TimeSeries<SharedStore>>,
    /// SQL over both.
    pub sql: Arc<SqlEngine>,
    /// Where async calls run (two workers).
    pub runtime: tokio::runtime::Runtime,
    data: OnceLock<DataService>,
    inputs: AtomicU64,
}

/// The process's fixture, built on first use.
pub fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| match Fixture::build() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("almanac-fuzz: cannot build the fixture: {e}");
            std::process::abort();
        }
    })
}

impl Fixture {
    fn build() -> Result<Self, BoxError> {
        let dir = process_dir().join("data");
        let _ = std::fs::remove_dir_all(&dir);
        let clock = Arc::new(ManualClock::new(NOW_US));
        let engine = Engine::open(
            &dir,
            Options {
                durability: Durability::None,
                clock: clock.clone(),
                cache_bytes: 16 * 1024 * 1024,
                sweep_interval: None,
                ..Options::default()
            },
        )?;
        let store = EmbeddedStore::new(
            Arc::new(engine.clone()),
            almanac_timeseries::DEFAULT_INSTANCE,
        );
        let ts = Arc::new(TimeSeries::open(store.shared(), clock.clone())?);
        let sql = Arc::new(
            SqlEngine::new(Arc::new(engine.clone()), ts.clone())?.with_limits(QueryLimits {
                memory_bytes: 2 * QUERY_MEMORY_BYTES,
                query_memory_bytes: QUERY_MEMORY_BYTES,
                time_limit: QUERY_TIME_LIMIT,
            }),
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let fixture = Self {
            dir,
            engine,
            clock,
            ts,
            sql,
            runtime,
            data: OnceLock::new(),
            inputs: AtomicU64::new(0),
        };
        fixture.create_bigtable()?;
        fixture.fill_bigtable()?;
        fixture.create_series()?;
        Ok(fixture)
    }

    /// The Data API over the engine (its committer thread starts on first use).
    pub fn data(&self) -> &DataService {
        self.data.get_or_init(|| {
            let handle = self.runtime.handle().clone();
            match DataService::new(self.engine.clone(), self.sql.clone(), handle) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("almanac-fuzz: cannot start the Data API: {e}");
                    std::process::abort();
                }
            }
        })
    }

    /// Counts an input; true every [`RESET_EVERY`] inputs (the caller then resets).
    pub fn due_for_reset(&self) -> bool {
        let n = self.inputs.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_multiple_of(RESET_EVERY)
    }

    fn create_bigtable(&self) -> Result<(), BoxError> {
        let family = |gc_rule, value_type| FamilySpec {
            gc_rule,
            value_type,
        };
        self.engine.create_table(
            INSTANCE,
            TABLE,
            TableSpec {
                families: vec![
                    (
                        "cf".into(),
                        family(GcRule::MaxVersions(3), ValueType::Bytes),
                    ),
                    (
                        "old".into(),
                        family(
                            GcRule::MaxAge {
                                max_age_us: 3_600_000_000,
                            },
                            ValueType::Bytes,
                        ),
                    ),
                    (
                        "sum".into(),
                        family(GcRule::KeepAll, ValueType::Aggregate(Aggregate::Sum)),
                    ),
                    (
                        "hll".into(),
                        family(
                            GcRule::KeepAll,
                            ValueType::Aggregate(Aggregate::HllCountDistinct),
                        ),
                    ),
                ],
                granularity: Granularity::Millis,
                deletion_protection: false,
                change_retention_us: Some(24 * 3_600_000_000),
            },
        )?;
        self.engine.create_table(
            INSTANCE,
            MICROS_TABLE,
            TableSpec {
                families: vec![("cf".into(), family(GcRule::KeepAll, ValueType::Bytes))],
                granularity: Granularity::Micros,
                ..TableSpec::default()
            },
        )?;
        Ok(())
    }

    /// Writes the rows of [`TABLE`] and [`MICROS_TABLE`].
    fn fill_bigtable(&self) -> Result<(), BoxError> {
        for (i, key) in ROW_KEYS.iter().enumerate() {
            let i = i as i64;
            let set = |family: &str, qualifier: &[u8], ts: i64, value: &[u8]| Mutation::SetCell {
                family: family.into(),
                qualifier: qualifier.to_vec(),
                timestamp_us: ts,
                value: value.to_vec(),
            };
            let add = |family: &str, input: AggregateInput| Mutation::AddToCell {
                family: family.into(),
                qualifier: b"n".to_vec(),
                timestamp_us: 0,
                input,
            };
            let mutations = [
                set(
                    "cf",
                    b"q",
                    NOW_US - 2_000_000,
                    format!("value{i}").as_bytes(),
                ),
                set("cf", b"q", NOW_US - 1_000_000, &i.to_be_bytes()),
                set("cf", b"q2", 1000 * i, b"\x00\xff\x7f"),
                set("old", b"", NOW_US - 7_200_000_000, b"expired"),
                set("old", b"fresh", NOW_US, b"kept"),
                add("sum", AggregateInput::Int(i - 2)),
                add("hll", AggregateInput::Bytes(key.to_vec())),
            ];
            self.engine.mutate_row(INSTANCE, TABLE, key, &mutations)?;
            self.engine.mutate_row(
                INSTANCE,
                MICROS_TABLE,
                key,
                &[set("cf", b"c", NOW_US + i, key)],
            )?;
        }
        Ok(())
    }

    /// Drops every row of the Bigtable tables and writes the fixture's rows again.
    pub fn reset_bigtable(&self) {
        for table in [TABLE, MICROS_TABLE] {
            let _ = self.engine.drop_rows(INSTANCE, table, &DropRows::All);
        }
        if let Err(e) = self.fill_bigtable() {
            eprintln!("almanac-fuzz: cannot refill the Bigtable tables: {e}");
            std::process::abort();
        }
    }

    fn create_series(&self) -> Result<(), BoxError> {
        self.ts.create_database(DATABASE, None)?;
        for (name, _, _) in SERIES_TABLES {
            self.create_series_table(name)?;
        }
        Ok(())
    }

    fn create_series_table(&self, name: &str) -> Result<(), BoxError> {
        let Some(&(_, pattern, reverse_time)) = SERIES_TABLES.iter().find(|t| t.0 == name) else {
            return Err(format!("no fixture table {name}").into());
        };
        self.ts.create_table(
            DATABASE,
            name,
            NewTable {
                retention: Some(Retention {
                    memory_hours: 8766,
                    magnetic_days: 3650,
                }),
                magnetic_writes: MagneticWrites {
                    enabled: true,
                    rejected_report_location: None,
                },
                layout: Layout {
                    pattern,
                    bucket_secs: 3600,
                    reverse_time,
                    seal: true,
                },
                partition_key: None,
                tags: Vec::new(),
            },
        )?;
        let now_ms = NOW_US / 1000;
        let three_hours_ago = now_ms - 3 * 3_600_000;
        self.ts
            .write_records(DATABASE, name, None, &series_records(three_hours_ago))?;
        self.ts.seal(DATABASE, name)?;
        self.ts
            .write_records(DATABASE, name, None, &series_records(now_ms - 600_000))?;
        Ok(())
    }

    /// Drops the time-series tables and creates them again as the fixture made them.
    pub fn reset_series(&self) {
        for (name, _, _) in SERIES_TABLES {
            let _ = self.ts.delete_table(DATABASE, name);
            if let Err(e) = self.create_series_table(name) {
                eprintln!("almanac-fuzz: cannot recreate the time-series table {name}: {e}");
                std::process::abort();
            }
        }
    }
}

/// Single-value and MULTI records of two hosts, a minute apart from `start_ms`.
fn series_records(start_ms: i64) -> Vec<Record<'static>> {
    let mut out = Vec::new();
    for i in 0..6 {
        let t = start_ms + i * 60_000;
        for host in ["h1", "h2"] {
            let dims = || {
                vec![
                    Dimension::new("host", host),
                    Dimension::new("region", "eu-west-1"),
                ]
            };
            out.push(Record::single(
                dims(),
                "cpu",
                "DOUBLE",
                format!("{}.25", i * 7),
                t,
            ));
            out.push(Record::single(dims(), "up", "BOOLEAN", "true", t));
            out.push(Record::multi(
                dims(),
                "metrics",
                vec![
                    MeasureValue::new("usage", format!("{}.5", 90 - i), "DOUBLE"),
                    MeasureValue::new("count", (i * 1000).to_string(), "BIGINT"),
                    MeasureValue::new("state", if i % 2 == 0 { "ok" } else { "busy" }, "VARCHAR"),
                    MeasureValue::new("on", "false", "BOOLEAN"),
                    MeasureValue::new("seen", (t - 1).to_string(), "TIMESTAMP"),
                ],
                t,
            ));
        }
    }
    out
}

/// This process's directory under the system's temporary directory
/// (`almanac-fuzz-PID`): the fixture's data directory and scratch files go there.
pub fn process_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!("almanac-fuzz-{}", std::process::id()));
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!("almanac-fuzz: cannot create {}: {e}", dir.display());
            std::process::abort();
        }
        dir
    })
}

/// Removes the directories of fuzzing processes that are gone (libFuzzer ends a
/// process with `exit`, which leaves its directory behind).
fn remove_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("almanac-fuzz-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `payload` in the envelope of Almanac's ExecuteQuery tokens (docs/format.md
/// #executequery-tokens): `magic`, version 1, the payload's CRC-32C, the payload.
pub fn envelope(magic: &[u8; 3], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + payload.len());
    out.extend_from_slice(magic);
    out.push(1);
    out.extend_from_slice(&crc32c::crc32c(payload).to_be_bytes());
    out.extend_from_slice(payload);
    out
}
