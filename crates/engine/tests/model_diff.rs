//! Randomized differential test: the engine against a plain in-memory reference
//! model (`model/mod.rs`), operation by operation.
//!
//! Defaults: 8 seeds × 3,000 operations. Environment overrides:
//! - `ALMANAC_MODEL_SEEDS=<n>`: run seeds `1..=n`;
//! - `ALMANAC_MODEL_OPS=<n>`: operations per seed;
//! - `ALMANAC_MODEL_SEED=<n>`: run only this seed (reproduce a failure).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::too_many_arguments,
    missing_docs
)]

mod model;

use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::Arc;

use almanac_engine::clock::{Clock, ManualClock};
use almanac_engine::{Durability, Engine, Error, Options, ReadRequest, Row};

use model::r#gen::{Gen, INSTANCES, Op};
use model::{Kind, Model};

/// Start of the clock: about 11.5 days after the epoch, a multiple of 1000.
const START_US: i64 = 1_000_000_000_000;
/// Operations between full-state comparisons.
const FULL_CHECK_EVERY: usize = 100;

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number"))
    })
}

fn open(dir: &std::path::Path, clock: Arc<ManualClock>) -> Engine {
    Engine::open(
        dir,
        Options {
            durability: Durability::None,
            clock,
            sweep_interval: None,
            cache_bytes: 8 * 1024 * 1024,
            ..Options::default()
        },
    )
    .unwrap()
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "almanac-model-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Cuts a debug dump to at most `max` bytes (oversized keys make huge dumps).
fn shorten(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" …[cut]");
    }
    s
}

/// Prints the seed if the run panics, however it panics.
struct SeedGuard(u64);

impl Drop for SeedGuard {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "model_diff FAILED with seed {}: reproduce with ALMANAC_MODEL_SEED={}",
                self.0, self.0
            );
        }
    }
}

struct Harness {
    seed: u64,
    dir: PathBuf,
    clock: Arc<ManualClock>,
    engine: Option<Engine>,
    model: Model,
    op_no: usize,
    log: Vec<String>,
    /// Per operation kind: (ok, err, rows read, cells read).
    stats: std::collections::BTreeMap<&'static str, [u64; 4]>,
    /// Seeks the engine's reads made (pushdown coverage).
    seeks: std::cell::Cell<u64>,
}

impl Harness {
    fn new(seed: u64) -> Self {
        let dir = tempdir(&seed.to_string());
        let clock = Arc::new(ManualClock::new(START_US));
        let engine = Some(open(&dir, clock.clone()));
        Self {
            seed,
            dir,
            clock,
            engine,
            model: Model::default(),
            op_no: 0,
            log: Vec::new(),
            stats: Default::default(),
            seeks: Default::default(),
        }
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().unwrap()
    }

    fn now(&self) -> i64 {
        self.clock.now_us()
    }

    fn fail(&self, what: &str, detail: String) -> ! {
        let from = self.log.len().saturating_sub(25);
        let recent: Vec<String> = self.log[from..]
            .iter()
            .enumerate()
            .map(|(i, l)| format!("  #{}: {l}", from + i))
            .collect();
        panic!(
            "seed {} op #{}: {what}\n{detail}\nrecent ops (clock now {}):\n{}",
            self.seed,
            self.op_no,
            self.now(),
            recent.join("\n")
        );
    }

    /// Compares a model result with the engine's: values exactly, errors by kind.
    fn count<T>(&mut self, kind: &'static str, r: &Result<T, Error>, rows: &[&Row]) {
        let e = self.stats.entry(kind).or_default();
        e[usize::from(r.is_err())] += 1;
        e[2] += rows.len() as u64;
        e[3] += rows.iter().map(|r| r.cells.len() as u64).sum::<u64>();
    }

    fn check<T: PartialEq + Debug>(
        &self,
        what: &str,
        model: &Result<T, Kind>,
        engine: &Result<T, Error>,
    ) {
        let same = match (model, engine) {
            (Ok(m), Ok(e)) => m == e,
            (Err(k), Err(e)) => *k == Kind::of(e),
            _ => false,
        };
        if !same {
            self.fail(
                what,
                format!(
                    "model:  {}\nengine: {}",
                    shorten(format!("{model:#?}"), 30_000),
                    shorten(format!("{engine:#?}"), 30_000)
                ),
            );
        }
    }

