"""The Timestream write API (`timestream-write`, AWS JSON 1.0) through boto3.

Semantics are AWS Timestream's as documented in the botocore service model and the AWS
developer guide (quotas page): catalog operations, pagination, WriteRecords with its
per-record `RejectedRecords`, versioned upserts, and memory/magnetic store retention.

There is no Query API, so stored data is checked through the write API itself: a record
that is stored makes a rewrite with the same version but another value fail with
`ExistingVersion`, and an identical rewrite succeed (idempotent); a record that is not
stored makes the changed rewrite succeed. `assert_stored` / `assert_not_stored` do that.
Record times are taken from the current clock so that they fall in the memory store.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import pytest
from botocore.exceptions import ClientError, ParamValidationError

from bt_helpers import TsTable, isolated_aws_env, ts_list_all, ts_write_client

HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS


# ---- helpers ---------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def dims(**kv) -> list[dict]:
    return [{"Name": k, "Value": v} for k, v in kv.items()]


def rec(measure, value, vtype="DOUBLE", t=None, d=None, version=None, unit=None) -> dict:
    """A single-measure record; `d` is a dict of dimensions (default {"host": "h1"})."""
    r = {
        "Dimensions": dims(**(d if d is not None else {"host": "h1"})),
        "MeasureName": measure,
        "MeasureValue": value,
        "MeasureValueType": vtype,
        "Time": str(now_ms() if t is None else t),
    }
    if version is not None:
        r["Version"] = version
    if unit is not None:
        r["TimeUnit"] = unit
    return r


def multi(measure, values, t=None, d=None, version=None) -> dict:
    """A MULTI record; `values` is [(name, value, type), ...]."""
    r = {
        "Dimensions": dims(**(d if d is not None else {"host": "h1"})),
        "MeasureName": measure,
        "MeasureValueType": "MULTI",
        "MeasureValues": [{"Name": n, "Value": v, "Type": ty} for n, v, ty in values],
        "Time": str(now_ms() if t is None else t),
    }
    if version is not None:
        r["Version"] = version
    return r


def _bump(value: str, vtype: str) -> str:
    """Another valid value of the same type."""
    if vtype == "BOOLEAN":
        return "false" if value.lower() == "true" else "true"
    if vtype == "VARCHAR":
        return value + "-changed"
    if vtype in ("BIGINT", "TIMESTAMP"):
        return str(int(value) + 1)
    return repr(float(value) + 1.0)  # DOUBLE


def changed(r: dict) -> dict:
    """`r` with a different measure value (the first one for MULTI), same identity."""
    r = {**r}
    if r.get("MeasureValueType") == "MULTI":
        mvs = [dict(mv) for mv in r["MeasureValues"]]
        mvs[0]["Value"] = _bump(mvs[0]["Value"], mvs[0]["Type"])
        r["MeasureValues"] = mvs
    else:
        r["MeasureValue"] = _bump(r["MeasureValue"], r.get("MeasureValueType", "DOUBLE"))
    return r


def ingested(resp) -> tuple[int, int, int]:
    ri = resp["RecordsIngested"]
    return ri.get("Total"), ri.get("MemoryStore"), ri.get("MagneticStore")


def error_of(excinfo) -> dict:
    err = excinfo.value.response
    status = err["ResponseMetadata"]["HTTPStatusCode"]
    # 4xx: a client error (a 5xx would also make boto3 retry it).
    assert 400 <= status < 500, f"HTTP {status} for {err['Error']}"
    assert err["Error"]["Message"], f"empty message for {err['Error']}"
    return err


def rejected(excinfo) -> dict[int, dict]:
    """RecordIndex -> RejectedRecord of a RejectedRecordsException, shape-checked."""
    err = error_of(excinfo)
    assert err["Error"]["Code"] == "RejectedRecordsException"
    out: dict[int, dict] = {}
    assert err.get("RejectedRecords"), f"no RejectedRecords in {err}"
    for rr in err["RejectedRecords"]:
        assert isinstance(rr["RecordIndex"], int), rr
        assert isinstance(rr.get("Reason"), str) and rr["Reason"].strip(), rr
        assert rr["RecordIndex"] not in out, f"index reported twice: {err['RejectedRecords']}"
        out[rr["RecordIndex"]] = rr
    return out


def write_rejected(table, records, common=None) -> dict[int, dict]:
    with pytest.raises(table.client.exceptions.RejectedRecordsException) as ei:
        table.write(records, common)
    return rejected(ei)


def assert_stored(table, records, version=1, common=None):
    """Each record is stored (with `version`): a changed value at the same version is
    rejected with ExistingVersion (checked first: a rewrite would store it), and an
    identical rewrite is accepted."""
    bad = write_rejected(table, [changed(r) for r in records], common)
    assert sorted(bad) == list(range(len(records))), bad
    for i, rr in bad.items():
        assert rr.get("ExistingVersion") == version, (i, rr)
    resp = table.write(records, common)
    assert ingested(resp)[0] == len(records)


def assert_not_stored(table, records):
    """No record with these identities exists: a changed value is accepted as new."""
    resp = table.write([changed(r) for r in records])
    assert ingested(resp)[0] == len(records)


def near_now(t: dt.datetime, slack_s: float = 300) -> bool:
    return abs((dt.datetime.now(dt.timezone.utc) - t).total_seconds()) < slack_s


# ---- DescribeEndpoints -----------------------------------------------------------


def test_describe_endpoints(ts_write):
    resp = ts_write.describe_endpoints()
    assert resp["ResponseMetadata"]["HTTPStatusCode"] == 200
    endpoints = resp["Endpoints"]
    assert len(endpoints) >= 1
    for ep in endpoints:
        assert isinstance(ep["Address"], str) and ep["Address"], ep
        assert isinstance(ep["CachePeriodInMinutes"], int), ep
        assert ep["CachePeriodInMinutes"] > 0, ep


# ---- databases -------------------------------------------------------------------


def test_create_and_describe_database(ts, ts_write):
    name = ts.name()
    created = ts_write.create_database(DatabaseName=name)["Database"]
    ts.track(name)
    assert created["DatabaseName"] == name
    assert created["Arn"].startswith("arn:aws:timestream:"), created["Arn"]
    assert created["Arn"].endswith(f":database/{name}"), created["Arn"]
    assert created.get("TableCount", 0) == 0
    assert near_now(created["CreationTime"])

    described = ts_write.describe_database(DatabaseName=name)["Database"]
    assert described["DatabaseName"] == name
    assert described["Arn"] == created["Arn"]
    assert described["TableCount"] == 0
    assert described["CreationTime"] == created["CreationTime"]
    if "LastUpdatedTime" in described:
        assert described["LastUpdatedTime"] >= described["CreationTime"]


def test_create_database_twice_conflicts(ts, ts_write):
    name = ts.database()
    with pytest.raises(ts_write.exceptions.ConflictException) as ei:
        ts_write.create_database(DatabaseName=name)
    error_of(ei)
    # The first one is untouched.
    assert ts_write.describe_database(DatabaseName=name)["Database"]["DatabaseName"] == name


@pytest.mark.parametrize(
    "bad",
    ["", "ab", "x" * 257, "has space", "slash/name", "colon:name", "uml\u00e4ut", "star*"],
    ids=["empty", "too-short", "too-long", "space", "slash", "colon", "non-ascii", "star"],
)
def test_create_database_bad_name_is_validation_error(ts_write, bad):
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.create_database(DatabaseName=bad)
    error_of(ei)
    with pytest.raises(ClientError):
        ts_write.describe_database(DatabaseName=bad)


def test_database_name_limits_inclusive(ts, ts_write):
    """3 and 256 characters of [a-zA-Z0-9_.-] are valid names."""
    short = uuid.uuid4().hex[:3]
    ts.database(short)
    assert ts_write.describe_database(DatabaseName=short)["Database"]["DatabaseName"] == short
    long = ("A.b-C_9" + uuid.uuid4().hex) * 10
    long = long[:256]
    ts.database(long)
    assert ts_write.describe_database(DatabaseName=long)["Database"]["DatabaseName"] == long


def test_missing_database_is_not_found(ts_write):
    missing = f"missing_{uuid.uuid4().hex}"
    errors = ts_write.exceptions
    with pytest.raises(errors.ResourceNotFoundException) as ei:
        ts_write.describe_database(DatabaseName=missing)
    error_of(ei)
    with pytest.raises(errors.ResourceNotFoundException):
        ts_write.update_database(DatabaseName=missing, KmsKeyId="alias/almanac")
    with pytest.raises(errors.ResourceNotFoundException):
        ts_write.delete_database(DatabaseName=missing)
    with pytest.raises(errors.ResourceNotFoundException):
        ts_write.list_tables(DatabaseName=missing)


def test_update_database_kms_key(ts, ts_write):
    name = ts.database()
    before = ts_write.describe_database(DatabaseName=name)["Database"]
    resp = ts_write.update_database(DatabaseName=name, KmsKeyId="alias/almanac-test-key")
    assert resp["Database"]["DatabaseName"] == name
    assert resp["Database"]["KmsKeyId"] == "alias/almanac-test-key"
    after = ts_write.describe_database(DatabaseName=name)["Database"]
    assert after["KmsKeyId"] == "alias/almanac-test-key"
    assert after["CreationTime"] == before["CreationTime"]
    assert after["Arn"] == before["Arn"]


def test_delete_database(ts, ts_write):
    name = ts.database()
    ts_write.delete_database(DatabaseName=name)
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        ts_write.describe_database(DatabaseName=name)
    listed = {d["DatabaseName"] for d in ts_list_all(ts_write, "list_databases", "Databases")}
    assert name not in listed
    # The name is free again.
    ts_write.create_database(DatabaseName=name)
    assert ts_write.describe_database(DatabaseName=name)["Database"]["TableCount"] == 0


def test_delete_nonempty_database_is_validation_error(ts, ts_write):
    """DeleteDatabase doc: "All tables in the database must be deleted first, or a
    ValidationException error will be thrown"."""
    tbl = ts.table()
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.delete_database(DatabaseName=tbl.db)
    error_of(ei)
    assert ts_write.describe_database(DatabaseName=tbl.db)["Database"]["TableCount"] == 1
    assert tbl.describe()["TableStatus"] == "ACTIVE"
    ts_write.delete_table(DatabaseName=tbl.db, TableName=tbl.name)
    ts_write.delete_database(DatabaseName=tbl.db)
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        ts_write.describe_database(DatabaseName=tbl.db)


