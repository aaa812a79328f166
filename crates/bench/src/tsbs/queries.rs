//! The query phase of `almanac-bench tsbs`: the TSBS devops queries, each answer
//! checked against the generated data.
//!
//! Steps:
//! 1. [`instances`] draws `--queries` instances of every query type from `--seed`:
//!    hosts and windows inside the loaded span, the same whatever the target.
//! 2. [`Expected`] walks the data set once ([`Spec::stream`]) and keeps every reading,
//!    so each instance's answer can be computed the naive way.
//! 3. Each instance runs through the target's query API (Almanac: the Timestream
//!    Query API with the SQL of [`crate::devops`], every page read), timed from the
//!    request to the last page.
//! 4. Its rows are compared with the expected ones (times exact, values to 1e-9
//!    relative); a wrong answer stops the benchmark.
//! 5. One line per query type: median and p99 latency, rows per answer.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use almanac_client::http::{Client, Endpoint};
use almanac_engine::clock::Rng;
use anyhow::{Context, bail};
use serde_json::Value;

use super::data::{FIELDS, Spec, host_name};
use crate::devops::{self, HIGH_CPU, HOUR_NS};
use crate::measure::{fmt_latency, percentile, server_cpu_secs};

/// Nanoseconds in a minute.
const MINUTE_NS: i64 = 60_000_000_000;
/// Hosts of `cpu-max-all-8`.
const EIGHT: usize = 8;
/// Largest relative difference between an expected and an answered value: means are
/// summed in another order than here.
const TOLERANCE: f64 = 1e-9;
/// Pages one query may take before the benchmark gives up on it.
const MAX_PAGES: usize = 100_000;

/// The query types, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One host, one hour, max of `usage_user` by minute.
    SingleGroupby111,
    /// Eight hosts, eight hours, max of every field by hour.
    CpuMaxAll8,
    /// All hosts, twelve hours, mean of `usage_user` by hour and host.
    DoubleGroupby1,
    /// All hosts, twelve hours, the readings whose `usage_user` is above 90.
    HighCpuAll,
    /// The newest reading of every host.
    Lastpoint,
}

impl Kind {
    /// Every type.
    pub const ALL: [Kind; 5] = [
        Kind::SingleGroupby111,
        Kind::CpuMaxAll8,
        Kind::DoubleGroupby1,
        Kind::HighCpuAll,
        Kind::Lastpoint,
    ];

    /// TSBS's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SingleGroupby111 => "single-groupby-1-1-1",
            Kind::CpuMaxAll8 => "cpu-max-all-8",
            Kind::DoubleGroupby1 => "double-groupby-1",
            Kind::HighCpuAll => "high-cpu-all",
            Kind::Lastpoint => "lastpoint",
        }
    }

    /// Hours the query's window spans (0: the whole data set).
    pub fn hours(self) -> i64 {
        match self {
            Kind::SingleGroupby111 => 1,
            Kind::CpuMaxAll8 => 8,
            Kind::DoubleGroupby1 | Kind::HighCpuAll => 12,
            Kind::Lastpoint => 0,
        }
    }
}

/// One query to run: its type, hosts and window start.
#[derive(Debug, Clone)]
pub struct Instance {
    /// The type.
    pub kind: Kind,
    /// Host numbers it selects (empty: all hosts).
    pub hosts: Vec<u64>,
    /// Start of its window, ns.
    pub start_ns: i64,
}

/// One row of an answer: the group (host name or empty), a time and the values.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Host name, or empty when the query does not group by host.
    pub group: String,
    /// The bucket's or reading's time, ns.
    pub time_ns: i64,
    /// The measured values, in the query's column order.
    pub values: Vec<f64>,
}

