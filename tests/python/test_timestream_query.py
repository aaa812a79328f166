"""The Timestream Query API (`timestream-query`, AWS JSON 1.0) through boto3.

Data goes in through the write API (the `ts` fixture of conftest), comes back through
`query`: Timestream's flat model (`measure_value::<type>`, one column per multi-measure
attribute), its SQL spellings (`ago(15m)`, `bin(time, 1m)`), the wire formats of
values (`YYYY-MM-DD HH:MM:SS.nnnnnnnnn`, doubles as `1.0`), `NullValue` for absent
values, pagination (`MaxRows`, the ~1 MB page cap, `NextToken`, the boto3 paginator),
`CancelQuery`, and the modeled exceptions (positions in syntax errors, missing tables
named). Record times come from the current clock so that they fall in the memory store.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time

import pytest
from botocore.exceptions import ClientError

MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS


# ---- helpers ---------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def rec(measure, value, vtype="DOUBLE", t=None, **dims) -> dict:
    """A single-measure record; keyword arguments are dimensions (default host=h1)."""
    return {
        "Dimensions": [{"Name": k, "Value": v} for k, v in (dims or {"host": "h1"}).items()],
        "MeasureName": measure,
        "MeasureValue": value,
        "MeasureValueType": vtype,
        "Time": str(now_ms() if t is None else t),
    }


def multi(measure, values, t=None, **dims) -> dict:
    """A MULTI record; `values` is [(name, value, type), ...]."""
    return {
        "Dimensions": [{"Name": k, "Value": v} for k, v in (dims or {"host": "h1"}).items()],
        "MeasureName": measure,
        "MeasureValueType": "MULTI",
        "MeasureValues": [{"Name": n, "Value": v, "Type": ty} for n, v, ty in values],
        "Time": str(now_ms() if t is None else t),
    }


def write_all(table, records) -> None:
    for i in range(0, len(records), 100):
        table.write(records[i : i + 100])


def ts_text(ms: int) -> str:
    """Timestream's TIMESTAMP text of epoch milliseconds."""
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}000000"


def name(table) -> str:
    return f'"{table.db}"."{table.name}"'


def cell(datum: dict):
    """A datum as a Python value: the scalar text, None for NullValue."""
    if datum.get("NullValue"):
        return None
    assert set(datum) == {"ScalarValue"}, datum
    return datum["ScalarValue"]


def rows_of(resp) -> list[list]:
    return [[cell(d) for d in r["Data"]] for r in resp["Rows"]]


def columns_of(resp) -> list[tuple[str, str]]:
    return [(c["Name"], c["Type"]["ScalarType"]) for c in resp["ColumnInfo"]]


def error_of(excinfo, code: str) -> str:
    err = excinfo.value.response
    assert err["Error"]["Code"] == code, err["Error"]
    status = err["ResponseMetadata"]["HTTPStatusCode"]
    assert 400 <= status < 500, f"HTTP {status} for {err['Error']}"
    assert err["Error"]["Message"], err
    return err["Error"]["Message"]


def all_pages(client, query: str, **kwargs) -> list[dict]:
    """Every response of a query, following NextToken by hand."""
    pages = [client.query(QueryString=query, **kwargs)]
    while pages[-1].get("NextToken"):
        assert len(pages) < 10_000, "pagination did not terminate"
        pages.append(client.query(QueryString=query, NextToken=pages[-1]["NextToken"], **kwargs))
    return pages


# ---- SELECT ------------------------------------------------------------------------


