//! Random operations for the differential test: small alphabets so that rows,
//! columns and timestamps collide, and a share of invalid requests.

use std::ops::Bound;

use almanac_engine::filter::{CompiledFilter, RowFilter};
use almanac_engine::mutation::{AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule};
use almanac_engine::rowset::{RowRange, RowSet};
use almanac_engine::schema::{
    Aggregate, FamilyChange, FamilySpec, GcRule, Granularity, TableSpec, ValueType,
};
use almanac_engine::{DropRows, ReadRequest, RowMutations};

use super::{Model, TableView};

/// SplitMix64: a small deterministic generator (the crate has no `rand`).
#[derive(Debug, Clone)]
pub struct Gen {
    state: u64,
    /// The clock when the current operation is generated.
    pub now_us: i64,
}

impl Gen {
    pub fn new(seed: u64) -> Self {
        Self {
            state: seed ^ 0xA13A_AC00_D1FF,
            now_us: 0,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn pct(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo) as u64 + 1)) as i64
    }

    /// Index chosen by weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = (self.next_u64() % u64::from(total)) as u32;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

pub const INSTANCES: [&str; 2] = ["i1", "i2"];
pub const TABLES: [&str; 3] = ["t1", "t2", "t3"];
const BAD_TABLES: [&str; 3] = ["", "-x", "a b"];
pub const FAMILIES: [&str; 5] = ["cf", "f1", "f2", "agg", "n"];
const BAD_FAMILIES: [&str; 3] = ["", "a:b", "x y"];
pub const ROW_KEYS: [&[u8]; 10] = [
    b"a",
    b"ab",
    b"abc",
    b"a\0",
    b"b",
    b"b\0",
    b"\xff",
    b"\xff\xff",
    b"\0",
    b"c",
];
const QUALIFIERS: [&[u8]; 9] = [b"", b"q", b"q1", b"q2", b"qq", b"a", b"\0", b"\xff", b"q\0"];
const PREFIXES: [&[u8]; 6] = [b"a", b"b", b"\xff", b"ab", b"a\0", b"\0"];
const BYTE_REGEXES: [&[u8]; 16] = [
    b"a.*", b"[ab]", b".*", b"q\\d", b"q", b"", b"q.*", b"q+", b"qq?", b"a|q", b"q1?", b"\xff.*",
    b"(?i)Q1", b"q[12]", b"\\C*", b"a\\C",
];
const BAD_REGEXES: [&[u8]; 3] = [b"(", b"[a", b"a)"];
const FAMILY_REGEXES: [&str; 7] = ["cf", "f.", ".*", "a.*", "f1|agg", "n", "c"];
const LABELS: [&str; 3] = ["x", "lab-1", "y2"];

/// One operation of the differential test.
#[derive(Debug, Clone)]
pub enum Op {
    CreateTable {
        instance: String,
        table: String,
        spec: TableSpec,
    },
    DeleteTable {
        instance: String,
        table: String,
    },
    ModifyFamilies {
        instance: String,
        table: String,
        changes: Vec<FamilyChange>,
    },
    GetTable {
        instance: String,
        table: String,
    },
    ListTables {
        instance: String,
    },
    MutateRow {
        instance: String,
        table: String,
        key: Vec<u8>,
        mutations: Vec<Mutation>,
    },
    MutateRows {
        instance: String,
        table: String,
        entries: Vec<RowMutations>,
    },
    CheckAndMutate {
        instance: String,
        table: String,
        key: Vec<u8>,
        predicate: Option<RowFilter>,
        on_match: Vec<Mutation>,
        on_miss: Vec<Mutation>,
    },
    ReadModifyWrite {
        instance: String,
        table: String,
        key: Vec<u8>,
        rules: Vec<ReadModifyWriteRule>,
    },
    ReadRows {
        instance: String,
        table: String,
        request: ReadRequest,
    },
    ReadRow {
        instance: String,
        table: String,
        key: Vec<u8>,
        filter: Option<RowFilter>,
    },
    DropRows {
        instance: String,
        table: String,
        which: DropRows,
    },
    Sweep,
    Advance(i64),
    Reopen,
}

