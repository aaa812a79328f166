//! Authorized views: a named subset of a table (row key prefixes, and per family the
//! qualifiers and qualifier prefixes) that data requests may name instead of, or
//! beside, the table (`authorized_view_name`). Bigtable's SubsetView semantics:
//!
//! - **Reads** see only the view's cells: the view becomes a filter chained before
//!   the request's own (so the request's filter, limits and predicates see only the
//!   view), and a read of every row reads only the view's prefixes.
//! - **Writes** may touch only the view's cells: each mutation's family and
//!   qualifier must be in the view, `DeleteFromFamily` needs the whole family in the
//!   view, `DeleteFromRow` is refused (it would delete cells outside the view), and
//!   the row key must start with one of the view's prefixes. A refused request
//!   changes nothing (PERMISSION_DENIED naming what lies outside).
//! - **SampleRowKeys** answers only keys inside the view's prefixes.
//!
//! Each view is kept in the engine's settings under its resource name
//! (`…/tables/T/authorizedViews/V`) as its protobuf; deleting the table deletes its
//! views. The admin calls (`Create/Get/List/Update/DeleteAuthorizedView`) are here
//! too; their changes are done before they answer.

use std::ops::Bound;

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_engine::Engine;
use almanac_engine::filter::RowFilter;
use almanac_engine::mutation::{Mutation, ReadModifyWriteRule};
use almanac_engine::rowset::{RowRange, RowSet, prefix_successor};
use prost::Message;
use tonic::Status;

use crate::names::{self, TableName};
use crate::status::{IntoStatus, invalid};

/// Most row prefixes, qualifiers and qualifier prefixes one view may list together.
pub const MAX_VIEW_ENTRIES: usize = 1_000;
/// Views per ListAuthorizedViews page when the caller sets no page size.
const DEFAULT_PAGE_SIZE: usize = 1_000;
/// The path segment of a view under its table.
const VIEWS: &str = "/authorizedViews/";

/// Serializes the admin calls' read-modify-write of view records.
static ADMIN: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn admin_lock() -> Result<std::sync::MutexGuard<'static, ()>, Status> {
    ADMIN
        .lock()
        .map_err(|_| Status::internal("authorized view lock poisoned"))
}

/// What a data request acts on: a table, and the view that narrows it, if any.
pub struct Target {
    /// The table.
    pub table: TableName,
    /// The view's subset (`None`: the whole table).
    pub view: Option<Subset>,
}

/// Qualifiers from the first up to the second (exclusive; `None`: no end).
type Span = (Vec<u8>, Option<Vec<u8>>);

/// A view's subset, ready to narrow requests.
#[derive(Debug, Clone)]
pub struct Subset {
    name: String,
    row_prefixes: Vec<Vec<u8>>,
    /// Per family (name order): qualifier intervals, sorted and disjoint.
    families: Vec<(String, Vec<Span>)>,
}

impl Subset {
    fn new(name: &str, v: &pb::authorized_view::SubsetView) -> Self {
        let mut families: Vec<(String, Vec<Span>)> = v
            .family_subsets
            .iter()
            .map(|(family, s)| {
                let mut spans: Vec<Span> = s
                    .qualifiers
                    .iter()
                    .map(|q| {
                        let mut end = q.to_vec();
                        end.push(0);
                        (q.to_vec(), Some(end))
                    })
                    .chain(
                        s.qualifier_prefixes
                            .iter()
                            .map(|p| (p.to_vec(), prefix_successor(p))),
                    )
                    .collect();
                spans.sort();
                let mut merged: Vec<Span> = Vec::new();
                for (start, end) in spans {
                    match merged.last_mut() {
                        Some((_, last_end)) if last_end.as_ref().is_none_or(|e| start <= *e) => {
                            if last_end.is_some()
                                && end.as_ref().is_none_or(|e| Some(e) > last_end.as_ref())
                            {
                                *last_end = end;
                            }
                        }
                        _ => merged.push((start, end)),
                    }
                }
                (family.clone(), merged)
            })
            .collect();
        families.sort_by(|a, b| a.0.cmp(&b.0));
        Self {
            name: name.to_owned(),
            row_prefixes: v.row_prefixes.iter().map(|p| p.to_vec()).collect(),
            families,
        }
    }

