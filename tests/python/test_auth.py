"""Authentication and authorization: principals made with `almanac auth`, bearer tokens
on gRPC (over TLS), SigV4 on the Timestream endpoint, roles and scopes per call.

A server of its own serves TLS with principals made on its stopped data directory:

| principal | role | scope |
|---|---|---|
| root | admin | everything |
| viewer | reader | everything |
| writer | user | instance projects/p/instances/i |
| one | reader | table t1 of that instance |
| tsw | user | Timestream database db1 |

Google's GAPIC clients send the tokens as `authorization: Bearer …` call credentials on a
secure channel; boto3 signs with each principal's keys. Every denied call must change
nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from google.api_core import exceptions as gexc
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)
from google.cloud.bigtable_admin_v2.types import ColumnFamily, Table
from google.cloud.bigtable_v2 import BigtableClient
from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import Mutation, ReadRowsRequest
from google.iam.v1 import iam_policy_pb2

from bt_helpers import AlmanacServer, isolated_aws_env, ts_query_client, ts_write_client
from tls_helpers import make_pki

I = "projects/p/instances/i"
J = "projects/p/instances/j"
PRINCIPALS = {
    "root": ["--role", "admin"],
    "viewer": ["--role", "reader"],
    "writer": ["--role", "user", "--instance", "p/i"],
    "one": ["--role", "reader", "--instance", "p/i", "--table", "t1"],
    "tsw": ["--role", "user", "--database", "db1"],
}


def auth_cli(almanac_bin, data_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [almanac_bin, "auth", *args, "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture(scope="module")
def secured(almanac_bin, tmp_path_factory):
    base = tmp_path_factory.mktemp("auth")
    pki = make_pki(base / "pki")
    data = base / "data"
    creds = {}
    for name, args in PRINCIPALS.items():
        done = auth_cli(almanac_bin, data, "create-principal", name, *args)
        assert done.returncode == 0, done.stderr
        creds[name] = json.loads(done.stdout)
    srv = AlmanacServer(
        almanac_bin, data_dir=data, log_dir=base,
        extra_args=("--tls-cert", str(pki.cert), "--tls-key", str(pki.key)),
    )  # fmt: skip
    srv.start()
    srv.pki, srv.creds, srv.base = pki, creds, base
    yield srv
    if srv.running:
        srv.stop()


class Clients:
    def __init__(self, srv, token: str | None):
        ssl_creds = grpc.ssl_channel_credentials(root_certificates=srv.pki.ca_pem)
        if token is not None:
            ssl_creds = grpc.composite_channel_credentials(
                ssl_creds, grpc.access_token_call_credentials(token)
            )
        self.channel = grpc.secure_channel(srv.host, ssl_creds)
        self.admin = BigtableTableAdminClient(
            transport=BigtableTableAdminGrpcTransport(channel=self.channel)
        )
        self.data = BigtableClient(transport=BigtableGrpcTransport(channel=self.channel))

    def close(self):
        self.channel.close()

    def put(self, table: str, key: bytes, value: bytes) -> None:
        self.data.mutate_row(
            table_name=table, row_key=key, retry=None,
            mutations=[Mutation(set_cell=Mutation.SetCell(
                family_name="cf", column_qualifier=b"q", timestamp_micros=1000, value=value))],
        )  # fmt: skip

    def rows(self, table: str) -> list:
        return [
            (c.row_key, c.value)
            for r in self.data.read_rows(request=ReadRowsRequest(table_name=table), retry=None)
            for c in r.chunks
        ]


@pytest.fixture(scope="module")
def as_(secured):
    made: dict = {}

    def get(name: str | None) -> Clients:
        if name not in made:
            made[name] = Clients(secured, None if name is None else secured.creds[name]["token"])
        return made[name]

    yield get
    for c in made.values():
        c.close()


@pytest.fixture(scope="module")
def tables(as_):
    root = as_("root")
    for parent, table in ((I, "t1"), (I, "t2"), (J, "t3")):
        root.admin.create_table(
            parent=parent, table_id=table, table=Table(column_families={"cf": ColumnFamily()})
        )
        root.put(f"{parent}/tables/{table}", b"seed", b"0")
    return {"t1": f"{I}/tables/t1", "t2": f"{I}/tables/t2", "t3": f"{J}/tables/t3"}


def denied(call, permission: str) -> None:
    with pytest.raises(gexc.PermissionDenied) as info:
        call()
    assert permission in str(info.value), info.value


def test_cli_prints_credentials_once_and_lists_without_secrets(secured, almanac_bin):
    c = secured.creds["viewer"]
    assert set(c) == {"name", "token", "access_key_id", "secret_access_key"}
    assert c["token"].startswith("alm_") and c["access_key_id"].startswith("AKIA")
    listed = auth_cli(almanac_bin, secured.data_dir, "list")
    assert listed.returncode == 0, listed.stderr
    assert "viewer\treader\teverything" in listed.stdout
    assert "one\treader\ttable projects/p/instances/i/tables/t1" in listed.stdout
    assert c["token"] not in listed.stdout and c["secret_access_key"] not in listed.stdout
    again = auth_cli(almanac_bin, secured.data_dir, "create-principal", "viewer", "--role", "admin")
    assert again.returncode != 0 and "already exists" in again.stderr


def test_calls_without_a_valid_token_are_unauthenticated(secured, as_, tables):
    with pytest.raises(gexc.Unauthenticated):
        as_(None).rows(tables["t1"])
    bad = Clients(secured, "alm_" + "0" * 64)
    try:
        with pytest.raises(gexc.Unauthenticated):
            bad.rows(tables["t1"])
    finally:
        bad.close()


def test_a_reader_reads_and_may_not_write(as_, tables):
    viewer = as_("viewer")
    assert viewer.rows(tables["t1"]) == [(b"seed", b"0")]
    denied(lambda: viewer.put(tables["t1"], b"k", b"v"), "bigtable.tables.mutateRows")
    denied(
        lambda: viewer.admin.create_table(parent=I, table_id="nope", table=Table(), retry=None),
        "bigtable.tables.create",
    )
    denied(lambda: viewer.admin.delete_table(name=tables["t2"], retry=None), "bigtable.tables.delete")
    # Nothing changed.
    assert as_("root").rows(tables["t1"]) == [(b"seed", b"0")]
    assert "nope" not in [t.name.rsplit("/", 1)[-1] for t in as_("root").admin.list_tables(parent=I)]


def test_an_instance_user_writes_there_only(as_, tables):
    writer = as_("writer")
    writer.put(tables["t1"], b"w", b"1")
    assert (b"w", b"1") in writer.rows(tables["t1"])
    denied(lambda: writer.put(tables["t3"], b"w", b"1"), "bigtable.tables.mutateRows")
    denied(lambda: writer.rows(tables["t3"]), "bigtable.tables.readRows")
    denied(
        lambda: writer.admin.create_table(parent=I, table_id="x", table=Table(), retry=None),
        "bigtable.tables.create",
    )
    assert as_("root").rows(tables["t3"]) == [(b"seed", b"0")]


def test_a_table_reader_reaches_its_table_only(as_, tables):
    one = as_("one")
    assert (b"seed", b"0") in one.rows(tables["t1"])
    denied(lambda: one.rows(tables["t2"]), "bigtable.tables.readRows")
    denied(lambda: list(one.admin.list_tables(parent=I, retry=None)), "bigtable.tables.list")
    got = one.admin.get_table(name=tables["t1"], retry=None)
    assert got.name == tables["t1"]


def test_test_iam_permissions_answers_what_the_caller_holds(as_, tables):
    asked = ["bigtable.tables.readRows", "bigtable.tables.mutateRows", "bigtable.tables.delete"]
    for who, want in (
        ("one", asked[:1]),
        ("writer", asked[:2]),
        ("root", asked),
    ):
        request = iam_policy_pb2.TestIamPermissionsRequest(resource=tables["t1"], permissions=asked)
        got = as_(who).admin.test_iam_permissions(request=request)
        assert list(got.permissions) == want, who
    request = iam_policy_pb2.TestIamPermissionsRequest(resource=tables["t2"], permissions=asked)
    assert list(as_("one").admin.test_iam_permissions(request=request).permissions) == []


def test_iam_policies_need_admin(as_, tables):
    denied(
        lambda: as_("writer").admin.get_iam_policy(request={"resource": tables["t1"]}, retry=None),
        "bigtable.tables.getIamPolicy",
    )
    policy = as_("root").admin.get_iam_policy(request={"resource": tables["t1"]})
    assert policy.etag


def test_iam_policy_bindings_grant_their_roles(as_, tables):
    """`one` reads only t1; a binding on t2 lets it write t2, one on instance J lets it
    read J's tables, and removing them takes both back."""
    root, one = as_("root"), as_("one")
    denied(lambda: one.put(tables["t2"], b"k", b"v"), "bigtable.tables.mutateRows")
    denied(lambda: one.rows(tables["t3"]), "bigtable.tables.readRows")

    from google.cloud.bigtable_admin_v2 import BigtableInstanceAdminClient
    from google.cloud.bigtable_admin_v2.services.bigtable_instance_admin.transports import (
        BigtableInstanceAdminGrpcTransport,
    )

    instances = BigtableInstanceAdminClient(
        transport=BigtableInstanceAdminGrpcTransport(channel=root.channel)
    )

    def admin_of(resource: str):
        return root.admin if "/tables/" in resource else instances

    def bind(resource: str, role: str, member: str):
        policy = admin_of(resource).get_iam_policy(request={"resource": resource})
        policy.bindings.add(role=role, members=[member])
        return admin_of(resource).set_iam_policy(request={"resource": resource, "policy": policy})

    bind(tables["t2"], "roles/bigtable.user", "user:one")
    bind(J, "roles/bigtable.reader", "principal:one")
    one.put(tables["t2"], b"granted", b"1")
    assert (b"granted", b"1") in one.rows(tables["t2"])
    assert one.rows(tables["t3"]) == [(b"seed", b"0")]
    denied(lambda: one.put(tables["t3"], b"k", b"v"), "bigtable.tables.mutateRows")  # reader only
    asked = ["bigtable.tables.readRows", "bigtable.tables.mutateRows", "bigtable.tables.delete"]
    request = iam_policy_pb2.TestIamPermissionsRequest(resource=tables["t2"], permissions=asked)
    assert list(one.admin.test_iam_permissions(request=request).permissions) == asked[:2]
    # A binding for someone else, or a role that does not reach, grants nothing.
    bind(tables["t1"], "roles/bigtable.admin", "user:writer")
    bind(tables["t1"], "roles/bigtable.viewer", "user:one")
    denied(lambda: one.put(tables["t1"], b"k", b"v"), "bigtable.tables.mutateRows")
    for resource in (tables["t2"], J, tables["t1"]):
        admin_of(resource).set_iam_policy(request={"resource": resource, "policy": {"bindings": []}})
    denied(lambda: one.put(tables["t2"], b"k2", b"v"), "bigtable.tables.mutateRows")
    denied(lambda: one.rows(tables["t3"]), "bigtable.tables.readRows")