/// Generates the next operation, biased towards tables and families that exist.
pub fn op(g: &mut Gen, model: &Model, now_us: i64) -> Op {
    g.now_us = now_us;
    let views = model.views();
    let few_tables = views.len() < 2;
    let w = [
        if few_tables { 30 } else { 3 }, // create table
        1,                               // delete table
        4,                               // modify families
        2,                               // get / list
        30,                              // mutate_row
        10,                              // mutate_rows
        8,                               // check_and_mutate
        8,                               // read_modify_write
        16,                              // read_rows
        6,                               // read_row
        3,                               // sweep
        8,                               // advance
        1,                               // drop rows
        1,                               // reopen
    ];
    let t = target(g, &views);
    let (instance, table) = (t.instance.clone(), t.name.clone());
    match g.weighted(&w) {
        0 => {
            let n = if g.pct(10) { 0 } else { g.range(1, 4) as usize };
            let mut families: Vec<(String, FamilySpec)> = Vec::new();
            for _ in 0..n {
                let name = family_name(g);
                // Mostly distinct names; a duplicate now and then (invalid).
                if families.iter().any(|(f, _)| *f == name) && g.pct(85) {
                    continue;
                }
                families.push((name, family_spec(g)));
            }
            let granularity = if g.pct(70) {
                Granularity::Millis
            } else {
                Granularity::Micros
            };
            let table = if g.pct(4) {
                g.pick(&BAD_TABLES).to_string()
            } else {
                g.pick(&TABLES).to_string()
            };
            Op::CreateTable {
                instance: g.pick(&INSTANCES).to_string(),
                table,
                spec: TableSpec {
                    families,
                    granularity,
                    deletion_protection: false,
                    change_retention_us: None,
                },
            }
        }
        1 => Op::DeleteTable { instance, table },
        2 => {
            let n = if g.pct(5) { 0 } else { g.range(1, 3) as usize };
            let changes = (0..n)
                .map(|_| {
                    let existing = !t.families.is_empty() && g.pct(85);
                    let name = if existing {
                        g.pick(&t.families).0.clone()
                    } else {
                        family_name(g)
                    };
                    match g.weighted(&[4, 3, 1, 2]) {
                        0 => {
                            // Mostly a name the table lacks.
                            let name = if g.pct(80) {
                                let free: Vec<&str> = FAMILIES
                                    .iter()
                                    .copied()
                                    .filter(|f| t.families.iter().all(|(n, _)| n != f))
                                    .collect();
                                if free.is_empty() {
                                    name
                                } else {
                                    g.pick(&free).to_string()
                                }
                            } else {
                                name
                            };
                            FamilyChange::Create(name, family_spec(g))
                        }
                        1 => FamilyChange::Update(name, gc_rule(g, 0)),
                        2 => FamilyChange::SetValueType(name, family_spec(g).value_type),
                        _ => FamilyChange::Drop(name),
                    }
                })
                .collect();
            Op::ModifyFamilies {
                instance,
                table,
                changes,
            }
        }
        3 => {
            if g.pct(50) {
                Op::GetTable { instance, table }
            } else {
                Op::ListTables {
                    instance: g.pick(&INSTANCES).to_string(),
                }
            }
        }
        4 => Op::MutateRow {
            instance,
            table,
            key: row_key(g),
            mutations: if g.pct(8) {
                dense(g, &t, now_us)
            } else {
                mutations(g, &t, now_us, 1, 6)
            },
        },
        5 => {
            let n = if g.pct(3) { 0 } else { g.range(1, 5) as usize };
            let entries = (0..n)
                .map(|_| RowMutations {
                    key: row_key(g),
                    mutations: if g.pct(3) {
                        vec![]
                    } else {
                        mutations(g, &t, now_us, 1, 4)
                    },
                })
                .collect();
            Op::MutateRows {
                instance,
                table,
                entries,
            }
        }
        6 => {
            let predicate = if g.pct(20) {
                None
            } else {
                Some(some_filter(g))
            };
            let on_match = if g.pct(20) {
                vec![]
            } else {
                mutations(g, &t, now_us, 1, 3)
            };
            let on_miss = if g.pct(20) {
                vec![]
            } else {
                mutations(g, &t, now_us, 1, 3)
            };
            Op::CheckAndMutate {
                instance,
                table,
                key: row_key(g),
                predicate,
                on_match,
                on_miss,
            }
        }
        7 => {
            let n = if g.pct(3) { 0 } else { g.range(1, 4) as usize };
            let rules = (0..n)
                .map(|_| {
                    let family = family_for(g, &t, |v| v == ValueType::Bytes);
                    let op = if g.pct(50) {
                        ReadModifyWriteOp::Append(g.pick(&[&b""[..], b"x", b"yz", b"\0"]).to_vec())
                    } else {
                        ReadModifyWriteOp::Increment(*g.pick(&[0, 1, -1, 5, 1 << 40, i64::MAX]))
                    };
                    ReadModifyWriteRule {
                        family,
                        qualifier: qualifier(g),
                        op,
                    }
                })
                .collect();
            Op::ReadModifyWrite {
                instance,
                table,
                key: row_key(g),
                rules,
            }
        }
        8 => Op::ReadRows {
            instance,
            table,
            request: ReadRequest {
                rows: row_set(g),
                filter: if g.pct(40) {
                    None
                } else {
                    Some(some_filter(g))
                },
                limit: if g.pct(65) {
                    None
                } else {
                    Some(g.below(4) as u64)
                },
                reversed: g.pct(35),
            },
        },
        9 => Op::ReadRow {
            instance,
            table,
            key: row_key(g),
            filter: if g.pct(40) {
                None
            } else {
                Some(some_filter(g))
            },
        },
        10 => Op::Sweep,
        11 => Op::Advance(match g.weighted(&[50, 30, 15, 5]) {
            0 => g.range(0, 3_000),
            1 => g.range(0, 2_000_000),
            2 => g.range(1_000_000, 120_000_000),
            _ => g.range(3_600_000_000, 3 * 3_600_000_000),
        }),
        12 => Op::DropRows {
            instance,
            table,
            which: if g.pct(25) {
                DropRows::All
            } else if g.pct(5) {
                DropRows::Prefix(vec![])
            } else {
                DropRows::Prefix(g.pick(&PREFIXES).to_vec())
            },
        },
        _ => Op::Reopen,
    }
}