def test_table_count(ts, ts_write):
    db = ts.database()
    a = ts.table(db)
    ts.table(db)
    assert ts_write.describe_database(DatabaseName=db)["Database"]["TableCount"] == 2
    listed = {d["DatabaseName"]: d for d in ts_list_all(ts_write, "list_databases", "Databases")}
    assert listed[db]["TableCount"] == 2
    ts_write.delete_table(DatabaseName=db, TableName=a.name)
    assert ts_write.describe_database(DatabaseName=db)["Database"]["TableCount"] == 1


# ---- tables ----------------------------------------------------------------------


def test_create_table_defaults(ts, ts_write):
    """No RetentionProperties: AWS defaults are 6 hours memory, 73000 days magnetic."""
    db = ts.database()
    name = ts.name()
    created = ts_write.create_table(DatabaseName=db, TableName=name)["Table"]
    for t in (created, ts_write.describe_table(DatabaseName=db, TableName=name)["Table"]):
        assert t["DatabaseName"] == db and t["TableName"] == name
        assert t["TableStatus"] == "ACTIVE"
        assert t["Arn"].startswith("arn:aws:timestream:"), t["Arn"]
        assert t["Arn"].endswith(f":database/{db}/table/{name}"), t["Arn"]
        assert near_now(t["CreationTime"])
        assert t["RetentionProperties"] == {
            "MemoryStoreRetentionPeriodInHours": 6,
            "MagneticStoreRetentionPeriodInDays": 73000,
        }
        mag = t.get("MagneticStoreWriteProperties", {"EnableMagneticStoreWrites": False})
        assert mag["EnableMagneticStoreWrites"] is False


