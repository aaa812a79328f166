//! Unit tests: each filter kind, its edge cases, the examples of data.proto, and
//! the validation rules.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use super::testkit::{f, parse_cell, show_cells};
use super::{CompiledFilter, RowFilter};
use crate::cell::Cell;
use crate::clock::Rng;
use crate::error::Error;

fn cells(lines: &[&str]) -> Vec<Cell> {
    lines.iter().map(|l| parse_cell(l).unwrap()).collect()
}

/// Runs `filter` on `key`/`input` and returns the output in the cell syntax.
fn run_key(filter: &str, key: &[u8], input: &[&str]) -> Vec<String> {
    let compiled = CompiledFilter::compile(&f(filter)).unwrap();
    show_cells(&compiled.apply(key, cells(input), &Rng::new(7)))
}

fn run(filter: &str, input: &[&str]) -> Vec<String> {
    run_key(filter, b"row", input)
}

fn invalid(filter: RowFilter) -> String {
    match CompiledFilter::compile(&filter) {
        Err(Error::Invalid(msg)) => msg,
        other => panic!("expected Invalid for {filter:?}, got {other:?}"),
    }
}

const ROW: &[&str] = &["a:x@3=v3", "a:x@2=v2", "a:x@1=v1", "a:y@5=w", "b:x@4=u"];

#[test]
fn chain_feeds_each_filter_the_previous_output() {
    assert_eq!(
        run("(chain (family \"a\") (qual \"x\") (limit 2))", ROW),
        ["a:x@3=v3", "a:x@2=v2"]
    );
    // Order matters: the row limit before the family filter sees b's cell too.
    assert_eq!(run("(chain (offset 4) (family \"a\"))", ROW), ["(empty)"]);
    assert_eq!(run("(chain)", ROW), ROW);
}

#[test]
fn interleave_pools_outputs_in_row_order_with_duplicates() {
    // data.proto's interleave example: f(0), f(1), f(2) each pick cells; identical
    // cells appear twice, and copies of one cell follow child order.
    let input = [
        "foo:bar@10=x",
        "foo:blah@11=z",
        "far:bar@7=a",
        "far:blah@5=x",
    ];
    let out = run(
        "(interleave (chain (family \"foo\") (qual \"bar\")) (chain (family \"far\") (qual \"blah\")) \
         (family \"far\"))",
        &input,
    );
    assert_eq!(
        out,
        [
            "foo:bar@10=x",
            "far:bar@7=a",
            "far:blah@5=x",
            "far:blah@5=x"
        ]
    );
    let labelled = run(
        "(interleave (label \"one\") (chain (qual \"bar\") (label \"two\")))",
        &input,
    );
    assert_eq!(
        labelled,
        [
            "foo:bar@10=x [one]",
            "foo:bar@10=x [two]",
            "foo:blah@11=z [one]",
            "far:bar@7=a [one]",
            "far:bar@7=a [two]",
            "far:blah@5=x [one]"
        ]
    );
    assert_eq!(run("(interleave)", ROW), ["(empty)"]);
    assert_eq!(run("(interleave pass)", ROW), ROW);
}

#[test]
fn sink_example_from_data_proto() {
    let input = ["A:A@1=w", "A:B@2=x", "B:B@4=z"];
    let out = run(
        "(chain (family \"A\") (interleave pass (chain (label \"foo\") sink)) (qual \"B\"))",
        &input,
    );
    assert_eq!(out, ["A:A@1=w [foo]", "A:B@2=x [foo]", "A:B@2=x"]);
}

#[test]
fn sink_outputs_nothing_to_its_parent() {
    assert_eq!(run("sink", ROW), ROW);
    // The second sink sees nothing: the first passed nothing on.
    assert_eq!(run("(chain sink sink)", ROW), ROW);
    assert_eq!(
        run("(chain sink (label \"late\"))", &ROW[..1]),
        ["a:x@3=v3"]
    );
    assert_eq!(
        run("(interleave sink sink)", &ROW[..2]),
        ["a:x@3=v3", "a:x@3=v3", "a:x@2=v2", "a:x@2=v2"]
    );
    assert_eq!(run("(chain (qual \"y\") sink block)", ROW), ["a:y@5=w"]);
}

