"""Admin lifecycle through the generated admin clients: deletion protection, undelete,
snapshots, instances and clusters, app profiles and IAM policies.

Every change the admin APIs run as a long-running operation comes back done from
Almanac, so `op.result(timeout=...)` returns the resource without polling. Tables are
made in the suite's instance, instances in a project private to one test (so other
tests' instances never show up in its listings); all are removed on teardown.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import DeleteAllFromRow, ReadRowsQuery, SetCell
from google.cloud.bigtable_admin_v2.types import AppProfile, Cluster, Instance, Snapshot, Table
from google.iam.v1 import policy_pb2

from bt_helpers import INSTANCE, MS, PROJECT, by_family

INSTANCE_NAME = f"projects/{PROJECT}/instances/{INSTANCE}"
# The one cluster of an instance that was never created explicitly.
CLUSTER = f"{INSTANCE_NAME}/clusters/almanac"
OP_TIMEOUT = 30
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def mask(*paths: str) -> dict:
    return {"paths": list(paths)}


def rows_of(table) -> list[tuple]:
    """Every row of a new-client table as (key, {family: [(qualifier, ts, value)]})."""
    return [(r.row_key, by_family(r)) for r in table.read_rows(ReadRowsQuery())]


def families_of(table: Table) -> dict:
    """A Table's column families as {name: ColumnFamily protobuf} (comparable with ==)."""
    return {name: type(cf).pb(cf) for name, cf in table.column_families.items()}


def set_protection(tac, name: str, protect: bool) -> Table:
    """UpdateTable of deletion_protection alone; the operation's Table."""
    op = tac.update_table(
        request={
            "table": {"name": name, "deletion_protection": protect},
            "update_mask": mask("deletion_protection"),
        }
    )
    return op.result(timeout=OP_TIMEOUT)


@pytest.fixture(scope="module")
def iac(admin_client):
    return admin_client.instance_admin_client


class Tables:
    """Tables a test makes or adopts; `cleanup` unprotects and deletes them."""

    def __init__(self, tac, data_client):
        self.tac = tac
        self.data_client = data_client
        self.names: list[str] = []
        self.opened: list = []

    def open(self, name: str):
        """Adopts the table `name` (made some other way) and returns its data table."""
        self.names.append(name)
        parts = name.split("/")  # projects/p/instances/i/tables/t
        data = self.data_client.get_table(parts[3], parts[5])
        self.opened.append(data)
        return data

    def create(self, families=None, protect=False, instance=INSTANCE_NAME, table_id=None):
        """CreateTable; returns (name, data table)."""
        created = self.tac.create_table(
            request={
                "parent": instance,
                "table_id": table_id or uid("lc"),
                "table": {
                    "column_families": {"cf1": {}, "cf2": {}} if families is None else families,
                    "deletion_protection": protect,
                },
            }
        )
        return created.name, self.open(created.name)

    def cleanup(self) -> None:
        for data in self.opened:
            data.close()
        for name in self.names:
            try:
                set_protection(self.tac, name, False)
                self.tac.delete_table(request={"name": name})
            except gexc.NotFound:
                pass


@pytest.fixture
def tables(tac, data_client):
    made = Tables(tac, data_client)
    yield made
    made.cleanup()


@pytest.fixture
def snapshots(tac):
    """Snapshot names to delete on teardown (append to the list)."""
    made: list[str] = []
    yield made
    for name in made:
        try:
            tac.delete_snapshot(request={"name": name})
        except gexc.NotFound:
            pass


@pytest.fixture
def project() -> str:
    """A project no other test uses."""
    return f"p-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def instances(iac):
    """Instance names to delete on teardown (append to the list)."""
    made: list[str] = []
    yield made
    for name in made:
        iac.delete_instance(request={"name": name})


def create_instance(iac, project: str, instance_id: str, clusters=("c1-cluster",), **fields):
    """CreateInstance with one zone-a cluster (1 node) per id; the operation's Instance."""
    op = iac.create_instance(
        request={
            "parent": f"projects/{project}",
            "instance_id": instance_id,
            "instance": {"display_name": "Lifecycle", **fields},
            "clusters": {
                cid: {"location": f"projects/{project}/locations/zone-a", "serve_nodes": 1}
                for cid in clusters
            },
        }
    )
    return op.result(timeout=OP_TIMEOUT)