# ---- Timestream: SigV4 -----------------------------------------------------------------


def ts_clients(srv, who: str | None = None, key: tuple[str, str] | None = None):
    if key is None:
        c = srv.creds[who]
        key = (c["access_key_id"], c["secret_access_key"])
    endpoint = f"https://{srv.ts_host}"
    return (
        ts_write_client(endpoint, key=key, verify=str(srv.pki.ca)),
        ts_query_client(endpoint, key=key, verify=str(srv.pki.ca)),
    )


def record(value: str) -> dict:
    return {
        "Dimensions": [{"Name": "host", "Value": "h1"}],
        "MeasureName": "cpu", "MeasureValue": value, "MeasureValueType": "DOUBLE",
        "Time": str(int(time.time() * 1000)),
    }  # fmt: skip


@pytest.fixture(scope="module")
def ts_tables(secured):
    with isolated_aws_env():
        w, q = ts_clients(secured, "root")
        for db in ("db1", "db2"):
            w.create_database(DatabaseName=db)
            w.create_table(DatabaseName=db, TableName="cpu")
        w.close()
        q.close()
        yield


def code_of(call) -> tuple[str, str]:
    with pytest.raises(ClientError) as info:
        call()
    e = info.value.response["Error"]
    return e["Code"], e["Message"]


