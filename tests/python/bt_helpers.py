"""Shared helpers for the client-conformance suite: the server process, tables, readers."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from google.cloud.bigtable.data import ReadRowsQuery

PROJECT = "almanac-test"
INSTANCE = "conformance"
# Cloud Bigtable tables are MILLIS-granular: the suite's timestamps are multiples of 1000.
MS = 1000


def find_almanac_bin() -> str | None:
    """$ALMANAC_BIN, else the dev build under $CARGO_TARGET_DIR (or the project default)."""
    explicit = os.environ.get("ALMANAC_BIN")
    if explicit:
        return explicit
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.expanduser("~/.cache/almanac/target")
    candidate = Path(target) / "debug" / "almanac"
    return str(candidate) if candidate.exists() else None


def free_port(avoid: tuple = ()) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


class AlmanacServer:
    """One `almanac serve` process on 127.0.0.1, its stderr captured to a file.

    Besides the gRPC port it serves the Timestream write API (AWS JSON 1.0 over HTTP) on a
    second loopback port, `--timestream-addr`; `ts_endpoint` is its URL for boto3. The web
    console, `/metrics` and `/api/…` (docs/console.md) are on a third, `--console-addr`, at
    `console_url` (always a free port, never the default 8088).
    """

    READY_TIMEOUT_S = 60
    STOP_TIMEOUT_S = 60

    def __init__(
        self,
        binary: str,
        data_dir: Path,
        log_dir: Path,
        timestream: bool = True,
        extra_args: tuple[str, ...] = (),
        extra_env: dict[str, str] | None = None,
    ):
        self.binary = binary
        self.extra_args = tuple(extra_args)
        # Added to this process's environment for the server (e.g. libfaketime's).
        self.extra_env = dict(extra_env or {})
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.timestream = timestream
        self.port: int | None = None
        self.ts_port: int | None = None
        self.console_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._starts = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ts_host(self) -> str:
        return f"127.0.0.1:{self.ts_port}"

    @property
    def console_host(self) -> str:
        return f"127.0.0.1:{self.console_port}"

    @property
    def console_url(self) -> str:
        """The console's base URL, e.g. http://127.0.0.1:PORT (no trailing slash)."""
        return f"http://{self.console_host}"

    @property
    def ts_endpoint(self) -> str:
        """The Timestream write endpoint, for boto3's `endpoint_url`."""
        assert self.timestream, "server started without --timestream-addr"
        return f"http://{self.ts_host}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_text(errors="replace")

    def start(
        self, port: int | None = None, ts_port: int | None = None, console_port: int | None = None
    ) -> None:
        assert not self.running, "server already running"
        if shutil.which(self.binary) is None:
            pytest.fail(f"almanac binary not executable: {self.binary}", pytrace=False)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self._starts += 1
        self.log_path = self.log_dir / f"almanac-{self.port}-{self._starts}.log"
        log = open(self.log_path, "wb")
        cmd = [self.binary, "serve", "--addr", self.host, "--data-dir", str(self.data_dir)]
        cmd += self.extra_args
        # Both "listening on" lines must appear; `\b` keeps port 1234 from matching 12345.
        needles = [re.compile(rf"(?<!timestream )listening on {re.escape(self.host)}\b")]
        if self.timestream:
            self.ts_port = ts_port or free_port(avoid=(self.port,))
            cmd += ["--timestream-addr", self.ts_host]
            needles.append(re.compile(rf"timestream listening on {re.escape(self.ts_host)}\b"))
        self.console_port = console_port or free_port(avoid=(self.port, self.ts_port))
        cmd += ["--console-addr", self.console_host]
        try:
            self.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.extra_env} if self.extra_env else None,
            )
        finally:
            log.close()
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.log_text()
            if all(n.search(text) for n in needles) and self._console_accepts():
                return
            if self.proc.poll() is not None:
                pytest.fail(
                    f"almanac exited with {self.proc.returncode} before listening\n"
                    f"command: {' '.join(cmd)}\n--- output ---\n{self.log_text()}",
                    pytrace=False,
                )
            time.sleep(0.05)
        self.proc.kill()
        self.proc.wait()
        pytest.fail(
            f"almanac did not print all of {[n.pattern for n in needles]} and accept "
            f"connections on the console's {self.console_host} within {self.READY_TIMEOUT_S}s\n"
            f"--- output ---\n{self.log_text()}",
            pytrace=False,
        )

    def _console_accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.console_port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code (a hang is killed and fails)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                pytest.fail(
                    f"almanac did not exit within {self.STOP_TIMEOUT_S}s of SIGTERM\n"
                    f"--- output ---\n{self.log_text()}",
                    pytrace=False,
                )
        return self.proc.returncode

    def restart(self, same_port: bool = True) -> None:
        """Stop (requiring exit code 0) and start again on the same data dir."""
        code = self.stop()
        assert code == 0, f"exit code {code} after SIGTERM\n--- output ---\n{self.log_text()}"
        if same_port:
            self.start(self.port, self.ts_port, self.console_port)
        else:
            self.start()

    def assert_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            pytest.fail(
                f"almanac died (exit {self.proc.returncode})\n--- output ---\n{self.log_text()}",
                pytrace=False,
            )


