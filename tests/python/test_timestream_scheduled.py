"""Timestream scheduled queries (`timestream-query`, AWS JSON 1.0) through boto3.

CreateScheduledQuery checks a definition (name, `rate(…)`/`cron(…)` schedule, error
report destination, target table and mapping against the query's columns with
`@scheduled_runtime` bound) and answers its ARN; Describe and List echo what was given
with the state, the next invocation time and the last run; ExecuteScheduledQuery runs
the query at the given `InvocationTime` before it answers and writes the rolled-up rows
into the target table through `TargetConfiguration` (multi-measure or mixed mappings);
a run whose rows are refused fails with an error report, which Almanac writes under
`DATA_DIR/buckets/BUCKET/KEY`; Update switches the state, Delete forgets the query, and
definitions survive a restart. DescribeAccountSettings/UpdateAccountSettings answer
the settings of an unmetered local server.

Server side: crates/jobs/src/scheduled/*.rs, crates/server/src/timestream/scheduled_ops.rs.
Record times come from the current clock so that they fall in the memory store.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid

import pytest
from botocore.exceptions import ClientError

from bt_helpers import TsTable, ts_query_client, ts_write_client
from test_timestream_query import (
    MINUTE_MS,
    error_of,
    name,
    now_ms,
    rec,
    rows_of,
    ts_text,
    write_all,
)

TOPIC = "arn:aws:sns:us-east-1:000000000000:almanac-scheduled"
ROLE = "arn:aws:iam::000000000000:role/almanac-scheduled"
# The default `serve --bucket-dir` under the data directory: bucket B is its subdirectory B.
BUCKET_DIR = "buckets"
# Keys of every DescribeScheduledQuery answer; the optional ones come on top.
DESCRIBE_KEYS = {
    "Arn",
    "Name",
    "QueryString",
    "CreationTime",
    "State",
    "ScheduleConfiguration",
    "NotificationConfiguration",
    "ScheduledQueryExecutionRoleArn",
    "ErrorReportConfiguration",
    "RecentlyFailedRuns",
}


# ---- helpers ---------------------------------------------------------------------


def ms(t: dt.datetime) -> int:
    """A (timezone-aware) datetime from botocore as epoch milliseconds."""
    assert t.tzinfo is not None, t
    return round(t.timestamp() * 1000)


def at(ms_: int) -> dt.datetime:
    """Epoch milliseconds as a UTC datetime, for `InvocationTime`."""
    return dt.datetime.fromtimestamp(ms_ / 1000, tz=dt.timezone.utc)


def dimension_mappings(*names: str) -> list[dict]:
    return [{"Name": n, "DimensionValueType": "VARCHAR"} for n in names]


def report_config(bucket: str, prefix: str | None = None) -> dict:
    s3 = {"BucketName": bucket}
    if prefix is not None:
        s3["ObjectKeyPrefix"] = prefix
    return {"S3Configuration": s3}


def report_path(server, bucket: str, key: str):
    """Where an error report is: `serve` stands in for S3 with a directory of buckets,
    `--bucket-dir`, by default DATA_DIR/buckets."""
    return server.data_dir / BUCKET_DIR / bucket / key


def describe(client, arn: str) -> dict:
    return client.describe_scheduled_query(ScheduledQueryArn=arn)["ScheduledQuery"]


def list_pages(client, page_size: int | None = None) -> list[list[dict]]:
    """Every page of ListScheduledQueries, following NextToken by hand."""
    pages: list[list[dict]] = []
    token = None
    for _ in range(10_000):
        args: dict = {}
        if page_size is not None:
            args["MaxResults"] = page_size
        if token is not None:
            args["NextToken"] = token
        resp = client.list_scheduled_queries(**args)
        pages.append(resp["ScheduledQueries"])
        token = resp.get("NextToken")
        if not token:
            return pages
    raise AssertionError("ListScheduledQueries pagination did not terminate")


def listed(client) -> dict[str, dict]:
    """{Name: summary} of every scheduled query the server lists."""
    items = [q for page in list_pages(client) for q in page]
    names = [q["Name"] for q in items]
    assert len(names) == len(set(names)), names
    return {q["Name"]: q for q in items}


class Scheduled:
    """Makes uniquely named scheduled queries; `cleanup` deletes them all."""

    def __init__(self, client, nodeid: str):
        self.client = client
        self.stem = re.sub(r"[^a-zA-Z0-9_.-]+", "_", nodeid.rsplit("::", 1)[-1]).strip("_")[:40]
        self.arns: list[str] = []

    def name(self) -> str:
        return f"{self.stem or 'sq'}-{uuid.uuid4().hex[:8]}"

    def bucket(self) -> str:
        return f"reports-{uuid.uuid4().hex[:8]}"

    def args(
        self,
        query: str,
        target: dict | None = None,
        schedule: str = "rate(1 hour)",
        bucket: str | None = None,
        prefix: str | None = None,
        **overrides,
    ) -> dict:
        """CreateScheduledQuery's members; `target` is a TimestreamConfiguration."""
        args = {
            "Name": self.name(),
            "QueryString": query,
            "ScheduleConfiguration": {"ScheduleExpression": schedule},
            "NotificationConfiguration": {"SnsConfiguration": {"TopicArn": TOPIC}},
            "ScheduledQueryExecutionRoleArn": ROLE,
            "ErrorReportConfiguration": report_config(bucket or self.bucket(), prefix),
        }
        if target is not None:
            args["TargetConfiguration"] = {"TimestreamConfiguration": target}
        args.update(overrides)
        return args

    def create(self, client=None, **args) -> str:
        arn = (client or self.client).create_scheduled_query(**args)["Arn"]
        self.arns.append(arn)
        return arn

    def cleanup(self) -> None:
        for arn in self.arns:
            try:
                self.client.delete_scheduled_query(ScheduledQueryArn=arn)
            except self.client.exceptions.ResourceNotFoundException:
                pass


