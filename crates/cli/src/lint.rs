//! `almanac lint [TABLE | DB.TABLE]`: the schema advisor of a running server, through
//! its console's `/api/lint` (docs/console.md).

use almanac_client::http::{Client, Endpoint, query_escape};
use anyhow::{Context, bail};

/// Flags of `almanac lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// The server's console address (`serve --console-addr`).
    #[arg(long, default_value = "127.0.0.1:8088")]
    console_addr: String,
    /// The Bigtable instance of TABLE, as `projects/P/instances/I` (default
    /// projects/almanac/instances/almanac). Given, TABLE is always a Bigtable table,
    /// even with a '.' in its id.
    #[arg(long)]
    instance: Option<String>,
    /// Print the advisor's JSON instead of text.
    #[arg(long)]
    json: bool,
    /// A Bigtable table of the instance, or a time-series table as DB.TABLE.
    table: String,
}

/// Prints the findings; exits 0 with or without findings.
pub fn run(args: LintArgs) -> anyhow::Result<()> {
    let mut client = Client::new(Endpoint::parse(&format!("http://{}", args.console_addr))?);
    let series = args
        .instance
        .is_none()
        .then(|| args.table.split_once('.'))
        .flatten();
    let instance = args
        .instance
        .as_deref()
        .unwrap_or(almanac_server::DEFAULT_CONSOLE_INSTANCE);
    let query = match series {
        Some((db, table)) => format!(
            "database={}&ts_table={}",
            query_escape(db),
            query_escape(table)
        ),
        None => format!(
            "instance={}&table={}",
            query_escape(instance),
            query_escape(&args.table)
        ),
    };
    let resp = client.get(&format!("/api/lint?{query}")).with_context(|| {
        format!(
            "asking the console at {} (is `almanac serve` running?)",
            args.console_addr
        )
    })?;
    let body: serde_json::Value = serde_json::from_slice(&resp.body)
        .with_context(|| format!("the console answered {}: {}", resp.status, resp.text()))?;
    if resp.status != 200 {
        bail!(
            "{}",
            body.get("error")
                .and_then(|e| e.as_str())
                .unwrap_or("the console refused the request")
        );
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(());
    }
    let text =
        |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_owned();
    let findings = body
        .get("findings")
        .and_then(|f| f.as_array())
        .cloned()
        .unwrap_or_default();
    let checked = body
        .get("checked")
        .and_then(|f| f.as_array())
        .map_or(0, Vec::len);
    println!(
        "{}: {} finding(s), {checked} checks",
        text(&body, "table"),
        findings.len()
    );
    for f in &findings {
        println!();
        println!(
            "{} [{}] {}",
            text(f, "severity"),
            text(f, "rule"),
            text(f, "title")
        );
        println!("  evidence: {}", text(f, "evidence"));
        println!("  fix:      {}", text(f, "fix"));
        println!("  guide:    {}", text(f, "guide"));
    }
    Ok(())
}