# ---- deletion protection -----------------------------------------------------------


def test_deletion_protection_blocks_delete_and_family_drop(tac, tables):
    name, data = tables.create(protect=True)
    assert tac.get_table(request={"name": name}).deletion_protection is True
    data.mutate_row(b"r", SetCell("cf2", b"q", b"v", 1 * MS))

    with pytest.raises(gexc.FailedPrecondition) as err:
        tac.delete_table(request={"name": name})
    assert "deletion protection" in err.value.message
    with pytest.raises(gexc.FailedPrecondition):
        tac.modify_column_families(
            request={"name": name, "modifications": [{"id": "cf2", "drop": True}]}
        )
    # Neither refused change touched the table.
    assert set(tac.get_table(request={"name": name}).column_families) == {"cf1", "cf2"}
    assert rows_of(data) == [(b"r", {"cf2": [(b"q", 1 * MS, b"v")]})]

    # Adding a family loses nothing, so it is allowed.
    added = tac.modify_column_families(
        request={"name": name, "modifications": [{"id": "cf3", "create": {}}]}
    )
    assert set(added.column_families) == {"cf1", "cf2", "cf3"}
    assert added.deletion_protection is True

    off = set_protection(tac, name, False)
    assert off.name == name
    assert off.deletion_protection is False
    assert tac.get_table(request={"name": name}).deletion_protection is False
    tac.delete_table(request={"name": name})
    with pytest.raises(gexc.NotFound):
        tac.get_table(request={"name": name})


def test_update_table_turns_protection_on(tac, tables):
    name, _ = tables.create()
    assert tac.get_table(request={"name": name}).deletion_protection is False
    on = set_protection(tac, name, True)
    assert on.deletion_protection is True
    assert set(on.column_families) == {"cf1", "cf2"}
    assert tac.get_table(request={"name": name}).deletion_protection is True
    with pytest.raises(gexc.FailedPrecondition):
        tac.delete_table(request={"name": name})
    # A drop is refused even beside an allowed create, and the create is not applied.
    with pytest.raises(gexc.FailedPrecondition):
        tac.modify_column_families(
            request={
                "name": name,
                "modifications": [{"id": "cf9", "create": {}}, {"id": "cf1", "drop": True}],
            }
        )
    assert set(tac.get_table(request={"name": name}).column_families) == {"cf1", "cf2"}


def test_update_table_masks(tac, tables):
    name, _ = tables.create()
    with pytest.raises(gexc.InvalidArgument):
        tac.update_table(
            request={"table": {"name": name, "deletion_protection": True}, "update_mask": {}}
        )
    with pytest.raises(gexc.InvalidArgument, match="granularity"):
        tac.update_table(
            request={
                "table": {"name": name, "deletion_protection": True},
                "update_mask": mask("deletion_protection", "granularity"),
            }
        )
    # Neither refused update changed the table.
    assert tac.get_table(request={"name": name}).deletion_protection is False
    with pytest.raises(gexc.NotFound):
        set_protection(tac, f"{INSTANCE_NAME}/tables/{uid('missing')}", True)


# ---- undelete ----------------------------------------------------------------------


def test_undelete_restores_table_and_rows(tac, tables):
    name, data = tables.create(families={"cf1": {"gc_rule": {"max_num_versions": 2}}, "cf2": {}})
    data.mutate_row(
        b"row", [SetCell("cf1", b"a", b"one", 1 * MS), SetCell("cf2", b"b", b"two", 2 * MS)]
    )
    before = rows_of(data)
    schema = families_of(tac.get_table(request={"name": name}))
    assert schema["cf1"].gc_rule.max_num_versions == 2

    tac.delete_table(request={"name": name})
    with pytest.raises(gexc.NotFound):
        tac.get_table(request={"name": name})

    restored = tac.undelete_table(request={"name": name}).result(timeout=OP_TIMEOUT)
    assert restored.name == name
    assert families_of(restored) == schema
    assert families_of(tac.get_table(request={"name": name})) == schema
    assert rows_of(data) == before
    # The undeleted table is live again: writable like any other.
    data.mutate_row(b"after", SetCell("cf1", b"a", b"new", 3 * MS))
    assert [key for key, _ in rows_of(data)] == [b"after", b"row"]
    # Undeleting it again finds nothing deleted.
    with pytest.raises(gexc.NotFound):
        tac.undelete_table(request={"name": name})


