"""GoogleSQL for Bigtable: PrepareQuery / ExecuteQuery through the client's `execute_query`.

One module-scoped table `people`-like fixture holds six rows with a bytes family `cf`
(`q` = b"v-<key>", `g` = the group), a family `n` of 8-byte big-endian int64s and an
int64 Sum aggregate family `agg`. Queries read it through the sync data client, which
checks every batch's CRC32C and resume token itself. Protocol details the client hides
(batch boundaries, split messages, resume tokens, garbage tokens) are checked through
the raw GAPIC client, `data_client._gapic_client`.
"""

from __future__ import annotations

import datetime as dt
import uuid

import google_crc32c
import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import AddToCell, RowMutationEntry, SetCell
from google.cloud.bigtable.data.execute_query.metadata import SqlType
from google.cloud.bigtable_admin_v2.types import ColumnFamily as AdminFamily
from google.cloud.bigtable_admin_v2.types import Table as AdminTable
from google.cloud.bigtable_admin_v2.types import Type
from google.cloud.bigtable_v2.types import ProtoRows

from bt_helpers import INSTANCE, MS, int64

UTC = dt.timezone.utc
KEYS = [b"a1", b"a2", b"a3", b"b1", b"b2", b"c1"]
GROUP = {b"a1": b"x", b"a2": b"y", b"a3": b"x", b"b1": b"y", b"b2": b"x", b"c1": b"y"}
NUMBER = {k: (i - 2) * 10 for i, k in enumerate(KEYS)}  # -20, -10, 0, 10, 20, 30
WRITTEN_AT = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)
WRITTEN_US = int(WRITTEN_AT.timestamp()) * 1_000_000 + 123_000
INT64_BE = Type(
    int64_type=Type.Int64(
        encoding=Type.Int64.Encoding(big_endian_bytes=Type.Int64.Encoding.BigEndianBytes())
    )
)
SUM = Type(aggregate_type=Type.Aggregate(input_type=INT64_BE, sum=Type.Aggregate.Sum()))


def _create(admin_client, instance, families: dict) -> str:
    table_id = f"eq-{uuid.uuid4().hex[:10]}"
    admin_client.table_admin_client.create_table(
        request={
            "parent": instance.name,
            "table_id": table_id,
            "table": AdminTable(column_families=families),
        }
    )
    return table_id


def _drop(admin_client, instance, table_id: str) -> None:
    try:
        admin_client.table_admin_client.delete_table(
            request={"name": f"{instance.name}/tables/{table_id}"}
        )
    except gexc.NotFound:
        pass


@pytest.fixture(scope="module")
def sql_table(admin_client, instance, data_client):
    """Six rows (see the module docs); yields the table id."""
    families = {"cf": AdminFamily(), "n": AdminFamily(), "agg": AdminFamily(value_type=SUM)}
    table_id = _create(admin_client, instance, families)
    with data_client.get_table(INSTANCE, table_id) as t:
        for k in KEYS:
            t.mutate_row(
                k,
                [
                    SetCell("cf", b"q", b"v-" + k, WRITTEN_US),
                    SetCell("cf", b"g", GROUP[k], WRITTEN_US),
                    SetCell("n", b"x", int64(NUMBER[k]), WRITTEN_US),
                ],
            )
            # Two increments: the aggregate column holds their sum.
            t.mutate_row(k, AddToCell("agg", b"s", 1, WRITTEN_US))
            t.mutate_row(k, AddToCell("agg", b"s", NUMBER[k], WRITTEN_US))
    yield table_id
    _drop(admin_client, instance, table_id)


def run(client, sql: str, **kwargs):
    """Rows as lists of values, and the column metadata as (name, type) pairs."""
    it = client.execute_query(sql, INSTANCE, **kwargs)
    rows = [[row[i] for i in range(len(row))] for row in it]
    return rows, [(c.column_name, c.column_type) for c in it.metadata.columns]


def keys_of(client, sql: str, **kwargs) -> list[bytes]:
    rows, _ = run(client, sql, **kwargs)
    return [r[0] for r in rows]


# ---- reading --------------------------------------------------------------------------


