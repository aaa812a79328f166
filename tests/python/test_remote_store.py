"""`almanac serve --bigtable`: the Timestream endpoint over a remote Bigtable.

A backend `almanac serve` plays the remote Bigtable; a front-end `almanac serve
--bigtable projects/remote/instances/series --bigtable-endpoint BACKEND` takes boto3's
WriteRecords and Query calls and keeps every time-series table, the catalog included, in
the backend's instance. The Cloud SDK's emulator (`cbtemulator`) plays the backend too
when it is installed. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from google.cloud import bigtable

from bt_helpers import (
    AlmanacServer,
    emulator_env,
    free_port,
    ts_query_all,
    ts_query_client,
    ts_write_client,
)

REMOTE = "projects/remote/instances/series"
EMULATOR = "/usr/lib/google-cloud-sdk/platform/bigtable-emulator/cbtemulator"
DB = "remote_db"


def _records(now_ms: int, hosts: int, points: int) -> list[dict]:
    return [
        {
            "Dimensions": [{"Name": "host", "Value": f"h{h}"}],
            "MeasureName": "cpu",
            "MeasureValueType": "MULTI",
            "MeasureValues": [
                {"Name": "usage", "Value": str(h * 1000 + i), "Type": "DOUBLE"},
                {"Name": "core", "Value": str(i % 4), "Type": "BIGINT"},
            ],
            "Time": str(now_ms - (points - i) * 1000),
            "TimeUnit": "MILLISECONDS",
        }
        for h in range(hosts)
        for i in range(points)
    ]


def _front_end(almanac_bin, tmp_path, name: str, endpoint: str) -> AlmanacServer:
    srv = AlmanacServer(
        almanac_bin,
        data_dir=tmp_path / f"{name}-data",
        log_dir=tmp_path,
        extra_args=("--bigtable", REMOTE, "--bigtable-endpoint", endpoint, "--seal-secs", "1",
                    "--seal-quiet-secs", "0"),
    )
    srv.start()
    return srv


def _write_and_read(front: AlmanacServer, table: str) -> None:
    write = ts_write_client(front.ts_endpoint)
    query = ts_query_client(front.ts_endpoint)
    try:
        if DB not in [d["DatabaseName"] for d in write.list_databases()["Databases"]]:
            write.create_database(DatabaseName=DB)
        write.create_table(
            DatabaseName=DB,
            TableName=table,
            RetentionProperties={
                "MemoryStoreRetentionPeriodInHours": 24,
                "MagneticStoreRetentionPeriodInDays": 7,
            },
        )
        now_ms = int(time.time() * 1000)
        records = _records(now_ms, hosts=5, points=200)
        for i in range(0, len(records), 100):
            write.write_records(DatabaseName=DB, TableName=table, Records=records[i : i + 100])
        # A lower version of a stored point is refused with the stored version.
        stale = dict(records[0], Version=2)
        newer = dict(records[0], Version=5, MeasureValues=[
            {"Name": "usage", "Value": "-1", "Type": "DOUBLE"},
            {"Name": "core", "Value": "9", "Type": "BIGINT"},
        ])
        write.write_records(DatabaseName=DB, TableName=table, Records=[newer])
        with pytest.raises(write.exceptions.RejectedRecordsException) as err:
            write.write_records(DatabaseName=DB, TableName=table, Records=[stale])
        assert err.value.response["RejectedRecords"][0]["ExistingVersion"] == 5

        got = ts_query_all(query, f'SELECT host, count(*), sum(usage), max(core) '
                                  f'FROM "{DB}"."{table}" GROUP BY host ORDER BY host')
        want = []
        for h in range(5):
            usage = [h * 1000 + i for i in range(200)]
            if h == 0:
                usage[0] = -1
            want.append([f"h{h}", "200", str(float(sum(usage))), "9" if h == 0 else "3"])
        assert [[r[0], r[1], str(float(r[2])), r[3]] for r in got] == want
        newest = ts_query_all(query, f'SELECT host, max(time) FROM "{DB}"."{table}" '
                                     "WHERE host = 'h3' AND time > ago(1h) GROUP BY host")
        assert len(newest) == 1 and newest[0][0] == "h3"
    finally:
        write.close()
        query.close()


def _backend_tables(host: str) -> set[str]:
    with emulator_env(host):
        client = bigtable.Client(project="remote", admin=True)
        try:
            return {t.table_id for t in client.instance("series").list_tables()}
        finally:
            client.close()


def _write_hosts_table(host: str) -> None:
    """A plain Bigtable table `hosts` in the backend's instance, through Google's client:
    row key = host, family `info` with `rack`."""
    from google.cloud.bigtable import column_family

    with emulator_env(host):
        client = bigtable.Client(project="remote", admin=True)
        try:
            table = client.instance("series").table("hosts")
            table.create(column_families={"info": column_family.MaxVersionsGCRule(1)})
            rows = []
            for h in range(5):
                row = table.direct_row(f"h{h}".encode())
                row.set_cell("info", b"rack", f"r{h % 2}".encode())
                rows.append(row)
            assert all(s.code == 0 for s in table.mutate_rows(rows))
        finally:
            client.close()


def _sql(almanac_bin, front: AlmanacServer, sql: str) -> list[str]:
    """`almanac sql` through the front-end, bare names in the backend's instance, as CSV."""
    out = subprocess.run(
        [almanac_bin, "sql", "--endpoint", front.ts_endpoint, "--instance", REMOTE,
         "--format", "csv", "-e", sql],
        capture_output=True, text=True, timeout=60, env={**os.environ},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()


def _sql_over_remote_tables(almanac_bin, front: AlmanacServer, backend: AlmanacServer) -> None:
    """SQL through the front-end reads the backend instance's Bigtable tables, alone and
    joined with a time-series table; the front-end's own engine holds none of them."""
    _write_hosts_table(backend.host)
    rows = _sql(almanac_bin, front, "SELECT CAST(_key AS VARCHAR) AS host, "
                "CAST(info['rack'] AS VARCHAR) AS rack FROM hosts ORDER BY host")
    assert rows == ["host,rack", *[f"h{h},r{h % 2}" for h in range(5)]]
    # A Bigtable table of the instance joined with a time-series table.
    rows = _sql(almanac_bin, front,
                "SELECT CAST(h.info['rack'] AS VARCHAR) AS rack, count(*) AS n "
                f'FROM "{DB}"."cpu" c JOIN hosts h ON c.host = CAST(h._key AS VARCHAR) '
                "GROUP BY 1 ORDER BY 1")
    assert rows == ["rack,n", "r0,600", "r1,400"]
    listed = _sql(almanac_bin, front, "SELECT table_name FROM information_schema.tables "
                  "WHERE table_schema = 'bigtable' ORDER BY 1")
    assert listed == ["table_name", "_catalog", "_jobs", "hosts", f"{DB}.cpu"], listed


def test_timestream_over_an_almanac_backend(almanac_bin, tmp_path, _aws_env):
    backend = AlmanacServer(almanac_bin, data_dir=tmp_path / "backend", log_dir=tmp_path,
                            timestream=False)
    backend.start()
    front = _front_end(almanac_bin, tmp_path, "front", backend.host)
    try:
        _write_and_read(front, "cpu")
        _sql_over_remote_tables(almanac_bin, front, backend)
        # The tables live in the backend's instance, the catalog beside them.
        tables = _backend_tables(backend.host)
        assert f"{DB}.cpu" in tables and "_catalog" in tables, tables
        # A new front-end on an empty data directory sees the same database and points.
        assert front.stop() == 0
        other = _front_end(almanac_bin, tmp_path, "other", backend.host)
        try:
            query = ts_query_client(other.ts_endpoint)
            rows = ts_query_all(query, f'SELECT count(*) FROM "{DB}"."cpu"')
            assert rows == [["1000"]]
            query.close()
        finally:
            assert other.stop() == 0
    finally:
        if front.running:
            front.stop()
        assert backend.stop() == 0


def _wait_for_port(port: int, timeout_s: float = 10.0) -> None:
    """Waits until something accepts connections on 127.0.0.1:`port`."""
    import socket

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.05)


