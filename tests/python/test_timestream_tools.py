"""What the tools Timestream users read with send, through boto3, with the response
shapes those tools parse.

- Grafana's Timestream datasource (github.com/grafana/timestream-datasource,
  pkg/timestream/datasource.go `CallResource`): `SHOW DATABASES`, `SHOW TABLES FROM
  "db"`, `SHOW MEASURES FROM "db"."t"`; it reads column 0 of each row for names, and
  the dimensions of a measure from `Data[2].ArrayValue[*].RowValue.Data[0]` of the first
  row (`dimensionsFromRows`). Its graphs read `timeseries` columns
  (`TimeSeriesMeasureValueColumnInfo`, `TimeSeriesValue` datums with `Time` in
  `YYYY-MM-DD hh:mm:ss.fffffffff`) as one frame per row, the other columns as labels
  (pkg/timestream/helper.go, parsers.go).
- The Timestream JDBC driver (github.com/awslabs/amazon-timestream-driver-jdbc,
  TimestreamSchemasResultSet, TimestreamTablesResultSet, TimestreamColumnsResultSet):
  `SHOW DATABASES [LIKE 'p']`, `SHOW TABLES FROM "db" [LIKE 'p']`, `DESCRIBE "db"."t"`;
  it reads columns 1 and 2 (name, type) and upper-cases the type into a ScalarType.
"""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError

from test_timestream_query import cell, multi, name, rec, rows_of, write_all

SCALAR_TYPES = {"BIGINT", "INTEGER", "BOOLEAN", "DOUBLE", "VARCHAR", "DATE", "TIME", "TIMESTAMP"}


def names_in_column_0(resp) -> list[str]:
    return [r["Data"][0]["ScalarValue"] for r in resp["Rows"]]


@pytest.fixture
def devops(ts):
    """A table with single-measure and multi-measure records of two hosts."""
    t = ts.table()
    now = int(time.time() * 1000)
    records = []
    for i in range(6):
        at = now - (6 - i) * 60_000
        for host, az in (("h1", "us-east-1a"), ("h2", "us-east-1b")):
            records.append(rec("cpu_user", f"{10 * i + (host == 'h2')}.5", t=at, host=host, az=az))
            records.append(
                multi(
                    "mem",
                    [("used", str(100 + i), "BIGINT"), ("free", f"{i}.25", "DOUBLE")],
                    t=at,
                    host=host,
                )
            )
    records.append(rec("status", "ok", vtype="VARCHAR", t=now - 30_000, region="eu"))
    write_all(t, records)
    return t


def test_grafana_lists_databases_tables_and_measures(ts_query, devops):
    dbs = ts_query.query(QueryString="SHOW DATABASES")
    assert dbs["ColumnInfo"] == [{"Name": "Database", "Type": {"ScalarType": "VARCHAR"}}]
    assert devops.db in names_in_column_0(dbs)

    tables = ts_query.query(QueryString=f'SHOW TABLES FROM "{devops.db}"')
    assert tables["ColumnInfo"] == [{"Name": "Table", "Type": {"ScalarType": "VARCHAR"}}]
    assert names_in_column_0(tables) == [devops.name]

    measures = ts_query.query(QueryString=f"SHOW MEASURES FROM {name(devops)}")
    assert measures["ColumnInfo"] == [
        {"Name": "measure_name", "Type": {"ScalarType": "VARCHAR"}},
        {"Name": "data_type", "Type": {"ScalarType": "VARCHAR"}},
        {
            "Name": "dimensions",
            "Type": {
                "ArrayColumnInfo": {
                    "Type": {
                        "RowColumnInfo": [
                            {"Name": "dimension_name", "Type": {"ScalarType": "VARCHAR"}},
                            {"Name": "data_type", "Type": {"ScalarType": "VARCHAR"}},
                        ]
                    }
                }
            },
        },
    ]
    by_name = {}
    for r in measures["Rows"]:
        assert len(r["Data"]) == 3
        dims = [d["RowValue"]["Data"] for d in r["Data"][2]["ArrayValue"]]
        by_name[r["Data"][0]["ScalarValue"]] = (
            r["Data"][1]["ScalarValue"],
            [(cell(n), cell(t)) for n, t in dims],
        )
    assert by_name == {
        "cpu_user": ("double", [("host", "varchar"), ("az", "varchar")]),
        "mem": ("multi", [("host", "varchar")]),
        "status": ("varchar", [("region", "varchar")]),
    }
    assert list(by_name) == sorted(by_name)


