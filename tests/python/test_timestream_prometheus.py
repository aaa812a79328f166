"""What the Timestream Prometheus connector sends and parses, replayed through boto3.

The connector (awslabs/amazon-timestream-connector-prometheus, v1.3.2,
https://github.com/awslabs/amazon-timestream-connector-prometheus/blob/main/timestream/client.go)
is a Prometheus remote-write/remote-read adapter:

- It writes every sample as a single-measure DOUBLE record (`appendRecords`): the metric
  name is `MeasureName`, every other label a dimension (in Go map order), the value
  `strconv.FormatFloat(v, 'f', 6, 64)` (6 decimals), the time in milliseconds with
  `TimeUnit` MILLISECONDS, 100 records a WriteRecords.
- For a remote read it builds one query per Prometheus query (`buildCommands`):
  `SELECT * FROM "db"."table" WHERE <matchers> AND time BETWEEN FROM_UNIXTIME(s) AND
  FROM_UNIXTIME(s)`, matchers `"label" = 'v'`, `"label" != 'v'`, `REGEXP_LIKE("label",
  'v')`, `NOT REGEXP_LIKE("label", 'v')` in the order Prometheus gave them, `__name__`
  as `"measure_name"`, the window in whole seconds (milliseconds / 1000).
- It pages with the SDK's query paginator and parses each row by `ColumnInfo[].Name`
  (`convertToResult`, `constructLabels`): `time` with the Go layout
  `2006-01-02 15:04:05.000000000` (exactly nine fractional digits), `measure_value::double`
  with ParseFloat, `measure_name` as the `__name__` label, every other non-null column as
  a label; rows with equal label lists (in column order) are one series.
- A query that names a label no record has must fail with a message holding "Column" and
  "does not exist" (Timestream's "Column 'x' does not exist"); the connector turns that
  error into an empty result (`Read`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

import pytest
from botocore.exceptions import ClientError

from test_timestream_query import now_ms

# client.go: timestampLayout = "2006-01-02 15:04:05.000000000".
GO_TIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{9}")
MATCHER_SQL = {
    "=": "\"{}\" = '{}'",
    "!=": "\"{}\" != '{}'",
    "=~": "REGEXP_LIKE(\"{}\", '{}')",
    "!~": "NOT REGEXP_LIKE(\"{}\", '{}')",
}


# ---- the connector, in Python ---------------------------------------------------------


def connector_records(series: list[tuple[dict, list[tuple[int, float]]]]) -> list[dict]:
    """`appendRecords` for [(labels incl. __name__, [(ms, value), ...]), ...]."""
    records = []
    for i, (labels, samples) in enumerate(series):
        dims = [{"Name": k, "Value": v} for k, v in labels.items() if k != "__name__"]
        if i % 2:  # Go's map iteration order varies
            dims.reverse()
        for t, v in samples:
            records.append(
                {
                    "Dimensions": dims,
                    "MeasureName": labels["__name__"],
                    "MeasureValue": f"{v:.6f}",
                    "MeasureValueType": "DOUBLE",
                    "Time": str(t),
                    "TimeUnit": "MILLISECONDS",
                }
            )
    return records


def write(table, series) -> None:
    records = connector_records(series)
    for i in range(0, len(records), 100):  # maxWriteBatchLength
        table.write(records[i : i + 100])


def build_query(table, matchers: list[tuple[str, str, str]], start_ms: int, end_ms: int) -> str:
    """`buildCommands` for one Prometheus query: matchers are (label, op, value)."""
    parts = [
        MATCHER_SQL[op].format("measure_name" if label == "__name__" else label, value)
        for label, op, value in matchers
    ]
    parts.append(
        f"time BETWEEN FROM_UNIXTIME({start_ms // 1000}) AND FROM_UNIXTIME({end_ms // 1000})"
    )
    return f'SELECT * FROM "{table.db}"."{table.name}" WHERE {" AND ".join(parts)}'


def parse_time(text: str) -> int:
    """`time.Parse(timestampLayout, …)` as epoch milliseconds."""
    assert GO_TIME.fullmatch(text), f"{text!r} does not parse with 2006-01-02 15:04:05.000000000"
    t = dt.datetime.strptime(text[:-3], "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return round(t.timestamp() * 1_000_000) // 1000


def read(ts_query, query: str) -> tuple[list[str], dict[tuple, list[tuple[int, float]]]]:
    """`Read` of one query: every page's ColumnInfo names, and the series it parses as
    {sorted labels: [(ms, value), ...] in row order}."""
    series: list[tuple[list, list]] = []
    names: list[str] = []
    for page in ts_query.get_paginator("query").paginate(QueryString=query):
        columns = [c["Name"] for c in page["ColumnInfo"]]
        names = names or columns
        assert columns == names, "ColumnInfo changed between pages"
        for row in page["Rows"]:
            labels, sample = [], [None, 0.0]
            assert len(row["Data"]) == len(columns), row
            for column, datum in zip(columns, row["Data"]):
                if datum.get("NullValue"):
                    continue
                value = datum["ScalarValue"]
                if column == "time":
                    sample[0] = parse_time(value)
                elif column == "measure_value::double":
                    sample[1] = float(value)
                elif column == "measure_name":
                    labels.append(("__name__", value))
                else:
                    labels.append((column, value))
            for known, samples in series:  # constructTimeSeries: equal label lists
                if known == labels:
                    samples.append(tuple(sample))
                    break
            else:
                series.append((labels, [tuple(sample)]))
    out: dict[tuple, list] = {}
    for labels, samples in series:
        key = tuple(sorted(labels))
        assert key not in out, f"one series split by label order: {key}"
        out[key] = samples
    return names, out


def key(labels: dict) -> tuple:
    return tuple(sorted(labels.items()))


def expected(series, start_ms: int, end_ms: int) -> dict[tuple, list[tuple[int, float]]]:
    """What the connector should read back of `series` in the window it queries."""
    lo, hi = start_ms // 1000 * 1000, end_ms // 1000 * 1000
    out = {}
    for labels, samples in series:
        kept = sorted((t, float(f"{v:.6f}")) for t, v in samples if lo <= t <= hi)
        if kept:
            out[key(labels)] = kept
    return out


def by_time(result: dict) -> dict:
    """Series with their samples in time order (`SELECT *` has no ORDER BY)."""
    return {k: sorted(v) for k, v in result.items()}


# ---- data ------------------------------------------------------------------------------

STEP_MS = 15_000


@dataclass
class Prom:
    """The connector's table, what was written to it and a window covering it all."""

    db: str
    name: str
    series: list
    window: tuple[int, int]


