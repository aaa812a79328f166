"""MutateRows partial failure, CheckAndMutateRow, ReadModifyWriteRow, and their races."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import (
    MutationsExceptionGroup,
    ReadRowsQuery,
    RowMutationEntry,
    SetCell,
)
from google.cloud.bigtable.data.read_modify_write_rules import AppendValueRule, IncrementRule
from google.cloud.bigtable.data.row_filters import ColumnQualifierRegexFilter, ValueRegexFilter
from google.cloud.bigtable.row_filters import ValueRegexFilter as ClassicValueRegexFilter

from bt_helpers import MS, by_family, cells, from_int64, int64, keys, now_ms_micros, read_all

LONG_KEY = b"k" * 4097  # one byte over Bigtable's 4 KiB row-key limit


def test_bulk_mutate_partial_failure(table):
    entries = [
        RowMutationEntry(b"ok-0", SetCell("cf1", b"q", b"v0", 1 * MS)),
        # A good mutation before a bad one: the entry is atomic, so nothing is written.
        RowMutationEntry(
            b"bad-family",
            [SetCell("cf1", b"q", b"v", 1 * MS), SetCell("no-such-family", b"q", b"v", 1 * MS)],
        ),
        RowMutationEntry(b"ok-2", SetCell("cf2", b"q", b"v2", 1 * MS)),
        RowMutationEntry(LONG_KEY, SetCell("cf1", b"q", b"v", 1 * MS)),
        RowMutationEntry(
            b"ok-4", [SetCell("cf1", b"a", b"v4", 1 * MS), SetCell("cf2", b"b", b"w4", 2 * MS)]
        ),
    ]
    with pytest.raises(MutationsExceptionGroup) as info:
        table.data.bulk_mutate_rows(entries, operation_timeout=60)
    group = info.value
    assert group.total_entries_attempted == 5
    failed = {e.index: e.__cause__ for e in group.exceptions}
    assert set(failed) == {1, 3}
    assert all(e.entry is entries[e.index] for e in group.exceptions)
    # Cloud Bigtable answers NOT_FOUND for a mutation naming a missing family.
    assert isinstance(failed[1], gexc.NotFound), repr(failed[1])
    assert isinstance(failed[3], gexc.InvalidArgument), repr(failed[3])

    rows = read_all(table)
    assert keys(rows) == [b"ok-0", b"ok-2", b"ok-4"]
    assert by_family(rows[2]) == {"cf1": [(b"a", 1 * MS, b"v4")], "cf2": [(b"b", 2 * MS, b"w4")]}


def test_classic_mutate_rows_returns_per_row_statuses(table):
    good1 = table.classic.direct_row(b"g1")
    good1.set_cell("cf1", b"q", b"1")
    bad = table.classic.direct_row(b"b")
    bad.set_cell("missing", b"q", b"x")
    good2 = table.classic.direct_row(b"g2")
    good2.set_cell("cf2", b"q", b"2")
    statuses = table.classic.mutate_rows([good1, bad, good2])
    assert [s.code for s in statuses] == [0, 5, 0]  # OK, NOT_FOUND, OK
    assert keys(read_all(table)) == [b"g1", b"g2"]


def test_bulk_mutate_many_entries(table):
    entries = [
        RowMutationEntry(b"row-%04d" % i, SetCell("cf1", b"q", b"%d" % i, 1 * MS))
        for i in range(1000)
    ]
    table.data.bulk_mutate_rows(entries)
    rows = read_all(table)
    assert keys(rows) == [b"row-%04d" % i for i in range(1000)]
    assert rows[437].cells[0].value == b"437"


def test_mutate_row_is_atomic(table):
    with pytest.raises(gexc.NotFound):
        table.data.mutate_row(
            b"r", [SetCell("cf1", b"q", b"v", 1 * MS), SetCell("ghost", b"q", b"v", 1 * MS)]
        )
    assert table.data.read_row(b"r") is None


def test_check_and_mutate_true_and_false_branches(table):
    table.data.mutate_row(b"r", SetCell("cf1", b"flag", b"on", 1 * MS))
    matched = table.data.check_and_mutate_row(
        b"r",
        ValueRegexFilter(b"on"),
        true_case_mutations=SetCell("cf1", b"result", b"yes", 2 * MS),
        false_case_mutations=SetCell("cf1", b"result", b"no", 2 * MS),
    )
    assert matched is True
    matched = table.data.check_and_mutate_row(
        b"r",
        ValueRegexFilter(b"off"),
        true_case_mutations=SetCell("cf1", b"other", b"yes", 3 * MS),
        false_case_mutations=SetCell("cf1", b"other", b"no", 3 * MS),
    )
    assert matched is False
    assert by_family(table.data.read_row(b"r")) == {
        "cf1": [(b"flag", 1 * MS, b"on"), (b"other", 3 * MS, b"no"), (b"result", 2 * MS, b"yes")]
    }
    # No predicate: "true" iff the row has any cell.
    assert table.data.check_and_mutate_row(
        b"r", None, true_case_mutations=SetCell("cf2", b"p", b"t", 1 * MS)
    ) is True
    assert table.data.check_and_mutate_row(
        b"empty", None, false_case_mutations=SetCell("cf2", b"p", b"f", 1 * MS)
    ) is False
    assert cells(table.data.read_row(b"empty")) == [("cf2", b"p", 1 * MS, b"f")]
    # A false predicate with only true mutations changes nothing.
    assert table.data.check_and_mutate_row(
        b"untouched", ValueRegexFilter(b"x"), true_case_mutations=SetCell("cf1", b"q", b"v", 1 * MS)
    ) is False
    assert table.data.read_row(b"untouched") is None


def test_check_and_mutate_with_classic_conditional_row(table):
    table.data.mutate_row(b"r", SetCell("cf1", b"state", b"pending", 1 * MS))
    row = table.classic.conditional_row(b"r", filter_=ClassicValueRegexFilter(b"pending"))
    row.set_cell("cf1", b"state", b"done", timestamp=None, state=True)
    row.delete_cell("cf1", b"state", state=False)
    assert row.commit() is True
    newest = table.data.read_row(b"r", row_filter=None)
    assert [c.value for c in newest.cells] == [b"done", b"pending"]
    row = table.classic.conditional_row(b"r", filter_=ClassicValueRegexFilter(b"nope"))
    row.delete_cell("cf1", b"state", state=False)
    assert row.commit() is False
    assert table.data.read_row(b"r") is None


def test_read_modify_write_increment_and_append(table):
    got = table.data.read_modify_write_row(b"r", IncrementRule("cf1", b"n", 5))
    assert got.row_key == b"r"
    assert [(c.family, c.qualifier, c.value) for c in got.cells] == [("cf1", b"n", int64(5))]
    got = table.data.read_modify_write_row(b"r", IncrementRule("cf1", b"n", -7))
    assert from_int64(got.cells[0].value) == -2
    got = table.data.read_modify_write_row(b"r", AppendValueRule("cf2", b"s", b"ab"))
    assert [(c.family, c.qualifier, c.value) for c in got.cells] == [("cf2", b"s", b"ab")]
    got = table.data.read_modify_write_row(b"r", AppendValueRule("cf2", b"s", "cd"))
    assert got.cells[0].value == b"abcd"

    # Rules apply in order; the response holds only the cells the request modified.
    got = table.data.read_modify_write_row(
        b"r", [IncrementRule("cf1", b"n", 10), IncrementRule("cf1", b"n", 1),
               AppendValueRule("cf2", b"t", b"!")]
    )
    assert {(c.family, c.qualifier) for c in got.cells} == {("cf1", b"n"), ("cf2", b"t")}
    assert from_int64(got[("cf1", b"n")][0].value) == 9
    newest = table.data.read_row(b"r", row_filter=None)
    latest = {(c.family, c.qualifier): c.value for c in reversed(newest.cells)}
    assert latest == {("cf1", b"n"): int64(9), ("cf2", b"s"): b"abcd", ("cf2", b"t"): b"!"}

    # Increment treats an existing 8-byte value written by SetCell as a big-endian int64.
    table.data.mutate_row(b"r2", SetCell("cf1", b"n", int64(41), 1 * MS))
    got = table.data.read_modify_write_row(b"r2", IncrementRule("cf1", b"n"))
    assert got.cells[0].value == int64(42)


def test_read_modify_write_timestamp_never_goes_back(table):
    # "The new value for the timestamp is the greater of the existing timestamp or the
    # current server time": a future cell is replaced at its own timestamp.
    future = now_ms_micros() + 24 * 3600 * 1_000_000
    table.data.mutate_row(b"r", SetCell("cf1", b"s", b"x", future))
    got = table.data.read_modify_write_row(b"r", AppendValueRule("cf1", b"s", b"y"))
    assert [(c.timestamp_micros, c.value) for c in got.cells] == [(future, b"xy")]
    assert cells(table.data.read_row(b"r")) == [("cf1", b"s", future, b"xy")]
    before = now_ms_micros()
    got = table.data.read_modify_write_row(b"r", IncrementRule("cf1", b"fresh", 1))
    assert before <= got.cells[0].timestamp_micros <= now_ms_micros() + 1000


def test_classic_append_row(table):
    row = table.classic.append_row(b"r")
    row.append_cell_value("cf1", b"s", b"hello")
    row.increment_cell_value("cf1", b"n", 3)
    result = row.commit()
    assert set(result) == {"cf1"}
    assert [v for v, _ in result["cf1"][b"s"]] == [b"hello"]
    assert [v for v, _ in result["cf1"][b"n"]] == [int64(3)]


def test_increment_of_non_8_byte_value_fails(table):
    table.data.mutate_row(b"r", SetCell("cf1", b"n", b"abc", 1 * MS))
    # The service rejects it; the exact code is not documented (INVALID_ARGUMENT or
    # FAILED_PRECONDITION are both reasonable), the cell must be left untouched.
    with pytest.raises((gexc.InvalidArgument, gexc.FailedPrecondition)):
        table.data.read_modify_write_row(b"r", IncrementRule("cf1", b"n", 1))
    assert cells(table.data.read_row(b"r")) == [("cf1", b"n", 1 * MS, b"abc")]


def _run_threads(n, fn):
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        return fn(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(run, range(n)))


def test_concurrent_increments_are_atomic(table):
    def worker(_):
        for _ in range(50):
            table.data.read_modify_write_row(b"counter", IncrementRule("cf1", b"n", 1))

    _run_threads(8, worker)
    row = table.data.read_row(b"counter", row_filter=None)
    assert from_int64(row.cells[0].value) == 400


def test_concurrent_appends_are_atomic(table):
    def worker(t):
        for i in range(25):
            table.data.read_modify_write_row(b"log", AppendValueRule("cf1", b"s", f"{t}.{i};"))

    _run_threads(8, worker)
    value = table.data.read_row(b"log").cells[0].value.decode()
    tokens = value.rstrip(";").split(";")
    assert sorted(tokens) == sorted(f"{t}.{i}" for t in range(8) for i in range(25))
    for t in range(8):  # each writer's own appends stay in its order
        mine = [int(tok.split(".")[1]) for tok in tokens if tok.startswith(f"{t}.")]
        assert mine == list(range(25))


def test_check_and_mutate_race_has_one_winner(table):
    owner = ColumnQualifierRegexFilter(b"owner")
    for lock in range(10):
        key = b"lock-%d" % lock

        def claim(t, key=key):
            return not table.data.check_and_mutate_row(
                key,
                owner,
                false_case_mutations=SetCell("cf1", b"owner", b"%d" % t, 1 * MS),
            )

        won = _run_threads(8, claim)
        assert won.count(True) == 1, f"{key!r}: winners {won}"
        winner = b"%d" % won.index(True)
        assert cells(table.data.read_row(key)) == [("cf1", b"owner", 1 * MS, winner)]


def test_read_rows_after_mutations_sees_them(table):
    # Read-your-writes across the two clients.
    row = table.classic.direct_row(b"x")
    row.set_cell("cf1", b"q", b"classic", timestamp=None)
    row.commit()
    table.data.mutate_row(b"y", SetCell("cf1", b"q", b"new", 1 * MS))
    assert keys(table.data.read_rows(ReadRowsQuery())) == [b"x", b"y"]
    assert [r.row_key for r in table.classic.read_rows()] == [b"x", b"y"]
