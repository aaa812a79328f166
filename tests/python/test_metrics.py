"""`/metrics` (Prometheus text format 0.0.4) and `/api/stats` on the console listener.

Each test scrapes before and after what it does and compares the two. pytest runs this
suite serially against the session server, so a series only this test touches (MutateRow,
WriteRecords, ...) moves by exactly what the test did; totals that background work also
moves (rows written, commit batches) are checked with >=.
"""

from __future__ import annotations

import re
import time
import uuid

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import ReadRowsQuery, SetCell

from bt_helpers import INSTANCE, MS
from console_helpers import api, delta, scrape, wait_until
from test_timestream_query import now_ms, rec

GRPC = "google.bigtable.v2.Bigtable/"
HOUR_MS = 3600 * 1000

COUNTERS = (
    "almanac_grpc_requests_total",
    "almanac_grpc_errors_total",
    "almanac_timestream_requests_total",
    "almanac_timestream_errors_total",
    "almanac_rows_read_total",
    "almanac_cells_read_total",
    "almanac_bytes_read_total",
    "almanac_rows_written_total",
    "almanac_cells_written_total",
    "almanac_bytes_written_total",
    "almanac_points_ingested_total",
    "almanac_points_rejected_total",
    "almanac_commit_batches_total",
    "almanac_compactions_total",
    "almanac_seal_passes_total",
)
HISTOGRAMS = (
    "almanac_grpc_request_duration_seconds",
    "almanac_timestream_request_duration_seconds",
    "almanac_fsync_duration_seconds",
)
GAUGES = (
    "almanac_memtable_bytes",
    "almanac_disk_bytes",
    "almanac_journal_bytes",
    "almanac_open_connections",
)
STATS_KEYS = {
    "time_ms", "requests", "errors", "rows_read", "rows_written", "bytes_read",
    "bytes_written", "points_ingested", "points_rejected", "memtable_bytes", "disk_bytes",
    "journal_bytes", "open_connections",
}  # fmt: skip


def check_histogram(before, after, name: str, moved: int | None = None, **labels) -> None:
    """Cumulative buckets ending in +Inf == _count; `moved` (if given) is the exact
    growth of _count, else it must grow; _sum grows too."""
    buckets = after.buckets(name, **labels)
    assert buckets, f"no {name}_bucket series for {labels}"
    les = [le for le, _ in buckets]
    assert les[-1] == float("inf"), les
    counts = [c for _, c in buckets]
    assert counts == sorted(counts), f"{name} buckets not cumulative: {buckets}"
    count = after.value(name + "_count", **labels)
    assert counts[-1] == count, (buckets, count)
    grew = delta(before, after, name + "_count", **labels)
    if moved is None:
        assert grew >= 1, f"{name}{labels} _count did not move"
    else:
        assert grew == moved, f"{name}{labels} _count moved by {grew}, not {moved}"
    assert delta(before, after, name + "_sum", **labels) > 0


def test_every_metric_is_exposed_with_its_type(server, table, data_client, ts, ts_write):
    # One of everything first, so that every labelled series exists.
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", MS))
    with pytest.raises(gexc.NotFound):
        data_client.get_table(INSTANCE, f"missing-{uuid.uuid4().hex[:8]}").read_row(b"r")
    t = ts.table()
    t.write([rec("cpu", "1.5")])
    with pytest.raises(ts_write.exceptions.ValidationException):
        t.write([rec("cpu", "1.5", t=now_ms() + 2 * HOUR_MS)] * 101)  # > 100 records

    m = scrape(server)
    for name in COUNTERS:
        assert m.types.get(name) == "counter", f"{name}: {m.types.get(name)}"
        assert all(s.value >= 0 for s in m.series(name)), m.series(name)
    for name in HISTOGRAMS:
        assert m.types.get(name) == "histogram", f"{name}: {m.types.get(name)}"
    for name in GAUGES:
        assert m.types.get(name) == "gauge", f"{name}: {m.types.get(name)}"
        assert m.series(name), f"{name} has no series"
        assert all(s.value >= 0 for s in m.series(name)), m.series(name)
    # As served, every counter's name ends in _total (the parser would add it).
    declared = re.findall(r"^# TYPE (\S+) counter\s*$", m.text, re.M)
    assert declared and all(n.endswith("_total") for n in declared), declared
    codes = {s.labels.get("code") for s in m.series("almanac_grpc_errors_total")}
    assert "NOT_FOUND" in codes and all(re.fullmatch(r"[A-Z_]+", c or "") for c in codes), codes


def test_mutate_row_and_read_rows_are_counted(server, table):
    n = 7
    before = scrape(server)
    for i in range(n):
        table.data.mutate_row(
            f"row-{i}".encode(),
            [SetCell("cf1", b"a", b"x" * 100, MS), SetCell("cf2", b"b", b"y" * 50, MS)],
        )
    after = scrape(server)
    method = GRPC + "MutateRow"
    assert delta(before, after, "almanac_grpc_requests_total", method=method) == n
    assert delta(before, after, "almanac_grpc_errors_total", method=method) == 0
    check_histogram(before, after, "almanac_grpc_request_duration_seconds", n, method=method)
    assert delta(before, after, "almanac_rows_written_total") >= n
    assert delta(before, after, "almanac_cells_written_total") >= 2 * n
    assert delta(before, after, "almanac_bytes_written_total") >= 150 * n
    # The session server syncs every acknowledged write (--fsync sync, the default).
    assert delta(before, after, "almanac_commit_batches_total") >= 1
    check_histogram(before, after, "almanac_fsync_duration_seconds")

    rows = table.data.read_rows(ReadRowsQuery())
    assert len(rows) == n
    read = scrape(server)
    assert delta(after, read, "almanac_grpc_requests_total", method=GRPC + "ReadRows") >= 1
    assert delta(after, read, "almanac_rows_read_total") >= n
    assert delta(after, read, "almanac_cells_read_total") >= 2 * n
    assert delta(after, read, "almanac_bytes_read_total") >= 150 * n
    check_histogram(after, read, "almanac_grpc_request_duration_seconds", method=GRPC + "ReadRows")