@pytest.fixture
def sq(request, ts_query, server) -> Scheduled:
    """Factory of scheduled queries on the session server, deleted at teardown (so the
    scheduler does not run them after the test's tables are gone)."""
    factory = Scheduled(ts_query, request.node.nodeid)
    yield factory
    if server.running:
        factory.cleanup()


def cpu_rollup(src, target_table, window="30m") -> tuple[str, dict]:
    """A 10-minute roll-up of `cpu` over the `window` before `@scheduled_runtime`, and
    a multi-measure TimestreamConfiguration writing it to `target_table`."""
    query = (
        "SELECT host, bin(time, 10m) AS t, avg(measure_value::double) AS mean_v, "
        "max(measure_value::double) AS max_v, count(*) AS n "
        f"FROM {name(src)} WHERE measure_name = 'cpu' "
        f"AND time >= @scheduled_runtime - {window} AND time < @scheduled_runtime "
        "GROUP BY host, bin(time, 10m)"
    )
    target = {
        "DatabaseName": target_table.db,
        "TableName": target_table.name,
        "TimeColumn": "t",
        "DimensionMappings": dimension_mappings("host"),
        "MultiMeasureMappings": {
            "TargetMultiMeasureName": "cpu_10m",
            "MultiMeasureAttributeMappings": [
                {
                    "SourceColumn": "mean_v",
                    "TargetMultiMeasureAttributeName": "mean",
                    "MeasureValueType": "DOUBLE",
                },
                {"SourceColumn": "max_v", "MeasureValueType": "DOUBLE"},
                {
                    "SourceColumn": "n",
                    "TargetMultiMeasureAttributeName": "samples",
                    "MeasureValueType": "BIGINT",
                },
            ],
        },
    }
    return query, target


def passthrough(src, target_table) -> tuple[str, dict]:
    """Every `cpu` row of the 5 minutes before `@scheduled_runtime`, its time moved
    3 days back for host `old`, and a mixed single-measure mapping writing `val`."""
    query = (
        "SELECT host, if(host = 'old', time - 3d, time) AS t, measure_value::double AS v "
        f"FROM {name(src)} WHERE measure_name = 'cpu' "
        "AND time BETWEEN @scheduled_runtime - 5m AND @scheduled_runtime ORDER BY host, time"
    )
    target = {
        "DatabaseName": target_table.db,
        "TableName": target_table.name,
        "TimeColumn": "t",
        "DimensionMappings": dimension_mappings("host"),
        "MixedMeasureMappings": [
            {"SourceColumn": "v", "TargetMeasureName": "val", "MeasureValueType": "DOUBLE"}
        ],
    }
    return query, target


def with_cpu_and_mem(ts):
    """A source table with `cpu` and `mem` samples of the last minutes: a query must
    name columns the table has, as in Timestream."""
    src = ts.table()
    now = now_ms()
    write_all(src, [rec(m, "1", t=now - k * MINUTE_MS) for m in ("cpu", "mem") for k in range(2)])
    return src


