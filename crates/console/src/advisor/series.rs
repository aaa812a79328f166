//! Rules on a time-series table: its dimensions, measures and records, over the
//! catalog and a sample of points (the first [`SAMPLE_POINTS`] in key order, which
//! covers whole series).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::ControlFlow;

use almanac_timeseries::{MeasureType, Measures, Point, Selection};

use super::{Finding, SERIES_GUIDE, Severity, TIMESTREAM_GUIDE, percent};
use crate::{Console, Result};

/// Most points sampled.
const SAMPLE_POINTS: usize = 20_000;
/// Fewest series for the series rules to judge.
const MIN_SERIES: usize = 20;
/// A dimension is an ID when its distinct values are at least this share (%) of the
/// sampled series and series hold at most [`ID_POINTS_PER_SERIES`] points.
const ID_DISTINCT_PERCENT: usize = 90;
/// See [`ID_DISTINCT_PERCENT`].
const ID_POINTS_PER_SERIES: f64 = 2.0;
/// A dimension changes over time when at least this share (%) of the groups of
/// series that differ only in it follow one another in time without overlapping.
const CHANGING_PERCENT: usize = 80;
/// Fewest such groups for `changing-dimension`.
const MIN_CHANGING_GROUPS: usize = 5;
/// Multi-measure records are sparse when they set less than this share (%) of the
/// measures seen under their measure name.
const SPARSE_PERCENT: usize = 50;
/// Fewest measures under a measure name for `sparse-multi-measure`.
const MIN_SPARSE_MEASURES: usize = 4;
/// Single-measure records should be one multi-measure record when at least this
/// share (%) of them share their time and dimensions with another measure name.
const SHARED_PERCENT: usize = 50;

/// A record's dimensions and time: the records at one instant of one series.
type Instant<'a> = (Vec<(&'a str, &'a str)>, i64);

/// One series in the sample: its dimensions, points, first and last time.
struct Series {
    dims: Vec<(String, String)>,
    points: usize,
    first_ns: i64,
    last_ns: i64,
}

