//! `almanac sql`: SQL against a running server's Timestream Query API (the endpoint of
//! `almanac serve --timestream-addr`, default `http://127.0.0.1:8087`), the same
//! `Query` calls boto3's `timestream-query` client makes.
//!
//! A statement, step by step:
//! 1. `-e 'QUERY'` is one statement; without it statements come from stdin, each
//!    ended by `;` outside quotes and comments ([`split`]); a prompt is shown only
//!    when stdin is a terminal.
//! 2. `Query` with the statement as `QueryString`; `--instance` adds the Almanac
//!    header `x-almanac-instance`, so bare table names are that Bigtable instance's
//!    tables (`"db"."table"` names are time-series tables either way).
//! 3. Pages are followed by `NextToken` to the end and printed ([`output`]): an
//!    aligned table ending in `(N rows)`, CSV with a header row (RFC 4180 quoting),
//!    or JSON lines (one object per row, values typed by `ColumnInfo`).
//! 4. A failed statement prints the service's exception and message on stderr; with
//!    `-e` the exit code is 1, from stdin the rest still run and the exit code is 1 if
//!    any failed.

mod output;
mod split;

use std::io::{BufRead, IsTerminal, Write};

use anyhow::Context;
use serde_json::{Value as Json, json};

use crate::ts::Api;

/// The header naming the Bigtable instance of bare table names (the server's
/// `almanac_server::timestream::INSTANCE_HEADER`).
const INSTANCE_HEADER: &str = "x-almanac-instance";
/// Prompt of a new statement (stderr, terminals only).
const PROMPT: &str = "almanac> ";
/// Prompt of a statement's next line.
const CONTINUATION_PROMPT: &str = "    ...> ";

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns with a header and a row count.
    Table,
    /// A header row, then one line per row (RFC 4180 quoting).
    Csv,
    /// One JSON object per row (JSON lines).
    Json,
}

/// Flags of `almanac sql`.
#[derive(Debug, clap::Args)]
pub struct SqlArgs {
    /// The Timestream endpoint of `almanac serve` (https:// trusts $AWS_CA_BUNDLE;
    /// requests are signed with $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY when set).
    #[arg(long, default_value = "http://127.0.0.1:8087")]
    endpoint: String,
    /// Run this one statement and exit (otherwise statements ending in ';' are read
    /// from stdin).
    #[arg(short = 'e', long = "execute", value_name = "QUERY")]
    execute: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Bigtable instance (`projects/P/instances/I`) whose tables bare names refer to.
    #[arg(long)]
    instance: Option<String>,
    /// Rows per `Query` page (MaxRows, 1 to 1000); default: pages of up to ~1 MB.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=1000))]
    max_rows: Option<u16>,
}

/// Runs `almanac sql`; `Ok(false)` when a statement failed (its error already printed).
pub fn run(args: SqlArgs) -> anyhow::Result<bool> {
    let mut api = Api::new(&args.endpoint)?;
    if let Some(instance) = &args.instance {
        api = api.with_header(INSTANCE_HEADER, instance);
    }
    if let Some(sql) = &args.execute {
        return statement(&mut api, sql, &args);
    }
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal();
    if interactive {
        eprintln!(
            "almanac sql at {}: end statements with ';', \\q quits.",
            args.endpoint
        );
    }
    let mut splitter = split::Splitter::default();
    let mut all_ok = true;
    let mut lines = stdin.lock();
    let mut line = String::new();
    loop {
        if interactive {
            eprint!(
                "{}",
                if splitter.is_empty() {
                    PROMPT
                } else {
                    CONTINUATION_PROMPT
                }
            );
            std::io::stderr().flush().ok();
        }
        line.clear();
        if lines.read_line(&mut line).context("reading stdin")? == 0 {
            break;
        }
        if splitter.is_empty() && matches!(line.trim(), "\\q" | "quit" | "exit") {
            return Ok(all_ok);
        }
        for sql in splitter.push(&line) {
            all_ok &= statement(&mut api, &sql, &args)?;
        }
    }
    if let Some(sql) = splitter.finish() {
        all_ok &= statement(&mut api, &sql, &args)?;
    }
    Ok(all_ok)
}

/// Runs one statement and prints its result; `Ok(false)` when the service refused it
/// (the error is printed on stderr). Transport failures are errors.
fn statement(api: &mut Api, sql: &str, args: &SqlArgs) -> anyhow::Result<bool> {
    let mut body = json!({ "QueryString": sql });
    if let Some(n) = args.max_rows {
        body["MaxRows"] = json!(n);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printer: Option<output::Printer> = None;
    loop {
        let page = match api.call("Query", &body)? {
            Ok(page) => page,
            Err(e) => {
                out.flush().ok();
                eprintln!("almanac: {e}");
                return Ok(false);
            }
        };
        let p =
            printer.get_or_insert_with(|| output::Printer::new(args.format, &page["ColumnInfo"]));
        p.rows(
            &mut out,
            page["Rows"].as_array().map_or(&[][..], Vec::as_slice),
        )?;
        out.flush()?;
        match page["NextToken"].as_str() {
            Some(token) => body["NextToken"] = Json::String(token.to_string()),
            None => break,
        }
    }
    if let Some(p) = printer {
        p.finish(&mut out)?;
    }
    out.flush()?;
    Ok(true)
}