@pytest.mark.skipif(not os.path.exists(EMULATOR), reason="the Cloud SDK's cbtemulator is not installed")
def test_timestream_over_the_cloud_sdk_emulator(almanac_bin, tmp_path, _aws_env):
    port = free_port()
    emulator = subprocess.Popen([EMULATOR, "-host", "127.0.0.1", "-port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port)
        front = _front_end(almanac_bin, tmp_path, "front", f"127.0.0.1:{port}")
        try:
            _write_and_read(front, "cpu_emulated")
        finally:
            assert front.stop() == 0
    finally:
        emulator.kill()
        emulator.wait()


def test_bad_remote_flags_are_refused_by_name(almanac_bin, tmp_path):
    def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [almanac_bin, "serve", "--data-dir", str(tmp_path / "d"), "--addr",
             f"127.0.0.1:{free_port()}", "--timestream-addr", f"127.0.0.1:{free_port()}",
             "--console-addr", "off", *args],
            capture_output=True, text=True, timeout=60, env=env,
        )

    # Cloud Bigtable itself (no --bigtable-endpoint) needs Google credentials first:
    # none here (a key file that does not exist), so nothing is dialed.
    env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "absent.json")}
    no_creds = serve("--bigtable", REMOTE, env=env)
    assert no_creds.returncode != 0 and "no Google credentials" in no_creds.stderr, \
        no_creds.stderr
    bad_name = serve("--bigtable", "remote/series", "--bigtable-endpoint", "127.0.0.1:1")
    assert bad_name.returncode != 0 and "projects/PROJECT/instances/INSTANCE" in bad_name.stderr
    dead = serve("--bigtable", REMOTE, "--bigtable-endpoint", f"127.0.0.1:{free_port()}")
    assert dead.returncode != 0 and "cannot reach the Bigtable endpoint" in dead.stderr


