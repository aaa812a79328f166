"""Several `almanac serve --bigtable` front-ends over one remote Bigtable end where one node
would.

A backend `almanac serve` plays the remote Bigtable. Two front-ends take boto3's calls at
once: both create the database and the table at the same moment, grow the schema with
different dimensions, and write the same series with versions (every record carries a
value no other record has, so the stored value says which write won). Then both are
killed with SIGKILL and started again two hours later (libfaketime moves their clocks),
when the hour they wrote is due for sealing: one seals every second while the other
upserts into the same buckets, and the sealer is killed with SIGKILL during its first
passes and started again. At the end:

- no two acknowledged writes of a point share a version (one node accepts one of them);
- every ExistingVersion a rejection named was acknowledged for that point;
- both front-ends read exactly the points a single node holds after the acknowledged
  writes are replayed into it: every point once, the highest version's value.

Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import glob
import os
import random
import threading
import time

import pytest
from botocore.exceptions import ClientError

from google.cloud import bigtable
from google.cloud.bigtable import row_filters

from bt_helpers import (
    AlmanacServer,
    emulator_env,
    ts_query_all,
    ts_query_client,
    ts_write_client,
)

REMOTE = "projects/frontends/instances/fleet"
DB, TABLE = "fleet", "cpu"
HOSTS = 24
POINTS = 60
STEP_MS = 5_000
RECORDS_PER_REQUEST = 20
LIBFAKETIME = next(iter(sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))), None)


def _faketime(offset_s: int) -> dict[str, str]:
    """Environment that runs a process `offset_s` seconds in the future (wall clock only)."""
    assert LIBFAKETIME, "libfaketime is not installed"
    return {
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME": f"+{offset_s}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def _front_end(almanac_bin, tmp_path, name: str, backend: AlmanacServer, seal: bool,
               offset_s: int = 0) -> AlmanacServer:
    srv = AlmanacServer(
        almanac_bin,
        data_dir=tmp_path / f"{name}-data",
        log_dir=tmp_path,
        extra_args=("--bigtable", REMOTE, "--bigtable-endpoint", backend.host,
                    "--seal-secs", "1" if seal else "0", "--seal-quiet-secs", "0"),
        extra_env=_faketime(offset_s) if offset_s else None,
    )
    srv.start()
    return srv


def _at_once(*calls):
    """Runs the calls on threads released together; their results or exceptions."""
    barrier = threading.Barrier(len(calls))
    out: list = [None] * len(calls)

    def run(i, call):
        barrier.wait()
        try:
            out[i] = call()
        except Exception as e:  # noqa: BLE001 - the caller inspects it
            out[i] = e

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def _code(result) -> str:
    if isinstance(result, ClientError):
        return result.response["Error"]["Code"]
    if isinstance(result, Exception):
        raise result
    return "ok"


class Ledger:
    """What every write was told, by point (host, time): accepted (version, value) pairs
    and rejections (version, value, existing version)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.accepted: dict[tuple, list[tuple[int, int]]] = {}
        self.rejected: dict[tuple, list[tuple[int, int, int]]] = {}
        self.records: list[dict] = []

    def write(self, client, records: list[dict]) -> None:
        try:
            client.write_records(DatabaseName=DB, TableName=TABLE, Records=records)
            bad = {}
        except client.exceptions.RejectedRecordsException as e:
            bad = {r["RecordIndex"]: r for r in e.response["RejectedRecords"]}
        with self.lock:
            for i, r in enumerate(records):
                point = (r["Dimensions"][0]["Value"], int(r["Time"]))
                version, value = r["Version"], int(r["MeasureValues"][0]["Value"])
                if i in bad:
                    existing = bad[i].get("ExistingVersion")
                    assert existing is not None, bad[i]
                    self.rejected.setdefault(point, []).append((version, value, existing))
                else:
                    self.accepted.setdefault(point, []).append((version, value))
                    self.records.append(r)


def _record(host: str, time_ms: int, version: int, value: int, extra=None) -> dict:
    dims = [{"Name": "host", "Value": host}] + ([extra] if extra else [])
    return {
        "Dimensions": dims,
        "MeasureName": "usage",
        "MeasureValueType": "MULTI",
        "MeasureValues": [{"Name": "v", "Value": str(value), "Type": "BIGINT"}],
        "Time": str(time_ms),
        "TimeUnit": "MILLISECONDS",
        "Version": version,
    }