def test_undelete_never_deleted_is_not_found(tac, tables):
    with pytest.raises(gexc.NotFound):
        tac.undelete_table(request={"name": f"{INSTANCE_NAME}/tables/{uid('never')}"})
    # A live table that was never deleted has nothing to undelete either.
    name, _ = tables.create()
    with pytest.raises(gexc.NotFound):
        tac.undelete_table(request={"name": name})


def test_undelete_over_live_table_already_exists(tac, tables):
    name, data = tables.create()
    data.mutate_row(b"old", SetCell("cf1", b"q", b"deleted", 1 * MS))
    tac.delete_table(request={"name": name})
    _, again = tables.create(families={"cf1": {}}, table_id=name.rsplit("/", 1)[-1])
    again.mutate_row(b"new", SetCell("cf1", b"q", b"live", 1 * MS))

    with pytest.raises(gexc.AlreadyExists):
        tac.undelete_table(request={"name": name})
    # The refused undelete left the live table as it was.
    assert set(tac.get_table(request={"name": name}).column_families) == {"cf1"}
    assert rows_of(again) == [(b"new", {"cf1": [(b"q", 1 * MS, b"live")]})]


# ---- snapshots ---------------------------------------------------------------------


def take_snapshot(tac, table: str, snapshot_id: str, cluster: str = CLUSTER, **fields):
    """SnapshotTable; the operation's Snapshot."""
    op = tac.snapshot_table(
        request={"name": table, "cluster": cluster, "snapshot_id": snapshot_id, **fields}
    )
    return op.result(timeout=OP_TIMEOUT)


def test_snapshot_then_restore_as_new_table(tac, tables, snapshots):
    name, data = tables.create(families={"cf1": {"gc_rule": {"max_num_versions": 3}}, "cf2": {}})
    data.mutate_row(
        b"r1", [SetCell("cf1", b"a", b"v1", 1 * MS), SetCell("cf2", b"b", b"w1", 1 * MS)]
    )
    data.mutate_row(b"r2", SetCell("cf1", b"a", b"v2", 2 * MS))
    at_snapshot = rows_of(data)

    snap_id = uid("snap")
    snap = take_snapshot(tac, name, snap_id, ttl=HOUR, description="d")
    snapshots.append(snap.name)
    assert snap.name == f"{CLUSTER}/snapshots/{snap_id}"
    assert snap.source_table.name == name
    assert snap.state == Snapshot.State.READY
    assert snap.description == "d"
    assert snap.data_size_bytes > 0
    lifetime = (snap.delete_time - snap.create_time).total_seconds()
    assert abs(lifetime - 3600) < 60, lifetime

    # After the snapshot: a new row, a newer cell in r1, r2 deleted.
    data.mutate_row(b"r3", SetCell("cf1", b"a", b"later", 3 * MS))
    data.mutate_row(b"r1", SetCell("cf1", b"a", b"v1-later", 4 * MS))
    data.mutate_row(b"r2", DeleteAllFromRow())
    assert [key for key, _ in rows_of(data)] == [b"r1", b"r3"]

    new_name = f"{INSTANCE_NAME}/tables/{uid('restored')}"
    op = tac.create_table_from_snapshot(
        request={
            "parent": INSTANCE_NAME,
            "table_id": new_name.rsplit("/", 1)[-1],
            "source_snapshot": snap.name,
        }
    )
    restored_data = tables.open(new_name)
    restored = op.result(timeout=OP_TIMEOUT)
    assert restored.name == new_name
    schema = families_of(tac.get_table(request={"name": name}))
    assert set(schema) == {"cf1", "cf2"}
    assert schema["cf1"].gc_rule.max_num_versions == 3
    assert families_of(restored) == schema
    assert families_of(tac.get_table(request={"name": new_name})) == schema
    assert rows_of(restored_data) == at_snapshot

    # The restored table is independent of its source.
    restored_data.mutate_row(b"r9", SetCell("cf2", b"z", b"only-here", 9 * MS))
    assert b"r9" not in [key for key, _ in rows_of(data)]
    # Restoring onto an existing table id is refused.
    with pytest.raises(gexc.AlreadyExists):
        tac.create_table_from_snapshot(
            request={
                "parent": INSTANCE_NAME,
                "table_id": new_name.rsplit("/", 1)[-1],
                "source_snapshot": snap.name,
            }
        ).result(timeout=OP_TIMEOUT)


