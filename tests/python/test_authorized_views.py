"""Authorized views through Google's Python clients: the admin calls (create, get,
list, update with etags, deletion protection, delete) and data requests through
`BigtableDataClient.get_authorized_view`, which name only `authorized_view_name`.

The view under test shows rows starting with `user1#`, in family cf1 the qualifier
`name` and qualifiers starting with `addr_`, and all of family cf2; the table also
holds cf1:secret, family cf3 and rows of user2. Reads must see exactly the view's cells
(with the request's own filter applied to those alone), writes outside it must be
refused with PERMISSION_DENIED and change nothing.
"""

from __future__ import annotations

import grpc
import pytest
from google.api_core import exceptions as gexc
from google.cloud.bigtable.data import (
    DeleteAllFromRow,
    ReadRowsQuery,
    RowMutationEntry,
    SetCell,
)
from google.cloud.bigtable.data.exceptions import MutationsExceptionGroup
from google.cloud.bigtable.data.read_modify_write_rules import IncrementRule
from google.cloud.bigtable.data.row_filters import CellsRowLimitFilter, FamilyNameRegexFilter

from bt_helpers import INSTANCE, MS, PROJECT

OP_TIMEOUT = 30
FULL = 3  # AuthorizedView.ResponseView.FULL


def cells(row) -> list[tuple[str, bytes, bytes]]:
    return sorted((c.family, c.qualifier, c.value) for c in row.cells)


@pytest.fixture
def viewed(make_table, tac, data_client):
    """A table with data inside and outside the view, and the view's data handle."""
    bt = make_table(families={"cf1": None, "cf2": None, "cf3": None})
    for key in (b"user1#a", b"user1#b", b"user2#a"):
        bt.data.mutate_row(
            key,
            [
                SetCell("cf1", b"name", b"n-" + key, 1 * MS),
                SetCell("cf1", b"addr_city", b"c-" + key, 1 * MS),
                SetCell("cf1", b"secret", b"s-" + key, 1 * MS),
                SetCell("cf2", b"x", b"x-" + key, 1 * MS),
                SetCell("cf3", b"y", b"y-" + key, 1 * MS),
            ],
        )
    parent = bt.classic.name
    view_id = "v1"
    op = tac.create_authorized_view(
        request={
            "parent": parent,
            "authorized_view_id": view_id,
            "authorized_view": {
                "subset_view": {
                    "row_prefixes": [b"user1#"],
                    "family_subsets": {
                        "cf1": {"qualifiers": [b"name"], "qualifier_prefixes": [b"addr_"]},
                        "cf2": {"qualifier_prefixes": [b""]},
                    },
                }
            },
        }
    )
    made = op.result(timeout=OP_TIMEOUT)
    assert made.name == f"{parent}/authorizedViews/{view_id}"
    view = data_client.get_authorized_view(INSTANCE, bt.table_id, view_id)
    yield bt, made, view
    view.close()


def test_admin_calls_create_get_list_update_and_protect(viewed, tac):
    bt, made, _ = viewed
    got = tac.get_authorized_view(request={"name": made.name, "view": FULL})
    assert list(got.subset_view.row_prefixes) == [b"user1#"]
    assert set(got.subset_view.family_subsets) == {"cf1", "cf2"}
    assert got.etag
    listed = list(tac.list_authorized_views(request={"parent": bt.classic.name}))
    assert [v.name for v in listed] == [made.name]
    with pytest.raises(gexc.AlreadyExists):
        tac.create_authorized_view(
            request={"parent": bt.classic.name, "authorized_view_id": "v1", "authorized_view": {"subset_view": {}}}
        ).result(timeout=OP_TIMEOUT)

    # An update with a stale etag is refused; with the current one it applies.
    update = {
        "name": made.name,
        "etag": got.etag,
        "deletion_protection": True,
    }
    updated = tac.update_authorized_view(
        request={"authorized_view": update, "update_mask": {"paths": ["deletion_protection"]}}
    ).result(timeout=OP_TIMEOUT)
    assert updated.deletion_protection and updated.etag != got.etag
    with pytest.raises(gexc.Aborted):
        tac.update_authorized_view(
            request={"authorized_view": update, "update_mask": {"paths": ["deletion_protection"]}}
        ).result(timeout=OP_TIMEOUT)
    with pytest.raises(gexc.FailedPrecondition, match="protected"):
        tac.delete_authorized_view(request={"name": made.name})
    tac.update_authorized_view(
        request={
            "authorized_view": {"name": made.name, "deletion_protection": False},
            "update_mask": {"paths": ["deletion_protection"]},
        }
    ).result(timeout=OP_TIMEOUT)
    with pytest.raises(gexc.InvalidArgument, match="update_mask"):
        tac.update_authorized_view(
            request={"authorized_view": {"name": made.name}, "update_mask": {"paths": ["etag_of_doom"]}}
        ).result(timeout=OP_TIMEOUT)
    tac.delete_authorized_view(request={"name": made.name})
    with pytest.raises(gexc.NotFound):
        tac.get_authorized_view(request={"name": made.name})


