//! Timestream's metadata statements, answered from the time-series catalog in the
//! shapes Timestream gives them (and Grafana's Timestream datasource and the Timestream
//! JDBC driver read by position):
//!
//! | statement | columns |
//! |---|---|
//! | `SHOW DATABASES [LIKE 'p']` | `Database` |
//! | `SHOW TABLES FROM db [LIKE 'p']` | `Table` |
//! | `SHOW MEASURES FROM db.t [LIKE 'p']` | `measure_name`, `data_type`, `dimensions` (array of rows `dimension_name`, `data_type`) |
//! | `DESCRIBE db.t` | `Column`, `Type`, `Timestream attribute type` |
//!
//! Names are bare or double-quoted; `LIKE` takes SQL's `%` and `_`, case-sensitively.
//! Rows come sorted by name; DESCRIBE lists the columns in `SELECT *` order.
//! `data_type` and `Type` are lowercase (`double`, `varchar`, `multi`), as Timestream
//! prints them. A measure's dimensions are those its series carry, found from the
//! newest point of each series (one walk, a seek per series, on a blocking thread).

use crate::catalog::{TableAccess, TableRef};
use std::collections::BTreeMap;
use std::sync::Arc;

use almanac_timeseries::model::MeasureType;
use almanac_timeseries::query::{self, Selection};
use almanac_timeseries::{SharedStore, TimeSeries};
use datafusion::arrow::array::{ArrayRef, ListBuilder, StringBuilder, StructBuilder};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::series::{Column, SeriesTable};
use crate::stats::ScanCounters;

/// Databases or tables listed at once; more is refused rather than cut short.
const MAX_LISTED: usize = 100_000;

/// A metadata statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Statement {
    /// `SHOW DATABASES [LIKE 'p']`.
    Databases { like: Option<String> },
    /// `SHOW TABLES FROM db [LIKE 'p']`.
    Tables {
        database: String,
        like: Option<String>,
    },
    /// `SHOW MEASURES FROM db.t [LIKE 'p']`.
    Measures {
        database: String,
        table: String,
        like: Option<String>,
    },
    /// `DESCRIBE db.t`.
    Describe { database: String, table: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Text(String),
    Dot,
    Semicolon,
}

fn syntax(message: impl Into<String>) -> Error {
    Error::Syntax {
        message: message.into(),
        line: 0,
        column: 0,
    }
}

/// The tokens of `sql`, or `None` when it has something a metadata statement cannot.
fn tokens(sql: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '-' if chars.peek() == Some(&'-') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '.' => out.push(Token::Dot),
            ';' => out.push(Token::Semicolon),
            '"' | '\'' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        q if q == c && chars.peek() == Some(&c) => {
                            chars.next();
                            text.push(c);
                        }
                        q if q == c => break,
                        other => text.push(other),
                    }
                }
                out.push(if c == '"' {
                    Token::Quoted(text)
                } else {
                    Token::Text(text)
                });
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut word = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_alphanumeric() || n == '_' || n == '-' {
                        word.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Word(word));
            }
            _ => return None,
        }
    }
    while out.last() == Some(&Token::Semicolon) {
        out.pop();
    }
    Some(out)
}

struct Parser {
    tokens: std::vec::IntoIter<Token>,
    statement: &'static str,
}

impl Parser {
    fn keyword(&mut self, k: &str) -> Result<()> {
        match self.tokens.next() {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(k) => Ok(()),
            other => Err(syntax(format!(
                "{}: expected {k}, found {}",
                self.statement,
                found(other.as_ref())
            ))),
        }
    }

    fn name(&mut self, what: &str) -> Result<String> {
        match self.tokens.next() {
            Some(Token::Word(w) | Token::Quoted(w)) => Ok(w),
            other => Err(syntax(format!(
                "{}: expected a {what} name, found {}",
                self.statement,
                found(other.as_ref())
            ))),
        }
    }

    /// `db.t`.
    fn table(&mut self) -> Result<(String, String)> {
        let database = self.name("database")?;
        match self.tokens.next() {
            Some(Token::Dot) => Ok((database, self.name("table")?)),
            other => Err(syntax(format!(
                "{}: expected \"database\".\"table\", found {}",
                self.statement,
                found(other.as_ref())
            ))),
        }
    }