def test_snapshot_get_list_delete(tac, tables, snapshots):
    name, data = tables.create()
    data.mutate_row(b"r", SetCell("cf1", b"q", b"v", 1 * MS))
    snap = take_snapshot(tac, name, uid("snap"), ttl=HOUR, description="listed")
    snapshots.append(snap.name)

    got = tac.get_snapshot(request={"name": snap.name})
    assert got.name == snap.name
    assert got.source_table.name == name
    assert got.description == "listed"
    assert got.state == Snapshot.State.READY
    assert got.create_time == snap.create_time
    assert got.delete_time == snap.delete_time

    listed = {s.name for s in tac.list_snapshots(request={"parent": CLUSTER})}
    assert snap.name in listed
    every_cluster = tac.list_snapshots(request={"parent": f"{INSTANCE_NAME}/clusters/-"})
    assert snap.name in {s.name for s in every_cluster}

    tac.delete_snapshot(request={"name": snap.name})
    with pytest.raises(gexc.NotFound):
        tac.get_snapshot(request={"name": snap.name})
    assert snap.name not in {s.name for s in tac.list_snapshots(request={"parent": CLUSTER})}
    with pytest.raises(gexc.NotFound):
        tac.delete_snapshot(request={"name": snap.name})
    # Deleting the snapshot left its source table alone.
    assert rows_of(data) == [(b"r", {"cf1": [(b"q", 1 * MS, b"v")]})]


def test_snapshot_errors(tac, tables, snapshots):
    name, _ = tables.create()
    snap_id = uid("snap")
    snapshots.append(take_snapshot(tac, name, snap_id, ttl=HOUR).name)

    with pytest.raises(gexc.AlreadyExists):
        take_snapshot(tac, name, snap_id, ttl=HOUR)
    with pytest.raises(gexc.InvalidArgument):
        take_snapshot(tac, name, uid("snap"), ttl=dt.timedelta(days=8))
    with pytest.raises(gexc.NotFound):
        take_snapshot(tac, name, uid("snap"), cluster=f"{INSTANCE_NAME}/clusters/no-such-cluster")
    with pytest.raises(gexc.NotFound):
        take_snapshot(tac, f"{INSTANCE_NAME}/tables/{uid('missing')}", uid("snap"), ttl=HOUR)
    with pytest.raises(gexc.NotFound):
        tac.get_snapshot(request={"name": f"{CLUSTER}/snapshots/{uid('never')}"})
    with pytest.raises(gexc.NotFound):
        tac.create_table_from_snapshot(
            request={
                "parent": INSTANCE_NAME,
                "table_id": uid("from-nothing"),
                "source_snapshot": f"{CLUSTER}/snapshots/{uid('never')}",
            }
        ).result(timeout=OP_TIMEOUT)


# ---- instances and clusters --------------------------------------------------------


