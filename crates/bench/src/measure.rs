//! What every benchmark measures with: CPU time from `/proc`, latency percentiles and
//! their printing, and the spread-out row keys the load generators write.

use std::time::Duration;

use anyhow::Context;

/// Linux reports utime and stime in clock ticks of 1/100 s (USER_HZ).
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// Seconds of CPU (user + system) the process `pid` has used.
pub fn process_cpu_secs(pid: u32) -> anyhow::Result<f64> {
    stat_cpu_secs(&format!("/proc/{pid}/stat"))
}

/// Seconds of CPU (user + system) this process has used.
pub fn own_cpu_secs() -> anyhow::Result<f64> {
    stat_cpu_secs("/proc/self/stat")
}

/// [`process_cpu_secs`] of `pid` when one is given.
pub fn server_cpu_secs(pid: Option<u32>) -> anyhow::Result<Option<f64>> {
    pid.map(process_cpu_secs).transpose()
}

fn stat_cpu_secs(path: &str) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    // The command name (field 2) may hold spaces; fields 14 and 15 are counted after its `)`.
    let after = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("malformed {path}"))?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        fields
            .get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .with_context(|| format!("no field {} in {path}", i + 3))
    };
    Ok((ticks(11)? + ticks(12)?) / CLOCK_TICKS_PER_SEC)
}

/// The `q` quantile (0..=1) of sorted latencies; zero when there are none.
pub fn percentile(sorted: &[Duration], q: f64) -> Duration {
    let last = sorted.len().saturating_sub(1);
    sorted
        .get((last as f64 * q).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// A latency in µs below a millisecond, else in ms.
pub fn fmt_latency(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{} µs", d.as_micros())
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

/// Row key `i` of a load: `user` and 16 hex digits of `i` times a large odd
/// constant, so keys spread like hashed ids and loads do not append in order.
pub fn spread_key(i: u64) -> String {
    format!("user{:016x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]

    use super::*;

    #[test]
    fn reads_this_process_cpu_time() {
        let before = own_cpu_secs().unwrap();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        std::hint::black_box(x);
        assert!(own_cpu_secs().unwrap() >= before);
        assert!(process_cpu_secs(std::process::id()).unwrap() >= before);
        assert!(process_cpu_secs(u32::MAX).is_err());
    }

    #[test]
    fn percentiles_and_latencies() {
        let ms = |n| Duration::from_millis(n);
        let sorted: Vec<_> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&sorted, 0.5), ms(51));
        assert_eq!(percentile(&sorted, 0.99), ms(99));
        assert_eq!(percentile(&[], 0.5), Duration::ZERO);
        assert_eq!(fmt_latency(Duration::from_micros(250)), "250 µs");
        assert_eq!(fmt_latency(ms(12)), "12.00 ms");
    }

    #[test]
    fn keys_spread() {
        assert_eq!(spread_key(0), "user0000000000000000");
        assert!(spread_key(1) > spread_key(2));
    }
}