def test_create_table_properties_round_trip(ts, ts_write):
    db = ts.database()
    name = ts.name()
    retention = {
        "MemoryStoreRetentionPeriodInHours": 24,
        "MagneticStoreRetentionPeriodInDays": 30,
    }
    magnetic = {
        "EnableMagneticStoreWrites": True,
        "MagneticStoreRejectedDataLocation": {
            "S3Configuration": {
                "BucketName": "almanac-rejects",
                "ObjectKeyPrefix": "ts-errors",
                "EncryptionOption": "SSE_S3",
            }
        },
    }
    created = ts_write.create_table(
        DatabaseName=db,
        TableName=name,
        RetentionProperties=retention,
        MagneticStoreWriteProperties=magnetic,
    )["Table"]
    described = ts_write.describe_table(DatabaseName=db, TableName=name)["Table"]
    for t in (created, described):
        assert t["RetentionProperties"] == retention
        assert t["MagneticStoreWriteProperties"] == magnetic
        assert t["TableStatus"] == "ACTIVE"
    assert described["CreationTime"] == created["CreationTime"]
    assert described["Arn"] == created["Arn"]


def test_update_table(ts, ts_write):
    tbl = ts.table(memory_hours=12, magnetic_days=100)
    before = tbl.describe()

    new_retention = {
        "MemoryStoreRetentionPeriodInHours": 2,
        "MagneticStoreRetentionPeriodInDays": 7,
    }
    updated = ts_write.update_table(
        DatabaseName=tbl.db, TableName=tbl.name, RetentionProperties=new_retention
    )["Table"]
    assert updated["RetentionProperties"] == new_retention
    assert tbl.describe()["RetentionProperties"] == new_retention

    # Only the magnetic write properties: retention stays as it is.
    updated = ts_write.update_table(
        DatabaseName=tbl.db,
        TableName=tbl.name,
        MagneticStoreWriteProperties={"EnableMagneticStoreWrites": True},
    )["Table"]
    assert updated["MagneticStoreWriteProperties"]["EnableMagneticStoreWrites"] is True
    after = tbl.describe()
    assert after["RetentionProperties"] == new_retention
    assert after["MagneticStoreWriteProperties"]["EnableMagneticStoreWrites"] is True
    assert after["CreationTime"] == before["CreationTime"]
    assert after["Arn"] == before["Arn"]
    assert after["TableStatus"] == "ACTIVE"
    if "LastUpdatedTime" in after:
        assert after["LastUpdatedTime"] >= after["CreationTime"]


def test_dimension_partition_key_is_enforced(ts, ts_write):
    """Schema.CompositePartitionKey: echoed, a REQUIRED dimension key rejects records
    without it (CommonAttributes count), UpdateTable may change only the enforcement."""
    db = ts.database()
    name = ts.name()
    key = {"Type": "DIMENSION", "Name": "host", "EnforcementInRecord": "REQUIRED"}
    created = ts_write.create_table(
        DatabaseName=db, TableName=name, Schema={"CompositePartitionKey": [key]}
    )["Table"]
    assert created["Schema"] == {"CompositePartitionKey": [key]}
    tbl = TsTable(ts_write, db, name, created)
    good = rec("cpu", "1.5", d={"host": "a", "dc": "x"})
    bad = rec("cpu", "2.5", d={"dc": "x"})
    got = write_rejected(tbl, [good, bad])
    assert list(got) == [1]
    assert "host" in got[1]["Reason"], got
    assert_stored(tbl, [good])
    # From CommonAttributes, the key is there.
    assert ingested(tbl.write([bad], common={"Dimensions": dims(host="b")}))[0] == 1

    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.update_table(
            DatabaseName=db,
            TableName=name,
            Schema={"CompositePartitionKey": [dict(key, Name="dc")]},
        )
    assert "cannot change" in error_of(ei)["Error"]["Message"]
    optional = dict(key, EnforcementInRecord="OPTIONAL")
    updated = ts_write.update_table(
        DatabaseName=db, TableName=name, Schema={"CompositePartitionKey": [optional]}
    )["Table"]
    assert updated["Schema"] == {"CompositePartitionKey": [optional]}
    assert tbl.describe()["Schema"] == {"CompositePartitionKey": [optional]}
    assert ingested(tbl.write([rec("cpu", "3.5", d={"dc": "y"})]))[0] == 1


def test_default_partition_key_is_measure_name(ts):
    assert ts.table().describe()["Schema"] == {"CompositePartitionKey": [{"Type": "MEASURE"}]}


@pytest.mark.parametrize(
    "schema, says",
    [
        ({"CompositePartitionKey": []}, "it has 0"),
        ({"CompositePartitionKey": [{"Type": "MEASURE"}, {"Type": "MEASURE"}]}, "it has 2"),
        ({"CompositePartitionKey": [{"Type": "TIME"}]}, "DIMENSION, MEASURE"),
        ({"CompositePartitionKey": [{"Type": "DIMENSION"}]}, "Name is required"),
        ({"CompositePartitionKey": [{"Type": "MEASURE", "Name": "x"}]}, "takes no Name"),
        (
            {"CompositePartitionKey": [{"Type": "DIMENSION", "Name": "x", "EnforcementInRecord": "NO"}]},
            "REQUIRED, OPTIONAL",
        ),
    ],
    ids=["empty", "two-keys", "bad-type", "dimension-without-name", "measure-with-name", "bad-enforcement"],
)
def test_bad_partition_key_is_validation_error(ts, ts_write_unvalidated, schema, says):
    client = ts_write_unvalidated  # botocore refuses some of these itself
    db = ts.database()
    with pytest.raises(client.exceptions.ValidationException) as ei:
        client.create_table(DatabaseName=db, TableName="tbl", Schema=schema)
    assert says in error_of(ei)["Error"]["Message"]
    with pytest.raises(client.exceptions.ResourceNotFoundException):
        client.describe_table(DatabaseName=db, TableName="tbl")


