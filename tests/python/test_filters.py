"""Every RowFilter kind, through the client's row_filters module, with exact outputs."""

from __future__ import annotations

import datetime as dt

import pytest
from google.cloud.bigtable import row_filters as classic_filters
from google.cloud.bigtable.data import ReadRowsQuery, SetCell
from google.cloud.bigtable.data.row_filters import (
    ApplyLabelFilter,
    BlockAllFilter,
    CellsColumnLimitFilter,
    CellsRowLimitFilter,
    CellsRowOffsetFilter,
    ColumnQualifierRegexFilter,
    ColumnRangeFilter,
    ConditionalRowFilter,
    FamilyNameRegexFilter,
    PassAllFilter,
    RowFilterChain,
    RowFilterUnion,
    RowKeyRegexFilter,
    RowSampleFilter,
    SinkFilter,
    StripValueTransformerFilter,
    TimestampRangeFilter,
    ValueRangeFilter,
    ValueRegexFilter,
)

from bt_helpers import MS, by_family, keys

# row-a  fa:c1 @3 v3, @2 v2, @1 v1 | fa:c2 @1 x | fb:c1 @1 y
# row-b  fa:c1 @2 apple | fa:c3 @1 banana
# row-ab fa:c1 @1 cherry
# other  fb:c9 @5 z
A_FA = [(b"c1", 3 * MS, b"v3"), (b"c1", 2 * MS, b"v2"), (b"c1", 1 * MS, b"v1"),
        (b"c2", 1 * MS, b"x")]
A_FB = [(b"c1", 1 * MS, b"y")]
B_FA = [(b"c1", 2 * MS, b"apple"), (b"c3", 1 * MS, b"banana")]
AB_FA = [(b"c1", 1 * MS, b"cherry")]
O_FB = [(b"c9", 5 * MS, b"z")]
ALL = {
    b"other": {"fb": O_FB},
    b"row-a": {"fa": A_FA, "fb": A_FB},
    b"row-ab": {"fa": AB_FA},
    b"row-b": {"fa": B_FA},
}
UTC = dt.timezone.utc