def target_rows(ts_query, table, columns: str) -> list[list]:
    resp = ts_query.query(
        QueryString=f"SELECT {columns} FROM {name(table)} ORDER BY measure_name, host, time"
    )
    return rows_of(resp)


# ---- Create / Describe / List ----------------------------------------------------


def test_create_describe_and_list_echo_the_definitions(ts, sq, ts_query):
    src = with_cpu_and_mem(ts)
    rollups = ts.table(db=src.db)
    per_measure = ts.table(db=src.db)
    query, target = cpu_rollup(src, rollups)
    multi_args = sq.args(query, target, schedule="rate(1 minute)", prefix="scheduled/multi")
    mixed_query = (
        "SELECT host, measure_name, @scheduled_runtime AS t, "
        "avg(measure_value::double) AS mean_v, max(measure_value::double) AS max_v, "
        f"count(*) AS n FROM {name(src)} "
        "WHERE time BETWEEN @scheduled_runtime - 15m AND @scheduled_runtime "
        "GROUP BY host, measure_name"
    )
    mixed_target = {
        "DatabaseName": per_measure.db,
        "TableName": per_measure.name,
        "TimeColumn": "t",
        "DimensionMappings": dimension_mappings("host"),
        "MeasureNameColumn": "measure_name",
        "MixedMeasureMappings": [
            {
                "MeasureName": "cpu",
                "SourceColumn": "mean_v",
                "TargetMeasureName": "cpu_mean",
                "MeasureValueType": "DOUBLE",
            },
            {
                "MeasureName": "mem",
                "TargetMeasureName": "mem_stats",
                "MeasureValueType": "MULTI",
                "MultiMeasureAttributeMappings": [
                    {
                        "SourceColumn": "max_v",
                        "TargetMultiMeasureAttributeName": "mem_max",
                        "MeasureValueType": "DOUBLE",
                    },
                    {"SourceColumn": "n", "MeasureValueType": "BIGINT"},
                ],
            },
        ],
    }
    mixed_args = sq.args(mixed_query, mixed_target, schedule="cron(30 12 1 JAN ? *)")

    before = now_ms()
    multi_arn = sq.create(**multi_args)
    mixed_arn = sq.create(**mixed_args)
    after = now_ms()

    for args, arn in ((multi_args, multi_arn), (mixed_args, mixed_arn)):
        prefix = "arn:aws:timestream:us-east-1:000000000000:scheduled-query/"
        assert re.fullmatch(re.escape(prefix + args["Name"]) + "-[0-9a-f]+", arn), arn
        d = describe(ts_query, arn)
        assert set(d) == DESCRIBE_KEYS | {"NextInvocationTime", "TargetConfiguration"}, d
        expected = {k: v for k, v in args.items() if k not in ("Name", "QueryString")}
        assert {k: d[k] for k in expected} == expected
        assert (d["Arn"], d["Name"], d["QueryString"]) == (arn, args["Name"], args["QueryString"])
        assert d["State"] == "ENABLED"
        assert d["RecentlyFailedRuns"] == []
        assert isinstance(d["CreationTime"], dt.datetime)
        assert isinstance(d["NextInvocationTime"], dt.datetime)
        assert before <= ms(d["CreationTime"]) <= after

    rate = describe(ts_query, multi_arn)
    # rate(1 minute) counts from the creation: the first run is one minute after it.
    assert ms(rate["NextInvocationTime"]) - ms(rate["CreationTime"]) == MINUTE_MS
    cron = describe(ts_query, mixed_arn)
    # cron(30 12 1 JAN ? *): the first 1 January, 12:30 UTC, after the creation (a time
    # no test run reaches, so the session's scheduler never runs it under the test).
    created = dt.datetime.fromtimestamp(ms(cron["CreationTime"]) / 1000, dt.timezone.utc)
    due = dt.datetime(created.year, 1, 1, 12, 30, tzinfo=dt.timezone.utc)
    if due <= created:
        due = due.replace(year=created.year + 1)
    assert ms(cron["NextInvocationTime"]) == int(due.timestamp() * 1000)

    # ListScheduledQueries, one a page by hand.
    pages = list_pages(ts_query, page_size=1)
    assert all(len(p) <= 1 for p in pages), pages
    by_name = {q["Name"]: q for p in pages for q in p}
    assert sum(len(p) for p in pages) == len(by_name)
    for d, table in ((rate, rollups), (cron, per_measure)):
        item = by_name[d["Name"]]
        assert item == {
            "Arn": d["Arn"],
            "Name": d["Name"],
            "CreationTime": d["CreationTime"],
            "State": "ENABLED",
            "NextInvocationTime": d["NextInvocationTime"],
            "ErrorReportConfiguration": d["ErrorReportConfiguration"],
            "TargetDestination": {
                "TimestreamDestination": {"DatabaseName": table.db, "TableName": table.name}
            },
        }

    # botocore's paginator for the operation walks the same pages.
    assert ts_query.can_paginate("list_scheduled_queries")
    paged = list(
        ts_query.get_paginator("list_scheduled_queries").paginate(
            PaginationConfig={"PageSize": 1}
        )
    )
    assert len(paged) >= 2
    assert all(len(p["ScheduledQueries"]) <= 1 for p in paged)
    assert {q["Name"] for p in paged for q in p["ScheduledQueries"]} == set(by_name)