def test_boto3_with_the_right_keys_works_within_its_scope(secured, ts_tables):
    with isolated_aws_env():
        w, q = ts_clients(secured, "tsw")
        w.write_records(DatabaseName="db1", TableName="cpu", Records=[record("1")])
        rows = q.query(QueryString='SELECT measure_value::double FROM "db1"."cpu"')["Rows"]
        assert rows == [{"Data": [{"ScalarValue": "1.0"}]}]
        code, message = code_of(
            lambda: w.write_records(DatabaseName="db2", TableName="cpu", Records=[record("2")])
        )
        assert code == "AccessDeniedException", message
        assert "timestream:WriteRecords" in message and "database/db2/table/cpu" in message
        code, message = code_of(lambda: q.query(QueryString='SELECT * FROM "db2"."cpu"'))
        assert code == "AccessDeniedException" and "timestream:Select" in message, message
        code, _ = code_of(lambda: w.create_database(DatabaseName="db3"))
        assert code == "AccessDeniedException"
        w.close()
        q.close()
        # Nothing was written or made by the denied calls.
        rw, rq = ts_clients(secured, "root")
        assert rq.query(QueryString='SELECT count(*) FROM "db2"."cpu"')["Rows"] == [
            {"Data": [{"ScalarValue": "0"}]}
        ]
        names = [d["DatabaseName"] for d in rw.list_databases()["Databases"]]
        assert "db3" not in names
        rw.close()
        rq.close()