@pytest.fixture
def prom(ts) -> Prom:
    """A table written as the connector writes: `up` of three targets and
    `http_requests_total` of three label sets, a sample every 15 s for 5 minutes."""
    table = ts.table()
    end = now_ms() - 5_000
    times = [end - i * STEP_MS for i in range(20)]
    values = [0.000001, 0.1, 1234.5, -3.25, 1e9 / 3, 2.0 / 3, 0.0, 42.0, 1e-7, 7.125]

    def samples(seed: int):
        return [(t, values[(i + seed) % len(values)] + seed) for i, t in enumerate(times)]

    series = [
        ({"__name__": "up", "instance": "h1:9100", "job": "node"}, samples(0)),
        ({"__name__": "up", "instance": "h2:9100", "job": "node"}, samples(1)),
        ({"__name__": "up", "instance": "h10:9090", "job": "prometheus"}, samples(2)),
    ] + [
        (
            {"__name__": "http_requests_total", "instance": inst, "job": job,
             "code": code, "method": "GET"},
            samples(10 + n),
        )
        for n, (inst, job, code) in enumerate(
            [("h1:9100", "node", "200"), ("h1:9100", "node", "500"), ("h2:9100", "api", "200")]
        )
    ]
    write(table, series)
    return Prom(table.db, table.name, series, (times[-1] - 1_000, end + 1_000))


def of(series, **labels):
    """The written series whose labels include `labels`."""
    return [(ls, s) for ls, s in series if all(ls.get(k) == v for k, v in labels.items())]


# ---- tests -----------------------------------------------------------------------------


def test_metric_name_equality_reads_every_series_of_the_metric(ts_query, prom):
    start, end = prom.window
    query = build_query(prom, [("__name__", "=", "up")], start, end)
    assert query == (
        f'SELECT * FROM "{prom.db}"."{prom.name}" WHERE "measure_name" = \'up\' AND '
        f"time BETWEEN FROM_UNIXTIME({start // 1000}) AND FROM_UNIXTIME({end // 1000})"
    )
    names, result = read(ts_query, query)
    assert {"time", "measure_name", "measure_value::double"} <= set(names)
    assert {"instance", "job", "code", "method"} <= set(names)
    # Columns of labels `up` lacks are null in its rows: they make no label.
    assert by_time(result) == expected(of(prom.series, __name__="up"), start, end)
    assert {len(k) for k in result} == {3}


def test_label_not_equal(ts_query, prom):
    start, end = prom.window
    query = build_query(prom, [("__name__", "=", "up"), ("job", "!=", "node")], start, end)
    _, result = read(ts_query, query)
    assert by_time(result) == expected(of(prom.series, __name__="up", job="prometheus"), start, end)