#[test]
fn condition_chooses_a_branch_and_hides_the_predicate() {
    let t = "(cond (chain (value \"w\") (label \"pred\")) (family \"b\") (limit 1))";
    assert_eq!(run(t, ROW), ["b:x@4=u"]);
    assert_eq!(run(t, &ROW[..3]), ["a:x@3=v3"]);
    // A missing branch outputs nothing.
    assert_eq!(run("(cond (value \"w\") _ pass)", ROW), ["(empty)"]);
    assert_eq!(run("(cond (value \"nope\") pass _)", ROW), ["(empty)"]);
    // The branches see the condition's input, not the predicate's output.
    assert_eq!(
        run("(cond (qual \"y\") (qual \"x\") _)", ROW),
        ["a:x@3=v3", "a:x@2=v2", "a:x@1=v1", "b:x@4=u"]
    );
}

#[test]
fn pass_and_block() {
    assert_eq!(run("pass", ROW), ROW);
    assert_eq!(run("block", ROW), ["(empty)"]);
    assert_eq!(run("pass", &[]), ["(empty)"]);
}

#[test]
fn row_key_regex_matches_the_whole_key() {
    assert_eq!(run_key("(key \"a\")", b"a", ROW).len(), 5);
    assert_eq!(run_key("(key \"a\")", b"ab", ROW), ["(empty)"]);
    assert_eq!(run_key("(key \"b\")", b"ab", ROW), ["(empty)"]);
    assert_eq!(run_key("(key \"a.*\")", b"ab", ROW).len(), 5);
    // `.` does not match a newline; `\C` matches any byte.
    assert_eq!(run_key("(key \"a.\")", b"a\n", ROW), ["(empty)"]);
    assert_eq!(run_key("(key \"a\\C\")", b"a\n", ROW).len(), 5);
    assert_eq!(run_key("(key \"a\\C\")", b"a\xff", ROW).len(), 5);
    // Byte-wise (Latin-1) matching: `.` is one byte, whatever its value.
    assert_eq!(run_key("(key \"a.\")", b"a\xff", ROW).len(), 5);
    assert_eq!(run_key("(key \"a.\")", "aé".as_bytes(), ROW), ["(empty)"]);
    assert_eq!(run_key("(key \"a..\")", "aé".as_bytes(), ROW).len(), 5);
    assert_eq!(run_key("(key \"aé\")", "aé".as_bytes(), ROW).len(), 5);
    // An escaped backslash before C is a literal backslash and a C.
    assert_eq!(run_key("(key \"a\\\\\\\\C\")", b"a\\C", ROW).len(), 5);
    assert_eq!(run_key("(key \"a\\\\\\\\C\")", b"ax", ROW), ["(empty)"]);
    // Alternation stays inside the anchors.
    assert_eq!(run_key("(key \"a|b\")", b"ab", ROW), ["(empty)"]);
}

#[test]
fn regexes_use_re2_syntax() {
    // RE2's \d is ASCII only; the regex crate's would also match Arabic digits.
    assert_eq!(run_key("(key \"\\d+\")", "١٢".as_bytes(), ROW), ["(empty)"]);
    assert_eq!(run_key("(key \"\\d+\")", b"12", ROW).len(), 5);
    assert_eq!(run_key("(key \"[\\d_]+\")", b"1_2", ROW).len(), 5);
    // \Q…\E quotes metacharacters.
    assert_eq!(run_key("(key \"\\Qa.b\\E\")", b"a.b", ROW).len(), 5);
    assert_eq!(run_key("(key \"\\Qa.b\\E\")", b"axb", ROW), ["(empty)"]);
    // `[` and `&&` inside a class are literals in RE2.
    assert_eq!(run_key("(key \"[[a]+\")", b"[a[", ROW).len(), 5);
    assert_eq!(run_key("(key \"[a&&b]+\")", b"a&b", ROW).len(), 5);
    // A pattern that is not UTF-8 matches byte-wise.
    assert_eq!(run_key("(key \"\\xff.\")", b"\xff\x80", ROW).len(), 5);
    assert_eq!(
        run_key("(key \"[\\x80-\\xff]+\")", b"\x80\xfe", ROW).len(),
        5
    );
}

#[test]
fn family_and_qualifier_regexes() {
    assert_eq!(run("(family \"a\")", ROW).len(), 4);
    assert_eq!(run("(family \"\")", ROW), ["(empty)"]);
    assert_eq!(run("(qual \"y|x\")", ROW).len(), 5);
    let binary = ["a:\\xff\\x80@1=v", "a:x\\x0a@1=v", "a:xy@1=v"];
    assert_eq!(run("(qual \"\\xff\\C\")", &binary), ["a:\\xff\\x80@1=v"]);
    assert_eq!(run("(qual \"x.\")", &binary), ["a:xy@1=v"]);
    assert_eq!(
        run("(qual \"x\\C\")", &binary),
        ["a:x\\x0a@1=v", "a:xy@1=v"]
    );
    assert_eq!(
        run("(qual \"(?s)x.\")", &binary),
        ["a:x\\x0a@1=v", "a:xy@1=v"]
    );
}