    fn allows_row(&self, key: &[u8]) -> bool {
        self.row_prefixes.iter().any(|p| key.starts_with(p))
    }

    fn spans(&self, family: &str) -> Option<&[Span]> {
        self.families
            .iter()
            .find(|(f, _)| f == family)
            .map(|(_, s)| s.as_slice())
    }

    fn allows_cell(&self, family: &str, qualifier: &[u8]) -> bool {
        self.spans(family).is_some_and(|spans| {
            spans.iter().any(|(s, e)| {
                qualifier >= s.as_slice() && e.as_ref().is_none_or(|e| qualifier < e.as_slice())
            })
        })
    }

    fn whole_family(&self, family: &str) -> bool {
        self.spans(family)
            .is_some_and(|spans| spans.iter().any(|(s, e)| s.is_empty() && e.is_none()))
    }

    /// The filter that keeps exactly the view's cells.
    fn filter(&self) -> RowFilter {
        let mut cells = Vec::new();
        for (family, spans) in &self.families {
            for (start, end) in spans {
                cells.push(RowFilter::ColumnRange {
                    family: family.clone(),
                    start: Bound::Included(start.clone()),
                    end: end.clone().map_or(Bound::Unbounded, Bound::Excluded),
                });
            }
        }
        let cells = match cells.len() {
            0 => RowFilter::BlockAll,
            1 => cells.remove(0),
            _ => RowFilter::Interleave(cells),
        };
        if self.row_prefixes.iter().any(Vec::is_empty) {
            return cells;
        }
        if self.row_prefixes.is_empty() {
            return RowFilter::BlockAll;
        }
        // RE2 over bytes: each prefix byte as `\xHH`, then any bytes (`\C*`).
        let mut pattern = b"(?:".to_vec();
        for (i, p) in self.row_prefixes.iter().enumerate() {
            if i > 0 {
                pattern.push(b'|');
            }
            for b in p {
                pattern.extend_from_slice(format!("\\x{b:02x}").as_bytes());
            }
        }
        pattern.extend_from_slice(br")\C*");
        RowFilter::Chain(vec![RowFilter::RowKeyRegex(pattern), cells])
    }

    /// `filter` applied after the view's own.
    pub fn restrict(&self, filter: Option<RowFilter>) -> RowFilter {
        match filter {
            None => self.filter(),
            Some(f) => RowFilter::Chain(vec![self.filter(), f]),
        }
    }

    /// The rows of a read narrowed to the view's prefixes (a read of every row reads
    /// only the prefixes' ranges; the filter keeps the rest exact).
    pub fn narrow(&self, rows: RowSet) -> RowSet {
        if !(rows.keys.is_empty() && rows.ranges.is_empty())
            || self.row_prefixes.iter().any(Vec::is_empty)
        {
            return rows;
        }
        if self.row_prefixes.is_empty() {
            // No rows: a set holding one empty range reads nothing.
            return RowSet {
                keys: Vec::new(),
                ranges: vec![RowRange {
                    start: Bound::Excluded(Vec::new()),
                    end: Bound::Excluded(vec![0]),
                }],
            };
        }
        RowSet {
            keys: Vec::new(),
            ranges: self
                .row_prefixes
                .iter()
                .map(|p| RowRange {
                    start: Bound::Included(p.clone()),
                    end: prefix_successor(p).map_or(Bound::Unbounded, Bound::Excluded),
                })
                .collect(),
        }
    }

    fn denied(&self, what: String) -> Status {
        Status::permission_denied(format!("{what} is outside authorized view {}", self.name))
    }