def _writer(ledger: Ledger, client, rng: random.Random, times: list[int], versions: range,
            requests: int, next_value, hosts: int = HOSTS) -> None:
    for _ in range(requests):
        records = [
            _record(f"h{rng.randrange(hosts)}", rng.choice(times), rng.choice(versions),
                    next_value())
            for _ in range(RECORDS_PER_REQUEST)
        ]
        ledger.write(client, records)


def _stored_rows(backend: AlmanacServer) -> dict[str, list[bool]]:
    """The backend's rows of points of the table by host (the series directory's rows,
    keyed `@series`, left out): whether each holds a sealed block."""
    out: dict[str, list[bool]] = {}
    with emulator_env(backend.host):
        c = bigtable.Client(project=REMOTE.split("/")[1], admin=True)
        try:
            table = c.instance(REMOTE.split("/")[3]).table(f"{DB}.{TABLE}")
            for row in table.read_rows(filter_=row_filters.StripValueTransformerFilter(True)):
                if row.row_key.startswith(b"@"):
                    continue
                host = row.row_key.split(b"#", 1)[1].split(b"@", 1)[0].decode()
                out.setdefault(host, []).append("b" in row.cells)
        finally:
            c.close()
    return out


def _points(client) -> list[tuple[str, int, int]]:
    sql = (f'SELECT host, to_milliseconds(time), v FROM "{DB}"."{TABLE}" '
           "WHERE host LIKE 'h%' ORDER BY host, time")
    return [(h, int(t), int(v)) for h, t, v in ts_query_all(client, sql)]


@pytest.mark.skipif(LIBFAKETIME is None and not os.environ.get("CI"),
                    reason="Debian's faketime (libfaketime) is not installed")