def test_regex_matchers_are_unanchored_finds(ts_query, prom):
    """Timestream's REGEXP_LIKE finds the pattern anywhere; the connector passes
    Prometheus's (anchored) regexes through as they are."""
    start, end = prom.window
    up = of(prom.series, __name__="up")
    _, found = read(
        ts_query, build_query(prom, [("__name__", "=", "up"), ("instance", "=~", "h1")], start, end)
    )
    assert by_time(found) == expected(
        [s for s in up if s[0]["instance"] in ("h1:9100", "h10:9090")], start, end
    )
    _, anchored = read(
        ts_query,
        build_query(prom, [("__name__", "=", "up"), ("instance", "=~", "^h1:.*$")], start, end),
    )
    assert by_time(anchored) == expected(of(up, instance="h1:9100"), start, end)
    either = [("__name__", "=~", "up|http_.*"), ("job", "=~", "api|prom")]
    _, alternation = read(ts_query, build_query(prom, either, start, end))
    assert by_time(alternation) == expected(
        [s for s in prom.series if s[0]["job"] in ("api", "prometheus")], start, end
    )


def test_negative_regex(ts_query, prom):
    start, end = prom.window
    query = build_query(prom, [("__name__", "=", "up"), ("instance", "!~", "h1")], start, end)
    _, result = read(ts_query, query)
    want = of(prom.series, __name__="up", instance="h2:9100")
    assert by_time(result) == expected(want, start, end)


def test_every_matcher_kind_in_one_query(ts_query, prom):
    """The shape of client_test.go's multi-matcher query: = , !=, =~, !~ and the window."""
    start, end = prom.window
    matchers = [
        ("__name__", "=", "http_requests_total"),
        ("code", "!=", "500"),
        ("job", "=~", "node|api"),
        ("instance", "!~", "h2"),
    ]
    query = build_query(prom, matchers, start, end)
    assert query.endswith(
        "\"measure_name\" = 'http_requests_total' AND \"code\" != '500' AND "
        "REGEXP_LIKE(\"job\", 'node|api') AND NOT REGEXP_LIKE(\"instance\", 'h2') AND "
        f"time BETWEEN FROM_UNIXTIME({start // 1000}) AND FROM_UNIXTIME({end // 1000})"
    )
    names, result = read(ts_query, query)
    assert {"time", "measure_name", "measure_value::double", "code", "method"} <= set(names)
    want = of(prom.series, __name__="http_requests_total", instance="h1:9100", code="200")
    assert len(want) == 1
    assert by_time(result) == expected(want, start, end)
    assert {len(k) for k in result} == {5}


def test_window_is_whole_seconds_and_inclusive(ts, ts_query):
    """The connector truncates Prometheus's millisecond bounds to seconds and asks
    BETWEEN FROM_UNIXTIME(start) AND FROM_UNIXTIME(end): both ends are included."""
    table = ts.table()
    s = now_ms() // 1000 - 120
    e = s + 60
    labels = {"__name__": "edge", "instance": "h1:9100"}
    at = [s * 1000 - 1, s * 1000, s * 1000 + 500, e * 1000, e * 1000 + 1, e * 1000 + 999]
    write(table, [(labels, [(t, i + 0.5) for i, t in enumerate(at)])])
    # Prometheus asks for [s.700, e.999]; the connector sends [s, e].
    start_ms, end_ms = s * 1000 + 700, e * 1000 + 999
    query = build_query(table, [("__name__", "=", "edge")], start_ms, end_ms)
    assert f"FROM_UNIXTIME({s}) AND FROM_UNIXTIME({e})" in query
    _, result = read(ts_query, query)
    inside = [(s * 1000, 1.5), (s * 1000 + 500, 2.5), (e * 1000, 3.5)]
    assert by_time(result) == {key(labels): inside}


def test_time_text_has_nine_fractional_digits_on_whole_seconds(ts, ts_query):
    """Go's layout wants exactly nine digits, also when they are all zero."""
    table = ts.table()
    base = now_ms() // 1000 * 1000 - 60_000
    labels = {"__name__": "whole", "job": "j"}
    samples = [(base, 1.0), (base + 1, 2.0), (base + 10, 3.0), (base + 100, 4.0)]
    write(table, [(labels, samples)])
    query = build_query(table, [("__name__", "=", "whole")], base, base + 1000)
    resp = ts_query.query(QueryString=query)
    times = sorted(r["Data"][[c["Name"] for c in resp["ColumnInfo"]].index("time")]["ScalarValue"]
                   for r in resp["Rows"])
    whole = dt.datetime.fromtimestamp(base / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    assert times == [
        f"{whole}.000000000", f"{whole}.001000000", f"{whole}.010000000", f"{whole}.100000000"
    ]
    _, result = read(ts_query, query)
    assert by_time(result) == {key(labels): samples}


def test_unknown_label_fails_as_a_missing_column(ts_query, prom):
    """A matcher on a label no record has: Timestream answers ValidationException
    "Column 'x' does not exist", which `Read` turns into an empty result; any other
    message fails the whole remote read."""
    start, end = prom.window
    query = build_query(prom, [("__name__", "=", "up"), ("datacenter", "=", "x")], start, end)
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=query)
    err = e.value.response["Error"]
    assert err["Code"] == "ValidationException", err
    assert "Column" in err["Message"] and "does not exist" in err["Message"], err
    assert "datacenter" in err["Message"], err