/// A table to aim at: usually an existing one, sometimes a missing or bad name.
fn target(g: &mut Gen, views: &[TableView]) -> TableView {
    if !views.is_empty() && g.pct(92) {
        return g.pick(views).clone();
    }
    let name = if g.pct(10) {
        g.pick(&BAD_TABLES)
    } else {
        g.pick(&TABLES)
    };
    TableView {
        instance: g.pick(&INSTANCES).to_string(),
        name: name.to_string(),
        granularity: Granularity::Millis,
        families: vec![],
    }
}

fn family_name(g: &mut Gen) -> String {
    if g.pct(4) {
        g.pick(&BAD_FAMILIES).to_string()
    } else {
        g.pick(&FAMILIES).to_string()
    }
}

fn family_spec(g: &mut Gen) -> FamilySpec {
    let value_type = match g.weighted(&[60, 14, 13, 13]) {
        0 => ValueType::Bytes,
        1 => ValueType::Aggregate(Aggregate::Sum),
        2 => ValueType::Aggregate(Aggregate::Min),
        _ => ValueType::Aggregate(Aggregate::Max),
    };
    FamilySpec {
        gc_rule: gc_rule(g, 0),
        value_type,
    }
}

const MAX_AGES: [i64; 5] = [1_000, 5_000, 1_000_000, 60_000_000, 3_600_000_000];

fn gc_rule(g: &mut Gen, depth: u32) -> GcRule {
    if g.pct(3) {
        return g
            .pick(&[
                GcRule::MaxVersions(0),
                GcRule::MaxAge { max_age_us: 1_500 },
                GcRule::MaxAge { max_age_us: 0 },
                GcRule::MaxAge { max_age_us: -1000 },
            ])
            .clone();
    }
    let composite = if depth < 2 { 30 } else { 0 };
    match g.weighted(&[25, 25, 25, composite, composite]) {
        0 => GcRule::KeepAll,
        1 => GcRule::MaxVersions(g.range(1, 4) as u32),
        2 => GcRule::MaxAge {
            max_age_us: *g.pick(&MAX_AGES),
        },
        3 => GcRule::Union((0..g.below(4)).map(|_| gc_rule(g, depth + 1)).collect()),
        _ => GcRule::Intersection((0..g.below(4)).map(|_| gc_rule(g, depth + 1)).collect()),
    }
}

