//! Rules on families and cells, over the sampled rows.

use almanac_engine::Row;
use almanac_engine::schema::{GcRule, TableInfo};

use super::{BIGTABLE_GUIDE, Finding, Severity};
use crate::keys::display;

/// Families past which performance degrades (the guide: "about 100").
const MAX_FAMILIES: usize = 100;
/// Versions of one column past which the row is being updated in place.
const FREQUENT_UPDATE_VERSIONS: usize = 1000;
/// Versions of one column, in a family with no GC rule, past which versions pile up.
const UNBOUNDED_VERSIONS: usize = 100;
/// Recommended largest row.
const LARGE_ROW_BYTES: u64 = 100 * 1024 * 1024;
/// Recommended largest cell.
const LARGE_CELL_BYTES: usize = 10 * 1024 * 1024;

/// The column of a row with the most cells: `(family, qualifier, cells)`.
fn busiest_column(row: &Row) -> Option<(&str, &[u8], usize)> {
    let mut best: Option<(&str, &[u8], usize)> = None;
    let mut i = 0;
    while let Some(c) = row.cells.get(i) {
        let n = row.cells[i..]
            .iter()
            .take_while(|d| d.family == c.family && d.qualifier == c.qualifier)
            .count();
        if best.is_none_or(|b| n > b.2) {
            best = Some((&c.family, &c.qualifier, n));
        }
        i += n.max(1);
    }
    best
}

/// Checks the table's families and the sampled rows' cells.
pub fn check(
    info: &TableInfo,
    rows: &[Row],
    findings: &mut Vec<Finding>,
    checked: &mut Vec<&'static str>,
) {
    checked.extend([
        "too-many-families",
        "frequently-updated-row",
        "unbounded-versions",
        "large-row",
        "large-cell",
    ]);
    let families = info.families.len();
    if families > MAX_FAMILIES {
        findings.push(Finding {
            rule: "too-many-families",
            severity: Severity::Warning,
            title: "The table has too many column families".into(),
            evidence: format!("{families} column families (the guide's bound is about {MAX_FAMILIES})"),
            fix: "More than about 100 families degrades performance. Group columns used together into a few families, and use qualifiers (which are data) for the rest.".into(),
            guide: BIGTABLE_GUIDE,
        });
    }
    let busiest = rows
        .iter()
        .filter_map(|r| busiest_column(r).map(|b| (r, b)))
        .max_by_key(|(_, b)| b.2);
    if let Some((row, (family, qualifier, n))) = busiest {
        if n > FREQUENT_UPDATE_VERSIONS {
            findings.push(Finding {
                rule: "frequently-updated-row",
                severity: Severity::Warning,
                title: "A row is updated again and again".into(),
                evidence: format!(
                    "row \"{}\" holds {n} versions of column {family}:{}",
                    display(&row.key),
                    display(qualifier)
                ),
                fix: "Rewriting one row for each new reading makes it hot and large. Store each reading in a new row (device#metric#timestamp); for a counter updated hundreds of times a minute, keep it in memory and write a new row periodically.".into(),
                guide: BIGTABLE_GUIDE,
            });
        }
        let gc_free = info
            .families
            .iter()
            .any(|(name, spec)| name == family && spec.gc_rule == GcRule::KeepAll);
        if gc_free && n > UNBOUNDED_VERSIONS {
            findings.push(Finding {
                rule: "unbounded-versions",
                severity: Severity::Warning,
                title: "Versions pile up in a family with no garbage-collection rule".into(),
                evidence: format!(
                    "family {family} has no GC rule and column {family}:{} of row \"{}\" holds {n} versions",
                    display(qualifier),
                    display(&row.key)
                ),
                fix: "Keep only what you need: give the family a GC rule (max versions or max age). If you need only the latest value, do not store it in a family that keeps every version.".into(),
                guide: BIGTABLE_GUIDE,
            });
        }
    }
    if let Some(row) = rows.iter().max_by_key(|r| r.bytes())
        && row.bytes() > LARGE_ROW_BYTES
    {
        findings.push(Finding {
            rule: "large-row",
            severity: Severity::Warning,
            title: "A row is larger than 100 MB".into(),
            evidence: format!(
                "row \"{}\" holds {} MB (recommended at most 100 MB; the limit is 256 MB)",
                display(&row.key),
                row.bytes() / (1024 * 1024)
            ),
            fix: "Split the row: for time series, a row per shorter period (half an hour or a minute instead of an hour), or move bulky values to their own rows.".into(),
            guide: BIGTABLE_GUIDE,
        });
    }
    let big_cell = rows
        .iter()
        .flat_map(|r| r.cells.iter().map(move |c| (r, c)))
        .max_by_key(|(_, c)| c.value.len());
    if let Some((row, cell)) = big_cell
        && cell.value.len() > LARGE_CELL_BYTES
    {
        findings.push(Finding {
            rule: "large-cell",
            severity: Severity::Warning,
            title: "A cell is larger than 10 MB".into(),
            evidence: format!(
                "row \"{}\" column {}:{} holds a {} MB value",
                display(&row.key),
                cell.family,
                display(&cell.qualifier),
                cell.value.len() / (1024 * 1024)
            ),
            fix: "Do not store more than 10 MB in one cell: split the value, or keep large objects elsewhere and store a reference.".into(),
            guide: BIGTABLE_GUIDE,
        });
    }
}

#[cfg(test)]
mod tests {
    use almanac_engine::Cell;
    use almanac_engine::schema::{FamilySpec, Granularity};

    use super::*;

    fn info() -> TableInfo {
        TableInfo {
            instance: "projects/p/instances/i".into(),
            name: "t".into(),
            families: vec![("cf".into(), FamilySpec::default())],
            granularity: Granularity::Micros,
            deletion_protection: false,
            change_retention_us: None,
        }
    }

    fn row(key: &str, values: &[usize]) -> Row {
        Row {
            key: key.as_bytes().to_vec(),
            cells: values
                .iter()
                .enumerate()
                .map(|(i, &len)| Cell {
                    family: "cf".into(),
                    qualifier: format!("q{i}").into_bytes().into(),
                    timestamp_us: 1000,
                    value: vec![0; len],
                    labels: vec![],
                })
                .collect(),
        }
    }

    fn rules(rows: &[Row]) -> Vec<&'static str> {
        let (mut findings, mut checked) = (Vec::new(), Vec::new());
        check(&info(), rows, &mut findings, &mut checked);
        findings.iter().map(|f| f.rule).collect()
    }

    #[test]
    fn large_cells_and_rows_are_found_and_ordinary_ones_are_not() {
        assert_eq!(rules(&[row("a", &[1024, 2048])]), Vec::<&str>::new());
        assert_eq!(rules(&[row("a", &[11 * 1024 * 1024])]), vec!["large-cell"]);
        let big_row = row("b", &[9 * 1024 * 1024; 12]);
        assert_eq!(rules(&[row("a", &[10]), big_row]), vec!["large-row"]);
    }
}