    /// `[LIKE 'pattern']`, then the end.
    fn like_then_end(&mut self) -> Result<Option<String>> {
        let like = match self.tokens.next() {
            None => return Ok(None),
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("like") => match self.tokens.next() {
                Some(Token::Text(p)) => Some(p),
                other => {
                    return Err(syntax(format!(
                        "{}: LIKE takes a quoted pattern, found {}",
                        self.statement,
                        found(other.as_ref())
                    )));
                }
            },
            other => {
                return Err(syntax(format!(
                    "{}: expected LIKE or the end, found {}",
                    self.statement,
                    found(other.as_ref())
                )));
            }
        };
        self.end()?;
        Ok(like)
    }

    fn end(&mut self) -> Result<()> {
        match self.tokens.next() {
            None => Ok(()),
            other => Err(syntax(format!(
                "{}: unexpected {} at the end",
                self.statement,
                found(other.as_ref())
            ))),
        }
    }
}

fn found(t: Option<&Token>) -> String {
    match t {
        None => "the end".into(),
        Some(Token::Word(w)) => w.clone(),
        Some(Token::Quoted(w)) => format!("\"{w}\""),
        Some(Token::Text(w)) => format!("'{w}'"),
        Some(Token::Dot) => "'.'".into(),
        Some(Token::Semicolon) => "';'".into(),
    }
}

/// The metadata statement `sql` is, `None` when it is not one (other SQL), or the
/// syntax error of one that is malformed.
pub(crate) fn parse(sql: &str) -> Result<Option<Statement>> {
    let Some(tokens) = tokens(sql) else {
        return Ok(None);
    };
    let (first, second) = match tokens.as_slice() {
        [Token::Word(a), Token::Word(b), ..] => (a.to_ascii_uppercase(), b.to_ascii_uppercase()),
        [Token::Word(a), Token::Quoted(_), ..] => (a.to_ascii_uppercase(), String::new()),
        _ => return Ok(None),
    };
    let statement = match (first.as_str(), second.as_str()) {
        ("SHOW", "DATABASES") => "SHOW DATABASES",
        ("SHOW", "TABLES") => "SHOW TABLES",
        ("SHOW", "MEASURES") => "SHOW MEASURES",
        ("DESCRIBE" | "DESC", _) => "DESCRIBE",
        _ => return Ok(None),
    };
    let mut p = Parser {
        tokens: tokens.into_iter(),
        statement,
    };
    p.tokens.next();
    if statement != "DESCRIBE" {
        p.tokens.next();
    }
    Ok(Some(match statement {
        "SHOW DATABASES" => Statement::Databases {
            like: p.like_then_end()?,
        },
        "SHOW TABLES" => {
            match p.tokens.as_slice().first() {
                Some(Token::Word(w))
                    if w.eq_ignore_ascii_case("from") || w.eq_ignore_ascii_case("in") =>
                {
                    p.tokens.next();
                }
                _ => {
                    return Err(Error::Invalid(
                        "SHOW TABLES needs the database: SHOW TABLES FROM \"db\" [LIKE 'pattern']"
                            .into(),
                    ));
                }
            }
            let database = p.name("database")?;
            Statement::Tables {
                database,
                like: p.like_then_end()?,
            }
        }
        "SHOW MEASURES" => {
            p.keyword("FROM")?;
            let (database, table) = p.table()?;
            Statement::Measures {
                database,
                table,
                like: p.like_then_end()?,
            }
        }
        _ => {
            let (database, table) = p.table()?;
            p.end()?;
            Statement::Describe { database, table }
        }
    }))
}

/// SQL's LIKE: `%` any run of characters, `_` one character.
fn like(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Greedy match with backtracking to the last `%` (linear for one `%`, at worst
    // pattern × text).
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('%') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some('_') => {
                pi += 1;
                ti += 1;
            }
            Some(c) if *c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '%')
}

fn matches(pattern: Option<&str>, name: &str) -> bool {
    pattern.is_none_or(|p| like(p, name))
}

/// A batch of VARCHAR columns named `columns`, one row per item of `rows`.
fn text_batch<const N: usize>(columns: [&str; N], rows: Vec<[String; N]>) -> Result<RecordBatch> {
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| Field::new(*c, DataType::Utf8, false))
            .collect::<Vec<_>>(),
    ));
    let arrays: Vec<ArrayRef> = (0..N)
        .map(|c| {
            let mut b = StringBuilder::new();
            for r in &rows {
                b.append_value(&r[c]);
            }
            Arc::new(b.finish()) as ArrayRef
        })
        .collect();
    Ok(RecordBatch::try_new(schema, arrays)?)
}

fn type_name(t: MeasureType) -> String {
    t.as_str().to_ascii_lowercase()
}

