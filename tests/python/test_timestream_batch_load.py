"""Timestream batch load through boto3's `timestream-write` client.

CreateBatchLoadTask reads CSV from a directory that stands in for an S3 bucket: the
server's `--bucket-dir` (default DATA_DIR/buckets) holds one directory per bucket,
and a BucketName of `file:///DIR` names a directory directly. Reports are written
to BUCKET_DIR/BUCKET/PREFIX/TASK_ID.json in Timestream's error-report shape.
"""

from __future__ import annotations

import json
import time

import pytest
from botocore.exceptions import ClientError


def _wait(ts_write, task_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = ts_write.describe_batch_load_task(TaskId=task_id)["BatchLoadTaskDescription"]
        if d["TaskStatus"] not in ("CREATED", "IN_PROGRESS", "PENDING_RESUME"):
            return d
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} did not finish: {d}")


def _model(multi: bool = True) -> dict:
    if multi:
        return {
            "DataModel": {
                "TimeColumn": "time",
                "DimensionMappings": [
                    {"SourceColumn": "host", "DestinationColumn": "hostname"},
                    {"SourceColumn": "region"},
                ],
                "MultiMeasureMappings": {
                    "TargetMultiMeasureName": "metrics",
                    "MultiMeasureAttributeMappings": [
                        {"SourceColumn": "cpu", "MeasureValueType": "DOUBLE"},
                        {"SourceColumn": "mem", "TargetMultiMeasureAttributeName": "memory", "MeasureValueType": "BIGINT"},
                    ],
                },
            }
        }
    return {
        "DataModel": {
            "TimeColumn": "time",
            "TimeUnit": "SECONDS",
            "DimensionMappings": [{"SourceColumn": "host"}],
            "MeasureNameColumn": "measure",
            "MixedMeasureMappings": [
                {"MeasureName": "cpu", "SourceColumn": "value", "MeasureValueType": "DOUBLE"},
                {"MeasureName": "state", "SourceColumn": "text", "MeasureValueType": "VARCHAR"},
            ],
        }
    }


def _create(ts_write, db, table, bucket, prefix, model=None, csv=None, report_bucket="reports", **extra):
    source = {"DataSourceS3Configuration": {"BucketName": bucket, "ObjectKeyPrefix": prefix}, "DataFormat": "CSV"}
    if csv is not None:
        source["CsvConfiguration"] = csv
    return ts_write.create_batch_load_task(
        TargetDatabaseName=db,
        TargetTableName=table,
        DataModelConfiguration=model or _model(),
        DataSourceConfiguration=source,
        ReportConfiguration={"ReportS3Configuration": {"BucketName": report_bucket, "ObjectKeyPrefix": "bl"}},
        **extra,
    )["TaskId"]


def _rows(ts_query, sql: str) -> list[list[str]]:
    out = []
    for page in ts_query.get_paginator("query").paginate(QueryString=sql):
        for row in page["Rows"]:
            out.append([d.get("ScalarValue") for d in row["Data"]])
    return out


def test_multi_measure_csv_loads_and_refused_lines_are_reported(ts, ts_write, ts_query, server, tmp_path):
    table = ts.table(memory_hours=24, magnetic_days=30)
    bucket = table.name.lower().replace("_", "-")[:40]
    src = server.data_dir / "buckets" / bucket / "in"
    src.mkdir(parents=True)
    now_ms = int(time.time() * 1000) - 60_000
    lines = ["time,host,region,cpu,mem"]
    expected_mem = 0
    for i in range(300):
        lines.append(f"{now_ms - i * 1000},h{i % 3},eu,{i * 0.5},{i}")
        expected_mem += i
    lines.append(f"{now_ms},h1,eu,not-a-double,5")  # line 302: refused record
    lines.append(f"{now_ms},h1")  # line 303: too few fields
    (src / "a.csv").write_text("\n".join(lines) + "\n")
    (src / "b.csv").write_text(f"time,host,region,cpu,mem\n{now_ms},h9,us,1.25,7\n")
    (server.data_dir / "buckets" / bucket / "elsewhere.csv").write_text("ignored\n")

    task = _create(ts_write, table.db, table.name, bucket, "in/", RecordVersion=2)
    d = _wait(ts_write, task)
    assert d["TaskStatus"] == "FAILED", d
    p = d["ProgressReport"]
    assert p["RecordsProcessed"] == 303 and p["RecordsIngested"] == 301, p
    assert p["RecordIngestionFailures"] == 1 and p["ParseFailures"] == 1, p
    assert p["BytesMetered"] > 0
    assert d["RecordVersion"] == 2
    dims = d["DataModelConfiguration"]["DataModel"]["DimensionMappings"]
    assert dims[1] == {"SourceColumn": "region", "DestinationColumn": "region"}
    assert "see the error report" in d["ErrorMessage"]

    report = json.loads((server.data_dir / "buckets" / "reports" / "bl" / f"{task}.json").read_text())
    assert report["taskId"] == task
    (errors,) = [f["errors"] for f in report["fileErrors"] if f["fileName"] == "in/a.csv"]
    ranges = {e["reason"]: e["lineRanges"] for e in errors}
    assert [[302, 302]] in ranges.values(), report
    assert [[303, 303]] in ranges.values(), report
    assert any("not-a-double" in r for r in ranges), report

    (row,) = _rows(
        ts_query,
        f'SELECT count(*), sum(memory), count(DISTINCT hostname), max(cpu) FROM "{table.db}"."{table.name}"',
    )
    assert row == ["301", str(expected_mem + 7), "4", "149.5"], row

    listed = ts_write.list_batch_load_tasks(TaskStatus="FAILED")["BatchLoadTasks"]
    (mine,) = [t for t in listed if t["TaskId"] == task]
    assert mine["DatabaseName"] == table.db and mine["TableName"] == table.name


