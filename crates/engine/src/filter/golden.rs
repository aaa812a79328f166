//! Golden-script tests: `testdata/filters/*.txt`.
//!
//! A script is a sequence of blocks separated by blank lines. Each block is
//! commands, a `----` line, and the expected output. Commands:
//! - `row KEY` then cells indented by two spaces (`  family:qualifier@ts=value`, see
//!   [`super::testkit`]): the row every later command runs on, until the next `row`.
//! - `families a,b,c`: the table's families in row order (default: the row's
//!   families in order of appearance).
//! - `seed N`: the [`Rng`] seed for later filters (default 0; fresh per command).
//! - `filter SEXPR`: the filter's output cells, `(empty)`, or `error: …`.
//! - `plan SEXPR`: the pushdown plan, then `unsafe: …` if running the filter on the
//!   plan's cells differs from running it on the whole row (it never should).
//! - `# …`: a comment.
//!
//! Run with `UPDATE_GOLDEN=1` to rewrite the expected output in place; review the
//! diff before committing it.

#![allow(clippy::unwrap_used, clippy::panic, reason = "tests")]

use std::path::Path;

use super::testkit::{parse_cell, parse_filter, show_cells, show_plan};
use super::{CompiledFilter, select};
use crate::cell::Cell;
use crate::clock::Rng;

const SEPARATOR: &str = "----";

/// State carried from block to block within one script.
#[derive(Default)]
struct Script {
    key: Vec<u8>,
    cells: Vec<Cell>,
    families: Option<Vec<String>>,
    seed: u64,
}

impl Script {
    fn families(&self) -> Vec<String> {
        if let Some(f) = &self.families {
            return f.clone();
        }
        let mut out: Vec<String> = Vec::new();
        for c in &self.cells {
            if !out.iter().any(|f| **f == *c.family) {
                out.push(c.family.to_string());
            }
        }
        out
    }

    /// Runs one block's commands; returns the output lines.
    fn run_block(&mut self, commands: &[&str]) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut lines = commands.iter().peekable();
        while let Some(line) = lines.next() {
            let (cmd, arg) = line.split_once(' ').unwrap_or((line, ""));
            match cmd {
                "" | "#" => {}
                _ if line.starts_with('#') => {}
                "row" => {
                    self.key = super::testkit::unescape(arg, false)?;
                    self.cells.clear();
                    while let Some(cell_line) = lines.next_if(|l| l.starts_with("  ")) {
                        self.cells.push(parse_cell(cell_line.trim())?);
                    }
                }
                "families" => {
                    self.families = Some(arg.split(',').map(|s| s.trim().to_owned()).collect())
                }
                "seed" => self.seed = arg.parse().map_err(|e| format!("bad seed {arg:?}: {e}"))?,
                "filter" => match CompiledFilter::compile(&parse_filter(arg)?) {
                    Ok(c) => out.extend(show_cells(&c.apply(
                        &self.key,
                        self.cells.clone(),
                        &Rng::new(self.seed),
                    ))),
                    Err(e) => out.push(format!("error: {e}")),
                },
                "plan" => match CompiledFilter::compile(&parse_filter(arg)?) {
                    Ok(c) => {
                        let families = self.families();
                        let names: Vec<&str> = families.iter().map(String::as_str).collect();
                        let plan = c.plan(&names);
                        out.push(show_plan(&plan));
                        let full = c.apply(&self.key, self.cells.clone(), &Rng::new(self.seed));
                        let pushed = c.apply(
                            &self.key,
                            select(&plan, self.cells.clone()),
                            &Rng::new(self.seed),
                        );
                        if full != pushed {
                            out.push(format!(
                                "unsafe: {:?} != {:?}",
                                show_cells(&pushed),
                                show_cells(&full)
                            ));
                        }
                    }
                    Err(e) => out.push(format!("error: {e}")),
                },
                other => return Err(format!("unknown command {other:?} in {line:?}")),
            }
        }
        Ok(out)
    }
}

/// Runs one script; returns the script text with actual outputs.
fn run_script(path: &Path, text: &str) -> String {
    let mut script = Script::default();
    let mut result = String::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim().is_empty() {
            i += 1;
            continue;
        }
        let start = i;
        while i < lines.len() && lines[i] != SEPARATOR && !lines[i].trim().is_empty() {
            i += 1;
        }
        let commands = &lines[start..i];
        let output = script
            .run_block(commands)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), start + 1));
        // Skip the old expected output.
        if lines.get(i) == Some(&SEPARATOR) {
            i += 1;
            while i < lines.len() && !lines[i].trim().is_empty() {
                i += 1;
            }
        }
        if !result.is_empty() {
            result.push('\n');
        }
        for line in commands {
            result.push_str(line);
            result.push('\n');
        }
        if commands
            .iter()
            .any(|l| l.starts_with("filter ") || l.starts_with("plan "))
        {
            result.push_str(SEPARATOR);
            result.push('\n');
            for line in output {
                result.push_str(&line);
                result.push('\n');
            }
        }
    }
    result
}

#[test]
fn golden_scripts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/filters");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no scripts in {}", dir.display());
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let actual = run_script(&path, &text);
        if actual == text {
            continue;
        }
        if update {
            std::fs::write(&path, &actual).unwrap();
        } else {
            failures.push(format!(
                "{}:\n{}",
                path.display(),
                first_difference(&text, &actual)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatches (rerun with UPDATE_GOLDEN=1):\n{}",
        failures.join("\n")
    );
}

/// The first differing line, with its number: enough to find the block.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let n = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    format!(
        "line {}: expected {:?}, got {:?}",
        n + 1,
        e.get(n).copied().unwrap_or("<end>"),
        a.get(n).copied().unwrap_or("<end>")
    )
}
