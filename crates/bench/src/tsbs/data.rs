//! The TSBS `cpu-only` data set, made deterministically from a seed.
//!
//! Each host draws, as TSBS's `devops` use case does, first the starting state of its
//! ten CPU measures (uniform in [0, 100)), then its tags: region, datacenter (one of
//! that region's), rack (0..100), arch, os, service (0..20), service_version (0..2),
//! service_environment and team, from TSBS's value sets. Its first reading is the
//! starting state; before each later one every measure takes one step of a random
//! walk, a standard normal step clamped to [0, 100].
//!
//! Every host has its own random stream, seeded from the seed and the host's number,
//! so a host's readings do not depend on how the hosts are split among writers: each
//! writer owns a [`Stream`] over its share of the hosts and walks it time-major (all
//! its hosts at one timestamp, then the next timestamp), as TSBS emits them.
//!
//! TSBS truncates the CPU values to int64 when it serializes them; this generator
//! keeps them float64 (the measures are DOUBLE in Timestream), written with Rust's
//! shortest round-trip formatting.

use std::io::Write as _;

/// The measurement (InfluxDB) and the multi-measure name (Timestream).
pub const MEASUREMENT: &str = "cpu";
/// Tag keys, in the order TSBS writes them.
pub const TAG_KEYS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];

/// The ten CPU measures, in TSBS's order (the SQL devops queries use the same list).
pub use crate::devops::CPU_FIELDS as FIELDS;

/// Regions and their datacenters.
const REGIONS: [(&str, &[&str]); 9] = [
    (
        "us-east-1",
        &["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"],
    ),
    ("us-west-1", &["us-west-1a", "us-west-1b"]),
    ("us-west-2", &["us-west-2a", "us-west-2b", "us-west-2c"]),
    ("eu-west-1", &["eu-west-1a", "eu-west-1b", "eu-west-1c"]),
    ("eu-central-1", &["eu-central-1a", "eu-central-1b"]),
    ("ap-southeast-1", &["ap-southeast-1a", "ap-southeast-1b"]),
    ("ap-southeast-2", &["ap-southeast-2a", "ap-southeast-2b"]),
    ("ap-northeast-1", &["ap-northeast-1a", "ap-northeast-1c"]),
    ("sa-east-1", &["sa-east-1a", "sa-east-1b", "sa-east-1c"]),
];
const TEAMS: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
const OSES: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
const ARCHES: [&str; 2] = ["x64", "x86"];
const ENVIRONMENTS: [&str; 3] = ["production", "staging", "test"];
const RACKS_PER_DATACENTER: u64 = 100;
const SERVICES: u64 = 20;
const SERVICE_VERSIONS: u64 = 2;
/// Bounds of the CPU random walk.
const WALK_MIN: f64 = 0.0;
const WALK_MAX: f64 = 100.0;
const NANOS_PER_MILLI: i64 = 1_000_000;
/// SplitMix64's increment (the golden ratio in 64 bits).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// Seed of every host's random stream.
    pub seed: u64,
    /// Hosts `host_0 .. host_{hosts-1}`.
    pub hosts: u64,
    /// Readings per host.
    pub readings: u64,
    /// Time of the first reading, in nanoseconds since the epoch.
    pub start_ns: i64,
    /// Nanoseconds between a host's readings.
    pub interval_ns: i64,
}

impl Spec {
    /// Rows: one per host per timestamp.
    pub fn rows(&self) -> u64 {
        self.hosts * self.readings
    }

    /// Points: one per measure per row.
    pub fn points(&self) -> u64 {
        self.rows() * FIELDS.len() as u64
    }

    /// The stream of writer `writer` of `writers`: hosts `writer, writer + writers, ...`.
    pub fn stream(&self, writer: u64, writers: u64) -> Stream {
        let hosts = (writer..self.hosts)
            .step_by(writers.max(1) as usize)
            .map(|id| Host::new(self.seed, id))
            .collect();
        Stream {
            spec: *self,
            hosts,
            step: 0,
            next: 0,
        }
    }
}