    fn read_all(&self, instance: &str, table: &str, req: ReadRequest) -> Result<Vec<Row>, Error> {
        let mut stream = self.engine().read_rows(instance, table, req)?;
        let rows = stream.by_ref().collect::<Result<Vec<Row>, Error>>();
        self.seeks.set(self.seeks.get() + stream.stats().seeks);
        rows
    }

    /// Compares the schema and every visible cell of every table.
    fn full_check(&self, why: &str) {
        let now = self.now();
        let what = format!("full-state check ({why})");
        self.check(
            &format!("{what}: list_instances"),
            &Ok(self.model.list_instances()),
            &self.engine().list_instances(),
        );
        for inst in INSTANCES {
            self.check(
                &format!("{what}: list_tables {inst}"),
                &Ok(self.model.list_tables(inst)),
                &self.engine().list_tables(inst),
            );
        }
        for (inst, table) in self.model.table_names() {
            for reversed in [false, true] {
                let req = ReadRequest {
                    reversed,
                    ..ReadRequest::default()
                };
                self.check(
                    &format!("{what}: read_rows {inst}/{table} reversed={reversed}"),
                    &self.model.read_rows(&inst, &table, &req, now),
                    &self.read_all(&inst, &table, req.clone()),
                );
            }
        }
    }

    fn reopen(&mut self) {
        drop(self.engine.take());
        self.engine = Some(open(&self.dir, self.clock.clone()));
        self.full_check("after reopen");
    }