def test_like_narrows_every_listing(ts_query, devops):
    pattern = devops.db[:-1] + "_"
    dbs = ts_query.query(QueryString=f"SHOW DATABASES LIKE '{pattern}'")
    assert names_in_column_0(dbs) == [devops.db]
    none = ts_query.query(QueryString=f"SHOW TABLES FROM \"{devops.db}\" LIKE 'nope%'")
    assert none["Rows"] == []
    m = ts_query.query(QueryString=f"SHOW MEASURES FROM {name(devops)} LIKE 'c%'")
    assert names_in_column_0(m) == ["cpu_user"]


def test_jdbc_describes_columns_with_timestream_types(ts_query, devops):
    resp = ts_query.query(QueryString=f"DESCRIBE {name(devops)}")
    assert [c["Name"] for c in resp["ColumnInfo"]] == [
        "Column",
        "Type",
        "Timestream attribute type",
    ]
    rows = rows_of(resp)
    assert rows == [
        ["host", "varchar", "DIMENSION"],
        ["az", "varchar", "DIMENSION"],
        ["region", "varchar", "DIMENSION"],
        ["measure_name", "varchar", "MEASURE_NAME"],
        ["time", "timestamp", "TIMESTAMP"],
        ["measure_value::double", "double", "MEASURE_VALUE"],
        ["measure_value::varchar", "varchar", "MEASURE_VALUE"],
        ["free", "double", "MULTI"],
        ["used", "bigint", "MULTI"],
    ]
    # The driver upper-cases the type into a ScalarType.
    assert all(t.upper() in SCALAR_TYPES for _, t, _ in rows)
    # Every described column is a column of SELECT *.
    star = ts_query.query(QueryString=f"SELECT * FROM {name(devops)} LIMIT 1")
    assert [c["Name"] for c in star["ColumnInfo"]] == [r[0] for r in rows]


def test_metadata_errors_name_what_is_missing(ts_query, devops):
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString='SHOW TABLES FROM "no_such_db"')
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert "no_such_db" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=f'DESCRIBE "{devops.db}"."nope"')
    assert e.value.response["Error"]["Code"] == "ResourceNotFoundException"
    assert f"{devops.db}.nope" in e.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as e:
        ts_query.query(QueryString=f'SHOW MEASURES FROM "{devops.db}"')
    assert e.value.response["Error"]["Code"] == "ValidationException"
    assert '"database"."table"' in e.value.response["Error"]["Message"]


def test_grafana_draws_one_series_per_host(ts_query, devops):
    """The multi-series graph of Grafana's Timestream samples: CREATE_TIME_SERIES by host."""
    resp = ts_query.query(
        QueryString=f"SELECT host, CREATE_TIME_SERIES(time, measure_value::double) AS cpu "
        f"FROM {name(devops)} WHERE measure_name = 'cpu_user' GROUP BY host ORDER BY host"
    )
    assert resp["ColumnInfo"] == [
        {"Name": "host", "Type": {"ScalarType": "VARCHAR"}},
        {
            "Name": "cpu",
            "Type": {"TimeSeriesMeasureValueColumnInfo": {"Type": {"ScalarType": "DOUBLE"}}},
        },
    ]
    assert [r["Data"][0]["ScalarValue"] for r in resp["Rows"]] == ["h1", "h2"]
    for host_row in resp["Rows"]:
        points = host_row["Data"][1]["TimeSeriesValue"]
        assert len(points) == 6
        times = [p["Time"] for p in points]
        assert times == sorted(times)
        # Grafana parses Time with the layout "2006-01-02 15:04:05.99999999".
        for p in points:
            date, clock = p["Time"].split(" ")
            assert len(date) == 10 and len(clock) == 18, p
        offset = 1 if host_row["Data"][0]["ScalarValue"] == "h2" else 0
        values = [float(p["Value"]["ScalarValue"]) for p in points]
        assert values == [10 * i + offset + 0.5 for i in range(6)]