/// SplitMix64: small, fast, and good enough for synthetic data.
#[derive(Debug, Clone)]
struct SplitMix {
    state: u64,
    /// The second normal deviate of the last Box-Muller pair.
    spare: Option<f64>,
}

fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix {
    fn new(state: u64) -> Self {
        Self { state, spare: None }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (the modulo bias is below 2^-56 for these small n).
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn choose<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len() as u64) as usize]
    }

    /// A standard normal deviate (Box-Muller, both deviates of a pair used).
    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        let u1 = 1.0 - self.next_f64(); // (0, 1]: ln is finite
        let u2 = self.next_f64();
        let r = (-2.0 * u1.ln()).sqrt();
        let theta = std::f64::consts::TAU * u2;
        self.spare = Some(r * theta.sin());
        r * theta.cos()
    }
}

/// TSBS's name of host `id` (its `hostname` tag).
pub fn host_name(id: u64) -> String {
    format!("host_{id}")
}

/// One simulated machine: fixed tags, ten walking measures.
#[derive(Debug, Clone)]
pub struct Host {
    /// The current reading, in [`FIELDS`] order.
    pub values: [f64; 10],
    rng: SplitMix,
    /// `cpu,hostname=...,service_environment=... ` (line protocol up to the fields).
    line_prefix: String,
    /// `{"Dimensions":[...],"MeasureName":"cpu","MeasureValueType":"MULTI","MeasureValues":[`.
    record_prefix: String,
}

impl Host {
    /// Host number `id` of the data set seeded with `seed`.
    pub fn new(seed: u64, id: u64) -> Self {
        let mut rng = SplitMix::new(mix64(seed ^ mix64(id.wrapping_add(GOLDEN))));
        // TSBS makes the measures (their starting states) before it draws the tags.
        let values = std::array::from_fn(|_| rng.next_f64() * WALK_MAX);
        let (region, datacenters) = REGIONS[rng.below(REGIONS.len() as u64) as usize];
        let datacenter = rng.choose(datacenters);
        let rack = rng.below(RACKS_PER_DATACENTER).to_string();
        let arch = rng.choose(&ARCHES);
        let os = rng.choose(&OSES);
        let service = rng.below(SERVICES).to_string();
        let service_version = rng.below(SERVICE_VERSIONS).to_string();
        let environment = rng.choose(&ENVIRONMENTS);
        let team = rng.choose(&TEAMS);
        let tags = [
            host_name(id),
            region.to_string(),
            datacenter.to_string(),
            rack,
            os.to_string(),
            arch.to_string(),
            team.to_string(),
            service,
            service_version,
            environment.to_string(),
        ];

        let mut line_prefix = MEASUREMENT.to_string();
        for (k, v) in TAG_KEYS.iter().zip(&tags) {
            line_prefix.push_str(&format!(",{k}={v}"));
        }
        line_prefix.push(' ');

        let dims: Vec<String> = TAG_KEYS
            .iter()
            .zip(&tags)
            .map(|(k, v)| format!(r#"{{"Name":{},"Value":{}}}"#, json_str(k), json_str(v)))
            .collect();
        let record_prefix = format!(
            r#"{{"Dimensions":[{}],"MeasureName":{},"MeasureValueType":"MULTI","MeasureValues":["#,
            dims.join(","),
            json_str(MEASUREMENT)
        );
        Self {
            values,
            rng,
            line_prefix,
            record_prefix,
        }
    }

    /// Tag values in [`TAG_KEYS`] order.
    pub fn tags(&self) -> Vec<&str> {
        self.line_prefix
            .trim_end()
            .split(',')
            .skip(1)
            .filter_map(|kv| kv.split_once('=').map(|(_, v)| v))
            .collect()
    }

    /// One step of every measure's clamped random walk.
    pub fn advance(&mut self) {
        for v in &mut self.values {
            *v = (*v + self.rng.normal()).clamp(WALK_MIN, WALK_MAX);
        }
    }

    /// Appends the current reading as one line of InfluxDB line protocol (no newline).
    pub fn write_line(&self, time_ns: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.line_prefix.as_bytes());
        for (i, (name, v)) in FIELDS.iter().zip(&self.values).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            // Writing into a Vec cannot fail.
            let _ = write!(out, "{v}");
        }
        let _ = write!(out, " {time_ns}");
    }

