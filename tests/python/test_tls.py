"""TLS on every listener: `serve --tls-cert --tls-key`.

A server of its own serves a certificate signed by a throwaway CA (tls_helpers). Google's
GAPIC clients connect over a secure channel that trusts that CA, as they would to Cloud
Bigtable with custom roots; boto3 reaches the Timestream endpoint over https with the CA
as its bundle; the console and /metrics answer over https. Plain text to a TLS port gets
nowhere, an unusable certificate stops `serve` with a message naming the file, and `serve`
refuses plain text on a non-loopback address unless told `--insecure`.
"""

from __future__ import annotations

import ssl
import subprocess
import time
import urllib.request

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)
from google.cloud.bigtable_admin_v2.types import ColumnFamily, Table
from google.cloud.bigtable_v2 import BigtableClient
from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import Mutation, ReadRowsRequest

from bt_helpers import AlmanacServer, free_port, isolated_aws_env, ts_query_client, ts_write_client
from tls_helpers import make_pki

PARENT = "projects/p/instances/i"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(almanac_bin, tmp_path_factory, pki):
    base = tmp_path_factory.mktemp("tls")
    srv = AlmanacServer(
        almanac_bin,
        data_dir=base / "data",
        log_dir=base,
        extra_args=("--tls-cert", str(pki.cert), "--tls-key", str(pki.key)),
    )
    srv.start()
    yield srv
    if srv.running:
        srv.stop()


def secure_channel(srv, pki) -> grpc.Channel:
    return grpc.secure_channel(srv.host, grpc.ssl_channel_credentials(root_certificates=pki.ca_pem))


def test_google_clients_read_and_write_over_tls(tls_server, pki):
    channel = secure_channel(tls_server, pki)
    admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
    data = BigtableClient(transport=BigtableGrpcTransport(channel=channel))
    admin.create_table(
        parent=PARENT, table_id="secure", table=Table(column_families={"cf": ColumnFamily()})
    )
    name = f"{PARENT}/tables/secure"
    data.mutate_row(
        table_name=name,
        row_key=b"k1",
        mutations=[Mutation(set_cell=Mutation.SetCell(family_name="cf", column_qualifier=b"q",
                                                      timestamp_micros=1000, value=b"over tls"))],
    )  # fmt: skip
    chunks = [
        c for r in data.read_rows(request=ReadRowsRequest(table_name=name)) for c in r.chunks
    ]
    assert [(c.row_key, c.value) for c in chunks] == [(b"k1", b"over tls")]
    assert [t.name for t in admin.list_tables(parent=PARENT)] == [name]
    channel.close()


def test_a_client_that_does_not_trust_the_ca_is_refused(tls_server, pki, tmp_path):
    other = make_pki(tmp_path / "other")
    channel = grpc.secure_channel(
        tls_server.host, grpc.ssl_channel_credentials(root_certificates=other.ca_pem)
    )
    admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
    with pytest.raises(gexc.ServiceUnavailable):
        list(admin.list_tables(parent=PARENT, timeout=5, retry=None))
    channel.close()


def test_plain_text_to_a_tls_port_gets_nothing(tls_server):
    channel = grpc.insecure_channel(tls_server.host)
    admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
    with pytest.raises(gexc.GoogleAPICallError):
        list(admin.list_tables(parent=PARENT, timeout=5, retry=None))
    channel.close()
    with pytest.raises(Exception):
        urllib.request.urlopen(f"http://{tls_server.console_host}/metrics", timeout=5)


def test_boto3_writes_and_queries_over_https(tls_server, pki):
    endpoint = f"https://{tls_server.ts_host}"
    with isolated_aws_env():
        write = ts_write_client(endpoint, verify=str(pki.ca))
        query = ts_query_client(endpoint, verify=str(pki.ca))
        try:
            write.create_database(DatabaseName="tlsdb")
            write.create_table(DatabaseName="tlsdb", TableName="metrics")
            now = str(int(time.time() * 1000))
            write.write_records(
                DatabaseName="tlsdb",
                TableName="metrics",
                Records=[{
                    "Dimensions": [{"Name": "host", "Value": "h1"}],
                    "MeasureName": "cpu", "MeasureValue": "1.5",
                    "MeasureValueType": "DOUBLE", "Time": now,
                }],
            )  # fmt: skip
            rows = query.query(QueryString='SELECT measure_value::double FROM "tlsdb"."metrics"')["Rows"]
            assert rows == [{"Data": [{"ScalarValue": "1.5"}]}]
            endpoints = write.describe_endpoints()["Endpoints"]
            assert endpoints[0]["Address"] == f"https://{tls_server.ts_host}"
        finally:
            write.close()
            query.close()


def test_the_console_and_metrics_answer_over_https(tls_server, pki):
    context = ssl.create_default_context(cafile=str(pki.ca))
    with urllib.request.urlopen(
        f"https://{tls_server.console_host}/metrics", context=context, timeout=10
    ) as r:
        assert r.status == 200
        assert b"almanac_open_connections" in r.read()
    with urllib.request.urlopen(
        f"https://{tls_server.console_host}/", context=context, timeout=10
    ) as r:
        assert r.status == 200


def serve_fails(almanac_bin, tmp_path, *args, addr: str = "127.0.0.1") -> str:
    cmd = [
        almanac_bin, "serve", "--data-dir", str(tmp_path / "d"),
        "--addr", f"{addr}:{free_port()}", "--timestream-addr", f"127.0.0.1:{free_port()}",
        "--console-addr", "off", *args,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0, done.stderr
    return done.stderr


def test_an_unusable_certificate_stops_serve_naming_the_file(almanac_bin, tmp_path, pki):
    missing = serve_fails(almanac_bin, tmp_path, "--tls-cert", str(tmp_path / "nope.pem"),
                          "--tls-key", str(pki.key))  # fmt: skip
    assert "nope.pem" in missing, missing
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    bad = serve_fails(almanac_bin, tmp_path, "--tls-cert", str(garbage), "--tls-key", str(pki.key))
    assert "CERTIFICATE" in bad or "certificate" in bad, bad
    other = make_pki(tmp_path / "other")
    mismatched = serve_fails(
        almanac_bin, tmp_path, "--tls-cert", str(pki.cert), "--tls-key", str(other.key)
    )
    assert "certificate and key" in mismatched, mismatched
    alone = serve_fails(almanac_bin, tmp_path, "--tls-cert", str(pki.cert))
    assert "--tls-key" in alone, alone


def test_plain_text_beyond_loopback_needs_insecure(almanac_bin, tmp_path):
    stderr = serve_fails(almanac_bin, tmp_path, addr="0.0.0.0")
    assert "refusing to serve plain text on 0.0.0.0" in stderr and "--insecure" in stderr, stderr
