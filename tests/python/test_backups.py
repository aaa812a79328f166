"""Backups: the Table Admin API's backups through Google's clients, and whole-server
backups (`almanac backup DIR` of a live server, `almanac restore DIR` into a new data
directory).

Table backups are taken, listed, filtered, updated, copied, restored and deleted with
the classic client's `Table.backup()` objects (as Google's docs show) and with the
generated admin client. The whole-server test backs up a server with principals while
a writer keeps writing, restores it into a fresh directory, starts a server on it, and
checks that the rows there are exactly a prefix of the writer's sequence that holds
every row acknowledged before the backup began and none written after it ended.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import threading
import time
import uuid

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import ReadRowsQuery, SetCell
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)
from google.cloud.bigtable_admin_v2.types import Backup
from google.cloud.bigtable_v2 import BigtableClient
from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import Mutation, ReadRowsRequest

from bt_helpers import (
    INSTANCE,
    MS,
    PROJECT,
    AlmanacServer,
    isolated_aws_env,
    ts_query_client,
    ts_write_client,
)

INSTANCE_NAME = f"projects/{PROJECT}/instances/{INSTANCE}"
CLUSTER_ID = "almanac"
CLUSTER = f"{INSTANCE_NAME}/clusters/{CLUSTER_ID}"
OP_TIMEOUT = 30


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def in_days(days: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days)


def as_utc(t) -> dt.datetime:
    """A protobuf Timestamp or a datetime, as an aware datetime."""
    if hasattr(t, "ToDatetime"):
        return t.ToDatetime(tzinfo=dt.timezone.utc)
    return t


def keys_of(data) -> list[bytes]:
    return [r.row_key for r in data.read_rows(ReadRowsQuery())]


@pytest.fixture
def backups(tac):
    made: list[str] = []
    yield made
    for name in made:
        try:
            tac.delete_backup(request={"name": name})
        except gexc.NotFound:
            pass


def test_classic_backup_objects_create_list_update_restore_delete(table, instance, tac, backups, data_client):
    table.data.mutate_row(b"r1", SetCell("cf1", b"a", b"v1", 1 * MS))
    table.data.mutate_row(b"r2", SetCell("cf2", b"b", b"v2", 2 * MS))
    backup_id = uid("bk")
    backup = table.classic.backup(backup_id, cluster_id=CLUSTER_ID, expire_time=in_days(2))
    op = backup.create()
    op.result(timeout=OP_TIMEOUT)
    backups.append(f"{CLUSTER}/backups/{backup_id}")
    # Written after the backup: not in it.
    table.data.mutate_row(b"r3", SetCell("cf1", b"a", b"later", 3 * MS))

    backup.reload()
    assert backup.source_table == table.classic.name
    assert backup.state == Backup.State.READY
    assert backup.size_bytes > 0
    assert backup.start_time is not None and backup.end_time is not None
    assert abs((as_utc(backup.expire_time) - in_days(2)).total_seconds()) < 120

    listed = [b.name for b in table.classic.list_backups()]
    assert backup.name in listed
    assert backup.name in [b.name for b in table.classic.list_backups(cluster_id=CLUSTER_ID)]

    new_expiry = in_days(5)
    backup.update_expire_time(new_expiry)
    backup.reload()
    assert abs((as_utc(backup.expire_time) - new_expiry).total_seconds()) < 2

    restored_id = uid("restored")
    backup.restore(restored_id).result(timeout=OP_TIMEOUT)
    try:
        with data_client.get_table(INSTANCE, restored_id) as restored:
            assert keys_of(restored) == [b"r1", b"r2"]
            row = restored.read_row(b"r2")
            assert row.cells[0].value == b"v2" and row.cells[0].family == "cf2"
        assert keys_of(table.data) == [b"r1", b"r2", b"r3"]
    finally:
        instance.table(restored_id).delete()

    backup.delete()
    backups.clear()
    assert not backup.exists()


def test_admin_client_copy_filter_order_and_page(table, tac, backups):
    table.data.mutate_row(b"k", SetCell("cf1", b"q", b"x" * 1000, 1 * MS))
    names = []
    for i in range(3):
        backup_id = uid(f"page{i}")
        op = tac.create_backup(
            request={
                "parent": CLUSTER,
                "backup_id": backup_id,
                "backup": {"source_table": table.classic.name, "expire_time": in_days(1 + i)},
            }
        )
        made = op.result(timeout=OP_TIMEOUT)
        assert made.name == f"{CLUSTER}/backups/{backup_id}"
        meta = op.metadata
        assert meta.name == made.name and meta.source_table == table.classic.name
        backups.append(made.name)
        names.append(made.name)

    by_expiry = [
        b.name
        for b in tac.list_backups(
            request={
                "parent": f"{INSTANCE_NAME}/clusters/-",
                "filter": f'source_table:"{table.classic.name}"',
                "order_by": "expire_time desc",
            }
        )
    ]
    assert by_expiry == names[::-1]
    soon = in_days(1.5).strftime("%Y-%m-%dT%H:%M:%SZ")
    early = tac.list_backups(
        request={"parent": CLUSTER, "filter": f'(source_table:"{table.table_id}") AND (expire_time < "{soon}")'}
    )
    assert [b.name for b in early] == names[:1]
    first = tac.list_backups(
        request={"parent": CLUSTER, "filter": f"source_table:{table.table_id}", "order_by": "name", "page_size": 2}
    )
    assert [b.name for b in first] == sorted(names)  # the pager follows next_page_token

    copy_id = uid("copy")
    op = tac.copy_backup(
        request={"parent": CLUSTER, "backup_id": copy_id, "source_backup": names[0], "expire_time": in_days(3)}
    )
    copy = op.result(timeout=OP_TIMEOUT)
    backups.append(copy.name)
    assert copy.source_backup == names[0]
    assert copy.source_table == table.classic.name
    assert op.metadata.source_backup_info.backup == names[0]
    assert copy.size_bytes == tac.get_backup(request={"name": names[0]}).size_bytes
    # The copy outlives its source.
    tac.delete_backup(request={"name": names[0]})
    assert tac.get_backup(request={"name": copy.name}).state == Backup.State.READY


def test_backup_errors_name_what_was_wrong(server, table, tac, backups):
    def create(backup_id, expire, source=None):
        return tac.create_backup(
            request={
                "parent": CLUSTER,
                "backup_id": backup_id,
                "backup": {"source_table": source or table.classic.name, "expire_time": expire},
            }
        ).result(timeout=OP_TIMEOUT)

    with pytest.raises(gexc.InvalidArgument, match="at least 6 hours"):
        create(uid("soon"), in_days(0.1))
    with pytest.raises(gexc.InvalidArgument, match="at most 90 days"):
        create(uid("late"), in_days(91))
    with pytest.raises(gexc.NotFound):
        create(uid("nosrc"), in_days(1), source=f"{INSTANCE_NAME}/tables/{uid('missing')}")
    made = create(uid("dup"), in_days(1))
    backups.append(made.name)
    with pytest.raises(gexc.AlreadyExists):
        create(made.name.rsplit("/", 1)[-1], in_days(1))
    with pytest.raises(gexc.InvalidArgument, match="only expire_time"):
        tac.update_backup(
            request={"backup": {"name": made.name, "source_table": "x"}, "update_mask": {"paths": ["source_table"]}}
        )
    with pytest.raises(gexc.NotFound):
        tac.get_backup(request={"name": f"{CLUSTER}/backups/{uid('none')}"})
    with pytest.raises(gexc.InvalidArgument, match="unknown backup field"):
        list(tac.list_backups(request={"parent": CLUSTER, "filter": "colour:red"}))
    with pytest.raises(gexc.InvalidArgument, match="30 days"):
        tac.copy_backup(
            request={"parent": CLUSTER, "backup_id": uid("c"), "source_backup": made.name, "expire_time": in_days(40)}
        ).result(timeout=OP_TIMEOUT)
    # The handwritten admin client (`restore_table` with its optimize step).
    overlay = BigtableTableAdminClient(
        transport=BigtableTableAdminGrpcTransport(channel=grpc.insecure_channel(server.host))
    )
    restored_id = uid("again")
    op = overlay.restore_table(request={"parent": INSTANCE_NAME, "table_id": restored_id, "backup": made.name})
    assert op.result(timeout=OP_TIMEOUT).name == f"{INSTANCE_NAME}/tables/{restored_id}"
    assert op.optimize_restored_table_operation() is None
    overlay.delete_table(request={"name": f"{INSTANCE_NAME}/tables/{restored_id}"})
    with pytest.raises(gexc.AlreadyExists):
        overlay.restore_table(
            request={"parent": INSTANCE_NAME, "table_id": table.table_id, "backup": made.name}
        ).result(timeout=OP_TIMEOUT)
    # Snapshots and backups live side by side: a snapshot listing shows no backups.
    snaps = tac.list_snapshots(request={"parent": f"{INSTANCE_NAME}/clusters/-"})
    assert made.name not in [s.name for s in snaps]


# ---- whole-server backup and restore ------------------------------------------------


def cli(almanac_bin, *args, env=None, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([almanac_bin, *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_backup_of_a_live_server_restores_every_acknowledged_write(almanac_bin, tmp_path):
    data = tmp_path / "data"
    creds = {}
    for name, role in (("root", "admin"), ("viewer", "reader")):
        done = cli(almanac_bin, "auth", "create-principal", name, "--role", role, "--data-dir", str(data))
        assert done.returncode == 0, done.stderr
        creds[name] = json.loads(done.stdout)
    auth = [("authorization", f"Bearer {creds['root']['token']}")]
    key = (creds["root"]["access_key_id"], creds["root"]["secret_access_key"])
    table = f"{INSTANCE_NAME}/tables/live"
    srv = AlmanacServer(almanac_bin, data_dir=data, log_dir=tmp_path)
    srv.start()
    try:
        admin = BigtableTableAdminClient(
            transport=BigtableTableAdminGrpcTransport(channel=grpc.insecure_channel(srv.host))
        )
        admin.create_table(
            request={"parent": INSTANCE_NAME, "table_id": "live", "table": {"column_families": {"cf": {}}}},
            metadata=auth,
        )
        client = BigtableClient(transport=BigtableGrpcTransport(channel=grpc.insecure_channel(srv.host)))

        def put(i: int) -> None:
            cell = {"family_name": "cf", "column_qualifier": b"q", "timestamp_micros": MS, "value": b"v%d" % i}
            client.mutate_row(
                request={"table_name": table, "row_key": b"row%08d" % i, "mutations": [Mutation(set_cell=cell)]},
                metadata=auth,
            )

        with isolated_aws_env():
            tsw = ts_write_client(srv.ts_endpoint, key=key)
            tsw.create_database(DatabaseName="ops")
            tsw.create_table(DatabaseName="ops", TableName="cpu")
            now_ms = int(time.time() * 1000)
            records = [
                {
                    "Dimensions": [{"Name": "host", "Value": f"h{i}"}],
                    "MeasureName": "usage",
                    "MeasureValue": str(i),
                    "MeasureValueType": "DOUBLE",
                    "Time": str(now_ms - i * 1000),
                }
                for i in range(50)
            ]
            tsw.write_records(DatabaseName="ops", TableName="cpu", Records=records)

        for i in range(2000):  # rows before the load starts
            put(i)
        acked: list[tuple[int, float, float]] = []  # (row, sent, acknowledged)
        stop = threading.Event()

        def writer():
            i = 2000
            while not stop.is_set():
                sent = time.monotonic()
                put(i)
                acked.append((i, sent, time.monotonic()))
                i += 1

        thread = threading.Thread(target=writer)
        thread.start()
        try:
            time.sleep(1.0)
            env = dict(os.environ, ALMANAC_TOKEN=creds["viewer"]["token"])
            refused = cli(almanac_bin, "backup", str(tmp_path / "refused"), "--console-addr", srv.console_host, env=env)
            assert refused.returncode != 0 and "admin" in refused.stderr, refused.stderr
            env["ALMANAC_TOKEN"] = creds["root"]["token"]
            began = time.monotonic()
            done = cli(almanac_bin, "backup", str(tmp_path / "bk"), "--console-addr", srv.console_host, env=env)
            ended = time.monotonic()
            time.sleep(0.5)
        finally:
            stop.set()
            thread.join(timeout=30)
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        assert summary["entries"] > 2000 and summary["mb_per_s"] > 0
        manifest = json.loads((tmp_path / "bk" / "manifest.json").read_text())
        assert manifest["files"] == ["principals.json"]
    finally:
        srv.stop()

    # A restore never writes into a directory that holds something.
    refused = cli(almanac_bin, "restore", str(tmp_path / "bk"), "--data-dir", str(data))
    assert refused.returncode != 0 and "not empty" in refused.stderr
    restored_dir = tmp_path / "restored"
    done = cli(almanac_bin, "restore", str(tmp_path / "bk"), "--data-dir", str(restored_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entries"] == summary["entries"]

    srv2 = AlmanacServer(almanac_bin, data_dir=restored_dir, log_dir=tmp_path)
    srv2.start()
    try:
        reader = BigtableClient(transport=BigtableGrpcTransport(channel=grpc.insecure_channel(srv2.host)))
        keys = [
            chunk.row_key
            for resp in reader.read_rows(request=ReadRowsRequest(table_name=table), metadata=auth)
            for chunk in resp.chunks
            if chunk.row_key
        ]
        got = [int(k[3:]) for k in keys]
        # A prefix of the writer's sequence: the backup is one instant.
        assert got == list(range(len(got))), "the restored rows are not one instant's"
        before = [i for i, _, ack in acked if ack < began]
        after = [i for i, sent, _ in acked if sent > ended]
        assert before and after, (len(before), len(after))
        assert max(before) < len(got), "an acknowledged write before the backup is missing"
        assert min(after) >= len(got), "a write after the backup is in it"
        # The principals came along: no token is refused, root's works.
        with pytest.raises(gexc.Unauthenticated):
            list(reader.read_rows(request=ReadRowsRequest(table_name=table, rows_limit=1)))
        with isolated_aws_env():
            q = ts_query_client(srv2.ts_endpoint, key=key)
            rows = q.query(QueryString='SELECT count(*) FROM "ops"."cpu"')["Rows"]
            assert rows[0]["Data"][0]["ScalarValue"] == "50"
    finally:
        srv2.stop()
