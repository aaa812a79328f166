//! A reference model of the engine: plain `BTreeMap`s, no storage, no pushdown.
//!
//! Cells are stored per row as `(family uid, qualifier, Reverse(ts)) -> value`,
//! where the family uid grows with every family creation (so it sorts in creation
//! order, and a re-created family starts empty). GC is applied on read exactly as
//! the data model says: per column, newest first, a cell with version index `i` is
//! hidden when the family's rule `collects(i, ts, now)`. Filters run on the whole
//! GC'd row through `CompiledFilter::apply` (no read plan), so the engine's pushdown
//! is checked against the unoptimized meaning.

pub mod r#gen;

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use almanac_engine::aggregate;
use almanac_engine::clock::Rng;
use almanac_engine::filter::{CompiledFilter, RowFilter};
use almanac_engine::mutation::{
    AggregateInput, Mutation, ReadModifyWriteOp, ReadModifyWriteRule, SERVER_TIME,
};
use almanac_engine::schema::{
    Aggregate, FamilyChange, FamilySpec, GcRule, Granularity, TableInfo, TableSpec, ValueType,
};
use almanac_engine::{Cell, DropRows, Error, ReadRequest, Row, RowMutations};

const MAX_ROW_KEY_BYTES: usize = 4 * 1024;
const MAX_QUALIFIER_BYTES: usize = 16 * 1024;
const MAX_VALUE_BYTES: usize = 100 * 1024 * 1024;
const MAX_GC_RULE_BYTES: usize = 500;

/// The class of an error: what the differential test compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Invalid,
    NotFound,
    AlreadyExists,
    Exhausted,
    Precondition,
    Storage,
    Corrupt,
}

impl Kind {
    pub fn of(e: &Error) -> Kind {
        match e {
            Error::Invalid(_) => Kind::Invalid,
            Error::NotFound { .. } => Kind::NotFound,
            Error::AlreadyExists { .. } => Kind::AlreadyExists,
            Error::Exhausted(_) | Error::DiskFull(_) => Kind::Exhausted,
            Error::Precondition(_) => Kind::Precondition,
            Error::Storage(_) => Kind::Storage,
            Error::Corrupt(_) => Kind::Corrupt,
        }
    }
}

pub type MResult<T> = Result<T, Kind>;

/// One stored cell's key within a row: family uid, qualifier, timestamp (newest first).
type CellKey = (u64, Vec<u8>, Reverse<i64>);
type MRow = BTreeMap<CellKey, Vec<u8>>;

#[derive(Debug, Clone)]
struct MFamily {
    name: String,
    spec: FamilySpec,
    uid: u64,
}

#[derive(Debug, Clone)]
struct MTable {
    granularity: Granularity,
    families: Vec<MFamily>,
    rows: BTreeMap<Vec<u8>, MRow>,
}

impl MTable {
    fn family(&self, name: &str) -> Option<&MFamily> {
        self.families.iter().find(|f| f.name == name)
    }

    fn family_by_uid(&self, uid: u64) -> &MFamily {
        self.families
            .iter()
            .find(|f| f.uid == uid)
            .expect("model keeps no cells of dropped families")
    }

    /// The timestamp `-1` stands for when writing at `now_us`.
    fn write_now(&self, now_us: i64) -> i64 {
        match self.granularity {
            Granularity::Millis => now_us - now_us.rem_euclid(1000),
            Granularity::Micros => now_us,
        }
    }

    fn info(&self, instance: &str, name: &str) -> TableInfo {
        TableInfo {
            instance: instance.to_owned(),
            name: name.to_owned(),
            families: self
                .families
                .iter()
                .map(|f| (f.name.clone(), f.spec.clone()))
                .collect(),
            granularity: self.granularity,
            deletion_protection: false,
            change_retention_us: None,
        }
    }