    fn check_row(&self, key: &[u8]) -> Result<(), Status> {
        if self.allows_row(key) {
            return Ok(());
        }
        Err(self.denied(format!("row {:?}", String::from_utf8_lossy(key))))
    }

    /// Refuses mutations of row `key` that would touch cells outside the view.
    pub fn check_mutations(&self, key: &[u8], mutations: &[Mutation]) -> Result<(), Status> {
        self.check_row(key)?;
        for m in mutations {
            let cell = match m {
                Mutation::SetCell {
                    family, qualifier, ..
                }
                | Mutation::DeleteFromColumn {
                    family, qualifier, ..
                }
                | Mutation::AddToCell {
                    family, qualifier, ..
                }
                | Mutation::MergeToCell {
                    family, qualifier, ..
                } => Some((family, qualifier)),
                Mutation::DeleteFromFamily { family } => {
                    if !self.whole_family(family) {
                        return Err(self.denied(format!(
                            "DeleteFromFamily {family:?} deletes cells that are not all in the view, which"
                        )));
                    }
                    None
                }
                Mutation::DeleteFromRow => {
                    return Err(self
                        .denied("DeleteFromRow deletes every cell of the row, which".to_owned()));
                }
            };
            if let Some((family, qualifier)) = cell
                && !self.allows_cell(family, qualifier)
            {
                return Err(self.denied(format!(
                    "cell {family}:{}",
                    String::from_utf8_lossy(qualifier)
                )));
            }
        }
        Ok(())
    }

    /// Refuses ReadModifyWrite rules of row `key` outside the view.
    pub fn check_rules(&self, key: &[u8], rules: &[ReadModifyWriteRule]) -> Result<(), Status> {
        self.check_row(key)?;
        for r in rules {
            if !self.allows_cell(&r.family, &r.qualifier) {
                return Err(self.denied(format!(
                    "cell {}:{}",
                    r.family,
                    String::from_utf8_lossy(&r.qualifier)
                )));
            }
        }
        Ok(())
    }

    /// Whether a sampled key may be shown (inside the view's prefixes).
    pub fn shows_key(&self, key: &[u8]) -> bool {
        key.is_empty() || self.allows_row(key)
    }
}

/// A view's name split into its table and id.
fn parse_name(name: &str) -> Result<(TableName, String), Status> {
    let Some((table, id)) = name.split_once(VIEWS).filter(|(_, id)| !id.contains('/')) else {
        return Err(invalid(format!(
            "invalid authorized view name {name:?}: expected \
             projects/{{p}}/instances/{{i}}/tables/{{t}}/authorizedViews/{{view}}"
        )));
    };
    Ok((names::table(table)?, id.to_owned()))
}

fn load(engine: &Engine, name: &str) -> Result<pb::AuthorizedView, Status> {
    let bytes = engine
        .setting(name)
        .status()?
        .ok_or_else(|| Status::not_found(format!("authorized view not found: {name}")))?;
    pb::AuthorizedView::decode(bytes.as_slice())
        .map_err(|e| Status::data_loss(format!("stored record of {name}: {e}")))
}

/// The table and view of a data request naming `table_name`, `view_name` or both.
pub fn resolve(engine: &Engine, table_name: &str, view_name: &str) -> Result<Target, Status> {
    if view_name.is_empty() {
        return Ok(Target {
            table: names::table(table_name)?,
            view: None,
        });
    }
    let (table, _) = parse_name(view_name)?;
    if !table_name.is_empty() && table_name != table.full() {
        return Err(invalid(format!(
            "authorized view {view_name} is not a view of table {table_name}"
        )));
    }
    let stored = load(engine, view_name)?;
    let Some(pb::authorized_view::AuthorizedView::SubsetView(subset)) = &stored.authorized_view
    else {
        return Err(Status::data_loss(format!(
            "authorized view {view_name} has no subset"
        )));
    };
    Ok(Target {
        table,
        view: Some(Subset::new(view_name, subset)),
    })
}

