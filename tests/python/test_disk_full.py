"""A full disk: the data directory on a 64 MiB tmpfs that the test mounts, filled by
a load until the server's free-space reserve (`serve --min-free-disk-mib`) refuses
writes. While full, writes are refused with RESOURCE_EXHAUSTED (gRPC) and a
ThrottlingException (Timestream) naming the cause, and reads keep working; once a
ballast file is removed, writes resume by themselves; after a restart every
acknowledged write is there and no refused one is.

Mounting needs root; without it the test is skipped (and fails where $CI is set).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time

import grpc
import pytest
from botocore.exceptions import ClientError
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)
from google.cloud.bigtable_v2 import BigtableClient
from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import Mutation, ReadRowsRequest
from google.api_core import exceptions as gexc

from bt_helpers import MS, AlmanacServer, isolated_aws_env, ts_query_client, ts_write_client

I = "projects/p/instances/i"
TABLE = f"{I}/tables/fill"
FS_MIB = 64
BALLAST_MIB = 16
RESERVE_MIB = 8
VALUE = 64 * 1024


@pytest.fixture
def small_fs(tmp_path):
    mount = tmp_path / "fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MIB}m", "tmpfs", str(mount)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        message = f"cannot mount a tmpfs here: {done.stderr.strip()}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_refuses_writes_serves_reads_and_recovers(almanac_bin, small_fs, tmp_path):
    ballast = small_fs / "ballast"
    ballast.write_bytes(os.urandom(BALLAST_MIB << 20))
    srv = AlmanacServer(
        almanac_bin, data_dir=small_fs / "data", log_dir=tmp_path,
        extra_args=("--min-free-disk-mib", str(RESERVE_MIB), "--seal-secs", "0"),
    )  # fmt: skip
    srv.start()
    try:
        admin = BigtableTableAdminClient(
            transport=BigtableTableAdminGrpcTransport(channel=grpc.insecure_channel(srv.host))
        )
        admin.create_table(request={"parent": I, "table_id": "fill", "table": {"column_families": {"cf": {}}}})
        client = BigtableClient(transport=BigtableGrpcTransport(channel=grpc.insecure_channel(srv.host)))

        def put(i: int) -> None:
            cell = {"family_name": "cf", "column_qualifier": b"q", "timestamp_micros": MS, "value": value(i)}
            client.mutate_row(
                request={"table_name": TABLE, "row_key": b"row%06d" % i, "mutations": [Mutation(set_cell=cell)]},
                retry=None,
            )

        with isolated_aws_env():
            tsw = ts_write_client(srv.ts_endpoint)
            tsw.create_database(DatabaseName="ddd")
            tsw.create_table(DatabaseName="ddd", TableName="ttt")

        acked, refused = [], []
        for i in range(FS_MIB * 1024 * 1024 // VALUE):
            try:
                put(i)
                acked.append(i)
            except gexc.ResourceExhausted as e:
                assert "disk full" in e.message and "--min-free-disk-mib" in e.message, e.message
                refused.append(i)
                break
        assert acked and refused, "the load never reached the reserve"
        free = os.statvfs(small_fs)
        assert free.f_bavail * free.f_frsize < (RESERVE_MIB << 20)

        # Full: writes refused, reads served.
        with pytest.raises(gexc.ResourceExhausted):
            put(refused[0] + 1)
        row = next(iter(client.read_rows(request=ReadRowsRequest(table_name=TABLE, rows_limit=1))))
        assert row.chunks[0].row_key == b"row000000"
        now_ms = int(time.time() * 1000)
        record = {"Dimensions": [{"Name": "h", "Value": "a"}], "MeasureName": "m", "MeasureValue": "1",
                  "MeasureValueType": "DOUBLE", "Time": str(now_ms)}  # fmt: skip
        with isolated_aws_env():
            with pytest.raises(ClientError) as refused_ts:
                ts_write_client(srv.ts_endpoint).write_records(DatabaseName="ddd", TableName="ttt", Records=[record])
        assert refused_ts.value.response["Error"]["Code"] == "ThrottlingException"
        assert "disk full" in refused_ts.value.response["Error"]["Message"]

        # Space returns: writes resume by themselves.
        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:
            try:
                put(refused[0])
                break
            except gexc.ResourceExhausted:
                assert time.monotonic() < deadline, "writes did not resume after space was freed"
                time.sleep(0.1)
        acked.append(refused[0])
        with isolated_aws_env():
            ts_write_client(srv.ts_endpoint).write_records(DatabaseName="ddd", TableName="ttt", Records=[record])
    finally:
        code = srv.stop()
    assert code == 0, srv.log_text()

    srv.start()
    try:
        client = BigtableClient(transport=BigtableGrpcTransport(channel=grpc.insecure_channel(srv.host)))
        rows = {}
        key = None
        for resp in client.read_rows(request=ReadRowsRequest(table_name=TABLE)):
            for chunk in resp.chunks:
                if chunk.row_key:
                    key = chunk.row_key
                    rows[key] = b""
                rows[key] += chunk.value
        assert sorted(rows) == [b"row%06d" % i for i in sorted(acked)]
        assert all(rows[b"row%06d" % i] == value(i) for i in acked)
        with isolated_aws_env():
            q = ts_query_client(srv.ts_endpoint).query(QueryString='SELECT count(*) FROM "ddd"."ttt"')
        assert q["Rows"][0]["Data"][0]["ScalarValue"] == "1"
    finally:
        srv.stop()


def value(i: int) -> bytes:
    """Row i's value: VALUE bytes that do not compress, the same on every call."""
    out = bytearray()
    block = 0
    while len(out) < VALUE:
        out += hashlib.sha256(b"%d-%d" % (i, block)).digest()
        block += 1
    return bytes(out[:VALUE])