    /// The row's cells that no GC rule collects at `now_us`, in row order.
    fn visible(&self, row: &MRow, now_us: i64) -> Vec<Cell> {
        let mut out = Vec::new();
        let mut column: Option<(u64, &[u8])> = None;
        let mut index = 0usize;
        for ((uid, q, Reverse(ts)), v) in row {
            if column != Some((*uid, q.as_slice())) {
                column = Some((*uid, q.as_slice()));
                index = 0;
            }
            let fam = self.family_by_uid(*uid);
            let collected = fam.spec.gc_rule.collects(index, *ts, now_us);
            index += 1;
            if !collected {
                out.push(Cell {
                    family: Arc::from(fam.name.as_str()),
                    qualifier: Arc::from(q.as_slice()),
                    timestamp_us: *ts,
                    value: v.clone(),
                    labels: vec![],
                });
            }
        }
        out
    }

    fn visible_row(&self, key: &[u8], now_us: i64) -> Vec<Cell> {
        self.rows
            .get(key)
            .map(|r| self.visible(r, now_us))
            .unwrap_or_default()
    }

    fn check_ts(&self, ts: i64) -> MResult<()> {
        if ts == SERVER_TIME {
            return Ok(());
        }
        if ts < 0 {
            return Err(Kind::Invalid);
        }
        if self.granularity == Granularity::Millis && ts % 1000 != 0 {
            return Err(Kind::Invalid);
        }
        Ok(())
    }

    fn check_mutations(&self, key: &[u8], muts: &[Mutation]) -> MResult<()> {
        check_key(key)?;
        if muts.is_empty() {
            return Err(Kind::Invalid);
        }
        for m in muts {
            let fam = match m.family() {
                Some(name) => Some(self.family(name).ok_or(Kind::NotFound)?),
                None => None,
            };
            match m {
                Mutation::SetCell {
                    qualifier,
                    timestamp_us,
                    value,
                    ..
                } => {
                    check_qualifier(qualifier)?;
                    self.check_ts(*timestamp_us)?;
                    if value.len() > MAX_VALUE_BYTES {
                        return Err(Kind::Invalid);
                    }
                    if fam.is_some_and(|f| f.spec.value_type != ValueType::Bytes) {
                        return Err(Kind::Invalid);
                    }
                }
                Mutation::DeleteFromColumn {
                    qualifier,
                    start_us,
                    end_us,
                    ..
                } => {
                    check_qualifier(qualifier)?;
                    // Bigtable: start >= 0; an end, when set, >= 0 and after the start.
                    if *start_us < 0 {
                        return Err(Kind::Invalid);
                    }
                    self.check_ts(*start_us)?;
                    if let Some(end) = end_us {
                        if *end < 0 || end <= start_us {
                            return Err(Kind::Invalid);
                        }
                        self.check_ts(*end)?;
                    }
                }
                Mutation::DeleteFromFamily { .. } | Mutation::DeleteFromRow => {}
                Mutation::AddToCell {
                    qualifier,
                    timestamp_us,
                    input,
                    ..
                }
                | Mutation::MergeToCell {
                    qualifier,
                    timestamp_us,
                    input,
                    ..
                } => {
                    check_qualifier(qualifier)?;
                    self.check_ts(*timestamp_us)?;
                    match fam.map(|f| f.spec.value_type) {
                        Some(ValueType::Aggregate(
                            Aggregate::Sum | Aggregate::Min | Aggregate::Max,
                        )) => {
                            if let AggregateInput::Bytes(b) = input
                                && b.len() != 8
                            {
                                return Err(Kind::Invalid);
                            }
                        }
                        Some(ValueType::Aggregate(Aggregate::HllCountDistinct)) => {
                            unreachable!("the generator makes no HLL families")
                        }
                        _ => return Err(Kind::Invalid),
                    }
                }
            }
        }
        Ok(())
    }

