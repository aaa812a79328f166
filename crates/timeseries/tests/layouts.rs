//! Golden files of the stored layout of each pattern (`testdata/layouts/*.txt`): the
//! rows and cells made from the weather-balloon example of Google's "Schema design for
//! time series data" for Bigtable. A change to key or value encoding shows up here as a
//! diff; `UPDATE_GOLDEN=1` rewrites them. Byte layout: docs/format.md#time-series-cells

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::sync::Arc;

use almanac_engine::clock::ManualClock;
use almanac_engine::{Durability, Engine, Options, ReadRequest};
use almanac_timeseries::{
    Dimension, EmbeddedStore, Layout, MeasureValue, NewTable, Pattern, Record, TimeSeries,
    WideColumnStore,
};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// 2021-03-05T12:00:00Z, the time in that guide's example row key.
const T0_MS: i64 = 1_614_945_600_000;

fn printable(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        if b.is_ascii_graphic() {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

fn records() -> Vec<Record<'static>> {
    let mut out = Vec::new();
    for minute in 0..2 {
        let time = (T0_MS + minute * 60_000).to_string();
        let dims = vec![
            Dimension {
                name: "location".into(),
                value: "us-west2".into(),
            },
            Dimension {
                name: "balloon".into(),
                value: "3698".into(),
            },
        ];
        out.push(Record {
            dimensions: dims.clone(),
            measure_name: Some("pressure".into()),
            measure_value: Some((94_558 - minute * 436).to_string().into()),
            measure_value_type: Some("BIGINT".into()),
            time: Some(time.clone().into()),
            version: Some(1 + minute),
            ..Record::default()
        });
        out.push(Record {
            dimensions: dims,
            measure_name: Some("weather".into()),
            measure_value_type: Some("MULTI".into()),
            measure_values: vec![
                MeasureValue {
                    name: "temp".into(),
                    value: "9.5".into(),
                    kind: "DOUBLE".into(),
                },
                MeasureValue {
                    name: "humidity".into(),
                    value: "65".into(),
                    kind: "BIGINT".into(),
                },
            ],
            time: Some(time.into()),
            ..Record::default()
        });
    }
    out
}

fn dump(pattern: Pattern) -> Result<String> {
    let dir = std::env::temp_dir().join(format!(
        "almanac-layout-{}-{}",
        pattern.as_str(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = Arc::new(ManualClock::new((T0_MS + 600_000) * 1000));
    let engine = Engine::open(
        &dir,
        Options {
            durability: Durability::None,
            clock: clock.clone(),
            ..Options::default()
        },
    )?;
    let store = Arc::new(EmbeddedStore::new(
        Arc::new(engine),
        "projects/p/instances/i",
    ));
    let ts = TimeSeries::open(Arc::clone(&store), clock)?;
    ts.create_database("weather", None)?;
    let layout = Layout {
        pattern,
        bucket_secs: 3600,
        reverse_time: false,
        seal: false,
    };
    let meta = ts.create_table(
        "weather",
        "balloons",
        NewTable {
            layout,
            ..NewTable::default()
        },
    )?;
    ts.write_records("weather", "balloons", None, &records())?;
    let mut out = format!(
        "# {} (bucket 1h), table {}\n",
        pattern.as_str(),
        meta.store_table
    );
    store.read_rows(&meta.store_table, ReadRequest::default(), &mut |row| {
        let _ = writeln!(out, "{}", printable(&row.key));
        for c in &row.cells {
            let _ = writeln!(
                out,
                "  {}:{} @{} = {}",
                c.family,
                printable(&c.qualifier),
                c.timestamp_us,
                printable(&c.value)
            );
        }
        ControlFlow::Continue(())
    })?;
    drop(ts);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

#[test]
fn layouts_match_golden_files() -> Result {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/layouts");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    for pattern in Pattern::ALL {
        let got = dump(pattern)?;
        let path = dir.join(format!("{}.txt", pattern.as_str()));
        if update {
            std::fs::create_dir_all(&dir)?;
            std::fs::write(&path, &got)?;
            continue;
        }
        let want = std::fs::read_to_string(&path)
            .map_err(|e| format!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()))?;
        assert_eq!(
            got,
            want,
            "layout of {} changed; UPDATE_GOLDEN=1 to accept",
            pattern.as_str()
        );
    }
    Ok(())
}
