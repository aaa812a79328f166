"""Bounded queries: no SQL text can take the server down.

A server of its own runs with a small memory budget (`--query-memory-mib 64`: 32 MiB per
query) and a short time limit (`--query-time-limit-secs 4`). Queries built to exhaust
memory or time are refused or stopped within those limits, with the exception the
service would send (ValidationException naming the limit; RESOURCE_EXHAUSTED or
RESOURCE_EXHAUSTED through ExecuteQuery, which Google's clients do not retry), while another client's queries keep being
answered; a query whose client goes away stops at once; the server's peak resident memory
stays far below what the queries asked for.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest
from botocore.exceptions import ClientError
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import BigtableDataClient

from bt_helpers import INSTANCE, PROJECT, AlmanacServer, emulator_env, isolated_aws_env, ts_query_client
from console_helpers import scrape, wait_until

TIME_LIMIT_S = 4
MEMORY_MIB = 64

# 10^12 rows, streamed: never ends by itself, and holds no memory.
ENDLESS_COUNT = (
    "SELECT count(*) FROM unnest(sequence(1, 10000)) AS a(x) "
    "CROSS JOIN unnest(sequence(1, 10000)) AS b(y) CROSS JOIN unnest(sequence(1, 10000)) AS c(z)"
)
# Rows without end, one at a time: the recursion's work table holds one row.
ENDLESS_ROWS = "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT n FROM t"
ENDLESS_RECURSION = (
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"
)
# 10^8 values gathered into one list: 800 MB asked of a 32 MiB share.
HUGE_LIST = (
    "SELECT cardinality(array_agg(x * 10000 + y)) FROM unnest(sequence(1, 10000)) AS a(x) "
    "CROSS JOIN unnest(sequence(1, 10000)) AS b(y)"
)


@pytest.fixture(scope="module")
def bounded(almanac_bin, tmp_path_factory):
    base = tmp_path_factory.mktemp("bounded")
    srv = AlmanacServer(
        almanac_bin,
        data_dir=base / "data",
        log_dir=base,
        extra_args=(
            "--query-time-limit-secs", str(TIME_LIMIT_S),
            "--query-memory-mib", str(MEMORY_MIB),
        ),
    )  # fmt: skip
    srv.start()
    with isolated_aws_env():
        srv.query = ts_query_client(srv.ts_endpoint)
        yield srv
        srv.query.close()
    if srv.running:
        srv.stop()


def error_of(call) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call()
    err = info.value.response["Error"]
    return err["Code"], err["Message"]


def peak_rss_mib(srv) -> float:
    with open(f"/proc/{srv.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def running(srv) -> float:
    return scrape(srv).value("almanac_queries_running")


def stopped(srv, reason: str) -> float:
    return scrape(srv).value("almanac_queries_stopped_total", reason=reason)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM unnest(sequence(1, 100000000))",
        "SELECT count(*) FROM unnest(sequence(1, 1000000000))",
        "SELECT length(repeat('x', 1000000000))",
    ],
)
def test_functions_that_would_allocate_without_bound_are_refused(bounded, sql):
    started = time.monotonic()
    code, message = error_of(lambda: bounded.query.query(QueryString=sql))
    assert code == "ValidationException" or code == "QueryExecutionException", (code, message)
    assert "10000" in message or "67108864" in message, message
    assert time.monotonic() - started < TIME_LIMIT_S, "refused only at the time limit"


@pytest.mark.parametrize("sql", [ENDLESS_COUNT, ENDLESS_RECURSION])
def test_queries_stop_at_the_time_limit_while_others_are_answered(bounded, sql):
    before = stopped(bounded, "time_limit")
    result: dict = {}

    def run():
        started = time.monotonic()
        result["error"] = error_of(lambda: bounded.query.query(QueryString=sql))
        result["took"] = time.monotonic() - started

    worker = threading.Thread(target=run)
    worker.start()
    wait_until("the query running", lambda: running(bounded) >= 1, timeout=10)
    # Another client meanwhile: answered, not queued behind the runaway query.
    with isolated_aws_env():
        other = ts_query_client(bounded.ts_endpoint)
        try:
            for _ in range(3):
                t0 = time.monotonic()
                rows = other.query(QueryString="SELECT 1 AS one")["Rows"]
                assert rows == [{"Data": [{"ScalarValue": "1"}]}]
                assert time.monotonic() - t0 < TIME_LIMIT_S / 2, "starved by the runaway query"
        finally:
            other.close()
    worker.join(timeout=TIME_LIMIT_S * 5)
    assert not worker.is_alive(), "the query outlived its time limit many times over"
    code, message = result["error"]
    assert code == "ValidationException", (code, message)
    assert f"time limit of {TIME_LIMIT_S} s" in message, message
    assert TIME_LIMIT_S - 0.5 <= result["took"] < TIME_LIMIT_S * 3, result["took"]
    assert stopped(bounded, "time_limit") == before + 1
    wait_until("no query running", lambda: running(bounded) == 0, timeout=10)


def test_a_query_past_its_memory_share_fails_naming_the_limit(bounded):
    before = stopped(bounded, "memory")
    code, message = error_of(lambda: bounded.query.query(QueryString=HUGE_LIST))
    assert code == "ValidationException", (code, message)
    assert "32.0 MB" in message and "--query-memory-mib" in message, message
    assert stopped(bounded, "memory") >= before + 1
    wait_until(
        "its memory returned",
        lambda: scrape(bounded).value("almanac_query_memory_bytes") == 0,
        timeout=10,
    )
    # The queries above asked for gigabytes; the server never held anything like it.
    assert peak_rss_mib(bounded) < 1024, f"peak RSS {peak_rss_mib(bounded):.0f} MiB"


def test_a_query_api_client_that_hangs_up_stops_its_query(bounded):
    """The Query API runs a query to the end before answering: a client that closes its
    connection meanwhile leaves nothing running."""
    before = stopped(bounded, "dropped")
    body = json.dumps({"QueryString": ENDLESS_COUNT}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", bounded.ts_port, timeout=30)
    conn.request(
        "POST",
        "/",
        body=body,
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "Timestream_20181101.Query",
        },
    )
    wait_until("the query running", lambda: running(bounded) == 1, timeout=10)
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    hung_up = time.monotonic()
    wait_until("the query stopped", lambda: running(bounded) == 0, timeout=TIME_LIMIT_S * 3)
    assert time.monotonic() - hung_up < TIME_LIMIT_S - 1, "stopped only by the time limit"
    assert stopped(bounded, "dropped") == before + 1


def test_an_execute_query_client_that_goes_away_stops_its_query(bounded):
    before = stopped(bounded, "dropped")
    with emulator_env(bounded.host):
        client = BigtableDataClient(project=PROJECT)
    rows = client.execute_query(ENDLESS_ROWS, INSTANCE)
    first = next(iter(rows))
    assert first["n"] == 1
    assert running(bounded) == 1
    client.close()
    closed = time.monotonic()
    wait_until("the query stopped", lambda: running(bounded) == 0, timeout=TIME_LIMIT_S * 3)
    assert time.monotonic() - closed < TIME_LIMIT_S - 1, "stopped only by the time limit"
    assert stopped(bounded, "dropped") == before + 1


def test_execute_query_reports_the_limits_with_grpc_codes(bounded):
    with emulator_env(bounded.host):
        client = BigtableDataClient(project=PROJECT)
    try:
        instance = INSTANCE
        with pytest.raises(gexc.GoogleAPICallError) as info:
            list(client.execute_query(HUGE_LIST, instance))
        assert info.value.grpc_status_code.name == "RESOURCE_EXHAUSTED", info.value
        assert "32.0 MB" in str(info.value)
        with pytest.raises(gexc.GoogleAPICallError) as info:
            list(client.execute_query(ENDLESS_RECURSION, instance))
        assert info.value.grpc_status_code.name == "RESOURCE_EXHAUSTED", info.value
        assert f"time limit of {TIME_LIMIT_S} s" in str(info.value)
    finally:
        client.close()
