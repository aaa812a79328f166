//! `almanac ts …`: Timestream-style commands against a running server's Timestream
//! endpoint (`almanac serve --timestream-addr`, default `http://127.0.0.1:8087`),
//! speaking the same AWS JSON 1.0 calls boto3 makes.
//!
//! `almanac ts write DB TABLE FILE` reads records from JSON lines (one `Record` object
//! of the WriteRecords API per line) or CSV ([`csv_records`]), sends them in
//! WriteRecords batches of up to 100 with a progress bar, and prints a summary of
//! what was ingested and of every rejection with its source line.

mod import;
mod input;
mod unload;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::{Value as Json, json};

use almanac_client::http::{Client, Endpoint};

/// `X-Amz-Target` prefix of timestream-write.
const TARGET_PREFIX: &str = "Timestream_20181101";
/// Records per WriteRecords request (the service maximum).
const MAX_BATCH: usize = 100;
/// Rejections printed one by one before the summary only counts them.
const REJECTS_SHOWN: usize = 10;

/// Where the endpoint is.
#[derive(Debug, Clone, clap::Args)]
pub struct TsConn {
    /// The Timestream endpoint of `almanac serve` (https:// trusts $AWS_CA_BUNDLE;
    /// requests are signed with $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY when set).
    #[arg(long, default_value = "http://127.0.0.1:8087", global = true)]
    url: String,
}

/// `almanac ts` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TsCommand {
    /// Create a database.
    CreateDatabase {
        /// Database name.
        database: String,
    },
    /// Create a table (retention, magnetic writes, storage layout).
    CreateTable(CreateTableArgs),
    /// List databases, or the tables of one.
    Ls {
        /// Database whose tables to list.
        database: Option<String>,
    },
    /// Describe a database, or a table with its layout and inferred schema.
    Describe {
        /// Database.
        database: String,
        /// Table.
        table: Option<String>,
    },
    /// Delete a table and its records.
    DeleteTable {
        /// Database.
        database: String,
        /// Table.
        table: String,
    },
    /// Delete an empty database.
    DeleteDatabase {
        /// Database.
        database: String,
    },
    /// Write records from a CSV or JSON-lines file.
    Write(input::WriteArgs),
    /// Load what Timestream's UNLOAD wrote (CSV, gzip CSV or Parquet, with its
    /// manifest and metadata files) into a table; resumable.
    Import(import::ImportArgs),
}

/// Flags of `almanac ts create-table`.
#[derive(Debug, clap::Args)]
pub struct CreateTableArgs {
    /// Database.
    database: String,
    /// Table.
    table: String,
    /// Hours in the memory store (older writes are rejected unless --magnetic-writes).
    #[arg(long, default_value_t = 6)]
    memory_hours: i64,
    /// Days records are kept.
    #[arg(long, default_value_t = 73_000)]
    magnetic_days: i64,
    /// Accept records older than the memory store window.
    #[arg(long)]
    magnetic_writes: bool,
    /// Storage pattern: row-serialized (default), row-columns, bucket-cells, bucket-columns.
    #[arg(long)]
    layout: Option<String>,
    /// Time bucket (e.g. 1h, 15m, 1d): a row of the bucketed patterns, and what one
    /// sealed block holds in every pattern.
    #[arg(long)]
    bucket: Option<String>,
    /// Newest-first row keys.
    #[arg(long)]
    reverse_time: bool,
    /// Keep every point in its own row: never seal closed buckets into blocks.
    #[arg(long)]
    no_seal: bool,
}

/// A connection that calls operations and turns AWS errors into readable ones.
pub struct Api {
    client: Client,
    url: String,
    /// Extra headers sent with every call (`x-almanac-instance`).
    headers: Vec<(String, String)>,
}

/// An AWS error answer.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Exception name (`ValidationException`).
    pub kind: String,
    /// Message.
    pub message: String,
    /// The whole body.
    pub body: Json,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (HTTP {}): {}", self.kind, self.status, self.message)
    }
}

impl std::error::Error for ApiError {}