def test_select_single_measure_double(ts, ts_query):
    t = ts.table()
    base = now_ms() - 10 * 1000
    write_all(
        t,
        [rec("cpu", v, t=base + i * 1000, host=h) for i, (h, v) in enumerate(
            [("h1", "1.5"), ("h2", "2"), ("h1", "0.25"), ("h2", "1e7")]
        )]
        + [rec("mem", "99", "BIGINT", t=base)],
    )
    resp = ts_query.query(
        QueryString=f"SELECT host, time, measure_value::double FROM {name(t)} "
        "WHERE measure_name = 'cpu' ORDER BY time"
    )
    assert columns_of(resp) == [
        ("host", "VARCHAR"),
        ("time", "TIMESTAMP"),
        ("measure_value::double", "DOUBLE"),
    ]
    assert rows_of(resp) == [
        ["h1", ts_text(base), "1.5"],
        ["h2", ts_text(base + 1000), "2.0"],
        ["h1", ts_text(base + 2000), "0.25"],
        ["h2", ts_text(base + 3000), "1.0E7"],
    ]
    assert re.fullmatch(r"[A-Za-z0-9]{1,64}", resp["QueryId"])
    assert "NextToken" not in resp
    assert resp["QueryStatus"]["ProgressPercentage"] == 100.0


def test_multi_measure_attributes_are_columns(ts, ts_query):
    t = ts.table()
    at = now_ms() - 5000
    write_all(
        t,
        [
            multi(
                "stats",
                [
                    ("temp", "21.5", "DOUBLE"),
                    ("count", "7", "BIGINT"),
                    ("ok", "true", "BOOLEAN"),
                    ("note", 'say "hi"', "VARCHAR"),
                ],
                t=at,
                host="h1",
            ),
            multi("stats", [("temp", "-3", "DOUBLE"), ("ok", "false", "BOOLEAN")], t=at, host="h2"),
        ],
    )
    resp = ts_query.query(
        QueryString=f"SELECT host, temp, count, ok, note FROM {name(t)} "
        "WHERE measure_name = 'stats' ORDER BY host"
    )
    assert columns_of(resp) == [
        ("host", "VARCHAR"),
        ("temp", "DOUBLE"),
        ("count", "BIGINT"),
        ("ok", "BOOLEAN"),
        ("note", "VARCHAR"),
    ]
    assert rows_of(resp) == [
        ["h1", "21.5", "7", "true", 'say "hi"'],
        ["h2", "-3.0", None, "false", None],
    ]


def test_absent_values_are_null(ts, ts_query):
    """SELECT *: single-measure rows have no attribute values, multi-measure rows no
    measure_value, and a dimension a record lacks is NULL."""
    t = ts.table()
    at = now_ms() - 5000
    write_all(
        t,
        [
            rec("cpu", "1", t=at, host="h1"),
            multi("stats", [("temp", "2", "DOUBLE")], t=at, host="h1", region="eu"),
        ],
    )
    resp = ts_query.query(QueryString=f"SELECT * FROM {name(t)} ORDER BY measure_name")
    cols = [c for c, _ in columns_of(resp)]
    assert set(cols) == {"host", "region", "measure_name", "time", "measure_value::double", "temp"}
    rows = [dict(zip(cols, r)) for r in rows_of(resp)]
    assert rows[0]["measure_name"] == "cpu"
    assert rows[0]["measure_value::double"] == "1.0"
    assert rows[0]["temp"] is None and rows[0]["region"] is None
    assert rows[1]["measure_name"] == "stats"
    assert rows[1]["measure_value::double"] is None
    assert rows[1]["temp"] == "2.0" and rows[1]["region"] == "eu"
    for r in resp["Rows"]:
        for d in r["Data"]:
            assert d == {"NullValue": True} or set(d) == {"ScalarValue"}, d


def test_where_on_dimension_measure_name_and_time_with_ago(ts, ts_query):
    t = ts.table()
    now = now_ms()
    write_all(
        t,
        [
            rec("cpu", "1", t=now - 2 * HOUR_MS, host="h1"),
            rec("cpu", "2", t=now - 10 * 1000, host="h1"),
            rec("cpu", "3", t=now - 10 * 1000, host="h2"),
            rec("mem", "4", t=now - 10 * 1000, host="h1"),
        ],
    )
    q = f"SELECT measure_value::double AS v FROM {name(t)} WHERE "
    assert rows_of(ts_query.query(QueryString=q + "host = 'h1' AND measure_name = 'cpu' ORDER BY v")) == [
        ["1.0"],
        ["2.0"],
    ]
    assert rows_of(ts_query.query(QueryString=q + "measure_name = 'cpu' AND time > ago(15m) ORDER BY v")) == [
        ["2.0"],
        ["3.0"],
    ]
    assert rows_of(ts_query.query(QueryString=q + "time BETWEEN ago(3h) AND ago(1h)")) == [["1.0"]]
    assert rows_of(ts_query.query(QueryString=q + "host = 'nobody'")) == []


