"""Change streams through Google's generated clients: GenerateInitialChangeStreamPartitions
and ReadChangeStream on the Data API, change_stream_config on the Table Admin API.

Almanac streams a table's changes as one partition, the whole key space: one
DataChange per committed row change, in commit order, with a continuation token (the
commit time in µs) that resumes exactly after it. The tests write through the new data
client, read through the raw GAPIC client (the only one with ReadChangeStream) and
reassemble split changes and chunked values themselves (`assemble`).

The load tests record every acknowledged mutation with a per-row sequence number in
its value and require each to come back exactly once, in the order its writer applied
it. A dedicated server (own data dir, a GC sweep every second) is SIGKILLed and
restarted to show that changes are as durable as writes and that tokens survive.
"""

from __future__ import annotations

import collections
import random
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from google.api_core import exceptions as gexc
from google.cloud import bigtable
from google.cloud.bigtable.data import (
    BigtableDataClient,
    DeleteAllFromFamily,
    DeleteAllFromRow,
    DeleteRangeFromColumn,
    RowMutationEntry,
    SetCell,
)
from google.cloud.bigtable.data.read_modify_write_rules import IncrementRule
from google.cloud.bigtable.data.row_filters import ColumnQualifierRegexFilter
from google.cloud.bigtable_admin_v2.types import Table
from google.cloud.bigtable_v2.types import ReadChangeStreamResponse
from google.protobuf import duration_pb2, timestamp_pb2

from bt_helpers import INSTANCE, MS, PROJECT, AlmanacServer, emulator_env, from_int64

INSTANCE_NAME = f"projects/{PROJECT}/instances/{INSTANCE}"
DAY_S = 86_400
SECOND_US = 1_000_000
OP_TIMEOUT = 30  # admin long-running operations (answered done)
CALL_TIMEOUT = 10  # one data call
STREAM_TIMEOUT = 60  # the whole of one ReadChangeStream: a hang fails, it never blocks
# Marks a SetCell whose timestamp the server assigns (sent as -1).
SERVER = -1

_TYPE = ReadChangeStreamResponse.DataChange.Type
USER = int(_TYPE.USER)
GARBAGE_COLLECTION = int(_TYPE.GARBAGE_COLLECTION)
CONTINUATION = int(_TYPE.CONTINUATION)

# The one partition: start_key_closed "" .. end_key_open "".
WHOLE = {"row_range": {"start_key_closed": b"", "end_key_open": b""}}


# ---- time -----------------------------------------------------------------------------


def now_us() -> int:
    return time.time_ns() // 1000