fn dimension_fields() -> Fields {
    Fields::from(vec![
        Field::new("dimension_name", DataType::Utf8, false),
        Field::new("data_type", DataType::Utf8, false),
    ])
}

/// The answer to `statement`.
pub(crate) fn answer(
    ts: &Arc<TimeSeries<SharedStore>>,
    statement: &Statement,
    access: Option<&Arc<dyn TableAccess>>,
) -> Result<RecordBatch> {
    // What the caller may see: a table it may read, and a database that is one of
    // those tables' or that it may read whole.
    let readable = |database: &str, table: &str| {
        access.is_none_or(|a| a.check(TableRef::TimeSeries { database, table }).is_ok())
    };
    let visible_database = |database: &str| {
        access.is_none_or(|a| {
            a.check(TableRef::Database { database }).is_ok()
                || ts
                    .list_tables(Some(database), None, MAX_LISTED)
                    .is_ok_and(|ts| ts.iter().any(|t| readable(database, &t.name)))
        })
    };
    match statement {
        Statement::Measures {
            database, table, ..
        }
        | Statement::Describe { database, table } => {
            if let Some(a) = access {
                a.check(TableRef::TimeSeries { database, table })
                    .map_err(Error::PermissionDenied)?;
            }
        }
        Statement::Tables { database, .. } if !visible_database(database) => {
            if let Some(a) = access {
                a.check(TableRef::Database { database })
                    .map_err(Error::PermissionDenied)?;
            }
        }
        _ => {}
    }
    match statement {
        Statement::Databases { like } => {
            let dbs = ts.list_databases(None, MAX_LISTED + 1)?;
            if dbs.len() > MAX_LISTED {
                return Err(Error::ResourcesExhausted(format!(
                    "SHOW DATABASES lists at most {MAX_LISTED} databases"
                )));
            }
            let mut out: Vec<String> = dbs
                .into_iter()
                .map(|d| d.name)
                .filter(|n| matches(like.as_deref(), n) && visible_database(n))
                .collect();
            out.sort();
            text_batch(["Database"], out.into_iter().map(|n| [n]).collect())
        }
        Statement::Tables { database, like } => {
            if ts.describe_database(database).is_err() {
                return Err(Error::Invalid(format!(
                    "Database {database:?} does not exist."
                )));
            }
            let tables = ts.list_tables(Some(database), None, MAX_LISTED + 1)?;
            if tables.len() > MAX_LISTED {
                return Err(Error::ResourcesExhausted(format!(
                    "SHOW TABLES lists at most {MAX_LISTED} tables"
                )));
            }
            let mut out: Vec<String> = tables
                .iter()
                .map(|t| t.name.clone())
                .filter(|n| matches(like.as_deref(), n) && readable(database, n))
                .collect();
            out.sort();
            text_batch(["Table"], out.into_iter().map(|n| [n]).collect())
        }
        Statement::Measures {
            database,
            table,
            like,
        } => measures(ts, database, table, like.as_deref()),
        Statement::Describe { database, table } => describe(ts, database, table),
    }
}

/// The table, or which of database and table is missing.
fn table_meta(
    ts: &TimeSeries<SharedStore>,
    database: &str,
    table: &str,
) -> Result<Arc<almanac_timeseries::TableMeta>> {
    if ts.describe_database(database).is_err() {
        return Err(Error::Invalid(format!(
            "Database {database:?} does not exist."
        )));
    }
    ts.describe_table(database, table).map_err(|e| match e {
        almanac_timeseries::Error::NotFound { .. } => {
            Error::TableNotFound(format!("{database}.{table}"))
        }
        other => Error::from(other),
    })
}