/// Checks a time-series table.
pub fn check(
    c: &Console,
    database: &str,
    table: &str,
    findings: &mut Vec<Finding>,
    checked: &mut Vec<&'static str>,
) -> Result<()> {
    checked.extend([
        "id-as-dimension",
        "changing-dimension",
        "sparse-multi-measure",
        "single-measure-records",
    ]);
    let meta = c.ts.describe_table(database, table)?;
    let sel = Selection {
        measure_name: None,
        dimensions: Vec::new(),
        start_ns: i64::MIN,
        end_ns: i64::MAX,
        attributes: None,
        project: None,
        part: None,
    };
    let mut points: Vec<Point<'static>> = Vec::new();
    c.ts.scan(database, table, &sel, &mut |p| {
        points.push(p);
        if points.len() >= SAMPLE_POINTS {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })?;
    let mut by_series: BTreeMap<Vec<(String, String)>, Series> = BTreeMap::new();
    for p in &points {
        let dims: Vec<(String, String)> = p
            .dimensions
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let s = by_series.entry(dims.clone()).or_insert(Series {
            dims,
            points: 0,
            first_ns: p.time_ns,
            last_ns: p.time_ns,
        });
        s.points += 1;
        s.first_ns = s.first_ns.min(p.time_ns);
        s.last_ns = s.last_ns.max(p.time_ns);
    }
    let series: Vec<Series> = by_series.into_values().collect();
    id_dimension(&series, &meta.schema.dimensions, findings);
    changing_dimension(&series, &meta.schema.dimensions, findings);
    sparse(&points, findings);
    single_measures(&points, &meta.schema.measures, findings);
    Ok(())
}

fn id_dimension(series: &[Series], dims: &[String], findings: &mut Vec<Finding>) {
    if series.len() < MIN_SERIES {
        return;
    }
    let points: usize = series.iter().map(|s| s.points).sum();
    let per_series = points as f64 / series.len() as f64;
    if per_series > ID_POINTS_PER_SERIES {
        return;
    }
    for d in dims {
        let distinct: BTreeSet<&str> = series
            .iter()
            .filter_map(|s| s.dims.iter().find(|(n, _)| n == d).map(|(_, v)| v.as_str()))
            .collect();
        if percent(distinct.len(), series.len()) >= ID_DISTINCT_PERCENT {
            findings.push(Finding {
                rule: "id-as-dimension",
                severity: Severity::Warning,
                title: format!("Dimension {d} holds an ID"),
                evidence: format!(
                    "dimension {d} has {} distinct values across {} sampled series, which hold {per_series:.1} points each",
                    distinct.len(),
                    series.len()
                ),
                fix: format!(
                    "Dimensions name a series; a value unique to each record (a request or transaction ID) makes every record its own series. Store {d} as a measure (VARCHAR) instead."
                ),
                guide: TIMESTREAM_GUIDE,
            });
        }
    }
}

fn changing_dimension(series: &[Series], dims: &[String], findings: &mut Vec<Finding>) {
    if series.len() < MIN_SERIES {
        return;
    }
    for d in dims {
        let mut groups: HashMap<Vec<&(String, String)>, Vec<&Series>> = HashMap::new();
        for s in series {
            let rest: Vec<&(String, String)> = s.dims.iter().filter(|(n, _)| n != d).collect();
            groups.entry(rest).or_default().push(s);
        }
        let multi: Vec<&Vec<&Series>> = groups.values().filter(|g| g.len() > 1).collect();
        if multi.len() < MIN_CHANGING_GROUPS {
            continue;
        }
        let sequential = multi
            .iter()
            .filter(|g| {
                let mut g: Vec<&&Series> = g.iter().collect();
                g.sort_by_key(|s| s.first_ns);
                g.windows(2).all(|w| w[0].last_ns < w[1].first_ns)
            })
            .count();
        if percent(sequential, multi.len()) >= CHANGING_PERCENT {
            findings.push(Finding {
                rule: "changing-dimension",
                severity: Severity::Warning,
                title: format!("Dimension {d} changes over time"),
                evidence: format!(
                    "in {sequential} of {} groups of series that differ only in {d}, each series stops before the next begins: {d} changes over the life of one entity",
                    multi.len()
                ),
                fix: format!(
                    "A dimension that changes (a version, a status) splits one entity's history into several series. Keep dimensions to what identifies the entity, and store {d} as a measure."
                ),
                guide: TIMESTREAM_GUIDE,
            });
        }
    }
}

fn sparse(points: &[Point<'static>], findings: &mut Vec<Finding>) {
    // The measures each multi-measure name was seen with, then each record against
    // its own name's.
    let mut seen: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for p in points {
        if let Measures::Multi(v) = &p.measures {
            seen.entry(p.measure_name.as_ref())
                .or_default()
                .extend(v.iter().map(|(n, _)| n.as_ref()));
        }
    }
    let (mut set, mut possible, mut records) = (0usize, 0usize, 0usize);
    for p in points {
        if let Measures::Multi(v) = &p.measures {
            let all = seen.get(p.measure_name.as_ref()).map_or(0, BTreeSet::len);
            if all >= MIN_SPARSE_MEASURES {
                set += v.len();
                possible += all;
                records += 1;
            }
        }
    }
    if records < MIN_SERIES || percent(set, possible) >= SPARSE_PERCENT {
        return;
    }
    findings.push(Finding {
        rule: "sparse-multi-measure",
        severity: Severity::Warning,
        title: "Multi-measure records are mostly empty".into(),
        evidence: format!(
            "{records} sampled records set {}% of the measures their measure name carries ({set} of {possible})",
            percent(set, possible)
        ),
        fix: "Group measures that are reported together into one multi-measure record; put measures reported at other times or by other sources under their own measure name (or table), so records are dense.".into(),
        guide: TIMESTREAM_GUIDE,
    });
}

fn single_measures(
    points: &[Point<'static>],
    measures: &BTreeMap<String, MeasureType>,
    findings: &mut Vec<Finding>,
) {
    let singles = measures
        .values()
        .filter(|t| **t != MeasureType::Multi)
        .count();
    if singles < 2 {
        return;
    }
    let mut names_at: HashMap<Instant<'_>, BTreeSet<&str>> = HashMap::new();
    let mut records = 0;
    for p in points {
        if let Measures::Single(_) = p.measures {
            records += 1;
            let dims = p
                .dimensions
                .iter()
                .map(|(n, v)| (n.as_ref(), v.as_ref()))
                .collect();
            names_at
                .entry((dims, p.time_ns))
                .or_default()
                .insert(p.measure_name.as_ref());
        }
    }
    if records < MIN_SERIES {
        return;
    }
    let shared: usize = names_at
        .values()
        .filter(|n| n.len() > 1)
        .map(BTreeSet::len)
        .sum();
    if percent(shared, records) >= SHARED_PERCENT {
        findings.push(Finding {
            rule: "single-measure-records",
            severity: Severity::Info,
            title: "Single-measure records share their time and dimensions".into(),
            evidence: format!(
                "{shared} of {records} sampled single-measure records share their time and dimensions with records of another measure name"
            ),
            fix: "Measures taken together at one time are one multi-measure record: fewer records to write and store, and queries read one row instead of joining several.".into(),
            guide: SERIES_GUIDE,
        });
    }
}