def ts_pb(us: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=us // SECOND_US, nanos=(us % SECOND_US) * 1000)


def pb_us(t) -> int:
    return t.seconds * SECOND_US + t.nanos // 1000


def duration(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


# ---- reading a change stream ---------------------------------------------------------


@dataclass
class Change:
    """One logical DataChange, reassembled from its messages and value chunks."""

    type: int
    row_key: bytes
    commit_us: int
    source_cluster_id: str
    tiebreaker: int
    mutations: list  # normalized tuples (see `mutation_tuple`), chunked values joined
    token: str
    low_watermark_us: int | None
    messages: list = field(repr=False)  # the raw DataChange messages
    chunk_infos: list = field(default_factory=list, repr=False)  # (offset, size, last)

    def summary(self) -> tuple:
        """What two reads of the same change agree on."""
        return (self.type, self.row_key, self.commit_us, self.token, self.mutations)


@dataclass
class Heartbeat:
    token: str
    partition: object  # raw StreamPartition
    low_watermark_us: int | None


@dataclass
class Close:
    code: int
    message: str
    tokens: int
    new_partitions: int


def mutation_tuple(m) -> tuple:
    """A raw Mutation as a comparable tuple."""
    kind = m.WhichOneof("mutation")
    if kind == "set_cell":
        s = m.set_cell
        return ("set", s.family_name, s.column_qualifier, s.timestamp_micros, s.value)
    if kind == "delete_from_column":
        d = m.delete_from_column
        return (
            "delcol",
            d.family_name,
            d.column_qualifier,
            d.time_range.start_timestamp_micros,
            d.time_range.end_timestamp_micros,
        )
    if kind == "delete_from_family":
        return ("delfam", m.delete_from_family.family_name)
    if kind == "delete_from_row":
        return ("delrow",)
    return (kind, str(getattr(m, kind)))


class _Pending:
    """A DataChange whose `done` message has not arrived yet."""

    def __init__(self, first):
        assert first.type_ in (USER, GARBAGE_COLLECTION), (
            f"a change starts with type {first.type_}, not USER or GARBAGE_COLLECTION"
        )
        self.first = first
        self.messages: list = []
        self.mutations: list = []
        self.chunk_infos: list = []
        self.partial = None  # (set_cell, bytearray, size) of a value being chunked

    def add(self, dc) -> None:
        self.messages.append(dc)
        for ch in dc.chunks:
            m = ch.mutation
            if ch.HasField("chunk_info"):
                info = ch.chunk_info
                assert m.WhichOneof("mutation") == "set_cell", "chunk_info on a non-SetCell"
                if self.partial is None:
                    assert info.chunked_value_offset == 0, "a chunked value starts past 0"
                    self.partial = (m.set_cell, bytearray(), info.chunked_value_size)
                sc, buf, size = self.partial
                assert info.chunked_value_size == size, "chunked_value_size changed"
                assert info.chunked_value_offset == len(buf), (
                    f"chunk at offset {info.chunked_value_offset}, expected {len(buf)}"
                )
                assert (m.set_cell.family_name, m.set_cell.column_qualifier) == (
                    sc.family_name,
                    sc.column_qualifier,
                ), "a chunked value's chunks name different cells"
                buf += m.set_cell.value
                self.chunk_infos.append(
                    (info.chunked_value_offset, info.chunked_value_size, info.last_chunk)
                )
                if info.last_chunk:
                    assert len(buf) == size, f"chunked value is {len(buf)} bytes, not {size}"
                    self.mutations.append(
                        ("set", sc.family_name, sc.column_qualifier, sc.timestamp_micros, bytes(buf))
                    )
                    self.partial = None
            else:
                assert self.partial is None, "a chunked value was interrupted"
                self.mutations.append(mutation_tuple(m))

    def finish(self) -> Change:
        assert self.partial is None, "change done in the middle of a chunked value"
        last = self.messages[-1]
        first = self.first
        return Change(
            type=first.type_,
            row_key=first.row_key,
            commit_us=pb_us(first.commit_timestamp),
            source_cluster_id=first.source_cluster_id,
            tiebreaker=first.tiebreaker,
            mutations=self.mutations,
            token=last.token,
            low_watermark_us=(
                pb_us(last.estimated_low_watermark)
                if last.HasField("estimated_low_watermark")
                else None
            ),
            messages=self.messages,
            chunk_infos=self.chunk_infos,
        )


def assemble(responses):
    """Yields Change, Heartbeat and Close records from ReadChangeStream responses."""
    pending: _Pending | None = None
    for resp in responses:
        raw = ReadChangeStreamResponse.pb(resp)
        kind = raw.WhichOneof("stream_record")
        if kind == "data_change":
            dc = raw.data_change
            if pending is None:
                pending = _Pending(dc)
            else:
                assert dc.type_ == CONTINUATION, (
                    f"message {len(pending.messages) + 1} of a split change has type "
                    f"{dc.type_}, not CONTINUATION"
                )
            pending.add(dc)
            if dc.done:
                yield pending.finish()
                pending = None
            else:
                assert not dc.token, "a message before `done` carries a token"
            continue
        assert pending is None, f"{kind} in the middle of a split DataChange"
        if kind == "heartbeat":
            hb = raw.heartbeat
            yield Heartbeat(
                token=hb.continuation_token.token,
                partition=hb.continuation_token.partition,
                low_watermark_us=(
                    pb_us(hb.estimated_low_watermark)
                    if hb.HasField("estimated_low_watermark")
                    else None
                ),
            )
        elif kind == "close_stream":
            cs = raw.close_stream
            yield Close(
                code=cs.status.code,
                message=cs.status.message,
                tokens=len(cs.continuation_tokens),
                new_partitions=len(cs.new_partitions),
            )
        else:
            raise AssertionError(f"unknown stream record {kind!r}: {raw}")
    assert pending is None, "the stream ended inside a split DataChange"


def stream_request(
    name: str,
    *,
    start_us: int | None = None,
    token: str | None = None,
    end_us: int | None = None,
    heartbeat_ms: int | None = None,
    partition=WHOLE,
    token_partition=WHOLE,
) -> dict:
    req: dict = {"table_name": name, "partition": partition}
    if start_us is not None:
        req["start_time"] = ts_pb(start_us)
    if token is not None:
        req["continuation_tokens"] = {"tokens": [{"partition": token_partition, "token": token}]}
    if end_us is not None:
        req["end_time"] = ts_pb(end_us)
    if heartbeat_ms is not None:
        req["heartbeat_duration"] = duration(heartbeat_ms)
    return req


class Stream:
    """One open ReadChangeStream; iterate it for assembled records, `cancel` to leave."""

    def __init__(self, gapic, name: str, timeout: float = STREAM_TIMEOUT, **kw):
        self.call = gapic.read_change_stream(request=stream_request(name, **kw), timeout=timeout)
        self.records: list = []
        self.times: list = []  # time.time() each record was assembled
        self._it = assemble(self.call)

    def __iter__(self):
        for rec in self._it:
            self.records.append(rec)
            self.times.append(time.time())
            yield rec

    def cancel(self) -> None:
        self.call.cancel()


@dataclass
class StreamResult:
    records: list
    times: list  # when each record arrived (time.time())

    @property
    def changes(self) -> list[Change]:
        return [r for r in self.records if isinstance(r, Change)]

    @property
    def heartbeats(self) -> list[Heartbeat]:
        return [r for r in self.records if isinstance(r, Heartbeat)]


def read_to_close(gapic, name: str, timeout: float = STREAM_TIMEOUT, **kw) -> StreamResult:
    """Reads a stream with an end_time to its end: it must end with one CloseStream OK."""
    s = Stream(gapic, name, timeout=timeout, **kw)
    records = list(s)
    assert records, "the stream ended without a single record"
    closes = [r for r in records if isinstance(r, Close)]
    assert len(closes) == 1, f"expected one CloseStream, got {closes}"
    assert (closes[0].code, closes[0].tokens, closes[0].new_partitions) == (0, 0, 0), closes[0]
    assert isinstance(records[-1], Close), f"the stream did not end with its CloseStream: {records[-1]}"
    result = StreamResult(records, s.times)
    check_change_fields(result.changes)
    return result


def check_change_fields(changes: list[Change]) -> None:
    """What holds for every change: token = commit µs, strictly increasing commits, done."""
    prev = None
    for i, ch in enumerate(changes):
        assert ch.token == str(ch.commit_us), f"change {i}: token {ch.token!r} != commit {ch.commit_us}"
        assert ch.tiebreaker == 0, f"change {i}: tiebreaker {ch.tiebreaker}"
        assert [m.done for m in ch.messages] == [False] * (len(ch.messages) - 1) + [True]
        if ch.type == USER:
            assert ch.source_cluster_id == "almanac", f"change {i}: {ch.source_cluster_id!r}"
        assert ch.low_watermark_us is not None, f"change {i} has no low watermark"
        if prev is not None:
            assert ch.commit_us > prev.commit_us, (
                f"commit timestamps not strictly increasing: change {i} at {ch.commit_us} "
                f"after {prev.commit_us}"
            )
        prev = ch


def read_until(stream: Stream, pred, deadline_s: float):
    """The first record satisfying `pred` (or None at the deadline); the stream is cancelled."""
    end = time.monotonic() + deadline_s
    try:
        for rec in stream:
            if pred(rec):
                return rec
            if time.monotonic() > end:
                return None
        return None
    finally:
        stream.cancel()


# ---- tables ---------------------------------------------------------------------------


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def cs_config(seconds: int) -> dict:
    return {"retention_period": duration_pb2.Duration(seconds=seconds)}


def retention_of(table) -> int:
    """GetTable's change_stream_config.retention_period in seconds (0 when absent)."""
    return Table.pb(table).change_stream_config.retention_period.seconds


class Tables:
    """Tables a test makes on one server (through `tac`); `cleanup` deletes them."""

    def __init__(self, tac, data_client):
        self.tac = tac
        self.data_client = data_client
        self.names: list[str] = []
        self.opened: list = []

    def create(self, retention_s: int | None = DAY_S, families=None, table_id=None):
        """CreateTable (with a change stream unless retention_s is None): (name, data table)."""
        table: dict = {
            "column_families": {"cf": {}, "cf2": {}} if families is None else families,
        }
        if retention_s is not None:
            table["change_stream_config"] = cs_config(retention_s)
        table_id = table_id or uid("cs")
        created = self.tac.create_table(
            request={"parent": INSTANCE_NAME, "table_id": table_id, "table": table}
        )
        self.names.append(created.name)
        data = self.data_client.get_table(INSTANCE, table_id)
        self.opened.append(data)
        return created.name, data

    def cleanup(self) -> None:
        for d in self.opened:
            d.close()
        for name in self.names:
            try:
                self.tac.delete_table(request={"name": name})
            except gexc.NotFound:
                pass


@pytest.fixture(scope="module")
def gapic(admin_client):
    """The generated data client (BigtableClient): the one with ReadChangeStream."""
    return admin_client.table_data_client


@pytest.fixture
def tables(tac, data_client):
    made = Tables(tac, data_client)
    yield made
    made.cleanup()


def set_cell(table, key: bytes, value: bytes, family="cf", qualifier=b"q", ts=SERVER):
    table.mutate_row(key, SetCell(family, qualifier, value, ts), operation_timeout=CALL_TIMEOUT)


# ---- 1. config ------------------------------------------------------------------------


def test_change_stream_config_create_update_and_off(tac, gapic, tables):
    name, data = tables.create(retention_s=DAY_S)
    assert retention_of(tac.get_table(request={"name": name})) == DAY_S

    op = tac.update_table(
        request={
            "table": {"name": name, "change_stream_config": cs_config(3 * DAY_S)},
            "update_mask": {"paths": ["change_stream_config"]},
        }
    )
    assert retention_of(op.result(timeout=OP_TIMEOUT)) == 3 * DAY_S
    assert retention_of(tac.get_table(request={"name": name})) == 3 * DAY_S

    # Outside 1..7 days: refused, on create and on update, and nothing changes.
    for bad in (12 * 3600, 8 * DAY_S):
        with pytest.raises(gexc.InvalidArgument):
            tac.create_table(
                request={
                    "parent": INSTANCE_NAME,
                    "table_id": uid("bad"),
                    "table": {"column_families": {"cf": {}}, "change_stream_config": cs_config(bad)},
                }
            )
        with pytest.raises(gexc.InvalidArgument):
            tac.update_table(
                request={
                    "table": {"name": name, "change_stream_config": cs_config(bad)},
                    "update_mask": {"paths": ["change_stream_config"]},
                }
            ).result(timeout=OP_TIMEOUT)
    assert retention_of(tac.get_table(request={"name": name})) == 3 * DAY_S

    # While it is on, a write is streamed.
    t0 = now_us()
    set_cell(data, b"on", b"1")
    got = read_to_close(gapic, name, start_us=t0, end_us=now_us() + SECOND_US)
    assert [(c.row_key, c.mutations[0][4]) for c in got.changes] == [(b"on", b"1")]

    # A config without a retention turns it off.
    tac.update_table(
        request={
            "table": {"name": name, "change_stream_config": {}},
            "update_mask": {"paths": ["change_stream_config"]},
        }
    ).result(timeout=OP_TIMEOUT)
    assert retention_of(tac.get_table(request={"name": name})) == 0
    with pytest.raises(gexc.FailedPrecondition):
        list(gapic.generate_initial_change_stream_partitions(table_name=name, timeout=CALL_TIMEOUT))
    with pytest.raises(gexc.FailedPrecondition):
        list(Stream(gapic, name, start_us=now_us() - SECOND_US, end_us=now_us() + SECOND_US))


def test_change_stream_turned_on_by_update_table(tac, gapic, tables):
    name, data = tables.create(retention_s=None)
    assert retention_of(tac.get_table(request={"name": name})) == 0
    set_cell(data, b"before", b"x")  # no stream yet: not recorded
    tac.update_table(
        request={
            "table": {"name": name, "change_stream_config": cs_config(7 * DAY_S)},
            "update_mask": {"paths": ["change_stream_config"]},
        }
    ).result(timeout=OP_TIMEOUT)
    assert retention_of(tac.get_table(request={"name": name})) == 7 * DAY_S
    t0 = now_us()
    set_cell(data, b"after", b"y")
    got = read_to_close(gapic, name, start_us=t0 - SECOND_US, end_us=now_us() + SECOND_US)
    assert [c.row_key for c in got.changes] == [b"after"]


# ---- 2. partitions --------------------------------------------------------------------


def test_one_partition_covers_the_whole_key_space(gapic, tables):
    name, _ = tables.create()
    parts = list(gapic.generate_initial_change_stream_partitions(table_name=name, timeout=CALL_TIMEOUT))
    assert len(parts) == 1, parts
    rr = type(parts[0]).pb(parts[0]).partition.row_range
    assert rr.WhichOneof("start_key") == "start_key_closed"
    assert rr.WhichOneof("end_key") == "end_key_open"
    assert rr.start_key_closed == b"" and rr.end_key_open == b""
    # The partition as returned is accepted back as is.
    t0 = now_us()
    got = list(
        assemble(
            gapic.read_change_stream(
                request={
                    "table_name": name,
                    "partition": parts[0].partition,
                    "start_time": ts_pb(t0),
                    "end_time": ts_pb(t0 + 200_000),
                },
                timeout=STREAM_TIMEOUT,
            )
        )
    )
    assert [type(r) for r in got] == [Close]

    with pytest.raises(gexc.NotFound):
        list(
            gapic.generate_initial_change_stream_partitions(
                table_name=f"{INSTANCE_NAME}/tables/{uid('missing')}", timeout=CALL_TIMEOUT
            )
        )


# ---- 3, 4. concurrent load, exactly once --------------------------------------------

KINDS = ("set", "multi", "batch", "delcol", "check", "incr", "counter", "delrow", "shared")
WRITERS = 4
ROWS_PER_WRITER = 3
LOAD_SECONDS = 2.5
BASE_TS = 1_000_000 * MS  # explicit cell timestamps: BASE_TS + seq ms


class Writer:
    """One writer thread: owns its rows, increments the shared counter, writes its own
    column of the shared row. `expected` holds (owner, row, mutations) per
    acknowledged change, in the order the writer got the acknowledgements."""

    def __init__(self, table, w: int):
        self.table = table
        self.w = w
        self.rows = [b"w%d-r%d" % (w, i) for i in range(ROWS_PER_WRITER)]
        self.rng = random.Random(w)
        self.seq: collections.Counter = collections.Counter()
        self.expected: list = []
        self.counter: list = []  # (ts, value) of acknowledged shared increments
        self.kinds: collections.Counter = collections.Counter()
        self.branches: collections.Counter = collections.Counter()  # CheckAndMutate
        self.errors: list = []
        self.last_ack = 0.0

    def _value(self, row: bytes) -> tuple[bytes, int]:
        self.seq[row] += 1
        n = self.seq[row]
        return b"%s#%d" % (row, n), n

    def _ack(self, kind: str, *changes) -> None:
        self.expected.extend(changes)
        self.kinds[kind] += 1
        self.last_ack = time.time()

    def op(self, kind: str) -> None:
        t = self.table
        row = self.rng.choice(self.rows)
        if kind == "set":
            v, _ = self._value(row)
            t.mutate_row(row, SetCell("cf", b"v", v, SERVER), operation_timeout=CALL_TIMEOUT)
            self._ack(kind, (row, row, [("set", "cf", b"v", SERVER, v)]))
        elif kind == "multi":
            v, n = self._value(row)
            ts = BASE_TS + n * MS
            t.mutate_row(
                row,
                [SetCell("cf", b"e", v, ts), DeleteAllFromFamily("cf2"), SetCell("cf2", b"x", v, SERVER)],
                operation_timeout=CALL_TIMEOUT,
                retryable_errors=(),
            )
            self._ack(
                kind,
                (row, row, [("set", "cf", b"e", ts, v), ("delfam", "cf2"), ("set", "cf2", b"x", SERVER, v)]),
            )
        elif kind == "batch":
            entries, changes = [], []
            for r in self.rows:
                v, n = self._value(r)
                ts = BASE_TS + n * MS
                entries.append(RowMutationEntry(r, [SetCell("cf", b"v", v, SERVER), SetCell("cf", b"b", v, ts)]))
                changes.append((r, r, [("set", "cf", b"v", SERVER, v), ("set", "cf", b"b", ts, v)]))
            t.bulk_mutate_rows(entries, operation_timeout=CALL_TIMEOUT, retryable_errors=())
            self._ack(kind, *changes)
        elif kind == "delcol":
            _, n = self._value(row)
            if n % 2:
                start, end = BASE_TS, BASE_TS + n * MS
                m = DeleteRangeFromColumn("cf", b"e", start, end)
            else:
                start, end = 0, 0  # all versions
                m = DeleteRangeFromColumn("cf", b"b")
            t.mutate_row(row, m, operation_timeout=CALL_TIMEOUT, retryable_errors=())
            qual = b"e" if n % 2 else b"b"
            self._ack(kind, (row, row, [("delcol", "cf", qual, start, end)]))
        elif kind == "check":
            v, n = self._value(row)
            ts = BASE_TS + n * MS
            # Column f flips the branch: the false case writes it, the true case deletes it.
            matched = t.check_and_mutate_row(
                row,
                ColumnQualifierRegexFilter(b"f"),
                true_case_mutations=[DeleteRangeFromColumn("cf", b"f"), SetCell("cf", b"t", v, SERVER)],
                false_case_mutations=[SetCell("cf", b"v", v, SERVER), SetCell("cf", b"f", v, ts)],
                operation_timeout=CALL_TIMEOUT,
            )
            muts = (
                [("delcol", "cf", b"f", 0, 0), ("set", "cf", b"t", SERVER, v)]
                if matched
                else [("set", "cf", b"v", SERVER, v), ("set", "cf", b"f", ts, v)]
            )
            self.branches[matched] += 1
            self._ack(kind, (row, row, muts))
        elif kind == "incr":
            self._value(row)
            res = t.read_modify_write_row(row, IncrementRule("cf", b"n", 1), operation_timeout=CALL_TIMEOUT)
            [c] = res.cells
            self._ack(kind, (row, row, [("set", "cf", b"n", c.timestamp_micros, c.value)]))
        elif kind == "counter":
            res = t.read_modify_write_row(
                b"counter", IncrementRule("cf", b"n", 1), operation_timeout=CALL_TIMEOUT
            )
            [c] = res.cells
            self.counter.append((c.timestamp_micros, c.value))
            self._ack(kind)
        elif kind == "delrow":
            self._value(row)
            t.mutate_row(row, DeleteAllFromRow(), operation_timeout=CALL_TIMEOUT, retryable_errors=())
            self._ack(kind, (row, row, [("delrow",)]))
        elif kind == "shared":
            self.seq[b"shared"] += 1
            v = b"shared-w%d#%d" % (self.w, self.seq[b"shared"])
            qual = b"w%d" % self.w
            t.mutate_row(b"shared", SetCell("cf", qual, v, SERVER), operation_timeout=CALL_TIMEOUT)
            self._ack(kind, ((b"shared", qual), b"shared", [("set", "cf", qual, SERVER, v)]))
        else:
            raise AssertionError(kind)

    def run(self, deadline: float) -> None:
        i = 0
        try:
            # Every kind at least once, then until the deadline.
            while i < len(KINDS) or time.monotonic() < deadline:
                self.op(KINDS[(i + self.w) % len(KINDS)])
                i += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"writer {self.w} op {i}: {e!r}")


def run_load(table, seconds: float = LOAD_SECONDS) -> list[Writer]:
    writers = [Writer(table, w) for w in range(WRITERS)]
    deadline = time.monotonic() + seconds
    threads = [threading.Thread(target=w.run, args=(deadline,), daemon=True) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 120)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    errors = [e for w in writers for e in w.errors]
    assert not errors, errors
    for w in writers:
        assert set(w.kinds) == set(KINDS), f"writer {w.w} did only {dict(w.kinds)}"
    branches = sum((w.branches for w in writers), collections.Counter())
    assert branches[True] and branches[False], f"CheckAndMutate branches taken: {branches}"
    return writers


def owner_of(ch: Change):
    if ch.row_key == b"shared":
        return (b"shared", ch.mutations[0][2] if ch.mutations else None)
    return ch.row_key


def check_exactly_once(changes: list[Change], writers: list[Writer], t0_us: int) -> None:
    """Every acknowledged change exactly once, none other, per owner in writer order."""
    expected: dict = collections.defaultdict(list)
    for w in writers:
        for owner, row, muts in w.expected:
            expected[owner].append((row, muts))
    actual: dict = collections.defaultdict(list)
    counter: list = []
    for ch in changes:
        assert ch.type == USER, f"unexpected change type {ch.type}: {ch}"
        assert ch.source_cluster_id == "almanac"
        if ch.row_key == b"counter":
            counter.append(ch)
            continue
        actual[owner_of(ch)].append(ch)

    extra = sorted(set(actual) - set(expected), key=repr)
    missing = sorted(set(expected) - set(actual), key=repr)
    assert not extra, f"changes of rows nobody acknowledged a write to: {extra}"
    assert not missing, f"no changes at all for {missing}"
    for owner, exp in expected.items():
        act = actual[owner]
        got = []
        for (_, emuts), ch in zip(exp, act):
            # Server-assigned timestamps: any ms time from the load's start to the commit.
            norm = []
            for e, a in zip(emuts, ch.mutations):
                if e[0] == "set" and e[3] == SERVER and a[0] == "set":
                    ok = t0_us - MS <= a[3] <= ch.commit_us and a[3] % MS == 0
                    a = a[:3] + ((SERVER if ok else a[3]),) + a[4:]
                norm.append(a)
            norm.extend(ch.mutations[len(emuts):])
            got.append((ch.row_key, norm))
        got.extend((ch.row_key, ch.mutations) for ch in act[len(exp):])
        assert len(act) == len(exp), (
            f"{owner!r}: {len(act)} changes streamed, {len(exp)} acknowledged"
        )
        assert got == [(row, muts) for row, muts in exp], f"changes of {owner!r} differ"

    acked = sorted((from_int64(v), ts) for w in writers for ts, v in w.counter)
    n = len(acked)
    assert n > 0
    values = [from_int64(c.mutations[0][4]) for c in counter]
    # The counter's changes in commit order are its increments in order: 1, 2, ..., n.
    assert values == list(range(1, n + 1)), f"counter values in stream order: {values}"
    assert all(len(c.mutations) == 1 and c.mutations[0][:3] == ("set", "cf", b"n") for c in counter)
    assert sorted((from_int64(c.mutations[0][4]), c.mutations[0][3]) for c in counter) == acked


def test_concurrent_load_streamed_exactly_once(gapic, tables):
    name, data = tables.create()
    t0 = now_us()
    writers = run_load(data)
    end = now_us() + SECOND_US
    got = read_to_close(gapic, name, start_us=t0 - MS, end_us=end)
    total = sum(len(w.expected) for w in writers) + sum(len(w.counter) for w in writers)
    assert len(got.changes) == total, f"{len(got.changes)} changes for {total} acknowledged"
    check_exactly_once(got.changes, writers, t0)
    assert all(c.commit_us < end for c in got.changes)


def test_reading_while_writing_streams_exactly_once(gapic, tables):
    name, data = tables.create()
    margin_s = 4.0
    t0 = now_us()
    end = t0 + int((LOAD_SECONDS + margin_s) * SECOND_US)
    result: dict = {}

    def reader():
        try:
            result["stream"] = read_to_close(
                gapic, name, start_us=t0, end_us=end, heartbeat_ms=200,
                timeout=LOAD_SECONDS + margin_s + STREAM_TIMEOUT,
            )
        except BaseException as e:  # noqa: BLE001 - reported below
            result["error"] = e

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    time.sleep(0.3)  # the stream is open before the first write
    writers = run_load(data)
    last_ack = max(w.last_ack for w in writers)
    assert last_ack * SECOND_US < end, "the load ran past the stream's end_time (machine too slow)"
    th.join(timeout=LOAD_SECONDS + margin_s + STREAM_TIMEOUT + 10)
    assert not th.is_alive(), "the reader did not finish"
    if "error" in result:
        raise result["error"]
    got: StreamResult = result["stream"]
    check_exactly_once(got.changes, writers, t0)
    # The stream was live: changes arrived while the writers were still writing.
    early = [r for r, at in zip(got.records, got.times) if isinstance(r, Change) and at < last_ack]
    assert early, "no change reached the reader before the load ended"

    # A heartbeat promises that every change below its token has been sent: nothing
    # later in the stream is older, and it is not older than what came before it.
    assert got.heartbeats, "no heartbeat in a stream with 200 ms heartbeats"
    last_change = 0
    floor = None
    prev_wm = 0
    for rec in got.records:
        if isinstance(rec, Heartbeat):
            token = int(rec.token)
            assert token >= last_change, f"heartbeat token {token} before a sent change {last_change}"
            floor = token if floor is None else max(floor, token)
            assert rec.low_watermark_us is not None and rec.low_watermark_us >= prev_wm
            prev_wm = rec.low_watermark_us
        elif isinstance(rec, Change):
            if floor is not None:
                assert rec.commit_us > floor, (
                    f"change at {rec.commit_us} arrived after a heartbeat with token {floor}"
                )
            last_change = rec.commit_us
            assert rec.low_watermark_us >= prev_wm, "low watermark went back"
            prev_wm = rec.low_watermark_us


# ---- 5. large values -----------------------------------------------------------------


def test_large_value_split_across_messages_and_chunks(gapic, tables):
    name, data = tables.create()
    big = bytes(random.Random(5).getrandbits(8) for _ in range(256)) * (3 * 4096)  # 3 MiB
    assert len(big) == 3 * 1024 * 1024
    t0 = now_us()
    data.mutate_row(
        b"big",
        [SetCell("cf", b"a", b"small-1", 5 * MS), SetCell("cf", b"big", big, 6 * MS),
         SetCell("cf2", b"z", b"small-2", 7 * MS)],
        operation_timeout=60,
    )
    set_cell(data, b"after", b"x", ts=8 * MS)
    got = read_to_close(gapic, name, start_us=t0, end_us=now_us() + SECOND_US)
    assert [c.row_key for c in got.changes] == [b"big", b"after"]
    ch = got.changes[0]
    assert ch.mutations == [
        ("set", "cf", b"a", 5 * MS, b"small-1"),
        ("set", "cf", b"big", 6 * MS, big),
        ("set", "cf2", b"z", 7 * MS, b"small-2"),
    ]
    assert len(ch.messages) > 1, "a 3 MiB change came as one message"
    assert [m.type_ for m in ch.messages] == [USER] + [CONTINUATION] * (len(ch.messages) - 1)
    assert [m.done for m in ch.messages] == [False] * (len(ch.messages) - 1) + [True]
    assert [bool(m.token) for m in ch.messages] == [False] * (len(ch.messages) - 1) + [True]
    assert len(ch.chunk_infos) > 1, "the 3 MiB value was not chunked"
    assert all(size == len(big) for _, size, _ in ch.chunk_infos)
    assert [last for _, _, last in ch.chunk_infos] == [False] * (len(ch.chunk_infos) - 1) + [True]
    # The change after it is whole and intact.
    assert got.changes[1].mutations == [("set", "cf", b"q", 8 * MS, b"x")]
    assert len(got.changes[1].messages) == 1


# ---- 6. resume ------------------------------------------------------------------------


def test_resume_from_change_token_and_heartbeat_token(gapic, tables):
    name, data = tables.create()
    t0 = now_us()
    for i in range(10):
        set_cell(data, b"r%02d" % i, b"v%d" % i)
    full = read_to_close(gapic, name, start_us=t0, end_us=now_us() + SECOND_US).changes
    assert [c.row_key for c in full] == [b"r%02d" % i for i in range(10)]

    # Read the first K, leave, resume from the K-th token: exactly the rest.
    k = 4
    s = Stream(gapic, name, start_us=t0)
    first = []
    for rec in s:
        if isinstance(rec, Change):
            first.append(rec)
            if len(first) == k:
                break
    s.cancel()
    assert [c.summary() for c in first] == [c.summary() for c in full[:k]]
    rest = read_to_close(gapic, name, token=first[-1].token, end_us=now_us() + SECOND_US).changes
    assert [c.summary() for c in rest] == [c.summary() for c in full[k:]]

    # Resume from a heartbeat's token: everything written after the heartbeat.
    s = Stream(gapic, name, token=full[-1].token, heartbeat_ms=200, timeout=30)
    hb = read_until(s, lambda r: isinstance(r, (Heartbeat, Change)), deadline_s=10)
    assert isinstance(hb, Heartbeat), f"expected a heartbeat, got {hb}"
    assert int(hb.token) >= full[-1].commit_us
    rr = hb.partition.row_range
    assert rr.start_key_closed == b"" and rr.end_key_open == b""
    assert hb.low_watermark_us is not None and hb.low_watermark_us > full[-1].commit_us
    for i in range(3):
        set_cell(data, b"s%02d" % i, b"w%d" % i)
    after = read_to_close(gapic, name, token=hb.token, end_us=now_us() + SECOND_US).changes
    assert [(c.row_key, c.mutations[0][4]) for c in after] == [
        (b"s%02d" % i, b"w%d" % i) for i in range(3)
    ]
    assert after[0].commit_us > int(hb.token)
    # Resuming from the last change's token sees the same three.
    again = read_to_close(gapic, name, token=full[-1].token, end_us=now_us() + SECOND_US).changes
    assert [c.summary() for c in again] == [c.summary() for c in after]


# ---- 7, 8. a dedicated server: SIGKILL, GC ------------------------------------------


@pytest.fixture
def sweeping_server(almanac_bin, tmp_path):
    """A private server on its own data dir, sweeping GC every second."""
    srv = AlmanacServer(
        almanac_bin, data_dir=tmp_path / "data", log_dir=tmp_path, extra_args=("--sweep-secs", "1")
    )
    srv.start()
    yield srv
    if srv.running:
        srv.stop()


class Remote:
    """Admin, generated data and new data clients bound to one server address."""

    def __init__(self, host: str):
        with emulator_env(host):
            self.admin = bigtable.Client(project=PROJECT, admin=True)
            self.tac = self.admin.table_admin_client
            self.gapic = self.admin.table_data_client
            self.data = BigtableDataClient(project=PROJECT)

    def table(self, table_id: str):
        return self.data.get_table(INSTANCE, table_id)

    def close(self) -> None:
        self.data.close()
        self.gapic.transport.close()
        self.tac.transport.close()


def _crash_writer(table, w: int, stop: threading.Event, acked: list, errors: list) -> None:
    i = 0
    while not stop.is_set():
        key = b"crash-w%d-%05d" % (w, i)
        try:
            # Server time: not idempotent, so the client never retries it.
            table.mutate_row(key, SetCell("cf", b"q", key, SERVER), operation_timeout=5)
        except Exception as e:  # noqa: BLE001 - the kill ends every writer with some error
            if not stop.is_set():
                errors.append(repr(e))
            return
        acked.append(key)
        i += 1


def test_changes_and_tokens_survive_sigkill(sweeping_server):
    srv = sweeping_server
    c = Remote(srv.host)
    table_id = uid("kill")
    name = c.tac.create_table(
        request={
            "parent": INSTANCE_NAME,
            "table_id": table_id,
            "table": {"column_families": {"cf": {}}, "change_stream_config": cs_config(DAY_S)},
        }
    ).name
    t = c.table(table_id)
    t0 = now_us()
    for i in range(5):
        set_cell(t, b"before-%d" % i, b"b%d" % i)
    before = read_to_close(c.gapic, name, start_us=t0, end_us=now_us() + SECOND_US).changes
    assert [ch.row_key for ch in before] == [b"before-%d" % i for i in range(5)]
    token = before[-1].token

    # Writers in flight meet the kill; every acknowledged one must be streamed later.
    stop = threading.Event()
    acked = [[] for _ in range(3)]
    errors: list = []
    threads = [
        threading.Thread(target=_crash_writer, args=(t, w, stop, acked[w], errors), daemon=True)
        for w in range(3)
    ]
    for th in threads:
        th.start()
    time.sleep(1.0)
    stop.set()
    srv.proc.kill()  # SIGKILL
    srv.proc.wait()
    for th in threads:
        th.join(timeout=60)
    assert not any(th.is_alive() for th in threads)
    t.close()
    c.close()
    assert not errors, errors
    assert all(acked), [len(a) for a in acked]

    srv.start()  # same data dir, a new port
    c2 = Remote(srv.host)
    t2 = c2.table(table_id)
    try:
        for i in range(4):
            set_cell(t2, b"after-%d" % i, b"a%d" % i)
        resumed = read_to_close(c2.gapic, name, token=token, end_us=now_us() + SECOND_US).changes
        keys = [ch.row_key for ch in resumed]
        crash = [k for k in keys if k.startswith(b"crash-")]
        assert keys == crash + [b"after-%d" % i for i in range(4)], keys
        assert len(crash) == len(set(crash)), "a change streamed twice"
        for w in range(3):
            mine = [k for k in crash if k.startswith(b"crash-w%d-" % w)]
            # Its acknowledged writes in order, maybe plus the one in flight at the kill.
            inflight = b"crash-w%d-%05d" % (w, len(acked[w]))
            assert mine in (acked[w], acked[w] + [inflight]), (
                f"writer {w}: streamed {len(mine)}, acknowledged {len(acked[w])}; "
                f"missing {sorted(set(acked[w]) - set(mine))[:5]}"
            )
        for ch in resumed:
            k = ch.row_key
            assert ch.mutations[0][:3] == ("set", "cf", b"q")
            assert ch.mutations[0][4] == (k if k.startswith(b"crash-") else b"a" + k[-1:])
        assert resumed[0].commit_us > before[-1].commit_us

        # From the start: everything once, the same changes as the two reads.
        whole = read_to_close(c2.gapic, name, start_us=t0, end_us=now_us() + SECOND_US).changes
        assert [ch.summary() for ch in whole] == [ch.summary() for ch in before + resumed]
    finally:
        t2.close()
        c2.close()
    assert srv.stop() == 0, srv.log_text()


def test_gc_sweep_recorded_as_garbage_collection(sweeping_server):
    srv = sweeping_server
    c = Remote(srv.host)
    table_id = uid("gc")
    name = c.tac.create_table(
        request={
            "parent": INSTANCE_NAME,
            "table_id": table_id,
            "table": {
                "column_families": {"gc": {"gc_rule": {"max_num_versions": 1}}},
                "change_stream_config": cs_config(DAY_S),
            },
        }
    ).name
    t = c.table(table_id)
    try:
        old_ts, new_ts = 1_000 * MS, 2_000 * MS
        t0 = now_us()
        set_cell(t, b"g", b"old", family="gc", ts=old_ts)
        set_cell(t, b"g", b"new", family="gc", ts=new_ts)
        s = Stream(c.gapic, name, start_us=t0, heartbeat_ms=200, timeout=30)
        gc = read_until(
            s, lambda r: isinstance(r, Change) and r.type != USER, deadline_s=10
        )
        assert gc is not None, (
            f"no GARBAGE_COLLECTION change within 10 s; stream: "
            f"{[r for r in s.records if not isinstance(r, Heartbeat)]}"
        )
        users = [r for r in s.records if isinstance(r, Change) and r.type == USER]
        assert [u.mutations for u in users] == [
            [("set", "gc", b"q", old_ts, b"old")],
            [("set", "gc", b"q", new_ts, b"new")],
        ]
        assert gc.type == GARBAGE_COLLECTION
        assert gc.source_cluster_id == ""
        assert gc.row_key == b"g"
        assert gc.mutations == [("delcol", "gc", b"q", old_ts, old_ts + 1)]
        assert gc.commit_us > users[-1].commit_us
        assert gc.token == str(gc.commit_us)

        # Later sweeps do not record it again.
        time.sleep(2.5)
        again = read_to_close(c.gapic, name, start_us=t0, end_us=now_us() + SECOND_US).changes
        assert [(ch.type, ch.mutations) for ch in again] == [
            (USER, users[0].mutations),
            (USER, users[1].mutations),
            (GARBAGE_COLLECTION, gc.mutations),
        ]
        row = t.read_row(b"g", operation_timeout=CALL_TIMEOUT)
        assert [(x.timestamp_micros, x.value) for x in row.cells] == [(new_ts, b"new")]
    finally:
        t.close()
        c.close()


# ---- 9. errors ------------------------------------------------------------------------


def test_read_change_stream_errors(tac, gapic, tables):
    name, data = tables.create()
    set_cell(data, b"r", b"v")

    def read(**kw):
        return list(Stream(gapic, name, timeout=CALL_TIMEOUT, **kw))

    with pytest.raises(gexc.InvalidArgument):
        read(start_us=now_us() + 3600 * SECOND_US, end_us=now_us() + 7200 * SECOND_US)
    with pytest.raises(gexc.OutOfRange):
        read(start_us=now_us() - 2 * DAY_S * SECOND_US, end_us=now_us() + SECOND_US)
    with pytest.raises(gexc.InvalidArgument):
        read(token="not-a-number", end_us=now_us() + SECOND_US)
    not_whole = {"row_range": {"start_key_closed": b"a", "end_key_open": b""}}
    with pytest.raises(gexc.InvalidArgument):
        read(start_us=now_us() - SECOND_US, end_us=now_us() + SECOND_US, partition=not_whole)
    with pytest.raises(gexc.InvalidArgument):
        read(token=str(now_us() - SECOND_US), end_us=now_us() + SECOND_US, token_partition=not_whole)
    two = stream_request(name, token=str(now_us() - SECOND_US), end_us=now_us() + SECOND_US)
    two["continuation_tokens"]["tokens"] *= 2
    with pytest.raises(gexc.InvalidArgument):
        list(gapic.read_change_stream(request=two, timeout=CALL_TIMEOUT))

    # A table without a change stream, and one that does not exist.
    plain, _ = tables.create(retention_s=None)
    with pytest.raises(gexc.FailedPrecondition):
        list(gapic.generate_initial_change_stream_partitions(table_name=plain, timeout=CALL_TIMEOUT))
    with pytest.raises(gexc.FailedPrecondition):
        list(Stream(gapic, plain, timeout=CALL_TIMEOUT, start_us=now_us() - SECOND_US,
                    end_us=now_us() + SECOND_US))
    missing = f"{INSTANCE_NAME}/tables/{uid('missing')}"
    with pytest.raises(gexc.NotFound):
        list(Stream(gapic, missing, timeout=CALL_TIMEOUT, start_us=now_us() - SECOND_US,
                    end_us=now_us() + SECOND_US))

    # After all of that, the table still streams its change.
    got = read_to_close(gapic, name, start_us=now_us() - 60 * SECOND_US, end_us=now_us() + SECOND_US)
    assert [ch.row_key for ch in got.changes] == [b"r"]
