"""Aggregate column families (Sum / Min / Max over int64, HyperLogLog++) and AddToCell.

The classic ColumnFamily has no `value_type`, so aggregate families are created through
the admin GAPIC client with `google.cloud.bigtable_admin_v2.types.Type`. The new data
client (2.50) has an `AddToCell` mutation but no `MergeToCell` class; MergeToCell goes
through the raw GAPIC client.
"""

from __future__ import annotations

import uuid

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import AddToCell, SetCell
from google.cloud.bigtable_admin_v2.types import ColumnFamily as AdminFamily
from google.cloud.bigtable_admin_v2.types import Table as AdminTable
from google.cloud.bigtable_admin_v2.types import Type

from bt_helpers import INSTANCE, MS, BtTable, by_family, from_int64, int64

INT64_BE = Type(
    int64_type=Type.Int64(
        encoding=Type.Int64.Encoding(big_endian_bytes=Type.Int64.Encoding.BigEndianBytes())
    )
)
AGGREGATORS = {
    "sum": {"sum": Type.Aggregate.Sum()},
    "min": {"min_": Type.Aggregate.Min()},
    "max": {"max_": Type.Aggregate.Max()},
    "hll": {"hllpp_unique_count": Type.Aggregate.HyperLogLogPlusPlusUniqueCount()},
}


def aggregate(kind: str) -> Type:
    return Type(aggregate_type=Type.Aggregate(input_type=INT64_BE, **AGGREGATORS[kind]))


@pytest.fixture
def agg(admin_client, instance, data_client):
    table_id = f"aggregates-{uuid.uuid4().hex[:8]}"
    families = {kind: AdminFamily(value_type=aggregate(kind)) for kind in AGGREGATORS}
    families["plain"] = AdminFamily()
    tac = admin_client.table_admin_client
    tac.create_table(
        request={
            "parent": instance.name,
            "table_id": table_id,
            "table": AdminTable(column_families=families),
        }
    )
    bt = BtTable(table_id, instance.table(table_id), data_client.get_table(INSTANCE, table_id))
    yield bt
    bt.data.close()
    tac.delete_table(request={"name": bt.name})


def values(bt, key) -> dict:
    return {
        fam: [(q, ts, from_int64(v)) for q, ts, v in items]
        for fam, items in by_family(bt.data.read_row(key)).items()
    }


def test_aggregate_schema_reads_back(agg, admin_client):
    table = admin_client.table_admin_client.get_table(request={"name": agg.name})
    assert set(table.column_families) == {"sum", "min", "max", "hll", "plain"}
    for kind, aggregator in AGGREGATORS.items():
        vt = table.column_families[kind].value_type
        assert vt._pb.WhichOneof("kind") == "aggregate_type", kind
        # proto-plus names the raw fields like its attributes: "min_", "max_".
        assert vt.aggregate_type._pb.WhichOneof("aggregator") == next(iter(aggregator))
        assert vt.aggregate_type.input_type._pb.WhichOneof("kind") == "int64_type"
    assert table.column_families["plain"].value_type._pb.WhichOneof("kind") is None


def test_sum_min_max(agg):
    muts = []
    for v in (5, -3, 9, 1):
        muts += [AddToCell(kind, b"q", v, 1 * MS) for kind in ("sum", "min", "max")]
    agg.data.mutate_row(b"r", muts[:6])
    agg.data.mutate_row(b"r", muts[6:])
    assert values(agg, b"r") == {
        "sum": [(b"q", 1 * MS, 12)],
        "min": [(b"q", 1 * MS, -3)],
        "max": [(b"q", 1 * MS, 9)],
    }


def test_add_to_cell_merges_per_timestamp(agg):
    for ts, v in [(1, 10), (2, 1), (1, -4), (2, 2), (3, 7)]:
        agg.data.mutate_row(b"r", AddToCell("sum", b"q", v, ts * MS))
    assert values(agg, b"r") == {
        "sum": [(b"q", 3 * MS, 7), (b"q", 2 * MS, 3), (b"q", 1 * MS, 6)]
    }
    agg.data.mutate_row(b"r", AddToCell("sum", b"other", 1, 1 * MS))
    assert [q for q, _, _ in values(agg, b"r")["sum"]] == [b"other", b"q", b"q", b"q"]


def test_merge_to_cell_with_raw_request(agg, admin_client):
    agg.data.mutate_row(b"r", AddToCell("sum", b"q", 5, 1 * MS))
    admin_client.table_data_client.mutate_row(
        request={
            "table_name": agg.name,
            "row_key": b"r",
            "mutations": [
                {
                    "merge_to_cell": {
                        "family_name": "sum",
                        "column_qualifier": {"raw_value": b"q"},
                        "timestamp": {"raw_timestamp_micros": 1 * MS},
                        # The input is the state (Int64, big-endian bytes for Sum) as raw
                        # bytes, which is what the Go client's MergeToCell sends.
                        "input": {"raw_value": int64(100)},
                    }
                }
            ],
        },
        retry=None,
        timeout=30,
    )
    assert values(agg, b"r") == {"sum": [(b"q", 1 * MS, 105)]}


def test_add_to_cell_needs_an_aggregate_family(agg):
    with pytest.raises(gexc.InvalidArgument):
        agg.data.mutate_row(b"r", AddToCell("plain", b"q", 1, 1 * MS))
    with pytest.raises(gexc.InvalidArgument):
        agg.data.mutate_row(b"r", AddToCell("sum", b"q", 1, 1_500))  # not whole ms
    assert agg.data.read_row(b"r") is None
    agg.data.mutate_row(b"r", SetCell("plain", b"q", b"still a normal family", 1 * MS))


def test_hll_accepts_inputs(agg):
    # The sketch's bytes are opaque and the client has no decoder; the count estimate is
    # only readable through SQL. Check what the Data API shows: one non-empty cell.
    for v in [1, 2, 3, 2, 1]:
        agg.data.mutate_row(b"r", AddToCell("hll", b"q", v, 1 * MS))
    row = agg.data.read_row(b"r")
    assert [(c.family, c.qualifier, c.timestamp_micros) for c in row.cells] == [
        ("hll", b"q", 1 * MS)
    ]
    assert len(row.cells[0].value) > 0


def test_aggregates_can_be_read_through_the_classic_client(agg):
    agg.data.mutate_row(
        b"r", [AddToCell("sum", b"q", 40, 1 * MS), AddToCell("sum", b"q", 2, 1 * MS)]
    )
    assert agg.classic.read_row(b"r").cell_value("sum", b"q") == int64(42)