pub fn row_key(g: &mut Gen) -> Vec<u8> {
    match g.weighted(&[400, 3, 1]) {
        0 => g.pick(&ROW_KEYS).to_vec(),
        1 => vec![],
        _ => vec![b'k'; 4097],
    }
}

fn qualifier(g: &mut Gen) -> Vec<u8> {
    if g.below(400) == 0 {
        vec![b'q'; 16 * 1024 + 1]
    } else {
        g.pick(&QUALIFIERS).to_vec()
    }
}

fn value(g: &mut Gen) -> Vec<u8> {
    match g.weighted(&[5, 3, 1]) {
        0 => g
            .pick(&[&b""[..], b"v", b"va", b"a", b"\xff\xff", b"q1", b"\0v"])
            .to_vec(),
        1 => g.pick(&[0i64, 1, -5, 42, i64::MAX]).to_be_bytes().to_vec(),
        _ => g.pick(&[&b"vvvvvvvv"[..], b"12345678", b"v\nv"]).to_vec(),
    }
}

/// A family name for a mutation: usually one of the table's of the wanted type.
fn family_for(g: &mut Gen, t: &TableView, want: impl Fn(ValueType) -> bool) -> String {
    let good: Vec<&String> = t
        .families
        .iter()
        .filter(|(_, v)| want(*v))
        .map(|(n, _)| n)
        .collect();
    if !good.is_empty() && g.pct(96) {
        return g.pick(&good).to_string();
    }
    if !t.families.is_empty() && g.pct(50) {
        return g.pick(&t.families).0.clone();
    }
    if g.pct(30) {
        "zz".into()
    } else {
        g.pick(&FAMILIES).to_string()
    }
}

/// A timestamp for a write: mostly valid and colliding, sometimes invalid.
fn timestamp(g: &mut Gen, t: &TableView, now_us: i64) -> i64 {
    let now_ms = now_us - now_us.rem_euclid(1000);
    let sub_ms = if t.granularity == Granularity::Micros {
        8
    } else {
        1
    };
    match g.weighted(&[30, 40, 10, sub_ms, 1, 4, 2, 3]) {
        0 => -1,
        1 => now_ms - 1000 * *g.pick(&[0, 1, 2, 3, 10, 1000, 60_000, 7_200_000]),
        2 => *g.pick(&[0, 1000, 2000, 5000]),
        3 => {
            // Sub-millisecond: valid only on MICROS tables.
            let micros = if t.granularity == Granularity::Micros {
                3
            } else {
                1
            };
            now_ms - g.range(1, 999) * micros
        }
        4 => *g.pick(&[-2, -1000]),
        5 => now_ms + 1_000_000_000,
        6 => i64::MAX - 807,
        _ => now_us,
    }
}

fn aggregate_input(g: &mut Gen) -> AggregateInput {
    match g.weighted(&[96, 3, 1]) {
        0 => AggregateInput::Int(*g.pick(&[0, 1, -1, 7, 100, i64::MAX, i64::MIN])),
        1 => AggregateInput::Bytes(3i64.to_be_bytes().to_vec()),
        _ => AggregateInput::Bytes(vec![1, 2, 3]),
    }
}

pub fn mutations(g: &mut Gen, t: &TableView, now_us: i64, lo: i64, hi: i64) -> Vec<Mutation> {
    let n = g.range(lo, hi) as usize;
    (0..n).map(|_| mutation(g, t, now_us)).collect()
}

/// Many versions of a few columns in one row, so reads skip and seek.
fn dense(g: &mut Gen, t: &TableView, now_us: i64) -> Vec<Mutation> {
    let now_ms = now_us - now_us.rem_euclid(1000);
    let families: Vec<&String> = t
        .families
        .iter()
        .filter(|(_, v)| *v == ValueType::Bytes)
        .map(|(n, _)| n)
        .collect();
    if families.is_empty() {
        return mutations(g, t, now_us, 1, 6);
    }
    let n = g.range(8, 40);
    (0..n)
        .map(|i| Mutation::SetCell {
            family: g.pick(&families).to_string(),
            qualifier: g.pick(&QUALIFIERS[..6]).to_vec(),
            timestamp_us: now_ms - 1000 * (i + g.range(0, 3)),
            value: value(g),
        })
        .collect()
}