def test_instance_create_get_list_update(iac, project, instances):
    instance_id = uid("inst")
    name = f"projects/{project}/instances/{instance_id}"
    made = create_instance(
        iac,
        project,
        instance_id,
        display_name="First Name",
        type_=Instance.Type.DEVELOPMENT,
        labels={"env": "test"},
    )
    instances.append(name)
    assert made.name == name
    assert made.display_name == "First Name"

    got = iac.get_instance(request={"name": name})
    assert got.name == name
    assert got.display_name == "First Name"
    assert got.type_ == Instance.Type.DEVELOPMENT
    assert dict(got.labels) == {"env": "test"}
    assert got.state == Instance.State.READY

    listed = iac.list_instances(request={"parent": f"projects/{project}"})
    assert [i.name for i in listed.instances] == [name]

    with pytest.raises(gexc.AlreadyExists):
        create_instance(iac, project, instance_id, display_name="Second Name")
    assert iac.get_instance(request={"name": name}).display_name == "First Name"
    with pytest.raises(gexc.InvalidArgument):
        create_instance(iac, project, "AB")

    # PartialUpdateInstance changes what its mask names, and only that.
    op = iac.partial_update_instance(
        request={
            "instance": {"name": name, "display_name": "Renamed", "labels": {"x": "y"}},
            "update_mask": mask("display_name"),
        }
    )
    assert op.result(timeout=OP_TIMEOUT).display_name == "Renamed"
    got = iac.get_instance(request={"name": name})
    assert got.display_name == "Renamed"
    assert dict(got.labels) == {"env": "test"}
    assert got.type_ == Instance.Type.DEVELOPMENT

    # UpdateInstance sets the display name and type.
    updated = iac.update_instance(
        request=Instance(name=name, display_name="Full Update", type_=Instance.Type.PRODUCTION)
    )
    assert updated.display_name == "Full Update"
    got = iac.get_instance(request={"name": name})
    assert got.display_name == "Full Update"
    assert got.type_ == Instance.Type.PRODUCTION


def test_clusters_of_an_instance(iac, project, instances):
    instance_id = uid("inst")
    name = f"projects/{project}/instances/{instance_id}"
    create_instance(iac, project, instance_id)
    instances.append(name)
    c1, c2 = f"{name}/clusters/c1-cluster", f"{name}/clusters/c2-cluster"

    clusters = iac.list_clusters(request={"parent": name}).clusters
    assert [c.name for c in clusters] == [c1]
    assert clusters[0].location == f"projects/{project}/locations/zone-a"
    assert clusters[0].serve_nodes == 1

    op = iac.create_cluster(
        request={
            "parent": name,
            "cluster_id": "c2-cluster",
            "cluster": {"location": f"projects/{project}/locations/zone-b", "serve_nodes": 2},
        }
    )
    assert op.result(timeout=OP_TIMEOUT).name == c2
    got = iac.get_cluster(request={"name": c2})
    assert got.location == f"projects/{project}/locations/zone-b"
    assert got.serve_nodes == 2
    assert got.state == Cluster.State.READY
    assert {c.name for c in iac.list_clusters(request={"parent": name}).clusters} == {c1, c2}
    with pytest.raises(gexc.AlreadyExists):
        iac.create_cluster(
            request={
                "parent": name,
                "cluster_id": "c2-cluster",
                "cluster": {"location": f"projects/{project}/locations/zone-b"},
            }
        ).result(timeout=OP_TIMEOUT)

    op = iac.update_cluster(request=Cluster(name=c2, serve_nodes=4))
    assert op.result(timeout=OP_TIMEOUT).serve_nodes == 4
    assert iac.get_cluster(request={"name": c2}).serve_nodes == 4

    op = iac.partial_update_cluster(
        request={"cluster": {"name": c2, "serve_nodes": 5}, "update_mask": mask("serve_nodes")}
    )
    assert op.result(timeout=OP_TIMEOUT).serve_nodes == 5
    got = iac.get_cluster(request={"name": c2})
    assert got.serve_nodes == 5
    assert got.location == f"projects/{project}/locations/zone-b"
    assert iac.get_cluster(request={"name": c1}).serve_nodes == 1

    iac.delete_cluster(request={"name": c2})
    with pytest.raises(gexc.NotFound):
        iac.get_cluster(request={"name": c2})
    assert [c.name for c in iac.list_clusters(request={"parent": name}).clusters] == [c1]
    with pytest.raises(gexc.FailedPrecondition):
        iac.delete_cluster(request={"name": c1})
    assert [c.name for c in iac.list_clusters(request={"parent": name}).clusters] == [c1]


def test_created_instance_has_default_app_profile(iac, project, instances):
    instance_id = uid("inst")
    name = f"projects/{project}/instances/{instance_id}"
    create_instance(iac, project, instance_id)
    instances.append(name)
    profiles = iac.list_app_profiles(request={"parent": name}).app_profiles
    assert [p.name for p in profiles] == [f"{name}/appProfiles/default"]
    assert profiles[0].single_cluster_routing.cluster_id == "c1-cluster"