    /// Appends the current reading as one Timestream MULTI record (time in milliseconds).
    pub fn write_record(&self, time_ms: i64, out: &mut Vec<u8>) {
        out.extend_from_slice(self.record_prefix.as_bytes());
        for (i, (name, v)) in FIELDS.iter().zip(&self.values).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let _ = write!(out, r#"{{"Name":"{name}","Value":"{v}","Type":"DOUBLE"}}"#);
        }
        let _ = write!(out, r#"],"Time":"{time_ms}"}}"#);
    }
}

/// One writer's share of the data set, walked time-major.
#[derive(Debug)]
pub struct Stream {
    spec: Spec,
    hosts: Vec<Host>,
    /// The current reading's index (0 = the starting state).
    step: u64,
    /// The next host to emit at `step`.
    next: usize,
}

impl Stream {
    /// The next row: a host at its current reading, and the reading's time in ns.
    pub fn next_row(&mut self) -> Option<(&Host, i64)> {
        if self.next == self.hosts.len() {
            if self.hosts.is_empty() {
                return None;
            }
            self.next = 0;
            self.step += 1;
            if self.step < self.spec.readings {
                for h in &mut self.hosts {
                    h.advance();
                }
            }
        }
        if self.step >= self.spec.readings {
            return None;
        }
        let time = self.spec.start_ns + self.step as i64 * self.spec.interval_ns;
        let host = &self.hosts[self.next];
        self.next += 1;
        Some((host, time))
    }
}

/// How a batch of rows is put on the wire.
#[derive(Debug, Clone)]
pub enum Format {
    /// InfluxDB line protocol, one row per line, nanosecond timestamps.
    Line,
    /// A Timestream WriteRecords body; `head` is everything before the first record.
    WriteRecords {
        /// `{"DatabaseName":..,"TableName":..,"CommonAttributes":{..},"Records":[`.
        head: String,
    },
}

impl Format {
    /// The WriteRecords format for `database`.`table`.
    pub fn write_records(database: &str, table: &str) -> Self {
        Format::WriteRecords {
            head: format!(
                r#"{{"DatabaseName":{},"TableName":{},"CommonAttributes":{{"TimeUnit":"MILLISECONDS"}},"Records":["#,
                json_str(database),
                json_str(table)
            ),
        }
    }

    /// Replaces `out` with a request body of up to `rows` rows taken from `stream`;
    /// returns how many it took (0 when the stream is done, `out` then empty).
    pub fn fill(&self, stream: &mut Stream, rows: usize, out: &mut Vec<u8>) -> usize {
        out.clear();
        let mut n = 0;
        while n < rows {
            let Some((host, time_ns)) = stream.next_row() else {
                break;
            };
            match self {
                Format::Line => {
                    if n > 0 {
                        out.push(b'\n');
                    }
                    host.write_line(time_ns, out);
                }
                Format::WriteRecords { head } => {
                    out.extend_from_slice(if n == 0 { head.as_bytes() } else { b"," });
                    host.write_record(time_ns.div_euclid(NANOS_PER_MILLI), out);
                }
            }
            n += 1;
        }
        if n > 0 && matches!(self, Format::WriteRecords { .. }) {
            out.extend_from_slice(b"]}");
        }
        n
    }
}

/// `s` as a JSON string literal.
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    const START_NS: i64 = 1_700_000_000_000_000_000;
    const TEN_S: i64 = 10_000_000_000;

    fn spec(seed: u64, hosts: u64, readings: u64) -> Spec {
        Spec {
            seed,
            hosts,
            readings,
            start_ns: START_NS,
            interval_ns: TEN_S,
        }
    }

