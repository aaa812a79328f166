"""The query limits under the queries that used to take a server down, on a release
server with the default limits (2 GiB for all queries, 1 GiB each, 60 s): how long each
takes to be refused or stopped, the latency of another client's small query meanwhile,
and the server's peak resident memory. Run by scripts/bench-trust."""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from botocore.exceptions import ClientError

from bt_helpers import free_port, isolated_aws_env, ts_query_client

BIN = os.environ["ALMANAC_BIN"]
QUERIES = [
    ("unnest(sequence(1, 10^8))", "SELECT * FROM unnest(sequence(1, 100000000))"),
    ("count over sequence(1, 10^9)", "SELECT count(*) FROM unnest(sequence(1, 1000000000))"),
    ("endless recursive CTE", "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"),
    ("10^12-row cross join", "SELECT count(*) FROM unnest(sequence(1, 10000)) AS a(x) CROSS JOIN unnest(sequence(1, 10000)) AS b(y) CROSS JOIN unnest(sequence(1, 10000)) AS c(z)"),
    ("10^8 values in one array_agg", "SELECT cardinality(array_agg(x * 10000 + y)) FROM unnest(sequence(1, 10000)) AS a(x) CROSS JOIN unnest(sequence(1, 10000)) AS b(y)"),
]  # fmt: skip


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-limits-"))
    ts = f"127.0.0.1:{free_port()}"
    args = [BIN, "serve", "--data-dir", str(base / "data"), "--console-addr", "off",
            "--addr", f"127.0.0.1:{free_port()}", "--timestream-addr", ts]  # fmt: skip
    log = open(base / "log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        while b"timestream listening" not in (base / "log").read_bytes():
            assert proc.poll() is None, (base / "log").read_text()
            time.sleep(0.05)
        with isolated_aws_env():
            runaway = ts_query_client(f"http://{ts}")
            other = ts_query_client(f"http://{ts}")
            idle = []
            for _ in range(20):
                t0 = time.monotonic()
                other.query(QueryString="SELECT 1")
                idle.append((time.monotonic() - t0) * 1000)
            print(f"limits: another client's SELECT 1 on an idle server: median {statistics.median(idle):.1f} ms")
            for name, sql in QUERIES:
                outcome: dict = {}

                def run() -> None:
                    t0 = time.monotonic()
                    try:
                        runaway.query(QueryString=sql)
                        outcome["how"] = "answered"
                    except ClientError as e:
                        outcome["how"] = e.response["Error"]["Code"]
                    outcome["secs"] = time.monotonic() - t0

                worker = threading.Thread(target=run)
                worker.start()
                busy = []
                while worker.is_alive():
                    t0 = time.monotonic()
                    other.query(QueryString="SELECT 1")
                    busy.append((time.monotonic() - t0) * 1000)
                    time.sleep(0.05)
                worker.join()
                during = f"median {statistics.median(busy):.1f} ms, max {max(busy):.1f} ms" if busy else "none sent"
                print(f"limits: {name:32} {outcome['how']} after {outcome['secs']:.2f} s; "
                      f"another client's SELECT 1 meanwhile: {during}; server peak RSS {peak_rss_mib(proc.pid):.0f} MiB", flush=True)  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


if __name__ == "__main__":
    main()