fn mutation(g: &mut Gen, t: &TableView, now_us: i64) -> Mutation {
    let is_agg = |v: ValueType| matches!(v, ValueType::Aggregate(_));
    // Mostly mutations the table has a family for.
    let has_bytes = t.families.iter().any(|(_, v)| *v == ValueType::Bytes);
    let has_agg = t.families.iter().any(|(_, v)| is_agg(*v));
    let (set, add, merge) = match (has_bytes, has_agg) {
        (true, true) => (45, 20, 8),
        (true, false) => (60, 1, 1),
        (false, true) => (2, 40, 15),
        (false, false) => (2, 1, 1),
    };
    let delete = if t.families.is_empty() { 1 } else { 15 };
    match g.weighted(&[set, delete, delete / 3, 3, add, merge]) {
        0 => Mutation::SetCell {
            family: family_for(g, t, |v| v == ValueType::Bytes),
            qualifier: qualifier(g),
            timestamp_us: timestamp(g, t, now_us),
            value: value(g),
        },
        1 => {
            let start_us = match timestamp(g, t, now_us) {
                _ if g.pct(40) => 0,
                -1 if g.pct(80) => 0,
                ts => ts,
            };
            let end_us = if g.pct(40) {
                None
            } else if g.pct(5) {
                // Anything: maybe negative, empty or inverted, which Bigtable rejects.
                Some(timestamp(g, t, now_us))
            } else {
                let span = 1000 * *g.pick(&[1, 2, 3, 5, 1000, 100_000, 10_000_000]);
                Some(start_us.max(0).saturating_add(span))
            };
            Mutation::DeleteFromColumn {
                family: family_for(g, t, |_| true),
                qualifier: qualifier(g),
                start_us,
                end_us,
            }
        }
        2 => Mutation::DeleteFromFamily {
            family: family_for(g, t, |_| true),
        },
        3 => Mutation::DeleteFromRow,
        4 => Mutation::AddToCell {
            family: family_for(g, t, is_agg),
            qualifier: qualifier(g),
            timestamp_us: timestamp(g, t, now_us),
            input: aggregate_input(g),
        },
        _ => Mutation::MergeToCell {
            family: family_for(g, t, is_agg),
            qualifier: qualifier(g),
            timestamp_us: timestamp(g, t, now_us),
            input: aggregate_input(g),
        },
    }
}

fn key_bound(g: &mut Gen, items: &[&[u8]]) -> Bound<Vec<u8>> {
    match g.weighted(&[2, 2, 1]) {
        0 => Bound::Included(g.pick(items).to_vec()),
        1 => Bound::Excluded(g.pick(items).to_vec()),
        _ => Bound::Unbounded,
    }
}

fn row_set(g: &mut Gen) -> RowSet {
    if g.pct(30) {
        return RowSet::all();
    }
    let keys = (0..g.below(4)).map(|_| row_key(g)).collect();
    let mut ranges = Vec::new();
    for _ in 0..g.below(3) {
        let mut r = RowRange {
            start: key_bound(g, &ROW_KEYS),
            end: key_bound(g, &ROW_KEYS),
        };
        // Mostly well-ordered ranges; an inverted one now and then.
        if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
            (&mut r.start, &mut r.end)
            && s > e
            && g.pct(85)
        {
            std::mem::swap(s, e);
        }
        if g.pct(10) {
            let prefix: &&[u8] = g.pick(&PREFIXES);
            r = RowRange::prefix(prefix);
        }
        ranges.push(r);
    }
    RowSet { keys, ranges }
}

fn byte_regex(g: &mut Gen) -> Vec<u8> {
    if g.pct(3) {
        g.pick(&BAD_REGEXES).to_vec()
    } else {
        g.pick(&BYTE_REGEXES).to_vec()
    }
}

/// A random filter: mostly one that compiles (invalid ones get a few retries).
pub fn some_filter(g: &mut Gen) -> RowFilter {
    let mut f = filter(g, 1);
    for _ in 0..4 {
        if CompiledFilter::compile(&f).is_ok() || g.pct(15) {
            break;
        }
        f = filter(g, 1);
    }
    f
}

