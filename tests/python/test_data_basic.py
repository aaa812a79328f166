"""Writing and reading cells: versions, timestamps, deletes, row sets, scans, odd keys."""

from __future__ import annotations

import datetime as dt
import os

import pytest
from google.cloud.bigtable.data import (
    DeleteAllFromFamily,
    DeleteAllFromRow,
    DeleteRangeFromColumn,
    ReadRowsQuery,
    RowRange,
    SetCell,
)
from google.cloud.bigtable.row_filters import TimestampRange
from google.cloud.bigtable.row_set import RowSet

from bt_helpers import (
    INSTANCE,
    MS,
    PROJECT,
    by_family,
    cells,
    keys,
    now_ms_micros,
    raw_read_rows,
    read_all,
)

UTC = dt.timezone.utc


def _fill(bt, row_keys, family="cf1"):
    for k in row_keys:
        bt.data.mutate_row(k, SetCell(family, b"q", b"v-" + k, 1 * MS))


def test_set_and_read_with_classic_rows(table):
    when = dt.datetime(2024, 3, 5, 12, 0, 0, 123456, tzinfo=UTC)
    row = table.classic.direct_row(b"r1")
    row.set_cell("cf1", b"q1", b"v1", timestamp=when)
    row.set_cell("cf2", b"q2", b"v2", timestamp=when)
    assert row.commit().code == 0

    got = table.classic.read_row(b"r1")
    want_ts = int(when.timestamp()) * 1_000_000 + 123_000  # the client truncates to ms
    assert got.row_key == b"r1"
    assert [(c.value, c.timestamp_micros) for c in got.cells["cf1"][b"q1"]] == [(b"v1", want_ts)]
    assert [(c.value, c.timestamp_micros) for c in got.cells["cf2"][b"q2"]] == [(b"v2", want_ts)]
    assert got.cell_value("cf1", b"q1") == b"v1"


def test_versions_newest_first_and_same_timestamp_overwrites(table):
    for ts, v in [(1, b"one"), (3, b"three"), (2, b"two")]:
        table.data.mutate_row(b"r", SetCell("cf1", b"q", v, ts * MS))
    assert cells(table.data.read_row(b"r")) == [
        ("cf1", b"q", 3 * MS, b"three"),
        ("cf1", b"q", 2 * MS, b"two"),
        ("cf1", b"q", 1 * MS, b"one"),
    ]
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"TWO", 2 * MS))
    assert [c[2:] for c in cells(table.data.read_row(b"r"))] == [
        (3 * MS, b"three"),
        (2 * MS, b"TWO"),
        (1 * MS, b"one"),
    ]


def test_server_assigned_timestamp(table):
    before = now_ms_micros()
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", timestamp_micros=-1))
    row = table.classic.direct_row(b"r")
    row.set_cell("cf1", b"classic", b"v")  # no timestamp: the classic client asks for -1
    assert row.commit().code == 0
    after = now_ms_micros() + MS
    got = cells(table.data.read_row(b"r"))
    assert len(got) == 2
    for _, _, ts, _ in got:
        assert before <= ts <= after
        assert ts % MS == 0  # MILLIS granularity holds for server time too


def test_client_default_timestamp_is_ms_truncated_now(table):
    before = now_ms_micros()
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v"))
    ts = cells(table.data.read_row(b"r"))[0][2]
    assert before <= ts <= now_ms_micros() and ts % MS == 0


def test_qualifiers_sorted_bytewise_within_family(table):
    quals = [b"aa", b"B", b"a", b"\x01", b"\xff", b""]
    table.data.mutate_row(b"r", [SetCell("cf1", q, b"v", 1 * MS) for q in quals])
    assert [q for q, _, _ in by_family(table.data.read_row(b"r"))["cf1"]] == sorted(quals)


def test_delete_from_column_with_time_range(table):
    table.data.mutate_row(
        b"r",
        [SetCell("cf1", b"q", b"%d" % i, i * MS) for i in range(1, 6)]
        + [SetCell("cf1", b"other", b"x", 1 * MS)],
    )
    # [start, end): start inclusive, end exclusive.
    table.data.mutate_row(b"r", DeleteRangeFromColumn("cf1", b"q", 2 * MS, 4 * MS))
    assert by_family(table.data.read_row(b"r"))["cf1"] == [
        (b"other", 1 * MS, b"x"),
        (b"q", 5 * MS, b"5"),
        (b"q", 4 * MS, b"4"),
        (b"q", 1 * MS, b"1"),
    ]
    # Open-ended on one side.
    table.data.mutate_row(b"r", DeleteRangeFromColumn("cf1", b"q", start_timestamp_micros=5 * MS))
    table.data.mutate_row(b"r", DeleteRangeFromColumn("cf1", b"q", end_timestamp_micros=2 * MS))
    assert by_family(table.data.read_row(b"r"))["cf1"] == [
        (b"other", 1 * MS, b"x"),
        (b"q", 4 * MS, b"4"),
    ]
    # Classic delete_cell with a TimestampRange, then the whole column.
    row = table.classic.direct_row(b"r")
    row.delete_cell(
        "cf1",
        b"q",
        time_range=TimestampRange(
            start=dt.datetime.fromtimestamp(0.004, UTC), end=dt.datetime.fromtimestamp(0.005, UTC)
        ),
    )
    assert row.commit().code == 0
    assert by_family(table.data.read_row(b"r"))["cf1"] == [(b"other", 1 * MS, b"x")]
    table.data.mutate_row(b"r", DeleteRangeFromColumn("cf1", b"other"))
    assert table.data.read_row(b"r") is None


