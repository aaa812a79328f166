"""The schema advisor: `GET /api/lint` and `almanac lint` (docs/console.md).

Each anti-pattern gets a table written through Google's Python client (Bigtable) or boto3
WriteRecords (Timestream) that is clearly past any sensible threshold (thousands of rows,
not dozens), and the rule must fire with evidence. Well-designed tables must give no
finding at all: a false alarm is a failure too.

`almanac lint TABLE` names a Bigtable table of the default instance
(projects/almanac/instances/almanac), so the CLI's Bigtable tables are made there.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
import subprocess
import uuid

import pytest
from google.api_core import exceptions as gexc
from google.cloud import bigtable
from google.cloud.bigtable import column_family as cf
from google.cloud.bigtable.data import BigtableDataClient, SetCell

from bt_helpers import emulator_env
from console_helpers import (
    BT_RULES,
    TS_RULES,
    api,
    bulk_write,
    clean_device_rows,
    finding,
    lint_bt,
    lint_ts,
    timestamp_first_rows,
    write_ts,
)
from test_timestream_query import multi, now_ms, rec

DEFAULT_PROJECT = DEFAULT_INSTANCE = "almanac"
DEFAULT_INSTANCE_NAME = f"projects/{DEFAULT_PROJECT}/instances/{DEFAULT_INSTANCE}"
HEADER = re.compile(r"^(warning|info) \[([a-z-]+)\]", re.M)


# ---- helpers -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def default_instance(server):
    """(classic instance, data client) of the CLI's default instance."""
    with emulator_env(server.host):
        client = bigtable.Client(project=DEFAULT_PROJECT, admin=True)
        client._veneer_data_client
        data = BigtableDataClient(project=DEFAULT_PROJECT)
    yield client.instance(DEFAULT_INSTANCE), data
    data.close()


