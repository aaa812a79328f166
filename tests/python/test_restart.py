"""Durability: everything written survives SIGTERM and a restart on the same data dir."""

from __future__ import annotations

import datetime as dt
import os
import signal
import socket
import time

from google.cloud import bigtable
from google.cloud.bigtable import column_family as cf
from google.cloud.bigtable.data import (
    BigtableDataClient,
    DeleteAllFromRow,
    DeleteRangeFromColumn,
    ReadRowsQuery,
    RowMutationEntry,
    SetCell,
)

from bt_helpers import INSTANCE, MS, PROJECT, cells, emulator_env

FAMILIES = {
    "versions": cf.MaxVersionsGCRule(3),
    "age": cf.MaxAgeGCRule(dt.timedelta(days=3650)),
    "nested": cf.GCRuleUnion(
        [
            cf.GCRuleIntersection(
                [cf.MaxVersionsGCRule(2), cf.MaxAgeGCRule(dt.timedelta(days=30))]
            ),
            cf.MaxVersionsGCRule(5),
        ]
    ),
    "plain": None,
    "doomed": None,
}


class Clients:
    """Classic admin client + new data client bound to one server address."""

    def __init__(self, host: str):
        with emulator_env(host):
            self.admin = bigtable.Client(project=PROJECT, admin=True)
            self.admin._veneer_data_client  # reads the env var when first touched
            self.data = BigtableDataClient(project=PROJECT)
        self.instance = self.admin.instance(INSTANCE)

    def snapshot(self, table_id: str) -> list:
        t = self.data.get_table(INSTANCE, table_id)
        try:
            rows = t.read_rows(ReadRowsQuery(), operation_timeout=120)
        finally:
            t.close()
        return [(r.row_key, cells(r)) for r in rows]

    def schema(self, table_id: str) -> dict:
        fams = self.instance.table(table_id).list_column_families()
        return {name: fam.gc_rule for name, fam in fams.items()}

    def close(self):
        self.data.close()


def _write_everything(c: Clients) -> None:
    main = c.instance.table("persist")
    main.create(column_families=FAMILIES)
    t = c.data.get_table(INSTANCE, "persist")
    entries = [
        RowMutationEntry(
            b"row-%03d" % i,
            [SetCell("versions", b"v", b"%d-%d" % (i, ver), ver * MS) for ver in (1, 2, 3)]
            + [SetCell("plain", b"p", os.urandom(100), 7 * MS),
               SetCell("nested", b"n", b"x" * i, 9 * MS)],
        )
        for i in range(200)
    ]
    t.bulk_mutate_rows(entries)
    t.mutate_row(b"\x00\xff binary", SetCell("plain", b"\xff\x00", b"\x00" * 10, 1 * MS))
    t.mutate_row(b"big", SetCell("plain", b"b", os.urandom(1024 * 1024), 1 * MS))
    t.mutate_row(b"doomed-row", SetCell("doomed", b"d", b"will go", 1 * MS))
    t.mutate_row(b"row-000", SetCell("doomed", b"d", b"will go too", 1 * MS))
    # Deletions and drops must persist as well as writes.
    t.mutate_row(b"row-001", DeleteAllFromRow())
    t.mutate_row(b"row-002", DeleteRangeFromColumn("versions", b"v", 2 * MS, 3 * MS))
    for i in range(5):
        t.mutate_row(b"prefix-%d" % i, SetCell("plain", b"p", b"dropped", 1 * MS))
    main.drop_by_prefix(b"prefix-")
    main.column_family("doomed").delete()
    t.close()

    gone = c.instance.table("deleted-before-restart")
    gone.create(column_families={"cf": None})
    gone.delete()
    emptied = c.instance.table("truncated")
    emptied.create(column_families={"cf": cf.MaxVersionsGCRule(1)})
    et = c.data.get_table(INSTANCE, "truncated")
    et.mutate_row(b"r", SetCell("cf", b"q", b"v", 1 * MS))
    et.close()
    emptied.truncate()