def test_delete_from_family_and_row(table):
    table.data.mutate_row(
        b"r",
        [SetCell("cf1", b"a", b"1", 1 * MS), SetCell("cf1", b"b", b"2", 1 * MS),
         SetCell("cf2", b"c", b"3", 1 * MS)],
    )
    table.data.mutate_row(b"r", DeleteAllFromFamily("cf1"))
    assert by_family(table.data.read_row(b"r")) == {"cf2": [(b"c", 1 * MS, b"3")]}

    row = table.classic.direct_row(b"r")
    row.delete()
    assert row.commit().code == 0
    assert table.data.read_row(b"r") is None
    assert not table.data.row_exists(b"r")
    # Deleting what is not there is not an error.
    table.data.mutate_row(b"never", DeleteAllFromRow())
    table.data.mutate_row(b"never", DeleteAllFromFamily("cf2"))


def test_mutations_in_one_request_apply_in_order(table):
    table.data.mutate_row(
        b"r",
        [
            SetCell("cf1", b"q", b"first", 1 * MS),
            DeleteRangeFromColumn("cf1", b"q"),
            SetCell("cf1", b"q", b"second", 2 * MS),
        ],
    )
    assert cells(table.data.read_row(b"r")) == [("cf1", b"q", 2 * MS, b"second")]
    table.data.mutate_row(b"r", [DeleteAllFromRow(), SetCell("cf2", b"z", b"only", 3 * MS)])
    assert cells(table.data.read_row(b"r")) == [("cf2", b"z", 3 * MS, b"only")]


def test_missing_row_and_row_exists(table):
    assert table.data.read_row(b"nope") is None
    assert table.classic.read_row(b"nope") is None
    assert table.data.row_exists(b"nope") is False
    table.data.mutate_row(b"yes", SetCell("cf1", b"q", b"v", 1 * MS))
    assert table.data.row_exists(b"yes") is True
    assert read_all(table, ReadRowsQuery(row_keys=[b"nope", b"also-nope"])) == []


def test_empty_table_and_rows_limit(table):
    assert read_all(table) == []
    assert list(table.classic.read_rows()) == []
    row_keys = [b"k%02d" % i for i in range(10)]
    _fill(table, reversed(row_keys))
    assert keys(read_all(table, ReadRowsQuery(limit=3))) == row_keys[:3]
    assert [r.row_key for r in table.classic.read_rows(limit=4)] == row_keys[:4]
    assert keys(read_all(table, ReadRowsQuery(limit=100))) == row_keys
    query = ReadRowsQuery(row_ranges=RowRange(start_key=b"k05"), limit=2)
    assert keys(read_all(table, query)) == [b"k05", b"k06"]


def test_row_sets_with_keys_and_overlapping_ranges(table):
    row_keys = [b"k%02d" % i for i in range(20)]
    _fill(table, row_keys)
    query = ReadRowsQuery(
        row_keys=[b"k15", b"k03", b"k05", b"missing", b"k05"],
        row_ranges=[
            RowRange(b"k04", b"k07"),  # [k04, k07)
            RowRange(b"k05", b"k06", end_is_inclusive=True),  # overlaps both of the above
            RowRange(b"k10", b"k12", start_is_inclusive=False, end_is_inclusive=True),
        ],
    )
    want = [b"k03", b"k04", b"k05", b"k06", b"k11", b"k12", b"k15"]
    rows = read_all(table, query)
    assert keys(rows) == want
    assert all(cells(r) == [("cf1", b"q", 1 * MS, b"v-" + r.row_key)] for r in rows)

    rs = RowSet()
    rs.add_row_key(b"k19")
    rs.add_row_range_from_keys(b"k00", b"k02", end_inclusive=True)
    rs.add_row_range_from_keys(b"k01", b"k03")
    assert [r.row_key for r in table.classic.read_rows(row_set=rs)] == [
        b"k00", b"k01", b"k02", b"k19"
    ]
    got = table.classic.read_rows(start_key=b"k17", end_key=b"k19", end_inclusive=True)
    assert [r.row_key for r in got] == [b"k17", b"k18", b"k19"]
    assert keys(read_all(table, ReadRowsQuery(row_ranges=RowRange(end_key=b"k02")))) == [
        b"k00", b"k01"
    ]


