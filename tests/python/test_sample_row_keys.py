"""SampleRowKeys on a table of ~20 MB, and sharded reads built from its samples."""

from __future__ import annotations

import os

import pytest
from google.cloud.bigtable.data import ReadRowsQuery, RowMutationEntry, RowRange, SetCell

from bt_helpers import MS, keys

ROWS = 2000
VALUE_BYTES = 10 * 1024


@pytest.fixture
def loaded(table):
    # Random values so that compression cannot make the stored size much smaller.
    for start in range(0, ROWS, 200):
        table.data.bulk_mutate_rows(
            [
                RowMutationEntry(b"row-%05d" % i, SetCell("cf1", b"q", os.urandom(VALUE_BYTES), MS))
                for i in range(start, start + 200)
            ],
            operation_timeout=120,
        )
    return table


def check_samples(samples, logical_bytes):
    assert samples, "no samples for a 20 MB table"
    row_keys = [k for k, _ in samples]
    offsets = [o for _, o in samples]
    # Keys strictly increase; an empty key may only close the list ("end of table").
    assert all(k for k in row_keys[:-1])
    real = [k for k in row_keys if k]
    assert real == sorted(set(real))
    assert offsets == sorted(offsets)
    assert all(a < b for a, b in zip(offsets, offsets[1:])), offsets
    assert offsets[0] >= 0
    # The last offset is (about) the size of the table: Cloud Bigtable ends the list with
    # the empty key whose offset is the whole table. Allow for storage overheads.
    assert row_keys[-1] == b""
    assert 0.5 * logical_bytes <= offsets[-1] <= 2.0 * logical_bytes, (offsets[-1], logical_bytes)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sample_row_keys(loaded):
    logical = ROWS * (VALUE_BYTES + len(b"row-00000") + len(b"cf1") + len(b"q") + 8)
    samples = loaded.data.sample_row_keys(operation_timeout=120)
    check_samples(samples, logical)
    assert len(samples) >= 2, "a 20 MB table should be split more than once"

    # The classic client returns the raw responses.
    check_samples([(r.row_key, r.offset_bytes) for r in loaded.classic.sample_row_keys()], logical)

    # Shards built from the samples cover every row exactly once.
    shards = ReadRowsQuery().shard(samples)
    assert len(shards) >= 2
    rows = loaded.data.read_rows_sharded(shards, operation_timeout=240)
    assert sorted(keys(rows)) == [b"row-%05d" % i for i in range(ROWS)]

    # A row range restricts the samples to it, and "the output will always return the end
    # key in the range as the last sample" (bigtable.proto).
    part = loaded.data.sample_row_keys(row_range=RowRange(b"row-00500", b"row-01000"))
    assert part[-1][0] == b"row-01000"
    assert all(b"row-00500" <= k < b"row-01000" for k, _ in part[:-1])
    assert [o for _, o in part] == sorted(o for _, o in part)


def test_sample_row_keys_small_table(table):
    for i in range(10):
        table.data.mutate_row(b"k%d" % i, SetCell("cf1", b"q", b"v", 1 * MS))
    samples = table.data.sample_row_keys()
    offsets = [o for _, o in samples]
    assert offsets == sorted(offsets)
    # The table's last row, then the end-of-table marker (Google's Go client drops the
    # empty key, so a small table must still give it one key, as the emulator does).
    assert [k for k, _ in samples] == [b"k9", b""]
    assert 0 < samples[0][1] < samples[1][1]
