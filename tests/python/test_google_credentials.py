"""`almanac serve --bigtable` over TLS with Google credentials, as it speaks to Cloud Bigtable.

The remote Bigtable is a backend `almanac serve` with TLS and one principal; a local fake
of Google's OAuth token endpoint hands out that principal's bearer token. The front-end
gets `GOOGLE_APPLICATION_CREDENTIALS` naming a service-account key file whose
`token_uri` is the fake, `--bigtable-endpoint https://127.0.0.1:PORT` and the test CA
(`--bigtable-ca-cert`): it signs a JWT with the key (checked here against the public
key), trades it for a token, and puts the token on every call. Cloud Bigtable's own
endpoints are the same path without `--bigtable-endpoint`; nothing here talks to
anything but 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from bt_helpers import AlmanacServer, free_port, ts_query_client, ts_write_client
from tls_helpers import make_pki

REMOTE = "projects/gcp/instances/series"
EMAIL = "almanac-front@gcp.iam.gserviceaccount.com"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def _b64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


class TokenEndpoint:
    """Google's OAuth token endpoint for service accounts, on loopback: checks the JWT's
    signature and claims and answers `token`."""

    def __init__(self, public_key, token: str):
        self.public_key, self.token = public_key, token
        self.claims: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the http.server API
                body = self.rfile.read(int(self.headers["Content-Length"]))
                form = urllib.parse.parse_qs(body.decode())
                status, answer = outer.answer(form)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, form: dict) -> tuple[int, dict]:
        if form.get("grant_type") != [GRANT] or len(form.get("assertion", [])) != 1:
            return 400, {"error": "invalid_request"}
        header, claims, signature = form["assertion"][0].split(".")
        try:
            self.public_key.verify(_b64(signature), f"{header}.{claims}".encode(),
                                   padding.PKCS1v15(), hashes.SHA256())
        except Exception:  # noqa: BLE001 - any failure is a bad signature
            return 400, {"error": "invalid_grant", "error_description": "bad signature"}
        claims = json.loads(_b64(claims))
        self.claims.append(claims)
        if claims.get("iss") != EMAIL or claims.get("aud") != self.url:
            return 400, {"error": "invalid_grant"}
        return 200, {"access_token": self.token, "expires_in": 3600, "token_type": "Bearer"}

    def close(self):
        self.server.shutdown()


def _service_account(path, key, token_uri: str) -> None:
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "gcp", "private_key_id": "k1",
        "private_key": pem, "client_email": EMAIL, "client_id": "1",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": token_uri,
    }))  # fmt: skip


def _backend(almanac_bin, tmp_path, pki) -> tuple[AlmanacServer, str]:
    data = tmp_path / "backend"
    made = subprocess.run(
        [almanac_bin, "auth", "create-principal", "front", "--role", "admin",
         "--data-dir", str(data)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    backend = AlmanacServer(almanac_bin, data_dir=data, log_dir=tmp_path, timestream=False,
                            extra_args=("--tls-cert", str(pki.cert), "--tls-key", str(pki.key)))
    backend.start()
    return backend, json.loads(made.stdout)["token"]


def test_a_front_end_reaches_a_tls_bigtable_with_google_credentials(almanac_bin, tmp_path,
                                                                    _aws_env):
    pki = make_pki(tmp_path / "pki")
    backend, token = _backend(almanac_bin, tmp_path, pki)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    google = TokenEndpoint(key.public_key(), token)
    sa = tmp_path / "sa.json"
    _service_account(sa, key, google.url)
    front = AlmanacServer(
        almanac_bin, data_dir=tmp_path / "front", log_dir=tmp_path,
        extra_args=("--bigtable", REMOTE, "--bigtable-endpoint", f"https://{backend.host}",
                    "--bigtable-ca-cert", str(pki.ca)),
        extra_env={"GOOGLE_APPLICATION_CREDENTIALS": str(sa)},
    )  # fmt: skip
    try:
        front.start()
        assert google.claims, "the front-end never asked the token endpoint"
        scopes = google.claims[0]["scope"].split()
        assert "https://www.googleapis.com/auth/bigtable.data" in scopes, scopes
        write = ts_write_client(front.ts_endpoint)
        query = ts_query_client(front.ts_endpoint)
        write.create_database(DatabaseName="gcp")
        write.create_table(DatabaseName="gcp", TableName="cpu")
        now = int(time.time() * 1000)
        write.write_records(DatabaseName="gcp", TableName="cpu", Records=[{
            "Dimensions": [{"Name": "host", "Value": f"h{i}"}], "MeasureName": "usage",
            "MeasureValue": str(i), "MeasureValueType": "BIGINT", "Time": str(now - i),
        } for i in range(10)])  # fmt: skip
        rows = query.query(QueryString='SELECT count(*), sum(measure_value::bigint) '
                                       'FROM "gcp"."cpu"')["Rows"]
        assert [d["ScalarValue"] for d in rows[0]["Data"]] == ["10", "45"]
        write.close()
        query.close()
        assert front.stop() == 0
    finally:
        if front.running:
            front.stop()
        google.close()
        backend.stop()


def test_credentials_the_bigtable_refuses_stop_the_front_end_with_why(almanac_bin, tmp_path):
    pki = make_pki(tmp_path / "pki")
    backend, _ = _backend(almanac_bin, tmp_path, pki)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    google = TokenEndpoint(key.public_key(), "not-a-principal-token")
    sa = tmp_path / "sa.json"
    _service_account(sa, key, google.url)

    def serve(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [almanac_bin, "serve", "--data-dir", str(tmp_path / "f"), "--addr",
             f"127.0.0.1:{free_port()}", "--timestream-addr", f"127.0.0.1:{free_port()}",
             "--console-addr", "off", "--bigtable", REMOTE, *args],
            capture_output=True, text=True, timeout=60, env=env,
        )  # fmt: skip

    base = {k: v for k, v in os.environ.items() if k != "GOOGLE_APPLICATION_CREDENTIALS"}
    tls = ("--bigtable-endpoint", f"https://{backend.host}", "--bigtable-ca-cert", str(pki.ca))
    try:
        refused = serve(*tls, env={**base, "GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
        assert refused.returncode != 0, refused.stderr
        assert "Unauthenticated" in refused.stderr or "UNAUTHENTICATED" in refused.stderr, \
            refused.stderr
        missing = serve(*tls, env={**base, "GOOGLE_APPLICATION_CREDENTIALS":
                                   str(tmp_path / "absent.json")})
        assert missing.returncode != 0 and "no Google credentials" in missing.stderr, \
            missing.stderr
        # The test CA is not in the system's roots: without --bigtable-ca-cert the
        # backend's certificate is refused.
        untrusted = serve("--bigtable-endpoint", f"https://{backend.host}",
                          env={**base, "GOOGLE_APPLICATION_CREDENTIALS": str(sa)})
        assert untrusted.returncode != 0, untrusted.stderr
        plain_ca = serve("--bigtable-endpoint", backend.host, "--bigtable-ca-cert", str(pki.ca),
                         env=base)
        assert plain_ca.returncode != 0 and "--bigtable-ca-cert is for a TLS endpoint" in \
            plain_ca.stderr, plain_ca.stderr
    finally:
        google.close()
        backend.stop()