def test_mixed_mappings_csv_options_and_file_urls(ts, ts_write, ts_query, tmp_path):
    table = ts.table(memory_hours=24, magnetic_days=30)
    now_s = int(time.time()) - 60
    (tmp_path / "data.csv").write_text(
        "time|host|measure|value|text\n"
        f"{now_s}|h1|cpu|0.5|NULL\n"
        f"{now_s + 1}| h1 |state|NULL|'up|ok'\n"
        f"{now_s + 2}|h2|other|1|x\n"
    )
    task = _create(
        ts_write,
        table.db,
        table.name,
        f"file://{tmp_path}",
        "data",
        model=_model(multi=False),
        csv={"ColumnSeparator": "|", "QuoteChar": "'", "NullValue": "NULL", "TrimWhiteSpace": True},
    )
    d = _wait(ts_write, task)
    assert d["TaskStatus"] == "SUCCEEDED", d
    assert d["ProgressReport"]["RecordsIngested"] == 2
    rows = _rows(
        ts_query,
        f'SELECT measure_name, host, coalesce(CAST(measure_value::double AS VARCHAR), measure_value::varchar) '
        f'FROM "{table.db}"."{table.name}" ORDER BY measure_name',
    )
    assert rows == [["cpu", "h1", "0.5"], ["state", "h1", "up|ok"]], rows


@pytest.mark.parametrize(
    "change, error, needle",
    [
        ({"TargetTableName": "no_such_table"}, "ResourceNotFoundException", "no_such_table"),
        ({"prefix": "nothing-here/"}, "ValidationException", "prefix"),
        ({"bucket": "../escape"}, "ValidationException", "BucketName"),
        ({"model": {"DataModel": {"DimensionMappings": [{"SourceColumn": "host"}]}}}, "ValidationException", "TimeColumn"),
        ({"csv": {"ColumnSeparator": "::"}}, "ValidationException", "ColumnSeparator"),
    ],
)
def test_bad_tasks_are_refused(ts, ts_write, server, change, error, needle):
    table = ts.table()
    bucket = "refusals"
    (server.data_dir / "buckets" / bucket).mkdir(parents=True, exist_ok=True)
    (server.data_dir / "buckets" / bucket / "a.csv").write_text("time,host,region,cpu,mem\n")
    args = {"bucket": bucket, "prefix": "a", "model": None, "csv": None}
    target = {"TargetTableName": table.name}
    for k, v in change.items():
        (target if k == "TargetTableName" else args)[k] = v
    with pytest.raises(ClientError) as e:
        _create(ts_write, table.db, target["TargetTableName"], args["bucket"], args["prefix"], model=args["model"], csv=args["csv"])
    assert e.value.response["Error"]["Code"] == error
    assert needle in e.value.response["Error"]["Message"]


def test_unknown_tasks_are_not_found_and_finished_ones_do_not_resume(ts_write):
    for call in (ts_write.describe_batch_load_task, ts_write.resume_batch_load_task):
        with pytest.raises(ClientError) as e:
            call(TaskId="NOSUCHTASK0000000000000000000000")
        assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"