# ---- ExecuteScheduledQuery -------------------------------------------------------


def test_execute_writes_the_rollup_through_multi_measure_mappings(ts, sq, ts_query):
    src = ts.table()
    rollups = ts.table(db=src.db)
    ten = 10 * MINUTE_MS
    # A 10-minute boundary 5..15 minutes ago: the three bins before it are in the hour.
    invocation = (now_ms() - 5 * MINUTE_MS) // ten * ten
    start = invocation - 3 * ten
    offsets = {"h1": 0, "h2": 100}
    records = [
        rec("cpu", str(k + off), t=start + k * MINUTE_MS, host=host)
        for host, off in offsets.items()
        for k in range(30)
    ]
    # Outside the window, and another measure: none of them is rolled up.
    records += [
        rec("cpu", "999", t=invocation, host="h1"),
        rec("cpu", "999", t=start - MINUTE_MS, host="h2"),
        rec("mem", "5000", t=start + MINUTE_MS, host="h1"),
    ]
    write_all(src, records)
    query, target = cpu_rollup(src, rollups)
    arn = sq.create(**sq.args(query, target))
    created = describe(ts_query, arn)
    assert "LastRunSummary" not in created

    before = now_ms()
    resp = ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(invocation))
    after = now_ms()
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200

    def expected(extra=None):
        rows = []
        for host, off in offsets.items():
            for j in range(3):
                values = [k + off for k in range(10 * j, 10 * j + 10)]
                if extra and extra[0] == (host, j):
                    values.append(extra[1])
                rows.append(
                    [host, "cpu_10m", ts_text(start + j * ten),
                     sum(values) / len(values), float(max(values)), len(values)]
                )
        return rows

    def written():
        return [
            [h, m, t, float(mean), float(mx), int(n)]
            for h, m, t, mean, mx, n in target_rows(
                ts_query, rollups, "host, measure_name, time, mean, max_v, samples"
            )
        ]

    assert written() == expected()
    d = describe(ts_query, arn)
    run = d["LastRunSummary"]
    assert run["RunStatus"] == "MANUAL_TRIGGER_SUCCESS"
    assert ms(run["InvocationTime"]) == invocation
    assert before <= ms(run["TriggerTime"]) <= after
    assert run["ExecutionStats"]["RecordsIngested"] == 6
    assert run["ExecutionStats"]["QueryResultRows"] == 6
    assert "FailureReason" not in run and "ErrorReportLocation" not in run
    assert d["RecentlyFailedRuns"] == []
    # A manual run leaves the schedule as it was.
    assert d["NextInvocationTime"] == created["NextInvocationTime"]
    assert "PreviousInvocationTime" not in d
    assert listed(ts_query)[d["Name"]]["LastRunStatus"] == "MANUAL_TRIGGER_SUCCESS"

    # A late sample arrives; running the same invocation again replaces its roll-up.
    write_all(src, [rec("cpu", "1000", t=start + 30_000, host="h1")])
    ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(invocation))
    assert written() == expected(extra=(("h1", 0), 1000))
    again = describe(ts_query, arn)["LastRunSummary"]
    assert again["RunStatus"] == "MANUAL_TRIGGER_SUCCESS"
    assert ms(again["TriggerTime"]) > ms(run["TriggerTime"])
    assert again["ExecutionStats"]["RecordsIngested"] == 6