def test_delete_instance_deletes_its_tables(iac, tac, project, instances):
    instance_id = uid("inst")
    name = f"projects/{project}/instances/{instance_id}"
    create_instance(iac, project, instance_id, display_name="Doomed")
    instances.append(name)  # in case the test fails before its own delete
    table = tac.create_table(
        request={"parent": name, "table_id": "t1", "table": {"column_families": {"cf": {}}}}
    )
    assert [t.name for t in tac.list_tables(request={"parent": name})] == [table.name]

    iac.delete_instance(request={"name": name})
    assert list(tac.list_tables(request={"parent": name})) == []
    with pytest.raises(gexc.NotFound):
        tac.get_table(request={"name": table.name})
    # The name is an implicit instance again.
    got = iac.get_instance(request={"name": name})
    assert got.display_name == instance_id
    assert [c.name for c in iac.list_clusters(request={"parent": name}).clusters] == [
        f"{name}/clusters/almanac"
    ]
    listed = iac.list_instances(request={"parent": f"projects/{project}"}).instances
    assert name not in [i.name for i in listed]


def test_implicit_instance(iac, project):
    instance_id = uid("implicit")
    name = f"projects/{project}/instances/{instance_id}"
    got = iac.get_instance(request={"name": name})
    assert got.name == name
    assert got.display_name == instance_id
    assert got.state == Instance.State.READY
    clusters = iac.list_clusters(request={"parent": name}).clusters
    assert [c.name for c in clusters] == [f"{name}/clusters/almanac"]
    assert iac.get_cluster(request={"name": clusters[0].name}).name == clusters[0].name
    profiles = iac.list_app_profiles(request={"parent": name}).app_profiles
    assert [p.name for p in profiles] == [f"{name}/appProfiles/default"]
    assert profiles[0].single_cluster_routing.cluster_id == "almanac"
    # Reading it did not create it.
    assert list(iac.list_instances(request={"parent": f"projects/{project}"}).instances) == []


# ---- app profiles ------------------------------------------------------------------


def create_profile(iac, instance: str, profile_id: str, cluster_id: str, description="p"):
    return iac.create_app_profile(
        request={
            "parent": instance,
            "app_profile_id": profile_id,
            "app_profile": {
                "description": description,
                "single_cluster_routing": {"cluster_id": cluster_id},
            },
        }
    )


def test_app_profiles(iac, project, instances):
    name = f"projects/{project}/instances/{uid('profiles')}"
    instances.append(name)  # made explicit by the first profile
    ap1 = f"{name}/appProfiles/ap1"

    made = create_profile(iac, name, "ap1", "almanac", description="first")
    assert made.name == ap1
    assert made.description == "first"
    assert made.single_cluster_routing.cluster_id == "almanac"
    assert iac.get_app_profile(request={"name": ap1}) == made
    listed = iac.list_app_profiles(request={"parent": name}).app_profiles
    assert {p.name for p in listed} == {f"{name}/appProfiles/default", ap1}
    with pytest.raises(gexc.AlreadyExists):
        create_profile(iac, name, "ap1", "almanac")

    # Only the masked field changes: the routing sent beside it is ignored.
    op = iac.update_app_profile(
        request={
            "app_profile": AppProfile(
                name=ap1,
                description="second",
                multi_cluster_routing_use_any=AppProfile.MultiClusterRoutingUseAny(),
            ),
            "update_mask": mask("description"),
        }
    )
    assert op.result(timeout=OP_TIMEOUT).description == "second"
    got = iac.get_app_profile(request={"name": ap1})
    assert got.description == "second"
    assert got.single_cluster_routing.cluster_id == "almanac"
    assert "multi_cluster_routing_use_any" not in got

    with pytest.raises(gexc.InvalidArgument):
        iac.update_app_profile(
            request={"app_profile": {"name": ap1, "description": "third"}, "update_mask": {}}
        )
    with pytest.raises(gexc.InvalidArgument):
        create_profile(iac, name, "ap2", "no-such-cluster")
    with pytest.raises(gexc.NotFound):
        iac.get_app_profile(request={"name": f"{name}/appProfiles/ap2"})
    assert iac.get_app_profile(request={"name": ap1}).description == "second"

    iac.delete_app_profile(request={"name": ap1, "ignore_warnings": True})
    with pytest.raises(gexc.NotFound):
        iac.get_app_profile(request={"name": ap1})
    listed = iac.list_app_profiles(request={"parent": name}).app_profiles
    assert [p.name for p in listed] == [f"{name}/appProfiles/default"]