/// `n` instances of every type inside `spec`'s span, drawn from `seed`. Types whose
/// window is longer than the span get none.
pub fn instances(spec: &Spec, n: usize, seed: u64) -> Vec<Instance> {
    let rng = Rng::new(seed);
    let below = |n: u64| rng.next_u64() % n.max(1);
    let span_ns = spec.readings as i64 * spec.interval_ns;
    let mut out = Vec::new();
    for kind in Kind::ALL {
        let window = kind.hours() * HOUR_NS;
        if window > span_ns {
            continue;
        }
        for _ in 0..n {
            // Whole minutes inside the span, as TSBS draws them.
            let slack_minutes = ((span_ns - window) / MINUTE_NS).max(0) as u64;
            let start_ns = spec.start_ns + (below(slack_minutes + 1) as i64) * MINUTE_NS;
            let hosts = match kind {
                Kind::SingleGroupby111 => vec![below(spec.hosts)],
                Kind::CpuMaxAll8 => {
                    let mut hosts = Vec::new();
                    while hosts.len() < EIGHT.min(spec.hosts as usize) {
                        let h = below(spec.hosts);
                        if !hosts.contains(&h) {
                            hosts.push(h);
                        }
                    }
                    hosts.sort_unstable();
                    hosts
                }
                _ => Vec::new(),
            };
            out.push(Instance {
                kind,
                hosts,
                start_ns: if kind == Kind::Lastpoint {
                    spec.start_ns
                } else {
                    start_ns
                },
            });
        }
    }
    out
}

/// Every reading of the data set, for computing answers.
pub struct Expected {
    /// (host, time ns, values) in time-major order.
    readings: Vec<(u64, i64, [f64; 10])>,
}

impl Expected {
    /// Walks the whole data set once.
    pub fn of(spec: &Spec) -> Self {
        let mut stream = spec.stream(0, 1);
        let mut readings = Vec::with_capacity(spec.rows() as usize);
        let mut host = 0u64;
        while let Some((h, time_ns)) = stream.next_row() {
            readings.push((host, time_ns, h.values));
            host = (host + 1) % spec.hosts;
        }
        Self { readings }
    }

    /// Every reading: (host, time ns, values in [`FIELDS`] order), time-major.
    pub fn readings(&self) -> &[(u64, i64, [f64; 10])] {
        &self.readings
    }

    /// The maxima of the fields `kind` returns (`usage_user`, or all ten for
    /// cpu-max-all-8) per key, over the readings `key` gives one (host, time ns).
    pub(super) fn max_by<K: Ord>(
        &self,
        kind: Kind,
        mut key: impl FnMut(u64, i64) -> Option<K>,
    ) -> BTreeMap<K, Vec<f64>> {
        let fields = if kind == Kind::CpuMaxAll8 {
            FIELDS.len()
        } else {
            1
        };
        let mut groups: BTreeMap<K, Vec<f64>> = BTreeMap::new();
        for (h, t, v) in &self.readings {
            if let Some(k) = key(*h, *t) {
                let maxes = groups
                    .entry(k)
                    .or_insert_with(|| vec![f64::NEG_INFINITY; fields]);
                for (m, x) in maxes.iter_mut().zip(v) {
                    *m = m.max(*x);
                }
            }
        }
        groups
    }

    /// The mean of `usage_user` per key, over the readings `key` gives one (host,
    /// time ns).
    pub(super) fn mean_by<K: Ord>(
        &self,
        mut key: impl FnMut(u64, i64) -> Option<K>,
    ) -> BTreeMap<K, f64> {
        let mut sums: BTreeMap<K, (f64, u64)> = BTreeMap::new();
        for (h, t, v) in &self.readings {
            if let Some(k) = key(*h, *t) {
                let s = sums.entry(k).or_default();
                s.0 += v[0];
                s.1 += 1;
            }
        }
        sums.into_iter()
            .map(|(k, (sum, n))| (k, sum / n as f64))
            .collect()
    }