def test_a_front_ends_bigtable_endpoint_is_the_remote_instance(almanac_bin, tmp_path):
    """Google's client against a front-end's `--addr` reaches the backend's instance: a
    table made and written through the front-end is the backend's, and the time-series
    tables are there to read. With principals defined, only an administrator of
    everything may use it (the backend sees the front-end's credentials)."""
    import grpc
    from google.api_core import exceptions
    from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
    from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
        BigtableTableAdminGrpcTransport,
    )

    backend = AlmanacServer(almanac_bin, data_dir=tmp_path / "backend", log_dir=tmp_path,
                            timestream=False)
    backend.start()
    front = _front_end(almanac_bin, tmp_path, "front", backend.host)
    try:
        with emulator_env(front.host):
            client = bigtable.Client(project="remote", admin=True)
            try:
                from google.cloud.bigtable import column_family

                table = client.instance("series").table("through_front")
                table.create(column_families={"cf": column_family.MaxVersionsGCRule(1)})
                row = table.direct_row(b"k1")
                row.set_cell("cf", b"q", b"v1")
                row.commit()
                assert table.read_row(b"k1").cells["cf"][b"q"][0].value == b"v1"
            finally:
                client.close()
        with emulator_env(backend.host):
            client = bigtable.Client(project="remote", admin=True)
            try:
                table = client.instance("series").table("through_front")
                assert table.read_row(b"k1").cells["cf"][b"q"][0].value == b"v1"
            finally:
                client.close()
        assert "through_front" in _backend_tables(front.host)
    finally:
        assert front.stop() == 0

    # Principals on a front-end: its Bigtable endpoint is for administrators only.
    data = tmp_path / "secured-front"
    tokens = {}
    for name, role in [("boss", "admin"), ("viewer", "reader")]:
        done = subprocess.run([almanac_bin, "auth", "create-principal", name, "--role", role,
                               "--data-dir", str(data)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        tokens[name] = json.loads(done.stdout)["token"]
    secured = AlmanacServer(
        almanac_bin, data_dir=data, log_dir=tmp_path,
        extra_args=("--bigtable", REMOTE, "--bigtable-endpoint", backend.host),
    )
    secured.start()
    channel = grpc.insecure_channel(secured.host)
    admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
    try:
        def tables(token: str | None) -> set[str]:
            metadata = [("authorization", f"Bearer {token}")] if token else []
            listed = admin.list_tables(parent=REMOTE, retry=None, metadata=metadata)
            return {t.name.rsplit("/", 1)[1] for t in listed}

        assert "through_front" in tables(tokens["boss"])
        with pytest.raises(exceptions.PermissionDenied, match="viewer"):
            tables(tokens["viewer"])
        with pytest.raises(exceptions.Unauthenticated):
            tables(None)
    finally:
        channel.close()
        assert secured.stop() == 0
        assert backend.stop() == 0