    fn step(&mut self, op: Op) {
        let now = self.now();
        let what = shorten(format!("{op:?}"), 2_000);
        self.log.push(what.clone());
        let m = &mut self.model;
        match op {
            Op::CreateTable {
                instance,
                table,
                spec,
            } => {
                let mr = m.create_table(&instance, &table, &spec);
                let er = self.engine().create_table(&instance, &table, spec);
                self.check(&what, &mr, &er);
                self.count("create_table", &er, &[]);
            }
            Op::DeleteTable { instance, table } => {
                let mr = m.delete_table(&instance, &table);
                let er = self.engine().delete_table(&instance, &table);
                self.check(&what, &mr, &er);
                self.count("delete_table", &er, &[]);
            }
            Op::ModifyFamilies {
                instance,
                table,
                changes,
            } => {
                let mr = m.modify_families(&instance, &table, &changes);
                let er = self.engine().modify_families(&instance, &table, &changes);
                self.check(&what, &mr, &er);
                self.count("modify_families", &er, &[]);
            }
            Op::GetTable { instance, table } => {
                let mr = m.get_table(&instance, &table);
                let er = self.engine().get_table(&instance, &table);
                self.check(&what, &mr, &er);
                self.count("get_table", &er, &[]);
            }
            Op::ListTables { instance } => {
                let mr = Ok(m.list_tables(&instance));
                let er = self.engine().list_tables(&instance);
                self.check(&what, &mr, &er);
                self.count("list_tables", &er, &[]);
            }
            Op::MutateRow {
                instance,
                table,
                key,
                mutations,
            } => {
                let mr = m.mutate_row(&instance, &table, &key, &mutations, now);
                let er = self
                    .engine()
                    .mutate_row(&instance, &table, &key, &mutations);
                self.check(&what, &mr, &er);
                self.count("mutate_row", &er, &[]);
            }
            Op::MutateRows {
                instance,
                table,
                entries,
            } => {
                let mr = m.mutate_rows(&instance, &table, &entries, now);
                let er = self.engine().mutate_rows(&instance, &table, &entries);
                // Per-entry statuses compared by kind.
                let mr = mr.map(|v| v.into_iter().map(|r| r.err()).collect::<Vec<_>>());
                let er = er.map(|v| {
                    v.into_iter()
                        .map(|r| r.err().map(|e| Kind::of(&e)))
                        .collect::<Vec<_>>()
                });
                self.check(&what, &mr, &er);
                self.count("mutate_rows", &er, &[]);
            }
            Op::CheckAndMutate {
                instance,
                table,
                key,
                predicate,
                on_match,
                on_miss,
            } => {
                let mr = m.check_and_mutate(
                    &instance,
                    &table,
                    &key,
                    predicate.as_ref(),
                    &on_match,
                    &on_miss,
                    now,
                );
                let er = self.engine().check_and_mutate(
                    &instance,
                    &table,
                    &key,
                    predicate.as_ref(),
                    &on_match,
                    &on_miss,
                );
                self.check(&what, &mr, &er);
                self.count("check_and_mutate", &er, &[]);
            }
            Op::ReadModifyWrite {
                instance,
                table,
                key,
                rules,
            } => {
                let mr = m.read_modify_write(&instance, &table, &key, &rules, now);
                let er = self
                    .engine()
                    .read_modify_write(&instance, &table, &key, &rules);
                self.check(&what, &mr, &er);
                self.count(
                    "read_modify_write",
                    &er,
                    &er.as_ref().into_iter().collect::<Vec<_>>(),
                );
            }
            Op::ReadRows {
                instance,
                table,
                request,
            } => {
                let mr = m.read_rows(&instance, &table, &request, now);
                let er = self.read_all(&instance, &table, request);
                self.check(&what, &mr, &er);
                self.count(
                    "read_rows",
                    &er,
                    &er.as_ref()
                        .map(|v| v.iter().collect::<Vec<_>>())
                        .unwrap_or_default(),
                );
            }
            Op::ReadRow {
                instance,
                table,
                key,
                filter,
            } => {
                let mr = m.read_row(&instance, &table, &key, filter.as_ref(), now);
                let er = self
                    .engine()
                    .read_row(&instance, &table, &key, filter.as_ref());
                self.check(&what, &mr, &er);
                self.count(
                    "read_row",
                    &er,
                    &er.as_ref()
                        .ok()
                        .and_then(Option::as_ref)
                        .into_iter()
                        .collect::<Vec<_>>(),
                );
            }
            Op::DropRows {
                instance,
                table,
                which,
            } => {
                let mr = m.drop_rows(&instance, &table, &which);
                let er = self.engine().drop_rows(&instance, &table, &which);
                self.check(&what, &mr, &er);
                self.count("drop_rows", &er, &[]);
            }
            Op::Sweep => {
                m.sweep(now);
                let er = self.engine().sweep().map(|_| ());
                self.check(&what, &Ok(()), &er);
            }
            Op::Advance(d) => self.clock.advance(d),
            Op::Reopen => self.reopen(),
        }
    }
}

fn run_seed(seed: u64, ops: usize) {
    eprintln!("seed {seed}");
    let _guard = SeedGuard(seed);
    let mut h = Harness::new(seed);
    let mut g = Gen::new(seed);
    for i in 0..ops {
        h.op_no = i;
        let op = model::r#gen::op(&mut g, &h.model, h.now());
        h.step(op);
        if (i + 1) % FULL_CHECK_EVERY == 0 {
            h.full_check("periodic");
        }
    }
    h.full_check("end");
    eprintln!("  read seeks {}", h.seeks.get());
    for (kind, [ok, err, rows, cells]) in &h.stats {
        eprintln!("  {kind:<18} ok {ok:>5}  err {err:>5}  rows {rows:>6}  cells {cells:>7}");
    }
    h.reopen();
    drop(h.engine.take());
    let _ = std::fs::remove_dir_all(&h.dir);
}

#[test]
fn engine_matches_reference_model() {
    let ops = env_num("ALMANAC_MODEL_OPS").unwrap_or(3000) as usize;
    let seeds: Vec<u64> = match env_num("ALMANAC_MODEL_SEED") {
        Some(s) => vec![s],
        None => (1..=env_num("ALMANAC_MODEL_SEEDS").unwrap_or(8)).collect(),
    };
    for seed in seeds {
        run_seed(seed, ops);
    }
}
