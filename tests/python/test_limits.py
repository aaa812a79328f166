"""Limits and invalid requests: each must fail with the service's status, never succeed."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import (
    MutationsExceptionGroup,
    ReadRowsQuery,
    RowMutationEntry,
    SetCell,
)
from google.cloud.bigtable.data.read_modify_write_rules import AppendValueRule, IncrementRule
from google.cloud.bigtable.data.row_filters import (
    ApplyLabelFilter,
    PassAllFilter,
    RowFilterChain,
    RowKeyRegexFilter,
    RowSampleFilter,
)
from google.cloud.bigtable_v2.types import MutateRowRequest

from bt_helpers import INSTANCE, MS, cells, keys, read_all

ROW_KEY_LIMIT = ("4096", "4 kib", "4kib", "4 kb", "4kb")
QUALIFIER_LIMIT = ("16384", "16 kib", "16kib", "16 kb", "16kb")
VALUE_LIMIT = ("104857600", "100 mib", "100mib", "100 mb", "100mb")


def mentions(exc: Exception, *alternatives: str) -> bool:
    text = str(exc).lower()
    return any(a in text for a in alternatives)


@pytest.fixture
def gapic(admin_client):
    """The raw Data API client, for requests the high-level clients refuse to build."""
    return admin_client.table_data_client


def test_row_key_limit(table):
    table.data.mutate_row(b"k" * 4096, SetCell("cf1", b"q", b"v", 1 * MS))
    assert table.data.read_row(b"k" * 4096) is not None
    with pytest.raises(gexc.InvalidArgument) as info:
        table.data.mutate_row(b"k" * 4097, SetCell("cf1", b"q", b"v", 1 * MS))
    assert mentions(info.value, *ROW_KEY_LIMIT), str(info.value)
    with pytest.raises(gexc.InvalidArgument):
        table.data.check_and_mutate_row(
            b"k" * 4097, None, true_case_mutations=SetCell("cf1", b"q", b"v", 1 * MS)
        )
    with pytest.raises(gexc.InvalidArgument):
        table.data.read_modify_write_row(b"k" * 4097, IncrementRule("cf1", b"n", 1))
    assert keys(read_all(table)) == [b"k" * 4096]


def test_qualifier_limit(table):
    ok, too_long = b"q" * (16 * 1024), b"q" * (16 * 1024 + 1)
    table.data.mutate_row(b"r", SetCell("cf1", ok, b"v", 1 * MS))
    assert cells(table.data.read_row(b"r")) == [("cf1", ok, 1 * MS, b"v")]
    with pytest.raises(gexc.InvalidArgument) as info:
        table.data.mutate_row(b"r2", SetCell("cf1", too_long, b"v", 1 * MS))
    assert mentions(info.value, *QUALIFIER_LIMIT), str(info.value)
    with pytest.raises(gexc.InvalidArgument):
        table.data.read_modify_write_row(b"r2", AppendValueRule("cf1", too_long, b"v"))
    assert table.data.read_row(b"r2") is None


def test_empty_row_key_rejected(table):
    with pytest.raises(gexc.InvalidArgument):
        table.data.mutate_row(b"", SetCell("cf1", b"q", b"v", 1 * MS))
    with pytest.raises(gexc.InvalidArgument):
        table.data.check_and_mutate_row(
            b"", None, false_case_mutations=SetCell("cf1", b"q", b"v", 1 * MS)
        )
    with pytest.raises(gexc.InvalidArgument):
        table.data.read_modify_write_row(b"", IncrementRule("cf1", b"n", 1))
    with pytest.raises(MutationsExceptionGroup) as info:
        table.data.bulk_mutate_rows(
            [RowMutationEntry(b"", SetCell("cf1", b"q", b"v", 1 * MS)),
             RowMutationEntry(b"fine", SetCell("cf1", b"q", b"v", 1 * MS))],
            operation_timeout=60,
        )
    assert [(e.index, type(e.__cause__)) for e in info.value.exceptions] == [
        (0, gexc.InvalidArgument)
    ]
    assert keys(read_all(table)) == [b"fine"]


def test_missing_table_is_not_found(data_client):
    t = data_client.get_table(INSTANCE, "no-such-table")
    try:
        with pytest.raises(gexc.NotFound):
            t.read_rows(ReadRowsQuery(), operation_timeout=30)
        with pytest.raises(gexc.NotFound):
            t.read_row(b"r", operation_timeout=30)
        with pytest.raises(gexc.NotFound):
            t.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS), operation_timeout=30)
        with pytest.raises(gexc.NotFound):
            t.check_and_mutate_row(b"r", None, true_case_mutations=SetCell("cf1", b"q", b"v"))
        with pytest.raises(gexc.NotFound):
            t.read_modify_write_row(b"r", IncrementRule("cf1", b"n", 1))
        with pytest.raises(gexc.NotFound):
            t.sample_row_keys(operation_timeout=30)
        with pytest.raises(MutationsExceptionGroup) as info:
            t.bulk_mutate_rows(
                [RowMutationEntry(b"r", SetCell("cf1", b"q", b"v", 1 * MS))], operation_timeout=30
            )
        assert isinstance(info.value.exceptions[0].__cause__, gexc.NotFound)
    finally:
        t.close()


def test_missing_family_is_not_found(table):
    # Cloud Bigtable: NOT_FOUND "Requested column family not found" (the Go emulator
    # returns an untyped error here; the service's code is the one to match).
    with pytest.raises(gexc.NotFound):
        table.data.mutate_row(b"r", SetCell("nope", b"q", b"v", 1 * MS))
    with pytest.raises(gexc.NotFound):
        table.data.read_modify_write_row(b"r", IncrementRule("nope", b"n", 1))
    with pytest.raises(gexc.NotFound):
        table.data.check_and_mutate_row(
            b"r", None, false_case_mutations=SetCell("nope", b"q", b"v", 1 * MS)
        )
    assert read_all(table) == []


def test_timestamp_must_be_whole_milliseconds(table):
    with pytest.raises(gexc.InvalidArgument):
        table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1_000_001))
    with pytest.raises(gexc.InvalidArgument):
        table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 999))
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 0))  # the epoch itself is fine
    assert cells(table.data.read_row(b"r")) == [("cf1", b"q", 0, b"v")]


def test_timestamp_range_filter_must_be_whole_milliseconds(table, gapic):
    # The new client rounds filter bounds to ms, so send the raw request.
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    with pytest.raises(gexc.InvalidArgument):
        list(gapic.read_rows(request={
            "table_name": table.name,
            "filter": {"timestamp_range_filter": {"start_timestamp_micros": 1500}},
        }, timeout=30))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_value_over_100_mib_rejected(table):
    too_big = b"\x00" * (100 * 1024 * 1024 + 1)
    with pytest.raises(gexc.InvalidArgument) as info:
        table.data.mutate_row(
            b"r", SetCell("cf1", b"q", too_big, 1 * MS), operation_timeout=240, attempt_timeout=240
        )
    assert mentions(info.value, *VALUE_LIMIT), str(info.value)
    assert table.data.read_row(b"r") is None


def test_too_many_mutations_in_one_request(table, gapic):
    pb = MutateRowRequest.pb(MutateRowRequest(table_name=table.name, row_key=b"r"))
    for i in range(100_001):
        sc = pb.mutations.add().set_cell
        sc.family_name, sc.column_qualifier, sc.timestamp_micros = "cf1", b"q%d" % i, MS
    with pytest.raises(gexc.InvalidArgument):
        gapic.mutate_row(request=MutateRowRequest.wrap(pb), retry=None, timeout=60)
    assert table.data.read_row(b"r") is None


def test_requests_without_mutations_or_rules(table, gapic):
    with pytest.raises(gexc.InvalidArgument):
        gapic.mutate_row(
            request={"table_name": table.name, "row_key": b"r", "mutations": []},
            retry=None, timeout=30,
        )
    with pytest.raises(gexc.InvalidArgument):
        gapic.check_and_mutate_row(
            request={"table_name": table.name, "row_key": b"r"}, retry=None, timeout=30
        )
    with pytest.raises(gexc.InvalidArgument):
        gapic.read_modify_write_row(
            request={"table_name": table.name, "row_key": b"r", "rules": []},
            retry=None, timeout=30,
        )


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(
            {"rows": {"row_ranges": [{"start_key_closed": b"b", "end_key_open": b"a"}]}},
            id="inverted-range",
        ),
        pytest.param({"rows_limit": -1}, id="negative-limit"),
    ],
)
def test_invalid_read_requests(table, gapic, extra):
    # The new client refuses to build these; the raw request must be refused by the server.
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    with pytest.raises(gexc.InvalidArgument):
        list(gapic.read_rows(request={"table_name": table.name, **extra}, timeout=30))


@pytest.mark.parametrize(
    "flt",
    [
        pytest.param(ApplyLabelFilter("Upper"), id="label-uppercase"),
        pytest.param(ApplyLabelFilter("a" * 16), id="label-16-chars"),
        pytest.param(ApplyLabelFilter(""), id="label-empty"),
        pytest.param(RowKeyRegexFilter(b"(unclosed"), id="bad-regex"),
        pytest.param(RowSampleFilter(1.5), id="sample-above-1"),
        pytest.param(RowSampleFilter(0.0), id="sample-zero"),
        pytest.param(RowKeyRegexFilter(b"a" * 21 * 1024), id="over-20-kib"),
        pytest.param(
            RowFilterChain([ApplyLabelFilter("one"), ApplyLabelFilter("two")]),
            id="two-labels-in-a-chain",  # data.proto: a Chain may hold one label transformer
        ),
    ],
)
def test_invalid_filters(table, flt):
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    with pytest.raises(gexc.InvalidArgument):
        table.data.read_rows(ReadRowsQuery(row_filter=flt), operation_timeout=30)


def test_filter_nesting_limit(table):
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))

    def nested(depth):
        flt = PassAllFilter(True)
        for _ in range(depth - 1):
            flt = RowFilterChain([PassAllFilter(True), flt])
        return flt

    assert keys(table.data.read_rows(ReadRowsQuery(row_filter=nested(5)))) == [b"r"]
    with pytest.raises(gexc.InvalidArgument):
        table.data.read_rows(ReadRowsQuery(row_filter=nested(40)), operation_timeout=30)