def test_key_and_qualifier_come_back_as_bytes(data_client, sql_table):
    rows, cols = run(data_client, f"SELECT _key, cf['q'] AS q FROM `{sql_table}`")
    assert rows == [[k, b"v-" + k] for k in KEYS]
    assert [name for name, _ in cols] == ["_key", "q"]
    assert all(t == SqlType.Bytes() for _, t in cols), cols


def test_point_lookup_returns_one_row(data_client, sql_table):
    rows, _ = run(data_client, f"SELECT _key, cf['g'] AS g FROM `{sql_table}` WHERE _key = 'a2'")
    assert rows == [[b"a2", b"y"]]
    assert keys_of(data_client, f"SELECT _key FROM `{sql_table}` WHERE _key = 'zz'") == []


def test_key_range_and_prefix(data_client, sql_table):
    t = f"`{sql_table}`"
    assert keys_of(data_client, f"SELECT _key FROM {t} WHERE _key >= 'a2' AND _key < 'b2'") == [
        b"a2",
        b"a3",
        b"b1",
    ]
    assert keys_of(data_client, f"SELECT _key FROM {t} WHERE _key LIKE 'a%'") == [
        b"a1",
        b"a2",
        b"a3",
    ]


def test_googlesql_forms_from_googles_documentation(data_client, sql_table):
    """Forms copied from Google's GoogleSQL for Bigtable pages: string functions on BYTES
    keys and values, TO_INT64 of a big-endian cell, 0-based SPLIT(...)[0], SELECT *."""
    t = f"`{sql_table}`"
    assert keys_of(data_client, f"SELECT _key FROM {t} WHERE STARTS_WITH(_key, 'a')") == [
        b"a1",
        b"a2",
        b"a3",
    ]
    rows, cols = run(
        data_client,
        f"SELECT _key, TO_INT64(n['x']) AS x FROM {t} WHERE TO_INT64(n['x']) > 0",
    )
    assert rows == [[b"b1", 10], [b"b2", 20], [b"c1", 30]]
    assert cols[1] == ("x", SqlType.Int64())
    rows, cols = run(
        data_client,
        f"SELECT SPLIT(cf['q'], '-')[0] AS head, SPLIT(cf['q'], b'-')[OFFSET(1)] AS tail "
        f"FROM {t} WHERE _key = 'b2'",
    )
    assert rows == [[b"v", b"b2"]]
    assert cols == [("head", SqlType.Bytes()), ("tail", SqlType.Bytes())]
    rows, _ = run(
        data_client,
        f"SELECT _key FROM {t} WHERE REGEXP_CONTAINS(cf['q'], '^v-[ab]2$')",
    )
    assert rows == [[b"a2"], [b"b2"]]
    _, cols = run(data_client, f"SELECT * FROM {t} WHERE _key = 'a1'")
    names = [name for name, _ in cols]
    assert names[0] == "_key" and sorted(names[1:]) == ["agg", "cf", "n"], names


def test_googlesql_functions_safe_prefix_and_typed_literals(data_client, sql_table):
    """JSON over a cell value, lambdas, ARRAY_AGG with LIMIT, SAFE., typed literals and a
    `#` comment, as Google documents them; INT64 overflow is an error, not a wrap."""
    t = f"`{sql_table}`"
    rows, cols = run(
        data_client,
        "SELECT JSON_VALUE(CONCAT('{\"k\": \"', CAST(_key AS STRING), '\"}'), '$.k') AS k, "
        "TO_JSON_STRING(STRUCT(TO_INT64(n['x']) AS x)) AS j "
        f"FROM {t} WHERE _key = 'b1'  # one row",
    )
    assert rows == [["b1", '{"x":10}']]
    assert cols == [("k", SqlType.String()), ("j", SqlType.String())]
    rows, _ = run(
        data_client,
        f"SELECT ARRAY_AGG(_key ORDER BY _key DESC LIMIT 2), "
        f"ARRAY_FILTER(ARRAY<INT64>[1, 2, 3], e -> e > 1), SAFE.FROM_BASE32('!'), "
        f"CAST(-2.5 AS INT64) FROM {t}",
    )
    assert rows == [[[b"c1", b"b2"], [2, 3], None, -3]]
    with pytest.raises(gexc.GoogleAPICallError) as e:
        list(data_client.execute_query("SELECT 9223372036854775807 + 1", INSTANCE))
    assert "overflow" in e.value.message.lower(), e.value.message


