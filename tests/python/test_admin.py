"""Table Admin (and a little Instance Admin) through the classic client."""

from __future__ import annotations

import datetime as dt

import pytest
from google.api_core import exceptions as gexc
from google.cloud import bigtable
from google.cloud.bigtable import column_family as cf
from google.cloud.bigtable.data import BigtableDataClient, ReadRowsQuery, SetCell
from google.cloud.bigtable_admin_v2.types import Table as AdminTable

from bt_helpers import INSTANCE, MS, PROJECT, by_family, emulator_env, keys, now_ms_micros, read_all

DAY = dt.timedelta(days=1)

FAMILIES = {
    "versions": cf.MaxVersionsGCRule(3),
    "age": cf.MaxAgeGCRule(dt.timedelta(days=5)),
    "inter": cf.GCRuleIntersection(
        [cf.MaxVersionsGCRule(2), cf.MaxAgeGCRule(dt.timedelta(hours=1))]
    ),
    "union": cf.GCRuleUnion([cf.MaxVersionsGCRule(5), cf.MaxAgeGCRule(dt.timedelta(days=7))]),
    "nested": cf.GCRuleUnion(
        [
            cf.GCRuleIntersection([cf.MaxVersionsGCRule(1), cf.MaxAgeGCRule(DAY)]),
            cf.MaxVersionsGCRule(10),
        ]
    ),
    "plain": None,
}


def test_create_with_families_and_splits_reads_back_gc_rules(make_table):
    bt = make_table(families=FAMILIES, splits=[b"g", b"p"])
    got = bt.classic.list_column_families()
    assert set(got) == set(FAMILIES)
    for name, rule in FAMILIES.items():
        assert got[name].gc_rule == rule, name

    # Rows on every side of the split points come back as one sorted table.
    for key in [b"z", b"a", b"p", b"g", b"h"]:
        bt.data.mutate_row(key, SetCell("plain", b"q", key, 5 * MS))
    assert keys(read_all(bt)) == [b"a", b"g", b"h", b"p", b"z"]


def test_get_table_views(make_table, admin_client):
    bt = make_table(families={"a": cf.MaxVersionsGCRule(1), "b": None})
    tac = admin_client.table_admin_client
    full = tac.get_table(request={"name": bt.name, "view": AdminTable.View.SCHEMA_VIEW})
    assert full.name == f"projects/{PROJECT}/instances/{INSTANCE}/tables/{bt.table_id}"
    assert set(full.column_families) == {"a", "b"}
    assert full.column_families["a"].gc_rule.max_num_versions == 1
    assert full.granularity == AdminTable.TimestampGranularity.MILLIS
    # GetTable with no view is SCHEMA_VIEW (that is what list_column_families sends).
    unspecified = tac.get_table(request={"name": bt.name})
    assert set(unspecified.column_families) == {"a", "b"}
    # NAME_ONLY "only populates name" (table.proto).
    name_only = tac.get_table(request={"name": bt.name, "view": AdminTable.View.NAME_ONLY})
    assert name_only.name == full.name
    assert len(name_only.column_families) == 0


def test_list_tables_and_exists(make_table, instance):
    a = make_table()
    b = make_table()
    listed = {t.table_id for t in instance.list_tables()}
    assert {a.table_id, b.table_id} <= listed
    assert a.classic.exists() and b.classic.exists()
    assert not instance.table("never-created-table").exists()


def test_delete_table_then_not_found(make_table, admin_client):
    bt = make_table()
    bt.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    bt.classic.delete()
    assert not bt.classic.exists()
    with pytest.raises(gexc.NotFound):
        admin_client.table_admin_client.get_table(request={"name": bt.name})
    with pytest.raises(gexc.NotFound):
        bt.data.read_rows(ReadRowsQuery(), operation_timeout=30)
    with pytest.raises(gexc.NotFound):
        bt.classic.delete()


def test_recreated_table_starts_empty(make_table):
    bt = make_table()
    bt.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    bt.classic.delete()
    bt.classic.create(column_families={"cf1": None})
    assert read_all(bt) == []


def test_create_existing_table_already_exists(make_table, instance):
    bt = make_table()
    with pytest.raises(gexc.AlreadyExists):
        instance.table(bt.table_id).create(column_families={"other": None})
    # The failed create changed nothing.
    assert set(bt.classic.list_column_families()) == {"cf1", "cf2"}