def test_data_and_schema_survive_restarts(fresh_server):
    first = Clients(fresh_server.host)
    _write_everything(first)
    before = first.snapshot("persist")
    schema = first.schema("persist")
    assert schema == {k: v for k, v in FAMILIES.items() if k != "doomed"}
    assert len(before) == 200 - 1 + 2  # row-001 deleted; binary and big rows added
    row2 = dict(before)[b"row-002"]
    assert [c[2:] for c in row2 if c[0] == "versions"] == [(3 * MS, b"2-3"), (1 * MS, b"2-1")]
    assert not any(c[0] == "doomed" for _, row in before for c in row)

    fresh_server.restart()
    second = Clients(fresh_server.host)
    assert sorted(t.table_id for t in second.instance.list_tables()) == ["persist", "truncated"]
    assert second.schema("persist") == schema
    assert second.schema("truncated") == {"cf": cf.MaxVersionsGCRule(1)}
    assert second.snapshot("persist") == before
    assert second.snapshot("truncated") == []
    # A client from before the restart reconnects to the same address by itself.
    assert first.snapshot("persist") == before

    # Writes after a restart persist through the next one too.
    t = second.data.get_table(INSTANCE, "persist")
    t.mutate_row(b"row-003", SetCell("versions", b"v", b"newer", 4 * MS))
    t.mutate_row(b"after-restart", SetCell("plain", b"p", b"hello", 1 * MS))
    t.close()
    expected = second.snapshot("persist")
    assert len(expected) == len(before) + 1

    fresh_server.restart()
    third = Clients(fresh_server.host)
    after = third.snapshot("persist")
    assert after == expected
    row3 = dict(after)[b"row-003"]
    # MaxVersions(3) still applies on read after the restart: version 1 is no longer there.
    assert [c[2:] for c in row3 if c[0] == "versions"] == [
        (4 * MS, b"newer"), (3 * MS, b"3-3"), (2 * MS, b"3-2")
    ]
    assert third.schema("persist") == schema

    for c in (first, second, third):
        c.close()
    assert fresh_server.stop() == 0


# Rows of 4 KiB the SIGTERM test scans.
DRAIN_ROWS = 12000


def test_sigterm_stops_accepting_and_finishes_the_read_in_flight(fresh_server):
    """SIGTERM mid-scan: new connections are refused, the scan still ends whole, exit 0."""
    c = Clients(fresh_server.host)
    c.instance.table("drain").create(column_families={"cf": None})
    t = c.data.get_table(INSTANCE, "drain")
    value = os.urandom(4096)
    for start in range(0, DRAIN_ROWS, 500):
        t.bulk_mutate_rows(
            [RowMutationEntry(b"r%05d" % i, [SetCell("cf", b"q", value, MS)])
             for i in range(start, start + 500)]
        )
    # 48 MB: more than the client's HTTP/2 windows (which grow with its bandwidth
    # estimate) and both sockets' buffers together, so the scan waits on this reader.
    stream = iter(t.read_rows_stream(ReadRowsQuery(), operation_timeout=120))
    keys = [next(stream).row_key]
    fresh_server.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    while True:  # the listener closes before the in-flight calls finish
        try:
            socket.create_connection((fresh_server.host.split(":")[0], fresh_server.port), 0.5).close()
        except ConnectionRefusedError:
            break
        except ConnectionResetError:
            pass  # accepted into the backlog as the listener closed: try again
        assert time.monotonic() < deadline, "still accepting connections 10 s after SIGTERM"
        time.sleep(0.05)
    time.sleep(0.3)
    assert fresh_server.proc.poll() is None, "exited with a read still in flight"
    for row in stream:
        assert row.cells[0].value == value
        keys.append(row.row_key)
    assert keys == [b"r%05d" % i for i in range(DRAIN_ROWS)]
    t.close()
    c.close()
    assert fresh_server.stop() == 0, fresh_server.log_text()