def test_bin_group_by_with_avg_and_max(ts, ts_query):
    t = ts.table()
    base = (now_ms() // MINUTE_MS - 5) * MINUTE_MS
    records = [
        rec("cpu", str(k * 10 + j), t=base + k * MINUTE_MS + j * 10_000)
        for k in range(3)
        for j in range(3)
    ]
    write_all(t, records)
    resp = ts_query.query(
        QueryString=f"SELECT bin(time, 1m) AS minute, avg(measure_value::double) AS avg_v, "
        f"max(measure_value::double) AS max_v, count(*) AS n FROM {name(t)} "
        "WHERE measure_name = 'cpu' GROUP BY bin(time, 1m) ORDER BY minute"
    )
    assert columns_of(resp) == [
        ("minute", "TIMESTAMP"),
        ("avg_v", "DOUBLE"),
        ("max_v", "DOUBLE"),
        ("n", "BIGINT"),
    ]
    assert rows_of(resp) == [
        [ts_text(base + k * MINUTE_MS), f"{k * 10 + 1}.0", f"{k * 10 + 2}.0", "3"] for k in range(3)
    ]


def test_order_by_and_limit(ts, ts_query):
    t = ts.table()
    base = now_ms() - 60_000
    write_all(t, [rec("cpu", str(v), t=base + i * 1000) for i, v in enumerate([5, 3, 9, 1, 7])])
    desc = ts_query.query(
        QueryString=f"SELECT measure_value::double FROM {name(t)} ORDER BY measure_value::double DESC LIMIT 3"
    )
    assert rows_of(desc) == [["9.0"], ["7.0"], ["5.0"]]
    by_time = ts_query.query(QueryString=f"SELECT measure_value::double FROM {name(t)} ORDER BY time DESC")
    assert rows_of(by_time) == [["7.0"], ["1.0"], ["9.0"], ["3.0"], ["5.0"]]


def test_count_star(ts, ts_query):
    t = ts.table()
    base = now_ms() - 60_000
    write_all(t, [rec("cpu", "1", t=base + i) for i in range(42)] + [rec("mem", "1", t=base)])
    resp = ts_query.query(QueryString=f"SELECT COUNT(*) AS n FROM {name(t)} WHERE measure_name = 'cpu'")
    assert columns_of(resp) == [("n", "BIGINT")]
    assert rows_of(resp) == [["42"]]
    grouped = ts_query.query(
        QueryString=f"SELECT measure_name, COUNT(*) FROM {name(t)} GROUP BY measure_name ORDER BY measure_name"
    )
    assert rows_of(grouped) == [["cpu", "42"], ["mem", "1"]]


def test_column_types(ts, ts_query):
    t = ts.table()
    at = (now_ms() // 1000 - 30) * 1000
    write_all(
        t,
        [
            rec("b", "-12", "BIGINT", t=at),
            rec("s", "text", "VARCHAR", t=at),
            rec("f", "true", "BOOLEAN", t=at),
        ],
    )
    resp = ts_query.query(
        QueryString="SELECT measure_value::bigint AS b, measure_value::varchar AS s, "
        "measure_value::boolean AS f, time, CAST(time AS DATE) AS day, "
        "CAST(1 AS INTEGER) AS i, 0.5 AS d, time - time AS zero "
        f"FROM {name(t)} ORDER BY measure_name"
    )
    assert columns_of(resp) == [
        ("b", "BIGINT"),
        ("s", "VARCHAR"),
        ("f", "BOOLEAN"),
        ("time", "TIMESTAMP"),
        ("day", "DATE"),
        ("i", "INTEGER"),
        ("d", "DOUBLE"),
        ("zero", "INTERVAL_DAY_TO_SECOND"),
    ]
    day = dt.datetime.fromtimestamp(at / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d")
    common = [ts_text(at), day, "1", "0.5", "0 00:00:00.000000000"]
    assert rows_of(resp) == [
        ["-12", None, None, *common],
        [None, None, "true", *common],
        [None, "text", None, *common],
    ]


# ---- pagination -------------------------------------------------------------------


@pytest.fixture
def paged_table(ts):
    """250 single-measure records, one per millisecond on three hosts."""
    t = ts.table()
    base = now_ms() - 60_000
    write_all(t, [rec("cpu", str(i), "BIGINT", t=base + i, host=f"h{i % 3}") for i in range(250)])
    return t


def test_max_rows_pages_cover_the_result_once(paged_table, ts_query):
    q = f"SELECT host, time, measure_value::bigint AS v FROM {name(paged_table)} ORDER BY time"
    pages = all_pages(ts_query, q, MaxRows=40)
    assert [len(p["Rows"]) for p in pages] == [40] * 6 + [10]
    assert len({p["QueryId"] for p in pages}) == 1, "every page names the same query"
    tokens = [p["NextToken"] for p in pages[:-1]]
    assert len(set(tokens)) == len(tokens)
    for p in pages:
        assert columns_of(p) == [("host", "VARCHAR"), ("time", "TIMESTAMP"), ("v", "BIGINT")]
    values = [int(r[2]) for p in pages for r in rows_of(p)]
    assert values == list(range(250)), "all rows, in order, none twice"


def test_a_token_can_be_retried_but_not_after_a_later_one(paged_table, ts_query):
    q = f"SELECT measure_value::bigint FROM {name(paged_table)} ORDER BY time"
    first = ts_query.query(QueryString=q, MaxRows=100)
    token = first["NextToken"]
    second = ts_query.query(QueryString=q, MaxRows=100, NextToken=token)
    again = ts_query.query(QueryString=q, MaxRows=100, NextToken=token)
    assert rows_of(again) == rows_of(second)
    third = ts_query.query(QueryString=q, MaxRows=100, NextToken=second["NextToken"])
    assert len(third["Rows"]) == 50 and "NextToken" not in third
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=q, MaxRows=100, NextToken=token)
    assert "pagination token" in error_of(e, "ValidationException")


def test_paginator(paged_table, ts_query):
    q = f"SELECT measure_value::bigint FROM {name(paged_table)} ORDER BY time"
    pages = list(ts_query.get_paginator("query").paginate(QueryString=q, PaginationConfig={"PageSize": 30}))
    assert len(pages) == 9
    assert all(len(p["Rows"]) <= 30 for p in pages)
    assert [int(r[0]) for p in pages for r in rows_of(p)] == list(range(250))
    full = ts_query.get_paginator("query").paginate(QueryString=q, MaxRows=64).build_full_result()
    assert [int(r[0]) for r in rows_of(full)] == list(range(250))
    assert columns_of(full) == [("measure_value::bigint", "BIGINT")]


def test_pages_without_max_rows_stay_near_a_megabyte(ts, ts_query):
    t = ts.table()
    base = now_ms() - 60_000
    big = "x" * 2000
    write_all(t, [rec("blob", f"{i:04d}{big}", "VARCHAR", t=base + i) for i in range(700)])
    q = f"SELECT measure_value::varchar FROM {name(t)} ORDER BY time"
    pages = all_pages(ts_query, q)
    assert len(pages) >= 2, "700 rows of 2 KB do not fit one page"
    for p in pages:
        assert len(json.dumps(p["Rows"])) <= 1024 * 1024 + 4096
    got = [r[0][:4] for p in pages for r in rows_of(p)]
    assert got == [f"{i:04d}" for i in range(700)]


def test_next_token_with_another_query_string_is_refused(paged_table, ts_query):
    q = f"SELECT measure_value::bigint FROM {name(paged_table)} ORDER BY time"
    token = ts_query.query(QueryString=q, MaxRows=10)["NextToken"]
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=q + " ", MaxRows=10, NextToken=token)
    assert "QueryString" in error_of(e, "ValidationException")


def test_unknown_next_token_is_validation_error(ts_query):
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString="SELECT 1", NextToken="not-a-token")
    assert "pagination token" in error_of(e, "ValidationException")