def test_execute_writes_through_mixed_mappings_by_measure_name(ts, sq, ts_query):
    src = ts.table()
    per_measure = ts.table(db=src.db)
    now = now_ms()
    invocation = now - now % 1000
    write_all(
        src,
        [rec("cpu", f"{k}.5", t=invocation - (k + 1) * MINUTE_MS, host=h)
         for h in ("h1", "h2") for k in range(4)]
        + [rec("mem", str(100 + k), t=invocation - (k + 1) * MINUTE_MS, host="h1")
           for k in range(3)],
    )
    query = (
        "SELECT host, measure_name, @scheduled_runtime AS t, "
        "avg(measure_value::double) AS mean_v, max(measure_value::double) AS max_v, "
        f"count(*) AS n FROM {name(src)} "
        "WHERE time BETWEEN @scheduled_runtime - 10m AND @scheduled_runtime "
        "GROUP BY host, measure_name"
    )
    target = {
        "DatabaseName": per_measure.db,
        "TableName": per_measure.name,
        "TimeColumn": "t",
        "DimensionMappings": dimension_mappings("host"),
        "MeasureNameColumn": "measure_name",
        "MixedMeasureMappings": [
            {
                "MeasureName": "cpu",
                "SourceColumn": "mean_v",
                "TargetMeasureName": "cpu_mean",
                "MeasureValueType": "DOUBLE",
            },
            {
                "MeasureName": "mem",
                "TargetMeasureName": "mem_stats",
                "MeasureValueType": "MULTI",
                "MultiMeasureAttributeMappings": [
                    {
                        "SourceColumn": "max_v",
                        "TargetMultiMeasureAttributeName": "mem_max",
                        "MeasureValueType": "DOUBLE",
                    },
                    {"SourceColumn": "n", "MeasureValueType": "BIGINT"},
                ],
            },
        ],
    }
    arn = sq.create(**sq.args(query, target, schedule="cron(30 12 1 JAN ? *)"))
    ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(invocation))

    resp = ts_query.query(
        QueryString=f"SELECT * FROM {name(per_measure)} ORDER BY measure_name, host"
    )
    assert [c["Name"] for c in resp["ColumnInfo"]] == [
        "host", "measure_name", "time", "measure_value::double", "mem_max", "n"
    ]
    rows = rows_of(resp)
    t = ts_text(invocation)
    # cpu: mean of 0.5, 1.5, 2.5, 3.5 = 2.0 per host; mem: max 102 of 3 samples.
    assert [[h, m, tt, v and float(v), mx and float(mx), n] for h, m, tt, v, mx, n in rows] == [
        ["h1", "cpu_mean", t, 2.0, None, None],
        ["h2", "cpu_mean", t, 2.0, None, None],
        ["h1", "mem_stats", t, None, 102.0, "3"],
    ]
    run = describe(ts_query, arn)["LastRunSummary"]
    assert run["RunStatus"] == "MANUAL_TRIGGER_SUCCESS"
    assert run["ExecutionStats"]["RecordsIngested"] == 3
    assert run["ExecutionStats"]["QueryResultRows"] == 3