#[test]
fn column_range_keeps_its_family_only() {
    let input = ["a:a@1=1", "a:b@1=2", "a:c@1=3", "b:b@1=4"];
    assert_eq!(
        run("(cols \"a\" >= \"b\" * )", &input),
        ["a:b@1=2", "a:c@1=3"]
    );
    assert_eq!(run("(cols \"a\" > \"a\" < \"c\")", &input), ["a:b@1=2"]);
    assert_eq!(
        run("(cols \"a\" * <= \"b\")", &input),
        ["a:a@1=1", "a:b@1=2"]
    );
    assert_eq!(run("(cols \"b\" * *)", &input), ["b:b@1=4"]);
    assert_eq!(run("(cols \"a\" > \"b\" < \"b\")", &input), ["(empty)"]);
}

#[test]
fn timestamp_range_is_half_open() {
    assert_eq!(run("(ts 2 3)", ROW), ["a:x@2=v2"]);
    assert_eq!(run("(ts 4 _)", ROW), ["a:y@5=w", "b:x@4=u"]);
    assert_eq!(run("(ts 4 0)", ROW), ["a:y@5=w", "b:x@4=u"]);
    assert_eq!(run("(ts 3 3)", ROW), ["(empty)"]);
}

#[test]
fn value_regex_and_range() {
    assert_eq!(run("(value \"v[12]\")", ROW), ["a:x@2=v2", "a:x@1=v1"]);
    assert_eq!(run("(value \"v\")", ROW), ["(empty)"]);
    assert_eq!(
        run("(vrange >= \"v2\" < \"w\")", ROW),
        ["a:x@3=v3", "a:x@2=v2"]
    );
    assert_eq!(run("(vrange > \"v3\" <= \"w\")", ROW), ["a:y@5=w"]);
    assert_eq!(run("(vrange * *)", ROW).len(), 5);
}

#[test]
fn row_offset_and_limit_count_cells_in_row_order() {
    assert_eq!(run("(offset 3)", ROW), ["a:y@5=w", "b:x@4=u"]);
    assert_eq!(run("(offset 0)", ROW).len(), 5);
    assert_eq!(run("(offset 5)", ROW), ["(empty)"]);
    assert_eq!(run("(offset 99)", ROW), ["(empty)"]);
    assert_eq!(run("(limit 2)", ROW), ["a:x@3=v3", "a:x@2=v2"]);
    assert_eq!(run("(limit 0)", ROW), ["(empty)"]);
    assert_eq!(run("(limit 99)", ROW).len(), 5);
    // Each copy of a duplicated cell counts.
    assert_eq!(
        run("(chain (interleave pass pass) (limit 3))", ROW),
        ["a:x@3=v3", "a:x@3=v3", "a:x@2=v2"]
    );
    assert_eq!(
        run("(chain (interleave pass pass) (offset 9))", ROW),
        ["b:x@4=u"]
    );
}

#[test]
fn column_limit_keeps_the_newest_cells_of_each_column() {
    assert_eq!(
        run("(col-limit 1)", ROW),
        ["a:x@3=v3", "a:y@5=w", "b:x@4=u"]
    );
    assert_eq!(
        run("(col-limit 2)", ROW),
        ["a:x@3=v3", "a:x@2=v2", "a:y@5=w", "b:x@4=u"]
    );
    assert_eq!(run("(col-limit 0)", ROW), ["(empty)"]);
    // Same qualifier in two families: two columns.
    assert_eq!(
        run("(chain (qual \"x\") (col-limit 1))", ROW),
        ["a:x@3=v3", "b:x@4=u"]
    );
    // After a timestamp range the limit counts only the cells in range.
    assert_eq!(run("(chain (ts 0 3) (col-limit 1))", ROW), ["a:x@2=v2"]);
    assert_eq!(run("(chain (col-limit 1) (ts 0 3))", ROW), ["(empty)"]);
    // Copies count separately.
    assert_eq!(
        run("(chain (interleave pass pass) (col-limit 3))", &ROW[..3]),
        ["a:x@3=v3", "a:x@3=v3", "a:x@2=v2"]
    );
}