@contextlib.contextmanager
def emulator_env(host: str):
    """Point clients constructed inside the block at `host` (they read the env var once)."""
    old = os.environ.get("BIGTABLE_EMULATOR_HOST")
    os.environ["BIGTABLE_EMULATOR_HOST"] = host
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("BIGTABLE_EMULATOR_HOST", None)
        else:
            os.environ["BIGTABLE_EMULATOR_HOST"] = old


@dataclass
class BtTable:
    """One table seen through both clients."""

    table_id: str
    classic: object  # google.cloud.bigtable.table.Table
    data: object  # google.cloud.bigtable.data.Table

    @property
    def name(self) -> str:
        return self.classic.name


# ---- reading helpers -------------------------------------------------------------


def cells(row) -> list[tuple]:
    """A new-client Row as (family, qualifier, timestamp_micros, value), in server order."""
    return [(c.family, c.qualifier, c.timestamp_micros, c.value) for c in row.cells]


def by_family(row, labels: bool = False) -> dict:
    """{family: [(qualifier, ts, value[, labels]), ...]} keeping server order per family.

    Bigtable orders qualifiers (bytewise) and timestamps (newest first) inside a family;
    the order of families within a row is not something the suite relies on.
    """
    out: dict = {}
    for c in row.cells:
        item = (c.qualifier, c.timestamp_micros, c.value)
        if labels:
            item += (tuple(c.labels),)
        out.setdefault(c.family, []).append(item)
    return out


def read_all(bt: BtTable, query: ReadRowsQuery | None = None) -> list:
    return bt.data.read_rows(query or ReadRowsQuery())


def keys(rows) -> list[bytes]:
    return [r.row_key for r in rows]


def now_ms_micros() -> int:
    """The current time in microseconds, truncated to the millisecond."""
    t = time.time_ns() // 1000
    return t - t % MS


def raw_read_rows(gapic, table_name: str, timeout: float = 60, **request) -> list:
    """ReadRows through the raw GAPIC client, merging chunks ourselves.

    Needed for requests the high-level clients cannot express (e.g. `reversed`, whose
    descending keys the new client's merger rejects). Returns
    [(row_key, [(family, qualifier, ts, value, labels), ...]), ...] in stream order.
    """
    stream = gapic.read_rows(request={"table_name": table_name, **request}, timeout=timeout)
    rows: list = []
    key = None
    row_cells: list = []
    family = qualifier = None
    parts: list | None = None
    ts = 0
    labels: list = []
    for resp in stream:
        for c in resp._pb.chunks:
            if c.reset_row:
                key, row_cells, family, qualifier, parts = None, [], None, None, None
                continue
            if c.row_key:
                assert key is None or c.row_key == key, "row key changed inside a row"
                key = c.row_key
            assert key is not None, "chunk without a row key"
            if c.HasField("family_name"):
                family = c.family_name.value
            if c.HasField("qualifier"):
                qualifier = c.qualifier.value
            if parts is None:
                ts, labels, parts = c.timestamp_micros, list(c.labels), []
            parts.append(c.value)
            if c.value_size == 0:
                row_cells.append((family, qualifier, ts, b"".join(parts), labels))
                parts = None
            if c.commit_row:
                assert parts is None, "row committed in the middle of a split cell"
                rows.append((key, row_cells))
                key, row_cells, family, qualifier = None, [], None, None
    assert key is None, "stream ended inside a row"
    return rows


def int64(value: int) -> bytes:
    """Bigtable's 8-byte big-endian signed encoding (increments, aggregates)."""
    return value.to_bytes(8, "big", signed=True)


def from_int64(raw: bytes) -> int:
    assert len(raw) == 8, f"expected an 8-byte int64, got {len(raw)} bytes: {raw!r}"
    return int.from_bytes(raw, "big", signed=True)


# ---- Timestream (boto3) ------------------------------------------------------------

# Never read the user's AWS setup: these win over ~/.aws and any AWS_* already exported.
_AWS_ENV = {
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
_AWS_ENV_DROP = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_TIMESTREAM_WRITE",
    "AWS_ENDPOINT_URL_TIMESTREAM_QUERY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_ENABLE_ENDPOINT_DISCOVERY",
)


@contextlib.contextmanager
def isolated_aws_env():
    """AWS_* environment that points botocore at nothing of the user's (restored on exit)."""
    saved = {k: os.environ.get(k) for k in (*_AWS_ENV, *_AWS_ENV_DROP)}
    os.environ.update(_AWS_ENV)
    for k in _AWS_ENV_DROP:
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def ts_write_client(endpoint: str, validate: bool = True, region: str = "us-east-1", **kw):
    """A boto3 `timestream-write` client for `endpoint` with fixed fake credentials.

    Retries are off so an error reaches the test as the server sent it. `validate=False`
    turns off botocore's client-side checks (required members, `min` constraints) so that
    requests AWS would refuse server-side can be sent at all (e.g. an empty `Records`).
    Call it inside `isolated_aws_env()`.
    """
    return _ts_client("timestream-write", endpoint, validate, region, **kw)