    /// The answer `q` should get, sorted as its SQL orders it.
    pub fn answer(&self, q: &Instance) -> Vec<Row> {
        let end_ns = q.start_ns + q.kind.hours() * HOUR_NS;
        let in_window = |t: i64| t >= q.start_ns && t < end_ns;
        let selected = |h: u64| q.hosts.is_empty() || q.hosts.contains(&h);
        let user = 0; // usage_user is the first field
        match q.kind {
            Kind::SingleGroupby111 | Kind::CpuMaxAll8 => {
                let bucket = if q.kind == Kind::SingleGroupby111 {
                    MINUTE_NS
                } else {
                    HOUR_NS
                };
                self.max_by(q.kind, |h, t| {
                    (selected(h) && in_window(t)).then(|| t.div_euclid(bucket) * bucket)
                })
                .into_iter()
                .map(|(time_ns, values)| Row {
                    group: String::new(),
                    time_ns,
                    values,
                })
                .collect()
            }
            Kind::DoubleGroupby1 => self
                .mean_by(|h, t| {
                    in_window(t).then(|| (t.div_euclid(HOUR_NS) * HOUR_NS, host_name(h)))
                })
                .into_iter()
                .map(|((time_ns, group), mean)| Row {
                    group,
                    time_ns,
                    values: vec![mean],
                })
                .collect(),
            Kind::HighCpuAll => {
                let mut rows: Vec<Row> = self
                    .readings
                    .iter()
                    .filter(|(_, t, v)| in_window(*t) && v[user] > HIGH_CPU)
                    .map(|(h, t, v)| Row {
                        group: host_name(*h),
                        time_ns: *t,
                        values: vec![v[user]],
                    })
                    .collect();
                rows.sort_by(|a, b| (&a.group, a.time_ns).cmp(&(&b.group, b.time_ns)));
                rows
            }
            Kind::Lastpoint => {
                let mut newest: BTreeMap<String, (i64, f64)> = BTreeMap::new();
                for (h, t, v) in &self.readings {
                    let e = newest.entry(host_name(*h)).or_insert((*t, v[user]));
                    if *t >= e.0 {
                        *e = (*t, v[user]);
                    }
                }
                newest
                    .into_iter()
                    .map(|(group, (time_ns, value))| Row {
                        group,
                        time_ns,
                        values: vec![value],
                    })
                    .collect()
            }
        }
    }
}

/// The SQL Almanac runs for `q` on `table` (`"db"."table"`).
pub fn almanac_sql(q: &Instance, table: &str) -> String {
    match q.kind {
        Kind::SingleGroupby111 => {
            devops::single_groupby_1_1_1(table, &host_name(q.hosts[0]), q.start_ns)
        }
        Kind::CpuMaxAll8 => {
            let hosts: Vec<String> = q.hosts.iter().map(|h| host_name(*h)).collect();
            devops::cpu_max_all_8(table, &hosts, q.start_ns)
        }
        Kind::DoubleGroupby1 => devops::double_groupby_1(table, q.start_ns),
        Kind::HighCpuAll => devops::high_cpu_all(table, q.start_ns),
        Kind::Lastpoint => devops::lastpoint(table),
    }
}

/// Runs `sql` through the Timestream Query API, reading every page; returns the rows
/// and the time spent receiving the pages (decoding their JSON is not counted, as it
/// is not for VictoriaMetrics' answers).
pub fn run_almanac(client: &mut Client, sql: &str) -> anyhow::Result<(Vec<Row>, Duration)> {
    let target = "Timestream_20181101.Query";
    let headers = [
        ("Content-Type", "application/x-amz-json-1.0"),
        ("X-Amz-Target", target),
    ];
    let mut rows = Vec::new();
    let mut token: Option<String> = None;
    let mut waited = Duration::ZERO;
    for _ in 0..MAX_PAGES {
        let mut body = serde_json::json!({ "QueryString": sql });
        if let Some(t) = &token {
            body["NextToken"] = Value::String(t.clone());
        }
        let body = body.to_string();
        let t0 = Instant::now();
        let response = client.post("/", &headers, body.as_bytes())?;
        waited += t0.elapsed();
        let page: Value = serde_json::from_slice(&response.body)
            .with_context(|| format!("Query: HTTP {}: {}", response.status, response.text()))?;
        if response.status != 200 {
            bail!("Query: HTTP {}: {page}\n{sql}", response.status);
        }
        rows.extend(parse_page(&page)?);
        match page["NextToken"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok((rows, waited)),
        }
    }
    bail!("Query: more than {MAX_PAGES} pages\n{sql}")
}

/// The rows of one Query page: VARCHAR columns make the group, the TIMESTAMP column
/// the time, numbers the values.
fn parse_page(page: &Value) -> anyhow::Result<Vec<Row>> {
    let types: Vec<&str> = page["ColumnInfo"]
        .as_array()
        .context("no ColumnInfo")?
        .iter()
        .map(|c| c["Type"]["ScalarType"].as_str().unwrap_or(""))
        .collect();
    let mut out = Vec::new();
    for row in page["Rows"].as_array().context("no Rows")? {
        let mut r = Row {
            group: String::new(),
            time_ns: 0,
            values: Vec::new(),
        };
        for (datum, kind) in row["Data"]
            .as_array()
            .context("no Data")?
            .iter()
            .zip(&types)
        {
            let text = datum["ScalarValue"].as_str().context("a NULL datum")?;
            match *kind {
                "VARCHAR" => r.group = text.to_string(),
                "TIMESTAMP" => r.time_ns = parse_timestamp(text)?,
                _ => r
                    .values
                    .push(text.parse().with_context(|| format!("value {text:?}"))?),
            }
        }
        out.push(r);
    }
    Ok(out)
}

