//! Printing `Query` results. Values arrive as `Datum`s with a `ColumnInfo` per column:
//! - table: aligned columns (numbers right-aligned), `NULL` for nulls, arrays as
//!   `[a, b]`, rows as `{name=value, …}`, newlines shown as `\n`; then `(N rows)`;
//! - csv: a header row, then one record per row; RFC 4180 quoting; nulls are empty;
//! - json: one object per row in column order; `BIGINT`/`INTEGER`/`DOUBLE` values are
//!   JSON numbers (non-finite doubles stay strings), `BOOLEAN` true/false, nulls
//!   `null`, arrays arrays, rows objects; everything else strings.
//!
//! Table output waits for the last page (column widths); the others print each page
//! as it comes.

use std::io::Write;

use serde_json::{Map, Value as Json};

use super::Format;

/// A column's type, from its `ColumnInfo.Type`.
#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Scalar(String),
    Array(Box<Kind>),
    Row(Vec<(String, Kind)>),
    TimeSeries(Box<Kind>),
}

impl Kind {
    fn of(t: &Json) -> Self {
        if let Some(s) = t["ScalarType"].as_str() {
            Self::Scalar(s.to_string())
        } else if t["ArrayColumnInfo"].is_object() {
            Self::Array(Box::new(Self::of(&t["ArrayColumnInfo"]["Type"])))
        } else if let Some(fields) = t["RowColumnInfo"].as_array() {
            Self::Row(
                fields
                    .iter()
                    .map(|f| {
                        (
                            f["Name"].as_str().unwrap_or("").to_string(),
                            Self::of(&f["Type"]),
                        )
                    })
                    .collect(),
            )
        } else if t["TimeSeriesMeasureValueColumnInfo"].is_object() {
            Self::TimeSeries(Box::new(Self::of(
                &t["TimeSeriesMeasureValueColumnInfo"]["Type"],
            )))
        } else {
            Self::Scalar("UNKNOWN".into())
        }
    }

    fn is_number(&self) -> bool {
        matches!(self, Self::Scalar(s) if matches!(s.as_str(), "BIGINT" | "INTEGER" | "DOUBLE"))
    }
}

/// Prints the pages of one statement.
pub struct Printer {
    format: Format,
    names: Vec<String>,
    kinds: Vec<Kind>,
    /// Table format: the cells so far.
    cells: Vec<Vec<String>>,
    header_done: bool,
}

impl Printer {
    /// A printer for results with `columns` (a `ColumnInfo` list).
    pub fn new(format: Format, columns: &Json) -> Self {
        let columns = columns.as_array().map_or(&[][..], Vec::as_slice);
        Self {
            format,
            names: columns
                .iter()
                .map(|c| c["Name"].as_str().unwrap_or("").to_string())
                .collect(),
            kinds: columns.iter().map(|c| Kind::of(&c["Type"])).collect(),
            cells: Vec::new(),
            header_done: false,
        }
    }

    /// Prints (or, for tables, keeps) one page of rows.
    pub fn rows(&mut self, out: &mut impl Write, rows: &[Json]) -> std::io::Result<()> {
        let data = |row: &Json| row["Data"].as_array().cloned().unwrap_or_default();
        match self.format {
            Format::Table => {
                for row in rows {
                    let cells = data(row)
                        .iter()
                        .zip(&self.kinds)
                        .map(|(d, k)| text(d, k).replace('\n', "\\n"))
                        .collect();
                    self.cells.push(cells);
                }
            }
            Format::Csv => {
                let mut w = csv::Writer::from_writer(Vec::new());
                if !self.header_done {
                    w.write_record(&self.names).map_err(std::io::Error::other)?;
                    self.header_done = true;
                }
                for row in rows {
                    let fields: Vec<String> = data(row)
                        .iter()
                        .zip(&self.kinds)
                        .map(|(d, k)| {
                            if is_null(d) {
                                String::new()
                            } else {
                                text(d, k)
                            }
                        })
                        .collect();
                    w.write_record(&fields).map_err(std::io::Error::other)?;
                }
                let bytes = w
                    .into_inner()
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                out.write_all(&bytes)?;
            }
            Format::Json => {
                for row in rows {
                    // Written by hand to keep column order (serde_json's Map sorts).
                    let mut line = String::from("{");
                    for (i, (d, k)) in data(row).iter().zip(&self.kinds).enumerate() {
                        if i > 0 {
                            line.push(',');
                        }
                        let name = self.names.get(i).map_or("", String::as_str);
                        line.push_str(&Json::String(name.to_string()).to_string());
                        line.push(':');
                        line.push_str(&typed(d, k).to_string());
                    }
                    line.push('}');
                    writeln!(out, "{line}")?;
                }
            }
        }
        Ok(())
    }

    /// Ends the output: the table itself and its row count.
    pub fn finish(self, out: &mut impl Write) -> std::io::Result<()> {
        if self.format != Format::Table {
            return Ok(());
        }
        let mut widths: Vec<usize> = self.names.iter().map(|n| n.chars().count()).collect();
        for row in &self.cells {
            for (w, c) in widths.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String], numeric: &dyn Fn(usize) -> bool| -> String {
            let parts: Vec<String> = cells
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, w))| {
                    if numeric(i) {
                        format!(" {c:>w$} ")
                    } else {
                        format!(" {c:<w$} ")
                    }
                })
                .collect();
            parts.join("|").trim_end().to_string()
        };
        let numeric = |i: usize| self.kinds.get(i).is_some_and(Kind::is_number);
        writeln!(out, "{}", line(&self.names, &numeric))?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
        writeln!(out, "{}", rule.join("+"))?;
        for row in &self.cells {
            writeln!(out, "{}", line(row, &numeric))?;
        }
        writeln!(out, "({} rows)", self.cells.len())
    }
}