#[test]
fn strip_value_and_label() {
    assert_eq!(run("(chain (qual \"y\") strip)", ROW), ["a:y@5="]);
    assert_eq!(
        run("(chain (family \"b\") (label \"l-1\"))", ROW),
        ["b:x@4=u [l-1]"]
    );
    // The value filter after strip sees the empty value.
    assert_eq!(run("(chain strip (value \"\"))", ROW).len(), 5);
}

#[test]
fn row_sample_draws_once_per_evaluation() {
    let filter = CompiledFilter::compile(&f("(sample 0.5)")).unwrap();
    let rng = Rng::new(42);
    let kept = (0..2000)
        .filter(|_| !filter.apply(b"r", cells(ROW), &rng).is_empty())
        .count();
    assert!((800..1200).contains(&kept), "kept {kept} of 2000");
    // Whole rows only: never a partial row.
    let rng = Rng::new(1);
    for _ in 0..100 {
        let n = filter.apply(b"r", cells(ROW), &rng).len();
        assert!(n == 0 || n == ROW.len());
    }
    // Same seed, same sample.
    let a: Vec<usize> = (0..50)
        .map(|_| 0)
        .scan(Rng::new(5), |r, _| {
            Some(filter.apply(b"r", cells(ROW), r).len())
        })
        .collect();
    let b: Vec<usize> = (0..50)
        .map(|_| 0)
        .scan(Rng::new(5), |r, _| {
            Some(filter.apply(b"r", cells(ROW), r).len())
        })
        .collect();
    assert_eq!(a, b);
}

#[test]
fn compile_rejects_invalid_filters() {
    let mut deep = RowFilter::PassAll;
    for _ in 0..crate::limits::MAX_FILTER_DEPTH {
        deep = RowFilter::Chain(vec![deep]);
    }
    assert!(invalid(deep.clone()).contains("20"));
    let RowFilter::Chain(inner) = deep else {
        unreachable!()
    };
    assert!(
        CompiledFilter::compile(&inner[0]).is_ok(),
        "depth 20 is allowed"
    );

    assert!(invalid(f("(label \"\")")).contains("empty"));
    assert!(invalid(f("(label \"abcdefghijklmnop\")")).contains("15"));
    assert!(CompiledFilter::compile(&f("(label \"abcdefghijklmno\")")).is_ok());
    assert!(invalid(f("(label \"Upper\")")).contains("[a-z0-9-]"));
    assert!(invalid(f("(key \"(\")")).contains("row_key_regex_filter"));
    assert!(invalid(f("(key \"a)|(b\")")).contains("row_key_regex_filter"));
    assert!(invalid(f("(value \"x{1000}{1000}\")")).contains("limit"));
    assert!(invalid(f("(family \"a:b\")")).contains("':'"));
    for p in ["0", "1", "-0.5", "1.5", "NaN"] {
        assert!(invalid(f(&format!("(sample {p})"))).contains("row_sample_filter"));
    }
    assert!(invalid(f("(cols \"\" * *)")).contains("family_name"));
    assert!(invalid(f("(cols \"a\" >= \"b\" <= \"a\")")).contains("column_range_filter"));
    assert!(invalid(f("(vrange > \"b\" < \"a\")")).contains("value_range_filter"));
    assert!(invalid(f("(ts 5 4)")).contains("timestamp_range_filter"));
    assert!(invalid(f("(ts -1 _)")).contains("timestamp_range_filter"));
    assert!(invalid(f("(ts 0 -5)")).contains("timestamp_range_filter"));
    assert!(invalid(f("(cond sink pass _)")).contains("sink"));
    assert!(invalid(f("(cond pass (chain (qual \"x\") sink) _)")).contains("sink"));
    assert!(invalid(f("(chain (label \"a\") (label \"b\"))")).contains("chain"));
    assert!(invalid(f("(chain (label \"a\") (interleave pass (label \"b\")))")).contains("chain"));
    assert!(invalid(f("(chain (cond pass (label \"a\") _) (label \"b\"))")).contains("chain"));
    // A label in a predicate never reaches the output, so it does not count.
    assert!(
        CompiledFilter::compile(&f("(chain (cond (label \"a\") pass _) (label \"b\"))")).is_ok()
    );
    // One labelling sub-filter per chain; interleaves may hold several.
    assert!(
        CompiledFilter::compile(&f(
            "(chain (interleave (label \"a\") (label \"b\")) (qual \"x\"))"
        ))
        .is_ok()
    );
    assert!(CompiledFilter::compile(&f("(interleave sink (chain (family \"a\") sink))")).is_ok());
}