def test_a_run_whose_rows_are_refused_fails_with_an_error_report(ts, sq, ts_query, server):
    src = ts.table()
    # One hour of memory store and no magnetic writes: a time 3 days old is refused.
    short = ts.table(db=src.db, memory_hours=1, magnetic_days=1, magnetic_writes=False)
    now = now_ms()
    write_all(
        src,
        [rec("cpu", f"{h_i}{k}.25", t=now - (k + 1) * MINUTE_MS, host=h)
         for h_i, h in enumerate(("new", "old"), start=1) for k in range(2)],
    )
    bucket = sq.bucket()
    query, target = passthrough(src, short)
    args = sq.args(query, target, bucket=bucket, prefix="errors/run")
    arn = sq.create(**args)

    invocation = now_ms()
    ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(invocation))

    d = describe(ts_query, arn)
    run = d["LastRunSummary"]
    assert run["RunStatus"] == "MANUAL_TRIGGER_FAILURE"
    assert ms(run["InvocationTime"]) == invocation
    assert run["ExecutionStats"]["QueryResultRows"] == 4
    assert run["ExecutionStats"]["RecordsIngested"] == 2
    assert "2" in run["FailureReason"] and "4" in run["FailureReason"], run
    location = run["ErrorReportLocation"]["S3ReportLocation"]
    assert set(location) == {"BucketName", "ObjectKey"}
    assert location["BucketName"] == bucket
    assert location["ObjectKey"].startswith("errors/run/"), location
    assert d["RecentlyFailedRuns"] == [run]
    assert listed(ts_query)[args["Name"]]["LastRunStatus"] == "MANUAL_TRIGGER_FAILURE"

    path = report_path(server, bucket, location["ObjectKey"])
    assert path.is_file(), f"no report at {path}"
    report = json.loads(path.read_text())
    (error,) = report["errors"]
    assert error["reason"] == run["FailureReason"]
    # ORDER BY host, time: the two rows of host `old` are the 3rd and 4th.
    assert [r["row"] for r in error["rows"]] == [3, 4]
    assert all("memory store" in r["reason"] for r in error["rows"]), error

    # The rows of host `new` were written; those of `old` were not.
    rows = target_rows(ts_query, short, "host, measure_name, time, measure_value::double")
    assert rows == [
        ["new", "val", ts_text(now - 2 * MINUTE_MS), "11.25"],
        ["new", "val", ts_text(now - MINUTE_MS), "10.25"],
    ]

    # A run that cannot write at all (the target is gone) fails too, newest first.
    ts.client.delete_table(DatabaseName=short.db, TableName=short.name)
    second = invocation + 1000
    ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(second))
    d = describe(ts_query, arn)
    gone = d["LastRunSummary"]
    assert gone["RunStatus"] == "MANUAL_TRIGGER_FAILURE"
    assert short.name in gone["FailureReason"], gone
    assert gone["ExecutionStats"]["RecordsIngested"] == 0
    assert [ms(r["InvocationTime"]) for r in d["RecentlyFailedRuns"]] == [second, invocation]
    key = gone["ErrorReportLocation"]["S3ReportLocation"]["ObjectKey"]
    assert key != location["ObjectKey"]
    gone_report = json.loads(report_path(server, bucket, key).read_text())
    assert gone_report["errors"] == [{"reason": gone["FailureReason"], "rows": []}]

    # RecentlyFailedRuns keeps the last five.
    for i in range(2, 6):
        ts_query.execute_scheduled_query(
            ScheduledQueryArn=arn, InvocationTime=at(invocation + i * 1000)
        )
    failed = describe(ts_query, arn)["RecentlyFailedRuns"]
    assert [ms(r["InvocationTime"]) for r in failed] == [
        invocation + i * 1000 for i in (5, 4, 3, 2, 1)
    ]


# ---- UpdateScheduledQuery / DeleteScheduledQuery ---------------------------------


def test_disable_enable_and_delete(ts, sq, ts_query):
    src = ts.table()
    write_all(src, [rec("cpu", "1", t=now_ms() - MINUTE_MS), rec("cpu", "2")])
    # No TargetConfiguration: a run counts the rows and writes nothing.
    args = sq.args(
        f"SELECT * FROM {name(src)} WHERE time <= @scheduled_runtime",
        schedule="rate(1 minute)",
    )
    arn = sq.create(**args)
    created = describe(ts_query, arn)
    assert "TargetConfiguration" not in created
    assert "TargetDestination" not in listed(ts_query)[args["Name"]]

    ts_query.update_scheduled_query(ScheduledQueryArn=arn, State="DISABLED")
    d = describe(ts_query, arn)
    assert d["State"] == "DISABLED"
    assert "NextInvocationTime" not in d
    item = listed(ts_query)[args["Name"]]
    assert item["State"] == "DISABLED" and "NextInvocationTime" not in item

    # A disabled query still runs when executed.
    invocation = now_ms()
    ts_query.execute_scheduled_query(ScheduledQueryArn=arn, InvocationTime=at(invocation))
    run = describe(ts_query, arn)["LastRunSummary"]
    assert run["RunStatus"] == "MANUAL_TRIGGER_SUCCESS"
    assert run["ExecutionStats"]["QueryResultRows"] == 2
    assert run["ExecutionStats"]["RecordsIngested"] == 0

    before = now_ms()
    ts_query.update_scheduled_query(ScheduledQueryArn=arn, State="ENABLED")
    after = now_ms()
    d = describe(ts_query, arn)
    assert d["State"] == "ENABLED"
    # Back on the schedule counted from the creation: the first minute mark after now.
    next_ms = ms(d["NextInvocationTime"])
    assert before < next_ms <= after + MINUTE_MS
    assert (next_ms - ms(created["CreationTime"])) % MINUTE_MS == 0

    ts_query.delete_scheduled_query(ScheduledQueryArn=arn)
    for call in (
        lambda: ts_query.describe_scheduled_query(ScheduledQueryArn=arn),
        lambda: ts_query.update_scheduled_query(ScheduledQueryArn=arn, State="DISABLED"),
        lambda: ts_query.execute_scheduled_query(
            ScheduledQueryArn=arn, InvocationTime=at(now_ms())
        ),
        lambda: ts_query.delete_scheduled_query(ScheduledQueryArn=arn),
    ):
        with pytest.raises(ClientError) as e:
            call()
        assert arn in error_of(e, "ResourceNotFoundException")
    assert args["Name"] not in listed(ts_query)

    # The name is free again; the old ARN does not name the new query.
    new_arn = sq.create(**args)
    assert new_arn != arn
    assert describe(ts_query, new_arn)["Name"] == args["Name"]
    with pytest.raises(ClientError) as e:
        ts_query.describe_scheduled_query(ScheduledQueryArn=arn)
    error_of(e, "ResourceNotFoundException")


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    ["rate(30 seconds)", "cron(0 * * * ?)", "cron(0 8 L * ? *)"],
    ids=["rate-seconds", "cron-5-fields", "cron-L"],
)
def test_bad_schedule_expressions_are_refused(ts, sq, ts_query, expression):
    src = with_cpu_and_mem(ts)
    query, target = cpu_rollup(src, ts.table(db=src.db))
    args = sq.args(query, target, schedule=expression)
    with pytest.raises(ClientError) as e:
        sq.create(**args)
    message = error_of(e, "ValidationException")
    assert "ScheduleExpression" in message and expression in message, message
    assert args["Name"] not in listed(ts_query)