def test_metadata_statements_show_only_what_the_principal_may_read(secured, ts_tables):
    with isolated_aws_env():
        w, q = ts_clients(secured, "tsw")
        try:
            rows = q.query(QueryString="SHOW DATABASES")["Rows"]
            assert [r["Data"][0]["ScalarValue"] for r in rows] == ["db1"]
            rows = q.query(QueryString="SHOW TABLES FROM db1")["Rows"]
            assert [r["Data"][0]["ScalarValue"] for r in rows] == ["cpu"]
            for sql in ("SHOW TABLES FROM db2", 'DESCRIBE "db2"."cpu"', "SHOW MEASURES FROM db2.cpu"):
                code, message = code_of(lambda: q.query(QueryString=sql))
                assert code == "AccessDeniedException", (sql, code, message)
            # ListDatabases and ListTables (what Grafana's datasource calls) list only
            # what the principal may read.
            names = [d["DatabaseName"] for d in w.list_databases()["Databases"]]
            assert names == ["db1"], names
            assert [t["TableName"] for t in w.list_tables(DatabaseName="db1")["Tables"]] == ["cpu"]
            assert w.list_tables(DatabaseName="db2")["Tables"] == []
            # information_schema names only what the principal may read.
            rows = q.query(
                QueryString="SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema <> 'information_schema' ORDER BY 1, 2"
            )["Rows"]
            assert [[d["ScalarValue"] for d in r["Data"]] for r in rows] == [["db1", "cpu"]]
            rows = q.query(
                QueryString="SELECT DISTINCT table_schema FROM information_schema.columns "
                "WHERE table_schema <> 'information_schema'"
            )["Rows"]
            assert [r["Data"][0]["ScalarValue"] for r in rows] == ["db1"]
        finally:
            w.close()
            q.close()


def test_query_pages_and_cancellation_belong_to_who_ran_the_query(secured, ts_tables):
    sql = "SELECT x FROM unnest(sequence(1, 50)) AS t(x)"
    with isolated_aws_env():
        _, mine = ts_clients(secured, "root")
        _, theirs = ts_clients(secured, "tsw")
        try:
            first = mine.query(QueryString=sql, MaxRows=10)
            token, query_id = first["NextToken"], first["QueryId"]
            code, message = code_of(lambda: theirs.query(QueryString=sql, NextToken=token))
            assert code == "ValidationException" and "not issued" in message, message
            code, _ = code_of(lambda: theirs.cancel_query(QueryId=query_id))
            assert code == "ValidationException"
            assert len(mine.query(QueryString=sql, NextToken=token, MaxRows=10)["Rows"]) == 10
            assert "cancelled" in mine.cancel_query(QueryId=query_id)["CancellationMessage"]
        finally:
            mine.close()
            theirs.close()


def test_boto3_with_wrong_or_unknown_keys_is_refused(secured, ts_tables):
    c = secured.creds["tsw"]
    with isolated_aws_env():
        w, _ = ts_clients(secured, key=(c["access_key_id"], "wrong" * 8))
        code, message = code_of(lambda: w.describe_database(DatabaseName="db1"))
        assert code == "InvalidSignatureException", message
        assert "signature we calculated does not match" in message
        w.close()
        w, _ = ts_clients(secured, key=("AKIAUNKNOWNUNKNOWN00", "x" * 40))
        code, _ = code_of(lambda: w.describe_database(DatabaseName="db1"))
        assert code == "UnrecognizedClientException"
        w.close()


def signed_request(srv, who: str, body: dict, when: dt.datetime | None = None) -> AWSRequest:
    c = srv.creds[who]
    request = AWSRequest(
        method="POST",
        url=f"https://{srv.ts_host}/",
        data=json.dumps(body).encode(),
        headers={
            "Content-Type": "application/x-amz-json-1.0",
            "X-Amz-Target": "Timestream_20181101.DescribeDatabase",
        },
    )
    signer = SigV4Auth(Credentials(c["access_key_id"], c["secret_access_key"]), "timestream", "us-east-1")
    if when is None:
        signer.add_auth(request)
    else:
        # botocore stamps the current time; sign as of `when` instead.
        import botocore.auth as auth_module

        real = auth_module.get_current_datetime
        auth_module.get_current_datetime = lambda: when.replace(tzinfo=None)
        try:
            signer.add_auth(request)
        finally:
            auth_module.get_current_datetime = real
    return request