def ms(n: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(n / 1000, UTC)


@pytest.fixture
def seeded(make_table):
    bt = make_table(families={"fa": None, "fb": None})
    for key, families in ALL.items():
        bt.data.mutate_row(
            key,
            [SetCell(fam, q, v, ts) for fam, items in families.items() for q, ts, v in items],
        )
    return bt


def read_f(bt, flt, labels=False, unordered=False) -> dict:
    """{row_key: {family: [(qualifier, ts, value[, labels])]}} for a filtered full scan.

    `unordered` sorts each family's cells: for outputs with duplicates (Interleave,
    Sink), whose mutual order the API leaves unspecified.
    """
    out = {}
    for row in bt.data.read_rows(ReadRowsQuery(row_filter=flt)):
        fams = by_family(row, labels)
        out[row.row_key] = {f: sorted(c) for f, c in fams.items()} if unordered else fams
    return out


def read_classic(bt, flt) -> dict:
    out = {}
    for row in bt.classic.read_rows(filter_=flt):
        out[row.row_key] = {
            fam: [(q, c.timestamp_micros, c.value) for q, cs in cols.items() for c in cs]
            for fam, cols in row.cells.items()
        }
    return out


def test_pass_all_and_block_all(seeded):
    assert read_f(seeded, PassAllFilter(True)) == ALL
    assert read_classic(seeded, classic_filters.PassAllFilter(True)) == ALL
    assert read_f(seeded, BlockAllFilter(True)) == {}


def test_row_key_regex_is_a_full_match(seeded):
    assert read_f(seeded, RowKeyRegexFilter(b"row-a")) == {b"row-a": ALL[b"row-a"]}
    prefix = ReadRowsQuery(row_filter=RowKeyRegexFilter(b"row-a.*"))
    assert keys(seeded.data.read_rows(prefix)) == [b"row-a", b"row-ab"]
    assert read_f(seeded, RowKeyRegexFilter(b"row-")) == {}
    assert read_f(seeded, RowKeyRegexFilter(b"ow-a")) == {}
    assert set(read_f(seeded, RowKeyRegexFilter(b"row-(a|b)"))) == {b"row-a", b"row-b"}


def test_regex_dot_does_not_match_newline_but_backslash_c_does(make_table):
    # data.proto: "`.` will not match the new line character `\n`"; `\C` matches any byte.
    bt = make_table(families={"fa": None})
    for k in [b"a\nb", b"axb", b"a\xffb"]:
        bt.data.mutate_row(k, SetCell("fa", b"q", b"v", 1 * MS))
    dot = set(read_f(bt, RowKeyRegexFilter(b"a.b")))
    assert b"axb" in dot and b"a\nb" not in dot
    assert set(read_f(bt, RowKeyRegexFilter(b"a\\Cb"))) == {b"a\nb", b"axb", b"a\xffb"}
    assert set(read_f(bt, RowKeyRegexFilter(b"a\\nb"))) == {b"a\nb"}


def test_family_name_regex(seeded):
    assert read_f(seeded, FamilyNameRegexFilter("fb")) == {
        b"other": {"fb": O_FB}, b"row-a": {"fb": A_FB}
    }
    assert read_f(seeded, FamilyNameRegexFilter("f")) == {}
    assert read_f(seeded, FamilyNameRegexFilter("f.")) == ALL


def test_column_qualifier_regex(seeded):
    assert read_f(seeded, ColumnQualifierRegexFilter(b"c1")) == {
        b"row-a": {"fa": A_FA[:3], "fb": A_FB},
        b"row-ab": {"fa": AB_FA},
        b"row-b": {"fa": B_FA[:1]},
    }
    assert read_f(seeded, ColumnQualifierRegexFilter(b"c")) == {}
    assert read_f(seeded, ColumnQualifierRegexFilter(b"c[23]")) == {
        b"row-a": {"fa": A_FA[3:]}, b"row-b": {"fa": B_FA[1:]}
    }


def test_column_range(seeded):
    # Only family fa: fb:c1 is outside the range even though its qualifier is inside.
    assert read_f(seeded, ColumnRangeFilter("fa", b"c1", b"c2", inclusive_end=False)) == {
        b"row-a": {"fa": A_FA[:3]},
        b"row-ab": {"fa": AB_FA},
        b"row-b": {"fa": B_FA[:1]},
    }
    assert read_f(seeded, ColumnRangeFilter("fa", b"c1", b"c3", inclusive_start=False)) == {
        b"row-a": {"fa": A_FA[3:]}, b"row-b": {"fa": B_FA[1:]}
    }
    flt = classic_filters.ColumnRangeFilter(column_family_id="fb", start_column=b"c5")
    assert read_classic(seeded, flt) == {b"other": {"fb": O_FB}}


def test_timestamp_range(seeded):
    # [start, end): start inclusive, end exclusive.
    assert read_f(seeded, TimestampRangeFilter(start=ms(2), end=ms(3))) == {
        b"row-a": {"fa": [A_FA[1]]}, b"row-b": {"fa": B_FA[:1]}
    }
    assert read_f(seeded, TimestampRangeFilter(start=ms(3))) == {
        b"other": {"fb": O_FB}, b"row-a": {"fa": A_FA[:1]}
    }
    flt = classic_filters.TimestampRangeFilter(classic_filters.TimestampRange(end=ms(2)))
    assert read_classic(seeded, flt) == {
        b"row-a": {"fa": A_FA[2:], "fb": A_FB},
        b"row-ab": {"fa": AB_FA},
        b"row-b": {"fa": B_FA[1:]},
    }


def test_value_regex_is_a_full_match(seeded):
    assert read_f(seeded, ValueRegexFilter(b"v.")) == {b"row-a": {"fa": A_FA[:3]}}
    assert read_f(seeded, ValueRegexFilter(b"an")) == {}
    assert read_f(seeded, ValueRegexFilter(b".*an.*")) == {b"row-b": {"fa": B_FA[1:]}}
    assert read_f(seeded, classic_filters.ExactValueFilter(b"cherry")) == {
        b"row-ab": {"fa": AB_FA}
    }


def test_value_range(seeded):
    assert read_f(seeded, ValueRangeFilter(b"b", b"d", inclusive_end=False)) == {
        b"row-ab": {"fa": AB_FA}, b"row-b": {"fa": B_FA[1:]}
    }
    assert read_f(seeded, ValueRangeFilter(start_value=b"x")) == {
        b"other": {"fb": O_FB}, b"row-a": {"fa": A_FA[3:], "fb": A_FB}
    }
    assert read_f(seeded, ValueRangeFilter(start_value=b"x", inclusive_start=False)) == {
        b"other": {"fb": O_FB}, b"row-a": {"fb": A_FB}
    }
    assert read_f(seeded, ValueRangeFilter(end_value=b"apple")) == {b"row-b": {"fa": B_FA[:1]}}


def test_cells_per_row_offset_and_limit(seeded):
    # Chained after a family filter so the result does not depend on family order.
    fa = FamilyNameRegexFilter("fa")
    assert read_f(seeded, RowFilterChain([fa, CellsRowOffsetFilter(2)])) == {
        b"row-a": {"fa": A_FA[2:]}
    }
    assert read_f(seeded, RowFilterChain([fa, CellsRowOffsetFilter(1)])) == {
        b"row-a": {"fa": A_FA[1:]}, b"row-b": {"fa": B_FA[1:]}
    }
    assert read_f(seeded, RowFilterChain([fa, CellsRowLimitFilter(2)])) == {
        b"row-a": {"fa": A_FA[:2]}, b"row-ab": {"fa": AB_FA}, b"row-b": {"fa": B_FA}
    }
    assert read_f(seeded, CellsRowLimitFilter(1))[b"other"] == {"fb": O_FB}


def test_cells_per_column_limit(seeded):
    assert read_f(seeded, CellsColumnLimitFilter(1)) == {
        b"other": {"fb": O_FB},
        b"row-a": {"fa": [A_FA[0], A_FA[3]], "fb": A_FB},
        b"row-ab": {"fa": AB_FA},
        b"row-b": {"fa": B_FA},
    }
    assert read_f(seeded, CellsColumnLimitFilter(2))[b"row-a"]["fa"] == [A_FA[0], A_FA[1], A_FA[3]]


def test_strip_value_and_apply_label(seeded):
    stripped = {k: {f: [(q, ts, b"") for q, ts, _ in c] for f, c in fams.items()}
                for k, fams in ALL.items()}
    assert read_f(seeded, StripValueTransformerFilter(True)) == stripped
    labelled = {k: {f: [(q, ts, v, ("lbl-1",)) for q, ts, v in c] for f, c in fams.items()}
                for k, fams in ALL.items()}
    assert read_f(seeded, ApplyLabelFilter("lbl-1"), labels=True) == labelled


def test_chain(seeded):
    flt = RowFilterChain(
        [FamilyNameRegexFilter("fa"), ColumnQualifierRegexFilter(b"c1"), CellsColumnLimitFilter(1)]
    )
    assert read_f(seeded, flt) == {
        b"row-a": {"fa": A_FA[:1]}, b"row-ab": {"fa": AB_FA}, b"row-b": {"fa": B_FA[:1]}
    }


def test_union_interleaves_and_keeps_duplicates(seeded):
    flt = RowFilterUnion([ColumnQualifierRegexFilter(b"c2"), ValueRegexFilter(b"v1")])
    assert read_f(seeded, flt) == {b"row-a": {"fa": [A_FA[2], A_FA[3]]}}
    only_ab = RowKeyRegexFilter(b"row-ab")
    twice = RowFilterChain([only_ab, RowFilterUnion([PassAllFilter(True), PassAllFilter(True)])])
    assert read_f(seeded, twice) == {b"row-ab": {"fa": AB_FA * 2}}
    # Two labels in an Interleave are fine: each applies to its own copy.
    labels = RowFilterChain(
        [only_ab, RowFilterUnion([ApplyLabelFilter("one"), ApplyLabelFilter("two")])]
    )
    (q, ts, v), = AB_FA
    assert read_f(seeded, labels, labels=True, unordered=True) == {
        b"row-ab": {"fa": [(q, ts, v, ("one",)), (q, ts, v, ("two",))]}
    }


def test_condition(seeded):
    apple = ConditionalRowFilter(ValueRegexFilter(b"apple"), true_filter=PassAllFilter(True))
    assert read_f(seeded, apple) == {b"row-b": {"fa": B_FA}}
    both = ConditionalRowFilter(
        ColumnQualifierRegexFilter(b"c3"),
        true_filter=StripValueTransformerFilter(True),
        false_filter=FamilyNameRegexFilter("fb"),
    )
    assert read_f(seeded, both) == {
        b"other": {"fb": O_FB},
        b"row-a": {"fb": A_FB},
        b"row-b": {"fa": [(q, ts, b"") for q, ts, _ in B_FA]},
    }
    classic = classic_filters.ConditionalRowFilter(
        base_filter=classic_filters.RowKeyRegexFilter(b"row-a"),
        false_filter=classic_filters.FamilyNameRegexFilter("fb"),
    )
    # No true branch: the matching row (row-a) emits nothing at all.
    assert read_classic(seeded, classic) == {b"other": {"fb": O_FB}}


def test_sink(seeded):
    # data.proto's own example: Chain(Family, Interleave(All, Chain(Label, Sink)), Qualifier).
    flt = RowFilterChain(
        [
            FamilyNameRegexFilter("fa"),
            RowFilterUnion(
                [PassAllFilter(True), RowFilterChain([ApplyLabelFilter("foo"), SinkFilter(True)])]
            ),
            ColumnQualifierRegexFilter(b"c2"),
        ]
    )
    foo, none = (("foo",),), ((),)
    assert read_f(seeded, flt, labels=True, unordered=True) == {
        b"row-a": {"fa": sorted([c + foo for c in A_FA] + [A_FA[3] + none])},
        b"row-ab": {"fa": [c + foo for c in AB_FA]},
        b"row-b": {"fa": [c + foo for c in B_FA]},
    }


def test_nested_combinations(seeded):
    flt = RowFilterChain(
        [
            RowFilterUnion(
                [
                    FamilyNameRegexFilter("fb"),
                    RowFilterChain([ColumnQualifierRegexFilter(b"c1"), CellsColumnLimitFilter(1)]),
                ]
            ),
            StripValueTransformerFilter(True),
        ]
    )
    assert read_f(seeded, flt, unordered=True) == {
        b"other": {"fb": [(b"c9", 5 * MS, b"")]},
        b"row-a": {"fa": [(b"c1", 3 * MS, b"")], "fb": [(b"c1", 1 * MS, b"")] * 2},
        b"row-ab": {"fa": [(b"c1", 1 * MS, b"")]},
        b"row-b": {"fa": [(b"c1", 2 * MS, b"")]},
    }
    cond_in_chain = RowFilterChain(
        [
            FamilyNameRegexFilter("fa"),
            ConditionalRowFilter(
                ValueRegexFilter(b"cherry|apple"),
                true_filter=CellsRowLimitFilter(1),
                false_filter=BlockAllFilter(True),
            ),
        ]
    )
    assert read_f(seeded, cond_in_chain) == {
        b"row-ab": {"fa": AB_FA}, b"row-b": {"fa": B_FA[:1]}
    }


def test_filter_on_read_row(seeded):
    row = seeded.data.read_row(b"row-a", row_filter=CellsColumnLimitFilter(1))
    assert by_family(row) == {"fa": [A_FA[0], A_FA[3]], "fb": A_FB}
    assert seeded.data.read_row(b"row-a", row_filter=BlockAllFilter(True)) is None
    classic = seeded.classic.read_row(b"row-b", filter_=classic_filters.ValueRegexFilter(b"b.*"))
    assert {fam: list(cols) for fam, cols in classic.cells.items()} == {"fa": [b"c3"]}
    assert classic.cell_value("fa", b"c3") == b"banana"


def test_row_sample_returns_a_subset_of_whole_rows(make_table):
    bt = make_table(families={"fa": None})
    for i in range(100):
        bt.data.mutate_row(
            b"r%03d" % i, [SetCell("fa", b"a", b"1", 1 * MS), SetCell("fa", b"b", b"2", 1 * MS)]
        )
    rows = bt.data.read_rows(ReadRowsQuery(row_filter=RowSampleFilter(0.5)))
    got = keys(rows)
    assert got == sorted(set(got))
    assert set(got) <= {b"r%03d" % i for i in range(100)}
    # P(0 or 100 of 100 rows at p=0.5) is 2**-99.
    assert 0 < len(got) < 100
    assert all(len(r.cells) == 2 for r in rows)  # a sampled row comes whole