def test_table_arguments_pick_versions(data_client, sql_table):
    """`t(with_history => TRUE, latest_n => 1)` and `t(as_of => …)` as Google documents."""
    t = f"`{sql_table}`"
    rows, _ = run(
        data_client,
        f"SELECT _key, cf['q'] AS q FROM {t}(with_history => TRUE, latest_n => 1) "
        "WHERE _key = 'a1'",
    )
    [[key, versions]] = rows
    assert key == b"a1" and len(versions) == 1
    assert versions[0]["value"] == b"v-a1"
    before = WRITTEN_AT - dt.timedelta(seconds=1)
    rows, _ = run(
        data_client,
        f"SELECT _key FROM {t}(as_of => TIMESTAMP '{before.isoformat()}')",
    )
    assert rows == []
    # The arguments may be query parameters.
    q = f"SELECT _key FROM {t}(as_of => @at)"
    assert keys_of(data_client, q, parameters={"at": before}) == []
    assert len(keys_of(data_client, q, parameters={"at": WRITTEN_AT})) == len(KEYS)
    q = f"SELECT cf['q'] FROM {t}(with_history => TRUE, latest_n => @n) WHERE _key = 'a1'"
    [[versions]] = run(data_client, q, parameters={"n": 1})[0]
    assert [v["value"] for v in versions] == [b"v-a1"]
    with pytest.raises(gexc.InvalidArgument) as e:
        run(data_client, f"SELECT _key FROM {t}(latest_n => 2)")
    assert "with_history" in str(e.value)


def test_in_list(data_client, sql_table):
    got = keys_of(data_client, f"SELECT _key FROM `{sql_table}` WHERE _key IN ('c1', 'a1', 'zz')")
    assert got == [b"a1", b"c1"]


def test_order_by_and_limit(data_client, sql_table):
    got = keys_of(data_client, f"SELECT _key FROM `{sql_table}` ORDER BY _key DESC LIMIT 2")
    assert got == [b"c1", b"b2"]
    by_number = keys_of(
        data_client, f"SELECT _key FROM `{sql_table}` ORDER BY be_int64(n['x']) DESC LIMIT 3"
    )
    assert by_number == [b"c1", b"b2", b"b1"]


def test_count_and_group_by(data_client, sql_table):
    rows, cols = run(data_client, f"SELECT COUNT(*) AS c FROM `{sql_table}`")
    assert rows == [[6]]
    assert cols == [("c", SqlType.Int64())]
    rows, cols = run(
        data_client,
        f"SELECT CAST(cf['g'] AS STRING) AS g, COUNT(*) AS c, SUM(be_int64(n['x'])) AS total "
        f"FROM `{sql_table}` GROUP BY CAST(cf['g'] AS STRING) ORDER BY g",
    )
    want = {
        g: [sum(1 for k in KEYS if GROUP[k] == g), sum(NUMBER[k] for k in KEYS if GROUP[k] == g)]
        for g in (b"x", b"y")
    }
    assert rows == [["x", *want[b"x"]], ["y", *want[b"y"]]]
    assert [t for _, t in cols] == [SqlType.String(), SqlType.Int64(), SqlType.Int64()]


def test_cast_to_string_and_be_int64(data_client, sql_table):
    rows, cols = run(
        data_client,
        f"SELECT CAST(cf['q'] AS STRING) AS s, be_int64(n['x']) AS x FROM `{sql_table}` "
        "WHERE _key IN ('a1', 'c1')",
    )
    assert rows == [["v-a1", -20], ["v-c1", 30]]
    assert cols == [("s", SqlType.String()), ("x", SqlType.Int64())]


def test_aggregate_family_reads_as_int64(data_client, sql_table):
    rows, cols = run(data_client, f"SELECT _key, agg['s'] AS s FROM `{sql_table}`")
    assert rows == [[k, 1 + NUMBER[k]] for k in KEYS]
    assert cols[1] == ("s", SqlType.Int64())