def test_tags_of_databases_and_tables(ts, ts_write, ts_query):
    """Tags given at creation are listed; TagResource adds or replaces, UntagResource
    removes; the query client's tagging calls see the same tags."""
    db = ts.name()
    d = ts_write.create_database(DatabaseName=db, Tags=[{"Key": "team", "Value": "a"}])["Database"]
    ts.track(db)
    assert ts_write.list_tags_for_resource(ResourceARN=d["Arn"])["Tags"] == [
        {"Key": "team", "Value": "a"}
    ]
    t = ts_write.create_table(
        DatabaseName=db,
        TableName="tagged",
        Tags=[{"Key": "env", "Value": "prod"}],
    )["Table"]
    assert ts_write.list_tags_for_resource(ResourceARN=t["Arn"])["Tags"] == [
        {"Key": "env", "Value": "prod"}
    ]
    ts_write.tag_resource(
        ResourceARN=t["Arn"],
        Tags=[{"Key": "env", "Value": "dev"}, {"Key": "owner", "Value": "me"}],
    )
    got = ts_query.list_tags_for_resource(ResourceARN=t["Arn"])["Tags"]
    assert sorted((x["Key"], x["Value"]) for x in got) == [("env", "dev"), ("owner", "me")]
    ts_write.untag_resource(ResourceARN=t["Arn"], TagKeys=["env", "absent"])
    assert ts_write.list_tags_for_resource(ResourceARN=t["Arn"])["Tags"] == [
        {"Key": "owner", "Value": "me"}
    ]
    # The database's tags are its own.
    assert ts_write.list_tags_for_resource(ResourceARN=d["Arn"])["Tags"] == [
        {"Key": "team", "Value": "a"}
    ]


def test_tagging_errors(ts, ts_write, ts_write_unvalidated):
    db = ts.database()
    arn = ts_write.describe_database(DatabaseName=db)["Database"]["Arn"]
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        ts_write.list_tags_for_resource(ResourceARN=f"{arn}/table/missing")
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        ts_write.tag_resource(ResourceARN=arn + "x", Tags=[{"Key": "k", "Value": "v"}])
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.list_tags_for_resource(ResourceARN="arn:aws:s3:::bucket")
    assert "not a Timestream database or table ARN" in error_of(ei)["Error"]["Message"]
    client = ts_write_unvalidated  # botocore checks key lengths itself
    for tags, says in [
        ([{"Key": "aws:x", "Value": "v"}], "reserved for AWS"),
        ([{"Key": "k" * 129, "Value": "v"}], "1 to 128"),
        ([{"Key": "k", "Value": "v" * 257}], "the limit is 256"),
        ([{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}], "more than once"),
    ]:
        with pytest.raises(client.exceptions.ValidationException) as ei:
            client.tag_resource(ResourceARN=arn, Tags=tags)
        assert says in error_of(ei)["Error"]["Message"]
    many = [{"Key": f"k{i}", "Value": "v"} for i in range(150)]
    ts_write.tag_resource(ResourceARN=arn, Tags=many[:100])
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.tag_resource(ResourceARN=arn, Tags=[{"Key": f"more{i}", "Value": "v"} for i in range(101)])
    assert "the limit is 200" in error_of(ei)["Error"]["Message"]
    # A refused request changed nothing.
    assert len(ts_write.list_tags_for_resource(ResourceARN=arn)["Tags"]) == 100


def test_create_table_in_missing_database_is_not_found(ts_write):
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException) as ei:
        ts_write.create_table(DatabaseName=f"missing_{uuid.uuid4().hex}", TableName="tbl")
    error_of(ei)


def test_create_table_twice_conflicts_but_other_database_is_fine(ts, ts_write):
    tbl = ts.table(memory_hours=3, magnetic_days=3)
    with pytest.raises(ts_write.exceptions.ConflictException) as ei:
        ts_write.create_table(DatabaseName=tbl.db, TableName=tbl.name)
    error_of(ei)
    assert tbl.describe()["RetentionProperties"]["MemoryStoreRetentionPeriodInHours"] == 3
    # Same table name in another database is a different table.
    other = ts.table(name=tbl.name)
    assert other.db != tbl.db
    assert other.describe()["TableName"] == tbl.name


@pytest.mark.parametrize(
    "bad",
    ["", "ab", "y" * 257, "has space", "slash/name", "colon:name", "uml\u00e4ut"],
    ids=["empty", "too-short", "too-long", "space", "slash", "colon", "non-ascii"],
)
def test_create_table_bad_name_is_validation_error(ts, ts_write, bad):
    db = ts.database()
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.create_table(DatabaseName=db, TableName=bad)
    error_of(ei)
    assert ts_write.describe_database(DatabaseName=db)["Database"]["TableCount"] == 0


def test_table_name_limits_inclusive(ts, ts_write):
    db = ts.database()
    for name in ("t.1", ("T-_." + uuid.uuid4().hex) * 8):
        name = name[:256]
        ts.table(db, name=name)
        got = ts_write.describe_table(DatabaseName=db, TableName=name)["Table"]
        assert got["TableName"] == name