/// Nanoseconds of Timestream's `YYYY-MM-DD HH:MM:SS.nnnnnnnnn`.
fn parse_timestamp(text: &str) -> anyhow::Result<i64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, "0"));
    let secs = almanac_engine::calendar::parse_rfc3339_secs(&format!("{secs}Z"))
        .with_context(|| format!("timestamp {text:?}"))?;
    let digits = frac.len().min(9);
    let nanos: i64 = frac[..digits]
        .parse()
        .with_context(|| format!("timestamp {text:?}"))?;
    Ok(secs * 1_000_000_000 + nanos * 10i64.pow((9 - digits) as u32))
}

/// Why `got` is not `want`, or `None` when they match.
pub fn difference(want: &[Row], got: &[Row]) -> Option<String> {
    let count =
        (want.len() != got.len()).then(|| format!("{} rows, expected {}", got.len(), want.len()));
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        let close = w.values.len() == g.values.len()
            && w.values
                .iter()
                .zip(&g.values)
                .all(|(a, b)| a == b || (a - b).abs() <= TOLERANCE * a.abs().max(b.abs()));
        if w.group != g.group || w.time_ns != g.time_ns || !close {
            let count = count.map(|c| format!("{c}; ")).unwrap_or_default();
            return Some(format!("{count}row {i}: got {g:?}, expected {w:?}"));
        }
    }
    let n = want.len().min(got.len());
    count.map(|c| match (got.get(n), want.get(n)) {
        (Some(extra), _) => format!("{c}; the first extra row is {extra:?}"),
        (None, Some(missing)) => format!("{c}; the first missing row is {missing:?}"),
        (None, None) => c,
    })
}

/// Latencies of one query type.
#[derive(Debug)]
pub struct Timings {
    /// The type.
    pub kind: Kind,
    /// Each instance's time, sorted.
    pub times: Vec<Duration>,
    /// Rows of all answers.
    pub rows: usize,
    /// The server's CPU seconds from the first instance's request to the last one's
    /// answer (known with `--server-pid`).
    pub server_cpu: Option<f64>,
}

impl Timings {
    /// `kind  median  p99  rows per answer  [server CPU a query]`.
    pub fn line(&self) -> String {
        let runs = self.times.len().max(1) as f64;
        let cpu = self
            .server_cpu
            .map(|s| format!(", server CPU {:.2} ms a query", s * 1e3 / runs))
            .unwrap_or_default();
        format!(
            "{:<22} median {:>10}   p99 {:>10}   {} runs, {:.0} rows per answer{cpu}",
            self.kind.name(),
            fmt_latency(percentile(&self.times, 0.5)),
            fmt_latency(percentile(&self.times, 0.99)),
            self.times.len(),
            self.rows as f64 / runs
        )
    }
}

/// The server's CPU time over each query type's instances (they come grouped by
/// type): read before a type's first request and after each answer.
#[derive(Debug)]
pub struct CpuByKind {
    pid: Option<u32>,
    /// The type being run and the server's CPU seconds before its first request.
    start: Option<(Kind, f64)>,
}

impl CpuByKind {
    /// Reads the CPU time of process `pid`, if given.
    pub fn new(pid: Option<u32>) -> Self {
        Self { pid, start: None }
    }

    /// Call before each request of `kind`.
    pub fn before(&mut self, kind: Kind) -> anyhow::Result<()> {
        if self.start.is_none_or(|(k, _)| k != kind)
            && let Some(now) = server_cpu_secs(self.pid)?
        {
            self.start = Some((kind, now));
        }
        Ok(())
    }

    /// Call after each answer: the CPU seconds of its type so far, into `out`'s last.
    pub fn after(&self, out: &mut [Timings]) -> anyhow::Result<()> {
        if let (Some((kind, start)), Some(now)) = (self.start, server_cpu_secs(self.pid)?)
            && let Some(t) = out.last_mut().filter(|t| t.kind == kind)
        {
            t.server_cpu = Some(now - start);
        }
        Ok(())
    }
}