def test_family_comes_back_as_a_map(data_client, sql_table):
    rows, cols = run(data_client, f"SELECT cf, agg FROM `{sql_table}` WHERE _key = 'b1'")
    assert rows == [[{b"q": b"v-b1", b"g": b"y"}, {b"s": 1 + NUMBER[b"b1"]}]]
    assert cols == [
        ("cf", SqlType.Map(SqlType.Bytes(), SqlType.Bytes())),
        ("agg", SqlType.Map(SqlType.Bytes(), SqlType.Int64())),
    ]


def test_timestamp_column(data_client, sql_table):
    rows, cols = run(data_client, f"SELECT _timestamp FROM `{sql_table}` WHERE _key = 'a1'")
    assert rows == [[WRITTEN_AT]]
    assert cols == [("_timestamp", SqlType.Timestamp())]


def test_scalar_types_of_expressions(data_client):
    rows, cols = run(
        data_client,
        "SELECT 1.5 AS f, CAST(2.5 AS FLOAT) AS f32, true AS b, NULL AS nothing, "
        "DATE '2024-02-29' AS d, CAST(1.25 AS DECIMAL(5, 2)) AS dec, [1, 2] AS arr, "
        "named_struct('a', 1, 'b', 'two') AS st",
    )
    (row,) = rows
    assert row[:4] == [1.5, 2.5, True, None]
    assert (row[4].year, row[4].month, row[4].day) == (2024, 2, 29)
    assert row[5] == "1.25"  # decimals are sent as their text
    assert row[6] == [1, 2]
    assert (row[7]["a"], row[7]["b"]) == (1, "two")
    types = dict(cols)
    assert types["f"] == SqlType.Float64() and types["f32"] == SqlType.Float32()
    assert types["b"] == SqlType.Bool() and types["d"] == SqlType.Date()
    assert types["arr"] == SqlType.Array(SqlType.Int64())


# ---- parameters -----------------------------------------------------------------------


def test_parameters(data_client, sql_table):
    q = f"SELECT _key FROM `{sql_table}` WHERE _key = @k"
    assert keys_of(data_client, q, parameters={"k": b"a3"}) == [b"a3"]
    assert keys_of(data_client, q, parameters={"k": "b1"}) == [b"b1"]
    # A NULL matches nothing; its type has to be given.
    assert (
        keys_of(data_client, q, parameters={"k": None}, parameter_types={"k": SqlType.Bytes()})
        == []
    )
    rows, cols = run(data_client, "SELECT @n + 1 AS n, @s AS s", parameters={"n": 41, "s": "hi"})
    assert rows == [[42, "hi"]]
    assert cols == [("n", SqlType.Int64()), ("s", SqlType.String())]


def test_array_and_timestamp_parameters(data_client, sql_table):
    got = keys_of(
        data_client,
        f"SELECT _key FROM `{sql_table}` WHERE array_has(@keys, _key)",
        parameters={"keys": [b"c1", b"a2"]},
        parameter_types={"keys": SqlType.Array(SqlType.Bytes())},
    )
    assert got == [b"a2", b"c1"]
    q = f"SELECT COUNT(*) FROM `{sql_table}` WHERE _timestamp >= @t"
    assert run(data_client, q, parameters={"t": WRITTEN_AT})[0] == [[6]]
    later = WRITTEN_AT + dt.timedelta(milliseconds=1)
    assert run(data_client, q, parameters={"t": later})[0] == [[0]]


def test_undeclared_parameter_is_invalid(data_client, sql_table):
    with pytest.raises(gexc.InvalidArgument) as e:
        list(data_client.execute_query(f"SELECT _key FROM `{sql_table}` WHERE _key = @k", INSTANCE))
    assert "@k" in e.value.message


# ---- errors ---------------------------------------------------------------------------


def test_syntax_error_names_the_position(data_client, sql_table):
    with pytest.raises(gexc.InvalidArgument) as e:
        data_client.execute_query(f"SELECT _key FROM `{sql_table}` WHERE _key = = 'x'", INSTANCE)
    column = len(f"SELECT _key FROM `{sql_table}` WHERE _key = =")  # the second "=", 1-based
    assert f"line 1, column {column}" in e.value.message, e.value.message


