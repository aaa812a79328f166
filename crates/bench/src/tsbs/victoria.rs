//! The query phase against VictoriaMetrics: the same [`Instance`]s as MetricsQL on
//! `/api/v1/query_range` (lastpoint: an instant `/api/v1/query`), answers checked
//! against the generated data in MetricsQL's own terms.
//!
//! A range query evaluates at `start, start + step, …, end`, each point over the
//! window `(t - step, t]` (a rollup's lookbehind); so the instance's window
//! `[S, S + H)` is asked as `start = S + step, end = S + H`, and the expected value at
//! `t` is computed over the readings in `(t - step, t]`: the same readings as the SQL
//! buckets, shifted by one reading. `high-cpu-all` is an instant selector evaluated
//! at every reading's time in `[S, S + H)`. Values come back with about 12 significant
//! digits (VictoriaMetrics rounds), inside [`super::queries`]' tolerance.

use std::collections::BTreeMap;
use std::time::Instant;

use almanac_client::http::{Client, Endpoint, query_escape};
use anyhow::{Context, bail};
use serde_json::Value;

use super::data::{FIELDS, Spec};
use super::queries::{Expected, Instance, Kind, Row, Timings, difference};
use almanac_engine::calendar::NANOS_PER_SEC;

use super::data::host_name;
use crate::devops::HIGH_CPU;

/// The MetricsQL text, step (s), and `(start, end)` in seconds of `q`; `step` 0 for an
/// instant query at `end`.
fn metricsql(q: &Instance, spec: &Spec) -> (String, i64, i64, i64) {
    let secs = |ns: i64| ns.div_euclid(NANOS_PER_SEC);
    let s = secs(q.start_ns);
    let h = q.kind.hours() * 3600;
    let hosts = |ids: &[u64]| {
        ids.iter()
            .map(|i| host_name(*i))
            .collect::<Vec<_>>()
            .join("|")
    };
    match q.kind {
        Kind::SingleGroupby111 => (
            format!(
                "max(max_over_time(cpu_usage_user{{hostname=\"{}\"}}[1m]))",
                host_name(q.hosts[0])
            ),
            60,
            s + 60,
            s + h,
        ),
        Kind::CpuMaxAll8 => (
            format!(
                "max(max_over_time({{__name__=~\"cpu_usage_.*\",hostname=~\"{}\"}}[1h])) by (__name__)",
                hosts(&q.hosts)
            ),
            3600,
            s + 3600,
            s + h,
        ),
        Kind::DoubleGroupby1 => (
            "avg(avg_over_time(cpu_usage_user[1h])) by (hostname)".to_string(),
            3600,
            s + 3600,
            s + h,
        ),
        Kind::HighCpuAll => {
            let step = secs(spec.interval_ns);
            // The first reading at or after S, so the grid falls on readings.
            let first =
                secs(spec.start_ns) + (s - secs(spec.start_ns) + step - 1).div_euclid(step) * step;
            // Evaluated at every reading's time in [S, S + H): each point is the
            // reading at t itself (an instant selector looks back to the last sample).
            (
                format!("cpu_usage_user > {HIGH_CPU:.1}"),
                step,
                first,
                s + h - 1,
            )
        }
        Kind::Lastpoint => {
            let last = spec.start_ns + (spec.readings as i64 - 1) * spec.interval_ns;
            let span = secs(last - spec.start_ns) + 1;
            (
                format!("last_over_time(cpu_usage_user[{span}s])"),
                0,
                secs(last),
                secs(last),
            )
        }
    }
}

/// The field index of a `cpu_usage_*` metric name.
fn field_of(name: &str) -> Option<usize> {
    let field = name.strip_prefix("cpu_")?;
    FIELDS.iter().position(|f| *f == field)
}