@pytest.mark.parametrize(
    "bad_id",
    ["", "has space", "slash/inside", "-leading-dash", "x" * 51, "ünïcode"],
    ids=["empty", "space", "slash", "leading-dash", "51-chars", "non-ascii"],
)
def test_invalid_table_id(instance, bad_id):
    with pytest.raises(gexc.InvalidArgument):
        instance.table(bad_id).create(column_families={"cf": None})


def test_table_id_of_50_chars_is_valid(make_table):
    bt = make_table(table_id="a" * 42 + "-" + "b" * 7)
    assert len(bt.table_id) == 50
    assert bt.classic.exists()


def test_invalid_family_name(make_table):
    bt = make_table()
    with pytest.raises(gexc.InvalidArgument):
        bt.classic.column_family("bad name!").create()
    assert set(bt.classic.list_column_families()) == {"cf1", "cf2"}


def test_gc_rule_over_500_bytes_rejected(make_table):
    bt = make_table()
    rule = cf.GCRuleUnion([cf.MaxVersionsGCRule(1000 + i) for i in range(200)])
    assert len(rule.to_pb()._pb.SerializeToString()) > 500
    with pytest.raises(gexc.InvalidArgument):
        bt.classic.column_family("big", rule).create()


def test_modify_column_families(make_table):
    bt = make_table()
    fam = bt.classic.column_family("new", cf.MaxVersionsGCRule(2))
    fam.create()
    assert bt.classic.list_column_families()["new"].gc_rule == cf.MaxVersionsGCRule(2)

    fam.gc_rule = cf.GCRuleUnion([cf.MaxVersionsGCRule(4), cf.MaxAgeGCRule(DAY)])
    fam.update()
    assert bt.classic.list_column_families()["new"].gc_rule == fam.gc_rule

    with pytest.raises(gexc.AlreadyExists):
        bt.classic.column_family("new").create()
    # Modifying a family that does not exist: NOT_FOUND, as for any missing resource.
    with pytest.raises(gexc.NotFound):
        bt.classic.column_family("ghost").delete()
    with pytest.raises(gexc.NotFound):
        bt.classic.column_family("ghost", cf.MaxVersionsGCRule(1)).update()

    fam.delete()
    assert set(bt.classic.list_column_families()) == {"cf1", "cf2"}


def test_dropping_a_family_deletes_its_data(table):
    table.data.mutate_row(
        b"r1", [SetCell("cf1", b"a", b"keep", 1 * MS), SetCell("cf2", b"b", b"gone", 1 * MS)]
    )
    table.data.mutate_row(b"r2", SetCell("cf2", b"b", b"gone too", 1 * MS))
    table.classic.column_family("cf2").delete()
    rows = read_all(table)
    assert keys(rows) == [b"r1"]  # r2 had only cf2 cells: the row no longer exists
    assert by_family(rows[0]) == {"cf1": [(b"a", 1 * MS, b"keep")]}
    # Re-creating the family must not resurrect the old cells.
    table.classic.column_family("cf2").create()
    assert keys(read_all(table)) == [b"r1"]
    assert by_family(table.data.read_row(b"r1")) == {"cf1": [(b"a", 1 * MS, b"keep")]}


def test_drop_by_prefix_and_truncate(table):
    for key in [b"user", b"user1#a", b"user1#b", b"user10#a", b"user2#a", b"uses"]:
        table.data.mutate_row(key, SetCell("cf1", b"q", b"v", 1 * MS))
    table.classic.drop_by_prefix(b"user1#")
    assert keys(read_all(table)) == [b"user", b"user10#a", b"user2#a", b"uses"]
    table.classic.drop_by_prefix(b"user")
    assert keys(read_all(table)) == [b"uses"]

    table.classic.truncate()
    assert read_all(table) == []
    # Truncation keeps the schema and the table stays writable.
    assert set(table.classic.list_column_families()) == {"cf1", "cf2"}
    table.data.mutate_row(b"after", SetCell("cf1", b"q", b"v", 1 * MS))
    assert keys(read_all(table)) == [b"after"]