def test_unknown_column_is_invalid(data_client, sql_table):
    with pytest.raises(gexc.InvalidArgument) as e:
        data_client.execute_query(f"SELECT nope FROM `{sql_table}`", INSTANCE)
    assert "nope" in e.value.message


def test_missing_table_is_not_found(data_client, sql_table):
    with pytest.raises(gexc.NotFound) as e:
        data_client.execute_query("SELECT _key FROM no_such_table", INSTANCE)
    assert "no_such_table" in e.value.message
    # Tables belong to their instance: another instance does not see this one's.
    with pytest.raises(gexc.NotFound):
        data_client.execute_query(f"SELECT _key FROM `{sql_table}`", "another-instance")


# ---- many rows, big rows --------------------------------------------------------------


def _raw_execute(data_client, sql: str, **request) -> list:
    """PrepareQuery + ExecuteQuery through GAPIC; returns the `results` of every response."""
    gapic = data_client._gapic_client
    name = f"projects/{data_client.project}/instances/{INSTANCE}"
    prepared = gapic.prepare_query(
        request={"instance_name": name, "query": sql, "proto_format": {}}, timeout=60
    )
    stream = gapic.execute_query(
        request={"instance_name": name, "prepared_query": prepared.prepared_query, **request},
        timeout=60,
    )
    return [r._pb.results for r in stream]


def _batches(results) -> list[list]:
    """Checks checksums and tokens the way the client does; the values of each batch."""
    batches, buffer = [], b""
    for r in results:
        buffer += r.proto_rows_batch.batch_data
        if r.HasField("batch_checksum"):
            assert r.batch_checksum == google_crc32c.value(buffer)
            assert r.resume_token, "a completed batch carries a resume token"
            batches.append(list(ProtoRows.pb().FromString(buffer).values))
            buffer = b""
        else:
            assert not r.resume_token
    assert buffer == b""
    return batches


@pytest.fixture(scope="module")
def big_table(admin_client, instance, data_client):
    """20,000 rows r00000..r19999 with cf:q = the row number as text."""
    table_id = _create(admin_client, instance, {"cf": AdminFamily()})
    with data_client.get_table(INSTANCE, table_id) as t:
        entries = [
            RowMutationEntry(b"r%05d" % i, SetCell("cf", b"q", str(i).encode(), MS))
            for i in range(20_000)
        ]
        for start in range(0, len(entries), 5_000):
            t.bulk_mutate_rows(entries[start : start + 5_000])
    yield table_id
    _drop(admin_client, instance, table_id)


def test_many_rows_arrive_in_several_batches(data_client, big_table):
    rows, _ = run(data_client, f"SELECT _key, CAST(cf['q'] AS STRING) AS q FROM `{big_table}`")
    assert len(rows) == 20_000
    assert rows == [[b"r%05d" % i, str(i)] for i in range(20_000)]
    batches = _batches(_raw_execute(data_client, f"SELECT _key FROM `{big_table}`"))
    assert len(batches) > 1, "20,000 rows should not be one batch"
    assert sum(len(b) for b in batches) == 20_000
    assert batches[0][0].bytes_value == b"r00000"


def test_resume_token_continues_after_the_rows_the_client_has(data_client, big_table):
    sql = f"SELECT _key FROM `{big_table}`"
    first = _raw_execute(data_client, sql)
    first_batch = _batches(first)[0]
    token = next(r.resume_token for r in first if r.resume_token)
    resumed = _raw_execute(data_client, sql, resume_token=token)
    assert resumed[0].reset, "a resumed stream starts with reset"
    rest = [v.bytes_value for b in _batches(resumed) for v in b]
    assert len(first_batch) + len(rest) == 20_000
    assert rest[0] == b"r%05d" % len(first_batch)
    assert rest[-1] == b"r19999"
    # The last token resumes to nothing but itself.
    last = [r.resume_token for r in first if r.resume_token][-1]
    again = _raw_execute(data_client, sql, resume_token=last)
    assert len(again) == 1 and again[0].resume_token == last
    assert not again[0].proto_rows_batch.batch_data


