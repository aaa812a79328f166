"""Durability under SIGKILL: every write the server acknowledged is there after a restart.

Writers of each kind (MutateRow, MutateRows, CheckAndMutateRow, ReadModifyWriteRow) run
concurrently, so acknowledgements come from shared group commits; the server is killed
with SIGKILL in the middle of the load, restarted on the same data directory, and every
acknowledged write must be readable.
"""

from __future__ import annotations

import threading
import time

from google.cloud.bigtable.data import (
    BigtableDataClient,
    ReadRowsQuery,
    RowMutationEntry,
    SetCell,
)
from google.cloud.bigtable.data.read_modify_write_rules import IncrementRule
from google.cloud.bigtable import Client

from bt_helpers import INSTANCE, MS, PROJECT, emulator_env

LOAD_SECONDS = 1.5
CALL_TIMEOUT_S = 3


def _writer(table, kind: str, stop: threading.Event, acked: list, errors: list) -> None:
    i = 0
    while not stop.is_set():
        try:
            if kind == "row":
                key = b"row-%06d" % i
                table.mutate_row(key, SetCell("cf", b"q", key, MS), operation_timeout=CALL_TIMEOUT_S)
                acked.append(key)
            elif kind == "rows":
                keys = [b"batch-%06d-%02d" % (i, j) for j in range(20)]
                table.bulk_mutate_rows(
                    [RowMutationEntry(k, SetCell("cf", b"q", k, MS)) for k in keys],
                    operation_timeout=CALL_TIMEOUT_S,
                )
                acked.extend(keys)
            elif kind == "check":
                key = b"check-%06d" % i
                table.check_and_mutate_row(
                    key, None, true_case_mutations=None,
                    false_case_mutations=SetCell("cf", b"q", key, MS),
                    operation_timeout=CALL_TIMEOUT_S,
                )
                acked.append(key)
            else:
                table.read_modify_write_row(
                    b"counter", IncrementRule("cf", b"n", 1), operation_timeout=CALL_TIMEOUT_S
                )
                acked.append(b"counter")
        except Exception as e:  # the kill ends every writer with some error
            if not stop.is_set():
                errors.append(repr(e))
            return
        i += 1


def test_acknowledged_writes_survive_sigkill(fresh_server):
    with emulator_env(fresh_server.host):
        admin = Client(project=PROJECT, admin=True)
        data = BigtableDataClient(project=PROJECT)
    admin.instance(INSTANCE).table("crash").create(column_families={"cf": None})
    table = data.get_table(INSTANCE, "crash")
    kinds = ["row", "row", "row", "rows", "rows", "check", "check", "counter", "counter"]
    stop = threading.Event()
    acked = [[] for _ in kinds]
    errors: list = []
    threads = [
        threading.Thread(target=_writer, args=(table, k, stop, acked[n], errors))
        for n, k in enumerate(kinds)
    ]
    for t in threads:
        t.start()
    time.sleep(LOAD_SECONDS)
    stop.set()  # writers start no new call; the ones in flight meet the kill
    fresh_server.proc.kill()  # SIGKILL
    fresh_server.proc.wait()
    for t in threads:
        t.join(timeout=60)
    table.close()
    data.close()
    assert not errors, errors
    assert all(acked), [len(a) for a in acked]  # every kind got acknowledgements

    fresh_server.start(fresh_server.port, fresh_server.ts_port)
    with emulator_env(fresh_server.host):
        after = BigtableDataClient(project=PROJECT)
    t = after.get_table(INSTANCE, "crash")
    rows = {r.row_key: r for r in t.read_rows(ReadRowsQuery(), operation_timeout=60)}
    t.close()
    after.close()
    increments = sum(1 for a in acked for k in a if k == b"counter")
    keys = {k for a in acked for k in a if k != b"counter"}
    missing = sorted(keys - rows.keys())
    assert not missing, f"{len(missing)} acknowledged rows lost, e.g. {missing[:5]}"
    for k in keys:
        assert rows[k].cells[0].value == k
    counter = int.from_bytes(rows[b"counter"].cells[0].value, "big", signed=True)
    # Every acknowledged increment is there; one in flight at the kill may be too.
    assert increments <= counter <= increments + kinds.count("counter")
    assert fresh_server.stop() == 0