/// A random filter of every kind but `row_sample`, nesting at most 3 deep.
pub fn filter(g: &mut Gen, depth: u32) -> RowFilter {
    let composite = if depth < 3 { 12 } else { 0 };
    let w = [
        composite * 2, // chain
        composite,     // interleave
        composite,     // condition
        1,             // sink
        2,             // pass
        1,             // block
        3,             // row key regex
        3,             // family regex
        6,             // qualifier regex
        6,             // column range
        6,             // timestamp range
        3,             // value regex
        3,             // value range
        3,             // offset
        3,             // row limit
        6,             // column limit
        2,             // strip
        3,             // label
    ];
    let children = |g: &mut Gen| (0..g.below(4)).map(|_| filter(g, depth + 1)).collect();
    match g.weighted(&w) {
        0 => RowFilter::Chain(children(g)),
        1 => RowFilter::Interleave(children(g)),
        2 => RowFilter::Condition {
            predicate: Box::new(filter(g, depth + 1)),
            true_filter: g.pct(80).then(|| Box::new(filter(g, depth + 1))),
            false_filter: g.pct(60).then(|| Box::new(filter(g, depth + 1))),
        },
        3 => RowFilter::Sink,
        4 => RowFilter::PassAll,
        5 => RowFilter::BlockAll,
        6 => RowFilter::RowKeyRegex(byte_regex(g)),
        7 => RowFilter::FamilyNameRegex(if g.pct(3) {
            "a:b".into()
        } else {
            g.pick(&FAMILY_REGEXES).to_string()
        }),
        8 => RowFilter::ColumnQualifierRegex(byte_regex(g)),
        9 => {
            let mut start = key_bound(g, &QUALIFIERS);
            let mut end = key_bound(g, &QUALIFIERS);
            if let (
                Bound::Included(s) | Bound::Excluded(s),
                Bound::Included(e) | Bound::Excluded(e),
            ) = (&mut start, &mut end)
                && s > e
                && g.pct(85)
            {
                std::mem::swap(s, e);
            }
            RowFilter::ColumnRange {
                family: if g.pct(3) {
                    String::new()
                } else {
                    g.pick(&FAMILIES).to_string()
                },
                start,
                end,
            }
        }
        10 => {
            // Bounds near the timestamps the writes use; 0 end = no bound.
            let now_ms = g.now_us - g.now_us.rem_euclid(1000);
            let points = [
                0,
                1000,
                now_ms - 60_000_000,
                now_ms - 3000,
                now_ms - 1000,
                now_ms,
                now_ms + 1000,
                now_ms + 1_000_000_000,
                i64::MAX - 807,
                now_ms - 1234,
            ];
            let mut start_us = *g.pick(&points);
            let mut end_us = if g.pct(30) {
                None
            } else {
                Some(*g.pick(&points))
            };
            if g.pct(3) {
                start_us = -1000;
            }
            if let Some(e) = end_us.as_mut()
                && *e < start_us
                && *e != 0
                && g.pct(85)
            {
                std::mem::swap(e, &mut start_us);
            }
            RowFilter::TimestampRange { start_us, end_us }
        }
        11 => RowFilter::ValueRegex(byte_regex(g)),
        12 => {
            let vals: [&[u8]; 6] = [b"", b"a", b"v", b"va", b"\0", b"\xff"];
            let mut start = key_bound(g, &vals);
            let mut end = key_bound(g, &vals);
            if let (
                Bound::Included(s) | Bound::Excluded(s),
                Bound::Included(e) | Bound::Excluded(e),
            ) = (&mut start, &mut end)
                && s > e
                && g.pct(85)
            {
                std::mem::swap(s, e);
            }
            RowFilter::ValueRange { start, end }
        }
        13 => RowFilter::CellsPerRowOffset(g.below(4) as u32),
        14 => RowFilter::CellsPerRowLimit(g.below(4) as u32),
        15 => RowFilter::CellsPerColumnLimit(g.below(4) as u32),
        16 => RowFilter::StripValue,
        _ => RowFilter::ApplyLabel(if g.pct(3) {
            "Bad".into()
        } else {
            g.pick(&LABELS).to_string()
        }),
    }
}
