"""Shared helpers for the client-conformance suite: the server process, tables, readers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
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


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AlmanacServer:
    """One `almanac serve` process on 127.0.0.1, its stderr captured to a file."""

    READY_TIMEOUT_S = 60
    STOP_TIMEOUT_S = 60

    def __init__(self, binary: str, data_dir: Path, log_dir: Path):
        self.binary = binary
        self.data_dir = Path(data_dir)
        self.log_dir = Path(log_dir)
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self._starts = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return self.log_path.read_text(errors="replace")

    def start(self, port: int | None = None) -> None:
        assert not self.running, "server already running"
        if shutil.which(self.binary) is None:
            pytest.fail(f"almanac binary not executable: {self.binary}", pytrace=False)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self._starts += 1
        self.log_path = self.log_dir / f"almanac-{self.port}-{self._starts}.log"
        log = open(self.log_path, "wb")
        cmd = [self.binary, "serve", "--addr", self.host, "--data-dir", str(self.data_dir)]
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        finally:
            log.close()
        needle = f"listening on {self.host}"
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if needle in self.log_text():
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
            f"almanac did not print {needle!r} within {self.READY_TIMEOUT_S}s\n"
            f"--- output ---\n{self.log_text()}",
            pytrace=False,
        )

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
        self.start(self.port if same_port else None)

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