/// The answer's rows, in the shape [`Expected::vm_answer`] builds.
fn rows_of(q: &Instance, body: &Value) -> anyhow::Result<Vec<Row>> {
    let result = body["data"]["result"]
        .as_array()
        .context("no data.result")?;
    let mut by_time: BTreeMap<(String, i64), Vec<f64>> = BTreeMap::new();
    for series in result {
        let metric = &series["metric"];
        let host = metric["hostname"].as_str().unwrap_or("").to_string();
        let points: Vec<&Value> = match series["values"].as_array() {
            Some(values) => values.iter().collect(),
            None => vec![&series["value"]],
        };
        for p in points {
            let t = p[0].as_f64().context("a point without a time")?;
            let v: f64 = p[1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .context("a point without a value")?;
            let time_ns = (t * 1e9).round() as i64;
            let key = match q.kind {
                Kind::CpuMaxAll8 => (String::new(), time_ns),
                Kind::SingleGroupby111 => (String::new(), time_ns),
                _ => (host.clone(), time_ns),
            };
            let values = by_time.entry(key).or_default();
            if q.kind == Kind::CpuMaxAll8 {
                let name = metric["__name__"].as_str().unwrap_or("");
                let i = field_of(name).with_context(|| format!("metric {name:?}"))?;
                values.resize(FIELDS.len(), f64::NAN);
                values[i] = v;
            } else {
                values.push(v);
            }
        }
    }
    Ok(by_time
        .into_iter()
        .map(|((group, time_ns), values)| Row {
            group,
            time_ns,
            values,
        })
        .collect())
}

impl Expected {
    /// The answer MetricsQL should give `q`, evaluated at `start + k * step` (ns) over
    /// `(t - step, t]`.
    fn vm_answer(&self, q: &Instance, step_ns: i64, start_ns: i64, end_ns: i64) -> Vec<Row> {
        let mut out: BTreeMap<(String, i64), Vec<f64>> = BTreeMap::new();
        // The readings the evaluations from start to end cover: (start - step, end].
        let in_window = |t: i64| t > start_ns - step_ns && t <= end_ns;
        let eval_time = |t: i64| {
            // The first evaluation time at or after t.
            let k = (t - start_ns + step_ns - 1).div_euclid(step_ns);
            start_ns + k.max(0) * step_ns
        };
        match q.kind {
            Kind::Lastpoint => {
                for r in self.answer(q) {
                    out.insert((r.group, end_ns), r.values);
                }
            }
            Kind::HighCpuAll => {
                for (h, t, v) in self.readings() {
                    if *t >= start_ns && *t <= end_ns && v[0] > HIGH_CPU {
                        out.insert((host_name(*h), *t), vec![v[0]]);
                    }
                }
            }
            Kind::DoubleGroupby1 => {
                let means = self.mean_by(|h, t| in_window(t).then(|| (host_name(h), eval_time(t))));
                out.extend(means.into_iter().map(|(k, mean)| (k, vec![mean])));
            }
            Kind::SingleGroupby111 | Kind::CpuMaxAll8 => {
                out = self.max_by(q.kind, |h, t| {
                    (q.hosts.contains(&h) && in_window(t)).then(|| (String::new(), eval_time(t)))
                });
            }
        }
        out.into_iter()
            .map(|((group, time_ns), values)| Row {
                group,
                time_ns,
                values,
            })
            .collect()
    }
}

/// Runs every instance against VictoriaMetrics at `endpoint`, checks each answer, and
/// returns the timings by type.
pub fn run_all(
    endpoint: &Endpoint,
    spec: &Spec,
    queries: &[Instance],
    server_pid: Option<u32>,
) -> anyhow::Result<Vec<Timings>> {
    let expected = Expected::of(spec);
    let mut client = Client::new(endpoint.clone());
    // Data written just before must be searchable.
    client.post("/internal/force_flush", &[], b"")?;
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let mut out: Vec<Timings> = Vec::new();
    let mut cpu = super::queries::CpuByKind::new(server_pid);
    for q in queries {
        let (text, step, start, end) = metricsql(q, spec);
        let (path, body) = if step == 0 {
            (
                "/api/v1/query",
                format!(
                    "query={}&time={end}&nocache=1&latency_offset=0",
                    query_escape(&text)
                ),
            )
        } else {
            (
                "/api/v1/query_range",
                format!(
                    "query={}&start={start}&end={end}&step={step}&nocache=1",
                    query_escape(&text)
                ),
            )
        };
        cpu.before(q.kind)?;
        let t0 = Instant::now();
        let response = client.post(path, &form, body.as_bytes())?;
        let elapsed = t0.elapsed();
        let json: Value = serde_json::from_slice(&response.body)
            .with_context(|| format!("HTTP {}: {}", response.status, response.text()))?;
        if response.status != 200 {
            bail!("{text}: HTTP {}: {json}", response.status);
        }
        let got = rows_of(q, &json)?;
        let want = expected.vm_answer(
            q,
            step * NANOS_PER_SEC,
            start * NANOS_PER_SEC,
            end * NANOS_PER_SEC,
        );
        if let Some(why) = difference(&want, &got) {
            bail!("{} answered wrong: {why}\n{text}", q.kind.name());
        }
        super::queries::record(&mut out, q.kind, elapsed, got.len());
        cpu.after(&mut out)?;
    }
    for t in &mut out {
        t.times.sort_unstable();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_fields() {
        assert_eq!(field_of("cpu_usage_user"), Some(0));
        assert_eq!(field_of("cpu_usage_guest_nice"), Some(9));
        assert_eq!(field_of("mem_used"), None);
    }
}
