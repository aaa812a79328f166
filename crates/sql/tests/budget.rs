//! Queries stay within their limits: functions that would allocate without bound are
//! refused before they run, a query past its memory share or its time limit fails
//! naming the limit, and a dropped query stops. The load counters say so.

use std::time::{Duration, Instant};

mod common;

use almanac_sql::{Error, QueryLimits, Scope, SqlEngine};
use common::Result;
use tokio_stream::StreamExt;

/// Three cross-joined `unnest`s of 10,000 rows each: 10^12 rows, streamed, never ending.
const ENDLESS: &str = "SELECT count(*) FROM unnest(sequence(1, 10000)) AS a(x) \
    CROSS JOIN unnest(sequence(1, 10000)) AS b(y) CROSS JOIN unnest(sequence(1, 10000)) AS c(z)";

fn engine(limits: QueryLimits) -> Result<(SqlEngine, common::TempDir)> {
    let (engine, ts, dir) = common::open("budget", 1_700_000_000_000)?;
    Ok((SqlEngine::new(engine, ts)?.with_limits(limits), dir))
}

fn scope() -> Scope {
    Scope::instance("projects/p/instances/i")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_functions_are_refused_before_they_allocate() -> Result {
    let (sql, _dir) = engine(QueryLimits::default())?;
    for (query, limit) in [
        (
            "SELECT count(*) FROM unnest(sequence(1, 100000000))",
            "10000",
        ),
        ("SELECT cardinality(sequence(1, 1000000000))", "10000"),
        ("SELECT cardinality(array_repeat(1, 20000))", "10000"),
        (
            "SELECT cardinality(array_resize([1], 2000000000))",
            "67108864",
        ),
        (
            "SELECT cardinality(array_repeat(repeat('x', 6000000), 10000))",
            "67108864",
        ),
        ("SELECT length(repeat('abc', 1000000000))", "67108864"),
        ("SELECT length(lpad('x', 100000000, 'y'))", "67108864"),
        (
            "SELECT cardinality(sequence(TIMESTAMP '2020-01-01', TIMESTAMP '2030-01-01', INTERVAL '1' MINUTE))",
            "10000",
        ),
    ] {
        let started = Instant::now();
        let err = sql.query(query, &scope()).await.err();
        let Some(err) = err else {
            return Err(format!("{query}: ran").into());
        };
        assert!(err.to_string().contains(limit), "{query}: {err}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{query}: slow refusal"
        );
    }
    // Within the limits they still work.
    let out = sql
        .query(
            "SELECT cardinality(sequence(1, 10000)) AS n, length(repeat('ab', 1000)) AS l",
            &scope(),
        )
        .await?;
    let row = almanac_sql::arrow::util::pretty::pretty_format_batches(&out.batches)?.to_string();
    assert!(row.contains("10000") && row.contains("2000"), "{row}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_time_limit_stops() -> Result {
    let limits = QueryLimits {
        time_limit: Duration::from_millis(800),
        ..QueryLimits::default()
    };
    let (sql, _dir) = engine(limits)?;
    let started = Instant::now();
    let err = sql.query(ENDLESS, &scope()).await.err();
    let elapsed = started.elapsed();
    assert!(matches!(err, Some(Error::TimedOut { .. })), "{err:?}");
    assert!(
        elapsed < Duration::from_secs(10),
        "stopped after {elapsed:?}"
    );
    let load = sql.load();
    assert_eq!((load.running, load.timed_out), (0, 1), "{load:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_memory_share_fails_naming_the_limit() -> Result {
    let (sql, _dir) = engine(QueryLimits::with_memory(32 << 20))?;
    // 10^8 values in one list: 800 MB, far past 16 MiB (sorts and grouping spill to
    // disk instead; an aggregate's list cannot).
    let query = "SELECT cardinality(array_agg(x * 10000 + y)) FROM unnest(sequence(1, 10000)) AS a(x) \
        CROSS JOIN unnest(sequence(1, 10000)) AS b(y)";
    let err = sql.query(query, &scope()).await.err();
    let Some(Error::ResourcesExhausted(message)) = err else {
        return Err(format!("expected a memory refusal, got {err:?}").into());
    };
    assert!(
        message.contains("16.0 MB") && message.contains("one query"),
        "{message}"
    );
    // The plan's tasks are aborted and drop their reservations as they wind down.
    let deadline = Instant::now() + Duration::from_secs(10);
    while sql.load().reserved_bytes > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let load = sql.load();
    assert_eq!(load.reserved_bytes, 0, "{load:?}");
    assert!(load.out_of_memory >= 1, "{load:?}");
    // A small query still runs.
    let out = sql.query("SELECT 1 AS one", &scope()).await?;
    assert_eq!(out.num_rows(), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_query_stops_it() -> Result {
    let (sql, _dir) = engine(QueryLimits::default())?;
    let query = "SELECT x, y FROM unnest(sequence(1, 10000)) AS a(x) \
        CROSS JOIN unnest(sequence(1, 10000)) AS b(y)";
    let (mut stream, _) = sql.prepare(query, &scope(), None).await?.stream().await?;
    let first = stream.next().await.transpose()?;
    assert!(first.is_some_and(|b| b.num_rows() > 0));
    assert_eq!(sql.load().running, 1);
    drop(stream);
    let load = sql.load();
    assert_eq!((load.running, load.dropped), (0, 1), "{load:?}");
    Ok(())
}