#[test]
fn labels_never_stack_on_valid_filters() {
    let filter = "(interleave (chain (label \"a\") (qual \"x\")) (chain (qual \"y\") (cond pass (label \"b\") _)))";
    for line in run(filter, ROW) {
        assert!(line.matches('[').count() <= 1, "{line}");
    }
}

#[test]
fn family_patterns_translate_re2_syntax_too() {
    assert_eq!(run("(family \"\\w\")", ROW).len(), 5);
    assert_eq!(run("(family \"\\bb\\b\")", ROW), ["b:x@4=u"]);
    assert_eq!(run("(family \"\\C\")", ROW).len(), 5);
    assert_eq!(run("(family \"\\Qa\\E\")", ROW).len(), 4);
}

#[test]
fn compiled_filter_is_send_and_sync() {
    fn shareable<T: Send + Sync + 'static>(_: &T) {}
    shareable(
        &CompiledFilter::compile(&f("(chain (key \"r.*\") (qual \"x\") (value \"v\"))")).unwrap(),
    );
}

#[test]
fn interleaves_of_per_cell_tests_match_the_general_evaluation() {
    // `(offset 0)` changes nothing but is not a per-cell test, so the same tree with it
    // takes the path that copies the input for every child.
    let input = [
        "a:x@9=v1", "a:x@8=w", "a:y@7=v2", "b:x@6=v3", "b:z@5=q", "c:x@4=", "c:y@3=v4",
    ];
    for tree in [
        "(interleave (family \"a\") (family \"b\"))",
        "(interleave (family \"[ab]\") (qual \"x\") (ts 5 8))",
        "(interleave (chain (family \"a|c\") (ts 3 9)) (family \"b\"))",
        "(interleave (interleave pass pass) (value \"v.*\") block)",
        "(interleave (chain (interleave (qual \"x\") (qual \"x|y\")) (family \"a\")) (key \"r.*\"))",
        "(interleave (key \"nope\") (vrange >= \"v2\" < \"v4\") (cols \"a\" >= \"y\" *))",
        "(chain (interleave (family \"c\") (chain)) (qual \"y\"))",
    ] {
        let general = tree.replacen("(interleave ", "(interleave (chain (offset 0) block) ", 1);
        assert_eq!(
            run_key(tree, b"row", &input),
            run_key(&general, b"row", &input),
            "{tree}"
        );
    }
}

#[test]
fn short_patterns_compile_once_and_are_shared() {
    use super::pattern::{compile_bytes, compile_text};
    use std::sync::Arc;
    let a = compile_text("family_name_regex_filter", "[mx]").unwrap();
    let b = compile_text("family_name_regex_filter", "[mx]").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert!(b.is_match("m") && !b.is_match("b"));
    let a = compile_bytes("value_regex_filter", b"v.*").unwrap();
    let b = compile_bytes("value_regex_filter", b"v.*").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // Counted repetition can make a short pattern's program large: never kept.
    let a = compile_bytes("value_regex_filter", b"a{3}").unwrap();
    let b = compile_bytes("value_regex_filter", b"a{3}").unwrap();
    assert!(!Arc::ptr_eq(&a, &b));
    // A bad pattern is refused every time, not remembered as compiled.
    for _ in 0..2 {
        assert!(compile_bytes("value_regex_filter", b"(").is_err());
    }
}

#[test]
fn value_bitmask_requires_equal_length_and_all_mask_bits() {
    let f = CompiledFilter::compile(&RowFilter::ValueBitmask(vec![0b1010, 0x00])).unwrap();
    let rng = crate::clock::Rng::new(1);
    let mk = |v: &[u8]| Cell {
        family: "f".into(),
        qualifier: b"q".as_slice().into(),
        timestamp_us: 0,
        value: v.to_vec(),
        labels: vec![],
    };
    let out = f.apply(
        b"r",
        vec![
            mk(&[0b1110, 0xFF]),
            mk(&[0b0110, 0x00]),
            mk(&[0b1010]),
            mk(&[0b1011, 0, 0]),
        ],
        &rng,
    );
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].value, vec![0b1110, 0xFF]);
    assert!(CompiledFilter::compile(&RowFilter::ValueBitmask(vec![])).is_err());
}