def test_two_front_ends_end_where_one_node_would(almanac_bin, tmp_path, _aws_env):
    backend = AlmanacServer(almanac_bin, data_dir=tmp_path / "backend", log_dir=tmp_path,
                            timestream=False)
    backend.start()
    servers = [backend]
    clients = []

    def client(kind, srv):
        c = (ts_write_client if kind == "write" else ts_query_client)(srv.ts_endpoint)
        clients.append(c)
        return c

    try:
        a = _front_end(almanac_bin, tmp_path, "a", backend, seal=True)
        b = _front_end(almanac_bin, tmp_path, "b", backend, seal=False)
        servers += [a, b]
        wa, wb = client("write", a), client("write", b)

        # The same database, then the same table, created through both at once.
        got = _at_once(lambda: wa.create_database(DatabaseName=DB),
                       lambda: wb.create_database(DatabaseName=DB))
        assert sorted(map(_code, got)) == ["ConflictException", "ok"], got
        retention = {"MemoryStoreRetentionPeriodInHours": 48,
                     "MagneticStoreRetentionPeriodInDays": 7}
        got = _at_once(
            lambda: wa.create_table(DatabaseName=DB, TableName=TABLE,
                                    RetentionProperties=retention),
            lambda: wb.create_table(DatabaseName=DB, TableName=TABLE,
                                    RetentionProperties=retention))
        assert sorted(map(_code, got)) == ["ConflictException", "ok"], got

        # Four minutes back to a minute ahead: buckets still open to row-form writes
        # (a bucket that ended over five minutes ago takes late points into its block).
        now_ms = int(time.time() * 1000) // STEP_MS * STEP_MS
        times = [now_ms - 240_000 + i * STEP_MS for i in range(POINTS)]
        # The schema grows through both at once, each with a dimension the other lacks.
        got = _at_once(
            lambda: wa.write_records(DatabaseName=DB, TableName=TABLE, Records=[_record(
                "g-a", times[0], 1, 1, {"Name": "region", "Value": "eu"})]),
            lambda: wb.write_records(DatabaseName=DB, TableName=TABLE, Records=[_record(
                "g-b", times[0], 1, 2, {"Name": "zone", "Value": "z1"})]))
        assert list(map(_code, got)) == ["ok", "ok"], got

        ledger = Ledger()
        # Every record's value, unique: which write a stored value came from.
        counter = iter(range(1_000_000, 10**9))
        counter_lock = threading.Lock()

        def next_value() -> int:
            with counter_lock:
                return next(counter)

        def run_writers(srv, versions, requests, hosts=HOSTS):
            threads = [
                threading.Thread(target=_writer, args=(
                    ledger, client("write", srv), random.Random(next_value()), times,
                    versions, requests, next_value, hosts))
                for _ in range(2)
            ]
            for t in threads:
                t.start()
            return threads

        # Overlapping series, versions 1..4, through both front-ends at once.
        for t in run_writers(a, range(1, 5), 20) + run_writers(b, range(1, 5), 20):
            t.join()

        # Both die; two hours later the hour they wrote is due for sealing. `a` seals
        # every second while `b` upserts into the buckets of a few hosts (versions
        # 3..8); `a` is killed once its pass has sealed some of the other hosts'
        # buckets but not all.
        for srv in (a, b):
            srv.proc.kill()
            srv.proc.wait()
        later = 2 * 3600
        a = _front_end(almanac_bin, tmp_path, "a", backend, seal=True, offset_s=later)
        b = _front_end(almanac_bin, tmp_path, "b", backend, seal=False, offset_s=later)
        servers += [a, b]
        late = 4
        on_b = run_writers(b, range(3, 9), 15, hosts=late)
        deadline = time.monotonic() + 60
        while True:
            rows = _stored_rows(backend)
            sealer_only = [kinds for host, kinds in rows.items()
                           if host.startswith("h") and int(host[1:]) >= late]
            if any(any(k) for k in sealer_only) and any(not all(k) for k in sealer_only):
                break
            assert time.monotonic() < deadline, f"no seal pass of `a` was seen: {rows}"
            time.sleep(0.005)
        a.proc.kill()
        a.proc.wait()
        # Past the dead sealer's lease (5 minutes), so the new one seals at once what
        # the dead one left; it upserts into the late hosts' buckets beside `b`.
        a = _front_end(almanac_bin, tmp_path, "a2", backend, seal=True,
                       offset_s=later + 6 * 60)
        servers.append(a)
        for t in run_writers(a, range(3, 9), 10, hosts=late) + on_b:
            t.join()
        # The new sealer finishes what the dead one left: a block row a bucket.
        deadline = time.monotonic() + 60
        while not all(all(kinds) for kinds in _stored_rows(backend).values()):
            assert time.monotonic() < deadline, f"buckets left unsealed: {_stored_rows(backend)}"
            time.sleep(0.2)

        # One node accepts one write of a version of a point.
        for point, acks in ledger.accepted.items():
            versions = [v for v, _ in acks]
            assert len(versions) == len(set(versions)), (point, acks)
        # A rejection names a version that was acknowledged for the point.
        for point, rejections in ledger.rejected.items():
            acked = {v for v, _ in ledger.accepted.get(point, [])}
            for version, _, existing in rejections:
                assert existing >= version and existing in acked, (point, rejections, acked)
        want = sorted(
            (host, t, max(acks)[1]) for (host, t), acks in ledger.accepted.items()
        )

        # A single node given the acknowledged writes, lowest version first.
        reference = AlmanacServer(almanac_bin, data_dir=tmp_path / "reference",
                                  log_dir=tmp_path)
        reference.start()
        servers.append(reference)
        wr = client("write", reference)
        wr.create_database(DatabaseName=DB)
        wr.create_table(DatabaseName=DB, TableName=TABLE, RetentionProperties=retention)
        replay = sorted(ledger.records, key=lambda r: r["Version"])
        for i in range(0, len(replay), 100):
            wr.write_records(DatabaseName=DB, TableName=TABLE, Records=replay[i:i + 100])
        assert _points(client("query", reference)) == want

        for srv in (a, b):
            got = _points(client("query", srv))
            assert len(got) == len(set((h, t) for h, t, _ in got)), "a point read twice"
            assert got == want
    finally:
        for c in clients:
            c.close()
        for srv in servers:
            if srv.running:
                srv.proc.kill()
                srv.proc.wait()
