"""Fixtures for the client-conformance suite.

One `almanac serve` process is started for the whole session on a free loopback port
with a fresh data directory; `BIGTABLE_EMULATOR_HOST` points Google's Python client at
it (insecure channel, anonymous credentials), exactly as it would point at the official
emulator. Every test gets its own uniquely named tables, created through the Table
Admin API and deleted afterwards. Nothing here talks to anything but 127.0.0.1.
"""

from __future__ import annotations

import re
import uuid

import pytest
from google.api_core import exceptions as gexc
from google.cloud import bigtable
from google.cloud.bigtable.data import BigtableDataClient

from bt_helpers import (
    INSTANCE,
    PROJECT,
    AlmanacServer,
    BtTable,
    emulator_env,
    find_almanac_bin,
    TsFactory,
    isolated_aws_env,
    ts_query_client,
    ts_write_client,
)


@pytest.fixture(scope="session")
def almanac_bin() -> str:
    path = find_almanac_bin()
    if path is None:
        pytest.fail(
            "no almanac binary: set ALMANAC_BIN (scripts/test does) or build "
            "`cargo build -p almanac --bin almanac`",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def server(almanac_bin, tmp_path_factory):
    """The session's server. Teardown SIGTERMs it and requires exit code 0.

    It seals closed time-series buckets every second (instead of every minute), so every
    Timestream test also runs against a server folding old hours into blocks. Its web
    console, `/metrics` and `/api/…` are at `server.console_url` (`--console-addr`)."""
    srv = AlmanacServer(
        almanac_bin,
        data_dir=tmp_path_factory.mktemp("almanac-data"),
        log_dir=tmp_path_factory.mktemp("almanac-logs"),
        extra_args=("--seal-secs", "1", "--seal-quiet-secs", "0"),
    )
    srv.start()
    with emulator_env(srv.host):  # the clients read it when they are constructed
        yield srv
    code = srv.stop()
    assert code == 0, f"almanac exited with {code} after SIGTERM\n--- output ---\n{srv.log_text()}"


@pytest.fixture(autouse=True)
def _server_alive(request):
    """Fail fast, with the server's stderr, if the session server has died.

    Without this a dead server makes every later test spin in the client's
    UNAVAILABLE retries until its timeout.
    """
    if "server" not in request.fixturenames:
        yield
        return
    srv = request.getfixturevalue("server")
    srv.assert_alive()
    yield
    srv.assert_alive()


@pytest.fixture(scope="session")
def admin_client(server) -> bigtable.Client:
    """Classic client (admin=True) for PROJECT; its data calls go through the new client."""
    with emulator_env(server.host):
        client = bigtable.Client(project=PROJECT, admin=True)
        client._veneer_data_client  # created lazily; make it read the env var now
    return client


@pytest.fixture(scope="session")
def tac(admin_client):
    """The generated Table Admin client of the session's classic client."""
    return admin_client.table_admin_client


@pytest.fixture(scope="session")
def instance(admin_client):
    return admin_client.instance(INSTANCE)


@pytest.fixture(scope="session")
def data_client(server):
    """The new synchronous data client for PROJECT."""
    with emulator_env(server.host):
        client = BigtableDataClient(project=PROJECT)
    yield client
    client.close()


def _table_id(nodeid: str) -> str:
    """A unique, valid table id (<= 50 chars) that says which test made it."""
    name = nodeid.rsplit("::", 1)[-1]
    stem = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:36] or "t"
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def make_table(request, instance, data_client):
    """Factory: make_table(families={"cf": gc_rule_or_None}, splits=[...], inst=, table_id=).

    Creates the table through the classic admin client and returns a BtTable with
    both a classic table and a new-client table bound to it. Deletes on teardown.
    """
    made: list[BtTable] = []

    def make(families=None, splits=(), inst=None, dclient=None, table_id=None) -> BtTable:
        inst = inst or instance
        dclient = dclient or data_client
        if families is None:
            families = {"cf1": None, "cf2": None}
        table_id = table_id or _table_id(request.node.nodeid)
        classic = inst.table(table_id)
        classic.create(initial_split_keys=list(splits), column_families=dict(families))
        bt = BtTable(
            table_id=table_id,
            classic=classic,
            data=dclient.get_table(inst.instance_id, table_id),
        )
        made.append(bt)
        return bt

    yield make
    for bt in made:
        bt.data.close()
        try:
            bt.classic.delete()
        except gexc.NotFound:
            pass


@pytest.fixture
def table(make_table) -> BtTable:
    """A fresh table with families cf1 and cf2 (no GC rules)."""
    return make_table()


@pytest.fixture
def fresh_server(almanac_bin, tmp_path):
    """A private server on its own data dir, for tests that restart it."""
    srv = AlmanacServer(almanac_bin, data_dir=tmp_path / "data", log_dir=tmp_path)
    srv.start()
    yield srv
    if srv.running:
        srv.stop()


# ---- Timestream -------------------------------------------------------------------


@pytest.fixture(scope="session")
def _aws_env():
    """The user's AWS config/credentials files and profile are invisible for the session."""
    with isolated_aws_env():
        yield


@pytest.fixture(scope="session")
def ts_write(server, _aws_env):
    """boto3 `timestream-write` client on the session server (endpoint_url => no discovery)."""
    client = ts_write_client(server.ts_endpoint)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ts_write_unvalidated(server, _aws_env):
    """Like `ts_write` but without botocore's client-side parameter validation."""
    client = ts_write_client(server.ts_endpoint, validate=False)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ts_query(server, _aws_env):
    """boto3 `timestream-query` client on the session server."""
    client = ts_query_client(server.ts_endpoint)
    yield client
    client.close()


@pytest.fixture(scope="session")
def ts_query_unvalidated(server, _aws_env):
    """Like `ts_query` but without botocore's client-side parameter validation."""
    client = ts_query_client(server.ts_endpoint, validate=False)
    yield client
    client.close()


@pytest.fixture
def ts(request, ts_write, server) -> TsFactory:
    """Factory: ts.database() -> name; ts.table(db=None, memory_hours=, magnetic_days=,
    magnetic_writes=) -> TsTable (a fresh database when db is None). Deleted on teardown."""
    factory = TsFactory(ts_write, request.node.nodeid)
    yield factory
    if server.running:
        factory.cleanup()


def pytest_report_header(config):
    return [f"almanac binary: {find_almanac_bin() or '(not found)'}"]

