//! [`decode_block_columns`]: typed columns, sparse attributes, projection.

use super::super::*;
use super::point;

/// `a` DOUBLE on every point, `b` BIGINT on even points, `c` VARCHAR on every third.
fn sparse() -> Vec<BlockPoint> {
    (0..30)
        .map(|i| {
            let mut vs = vec![("a".to_string(), Value::Double(i as f64 * 1.5))];
            if i % 2 == 0 {
                vs.push(("b".to_string(), Value::Bigint(i)));
            }
            if i % 3 == 0 {
                vs.push(("c".to_string(), Value::Varchar(format!("s{}", i % 2))));
            }
            point(i * 1000, Measures::multi(vs))
        })
        .collect()
}

#[test]
fn columns_hold_what_the_points_hold() {
    let points = sparse();
    let bytes = encode_block(&points, true).unwrap();
    let cols = decode_block_columns(&bytes, true, &|_| true).unwrap();
    let times: Vec<i64> = points.iter().map(|p| p.time_ns).collect();
    assert_eq!(cols.times_ns, times);
    assert_eq!(cols.versions, vec![1; 30]);
    let evens: Vec<u32> = (0..30).step_by(2).collect();
    let thirds: Vec<u32> = (0..30).step_by(3).collect();
    assert_eq!(
        cols.columns,
        vec![
            BlockColumn {
                name: "a".into(),
                points: None,
                values: ColumnValues::Double((0..30).map(|i| i as f64 * 1.5).collect()),
            },
            BlockColumn {
                name: "b".into(),
                points: Some(evens.clone()),
                values: ColumnValues::Bigint(evens.iter().map(|&i| i64::from(i)).collect()),
            },
            BlockColumn {
                name: "c".into(),
                points: Some(thirds.clone()),
                values: ColumnValues::Varchar(
                    thirds.iter().map(|i| format!("s{}", i % 2)).collect()
                ),
            },
        ]
    );
    assert_eq!(cols.columns[1].values.kind(), MeasureType::Bigint);
    assert_eq!(cols.columns[2].values.len(), 10);
    assert!(!cols.columns[2].values.is_empty());
}

#[test]
fn projection_decodes_only_what_is_asked() {
    let bytes = encode_block(&sparse(), true).unwrap();
    let all = decode_block_columns(&bytes, true, &|_| true).unwrap();
    let only_c = decode_block_columns(&bytes, true, &|n| n == "c").unwrap();
    assert_eq!(only_c.times_ns, all.times_ns);
    assert_eq!(only_c.columns, vec![all.columns[2].clone()]);
    let none = decode_block_columns(&bytes, true, &|_| false).unwrap();
    assert!(none.columns.is_empty());
    assert_eq!(none.times_ns.len(), 30);
    assert!(decode_block_columns(&bytes, false, &|_| true).is_err());
}

#[test]
fn a_single_value_block_has_one_unnamed_column_per_type() {
    let points: Vec<BlockPoint> = (0..10)
        .map(|i| {
            let v = if i < 7 {
                Value::Bigint(i)
            } else {
                Value::Double(0.5)
            };
            point(i, Measures::Single(v))
        })
        .collect();
    let bytes = encode_block(&points, false).unwrap();
    let cols = decode_block_columns(&bytes, false, &|_| true).unwrap();
    assert_eq!(cols.columns.len(), 2);
    assert_eq!(cols.columns[0].name, "");
    assert_eq!(
        cols.columns[0].values,
        ColumnValues::Bigint((0..7).collect())
    );
    assert_eq!(cols.columns[1].points, Some(vec![7, 8, 9]));
    assert_eq!(decode_block(&bytes, false).unwrap(), points);
}

#[test]
fn a_wide_sparse_block_decodes_in_linear_time() {
    // 20,000 attributes on the first point, none on the 100,000 others: any work per
    // (column, point) pair would be 2e9 steps.
    let wide: Vec<(String, Value)> = (0..20_000)
        .map(|i| (format!("a{i}"), Value::Bigint(i)))
        .collect();
    let points: Vec<BlockPoint> = (0..100_000)
        .map(|t| {
            let vs = if t == 0 { wide.clone() } else { Vec::new() };
            point(t, Measures::multi(vs))
        })
        .collect();
    let bytes = encode_block(&points, true).unwrap();
    let start = std::time::Instant::now();
    let cols = decode_block_columns(&bytes, true, &|_| true).unwrap();
    assert_eq!(cols.columns.len(), 20_000);
    assert!(cols.columns.iter().all(|c| c.points == Some(vec![0])));
    assert_eq!(decode_block(&bytes, true).unwrap(), points);
    assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
}

#[test]
fn the_newest_point_in_a_window_is_the_one_decoding_every_point_finds() {
    let mut rng = super::XorShift(0x9e37_79b9_7f4a_7c15);
    for case in 0..400 {
        let multi = case % 2 == 0;
        let points = super::random_points(&mut rng, 200, multi);
        let bytes = encode_block(&points, multi).unwrap();
        let (first, last) = (points[0].time_ns, points[points.len() - 1].time_ns);
        let span = (last - first).max(1);
        let cut = |x: u64| first + (x % span as u64) as i64;
        let windows = [
            (i64::MIN, i64::MAX),
            (cut(rng.next()), cut(rng.next()).saturating_add(1)),
            (first, first + 1),
            (last, i64::MAX),
            (last + 1, i64::MAX),
        ];
        for keep in [&(|_: &str| true) as &dyn Fn(&str) -> bool, &|n: &str| {
            n == "m1"
        }] {
            let all = decode_block_keeping(&bytes, multi, keep).unwrap();
            for (start, end) in windows {
                let want = all
                    .iter()
                    .rev()
                    .find(|p| p.time_ns >= start && p.time_ns < end)
                    .cloned();
                let got = decode_newest_within(&bytes, multi, keep, (start, end)).unwrap();
                // As text: NaN values are equal there.
                assert_eq!(
                    format!("{got:?}"),
                    format!("{want:?}"),
                    "case {case}, window {start}..{end}"
                );
            }
        }
    }
}