def test_max_rows_out_of_range_is_validation_error(ts_query_unvalidated):
    for bad in (0, 1001):
        with pytest.raises(ClientError) as e:
            ts_query_unvalidated.query(QueryString="SELECT 1", MaxRows=bad)
        assert "MaxRows" in error_of(e, "ValidationException")


# ---- CancelQuery ------------------------------------------------------------------


def test_cancel_query_drops_its_pages(paged_table, ts_query):
    q = f"SELECT measure_value::bigint FROM {name(paged_table)} ORDER BY time"
    first = ts_query.query(QueryString=q, MaxRows=10)
    query_id, token = first["QueryId"], first["NextToken"]
    msg = ts_query.cancel_query(QueryId=query_id)["CancellationMessage"]
    assert query_id in msg and "cancelled" in msg
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=q, MaxRows=10, NextToken=token)
    assert "cancelled" in error_of(e, "ConflictException")
    again = ts_query.cancel_query(QueryId=query_id)["CancellationMessage"]
    assert "already" in again, "cancelling twice is idempotent"


def test_cancel_of_a_finished_query_succeeds(ts_query):
    query_id = ts_query.query(QueryString="SELECT 1")["QueryId"]
    assert "finished" in ts_query.cancel_query(QueryId=query_id)["CancellationMessage"]


