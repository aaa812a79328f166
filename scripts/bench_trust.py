"""Server CPU per gRPC point read and single-row write: plain text, TLS, and TLS with a
bearer token. Run by scripts/bench-trust (which says how)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
from google.cloud.bigtable_admin_v2 import BigtableTableAdminClient
from google.cloud.bigtable_admin_v2.services.bigtable_table_admin.transports import (
    BigtableTableAdminGrpcTransport,
)
from google.cloud.bigtable_admin_v2.types import ColumnFamily, Table
from google.cloud.bigtable_v2 import BigtableClient
from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
from google.cloud.bigtable_v2.types import MutateRowsRequest, Mutation, ReadRowsRequest, RowSet

from bt_helpers import free_port
from tls_helpers import make_pki

BIN = os.environ["ALMANAC_BIN"]
ROUNDS = int(os.environ.get("ROUNDS", "3"))
OPS = int(os.environ.get("OPS", "5000"))
ROWS = 20_000
VALUE = b"v" * 100
PARENT = "projects/bench/instances/trust"
TABLE = f"{PARENT}/tables/t"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_secs(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def mutation(i: int) -> list:
    return [Mutation(set_cell=Mutation.SetCell(
        family_name="cf", column_qualifier=b"q", timestamp_micros=1000, value=VALUE + str(i).encode()))]  # fmt: skip


def run(mode: str, pki, base: Path) -> tuple[float, float]:
    data = Path(tempfile.mkdtemp(dir=base))
    args = [BIN, "serve", "--data-dir", str(data), "--console-addr", "off",
            "--addr", f"127.0.0.1:{free_port()}", "--timestream-addr", f"127.0.0.1:{free_port()}"]  # fmt: skip
    token = None
    if mode != "plain":
        args += ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    if mode == "tls+token":
        out = subprocess.run([BIN, "auth", "create-principal", "bench", "--role", "admin",
                              "--data-dir", str(data)], check=True, capture_output=True, text=True)  # fmt: skip
        token = json.loads(out.stdout)["token"]
    addr = args[args.index("--addr") + 1]
    log = open(data / "log", "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while b"listening on" not in (data / "log").read_bytes():
            assert time.monotonic() < deadline and proc.poll() is None, (data / "log").read_text()
            time.sleep(0.05)
        if mode == "plain":
            channel = grpc.insecure_channel(addr)
        else:
            creds = grpc.ssl_channel_credentials(root_certificates=pki.ca_pem)
            if token:
                creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
            channel = grpc.secure_channel(addr, creds)
        admin = BigtableTableAdminClient(transport=BigtableTableAdminGrpcTransport(channel=channel))
        client = BigtableClient(transport=BigtableGrpcTransport(channel=channel))
        admin.create_table(parent=PARENT, table_id="t", table=Table(column_families={"cf": ColumnFamily()}))
        for start in range(0, ROWS, 1000):
            entries = [MutateRowsRequest.Entry(row_key=b"k%08d" % i, mutations=mutation(i))
                       for i in range(start, start + 1000)]  # fmt: skip
            for _ in client.mutate_rows(table_name=TABLE, entries=entries):
                pass
        keys = [b"k%08d" % ((i * 7919) % ROWS) for i in range(OPS)]
        for k in keys[:200]:  # warm the channel and caches
            list(client.read_rows(request=ReadRowsRequest(table_name=TABLE, rows=RowSet(row_keys=[k]))))
        before = cpu_secs(proc.pid)
        for k in keys:
            list(client.read_rows(request=ReadRowsRequest(table_name=TABLE, rows=RowSet(row_keys=[k]))))
        read_us = (cpu_secs(proc.pid) - before) * 1e6 / OPS
        before = cpu_secs(proc.pid)
        for i, k in enumerate(keys):
            client.mutate_row(table_name=TABLE, row_key=k, mutations=mutation(i))
        write_us = (cpu_secs(proc.pid) - before) * 1e6 / OPS
        channel.close()
        return read_us, write_us
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-trust-"))
    pki = make_pki(base / "pki")
    modes = ["plain", "tls", "tls+token"]
    results: dict = {m: ([], []) for m in modes}
    for r in range(ROUNDS):
        order = modes[r % 3:] + modes[: r % 3]
        for mode in order:
            read_us, write_us = run(mode, pki, base)
            results[mode][0].append(read_us)
            results[mode][1].append(write_us)
            print(f"round {r + 1} {mode:10} server CPU: {read_us:6.1f} µs per point read, {write_us:6.1f} µs per single-row write", flush=True)
    print("medians over the rounds:")
    plain_r = statistics.median(results["plain"][0])
    plain_w = statistics.median(results["plain"][1])
    for mode in modes:
        r_us = statistics.median(results[mode][0])
        w_us = statistics.median(results[mode][1])
        print(f"  {mode:10} read {r_us:6.1f} µs ({r_us - plain_r:+5.1f}), write {w_us:6.1f} µs ({w_us - plain_w:+5.1f})")


if __name__ == "__main__":
    main()