@pytest.mark.parametrize(
    "retention",
    [
        {"MemoryStoreRetentionPeriodInHours": 8767, "MagneticStoreRetentionPeriodInDays": 1},
        {"MemoryStoreRetentionPeriodInHours": 1, "MagneticStoreRetentionPeriodInDays": 73001},
        {"MemoryStoreRetentionPeriodInHours": 0, "MagneticStoreRetentionPeriodInDays": 1},
        {"MemoryStoreRetentionPeriodInHours": 1, "MagneticStoreRetentionPeriodInDays": 0},
    ],
    ids=["memory-8767h", "magnetic-73001d", "memory-0", "magnetic-0"],
)
def test_retention_out_of_range_is_validation_error(ts, ts_write_unvalidated, retention):
    """Memory store 1..8766 hours, magnetic store 1..73000 days, on create and update."""
    client = ts_write_unvalidated  # botocore itself refuses the zeros (model `min`)
    db = ts.database()
    with pytest.raises(client.exceptions.ValidationException) as ei:
        client.create_table(DatabaseName=db, TableName="tbl", RetentionProperties=retention)
    error_of(ei)
    tbl = ts.table(db, memory_hours=5, magnetic_days=5)
    with pytest.raises(client.exceptions.ValidationException):
        client.update_table(DatabaseName=db, TableName=tbl.name, RetentionProperties=retention)
    assert tbl.describe()["RetentionProperties"] == {
        "MemoryStoreRetentionPeriodInHours": 5,
        "MagneticStoreRetentionPeriodInDays": 5,
    }


def test_retention_limits_inclusive(ts):
    tbl = ts.table(memory_hours=8766, magnetic_days=73000)
    assert tbl.describe()["RetentionProperties"] == {
        "MemoryStoreRetentionPeriodInHours": 8766,
        "MagneticStoreRetentionPeriodInDays": 73000,
    }
    tbl = ts.table(memory_hours=1, magnetic_days=1)
    assert tbl.describe()["RetentionProperties"] == {
        "MemoryStoreRetentionPeriodInHours": 1,
        "MagneticStoreRetentionPeriodInDays": 1,
    }


def test_missing_table_is_not_found(ts, ts_write):
    db = ts.database()
    errors = ts_write.exceptions
    for database in (db, f"missing_{uuid.uuid4().hex}"):
        with pytest.raises(errors.ResourceNotFoundException) as ei:
            ts_write.describe_table(DatabaseName=database, TableName="nope")
        error_of(ei)
        with pytest.raises(errors.ResourceNotFoundException):
            ts_write.update_table(
                DatabaseName=database,
                TableName="nope",
                RetentionProperties={
                    "MemoryStoreRetentionPeriodInHours": 1,
                    "MagneticStoreRetentionPeriodInDays": 1,
                },
            )
        with pytest.raises(errors.ResourceNotFoundException):
            ts_write.delete_table(DatabaseName=database, TableName="nope")
        with pytest.raises(errors.ResourceNotFoundException):
            ts_write.write_records(
                DatabaseName=database, TableName="nope", Records=[rec("m", "1")]
            )


def test_delete_table(ts, ts_write):
    tbl = ts.table()
    old = rec("cpu", "1.0", "DOUBLE", now_ms())
    tbl.write([old, rec("mem", "1.5", "DOUBLE", now_ms() - 1000)])
    ts_write.delete_table(DatabaseName=tbl.db, TableName=tbl.name)
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        tbl.describe()
    tables = ts_list_all(ts_write, "list_tables", "Tables", DatabaseName=tbl.db)
    assert tbl.name not in {t["TableName"] for t in tables}
    with pytest.raises(ts_write.exceptions.ResourceNotFoundException):
        tbl.write([old])
    # Re-created under the same name it is a new, empty table: the old point is gone and
    # the measure may take another type.
    ts.table(tbl.db, name=tbl.name)
    assert_not_stored(tbl, [old])
    assert ingested(tbl.write([rec("mem", "7", "BIGINT", now_ms() - 1000)]))[0] == 1


# ---- pagination ------------------------------------------------------------------


def test_list_databases_pages(ts, ts_write):
    mine = {ts.database() for _ in range(7)}
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        args = {"MaxResults": 3}
        if token:
            args["NextToken"] = token
        resp = ts_write.list_databases(**args)
        page = resp["Databases"]
        assert len(page) <= 3
        seen += [d["DatabaseName"] for d in page]
        for d in page:
            if d["DatabaseName"] in mine:
                assert d["Arn"].endswith(f":database/{d['DatabaseName']}")
                assert d["TableCount"] == 0
        pages += 1
        token = resp.get("NextToken")
        if not token:
            break
        assert pages < 1000, "ListDatabases never ends"
    assert pages >= 3, "7+ databases at 3 per page need at least 3 pages"
    assert len(seen) == len(set(seen)), f"a database was listed twice: {seen}"
    assert mine <= set(seen)


def test_list_tables_pages(ts, ts_write):
    db = ts.database()
    mine = {ts.table(db, memory_hours=2, magnetic_days=3).name for _ in range(7)}
    ts.table()  # another database's table must not show up
    tables = ts_list_all(ts_write, "list_tables", "Tables", page_size=2, DatabaseName=db)
    names = [t["TableName"] for t in tables]
    assert sorted(names) == sorted(mine)
    for t in tables:
        assert t["DatabaseName"] == db
        assert t["TableStatus"] == "ACTIVE"
        assert t["RetentionProperties"] == {
            "MemoryStoreRetentionPeriodInHours": 2,
            "MagneticStoreRetentionPeriodInDays": 3,
        }
    # A first page that is cut short says so.
    first = ts_write.list_tables(DatabaseName=db, MaxResults=2)
    assert len(first["Tables"]) == 2 and first.get("NextToken")
    # Without MaxResults: still every table exactly once (however the server pages).
    unpaged = ts_list_all(ts_write, "list_tables", "Tables", DatabaseName=db)
    assert sorted(t["TableName"] for t in unpaged) == sorted(mine)


def test_list_max_results_above_20_is_validation_error(ts, ts_write):
    db = ts.database()
    with pytest.raises(ts_write.exceptions.ValidationException) as ei:
        ts_write.list_databases(MaxResults=21)
    error_of(ei)
    with pytest.raises(ts_write.exceptions.ValidationException):
        ts_write.list_tables(DatabaseName=db, MaxResults=21)
    assert "Databases" in ts_write.list_databases(MaxResults=20)