def test_cancel_of_an_unknown_query_is_validation_error(ts_query):
    with pytest.raises(ClientError) as e:
        ts_query.cancel_query(QueryId="NOSUCHQUERY")
    assert "NOSUCHQUERY" in error_of(e, "ValidationException")


# ---- errors and other operations ---------------------------------------------------


def test_syntax_error_is_validation_error_with_position(ts_query):
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString="SELECT * FROM x WHERE )")
    msg = error_of(e, "ValidationException")
    assert msg.startswith("line 1:23:"), msg
    assert ")" in msg
    with pytest.raises(ts_query.exceptions.ValidationException) as e:
        ts_query.query(QueryString="SELECT 1\nFROM\n  )")
    assert error_of(e, "ValidationException").startswith("line 3:3:")


def test_missing_table_and_database_are_not_found(ts, ts_query):
    db = ts.database()
    with pytest.raises(ts_query.exceptions.ResourceNotFoundException) as e:
        ts_query.query(QueryString=f'SELECT * FROM "{db}"."no_such_table"')
    assert "no_such_table" in error_of(e, "ResourceNotFoundException")
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString='SELECT * FROM "no_such_db_q"."t1"')
    assert "no_such_db_q" in error_of(e, "ResourceNotFoundException")


def test_unknown_column_is_validation_error(ts, ts_query):
    t = ts.table()
    t.write([rec("cpu", "1")])
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=f"SELECT no_such_column FROM {name(t)}")
    assert "no_such_column" in error_of(e, "ValidationException")


def test_runtime_failure_is_query_execution_error(ts_query):
    with pytest.raises(ts_query.exceptions.QueryExecutionException) as e:
        ts_query.query(QueryString="SELECT 1 / 0")
    assert "zero" in error_of(e, "QueryExecutionException").lower()


def test_describe_endpoints_on_the_query_client(server, ts_query):
    ep = ts_query.describe_endpoints()["Endpoints"]
    # An address with its scheme: SDKs that always discover endpoints take one
    # without a scheme as HTTPS.
    assert ep == [{"Address": f"http://{server.ts_host}", "CachePeriodInMinutes": 1440}]