fn is_null(d: &Json) -> bool {
    d["NullValue"].as_bool() == Some(true)
}

/// A datum as display text.
fn text(d: &Json, kind: &Kind) -> String {
    if is_null(d) {
        return "NULL".into();
    }
    if let Some(s) = d["ScalarValue"].as_str() {
        return s.to_string();
    }
    if let Some(items) = d["ArrayValue"].as_array() {
        let inner = match kind {
            Kind::Array(k) => k.as_ref(),
            other => other,
        };
        let parts: Vec<String> = items.iter().map(|i| text(i, inner)).collect();
        return format!("[{}]", parts.join(", "));
    }
    if let Some(fields) = d["RowValue"]["Data"].as_array() {
        let parts: Vec<String> = fields
            .iter()
            .enumerate()
            .map(|(i, f)| match kind {
                Kind::Row(members) => match members.get(i) {
                    Some((name, k)) => format!("{name}={}", text(f, k)),
                    None => text(f, kind),
                },
                _ => text(f, kind),
            })
            .collect();
        return format!("{{{}}}", parts.join(", "));
    }
    if let Some(points) = d["TimeSeriesValue"].as_array() {
        let inner = match kind {
            Kind::TimeSeries(k) => k.as_ref(),
            other => other,
        };
        let parts: Vec<String> = points
            .iter()
            .map(|p| {
                format!(
                    "{{time={}, value={}}}",
                    p["Time"].as_str().unwrap_or(""),
                    text(&p["Value"], inner)
                )
            })
            .collect();
        return format!("[{}]", parts.join(", "));
    }
    String::new()
}

/// A datum as a typed JSON value.
fn typed(d: &Json, kind: &Kind) -> Json {
    if is_null(d) {
        return Json::Null;
    }
    if let Some(s) = d["ScalarValue"].as_str() {
        let number = match kind {
            Kind::Scalar(t) if t == "BIGINT" || t == "INTEGER" => {
                s.parse::<i64>().ok().map(Json::from)
            }
            Kind::Scalar(t) if t == "DOUBLE" => s
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Json::Number),
            Kind::Scalar(t) if t == "BOOLEAN" => s.parse::<bool>().ok().map(Json::Bool),
            _ => None,
        };
        return number.unwrap_or_else(|| Json::String(s.to_string()));
    }
    if let Some(items) = d["ArrayValue"].as_array() {
        let inner = match kind {
            Kind::Array(k) => k.as_ref(),
            other => other,
        };
        return Json::Array(items.iter().map(|i| typed(i, inner)).collect());
    }
    if let Some(fields) = d["RowValue"]["Data"].as_array() {
        let mut obj = Map::new();
        for (i, f) in fields.iter().enumerate() {
            let (name, k) = match kind {
                Kind::Row(members) => match members.get(i) {
                    Some((n, k)) => (n.clone(), k),
                    None => (format!("_{i}"), kind),
                },
                _ => (format!("_{i}"), kind),
            };
            obj.insert(name, typed(f, k));
        }
        return Json::Object(obj);
    }
    if let Some(points) = d["TimeSeriesValue"].as_array() {
        let inner = match kind {
            Kind::TimeSeries(k) => k.as_ref(),
            other => other,
        };
        return Json::Array(
            points
                .iter()
                .map(|p| {
                    let mut obj = Map::new();
                    obj.insert("time".into(), p["Time"].clone());
                    obj.insert("value".into(), typed(&p["Value"], inner));
                    Json::Object(obj)
                })
                .collect(),
        );
    }
    Json::Null
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use serde_json::json;

    use super::*;

    fn columns() -> Json {
        json!([
            {"Name": "host", "Type": {"ScalarType": "VARCHAR"}},
            {"Name": "v", "Type": {"ScalarType": "DOUBLE"}},
            {"Name": "n", "Type": {"ScalarType": "BIGINT"}},
            {"Name": "r", "Type": {"RowColumnInfo": [{"Name": "x", "Type": {"ScalarType": "BOOLEAN"}}]}},
        ])
    }

    fn rows() -> Vec<Json> {
        vec![
            json!({"Data": [{"ScalarValue": "h1"}, {"ScalarValue": "1.5"}, {"ScalarValue": "10"},
                            {"RowValue": {"Data": [{"ScalarValue": "true"}]}}]}),
            json!({"Data": [{"ScalarValue": "a,\"b\""}, {"NullValue": true}, {"ScalarValue": "7"},
                            {"NullValue": true}]}),
        ]
    }

    fn print(format: Format) -> String {
        let mut p = Printer::new(format, &columns());
        let mut out = Vec::new();
        p.rows(&mut out, &rows()).unwrap();
        p.finish(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn table_aligns_and_counts() {
        assert_eq!(
            print(Format::Table),
            " host  |    v |  n | r\n\
             -------+------+----+----------\n \
             h1    |  1.5 | 10 | {x=true}\n \
             a,\"b\" | NULL |  7 | NULL\n\
             (2 rows)\n"
        );
    }

    #[test]
    fn csv_quotes_and_leaves_nulls_empty() {
        assert_eq!(
            print(Format::Csv),
            "host,v,n,r\nh1,1.5,10,{x=true}\n\"a,\"\"b\"\"\",,7,\n"
        );
    }

    #[test]
    fn json_lines_are_typed_and_ordered() {
        assert_eq!(
            print(Format::Json),
            "{\"host\":\"h1\",\"v\":1.5,\"n\":10,\"r\":{\"x\":true}}\n\
             {\"host\":\"a,\\\"b\\\"\",\"v\":null,\"n\":7,\"r\":null}\n"
        );
    }
}