impl Api {
    /// Connects lazily to `url`.
    pub fn new(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: Client::new(Endpoint::parse(url)?),
            url: url.to_string(),
            headers: Vec::new(),
        })
    }

    /// Sends `name: value` with every call.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Calls `op` with `body`; `Ok(Err(..))` is an AWS error answer.
    pub fn call(&mut self, op: &str, body: &Json) -> anyhow::Result<Result<Json, ApiError>> {
        let target = format!("{TARGET_PREFIX}.{op}");
        let mut headers = vec![
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", target.as_str()),
        ];
        headers.extend(self.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let body = body.to_string();
        // Signed as an AWS SDK signs, when the environment holds a key pair (a server
        // with principals verifies it; one without ignores it), with a fresh invocation
        // id so that two identical requests never share a signature.
        let invocation = almanac_auth::secrets::new_token().unwrap_or_default();
        headers.push(("amz-sdk-invocation-id", invocation.as_str()));
        let signature = signed(&self.client, &headers, body.as_bytes());
        let (amz_date, authorization);
        if let Some((date, header)) = signature {
            (amz_date, authorization) = (date, header);
            headers.push(("X-Amz-Date", amz_date.as_str()));
            headers.push(("Authorization", authorization.as_str()));
        }
        let resp = self
            .client
            .post("/", &headers, body.as_bytes())
            .with_context(|| format!("{op}: is `almanac serve` running at {}?", self.url))?;
        let json: Json = serde_json::from_slice(&resp.body)
            .with_context(|| format!("{op}: HTTP {}: not JSON: {}", resp.status, resp.text()))?;
        if resp.status == 200 {
            return Ok(Ok(json));
        }
        let kind = json["__type"].as_str().unwrap_or("Error");
        let kind = kind.rsplit('#').next().unwrap_or(kind).to_string();
        let message = json["Message"]
            .as_str()
            .or(json["message"].as_str())
            .unwrap_or("")
            .to_string();
        Ok(Err(ApiError {
            status: resp.status,
            kind,
            message,
            body: json,
        }))
    }

    /// Calls `op` and fails on any AWS error.
    pub fn must(&mut self, op: &str, body: &Json) -> anyhow::Result<Json> {
        Ok(self.call(op, body)??)
    }
}

/// `(X-Amz-Date, Authorization)` signing a request to `client`'s endpoint with the key
/// pair of `$AWS_ACCESS_KEY_ID` and `$AWS_SECRET_ACCESS_KEY` (region
/// `$AWS_REGION`, else `$AWS_DEFAULT_REGION`, else us-east-1), if they are set.
fn signed(client: &Client, headers: &[(&str, &str)], body: &[u8]) -> Option<(String, String)> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (key, secret) = (var("AWS_ACCESS_KEY_ID")?, var("AWS_SECRET_ACCESS_KEY")?);
    let region = var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".to_string());
    let now = almanac_engine::clock::Clock::now_us(&almanac_engine::clock::SystemClock)
        .div_euclid(1_000_000);
    let amz_date = almanac_auth::sigv4::format_amz_date(now);
    let endpoint = client.endpoint();
    let path = format!("{}/", endpoint.prefix);
    let mut all: Vec<(&str, &str)> = vec![("Host", endpoint.authority.as_str())];
    all.extend_from_slice(headers);
    all.push(("X-Amz-Date", amz_date.as_str()));
    let request = almanac_auth::sigv4::Request {
        method: "POST",
        path: &path,
        query: "",
        headers: &all,
        body,
    };
    let header =
        almanac_auth::sigv4::sign(&request, &key, &secret, &region, "timestream", &amz_date);
    Some((amz_date, header))
}