def test_mapping_must_match_the_query_and_the_target_must_exist(ts, sq, ts_query):
    src = with_cpu_and_mem(ts)
    query, target = cpu_rollup(src, ts.table(db=src.db))

    lacking = json.loads(json.dumps(target))
    lacking["MultiMeasureMappings"]["MultiMeasureAttributeMappings"][0]["SourceColumn"] = "p99"
    with pytest.raises(ClientError) as e:
        sq.create(**sq.args(query, lacking))
    assert "p99" in error_of(e, "ValidationException")

    mistyped = json.loads(json.dumps(target))
    mistyped["DimensionMappings"] = dimension_mappings("n")  # a BIGINT as a dimension
    with pytest.raises(ClientError) as e:
        sq.create(**sq.args(query, mistyped))
    assert '"n"' in error_of(e, "ValidationException")

    no_table = dict(target, TableName="no_such_table")
    with pytest.raises(ClientError) as e:
        sq.create(**sq.args(query, no_table))
    assert "no_such_table" in error_of(e, "ResourceNotFoundException")

    no_db = dict(target, DatabaseName="no_such_db")
    with pytest.raises(ClientError) as e:
        sq.create(**sq.args(query, no_db))
    assert "no_such_db" in error_of(e, "ResourceNotFoundException")


def test_same_name_twice_conflicts(ts, sq, ts_query):
    src = with_cpu_and_mem(ts)
    query, target = cpu_rollup(src, ts.table(db=src.db))
    # botocore fills in a fresh ClientToken for each call: the second is a new request.
    args = sq.args(query, target)
    arn = sq.create(**args)
    with pytest.raises(ClientError) as e:
        sq.create(**dict(args, QueryString=query + " LIMIT 5"))
    assert args["Name"] in error_of(e, "ConflictException")
    assert describe(ts_query, arn)["QueryString"] == query

    # The same ClientToken again is a retry of the same request: the same ARN.
    token = uuid.uuid4().hex
    retried = sq.args(query, target, ClientToken=token)
    first = sq.create(**retried)
    assert sq.create(**retried) == first
    with pytest.raises(ClientError) as e:
        sq.create(**dict(retried, ClientToken=uuid.uuid4().hex))
    error_of(e, "ConflictException")
    assert retried["Name"] in listed(ts_query)


def test_unknown_arns_are_not_found(ts_query):
    arn = f"arn:aws:timestream:us-east-1:000000000000:scheduled-query/nope-{uuid.uuid4().hex[:16]}"
    calls = {
        "Describe": lambda: ts_query.describe_scheduled_query(ScheduledQueryArn=arn),
        "Update": lambda: ts_query.update_scheduled_query(ScheduledQueryArn=arn, State="ENABLED"),
        "Delete": lambda: ts_query.delete_scheduled_query(ScheduledQueryArn=arn),
        "Execute": lambda: ts_query.execute_scheduled_query(
            ScheduledQueryArn=arn, InvocationTime=at(now_ms())
        ),
    }
    for op, call in calls.items():
        with pytest.raises(ClientError) as e:
            call()
        assert arn in error_of(e, "ResourceNotFoundException"), op