def test_reversed_scan(table, admin_client):
    # ReadRowsQuery (new client) has no `reversed` and its chunk merger rejects descending
    # keys, so this goes through the raw GAPIC client, as the Java/Go clients' reverse
    # scans do on the wire.
    gapic = admin_client.table_data_client
    table.data.mutate_row(
        b"c", [SetCell("cf1", b"b", b"1", 1 * MS), SetCell("cf1", b"a", b"2", 2 * MS),
               SetCell("cf1", b"a", b"3", 3 * MS)]
    )
    _fill(table, [b"a", b"b", b"d", b"e"])

    rows = raw_read_rows(gapic, table.name, reversed=True)
    assert [k for k, _ in rows] == [b"e", b"d", b"c", b"b", b"a"]
    # The order of cells inside a row is unaffected.
    assert dict(rows)[b"c"] == [
        ("cf1", b"a", 3 * MS, b"3", []),
        ("cf1", b"a", 2 * MS, b"2", []),
        ("cf1", b"b", 1 * MS, b"1", []),
    ]
    limited = raw_read_rows(gapic, table.name, reversed=True, rows_limit=2)
    assert [k for k, _ in limited] == [b"e", b"d"]
    ranged = raw_read_rows(
        gapic,
        table.name,
        reversed=True,
        rows={"row_ranges": [{"start_key_closed": b"b", "end_key_open": b"e"}],
              "row_keys": [b"a"]},
    )
    assert [k for k, _ in ranged] == [b"d", b"c", b"b", b"a"]
    forward = raw_read_rows(gapic, table.name)
    assert [k for k, _ in forward] == [b"a", b"b", b"c", b"d", b"e"]


def test_binary_row_keys_sort_unsigned(table):
    weird = [b"\xff\xff", b"a\x00b", b"\x00", b"\x80", b"\xff", b"\x7f", b"\x00\x00", b"a"]
    for k in weird:
        table.data.mutate_row(k, SetCell("cf1", b"\x00\xff", k + b"\x00", 1 * MS))
    rows = read_all(table)
    assert keys(rows) == sorted(weird)
    assert all(cells(r) == [("cf1", b"\x00\xff", 1 * MS, r.row_key + b"\x00")] for r in rows)
    below_ff = ReadRowsQuery(row_ranges=RowRange(b"\x00\x00", b"\xff"))
    assert keys(read_all(table, below_ff)) == [b"\x00\x00", b"a", b"a\x00b", b"\x7f", b"\x80"]
    assert table.data.read_row(b"a\x00b") is not None
    assert table.data.read_row(b"a\x00") is None


def test_empty_value(table):
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"", 1 * MS))
    assert cells(table.data.read_row(b"r")) == [("cf1", b"q", 1 * MS, b"")]
    assert table.data.row_exists(b"r")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_50_mib_value_round_trip(table):
    # The new client's emulator channel keeps gRPC's default 4 MiB receive limit, so the
    # server must split the value across ReadRows responses (CellChunk.value_size).
    big = os.urandom(50 * 1024 * 1024)
    table.data.mutate_row(
        b"big", SetCell("cf1", b"q", big, 1 * MS), operation_timeout=240, attempt_timeout=240
    )
    table.data.mutate_row(b"small", SetCell("cf1", b"q", b"after", 1 * MS))
    rows = table.data.read_rows(ReadRowsQuery(), operation_timeout=240, attempt_timeout=240)
    assert keys(rows) == [b"big", b"small"]
    got = rows[0].cells
    assert len(got) == 1 and got[0].timestamp_micros == 1 * MS
    assert len(got[0].value) == len(big)
    assert got[0].value == big
    assert rows[1].cells[0].value == b"after"
    classic = table.classic.read_row(b"big")
    assert classic.cell_value("cf1", b"q") == big


def test_ping_and_warm(admin_client):
    gapic = admin_client.table_data_client
    gapic.ping_and_warm(request={"name": f"projects/{PROJECT}/instances/{INSTANCE}"}, timeout=30)


def test_point_reads_of_large_cells_arrive_whole(table):
    """A 5 MB cell read by key: the point-read path hands large reads to the scan path,
    and the cell arrives whole (this client's emulator channel keeps gRPC's 4 MiB
    receive limit, so the server splits the row across responses for it)."""
    big = os.urandom(5_000_000)
    table.data.mutate_row(b"a", SetCell("cf1", b"q", b"small", 1 * MS))
    table.data.mutate_row(b"big", SetCell("cf1", b"q", big, 1 * MS))
    table.data.mutate_row(b"c", SetCell("cf1", b"q", big[:300_000], 1 * MS))

    row = table.data.read_row(b"big")
    assert row is not None and row.cells[0].value == big
    rows = table.data.read_rows(ReadRowsQuery(row_keys=[b"a", b"big", b"c"]))
    assert [(r.row_key, len(r.cells[0].value)) for r in rows] == [
        (b"a", 5), (b"big", 5_000_000), (b"c", 300_000)
    ]