def test_missing_table_counts_a_not_found_error(server, data_client):
    missing = data_client.get_table(INSTANCE, f"missing-{uuid.uuid4().hex[:8]}")
    before = scrape(server)
    with pytest.raises(gexc.NotFound):
        missing.read_row(b"k")
    after = scrape(server)
    method = GRPC + "ReadRows"
    assert delta(before, after, "almanac_grpc_errors_total", method=method, code="NOT_FOUND") >= 1
    assert delta(before, after, "almanac_grpc_requests_total", method=method) >= 1


def test_write_records_counts_points(server, ts):
    t = ts.table()
    now = now_ms()
    k = 5
    records = [rec("cpu", f"{i}.5", t=now - i * 1000, host=f"h{i}") for i in range(k)]
    before = scrape(server)
    assert t.write(records)["RecordsIngested"]["Total"] == k
    after = scrape(server)
    op = {"operation": "WriteRecords"}
    assert delta(before, after, "almanac_points_ingested_total") == k
    assert delta(before, after, "almanac_points_rejected_total") == 0
    assert delta(before, after, "almanac_timestream_requests_total", **op) == 1
    assert delta(before, after, "almanac_timestream_errors_total", **op) == 0
    check_histogram(before, after, "almanac_timestream_request_duration_seconds", 1, **op)


def test_rejected_records_are_counted(server, ts):
    t = ts.table(memory_hours=1, magnetic_days=1)
    now = now_ms()
    good = [rec("m", "1", t=now, host="a"), rec("m", "2", t=now, host="b")]
    too_far_ahead = rec("m", "3", t=now + 2 * HOUR_MS, host="c")
    before = scrape(server)
    with pytest.raises(t.client.exceptions.RejectedRecordsException):
        t.write([good[0], too_far_ahead, good[1]])
    after = scrape(server)
    op = {"operation": "WriteRecords"}
    assert delta(before, after, "almanac_points_ingested_total") == 2
    assert delta(before, after, "almanac_points_rejected_total") == 1
    assert delta(before, after, "almanac_timestream_requests_total", **op) == 1
    assert (
        delta(before, after, "almanac_timestream_errors_total",
              exception="RejectedRecordsException", **op) == 1
    )  # fmt: skip


def test_validation_error_is_counted_by_exception(server, ts, ts_write_unvalidated):
    t = ts.table()
    before = scrape(server)
    with pytest.raises(ts_write_unvalidated.exceptions.ValidationException):
        t.write([], client=ts_write_unvalidated)
    after = scrape(server)
    labels = {"operation": "WriteRecords", "exception": "ValidationException"}
    assert delta(before, after, "almanac_timestream_errors_total", **labels) == 1
    assert delta(before, after, "almanac_points_ingested_total") == 0


def test_gauges_and_open_connections(server, data_client, table, ts_write):
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", MS))  # a live gRPC connection
    ts_write.list_databases()  # and a live Timestream one (boto3 keeps it open)
    m = scrape(server)
    for name in ("almanac_memtable_bytes", "almanac_disk_bytes", "almanac_journal_bytes"):
        assert len(m.series(name)) >= 1 and m.value(name) >= 0, m.series(name)
    conns = {s.labels.get("listener"): s.value for s in m.series("almanac_open_connections")}
    assert {"grpc", "timestream", "console"} <= set(conns), conns
    assert all(v >= 0 for v in conns.values()), conns
    assert conns["grpc"] >= 1, conns
    assert conns["console"] >= 1, f"the scrape itself is an open console connection: {conns}"


def test_seal_passes_and_compactions(server):
    """The session server seals every second (--seal-secs 1): the pass counter moves."""
    first = scrape(server)
    assert first.value("almanac_compactions_total") >= 0
    wait_until(
        "almanac_seal_passes_total to grow",
        lambda: delta(first, scrape(server), "almanac_seal_passes_total") >= 1,
        timeout=15,
    )


def test_stats_snapshot(server, table):
    s0 = api(server, "/api/stats")
    assert STATS_KEYS <= set(s0), STATS_KEYS - set(s0)
    assert all(isinstance(s0[k], (int, float)) and s0[k] >= 0 for k in STATS_KEYS), s0
    assert abs(s0["time_ms"] - time.time() * 1000) < 60_000, s0["time_ms"]
    n = 4
    for i in range(n):
        table.data.mutate_row(f"s{i}".encode(), SetCell("cf1", b"q", b"v" * 10, MS))
    s1 = api(server, "/api/stats")
    assert s1["time_ms"] >= s0["time_ms"]
    assert s1["requests"] - s0["requests"] >= n
    assert s1["rows_written"] - s0["rows_written"] >= n
    assert s1["bytes_written"] - s0["bytes_written"] >= 10 * n
    for k in ("requests", "errors", "rows_read", "rows_written", "bytes_read",
              "bytes_written", "points_ingested", "points_rejected"):  # fmt: skip
        assert s1[k] >= s0[k], f"counter {k} went down: {s0[k]} -> {s1[k]}"