/// Checks a view's definition against the limits.
fn check(view: &pb::AuthorizedView) -> Result<(), Status> {
    let Some(pb::authorized_view::AuthorizedView::SubsetView(s)) = &view.authorized_view else {
        return Err(invalid("an authorized view needs a subset_view"));
    };
    let entries = s.row_prefixes.len()
        + s.family_subsets
            .values()
            .map(|f| f.qualifiers.len() + f.qualifier_prefixes.len())
            .sum::<usize>();
    if entries > MAX_VIEW_ENTRIES {
        return Err(invalid(format!(
            "the view lists {entries} row prefixes, qualifiers and qualifier prefixes, over the limit of {MAX_VIEW_ENTRIES}"
        )));
    }
    if let Some(p) = s
        .row_prefixes
        .iter()
        .find(|p| p.len() > almanac_engine::limits::MAX_ROW_KEY_BYTES)
    {
        return Err(invalid(format!(
            "a row prefix of {} bytes is over the row key limit of {}",
            p.len(),
            almanac_engine::limits::MAX_ROW_KEY_BYTES
        )));
    }
    for (family, f) in &s.family_subsets {
        if let Some(q) = f
            .qualifiers
            .iter()
            .chain(&f.qualifier_prefixes)
            .find(|q| q.len() > almanac_engine::limits::MAX_QUALIFIER_BYTES)
        {
            return Err(invalid(format!(
                "a qualifier of family {family} of {} bytes is over the limit of {}",
                q.len(),
                almanac_engine::limits::MAX_QUALIFIER_BYTES
            )));
        }
    }
    Ok(())
}

/// The etag of a stored view: a digest of its definition and protection, over a
/// canonical form (families in name order: a protobuf map's encoding order varies).
fn etag(view: &pb::AuthorizedView) -> String {
    fn put(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
        out.extend_from_slice(bytes);
    }
    let mut canon = vec![u8::from(view.deletion_protection)];
    if let Some(pb::authorized_view::AuthorizedView::SubsetView(s)) = &view.authorized_view {
        for p in &s.row_prefixes {
            put(&mut canon, p);
        }
        let mut families: Vec<_> = s.family_subsets.iter().collect();
        families.sort_by(|a, b| a.0.cmp(b.0));
        for (name, f) in families {
            put(&mut canon, name.as_bytes());
            for q in &f.qualifiers {
                put(&mut canon, q);
            }
            canon.push(0xFF);
            for q in &f.qualifier_prefixes {
                put(&mut canon, q);
            }
            canon.push(0xFE);
        }
    }
    format!("{:08x}", crate::crc32c::checksum(&canon))
}

/// The view as a response shows it (`NAME_ONLY`: the name alone).
fn shown(mut view: pb::AuthorizedView, response_view: i32) -> pb::AuthorizedView {
    if response_view == pb::authorized_view::ResponseView::NameOnly as i32 {
        return pb::AuthorizedView {
            name: view.name,
            ..pb::AuthorizedView::default()
        };
    }
    view.etag = etag(&view);
    view
}

fn save(engine: &Engine, view: &pb::AuthorizedView) -> Result<(), Status> {
    let mut stored = view.clone();
    stored.etag.clear();
    engine
        .put_settings(&[(view.name.clone(), Some(stored.encode_to_vec()))])
        .status()
}

/// `CreateAuthorizedView`.
pub fn create(
    engine: &Engine,
    req: &pb::CreateAuthorizedViewRequest,
) -> Result<pb::AuthorizedView, Status> {
    let _admin = admin_lock()?;
    let table = names::table(&req.parent)?;
    engine.get_table(&table.instance, &table.table).status()?;
    almanac_engine::schema::validate_table_id(&req.authorized_view_id)
        .map_err(|e| invalid(format!("invalid authorized view id: {e}")))?;
    let mut view = req
        .authorized_view
        .clone()
        .ok_or_else(|| invalid("CreateAuthorizedView needs an authorized_view"))?;
    check(&view)?;
    view.name = format!("{}{VIEWS}{}", req.parent, req.authorized_view_id);
    if engine.setting(&view.name).status()?.is_some() {
        return Err(Status::already_exists(format!(
            "authorized view already exists: {}",
            view.name
        )));
    }
    save(engine, &view)?;
    Ok(shown(view, pb::authorized_view::ResponseView::Full as i32))
}