# ---- WriteRecords: types, units, common attributes --------------------------------


def test_write_each_scalar_type(ts):
    tbl = ts.table()
    t = now_ms()
    records = [
        rec("cpu", "12.5", "DOUBLE", t),
        rec("count", "-9223372036854775808", "BIGINT", t),
        rec("up", "true", "BOOLEAN", t),
        rec("state", "running \u2713", "VARCHAR", t),
    ]
    resp = tbl.write(records)
    assert ingested(resp) == (4, 4, 0)
    assert_stored(tbl, records)


def test_default_measure_value_type_is_double(ts):
    tbl = ts.table()
    t = now_ms()
    untyped = rec("load", "0.75", t=t)
    del untyped["MeasureValueType"]
    assert ingested(tbl.write([untyped]))[0] == 1
    # Stored as DOUBLE: the explicitly typed record is the same one...
    assert_stored(tbl, [rec("load", "0.75", "DOUBLE", t)])
    # ...and the measure name is now DOUBLE, so a BIGINT of it is rejected.
    bad = write_rejected(tbl, [rec("load", "1", "BIGINT", t - 1000)])
    assert list(bad) == [0]
    assert "ExistingVersion" not in bad[0]


def test_measure_type_conflict_is_rejected(ts):
    tbl = ts.table()
    t = now_ms()
    tbl.write([rec("temp", "21", "BIGINT", t)])
    bad = write_rejected(tbl, [rec("temp", "21.5", "DOUBLE", t - 1000)])
    assert list(bad) == [0]
    # Other series of the same table still take the original type.
    assert ingested(tbl.write([rec("temp", "22", "BIGINT", t - 2000, d={"host": "h2"})]))[0] == 1


def test_multi_measure_record(ts):
    tbl = ts.table()
    t = now_ms()
    r = multi(
        "metrics",
        [
            ("cpu", "0.5", "DOUBLE"),
            ("mem", "1024", "BIGINT"),
            ("state", "ok", "VARCHAR"),
            ("healthy", "false", "BOOLEAN"),
            ("booted", str(t - 60_000), "TIMESTAMP"),
        ],
        t=t,
    )
    assert ingested(tbl.write([r])) == (1, 1, 0)
    assert_stored(tbl, [r])
    # Only one of the measure values differing is still a different value.
    other = {**r, "MeasureValues": [dict(mv) for mv in r["MeasureValues"]]}
    other["MeasureValues"][3]["Value"] = "true"
    bad = write_rejected(tbl, [other])
    assert bad[0]["ExistingVersion"] == 1


def test_common_attributes_are_merged(ts):
    tbl = ts.table()
    t = now_ms()
    common = {
        "Dimensions": dims(region="eu-1"),
        "MeasureValueType": "BIGINT",
        "Time": str(t),
        "TimeUnit": "MILLISECONDS",
        "Version": 3,
    }
    records = [
        {"Dimensions": dims(host="a"), "MeasureName": "req", "MeasureValue": "10"},
        {"Dimensions": dims(host="b"), "MeasureName": "req", "MeasureValue": "20"},
        {"Dimensions": dims(host="b"), "MeasureName": "err", "MeasureValue": "1"},
    ]
    assert ingested(tbl.write(records, common))[0] == 3
    # The same records spelled out in full are the stored ones, at version 3.
    full = [
        rec("req", "10", "BIGINT", t, {"region": "eu-1", "host": "a"}, version=3),
        rec("req", "20", "BIGINT", t, {"region": "eu-1", "host": "b"}, version=3),
        rec("err", "1", "BIGINT", t, {"region": "eu-1", "host": "b"}, version=3),
    ]
    assert_stored(tbl, full, version=3)
    # Without the common dimension it is another series: nothing stored there.
    assert_not_stored(tbl, [rec("req", "10", "BIGINT", t, {"host": "a"})])


def test_common_and_record_dimension_overlap_is_validation_error(ts):
    tbl = ts.table()
    with pytest.raises(tbl.client.exceptions.ValidationException) as ei:
        tbl.write([rec("m", "1", d={"host": "h1"})], common={"Dimensions": dims(host="h2")})
    error_of(ei)
    assert_not_stored(tbl, [rec("m", "1", d={"host": "h1"})])


def test_dimension_order_does_not_matter(ts):
    tbl = ts.table()
    t = now_ms()
    tbl.write([rec("m", "1", t=t, d={"a": "1", "b": "2"})])
    r = rec("m", "1", t=t, d={"a": "1", "b": "2"})
    r["Dimensions"] = list(reversed(r["Dimensions"]))
    assert_stored(tbl, [r])


@pytest.mark.parametrize("unit", ["SECONDS", "MILLISECONDS", "MICROSECONDS", "NANOSECONDS"])
def test_each_time_unit_is_accepted(ts, unit):
    tbl = ts.table()
    scale = {"SECONDS": 1, "MILLISECONDS": 10**3, "MICROSECONDS": 10**6, "NANOSECONDS": 10**9}[unit]
    t = time.time_ns() * scale // 10**9
    resp = tbl.write([rec("m", "1", t=t, unit=unit)])
    assert ingested(resp) == (1, 1, 0)


def test_time_units_name_the_same_instant(ts):
    tbl = ts.table()
    t_s = int(time.time()) - 60
    assert ingested(tbl.write([rec("m", "7", t=t_s, unit="SECONDS")]))[0] == 1
    for same_instant in (
        rec("m", "7", t=t_s * 10**3, unit="MILLISECONDS"),
        rec("m", "7", t=t_s * 10**6, unit="MICROSECONDS"),
        rec("m", "7", t=t_s * 10**9, unit="NANOSECONDS"),
    ):
        assert_stored(tbl, [same_instant])
    # One nanosecond later is a different point.
    assert_not_stored(tbl, [rec("m", "7", t=t_s * 10**9 + 1, unit="NANOSECONDS")])