def send(srv, request: AWSRequest) -> tuple[int, dict]:
    context = ssl.create_default_context(cafile=str(srv.pki.ca))
    prepared = request.prepare()
    http_request = urllib.request.Request(
        prepared.url, data=prepared.body, headers=dict(prepared.headers), method="POST"
    )
    try:
        with urllib.request.urlopen(http_request, context=context, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_an_expired_or_replayed_signature_is_refused(secured, ts_tables):
    fresh = signed_request(secured, "tsw", {"DatabaseName": "db1"})
    status, body = send(secured, fresh)
    assert status == 200, body
    status, body = send(secured, fresh)
    assert status == 403 and body["__type"].endswith("InvalidSignatureException"), body
    assert "already been received" in body["Message"]
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=20)
    status, body = send(secured, signed_request(secured, "tsw", {"DatabaseName": "db1"}, old))
    assert status == 403 and "Signature expired" in body["Message"], body


def test_almanac_sql_signs_with_the_environment_keys_over_https(secured, almanac_bin, ts_tables):
    c = secured.creds["tsw"]
    cmd = [almanac_bin, "sql", "--endpoint", f"https://{secured.ts_host}", "--format", "csv",
           "-e", 'SELECT count(*) AS n FROM "db1"."cpu"']  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "AWS_CA_BUNDLE": str(secured.pki.ca)}
    unsigned = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert unsigned.returncode != 0
    assert "MissingAuthenticationTokenException" in unsigned.stderr + unsigned.stdout
    env |= {"AWS_ACCESS_KEY_ID": c["access_key_id"], "AWS_SECRET_ACCESS_KEY": c["secret_access_key"]}
    signed = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert signed.returncode == 0, signed.stderr
    assert signed.stdout.splitlines()[0] == "n", signed.stdout


def test_the_console_needs_a_token_and_scopes_what_it_shows(secured, tables):
    context = ssl.create_default_context(cafile=str(secured.pki.ca))

    def get(path: str, token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        req = urllib.request.Request(f"https://{secured.console_host}{path}", headers=headers)
        try:
            with urllib.request.urlopen(req, context=context, timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    assert get("/", None) == 200  # the page itself holds no data
    assert get("/metrics", None) == 401
    assert get("/api/overview", "alm_" + "0" * 64) == 401
    assert get("/metrics", secured.creds["viewer"]["token"]) == 200
    assert get("/api/overview", secured.creds["one"]["token"]) == 403


def test_auth_is_off_until_the_first_principal_and_then_stays_on(almanac_bin, tmp_path):
    srv = AlmanacServer(almanac_bin, data_dir=tmp_path / "data", log_dir=tmp_path)
    srv.start()
    try:
        channel = grpc.insecure_channel(srv.host)
        admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
        assert list(admin.list_tables(parent=I)) == []
        done = auth_cli(almanac_bin, srv.data_dir, "create-principal", "late", "--role", "admin")
        assert done.returncode == 0, done.stderr
        token = json.loads(done.stdout)["token"]
        deadline = time.monotonic() + 10
        while True:
            try:
                list(admin.list_tables(parent=I, retry=None))
            except gexc.Unauthenticated:
                break
            assert time.monotonic() < deadline, "a new principal did not turn authentication on"
            time.sleep(0.2)
        authed = list(admin.list_tables(parent=I, retry=None, metadata=[("authorization", f"Bearer {token}")]))
        assert authed == []
        assert auth_cli(almanac_bin, srv.data_dir, "delete", "late").returncode == 0
        # Deleting the last principal does not open the server: nobody passes, the
        # deleted token included, until a principal is made again.
        deadline = time.monotonic() + 10
        while True:
            try:
                list(admin.list_tables(parent=I, retry=None, metadata=[("authorization", f"Bearer {token}")]))
            except gexc.Unauthenticated:
                break
            assert time.monotonic() < deadline, "a deleted principal's token still works"
            time.sleep(0.2)
        with pytest.raises(gexc.Unauthenticated):
            list(admin.list_tables(parent=I, retry=None))
        channel.close()
    finally:
        srv.stop()