    /// Applies validated mutations to one row.
    fn apply(&mut self, key: &[u8], muts: &[Mutation], now_us: i64) {
        let now_w = self.write_now(now_us);
        let ts_of = |ts: i64| if ts == SERVER_TIME { now_w } else { ts };
        let uid_of = |t: &MTable, name: &str| t.family(name).expect("validated").uid;
        let mut row = self.rows.remove(key).unwrap_or_default();
        for m in muts {
            match m {
                Mutation::SetCell {
                    family,
                    qualifier,
                    timestamp_us,
                    value,
                } => {
                    let uid = uid_of(self, family);
                    row.insert(
                        (uid, qualifier.clone(), Reverse(ts_of(*timestamp_us))),
                        value.clone(),
                    );
                }
                Mutation::DeleteFromColumn {
                    family,
                    qualifier,
                    start_us,
                    end_us,
                } => {
                    let uid = uid_of(self, family);
                    row.retain(|(u, q, Reverse(ts)), _| {
                        !(*u == uid
                            && q == qualifier
                            && *ts >= *start_us
                            && end_us.is_none_or(|e| *ts < e))
                    });
                }
                Mutation::DeleteFromFamily { family } => {
                    let uid = uid_of(self, family);
                    row.retain(|(u, _, _), _| *u != uid);
                }
                Mutation::DeleteFromRow => row.clear(),
                Mutation::AddToCell {
                    family,
                    qualifier,
                    timestamp_us,
                    input,
                }
                | Mutation::MergeToCell {
                    family,
                    qualifier,
                    timestamp_us,
                    input,
                } => {
                    let fam = self.family(family).expect("validated");
                    let ValueType::Aggregate(kind) = fam.spec.value_type else {
                        unreachable!("validated")
                    };
                    let ts = ts_of(*timestamp_us);
                    let k = (fam.uid, qualifier.clone(), Reverse(ts));
                    let merge = matches!(m, Mutation::MergeToCell { .. });
                    // A cell the GC rule collects is gone: the fold starts from nothing.
                    let newer = row
                        .range((fam.uid, qualifier.clone(), Reverse(i64::MAX))..k.clone())
                        .count();
                    let existing = row
                        .get(&k)
                        .filter(|_| !fam.spec.gc_rule.collects(newer, ts, now_us))
                        .map(Vec::as_slice);
                    let v = aggregate::fold(kind, family, merge, existing, input)
                        .expect("validated aggregate input");
                    row.insert(k, v);
                }
            }
        }
        if !row.is_empty() {
            self.rows.insert(key.to_vec(), row);
        }
    }
}

fn check_key(key: &[u8]) -> MResult<()> {
    if key.is_empty() || key.len() > MAX_ROW_KEY_BYTES {
        return Err(Kind::Invalid);
    }
    Ok(())
}

fn check_qualifier(q: &[u8]) -> MResult<()> {
    if q.len() > MAX_QUALIFIER_BYTES {
        return Err(Kind::Invalid);
    }
    Ok(())
}

fn check_table_id(id: &str) -> MResult<()> {
    let n = id.chars().count();
    if n == 0 || n > 50 {
        return Err(Kind::Invalid);
    }
    let mut it = id.chars();
    let first = it
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphanumeric());
    let rest = it.all(|c| c == '-' || c == '_' || c == '.' || c.is_ascii_alphanumeric());
    if first && rest {
        Ok(())
    } else {
        Err(Kind::Invalid)
    }
}

fn check_family_name(name: &str) -> MResult<()> {
    let n = name.chars().count();
    if n == 0
        || n > 64
        || !name
            .chars()
            .all(|c| c == '-' || c == '_' || c == '.' || c.is_ascii_alphanumeric())
    {
        return Err(Kind::Invalid);
    }
    Ok(())
}

fn check_gc_rule(rule: &GcRule) -> MResult<()> {
    fn values(rule: &GcRule) -> MResult<()> {
        match rule {
            GcRule::KeepAll => Ok(()),
            GcRule::MaxVersions(n) => {
                if *n == 0 {
                    Err(Kind::Invalid)
                } else {
                    Ok(())
                }
            }
            GcRule::MaxAge { max_age_us } => {
                if *max_age_us <= 0 || max_age_us % 1000 != 0 {
                    Err(Kind::Invalid)
                } else {
                    Ok(())
                }
            }
            GcRule::Union(r) | GcRule::Intersection(r) => r.iter().try_for_each(values),
        }
    }
    if rule.encoded_len() > MAX_GC_RULE_BYTES {
        return Err(Kind::Invalid);
    }
    values(rule)
}

