//! The TSBS devops queries in Timestream's SQL, over a table of TSBS `cpu` records
//! (dimension `hostname` among others, multi-measure `cpu` with the ten `usage_*`
//! attributes). One definition serves the benchmark (`almanac-bench sql`) and the test
//! that checks the answers against a naive evaluation of the raw records.

/// The ten measures of a TSBS `cpu` record.
pub const CPU_FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

/// Nanoseconds in an hour.
pub const HOUR_NS: i64 = 3_600_000_000_000;

/// The threshold of `high-cpu-all`.
pub const HIGH_CPU: f64 = 90.0;

fn time_range(start_ns: i64, hours: i64) -> String {
    format!(
        "time >= from_nanoseconds({start_ns}) AND time < from_nanoseconds({})",
        start_ns + hours * HOUR_NS
    )
}

fn host_list(hosts: &[String]) -> String {
    hosts
        .iter()
        .map(|h| format!("'{}'", h.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// single-groupby-1-1-1: the max of one measure of one host over one hour, by minute.
pub fn single_groupby_1_1_1(table: &str, host: &str, start_ns: i64) -> String {
    format!(
        "SELECT bin(time, 1m) AS minute, max(usage_user) AS max_usage_user FROM {table} \
         WHERE hostname = '{}' AND {} GROUP BY 1 ORDER BY 1",
        host.replace('\'', "''"),
        time_range(start_ns, 1)
    )
}

/// cpu-max-all-8: the max of every measure of eight hosts over eight hours, by hour.
pub fn cpu_max_all_8(table: &str, hosts: &[String], start_ns: i64) -> String {
    let maxes: Vec<String> = CPU_FIELDS
        .iter()
        .map(|f| format!("max({f}) AS max_{f}"))
        .collect();
    format!(
        "SELECT bin(time, 1h) AS hour, {} FROM {table} WHERE hostname IN ({}) AND {} \
         GROUP BY 1 ORDER BY 1",
        maxes.join(", "),
        host_list(hosts),
        time_range(start_ns, 8)
    )
}

/// double-groupby-1: the mean of one measure per host and hour, all hosts, twelve hours.
pub fn double_groupby_1(table: &str, start_ns: i64) -> String {
    format!(
        "SELECT bin(time, 1h) AS hour, hostname, avg(usage_user) AS mean_usage_user \
         FROM {table} WHERE {} GROUP BY 1, 2 ORDER BY 1, 2",
        time_range(start_ns, 12)
    )
}

/// high-cpu-all: every reading above [`HIGH_CPU`] of `usage_user`, all hosts, twelve hours.
pub fn high_cpu_all(table: &str, start_ns: i64) -> String {
    format!(
        "SELECT hostname, time, usage_user FROM {table} WHERE usage_user > {HIGH_CPU:.1} AND {} \
         ORDER BY hostname, time",
        time_range(start_ns, 12)
    )
}

/// lastpoint: the newest reading of every host.
pub fn lastpoint(table: &str) -> String {
    format!(
        "SELECT c.hostname, c.time, c.usage_user FROM {table} c \
         JOIN (SELECT hostname, max(time) AS newest FROM {table} GROUP BY hostname) l \
         ON c.hostname = l.hostname AND c.time = l.newest ORDER BY c.hostname"
    )
}

/// A full scan with an aggregate: how fast rows stream through.
pub fn scan_all(table: &str) -> String {
    format!("SELECT count(*) AS points, avg(usage_user) AS mean FROM {table}")
}