/// `GetAuthorizedView`.
pub fn get(
    engine: &Engine,
    req: &pb::GetAuthorizedViewRequest,
) -> Result<pb::AuthorizedView, Status> {
    parse_name(&req.name)?;
    Ok(shown(load(engine, &req.name)?, req.view))
}

/// `ListAuthorizedViews` (names only unless the request asks for more).
pub fn list(
    engine: &Engine,
    req: &pb::ListAuthorizedViewsRequest,
) -> Result<pb::ListAuthorizedViewsResponse, Status> {
    let table = names::table(&req.parent)?;
    engine.get_table(&table.instance, &table.table).status()?;
    if req.page_size < 0 {
        return Err(invalid(format!(
            "page_size must not be negative, got {}",
            req.page_size
        )));
    }
    let response_view = if req.view == pb::authorized_view::ResponseView::Unspecified as i32 {
        pb::authorized_view::ResponseView::NameOnly as i32
    } else {
        req.view
    };
    let prefix = format!("{}{VIEWS}", req.parent);
    let mut all = Vec::new();
    for (name, bytes) in engine.settings(&prefix).status()? {
        if name > req.page_token && !name[prefix.len()..].contains('/') {
            let view = pb::AuthorizedView::decode(bytes.as_slice())
                .map_err(|e| Status::data_loss(format!("stored record of {name}: {e}")))?;
            all.push(shown(view, response_view));
        }
    }
    let page = usize::try_from(req.page_size)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_PAGE_SIZE);
    let next_page_token = if all.len() > page {
        all[page - 1].name.clone()
    } else {
        String::new()
    };
    all.truncate(page);
    Ok(pb::ListAuthorizedViewsResponse {
        authorized_views: all,
        next_page_token,
    })
}

/// Refuses a change to `stored` when the request carries another etag.
fn check_etag(stored: &pb::AuthorizedView, given: &str) -> Result<(), Status> {
    if !given.is_empty() && given != etag(stored) {
        return Err(Status::aborted(format!(
            "authorized view {} has changed since etag {given} was read",
            stored.name
        )));
    }
    Ok(())
}

/// `UpdateAuthorizedView`: `subset_view` and `deletion_protection` (every field when
/// the mask is empty).
pub fn update(
    engine: &Engine,
    req: &pb::UpdateAuthorizedViewRequest,
) -> Result<pb::AuthorizedView, Status> {
    let _admin = admin_lock()?;
    let change = req
        .authorized_view
        .as_ref()
        .ok_or_else(|| invalid("UpdateAuthorizedView needs an authorized_view"))?;
    parse_name(&change.name)?;
    let mut view = load(engine, &change.name)?;
    check_etag(&view, &change.etag)?;
    let paths = req
        .update_mask
        .as_ref()
        .map(|m| m.paths.clone())
        .unwrap_or_default();
    let paths = if paths.is_empty() {
        vec!["subset_view".to_owned(), "deletion_protection".to_owned()]
    } else {
        paths
    };
    for p in &paths {
        match p.as_str() {
            "subset_view" => {
                view.authorized_view = change.authorized_view.clone();
                check(&view)?;
            }
            "deletion_protection" => view.deletion_protection = change.deletion_protection,
            other => {
                return Err(invalid(format!(
                    "update_mask names {other:?}; an authorized view's subset_view and deletion_protection can be updated"
                )));
            }
        }
    }
    save(engine, &view)?;
    Ok(shown(view, pb::authorized_view::ResponseView::Full as i32))
}