    /// Every body of one writer's stream, in order.
    fn bodies(
        spec: &Spec,
        format: &Format,
        writer: u64,
        writers: u64,
        batch: usize,
    ) -> Vec<String> {
        let mut stream = spec.stream(writer, writers);
        let mut out = Vec::new();
        let mut all = Vec::new();
        while format.fill(&mut stream, batch, &mut out) > 0 {
            all.push(String::from_utf8(out.clone()).unwrap());
        }
        assert!(out.is_empty());
        all
    }

    fn all_lines(spec: &Spec, writers: u64) -> Vec<String> {
        (0..writers)
            .flat_map(|w| bodies(spec, &Format::Line, w, writers, 7))
            .flat_map(|b| b.lines().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }

    #[test]
    fn same_seed_same_data_other_seed_other_data() {
        let f = Format::write_records("benchmark", "cpu");
        let a = bodies(&spec(42, 5, 20), &f, 0, 1, 9);
        assert_eq!(a, bodies(&spec(42, 5, 20), &f, 0, 1, 9));
        assert_ne!(a, bodies(&spec(43, 5, 20), &f, 0, 1, 9));
        assert_eq!(Host::new(7, 3).tags(), Host::new(7, 3).tags());
        assert_eq!(Host::new(7, 3).tags().len(), TAG_KEYS.len());
    }

    #[test]
    fn a_hosts_rows_do_not_depend_on_the_split() {
        let s = spec(9, 7, 30);
        let mut one = all_lines(&s, 1);
        let mut three = all_lines(&s, 3);
        assert_ne!(one, three, "the order differs ...");
        one.sort();
        three.sort();
        assert_eq!(one, three, "... the rows do not");
    }

    #[test]
    fn counts_rows_and_points() {
        let s = spec(1, 10, 37);
        assert_eq!((s.rows(), s.points()), (370, 3700));
        for writers in [1, 3, 10, 16] {
            let rows: usize = (0..writers)
                .map(|w| {
                    let mut st = s.stream(w, writers);
                    let mut out = Vec::new();
                    let mut n = 0;
                    loop {
                        let k = Format::Line.fill(&mut st, 100, &mut out);
                        if k == 0 {
                            break n;
                        }
                        n += k;
                    }
                })
                .sum();
            assert_eq!(rows as u64, s.rows(), "{writers} writers");
        }
        assert_eq!(spec(1, 0, 5).stream(0, 1).next_row().map(|r| r.1), None);
        assert_eq!(spec(1, 3, 0).stream(0, 1).next_row().map(|r| r.1), None);
    }

    #[test]
    fn the_walk_stays_in_bounds_and_reaches_them() {
        let mut h = Host::new(5, 0);
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for _ in 0..200_000 {
            h.advance();
            for &v in &h.values {
                assert!((WALK_MIN..=WALK_MAX).contains(&v), "{v}");
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        assert_eq!((lo, hi), (WALK_MIN, WALK_MAX));
    }

    #[test]
    fn the_normal_steps_look_standard() {
        let mut rng = SplitMix::new(3);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
    }

    #[test]
    fn tags_come_from_the_tsbs_value_sets() {
        for id in 0..200 {
            let h = Host::new(11, id);
            let t = h.tags();
            assert_eq!(t[0], format!("host_{id}"));
            let (_, dcs) = REGIONS.iter().find(|(r, _)| *r == t[1]).unwrap();
            assert!(dcs.contains(&t[2]));
            assert!(t[3].parse::<u64>().unwrap() < RACKS_PER_DATACENTER);
            assert!(OSES.contains(&t[4]));
            assert!(ARCHES.contains(&t[5]));
            assert!(TEAMS.contains(&t[6]));
            assert!(t[7].parse::<u64>().unwrap() < SERVICES);
            assert!(t[8].parse::<u64>().unwrap() < SERVICE_VERSIONS);
            assert!(ENVIRONMENTS.contains(&t[9]));
        }
    }

    #[test]
    fn line_protocol_is_well_formed() {
        let s = spec(2, 4, 6);
        let lines = all_lines(&s, 1);
        assert_eq!(lines.len(), 24);
        for (i, line) in lines.iter().enumerate() {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 3, "{line}");
            let mut series = parts[0].split(',');
            assert_eq!(series.next(), Some(MEASUREMENT));
            let keys: Vec<&str> = series.map(|kv| kv.split_once('=').unwrap().0).collect();
            assert_eq!(keys, TAG_KEYS);
            assert!(parts[0].contains(&format!("hostname=host_{},", i % 4)));
            let fields: Vec<(&str, f64)> = parts[1]
                .split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap();
                    (k, v.parse::<f64>().unwrap())
                })
                .collect();
            assert_eq!(fields.iter().map(|f| f.0).collect::<Vec<_>>(), FIELDS);
            assert!(fields.iter().all(|f| (0.0..=100.0).contains(&f.1)));
            let t: i64 = parts[2].parse().unwrap();
            assert_eq!(t, START_NS + (i / 4) as i64 * TEN_S);
        }
    }