/// On MILLIS tables, positive timestamp-range bounds must be whole milliseconds.
fn check_filter_timestamps(g: Granularity, f: &RowFilter) -> MResult<()> {
    match f {
        RowFilter::Chain(c) | RowFilter::Interleave(c) => {
            c.iter().try_for_each(|c| check_filter_timestamps(g, c))
        }
        RowFilter::Condition {
            predicate,
            true_filter,
            false_filter,
        } => {
            check_filter_timestamps(g, predicate)?;
            for b in [true_filter, false_filter].into_iter().flatten() {
                check_filter_timestamps(g, b)?;
            }
            Ok(())
        }
        RowFilter::TimestampRange { start_us, end_us } => {
            for ts in std::iter::once(*start_us).chain(*end_us) {
                if ts > 0 && g == Granularity::Millis && ts % 1000 != 0 {
                    return Err(Kind::Invalid);
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn compile(f: &RowFilter) -> MResult<CompiledFilter> {
    CompiledFilter::compile(f).map_err(|e| Kind::of(&e))
}

fn bound_bytes(b: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => Some(v),
        Bound::Unbounded => None,
    }
}

fn in_bounds(key: &[u8], start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    let lo = match start {
        Bound::Unbounded => true,
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
    };
    let hi = match end {
        Bound::Unbounded => true,
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
    };
    lo && hi
}

/// The reference model: every table of every instance.
#[derive(Debug, Clone, Default)]
pub struct Model {
    tables: BTreeMap<(String, String), MTable>,
    next_uid: u64,
}

/// What the generator needs to know about a table.
#[derive(Debug, Clone)]
pub struct TableView {
    pub instance: String,
    pub name: String,
    pub granularity: Granularity,
    pub families: Vec<(String, ValueType)>,
}

impl Model {
    fn table(&self, instance: &str, name: &str) -> MResult<&MTable> {
        self.tables
            .get(&(instance.to_owned(), name.to_owned()))
            .ok_or(Kind::NotFound)
    }

    fn table_mut(&mut self, instance: &str, name: &str) -> MResult<&mut MTable> {
        self.tables
            .get_mut(&(instance.to_owned(), name.to_owned()))
            .ok_or(Kind::NotFound)
    }

    fn new_family(&mut self, name: &str, spec: &FamilySpec) -> MFamily {
        self.next_uid += 1;
        MFamily {
            name: name.to_owned(),
            spec: spec.clone(),
            uid: self.next_uid,
        }
    }

    /// Tables for the generator, in (instance, name) order.
    pub fn views(&self) -> Vec<TableView> {
        self.tables
            .iter()
            .map(|((i, n), t)| TableView {
                instance: i.clone(),
                name: n.clone(),
                granularity: t.granularity,
                families: t
                    .families
                    .iter()
                    .map(|f| (f.name.clone(), f.spec.value_type))
                    .collect(),
            })
            .collect()
    }

    /// Every (instance, table) pair.
    pub fn table_names(&self) -> Vec<(String, String)> {
        self.tables.keys().cloned().collect()
    }

    pub fn create_table(
        &mut self,
        instance: &str,
        name: &str,
        spec: &TableSpec,
    ) -> MResult<TableInfo> {
        check_table_id(name)?;
        for (i, (fname, fspec)) in spec.families.iter().enumerate() {
            check_family_name(fname)?;
            check_gc_rule(&fspec.gc_rule)?;
            if spec.families[..i].iter().any(|(n, _)| n == fname) {
                return Err(Kind::Invalid);
            }
        }
        if self.table(instance, name).is_ok() {
            return Err(Kind::AlreadyExists);
        }
        let families = spec
            .families
            .iter()
            .map(|(n, s)| self.new_family(n, s))
            .collect();
        let t = MTable {
            granularity: spec.granularity,
            families,
            rows: BTreeMap::new(),
        };
        let info = t.info(instance, name);
        self.tables
            .insert((instance.to_owned(), name.to_owned()), t);
        Ok(info)
    }

    pub fn get_table(&self, instance: &str, name: &str) -> MResult<TableInfo> {
        Ok(self.table(instance, name)?.info(instance, name))
    }

    pub fn list_tables(&self, instance: &str) -> Vec<TableInfo> {
        self.tables
            .iter()
            .filter(|((i, _), _)| i == instance)
            .map(|((i, n), t)| t.info(i, n))
            .collect()
    }

    pub fn list_instances(&self) -> Vec<String> {
        let mut out: Vec<String> = self.tables.keys().map(|(i, _)| i.clone()).collect();
        out.dedup();
        out
    }

    pub fn delete_table(&mut self, instance: &str, name: &str) -> MResult<()> {
        self.table(instance, name)?;
        self.tables.remove(&(instance.to_owned(), name.to_owned()));
        Ok(())
    }

    pub fn modify_families(
        &mut self,
        instance: &str,
        name: &str,
        changes: &[FamilyChange],
    ) -> MResult<TableInfo> {
        let mut t = self.table(instance, name)?.clone();
        let mut next_uid = self.next_uid;
        for change in changes {
            match change {
                FamilyChange::Create(fname, spec) => {
                    check_family_name(fname)?;
                    check_gc_rule(&spec.gc_rule)?;
                    if t.family(fname).is_some() {
                        return Err(Kind::AlreadyExists);
                    }
                    next_uid += 1;
                    t.families.push(MFamily {
                        name: fname.clone(),
                        spec: spec.clone(),
                        uid: next_uid,
                    });
                }
                FamilyChange::Update(fname, rule) => {
                    check_gc_rule(rule)?;
                    let f = t
                        .families
                        .iter_mut()
                        .find(|f| &f.name == fname)
                        .ok_or(Kind::NotFound)?;
                    f.spec.gc_rule = rule.clone();
                }
                FamilyChange::SetValueType(fname, value_type) => {
                    let f = t
                        .families
                        .iter()
                        .find(|f| &f.name == fname)
                        .ok_or(Kind::NotFound)?;
                    if f.spec.value_type != *value_type {
                        return Err(Kind::Invalid);
                    }
                }
                FamilyChange::Drop(fname) => {
                    let at = t
                        .families
                        .iter()
                        .position(|f| &f.name == fname)
                        .ok_or(Kind::NotFound)?;
                    let uid = t.families.remove(at).uid;
                    for row in t.rows.values_mut() {
                        row.retain(|(u, _, _), _| *u != uid);
                    }
                    t.rows.retain(|_, r| !r.is_empty());
                }
            }
        }
        self.next_uid = next_uid;
        let info = t.info(instance, name);
        *self.table_mut(instance, name)? = t;
        Ok(info)
    }

    pub fn drop_rows(&mut self, instance: &str, name: &str, which: &DropRows) -> MResult<()> {
        match which {
            DropRows::All => self.table_mut(instance, name)?.rows.clear(),
            DropRows::Prefix(p) => {
                if p.is_empty() {
                    return Err(Kind::Invalid);
                }
                self.table_mut(instance, name)?
                    .rows
                    .retain(|k, _| !k.starts_with(p));
            }
        }
        Ok(())
    }

    pub fn mutate_row(
        &mut self,
        instance: &str,
        table: &str,
        key: &[u8],
        muts: &[Mutation],
        now_us: i64,
    ) -> MResult<()> {
        let t = self.table_mut(instance, table)?;
        t.check_mutations(key, muts)?;
        t.apply(key, muts, now_us);
        Ok(())
    }

    pub fn mutate_rows(
        &mut self,
        instance: &str,
        table: &str,
        entries: &[RowMutations],
        now_us: i64,
    ) -> MResult<Vec<MResult<()>>> {
        if entries.is_empty() {
            return Err(Kind::Invalid);
        }
        let t = self.table_mut(instance, table)?;
        let statuses: Vec<MResult<()>> = entries
            .iter()
            .map(|e| t.check_mutations(&e.key, &e.mutations))
            .collect();
        for (e, s) in entries.iter().zip(&statuses) {
            if s.is_ok() {
                t.apply(&e.key, &e.mutations, now_us);
            }
        }
        Ok(statuses)
    }

    pub fn check_and_mutate(
        &mut self,
        instance: &str,
        table: &str,
        key: &[u8],
        predicate: Option<&RowFilter>,
        on_match: &[Mutation],
        on_miss: &[Mutation],
        now_us: i64,
    ) -> MResult<bool> {
        check_key(key)?;
        if on_match.is_empty() && on_miss.is_empty() {
            return Err(Kind::Invalid);
        }
        let compiled = predicate.map(compile).transpose()?;
        let t = self.table_mut(instance, table)?;
        if let Some(p) = predicate {
            check_filter_timestamps(t.granularity, p)?;
        }
        for muts in [on_match, on_miss] {
            if !muts.is_empty() {
                t.check_mutations(key, muts)?;
            }
        }
        let cells = t.visible_row(key, now_us);
        let matched = match compiled {
            None => !cells.is_empty(),
            Some(f) => !cells.is_empty() && !f.apply(key, cells, &Rng::new(0)).is_empty(),
        };
        let muts = if matched { on_match } else { on_miss };
        if !muts.is_empty() {
            t.apply(key, muts, now_us);
        }
        Ok(matched)
    }

    pub fn read_modify_write(
        &mut self,
        instance: &str,
        table: &str,
        key: &[u8],
        rules: &[ReadModifyWriteRule],
        now_us: i64,
    ) -> MResult<Row> {
        check_key(key)?;
        if rules.is_empty() {
            return Err(Kind::Invalid);
        }
        let t = self.table_mut(instance, table)?;
        for r in rules {
            check_qualifier(&r.qualifier)?;
            let f = t.family(&r.family).ok_or(Kind::NotFound)?;
            if f.spec.value_type != ValueType::Bytes {
                return Err(Kind::Invalid);
            }
        }
        // Latest visible cell of each column.
        let mut latest: BTreeMap<(String, Vec<u8>), (i64, Vec<u8>)> = BTreeMap::new();
        for c in t.visible_row(key, now_us) {
            latest
                .entry((c.family.to_string(), c.qualifier.to_vec()))
                .or_insert((c.timestamp_us, c.value));
        }
        let now_w = t.write_now(now_us);
        let mut muts = Vec::new();
        let mut touched: Vec<(String, Vec<u8>)> = Vec::new();
        for r in rules {
            let slot = (r.family.clone(), r.qualifier.clone());
            let (old_ts, old) = match latest.get(&slot) {
                Some((ts, v)) => (*ts, Some(v.clone())),
                None => (i64::MIN, None),
            };
            let value = match &r.op {
                ReadModifyWriteOp::Append(suffix) => {
                    let mut v = old.unwrap_or_default();
                    v.extend_from_slice(suffix);
                    v
                }
                ReadModifyWriteOp::Increment(by) => {
                    let cur = match old {
                        None => 0,
                        Some(b) => {
                            let a: [u8; 8] = b.as_slice().try_into().map_err(|_| Kind::Invalid)?;
                            i64::from_be_bytes(a)
                        }
                    };
                    cur.wrapping_add(*by).to_be_bytes().to_vec()
                }
            };
            let ts = old_ts.max(now_w);
            latest.insert(slot.clone(), (ts, value.clone()));
            if !touched.contains(&slot) {
                touched.push(slot);
            }
            muts.push(Mutation::SetCell {
                family: r.family.clone(),
                qualifier: r.qualifier.clone(),
                timestamp_us: ts,
                value,
            });
        }
        t.apply(key, &muts, now_us);
        let mut cells: Vec<(u64, Cell)> = touched
            .into_iter()
            .map(|(f, q)| {
                let uid = t.family(&f).expect("validated").uid;
                let (ts, v) = latest[&(f.clone(), q.clone())].clone();
                (
                    uid,
                    Cell {
                        family: Arc::from(f.as_str()),
                        qualifier: Arc::from(q.as_slice()),
                        timestamp_us: ts,
                        value: v,
                        labels: vec![],
                    },
                )
            })
            .collect();
        cells.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| a.1.qualifier.cmp(&b.1.qualifier))
        });
        Ok(Row {
            key: key.to_vec(),
            cells: cells.into_iter().map(|(_, c)| c).collect(),
        })
    }

    pub fn read_rows(
        &self,
        instance: &str,
        table: &str,
        req: &ReadRequest,
        now_us: i64,
    ) -> MResult<Vec<Row>> {
        for r in &req.rows.ranges {
            if let (Some(s), Some(e)) = (bound_bytes(&r.start), bound_bytes(&r.end))
                && s > e
            {
                return Err(Kind::Invalid);
            }
        }
        for k in &req.rows.keys {
            check_key(k)?;
        }
        let t = self.table(instance, table)?;
        if let Some(f) = &req.filter {
            check_filter_timestamps(t.granularity, f)?;
        }
        let filter = req.filter.as_ref().map(compile).transpose()?;
        let all = req.rows.keys.is_empty() && req.rows.ranges.is_empty();
        let wanted = |k: &[u8]| {
            all || req.rows.keys.iter().any(|x| x == k)
                || req
                    .rows
                    .ranges
                    .iter()
                    .any(|r| in_bounds(k, &r.start, &r.end))
        };
        let limit = req
            .limit
            .filter(|&n| n > 0)
            .map_or(usize::MAX, |n| n as usize);
        let rows: Box<dyn Iterator<Item = (&Vec<u8>, &MRow)>> = if req.reversed {
            Box::new(t.rows.iter().rev())
        } else {
            Box::new(t.rows.iter())
        };
        let mut out = Vec::new();
        for (k, row) in rows {
            if out.len() >= limit {
                break;
            }
            if !wanted(k) {
                continue;
            }
            let cells = t.visible(row, now_us);
            if cells.is_empty() {
                continue;
            }
            let cells = match &filter {
                Some(f) => f.apply(k, cells, &Rng::new(0)),
                None => cells,
            };
            if !cells.is_empty() {
                out.push(Row {
                    key: k.clone(),
                    cells,
                });
            }
        }
        Ok(out)
    }

    pub fn read_row(
        &self,
        instance: &str,
        table: &str,
        key: &[u8],
        filter: Option<&RowFilter>,
        now_us: i64,
    ) -> MResult<Option<Row>> {
        check_key(key)?;
        let t = self.table(instance, table)?;
        if let Some(f) = filter {
            check_filter_timestamps(t.granularity, f)?;
        }
        let filter = filter.map(compile).transpose()?;
        let cells = t.visible_row(key, now_us);
        if cells.is_empty() {
            return Ok(None);
        }
        let cells = match &filter {
            Some(f) => f.apply(key, cells, &Rng::new(0)),
            None => cells,
        };
        Ok((!cells.is_empty()).then(|| Row {
            key: key.to_vec(),
            cells,
        }))
    }

    /// Physically deletes every cell a GC rule collects at `now_us`.
    pub fn sweep(&mut self, now_us: i64) {
        for t in self.tables.values_mut() {
            let rules: BTreeMap<u64, GcRule> = t
                .families
                .iter()
                .map(|f| (f.uid, f.spec.gc_rule.clone()))
                .collect();
            for row in t.rows.values_mut() {
                let mut column: Option<(u64, Vec<u8>)> = None;
                let mut index = 0usize;
                let mut doomed = Vec::new();
                for (k @ (uid, q, Reverse(ts)), _) in row.iter() {
                    if column.as_ref().is_none_or(|(u, c)| u != uid || c != q) {
                        column = Some((*uid, q.clone()));
                        index = 0;
                    }
                    if rules[uid].collects(index, *ts, now_us) {
                        doomed.push(k.clone());
                    }
                    index += 1;
                }
                for k in doomed {
                    row.remove(&k);
                }
            }
            t.rows.retain(|_, r| !r.is_empty());
        }
    }
}