def cli(almanac_bin, server, *args) -> subprocess.CompletedProcess:
    r = subprocess.run(
        [almanac_bin, "lint", "--console-addr", server.console_host, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"almanac lint {args} exited {r.returncode}: {r.stderr}"
    return r


def cli_blocks(stdout: str) -> dict[str, str]:
    """rule -> its block of `almanac lint` text output (header line to the next header)."""
    heads = list(HEADER.finditer(stdout))
    return {
        h.group(2): stdout[h.start() : heads[i + 1].start() if i + 1 < len(heads) else None]
        for i, h in enumerate(heads)
    }


def rules_of(report: dict) -> list[str]:
    return [f["rule"] for f in report["findings"]]


def assert_clean(report: dict, rules) -> None:
    assert set(rules) <= set(report["checked"]), report["checked"]
    assert report["findings"] == [], f"false alarm on a well-designed table: {report['findings']}"


def versions(family: str, qualifier: bytes, stamps_ms) -> list[SetCell]:
    """One cell per timestamp (milliseconds) in one column: that many versions."""
    return [SetCell(family, qualifier, str(ms).encode(), ms * 1000) for ms in stamps_ms]


def minutes_ago(n: float) -> int:
    return now_ms() - int(n * 60_000)


# ---- Bigtable anti-patterns ------------------------------------------------------------


def test_timestamp_first_key_api_and_cli(server, almanac_bin, make_table, default_instance):
    inst, data = default_instance
    bt = make_table(families={"cf": None}, inst=inst, dclient=data)
    bulk_write(bt, timestamp_first_rows(2000))

    f = finding(lint_bt(server, bt.table_id, instance=DEFAULT_INSTANCE_NAME), "timestamp-first-key")
    assert re.search(r"\d{10}", f["evidence"]) or "timestamp" in f["evidence"].lower(), f

    text = cli(almanac_bin, server, bt.table_id).stdout
    block = cli_blocks(text).get("timestamp-first-key")
    assert block, f"no `warning [timestamp-first-key]` block in:\n{text}"
    assert len([ln for ln in block.splitlines() if ln.strip()]) >= 3, block  # + evidence, fix
    assert re.search(r"\d", block), block

    as_json = json.loads(cli(almanac_bin, server, "--json", bt.table_id).stdout)
    assert set(as_json) >= {"table", "checked", "findings"}, as_json
    assert "timestamp-first-key" in rules_of(as_json), as_json


def test_sequential_key(server, make_table):
    """Increasing numeric ids written in order, the newest one taking most writes."""
    bt = make_table(families={"cf": None})
    base = now_ms() - 10_000
    rows = [
        (f"{1_000_000 + i}#order".encode(), [SetCell("cf", b"q", b"v", (base + i) * 1000)])
        for i in range(2000)
    ]
    bulk_write(bt, rows, batch=100)
    newest = rows[-1][0]
    bulk_write(bt, [(newest, [SetCell("cf", b"q", b"v", (base + 1999) * 1000)])] * 3000)
    finding(lint_bt(server, bt.table_id), "sequential-key")


def test_write_hotspot(server, make_table):
    """2,000 keys spread over 13 tablets, then 3,000 writes to one of them (60%)."""
    bt = make_table(families={"cf": None}, splits=[c.encode() for c in "cegikmoqsuwy"])
    spread = [
        (f"{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}#item{i:04d}".encode(), b"v")
        for i in range(2000)
    ]
    random.Random(3).shuffle(spread)
    bulk_write(bt, spread)
    bulk_write(bt, [(b"mm#hot", b"v")] * 3000)
    f = finding(lint_bt(server, bt.table_id), "write-hotspot")
    assert "%" in f["evidence"] or re.search(r"\d{3,}", f["evidence"]), f


def test_hashed_key(server, make_table):
    bt = make_table(families={"cf": None})
    bulk_write(
        bt, [(hashlib.md5(f"user{i}".encode()).hexdigest().encode() + b"#profile", b"v")
             for i in range(2000)]
    )  # fmt: skip
    finding(lint_bt(server, bt.table_id), "hashed-key")


def test_raw_bytes_key(server, make_table):
    rng = random.Random(5)
    bt = make_table(families={"cf": None})
    bulk_write(bt, [(rng.randbytes(8) + b"\x00" + i.to_bytes(2, "big"), b"v") for i in range(2000)])
    finding(lint_bt(server, bt.table_id), "raw-bytes-key")


def test_long_key(server, make_table):
    middle = "/".join(f"segment-{j:03d}" for j in range(110))  # 1,319 bytes
    bt = make_table(families={"cf": None})
    bulk_write(bt, [(f"tenant{i % 7}/{middle}/{i:05d}".encode(), b"v") for i in range(500)])
    finding(lint_bt(server, bt.table_id), "long-key")


def test_too_many_families(server, make_table):
    try:
        bt = make_table(families={f"f{i:03d}": None for i in range(110)})
    except (gexc.InvalidArgument, gexc.FailedPrecondition, gexc.ResourceExhausted) as e:
        pytest.skip(f"the server refuses a table of 110 families: {e}")
    bulk_write(bt, [(f"row{i:03d}".encode(), [SetCell(f"f{i:03d}", b"q", b"v", 1000)])
                    for i in range(110)])  # fmt: skip
    f = finding(lint_bt(server, bt.table_id), "too-many-families")
    assert "110" in f["evidence"], f


def test_frequently_updated_row(server, make_table):
    """Three counters of 1,500 versions each (a 30-day max-age family)."""
    bt = make_table(families={"c": cf.MaxAgeGCRule(dt.timedelta(days=30))})
    now = now_ms()
    rows = [(f"counter#{r}".encode(), versions("c", b"hits", [now - v for v in range(1500)]))
            for r in range(3)]  # fmt: skip
    rows += [(f"other#{i:02d}".encode(), versions("c", b"hits", [now])) for i in range(20)]
    bulk_write(bt, rows, batch=1)
    f = finding(lint_bt(server, bt.table_id), "frequently-updated-row")
    assert "counter" in f["evidence"] or "hits" in f["evidence"], f


def test_unbounded_versions(server, make_table):
    """A family with no GC rule, 20 rows of 150 versions of one column."""
    bt = make_table(families={"hist": None})
    rows = [(f"sensor#{r:02d}".encode(), versions("hist", b"t", range(1, 151))) for r in range(20)]
    bulk_write(bt, rows, batch=5)
    f = finding(lint_bt(server, bt.table_id), "unbounded-versions")
    assert "hist" in f["evidence"] or "hist" in f["title"], f


# ---- a well-designed Bigtable table ----------------------------------------------------


def test_clean_bigtable_table_has_no_findings(server, almanac_bin, make_table, default_instance):
    inst, data = default_instance
    bt = make_table(families={"m": cf.MaxVersionsGCRule(1)}, inst=inst, dclient=data)
    bulk_write(bt, clean_device_rows(50, 40), family="m")
    assert_clean(lint_bt(server, bt.table_id, instance=DEFAULT_INSTANCE_NAME), BT_RULES)
    out = cli(almanac_bin, server, bt.table_id).stdout
    assert not HEADER.search(out), f"`almanac lint` reported findings:\n{out}"
    assert_clean(json.loads(cli(almanac_bin, server, "--json", bt.table_id).stdout), BT_RULES)


# ---- time-series anti-patterns ---------------------------------------------------------


def test_id_as_dimension_api_and_cli(server, almanac_bin, ts):
    t = ts.table()
    write_ts(t, [
        rec("latency_ms", f"{i % 97}.5", t=minutes_ago(i / 60), host=f"h{i % 10}",
            request_id=str(uuid.uuid4()))
        for i in range(2000)
    ])  # fmt: skip
    f = finding(lint_ts(server, t.db, t.name), "id-as-dimension")
    assert "request_id" in f["evidence"] or "request_id" in f["title"], f

    text = cli(almanac_bin, server, f"{t.db}.{t.name}").stdout
    assert "id-as-dimension" in cli_blocks(text), f"no [id-as-dimension] block in:\n{text}"


def test_changing_dimension(server, ts):
    """os_version of each host is 5.10 for its first 100 samples and 6.1 after."""
    t = ts.table()
    write_ts(t, [
        rec("cpu", "12.5", t=minutes_ago((200 - s) / 6), host=f"h{h}",
            os_version="5.10" if s < 100 else "6.1")
        for h in range(10)
        for s in range(200)
    ])  # fmt: skip
    f = finding(lint_ts(server, t.db, t.name), "changing-dimension")
    assert "os_version" in f["evidence"] or "os_version" in f["title"], f


def test_sparse_multi_measure(server, ts):
    """20 measures, each record setting 2 of them (10%)."""
    t = ts.table()
    records = []
    for s in range(100):
        for h in range(10):
            k = 2 * ((s + h) % 10)
            records.append(multi("metrics", [(f"m{k:02d}", "1.5", "DOUBLE"),
                                             (f"m{k + 1:02d}", "2.5", "DOUBLE")],
                                 t=minutes_ago(s / 6), host=f"h{h}"))  # fmt: skip
    write_ts(t, records)
    finding(lint_ts(server, t.db, t.name), "sparse-multi-measure")


def test_single_measure_records(server, ts):
    """Five single-measure records per host and instant, 2,000 in all."""
    t = ts.table()
    write_ts(t, [
        rec(m, "1.5", t=minutes_ago(s / 6), host=f"h{h}")
        for s in range(40)
        for h in range(10)
        for m in ("cpu", "mem", "disk", "net", "load")
    ])  # fmt: skip
    finding(lint_ts(server, t.db, t.name), "single-measure-records")


# ---- a well-designed time-series table -------------------------------------------------


def test_clean_timeseries_table_has_no_findings(server, almanac_bin, ts):
    t = ts.table()
    regions = ("us-east-1", "us-west-2", "eu-west-1", "ap-south-1")
    write_ts(t, [
        multi("metrics", [("cpu", f"{(s * h) % 100}.5", "DOUBLE"),
                          ("mem", str(1000 + s), "BIGINT"),
                          ("disk", f"{s % 50}.25", "DOUBLE")],
              t=minutes_ago(s / 6), host=f"host-{h:02d}", region=regions[h % 4])
        for s in range(100)
        for h in range(20)
    ])  # fmt: skip
    assert_clean(lint_ts(server, t.db, t.name), TS_RULES)
    out = cli(almanac_bin, server, f"{t.db}.{t.name}").stdout
    assert not HEADER.search(out), f"`almanac lint` reported findings:\n{out}"


# ---- errors --------------------------------------------------------------------------


def test_lint_errors(server, ts):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    api(server, "/api/lint", {"instance": DEFAULT_INSTANCE_NAME, "table": missing}, expect=404)
    t = ts.table()
    api(server, "/api/lint", {"database": t.db, "ts_table": missing}, expect=404)
    api(server, "/api/lint", {"database": missing, "ts_table": missing}, expect=404)
    api(server, "/api/lint", {}, expect=400)