def test_instances_and_projects_are_separate_namespaces(make_table, admin_client, server):
    table_id = "shared-name"
    other_instance = admin_client.instance(INSTANCE + "-b")
    with emulator_env(server.host):
        client_p2 = bigtable.Client(project=PROJECT + "-b", admin=True)
        client_p2._veneer_data_client
        data_p2 = BigtableDataClient(project=PROJECT + "-b")
    try:
        a = make_table(table_id=table_id)
        b = make_table(table_id=table_id, inst=other_instance)
        c = make_table(table_id=table_id, inst=client_p2.instance(INSTANCE), dclient=data_p2)
        for bt, value in [(a, b"in-a"), (b, b"in-b"), (c, b"in-c")]:
            bt.data.mutate_row(b"row", SetCell("cf1", b"q", value, 1 * MS))
        for bt, value in [(a, b"in-a"), (b, b"in-b"), (c, b"in-c")]:
            assert by_family(bt.data.read_row(b"row")) == {"cf1": [(b"q", 1 * MS, value)]}

        names_b = [t.name for t in admin_client.table_admin_client.list_tables(
            request={"parent": other_instance.name})]
        assert names_b == [f"projects/{PROJECT}/instances/{INSTANCE}-b/tables/{table_id}"]

        b.classic.delete()
        assert a.classic.exists() and c.classic.exists()
        assert by_family(a.data.read_row(b"row")) == {"cf1": [(b"q", 1 * MS, b"in-a")]}
        a.classic.truncate()
        assert by_family(c.data.read_row(b"row")) == {"cf1": [(b"q", 1 * MS, b"in-c")]}
    finally:
        data_p2.close()


def test_consistency_token(table, admin_client):
    tac = admin_client.table_admin_client
    table.data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    token = tac.generate_consistency_token(request={"name": table.name}).consistency_token
    assert token
    resp = tac.check_consistency(request={"name": table.name, "consistency_token": token})
    assert resp.consistent is True  # a single-cluster store is always consistent
    missing = table.name + "-missing"
    with pytest.raises(gexc.NotFound):
        tac.generate_consistency_token(request={"name": missing})


def test_gc_rules_apply_on_read(make_table):
    # Cloud Bigtable may still return cells that a GC rule marks until compaction runs;
    # Almanac applies the rule on read too so reads are deterministic (design.md §1).
    now = now_ms_micros()
    hour, day = 3600 * 1000 * MS, 24 * 3600 * 1000 * MS
    bt = make_table(
        families={
            "v2": cf.MaxVersionsGCRule(2),
            "age": cf.MaxAgeGCRule(DAY),
            "inter": cf.GCRuleIntersection([cf.MaxVersionsGCRule(1), cf.MaxAgeGCRule(DAY)]),
            "union": cf.GCRuleUnion([cf.MaxVersionsGCRule(2), cf.MaxAgeGCRule(DAY)]),
        }
    )
    muts = [SetCell("v2", b"q", b"%d" % i, i * MS) for i in (1, 2, 3, 4)]
    muts += [SetCell("age", b"q", b"old", now - 2 * day), SetCell("age", b"q", b"new", now)]
    muts += [SetCell("inter", b"q", b"%d" % i, now - t) for i, t in enumerate((0, hour, 2 * day))]
    muts += [
        SetCell("union", b"q", b"%d" % i, now - t)
        for i, t in enumerate((0, hour, 2 * hour, 2 * day))
    ]
    bt.data.mutate_row(b"r", muts)
    assert by_family(bt.data.read_row(b"r")) == {
        "v2": [(b"q", 4 * MS, b"4"), (b"q", 3 * MS, b"3")],
        "age": [(b"q", now, b"new")],
        # Intersection: collected only when over 1 version AND older than a day.
        "inter": [(b"q", now, b"0"), (b"q", now - hour, b"1")],
        # Union: collected when over 2 versions OR older than a day.
        "union": [(b"q", now, b"0"), (b"q", now - hour, b"1")],
    }


def test_instance_admin_lists(make_table, admin_client, instance):
    make_table()  # the instance exists at least because it holds a table
    instances, failed = admin_client.list_instances()
    assert list(failed) == []
    by_id = {i.instance_id: i for i in instances}
    assert INSTANCE in by_id
    assert by_id[INSTANCE].display_name  # the classic client requires it
    assert instance.exists()

    clusters, failed = instance.list_clusters()
    assert list(failed) == []
    assert len(clusters) >= 1
    for c in clusters:
        assert c.name.startswith(f"projects/{PROJECT}/instances/{INSTANCE}/clusters/")
    # Client.list_clusters() asks for instance "-": every instance of the project.
    everywhere, failed = admin_client.list_clusters()
    assert list(failed) == []
    assert {c.name for c in clusters} <= {c.name for c in everywhere}

    profiles = instance.list_app_profiles()
    for p in profiles:
        assert p.name.startswith(f"projects/{PROJECT}/instances/{INSTANCE}/appProfiles/")