def test_large_rows_split_batches_across_messages(admin_client, instance, data_client):
    table_id = _create(admin_client, instance, {"cf": AdminFamily()})
    try:
        with data_client.get_table(INSTANCE, table_id) as t:
            for i in range(12):
                t.mutate_row(b"big%02d" % i, SetCell("cf", b"v", bytes([i]) * 700_000, MS))
        sql = f"SELECT _key, cf['v'] AS v FROM `{table_id}`"
        rows, _ = run(data_client, sql)
        assert [r[0] for r in rows] == [b"big%02d" % i for i in range(12)]
        assert all(r[1] == bytes([i]) * 700_000 for i, r in enumerate(rows))
        results = _raw_execute(data_client, sql)
        assert sum(len(b) for b in _batches(results)) == 2 * 12
        assert any(not r.HasField("batch_checksum") for r in results), "no batch was split"
    finally:
        _drop(admin_client, instance, table_id)


# ---- tokens ---------------------------------------------------------------------------


def test_garbage_tokens_are_invalid(data_client, sql_table):
    gapic = data_client._gapic_client
    name = f"projects/{data_client.project}/instances/{INSTANCE}"
    with pytest.raises(gexc.InvalidArgument):
        list(
            gapic.execute_query(
                request={"instance_name": name, "prepared_query": b"not a token"}, timeout=30
            )
        )
    with pytest.raises(gexc.InvalidArgument):
        list(_raw_execute(data_client, f"SELECT _key FROM `{sql_table}`", resume_token=b"junk"))
    with pytest.raises(gexc.InvalidArgument):
        list(gapic.execute_query(request={"instance_name": "nope", "prepared_query": b"x"}))


def test_prepared_query_is_bound_to_its_instance(data_client, sql_table):
    gapic = data_client._gapic_client
    name = f"projects/{data_client.project}/instances/{INSTANCE}"
    prepared = gapic.prepare_query(
        request={"instance_name": name, "query": f"SELECT _key FROM `{sql_table}`"}, timeout=30
    )
    assert prepared.valid_until.timestamp() > dt.datetime.now(UTC).timestamp()
    other = f"projects/{data_client.project}/instances/other"
    with pytest.raises(gexc.InvalidArgument):
        list(
            gapic.execute_query(
                request={"instance_name": other, "prepared_query": prepared.prepared_query},
                timeout=30,
            )
        )


def test_schema_change_after_prepare_fails_precondition(admin_client, instance, data_client):
    table_id = _create(admin_client, instance, {"cf": AdminFamily()})
    try:
        gapic = data_client._gapic_client
        name = f"projects/{data_client.project}/instances/{INSTANCE}"
        prepared = gapic.prepare_query(
            request={"instance_name": name, "query": f"SELECT * FROM `{table_id}`"}, timeout=30
        )
        # GoogleSQL's SELECT *: the row key and one map per family, no _timestamp.
        assert [c.name for c in prepared.metadata.proto_schema.columns] == ["_key", "cf"]
        admin_client.table_admin_client.modify_column_families(
            request={
                "name": f"{instance.name}/tables/{table_id}",
                "modifications": [{"id": "cf2", "create": AdminFamily()}],
            }
        )
        with pytest.raises(gexc.FailedPrecondition):
            list(
                gapic.execute_query(
                    request={"instance_name": name, "prepared_query": prepared.prepared_query},
                    timeout=30,
                )
            )
    finally:
        _drop(admin_client, instance, table_id)


def test_unprepared_query_streams_metadata_first(data_client, sql_table):
    """The deprecated form: `query` instead of `prepared_query`, typed values."""
    gapic = data_client._gapic_client
    name = f"projects/{data_client.project}/instances/{INSTANCE}"
    responses = list(
        gapic.execute_query(
            request={
                "instance_name": name,
                "query": f"SELECT _key FROM `{sql_table}` WHERE _key = @k",
                "params": {"k": {"type_": {"bytes_type": {}}, "bytes_value": b"b2"}},
            },
            timeout=30,
        )
    )
    first = responses[0]._pb
    assert first.HasField("metadata")
    assert [c.name for c in first.metadata.proto_schema.columns] == ["_key"]
    rows = _batches([r._pb.results for r in responses[1:]])
    assert [[v.bytes_value for v in b] for b in rows] == [[b"b2"]]