def test_report_destination_must_stay_inside_the_report_directory(
    ts, sq, ts_query, ts_query_unvalidated
):
    src = with_cpu_and_mem(ts)
    query, target = cpu_rollup(src, ts.table(db=src.db))
    # botocore refuses a 2-character bucket name itself; the server must refuse it too.
    up = sq.args(query, target, bucket="..")
    with pytest.raises(ClientError) as e:
        sq.create(client=ts_query_unvalidated, **up)
    assert "BucketName" in error_of(e, "ValidationException")
    out = sq.args(query, target, prefix="../../escape")
    with pytest.raises(ClientError) as e:
        sq.create(**out)
    assert "ObjectKeyPrefix" in error_of(e, "ValidationException")
    names = listed(ts_query)
    assert up["Name"] not in names and out["Name"] not in names


# ---- persistence -------------------------------------------------------------------


def test_scheduled_queries_survive_a_restart(fresh_server, _aws_env):
    w = ts_write_client(fresh_server.ts_endpoint)
    q = ts_query_client(fresh_server.ts_endpoint)
    factory = Scheduled(q, "test_scheduled_queries_survive_a_restart")
    db = "persist_db"
    w.create_database(DatabaseName=db)
    w.create_table(DatabaseName=db, TableName="src")
    w.create_table(DatabaseName=db, TableName="dst")

    src, dst = TsTable(client=w, db=db, name="src"), TsTable(client=w, db=db, name="dst")
    now = now_ms()
    write_all(src, [rec("cpu", str(k), t=now - (k + 1) * MINUTE_MS, host="h1") for k in range(5)])
    query, target = cpu_rollup(src, dst, window="1h")
    kept = factory.args(query, target, schedule="rate(1 day)", prefix="p")
    kept_arn = factory.create(**kept)
    q.execute_scheduled_query(ScheduledQueryArn=kept_arn, InvocationTime=at(now))
    pquery, ptarget = passthrough(src, dst)
    paused = factory.args(pquery, ptarget, schedule="cron(0 0 1 1 ? *)")
    paused_arn = factory.create(**paused)
    q.update_scheduled_query(ScheduledQueryArn=paused_arn, State="DISABLED")
    before = {arn: describe(q, arn) for arn in (kept_arn, paused_arn)}
    assert before[kept_arn]["LastRunSummary"]["RunStatus"] == "MANUAL_TRIGGER_SUCCESS"
    w.close()
    q.close()

    fresh_server.restart()
    q = ts_query_client(fresh_server.ts_endpoint)
    assert {arn: describe(q, arn) for arn in before} == before
    assert before[paused_arn]["State"] == "DISABLED"
    assert {kept["Name"], paused["Name"]} <= set(listed(q))
    # The definition still runs after the restart.
    later = now + 1000
    q.execute_scheduled_query(ScheduledQueryArn=kept_arn, InvocationTime=at(later))
    run = describe(q, kept_arn)["LastRunSummary"]
    assert (run["RunStatus"], ms(run["InvocationTime"])) == ("MANUAL_TRIGGER_SUCCESS", later)
    q.delete_scheduled_query(ScheduledQueryArn=paused_arn)
    q.close()

    fresh_server.restart()
    q = ts_query_client(fresh_server.ts_endpoint)
    with pytest.raises(ClientError) as e:
        describe(q, paused_arn)
    error_of(e, "ResourceNotFoundException")
    assert ms(describe(q, kept_arn)["LastRunSummary"]["InvocationTime"]) == later
    assert set(listed(q)) == {kept["Name"]}
    q.close()


# ---- account settings ----------------------------------------------------------------


def test_account_settings(ts_query):
    settings = ts_query.describe_account_settings()
    assert settings["QueryPricingModel"] == "COMPUTE_UNITS"

    with pytest.raises(ClientError) as e:
        ts_query.update_account_settings(MaxQueryTCU=3)
    assert "MaxQueryTCU" in error_of(e, "ValidationException")

    updated = ts_query.update_account_settings(MaxQueryTCU=8)
    assert updated["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert updated["QueryPricingModel"] == "COMPUTE_UNITS"