fn measures(
    ts: &Arc<TimeSeries<SharedStore>>,
    database: &str,
    table: &str,
    like: Option<&str>,
) -> Result<RecordBatch> {
    let meta = table_meta(ts, database, table)?;
    // Each measure's dimension names, as a set of positions in the table's order,
    // from one walk over the newest point of every series.
    let mut seen: BTreeMap<String, Vec<bool>> = meta
        .schema
        .measures
        .keys()
        .filter(|n| matches(like, n))
        .map(|n| (n.clone(), vec![false; meta.schema.dimensions.len()]))
        .collect();
    let (points, _) = query::latest(ts.store().as_ref(), &meta, &Selection::default())?;
    for p in &points {
        let Some(dims) = seen.get_mut(p.measure_name.as_ref()) else {
            continue;
        };
        for (d, _) in &p.dimensions {
            if let Some(i) = meta.schema.dimension_index(d) {
                dims[i] = true;
            }
        }
    }
    let schema = Arc::new(Schema::new(vec![
        Field::new("measure_name", DataType::Utf8, false),
        Field::new("data_type", DataType::Utf8, false),
        Field::new(
            "dimensions",
            DataType::List(Arc::new(Field::new_list_field(
                DataType::Struct(dimension_fields()),
                true,
            ))),
            false,
        ),
    ]));
    let mut names_b = StringBuilder::new();
    let mut types_b = StringBuilder::new();
    let mut dims_b = ListBuilder::new(StructBuilder::from_fields(dimension_fields(), 0));
    for (name, dims) in &seen {
        names_b.append_value(name);
        types_b.append_value(type_name(meta.schema.measures[name]));
        let rows = dims_b.values();
        for (i, _) in dims.iter().enumerate().filter(|(_, on)| **on) {
            for (field, text) in [(0, meta.schema.dimensions[i].as_str()), (1, "varchar")] {
                if let Some(b) = rows.field_builder::<StringBuilder>(field) {
                    b.append_value(text);
                }
            }
            rows.append(true);
        }
        dims_b.append(true);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(names_b.finish()),
        Arc::new(types_b.finish()),
        Arc::new(dims_b.finish()),
    ];
    Ok(RecordBatch::try_new(schema, columns)?)
}

fn describe(ts: &Arc<TimeSeries<SharedStore>>, database: &str, table: &str) -> Result<RecordBatch> {
    let meta = table_meta(ts, database, table)?;
    let table = SeriesTable::new(ts.clone(), meta, Arc::new(ScanCounters::default()));
    let rows = table
        .columns()
        .iter()
        .map(|c| {
            let (kind, t) = match c {
                Column::Dimension(_) => ("DIMENSION", "varchar".to_string()),
                Column::MeasureName => ("MEASURE_NAME", "varchar".to_string()),
                Column::Time => ("TIMESTAMP", "timestamp".to_string()),
                Column::Single(t) => ("MEASURE_VALUE", type_name(*t)),
                Column::Attribute(_, t) => ("MULTI", type_name(*t)),
            };
            [c.name(), t, kind.to_string()]
        })
        .collect();
    text_batch(["Column", "Type", "Timestream attribute type"], rows)
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    #[test]
    fn like_matches_sql_wildcards() {
        assert!(like("cpu%", "cpu_user"));
        assert!(like("%user", "cpu_user"));
        assert!(like("c_u", "cpu"));
        assert!(like("%", ""));
        assert!(like("a%b%c", "axxbyyc"));
        assert!(!like("a%b%c", "axxbyy"));
        assert!(!like("cpu", "CPU"));
        assert!(!like("c_u", "cpuu"));
    }

    #[test]
    fn statements_parse_as_timestream_spells_them() {
        let t = |sql: &str| parse(sql).unwrap();
        assert_eq!(
            t("SHOW DATABASES"),
            Some(Statement::Databases { like: None })
        );
        assert_eq!(
            t("show databases like 'graf%';"),
            Some(Statement::Databases {
                like: Some("graf%".into())
            })
        );
        assert_eq!(
            t("SHOW TABLES FROM \"db\""),
            Some(Statement::Tables {
                database: "db".into(),
                like: None
            })
        );
        assert_eq!(
            t("SHOW MEASURES FROM \"db\".\"some_table\" LIKE 'cpu%'"),
            Some(Statement::Measures {
                database: "db".into(),
                table: "some_table".into(),
                like: Some("cpu%".into())
            })
        );
        assert_eq!(
            t("DESCRIBE my-db.\"the \"\"t\"\"\""),
            Some(Statement::Describe {
                database: "my-db".into(),
                table: "the \"t\"".into()
            })
        );
        assert_eq!(t("SELECT 1"), None);
        assert_eq!(t("SHOW COLUMNS FROM t"), None);
    }

    #[test]
    fn malformed_statements_say_what_was_expected() {
        let e = |sql: &str| parse(sql).unwrap_err().to_string();
        assert!(e("SHOW MEASURES FROM db").contains("\"database\".\"table\""));
        assert!(e("SHOW DATABASES LIKE cpu").contains("quoted pattern"));
        assert!(e("DESCRIBE db.t extra").contains("unexpected extra"));
        assert!(e("SHOW TABLES").contains("SHOW TABLES FROM"));
    }
}