def ts_query_client(endpoint: str, validate: bool = True, region: str = "us-east-1", **kw):
    """A boto3 `timestream-query` client for `endpoint`, like `ts_write_client`."""
    return _ts_client("timestream-query", endpoint, validate, region, **kw)


def _ts_client(
    service: str,
    endpoint: str,
    validate: bool,
    region: str,
    key: tuple[str, str] = ("x", "x"),
    verify: str | bool | None = None,
):
    """`key` is (access key id, secret access key); `verify` a CA bundle for https."""
    import boto3  # imported here so the Bigtable-only tests do not need it
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        region_name=region,
    )
    return session.client(
        service,
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        verify=verify,
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=10,
            read_timeout=60,
            parameter_validation=validate,
        ),
    )


def ts_list_all(client, op: str, key: str, page_size: int | None = None, **kwargs) -> list:
    """Every item of ListDatabases/ListTables, following NextToken (boto3 has no paginator)."""
    items: list = []
    token = None
    for _ in range(10_000):
        args = dict(kwargs)
        if page_size is not None:
            args["MaxResults"] = page_size
        if token is not None:
            args["NextToken"] = token
        resp = getattr(client, op)(**args)
        page = resp.get(key, [])
        if page_size is not None:
            assert len(page) <= page_size, f"{op} returned {len(page)} > MaxResults={page_size}"
        items.extend(page)
        token = resp.get("NextToken")
        if not token:
            return items
    raise AssertionError(f"{op} pagination did not terminate")


def ts_query_all(client, sql: str) -> list[list[str | None]]:
    """Every row of a Timestream Query, following NextToken: each row's scalar values."""
    rows: list[list[str | None]] = []
    token = None
    for _ in range(10_000):
        args = {"QueryString": sql}
        if token:
            args["NextToken"] = token
        page = client.query(**args)
        rows += [[d.get("ScalarValue") for d in r["Data"]] for r in page["Rows"]]
        token = page.get("NextToken")
        if not token:
            return rows
    raise AssertionError("Query pagination did not terminate")


def _ts_name(nodeid: str) -> str:
    """A unique, valid Timestream name ([a-zA-Z0-9_.-], 3..256) that says which test made it."""
    name = nodeid.rsplit("::", 1)[-1]
    stem = re.sub(r"[^a-zA-Z0-9_.-]+", "_", name).strip("_")[:60] or "t"
    return f"{stem}_{uuid.uuid4().hex[:8]}"


@dataclass
class TsTable:
    """One Timestream table made by the `ts` fixture; `write` is WriteRecords on it."""

    client: object
    db: str
    name: str
    created: dict = field(default_factory=dict)  # CreateTable's `Table`

    def write(self, records, common=None, client=None):
        args = {"DatabaseName": self.db, "TableName": self.name, "Records": records}
        if common is not None:
            args["CommonAttributes"] = common
        return (client or self.client).write_records(**args)

    def describe(self) -> dict:
        return self.client.describe_table(DatabaseName=self.db, TableName=self.name)["Table"]


class TsFactory:
    """Makes uniquely named databases/tables through `client`; `cleanup` deletes them all."""

    def __init__(self, client, nodeid: str):
        self.client = client
        self.nodeid = nodeid
        self.databases: list[str] = []

    def name(self) -> str:
        return _ts_name(self.nodeid)

    def database(self, name: str | None = None) -> str:
        name = name or self.name()
        self.client.create_database(DatabaseName=name)
        self.databases.append(name)
        return name

    def track(self, db: str) -> None:
        """Delete `db` (made some other way) at teardown too."""
        self.databases.append(db)

    def table(
        self,
        db: str | None = None,
        name: str | None = None,
        memory_hours: int | None = None,
        magnetic_days: int | None = None,
        magnetic_writes: bool | None = None,
    ) -> TsTable:
        """CreateTable; retention given only if either period is, magnetic writes only if set."""
        db = db or self.database()
        name = name or self.name()
        args: dict = {"DatabaseName": db, "TableName": name}
        if memory_hours is not None or magnetic_days is not None:
            args["RetentionProperties"] = {
                "MemoryStoreRetentionPeriodInHours": memory_hours or 6,
                "MagneticStoreRetentionPeriodInDays": magnetic_days or 73000,
            }
        if magnetic_writes is not None:
            args["MagneticStoreWriteProperties"] = {"EnableMagneticStoreWrites": magnetic_writes}
        created = self.client.create_table(**args)["Table"]
        return TsTable(client=self.client, db=db, name=name, created=created)

    def cleanup(self) -> None:
        errors = self.client.exceptions
        for db in reversed(self.databases):
            try:
                for t in ts_list_all(self.client, "list_tables", "Tables", DatabaseName=db):
                    try:
                        self.client.delete_table(DatabaseName=db, TableName=t["TableName"])
                    except errors.ResourceNotFoundException:
                        pass
                self.client.delete_database(DatabaseName=db)
            except errors.ResourceNotFoundException:
                pass