/// Runs every instance against Almanac at `endpoint` (table `"db"."table"`), checks
/// each answer, and returns the timings by type.
pub fn run_all(
    endpoint: &Endpoint,
    table: &str,
    spec: &Spec,
    queries: &[Instance],
    server_pid: Option<u32>,
) -> anyhow::Result<Vec<Timings>> {
    let expected = Expected::of(spec);
    let mut client = Client::new(endpoint.clone());
    let mut out: Vec<Timings> = Vec::new();
    let mut cpu = CpuByKind::new(server_pid);
    for q in queries {
        let sql = almanac_sql(q, table);
        cpu.before(q.kind)?;
        let (got, elapsed) = run_almanac(&mut client, &sql)?;
        record(&mut out, q.kind, elapsed, got.len());
        cpu.after(&mut out)?;
        if let Some(why) = difference(&expected.answer(q), &got) {
            bail!("{} answered wrong: {why}\n{sql}", q.kind.name());
        }
    }
    for t in &mut out {
        t.times.sort_unstable();
    }
    Ok(out)
}

/// Adds one run of `kind` to the timings (instances come grouped by type).
pub fn record(out: &mut Vec<Timings>, kind: Kind, elapsed: Duration, rows: usize) {
    match out.last_mut() {
        Some(t) if t.kind == kind => {
            t.times.push(elapsed);
            t.rows += rows;
        }
        _ => out.push(Timings {
            kind,
            times: vec![elapsed],
            rows,
            server_cpu: None,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]

    use super::*;

    fn spec(hours: u64) -> Spec {
        super::super::data_spec(4, hours as f64 / 24.0, 60, 1, Some(1_451_606_400)).unwrap()
    }

    #[test]
    fn instances_fit_the_span_and_repeat_with_the_seed() {
        let s = spec(13);
        let a = instances(&s, 3, 7);
        assert_eq!(a.len(), 15);
        for q in &a {
            let end = q.start_ns + q.kind.hours() * HOUR_NS;
            assert!(
                q.start_ns >= s.start_ns && end <= s.start_ns + 13 * HOUR_NS,
                "{q:?}"
            );
            assert!(q.hosts.iter().all(|h| *h < 4));
        }
        let b = instances(&s, 3, 7);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        // Twelve-hour queries do not fit two hours of data.
        assert!(
            instances(&spec(2), 1, 7)
                .iter()
                .all(|q| q.kind.hours() < 12)
        );
    }

    #[test]
    fn expected_answers_follow_the_readings() {
        let s = spec(2);
        let e = Expected::of(&s);
        assert_eq!(e.readings.len() as u64, s.rows());
        let last = e.answer(&Instance {
            kind: Kind::Lastpoint,
            hosts: vec![],
            start_ns: s.start_ns,
        });
        let newest = s.start_ns + (s.readings as i64 - 1) * s.interval_ns;
        assert_eq!(last.len(), 4);
        assert!(last.iter().all(|r| r.time_ns == newest));
        let by_minute = e.answer(&Instance {
            kind: Kind::SingleGroupby111,
            hosts: vec![2],
            start_ns: s.start_ns,
        });
        assert_eq!(by_minute.len(), 60);
        let means = e.answer(&Instance {
            kind: Kind::DoubleGroupby1,
            hosts: vec![],
            start_ns: s.start_ns,
        });
        assert_eq!(means.len(), 8, "two hours of four hosts");
    }

    #[test]
    fn parses_query_pages_and_compares() {
        let page = serde_json::json!({
            "ColumnInfo": [
                {"Name": "hostname", "Type": {"ScalarType": "VARCHAR"}},
                {"Name": "time", "Type": {"ScalarType": "TIMESTAMP"}},
                {"Name": "usage_user", "Type": {"ScalarType": "DOUBLE"}},
            ],
            "Rows": [{"Data": [
                {"ScalarValue": "host_1"},
                {"ScalarValue": "2016-01-01 00:00:10.000000000"},
                {"ScalarValue": "91.5"},
            ]}],
        });
        let rows = parse_page(&page).unwrap();
        let want = vec![Row {
            group: "host_1".into(),
            time_ns: (1_451_606_400 + 10) * 1_000_000_000,
            values: vec![91.5],
        }];
        assert_eq!(difference(&want, &rows), None);
        let mut off = want.clone();
        off[0].values[0] = 91.6;
        assert!(difference(&off, &rows).is_some());
        assert!(difference(&[], &rows).is_some());
    }
}