    /// A small strict JSON parser: enough to check that bodies are well-formed JSON.
    #[derive(Debug, PartialEq)]
    enum Json {
        Null,
        Bool(bool),
        Num(f64),
        Str(String),
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>),
    }

    impl Json {
        fn get(&self, key: &str) -> &Json {
            match self {
                Json::Obj(kv) => &kv.iter().find(|(k, _)| k == key).unwrap().1,
                _ => panic!("{key} of a non-object"),
            }
        }
        fn str(&self) -> &str {
            match self {
                Json::Str(s) => s,
                other => panic!("not a string: {other:?}"),
            }
        }
        fn arr(&self) -> &[Json] {
            match self {
                Json::Arr(a) => a,
                other => panic!("not an array: {other:?}"),
            }
        }
        fn keys(&self) -> Vec<&str> {
            match self {
                Json::Obj(kv) => kv.iter().map(|(k, _)| k.as_str()).collect(),
                other => panic!("not an object: {other:?}"),
            }
        }
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn parse(text: &str) -> Json {
            let mut p = Parser {
                s: text.as_bytes(),
                i: 0,
            };
            let v = p.value();
            p.ws();
            assert_eq!(p.i, p.s.len(), "trailing input");
            v
        }
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }
        fn eat(&mut self, c: u8) {
            self.ws();
            assert_eq!(
                self.s.get(self.i),
                Some(&c),
                "expected {} at {}",
                c as char,
                self.i
            );
            self.i += 1;
        }
        fn peek(&mut self) -> u8 {
            self.ws();
            *self.s.get(self.i).expect("unexpected end")
        }
        fn value(&mut self) -> Json {
            match self.peek() {
                b'{' => {
                    self.eat(b'{');
                    let mut kv = Vec::new();
                    if self.peek() != b'}' {
                        loop {
                            let k = self.string();
                            self.eat(b':');
                            kv.push((k, self.value()));
                            if self.peek() == b',' {
                                self.eat(b',');
                            } else {
                                break;
                            }
                        }
                    }
                    self.eat(b'}');
                    Json::Obj(kv)
                }
                b'[' => {
                    self.eat(b'[');
                    let mut items = Vec::new();
                    if self.peek() != b']' {
                        loop {
                            items.push(self.value());
                            if self.peek() == b',' {
                                self.eat(b',');
                            } else {
                                break;
                            }
                        }
                    }
                    self.eat(b']');
                    Json::Arr(items)
                }
                b'"' => Json::Str(self.string()),
                b't' => self.word("true", Json::Bool(true)),
                b'f' => self.word("false", Json::Bool(false)),
                b'n' => self.word("null", Json::Null),
                _ => {
                    let start = self.i;
                    while self.i < self.s.len() && b"+-.eE0123456789".contains(&self.s[self.i]) {
                        self.i += 1;
                    }
                    let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
                    Json::Num(text.parse().expect("a number"))
                }
            }
        }
        fn word(&mut self, w: &str, v: Json) -> Json {
            assert!(self.s[self.i..].starts_with(w.as_bytes()));
            self.i += w.len();
            v
        }
        fn string(&mut self) -> String {
            self.eat(b'"');
            let mut out = String::new();
            loop {
                let c = self.s[self.i];
                self.i += 1;
                match c {
                    b'"' => return out,
                    b'\\' => {
                        let e = self.s[self.i];
                        self.i += 1;
                        match e {
                            b'"' | b'\\' | b'/' => out.push(e as char),
                            b'n' => out.push('\n'),
                            b't' => out.push('\t'),
                            b'u' => {
                                let hex = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                                out.push(
                                    char::from_u32(u32::from_str_radix(hex, 16).unwrap()).unwrap(),
                                );
                                self.i += 4;
                            }
                            _ => panic!("bad escape {}", e as char),
                        }
                    }
                    c if c < 0x20 => panic!("control character in a string"),
                    c => out.push(c as char),
                }
            }
        }
    }

    #[test]
    fn write_records_bodies_are_well_formed() {
        let s = spec(4, 3, 5);
        let f = Format::write_records("bench \"db\"", "cpu");
        let bodies = bodies(&s, &f, 0, 1, 4);
        assert_eq!(bodies.len(), 4); // 15 records in batches of 4
        let mut row = 0;
        for body in &bodies {
            let v = Parser::parse(body);
            assert_eq!(
                v.keys(),
                ["DatabaseName", "TableName", "CommonAttributes", "Records"]
            );
            assert_eq!(v.get("DatabaseName").str(), "bench \"db\"");
            assert_eq!(v.get("TableName").str(), "cpu");
            assert_eq!(
                v.get("CommonAttributes").get("TimeUnit").str(),
                "MILLISECONDS"
            );
            for rec in v.get("Records").arr() {
                assert_eq!(
                    rec.keys(),
                    [
                        "Dimensions",
                        "MeasureName",
                        "MeasureValueType",
                        "MeasureValues",
                        "Time"
                    ]
                );
                let dims = rec.get("Dimensions").arr();
                let names: Vec<&str> = dims.iter().map(|d| d.get("Name").str()).collect();
                assert_eq!(names, TAG_KEYS);
                assert_eq!(dims[0].get("Value").str(), format!("host_{}", row % 3));
                assert_eq!(rec.get("MeasureName").str(), "cpu");
                assert_eq!(rec.get("MeasureValueType").str(), "MULTI");
                let mv = rec.get("MeasureValues").arr();
                assert_eq!(
                    mv.iter().map(|m| m.get("Name").str()).collect::<Vec<_>>(),
                    FIELDS
                );
                for m in mv {
                    assert_eq!(m.get("Type").str(), "DOUBLE");
                    let x: f64 = m.get("Value").str().parse().unwrap();
                    assert!((0.0..=100.0).contains(&x));
                }
                let t: i64 = rec.get("Time").str().parse().unwrap();
                assert_eq!(t, (START_NS + (row / 3) as i64 * TEN_S) / NANOS_PER_MILLI);
                row += 1;
            }
        }
        assert_eq!(row, 15);
    }

    #[test]
    fn both_formats_carry_the_same_values() {
        let s = spec(8, 2, 3);
        let line = all_lines(&s, 1);
        let rec = bodies(&s, &Format::write_records("d", "t"), 0, 1, 100).concat();
        let recs = Parser::parse(&rec);
        for (l, r) in line.iter().zip(recs.get("Records").arr()) {
            let fields = l.split(' ').nth(1).unwrap();
            let from_json: Vec<String> = r
                .get("MeasureValues")
                .arr()
                .iter()
                .map(|m| format!("{}={}", m.get("Name").str(), m.get("Value").str()))
                .collect();
            assert_eq!(fields, from_json.join(","));
        }
    }

    #[test]
    fn json_strings_escape() {
        assert_eq!(json_str("a\"b\\c\n"), r#""a\"b\\c\u000a""#);
    }
}