def test_default_time_unit_is_milliseconds(ts):
    tbl = ts.table()
    t = now_ms()
    r = rec("m", "1", t=t)
    assert "TimeUnit" not in r
    tbl.write([r])
    assert_stored(tbl, [rec("m", "1", t=t * 1000, unit="MICROSECONDS")])


# ---- WriteRecords: rejected records ------------------------------------------------


BAD_RECORDS = {
    # a measure whose type conflicts with an earlier write of the same measure name
    "type-conflict": lambda t: rec("typed", "1.5", "DOUBLE", t - 5000),
    "empty-dimension-value": lambda t: rec("m", "1", t=t, d={"host": ""}),
    # older than the table's 1-hour memory store, magnetic writes off
    "too-old": lambda t: rec("m", "1", t=t - 2 * HOUR_MS),
    # dimension name + value above the 2 KB limit
    "dimension-value-too-long": lambda t: rec("m", "1", t=t, d={"host": "v" * 4096}),
    "reserved-prefix-ts_": lambda t: rec("m", "1", t=t, d={"ts_host": "x"}),
    "reserved-prefix-measure_value": lambda t: rec("m", "1", t=t, d={"measure_value_x": "x"}),
    "reserved-name-time": lambda t: rec("m", "1", t=t, d={"time": "x"}),
    "dimension-name-too-long": lambda t: rec("m", "1", t=t, d={"d" * 61: "x"}),
    "too-far-in-future": lambda t: rec("m", "1", t=t + HOUR_MS),
}


@pytest.fixture
def reject_table(ts):
    """1-hour memory store, no magnetic writes, measure `typed` already BIGINT."""
    tbl = ts.table(memory_hours=1, magnetic_days=1)
    tbl.write([rec("typed", "1", "BIGINT", now_ms() - 10_000)])
    return tbl


@pytest.mark.parametrize("reason", list(BAD_RECORDS))
def test_bad_record_is_rejected_and_the_rest_ingested(reject_table, reason):
    tbl = reject_table
    t = now_ms()
    good_a = rec("good", "1", t=t, d={"host": "a"})
    good_b = rec("good", "2", t=t, d={"host": "b"})
    bad = write_rejected(tbl, [good_a, BAD_RECORDS[reason](t), good_b])
    assert list(bad) == [1], bad
    assert "ExistingVersion" not in bad[1], bad[1]
    assert_stored(tbl, [good_a, good_b])


def test_mixed_batch_rejects_exactly_the_bad_records(reject_table):
    tbl = reject_table
    t = now_ms()
    batch = []
    good: list[dict] = []
    bad_at: list[int] = []
    for i, make in enumerate(BAD_RECORDS.values()):
        g = rec("good", str(i), t=t, d={"host": f"g{i}"})
        batch.append(g)
        good.append(g)
        bad_at.append(len(batch))
        batch.append(make(t))
    assert len(batch) <= 100
    bad = write_rejected(tbl, batch)
    assert sorted(bad) == bad_at
    assert_stored(tbl, good)


def test_all_records_rejected(reject_table):
    tbl = reject_table
    t = now_ms()
    bad = write_rejected(tbl, [rec("m", "1", t=t - 3 * HOUR_MS), rec("m", "1", t=t + 2 * HOUR_MS)])
    assert sorted(bad) == [0, 1]


def test_record_without_dimensions_is_validation_error(ts):
    """AWS answers "At least one dimension is required for a record." (ValidationException)."""
    tbl = ts.table()
    with pytest.raises(tbl.client.exceptions.ValidationException) as ei:
        tbl.write([rec("m", "1", d={})])
    error_of(ei)


def test_unparseable_measure_value_fails(ts):
    """A BIGINT that is not a number is refused (request- or record-level, both are AWS-like)."""
    tbl = ts.table()
    t = now_ms()
    with pytest.raises(ClientError) as ei:
        tbl.write([rec("n", "not-a-number", "BIGINT", t)])
    err = error_of(ei)
    assert err["Error"]["Code"] in ("ValidationException", "RejectedRecordsException")
    if err["Error"]["Code"] == "RejectedRecordsException":
        assert sorted(rejected(ei)) == [0]
    assert_not_stored(tbl, [rec("n", "5", "BIGINT", t)])


# ---- WriteRecords: versions ---------------------------------------------------------


def test_versions(ts):
    tbl = ts.table()
    t = now_ms()

    def one(value, version=None):
        return [rec("v", value, "BIGINT", t, version=version)]

    assert ingested(tbl.write(one("1")))[0] == 1  # Version absent = 1
    # Same version, same value: accepted (idempotent retry).
    assert ingested(tbl.write(one("1")))[0] == 1
    assert ingested(tbl.write(one("1", version=1)))[0] == 1
    # Same version, other value: rejected, ExistingVersion = 1.
    bad = write_rejected(tbl, one("2", version=1))
    assert bad[0]["ExistingVersion"] == 1
    bad = write_rejected(tbl, one("2"))
    assert bad[0]["ExistingVersion"] == 1
    # Higher version: upsert.
    assert ingested(tbl.write(one("2", version=2)))[0] == 1
    assert ingested(tbl.write(one("2", version=2)))[0] == 1  # idempotent at version 2
    bad = write_rejected(tbl, one("3", version=2))
    assert bad[0]["ExistingVersion"] == 2
    # Lower version with another value: rejected with the stored version.
    bad = write_rejected(tbl, one("1", version=1))
    assert bad[0]["ExistingVersion"] == 2
    # Higher version with the same value only moves the version (WriteRecords doc).
    assert ingested(tbl.write(one("2", version=5)))[0] == 1
    bad = write_rejected(tbl, one("9", version=4))
    assert bad[0]["ExistingVersion"] == 5
    # The value stored is "2" at version 5.
    assert_stored(tbl, one("2", version=5), version=5)