def test_cluster_in_use_by_a_profile_cannot_be_deleted(iac, project, instances):
    instance_id = uid("inst")
    name = f"projects/{project}/instances/{instance_id}"
    create_instance(iac, project, instance_id, clusters=("c1-cluster", "c2-cluster"))
    instances.append(name)
    c2 = f"{name}/clusters/c2-cluster"
    ap = create_profile(iac, name, "uses-c2", "c2-cluster")

    with pytest.raises(gexc.FailedPrecondition):
        iac.delete_cluster(request={"name": c2})
    assert iac.get_cluster(request={"name": c2}).name == c2

    # Once nothing routes to it, the cluster can go.
    iac.delete_app_profile(request={"name": ap.name, "ignore_warnings": True})
    iac.delete_cluster(request={"name": c2})
    with pytest.raises(gexc.NotFound):
        iac.get_cluster(request={"name": c2})


# ---- IAM ---------------------------------------------------------------------------


def reader_policy(etag: bytes, member: str = "user:a@example.com") -> policy_pb2.Policy:
    return policy_pb2.Policy(
        bindings=[policy_pb2.Binding(role="roles/bigtable.reader", members=[member])],
        etag=etag,
    )


def check_policy_round_trip(admin, resource: str) -> None:
    """Get, Set, Get again, then a Set with the stale etag (ABORTED) on `resource`."""
    first = admin.get_iam_policy(request={"resource": resource})
    assert first.etag
    assert list(first.bindings) == []

    policy = reader_policy(first.etag)
    stored = admin.set_iam_policy(request={"resource": resource, "policy": policy})
    assert list(stored.bindings) == list(policy.bindings)
    assert stored.etag and stored.etag != first.etag

    again = admin.get_iam_policy(request={"resource": resource})
    assert list(again.bindings) == list(policy.bindings)
    assert again.etag == stored.etag

    with pytest.raises(gexc.Aborted):
        admin.set_iam_policy(
            request={"resource": resource, "policy": reader_policy(first.etag, "user:b@x.com")}
        )
    assert admin.get_iam_policy(request={"resource": resource}) == again


def test_iam_policy_of_a_table(tac, tables):
    name, _ = tables.create()
    check_policy_round_trip(tac, name)

    tested = tac.test_iam_permissions(
        request={
            "resource": name,
            "permissions": ["bigtable.tables.get", "bigtable.tables.readRows"],
        }
    )
    assert sorted(tested.permissions) == ["bigtable.tables.get", "bigtable.tables.readRows"]
    with pytest.raises(gexc.InvalidArgument):
        tac.test_iam_permissions(
            request={"resource": name, "permissions": ["storage.objects.get"]}
        )

    missing = f"{INSTANCE_NAME}/tables/{uid('missing')}"
    with pytest.raises(gexc.NotFound):
        tac.get_iam_policy(request={"resource": missing})
    with pytest.raises(gexc.NotFound):
        tac.set_iam_policy(request={"resource": missing, "policy": reader_policy(b"")})


def test_iam_policy_of_an_instance(iac, project, instances):
    name = f"projects/{project}/instances/{uid('iam')}"
    instances.append(name)  # its policy is kept until the instance is deleted
    check_policy_round_trip(iac, name)
    tested = iac.test_iam_permissions(
        request={"resource": name, "permissions": ["bigtable.instances.get"]}
    )
    assert list(tested.permissions) == ["bigtable.instances.get"]
    with pytest.raises(gexc.InvalidArgument):
        iac.test_iam_permissions(request={"resource": name, "permissions": ["iam.roles.get"]})