def test_reads_through_the_view_see_only_its_cells(viewed):
    bt, _, view = viewed
    rows = list(view.read_rows(ReadRowsQuery()))
    assert [r.row_key for r in rows] == [b"user1#a", b"user1#b"]
    assert cells(rows[0]) == [
        ("cf1", b"addr_city", b"c-user1#a"),
        ("cf1", b"name", b"n-user1#a"),
        ("cf2", b"x", b"x-user1#a"),
    ]
    # A row outside the view reads as missing; the table itself still has it.
    assert view.read_row(b"user2#a") is None
    assert bt.data.read_row(b"user2#a") is not None
    # The request's filter sees only the view's cells.
    limited = list(view.read_rows(ReadRowsQuery(row_filter=CellsRowLimitFilter(1))))
    assert [cells(r) for r in limited] == [[("cf1", b"addr_city", b"c-user1#a")], [("cf1", b"addr_city", b"c-user1#b")]]
    assert list(view.read_rows(ReadRowsQuery(row_filter=FamilyNameRegexFilter("cf3")))) == []
    keys = [k for k, _ in view.sample_row_keys()]
    assert all(k == b"" or k.startswith(b"user1#") for k in keys), keys


def test_writes_outside_the_view_are_refused_and_change_nothing(viewed):
    bt, _, view = viewed
    view.mutate_row(b"user1#c", SetCell("cf1", b"name", b"new", 2 * MS))
    assert cells(bt.data.read_row(b"user1#c")) == [("cf1", b"name", b"new")]
    for key, mutation in [
        (b"user1#a", SetCell("cf1", b"secret", b"leak", 2 * MS)),
        (b"user1#a", SetCell("cf3", b"y", b"leak", 2 * MS)),
        (b"user2#a", SetCell("cf1", b"name", b"leak", 2 * MS)),
        (b"user1#a", DeleteAllFromRow()),
    ]:
        with pytest.raises(gexc.PermissionDenied, match="outside authorized view"):
            view.mutate_row(key, mutation)
    assert cells(bt.data.read_row(b"user1#a")) == sorted(
        [
            ("cf1", b"name", b"n-user1#a"),
            ("cf1", b"addr_city", b"c-user1#a"),
            ("cf1", b"secret", b"s-user1#a"),
            ("cf2", b"x", b"x-user1#a"),
            ("cf3", b"y", b"y-user1#a"),
        ]
    )
    assert cells(bt.data.read_row(b"user2#a"))[1] == ("cf1", b"name", b"n-user2#a")

    # In a batch, the entry outside the view fails alone.
    with pytest.raises(MutationsExceptionGroup) as group:
        view.bulk_mutate_rows(
            [
                RowMutationEntry(b"user1#d", SetCell("cf2", b"any", b"ok", 3 * MS)),
                RowMutationEntry(b"user2#d", SetCell("cf2", b"any", b"no", 3 * MS)),
            ]
        )
    assert len(group.value.exceptions) == 1 and group.value.exceptions[0].index == 1
    assert bt.data.read_row(b"user1#d") is not None and bt.data.read_row(b"user2#d") is None

    # The predicate sees only the view: cf1:secret exists, but not in the view.
    from google.cloud.bigtable.data.row_filters import ColumnQualifierRegexFilter

    matched = view.check_and_mutate_row(
        b"user1#a",
        ColumnQualifierRegexFilter(b"secret"),
        true_case_mutations=SetCell("cf2", b"hit", b"1", 4 * MS),
        false_case_mutations=SetCell("cf2", b"miss", b"1", 4 * MS),
    )
    assert matched is False
    assert bt.data.read_row(b"user1#a").get_cells("cf2", b"miss")
    with pytest.raises(gexc.PermissionDenied):
        view.check_and_mutate_row(b"user1#a", None, true_case_mutations=SetCell("cf3", b"z", b"1", 4 * MS))
    row = view.read_modify_write_row(b"user1#a", IncrementRule("cf2", b"n", 5))
    assert row.cells[0].value == (5).to_bytes(8, "big")
    with pytest.raises(gexc.PermissionDenied):
        view.read_modify_write_row(b"user1#a", IncrementRule("cf1", b"secret", 1))


def test_a_view_is_deleted_with_its_table(server, make_table, tac):
    bt = make_table(families={"cf1": None})
    name = tac.create_authorized_view(
        request={
            "parent": bt.classic.name,
            "authorized_view_id": "gone",
            "authorized_view": {"subset_view": {"row_prefixes": [b""], "family_subsets": {"cf1": {"qualifier_prefixes": [b""]}}}},
        }
    ).result(timeout=OP_TIMEOUT).name
    bt.classic.delete()
    bt.classic.create(column_families={"cf1": None})
    with pytest.raises(gexc.NotFound):
        tac.get_authorized_view(request={"name": name})
    # A request naming a table and another table's view is refused.
    from google.cloud.bigtable_v2 import BigtableClient
    from google.cloud.bigtable_v2.services.bigtable.transports import BigtableGrpcTransport
    from google.cloud.bigtable_v2.types import ReadRowsRequest

    raw = BigtableClient(transport=BigtableGrpcTransport(channel=grpc.insecure_channel(server.host)))
    other = f"projects/{PROJECT}/instances/{INSTANCE}/tables/other"
    with pytest.raises(gexc.InvalidArgument, match="not a view of table"):
        list(raw.read_rows(request=ReadRowsRequest(table_name=other, authorized_view_name=name), retry=None))