def test_version_applies_per_record_in_a_batch(ts):
    tbl = ts.table()
    t = now_ms()
    tbl.write([rec("a", "1", t=t), rec("b", "1", t=t)])
    bad = write_rejected(
        tbl,
        [rec("a", "2", t=t, version=2), rec("b", "2", t=t), rec("c", "1", t=t)],
    )
    assert list(bad) == [1]
    assert bad[1]["ExistingVersion"] == 1
    assert_stored(tbl, [rec("a", "2", t=t, version=2)], version=2)
    assert_stored(tbl, [rec("b", "1", t=t), rec("c", "1", t=t)], version=1)


def test_version_zero_is_validation_error(ts):
    """Record.Version doc: "Version must be 1 or greater, or you will receive a
    ValidationException error"."""
    tbl = ts.table()
    t = now_ms()
    with pytest.raises(tbl.client.exceptions.ValidationException) as ei:
        tbl.write([rec("v", "1", t=t, version=0)])
    error_of(ei)
    assert_not_stored(tbl, [rec("v", "1", t=t)])


# ---- WriteRecords: retention and the magnetic store --------------------------------


def test_old_record_rejected_without_magnetic_writes(ts):
    tbl = ts.table(memory_hours=1, magnetic_days=7, magnetic_writes=False)
    t = now_ms()
    bad = write_rejected(tbl, [rec("m", "1", t=t - 2 * HOUR_MS)])
    assert list(bad) == [0]
    # Inside the hour it is fine.
    assert ingested(tbl.write([rec("m", "1", t=t - 30 * 60 * 1000)])) == (1, 1, 0)


def test_old_record_accepted_with_magnetic_writes(ts):
    tbl = ts.table(memory_hours=1, magnetic_days=7, magnetic_writes=True)
    t = now_ms()
    resp = tbl.write(
        [
            rec("m", "1", t=t),
            rec("m", "2", t=t - 2 * HOUR_MS),
            rec("m", "3", t=t - 3 * DAY_MS),
        ]
    )
    assert ingested(resp) == (3, 1, 2)


def test_record_older_than_magnetic_retention_rejected_either_way(ts):
    t = now_ms()
    for writes in (False, True):
        tbl = ts.table(memory_hours=1, magnetic_days=2, magnetic_writes=writes)
        bad = write_rejected(tbl, [rec("m", "1", t=t), rec("m", "2", t=t - 10 * DAY_MS)])
        assert list(bad) == [1], (writes, bad)
        assert_stored(tbl, [rec("m", "1", t=t)])


def test_future_records(ts):
    """Timestream accepts records up to 15 minutes ahead of the current time."""
    tbl = ts.table()
    t = now_ms()
    assert ingested(tbl.write([rec("m", "1", t=t + 5 * 60 * 1000)]))[0] == 1
    bad = write_rejected(tbl, [rec("m", "1", t=t + HOUR_MS)])
    assert list(bad) == [0]
    # The same far-future point in nanoseconds is just as far ahead.
    bad = write_rejected(tbl, [rec("m", "1", t=(t + HOUR_MS) * 10**6, unit="NANOSECONDS")])
    assert list(bad) == [0]


def test_update_table_enables_magnetic_writes(ts, ts_write):
    tbl = ts.table(memory_hours=1, magnetic_days=7, magnetic_writes=False)
    old = rec("m", "1", t=now_ms() - 5 * HOUR_MS)
    write_rejected(tbl, [old])
    ts_write.update_table(
        DatabaseName=tbl.db,
        TableName=tbl.name,
        MagneticStoreWriteProperties={"EnableMagneticStoreWrites": True},
    )
    assert ingested(tbl.write([old])) == (1, 0, 1)


# ---- WriteRecords: request-level validation ---------------------------------------


def test_empty_records_is_validation_error(ts, ts_write_unvalidated):
    tbl = ts.table()
    with pytest.raises(ParamValidationError):  # botocore checks `min` itself...
        tbl.write([])
    with pytest.raises(ts_write_unvalidated.exceptions.ValidationException) as ei:
        tbl.write([], client=ts_write_unvalidated)  # ...and so must the server
    error_of(ei)


def test_hundred_records_ok_hundred_and_one_is_validation_error(ts):
    tbl = ts.table()
    t = now_ms()
    records = [rec("m", str(i), t=t - i) for i in range(101)]
    with pytest.raises(tbl.client.exceptions.ValidationException) as ei:
        tbl.write(records)
    error_of(ei)
    # Nothing of the refused request was written.
    assert_not_stored(tbl, records[:1])
    resp = tbl.write(records[1:])
    assert ingested(resp) == (100, 100, 0)


# ---- durability --------------------------------------------------------------------


def test_catalog_and_records_survive_restart(fresh_server):
    with isolated_aws_env():
        client = ts_write_client(fresh_server.ts_endpoint)
    db, name = f"restart_{uuid.uuid4().hex[:8]}", "tbl"
    client.create_database(DatabaseName=db)
    retention = {
        "MemoryStoreRetentionPeriodInHours": 3,
        "MagneticStoreRetentionPeriodInDays": 9,
    }
    created = client.create_table(DatabaseName=db, TableName=name, RetentionProperties=retention)
    t = now_ms()
    r = rec("m", "42", "BIGINT", t, version=2)
    client.write_records(DatabaseName=db, TableName=name, Records=[r])
    client.close()

    fresh_server.restart()

    with isolated_aws_env():
        client = ts_write_client(fresh_server.ts_endpoint)
    try:
        table = client.describe_table(DatabaseName=db, TableName=name)["Table"]
        assert table["RetentionProperties"] == retention
        assert table["CreationTime"] == created["Table"]["CreationTime"]
        assert client.describe_database(DatabaseName=db)["Database"]["TableCount"] == 1
        assert_stored(TsTable(client=client, db=db, name=name), [r], version=2)
    finally:
        client.close()