fn print_table(t: &Json) {
    let r = &t["RetentionProperties"];
    println!(
        "{}.{}: {} memory store {} h, magnetic store {} d, magnetic writes {}",
        t["DatabaseName"].as_str().unwrap_or(""),
        t["TableName"].as_str().unwrap_or(""),
        t["TableStatus"].as_str().unwrap_or(""),
        r["MemoryStoreRetentionPeriodInHours"],
        r["MagneticStoreRetentionPeriodInDays"],
        t["MagneticStoreWriteProperties"]["EnableMagneticStoreWrites"],
    );
    let a = &t["Almanac"];
    if a.is_object() {
        println!(
            "  layout {} (bucket {} s, reverse time {}), Bigtable table {} in {}",
            a["Layout"].as_str().unwrap_or(""),
            a["BucketSeconds"],
            a["ReverseTime"],
            a["BigtableTable"].as_str().unwrap_or(""),
            a["BigtableInstance"].as_str().unwrap_or(""),
        );
        let dims: Vec<&str> = a["Dimensions"]
            .as_array()
            .map(|v| v.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        println!(
            "  dimensions (row-key order): {}",
            if dims.is_empty() {
                "-".into()
            } else {
                dims.join(", ")
            }
        );
        for (what, key) in [
            ("measure", "Measures"),
            ("multi-measure attribute", "MultiMeasureAttributes"),
        ] {
            for (name, kind) in a[key].as_object().into_iter().flatten() {
                println!("  {what} {name}: {}", kind.as_str().unwrap_or(""));
            }
        }
    }
}

/// Runs one `almanac ts` command.
pub fn run(conn: &TsConn, cmd: TsCommand) -> anyhow::Result<()> {
    let mut api = Api::new(&conn.url)?;
    match cmd {
        TsCommand::CreateDatabase { database } => {
            api.must("CreateDatabase", &json!({ "DatabaseName": database }))?;
            println!("created database {database}");
        }
        TsCommand::CreateTable(a) => {
            let mut tags = Vec::new();
            for (k, v) in [("almanac:layout", &a.layout), ("almanac:bucket", &a.bucket)] {
                if let Some(v) = v {
                    tags.push(json!({ "Key": k, "Value": v }));
                }
            }
            if a.reverse_time {
                tags.push(json!({ "Key": "almanac:reverse-time", "Value": "true" }));
            }
            if a.no_seal {
                tags.push(json!({ "Key": "almanac:seal", "Value": "false" }));
            }
            let t = api.must(
                "CreateTable",
                &json!({
                    "DatabaseName": a.database,
                    "TableName": a.table,
                    "RetentionProperties": {
                        "MemoryStoreRetentionPeriodInHours": a.memory_hours,
                        "MagneticStoreRetentionPeriodInDays": a.magnetic_days,
                    },
                    "MagneticStoreWriteProperties": { "EnableMagneticStoreWrites": a.magnetic_writes },
                    "Tags": tags,
                }),
            )?;
            print_table(&t["Table"]);
        }
        TsCommand::Ls { database } => {
            let (op, key, mut body) = match &database {
                None => ("ListDatabases", "Databases", json!({})),
                Some(db) => ("ListTables", "Tables", json!({ "DatabaseName": db })),
            };
            loop {
                let page = api.must(op, &body)?;
                for item in page[key].as_array().into_iter().flatten() {
                    match &database {
                        None => println!(
                            "{}\t{} tables",
                            item["DatabaseName"].as_str().unwrap_or(""),
                            item["TableCount"]
                        ),
                        Some(_) => println!("{}", item["TableName"].as_str().unwrap_or("")),
                    }
                }
                match page["NextToken"].as_str() {
                    Some(tok) => body["NextToken"] = json!(tok),
                    None => break,
                }
            }
        }
        TsCommand::Describe {
            database,
            table: None,
        } => {
            let d = api.must("DescribeDatabase", &json!({ "DatabaseName": database }))?;
            let d = &d["Database"];
            println!(
                "{}: {} tables, KMS key {}",
                database,
                d["TableCount"],
                d["KmsKeyId"].as_str().unwrap_or("")
            );
        }
        TsCommand::Describe {
            database,
            table: Some(table),
        } => {
            let t = api.must(
                "DescribeTable",
                &json!({ "DatabaseName": database, "TableName": table }),
            )?;
            print_table(&t["Table"]);
        }
        TsCommand::DeleteTable { database, table } => {
            api.must(
                "DeleteTable",
                &json!({ "DatabaseName": database, "TableName": table }),
            )?;
            println!("deleted table {database}.{table}");
        }
        TsCommand::DeleteDatabase { database } => {
            api.must("DeleteDatabase", &json!({ "DatabaseName": database }))?;
            println!("deleted database {database}");
        }
        TsCommand::Write(args) => write(&mut api, &args)?,
        TsCommand::Import(args) => import::import(&mut api, &args)?,
    }
    Ok(())
}

/// What a write or an import has done, and the refusals to print.
#[derive(Debug, Default)]
struct Tally {
    ingested: u64,
    rejected: u64,
    by_reason: BTreeMap<String, u64>,
    shown: Vec<String>,
}

impl Tally {
    /// Counts a refused record; `at` says where it came from (`line 7`, `FILE:7`).
    fn refuse(&mut self, at: &str, reason: &str) {
        self.rejected += 1;
        *self.by_reason.entry(reason.to_string()).or_default() += 1;
        if self.shown.len() < REJECTS_SHOWN {
            self.shown.push(format!("{at}: {reason}"));
        }
    }

    /// Counts WriteRecords' answer for `sent` records; `at(i)` says where record `i`
    /// came from. Any failure but refused records is given back.
    fn absorb(
        &mut self,
        answer: Result<Json, ApiError>,
        sent: usize,
        at: impl Fn(usize) -> String,
    ) -> Result<(), Box<ApiError>> {
        match answer {
            Ok(out) => {
                self.ingested += out["RecordsIngested"]["Total"].as_u64().unwrap_or(0);
                Ok(())
            }
            Err(e) if e.kind == "RejectedRecordsException" => {
                let rejected = e.body["RejectedRecords"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                self.ingested += sent.saturating_sub(rejected.len()) as u64;
                for r in rejected {
                    let index = r["RecordIndex"].as_u64().unwrap_or(0) as usize;
                    self.refuse(&at(index), r["Reason"].as_str().unwrap_or(""));
                }
                Ok(())
            }
            Err(e) => Err(Box::new(e)),
        }
    }

    /// Prints the refusals shown and counted by reason.
    fn print_refusals(&self) {
        for s in &self.shown {
            println!("rejected {s}");
        }
        if self.rejected > REJECTS_SHOWN as u64 {
            println!(
                "… and {} more rejections",
                self.rejected - REJECTS_SHOWN as u64
            );
        }
        for (reason, n) in &self.by_reason {
            println!("{n:>8} rejected: {reason}");
        }
    }
}

/// A progress bar over `total` bytes, with a message.
fn bytes_bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {per_sec} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

fn send(
    api: &mut Api,
    args: &input::WriteArgs,
    batch: &mut Vec<(usize, Json)>,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let records: Vec<&Json> = batch.iter().map(|(_, r)| r).collect();
    let body =
        json!({ "DatabaseName": args.database, "TableName": args.table, "Records": records });
    let answer = api.call("WriteRecords", &body)?;
    let at = |i: usize| format!("line {}", batch.get(i).map_or(0, |(l, _)| *l));
    if let Err(e) = tally.absorb(answer, batch.len(), at) {
        bail!(
            "WriteRecords failed for the records of lines {}..={}: {e}",
            batch[0].0,
            batch[batch.len() - 1].0
        );
    }
    batch.clear();
    Ok(())
}

fn write(api: &mut Api, args: &input::WriteArgs) -> anyhow::Result<()> {
    let path: &PathBuf = &args.file;
    let total = std::fs::metadata(path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let bar = bytes_bar(total);
    let mut tally = Tally::default();
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let started = std::time::Instant::now();
    input::for_each_record(args, &mut |line, record, offset| {
        batch.push((line, record));
        if batch.len() == args.batch.clamp(1, MAX_BATCH) {
            send(api, args, &mut batch, &mut tally)?;
            bar.set_position(offset);
            bar.set_message(format!(
                "{} ingested, {} rejected",
                tally.ingested, tally.rejected
            ));
        }
        Ok(())
    })?;
    send(api, args, &mut batch, &mut tally)?;
    bar.finish_and_clear();
    tally.print_refusals();
    println!(
        "ingested {} records, rejected {}, in {:.1} s",
        tally.ingested,
        tally.rejected,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
