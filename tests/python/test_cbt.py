"""Google's `cbt` command-line tool against the server, unchanged.

`cbt` (Debian package google-cloud-cli-cbt) talks to `BIGTABLE_EMULATOR_HOST` as it
does to the official emulator. The module is skipped where `cbt` is not installed.
Each test works in its own instance, so its tables never meet another test's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from bt_helpers import PROJECT

CBT = shutil.which("cbt")
pytestmark = pytest.mark.skipif(CBT is None, reason="cbt is not installed")


class Cbt:
    def __init__(self, host: str, home: str):
        self.instance = f"cbt-{uuid.uuid4().hex[:10]}"
        # A private HOME: no ~/.cbtrc of the machine's user leaks in.
        self.env = {**os.environ, "BIGTABLE_EMULATOR_HOST": host, "HOME": home}

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [CBT, "-project", PROJECT, "-instance", self.instance, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def ok(self, *args: str) -> str:
        r = self.run(*args)
        assert r.returncode == 0, f"cbt {' '.join(args)} exited {r.returncode}: {r.stderr}"
        return r.stdout

    def fails(self, *args: str) -> str:
        r = self.run(*args)
        assert r.returncode != 0, f"cbt {' '.join(args)} succeeded: {r.stdout}"
        return r.stderr


@pytest.fixture
def cbt(server, tmp_path):
    return Cbt(server.host, str(tmp_path))


def rows_of(read_output: str) -> list[str]:
    """Row keys in `cbt read` output (each row follows a dashed line)."""
    lines = read_output.splitlines()
    return [lines[i + 1] for i, line in enumerate(lines[:-1]) if set(line) == {"-"}]


def test_tables_families_and_gc_policies(cbt):
    cbt.ok("createtable", "t1")
    cbt.ok("createtable", "t2", "families=cf1:maxversions=2,cf2:maxage=1d", "splits=b,m,x")
    assert "AlreadyExists" in cbt.fails("createtable", "t1")
    assert cbt.ok("ls").split() == ["t1", "t2"]
    families = cbt.ok("ls", "t2")
    assert "versions() > 2" in families and "age() > 1d" in families

    cbt.ok("createfamily", "t1", "fa")
    cbt.ok("createfamily", "t1", "fb")
    assert "AlreadyExists" in cbt.fails("createfamily", "t1", "fa")
    assert "NotFound" in cbt.fails("createfamily", "nosuch", "fa")
    cbt.ok("setgcpolicy", "t1", "fa", "maxversions=5 || maxage=10d")
    cbt.ok("setgcpolicy", "t1", "fb", "maxversions=2 && maxage=1h")
    listed = cbt.ok("ls", "t1")
    assert "(versions() > 5 || age() > 10d)" in listed
    assert "(versions() > 2 && age() > 1h)" in listed
    cbt.ok("setgcpolicy", "t1", "fb", "never")
    assert "&&" not in cbt.ok("ls", "t1")
    assert "NotFound" in cbt.fails("setgcpolicy", "t1", "nofam", "maxversions=1")

    cbt.ok("deletefamily", "t1", "fb")
    assert "fb" not in cbt.ok("ls", "t1")
    cbt.ok("deletetable", "t2")
    assert cbt.ok("ls").split() == ["t1"]
    assert "NotFound" in cbt.fails("deletetable", "t2")


def test_set_read_lookup_count_and_deletes(cbt):
    cbt.ok("createtable", "t", "families=fa:never,fb:never")
    now_ms = 1_700_000_000_000
    cbt.ok(
        "set", "t", "r1",
        f"fa:c1=v1@{now_ms * 1000}", f"fa:c1=v2@{(now_ms + 1) * 1000}",
        f"fa:c1=v3@{(now_ms + 2) * 1000}", "fa:c2=x",
    )
    cbt.ok("set", "t", "r2", "fa:c1=a", "fb:q=b")
    cbt.ok("set", "t", "r3", "fa:c1=rr")
    cbt.ok("set", "t", "s1", "fa:c1=ss", "fb:q=ss2")
    assert "NotFound" in cbt.fails("set", "t", "r1", "nofam:c=1")

    assert rows_of(cbt.ok("read", "t")) == ["r1", "r2", "r3", "s1"]
    assert rows_of(cbt.ok("read", "t", "prefix=r")) == ["r1", "r2", "r3"]
    assert rows_of(cbt.ok("read", "t", "start=r2", "end=s1")) == ["r2", "r3"]
    assert rows_of(cbt.ok("read", "t", "count=2")) == ["r1", "r2"]
    assert rows_of(cbt.ok("read", "t", "regex=r[13]")) == ["r1", "r3"]
    assert rows_of(cbt.ok("read", "t", "columns=fb:q")) == ["r2", "s1"]

    r1 = cbt.ok("lookup", "t", "r1")
    assert all(f'"{v}"' in r1 for v in ("v1", "v2", "v3", "x"))
    newest = cbt.ok("lookup", "t", "r1", "columns=fa:c1", "cells-per-column=1")
    assert '"v3"' in newest and '"v2"' not in newest and '"x"' not in newest
    keys_only = cbt.ok("read", "t", "keys-only=true")
    assert rows_of(keys_only) == ["r1", "r2", "r3", "s1"] and '"ss"' not in keys_only
    assert cbt.ok("count", "t").strip() == "4"

    cbt.ok("deletecolumn", "t", "r1", "fa", "c1")
    after = cbt.ok("lookup", "t", "r1")
    assert '"x"' in after and '"v3"' not in after
    cbt.ok("deleterow", "t", "r3")
    assert rows_of(cbt.ok("read", "t")) == ["r1", "r2", "s1"]
    cbt.ok("deleteallrows", "t")
    assert cbt.ok("count", "t").strip() == "0"


def test_import_csv(cbt, tmp_path):
    cbt.ok("createtable", "imp", "families=cf:never")
    csv = tmp_path / "rows.csv"
    csv.write_text(",cf,cf\n,a,b\nk1,1,2\nk2,3,\nk3,,4\n")
    cbt.ok("import", "imp", str(csv))
    out = cbt.ok("read", "imp")
    assert rows_of(out) == ["k1", "k2", "k3"]
    assert cbt.ok("count", "imp").strip() == "3"


def test_aggregate_families_and_immutable_value_types(cbt):
    cbt.ok("createtable", "agg", "families=sums:never:intsum,plain:never")
    cbt.ok("addtocell", "agg", "k", "sums:n=5")
    cbt.ok("addtocell", "agg", "k", "sums:n=7")
    assert "InvalidArgument" in cbt.fails("addtocell", "agg", "k", "plain:n=1")
    # A family's value type is fixed at creation: naming the same type is a no-op,
    # another one is refused rather than accepted and ignored.
    cbt.ok("setvaluetype", "agg", "sums", "intsum")
    err = cbt.fails("setvaluetype", "agg", "plain", "intsum")
    assert "InvalidArgument" in err and "cannot change" in err
    assert "InvalidArgument" in cbt.fails("addtocell", "agg", "k", "plain:n=1")
    assert "int64" in cbt.ok("ls", "agg")


def test_instances_clusters_and_app_profiles(cbt):
    cbt.ok("createtable", "t")
    assert cbt.instance in cbt.ok("listinstances")
    assert "almanac" in cbt.ok("listclusters")
    profiles = cbt.ok("listappprofile", cbt.instance)
    assert "default" in profiles and "almanac" in profiles and "nil" not in profiles
    assert "NotFound" in cbt.fails("getappprofile", cbt.instance, "nosuch")
    cbt.ok("createappprofile", cbt.instance, "p1", "desc", "route-any")
    assert "p1" in cbt.ok("listappprofile", cbt.instance)
    assert "desc" in cbt.ok("getappprofile", cbt.instance, "p1")
    cbt.ok("deleteappprofile", cbt.instance, "p1")
    assert "NotFound" in cbt.fails("getappprofile", cbt.instance, "p1")