/// `DeleteAuthorizedView`.
pub fn delete(engine: &Engine, req: &pb::DeleteAuthorizedViewRequest) -> Result<(), Status> {
    let _admin = admin_lock()?;
    parse_name(&req.name)?;
    let view = load(engine, &req.name)?;
    check_etag(&view, &req.etag)?;
    if view.deletion_protection {
        return Err(Status::failed_precondition(format!(
            "authorized view {} is protected from deletion; update deletion_protection to false first",
            req.name
        )));
    }
    engine.put_settings(&[(req.name.clone(), None)]).status()
}

/// Deletes the views of table `table` (a resource name), as deleting the table does.
pub fn drop_all(engine: &Engine, table: &str) -> Result<(), Status> {
    let _admin = admin_lock()?;
    let prefix = format!("{table}{VIEWS}");
    let gone: Vec<(String, Option<Vec<u8>>)> = engine
        .settings(&prefix)
        .status()?
        .into_iter()
        .map(|(name, _)| (name, None))
        .collect();
    if gone.is_empty() {
        return Ok(());
    }
    engine.put_settings(&gone).status()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A family's name, qualifiers and qualifier prefixes.
    type Family<'a> = (&'a str, &'a [&'a [u8]], &'a [&'a [u8]]);

    fn subset(prefixes: &[&[u8]], families: &[Family<'_>]) -> Subset {
        let v = pb::authorized_view::SubsetView {
            row_prefixes: prefixes.iter().map(|p| p.to_vec().into()).collect(),
            family_subsets: families
                .iter()
                .map(|(f, q, p)| {
                    (
                        (*f).to_owned(),
                        pb::authorized_view::FamilySubsets {
                            qualifiers: q.iter().map(|x| x.to_vec().into()).collect(),
                            qualifier_prefixes: p.iter().map(|x| x.to_vec().into()).collect(),
                        },
                    )
                })
                .collect(),
        };
        Subset::new("v", &v)
    }

    #[test]
    fn cells_rows_and_families_are_judged_as_the_view_lists_them() {
        let s = subset(
            &[b"a#", b"\xff"],
            &[("cf", &[b"q", b"qq"], &[b"p", b"q"]), ("all", &[], &[b""])],
        );
        assert!(s.allows_row(b"a#1") && s.allows_row(b"\xff\x00") && !s.allows_row(b"b"));
        assert!(
            s.allows_cell("cf", b"q") && s.allows_cell("cf", b"qz") && s.allows_cell("cf", b"p1")
        );
        assert!(!s.allows_cell("cf", b"r") && !s.allows_cell("other", b"q"));
        assert!(s.allows_cell("all", b"") && s.allows_cell("all", b"\xff\xff"));
        assert!(s.whole_family("all") && !s.whole_family("cf"));
        // Overlapping and touching spans merge into disjoint ones, so no cell passes
        // twice: p*, q, qq and q* make [p, r).
        let spans = s.spans("cf").unwrap();
        assert_eq!(spans, &[(b"p".to_vec(), Some(b"r".to_vec()))], "{spans:?}");
        let del_row = [Mutation::DeleteFromRow];
        assert_eq!(
            s.check_mutations(b"a#1", &del_row).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        let set = |f: &str, q: &[u8]| Mutation::SetCell {
            family: f.into(),
            qualifier: q.to_vec(),
            timestamp_us: 0,
            value: vec![],
        };
        assert!(
            s.check_mutations(b"a#1", &[set("cf", b"q"), set("all", b"x")])
                .is_ok()
        );
        assert!(s.check_mutations(b"b", &[set("cf", b"q")]).is_err());
        assert!(s.check_mutations(b"a#1", &[set("cf", b"r")]).is_err());
        let narrowed = s.narrow(RowSet::all());
        assert_eq!(narrowed.ranges.len(), 2);
        assert_eq!(narrowed.ranges[1].end, Bound::Unbounded);
        let none = subset(&[], &[("cf", &[], &[b""])]);
        assert!(matches!(none.filter(), RowFilter::BlockAll));
    }
}