def test_prepare_query_validates_and_describes_columns(ts, ts_query):
    t = ts.table()
    write_all(t, [rec("cpu", "1.5"), rec("cpu", "2.5", host="h2")])
    resp = ts_query.prepare_query(
        QueryString=f"SELECT host, max(measure_value::double) AS top, count(*) FROM {name(t)} "
        "WHERE time > @scheduled_runtime - 1h GROUP BY host",
        ValidateOnly=True,
    )
    assert [(c["Name"], c["Type"]) for c in resp["Columns"]] == [
        ("host", {"ScalarType": "VARCHAR"}),
        ("top", {"ScalarType": "DOUBLE"}),
        ("_col2", {"ScalarType": "BIGINT"}),
    ]
    assert resp["Parameters"] == [
        {"Name": "@scheduled_runtime", "Type": {"ScalarType": "TIMESTAMP"}}
    ]
    with pytest.raises(ClientError) as e:
        ts_query.prepare_query(QueryString="SELECT 1", ValidateOnly=False)
    assert "ValidateOnly" in error_of(e, "ValidationException")
    with pytest.raises(ClientError) as e:
        ts_query.prepare_query(QueryString=f"SELECT nope FROM {name(t)}", ValidateOnly=True)
    assert "nope" in error_of(e, "ValidationException")


def test_signed_region_is_used_per_request(ts, server, _aws_env):
    """ARNs name the region a request was signed for; other requests keep theirs."""
    from bt_helpers import ts_write_client

    eu = ts_write_client(server.ts_endpoint, region="eu-west-1")
    try:
        db = ts.name()
        ts.track(db)
        arn = eu.create_database(DatabaseName=db)["Database"]["Arn"]
        assert arn.startswith("arn:aws:timestream:eu-west-1:"), arn
        again = ts.client.describe_database(DatabaseName=db)["Database"]["Arn"]
        assert again.startswith("arn:aws:timestream:us-east-1:"), again
    finally:
        eu.close()


# ---- sealed buckets ----------------------------------------------------------------


def test_closed_hours_are_sealed_in_the_background_and_read_the_same(ts, ts_query, server):
    """The server folds each closed hour of a series into one block row (seen through the
    Bigtable API); queries answer the same before and after, and a late upsert into a
    sealed hour lands."""
    from google.cloud import bigtable

    # Short names, so that the Bigtable table id is "{db}.{table}" (not "ts-N").
    db = ts.database(f"seal{int(time.time() * 1000) % 10**9}")
    table = ts.table(db=db, name="cpu", memory_hours=12, magnetic_days=10)
    base = (now_ms() - 4 * HOUR_MS) // HOUR_MS * HOUR_MS
    write_all(table, [rec("cpu", f"{i}.5", t=base + i * 10_000) for i in range(360)])
    q = (
        f"SELECT count(*), sum(measure_value::double), max(time) FROM {name(table)} "
        f"WHERE time BETWEEN from_milliseconds({base + 600_000}) "
        f"AND from_milliseconds({base + 1_200_000})"
    )
    before = rows_of(ts_query.query(QueryString=q))
    assert len(before) == 1 and before[0][0] == "61" and before[0][2] == ts_text(base + 1_200_000)
    assert float(before[0][1]) == pytest.approx(sum(i + 0.5 for i in range(60, 121)))

    # The records live in Bigtable table "{db}.{table}" of instance timestream.
    client = bigtable.Client(project="almanac", admin=True)
    instance = client.instance("timestream")
    bt_id = f"{table.db}.{table.name}"
    assert bt_id in [t.table_id for t in instance.list_tables()]
    bt = instance.table(bt_id)
    deadline = time.monotonic() + 30
    while True:
        rows = list(bt.read_rows())
        if len(rows) == 1:
            break
        assert time.monotonic() < deadline, f"still {len(rows)} rows after 30 s"
        time.sleep(0.2)
    assert set(rows[0].cells) == {"b"}, "a sealed hour is one block cell"
    assert rows_of(ts_query.query(QueryString=q)) == before

    # A late upsert into the sealed hour rewrites the block.
    late = rec("cpu", "1000.5", t=base + 900_000)
    late["Version"] = 2
    table.write([late])
    after = rows_of(ts_query.query(QueryString=q))
    assert after[0][0] == "61"
    assert float(after[0][1]) == pytest.approx(float(before[0][1]) - 90.5 + 1000.5)
    assert len(list(bt.read_rows())) == 1
