//! `almanac backup DIR` and `almanac restore DIR`: the whole server (every Bigtable
//! table, the time-series catalog and data, jobs, instances, principals) copied at
//! one instant from a running server's console (`GET /api/backup`), and loaded into a
//! new data directory. Contract: docs/operations.md#backups.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use almanac_client::http::{Client, Endpoint};
use anyhow::{Context, bail};

/// The dump's file in a backup directory.
const DUMP_FILE: &str = "almanac.dump";
/// The description beside it.
const MANIFEST_FILE: &str = "manifest.json";
/// The variable holding the bearer token of an admin principal.
const TOKEN_VAR: &str = "ALMANAC_TOKEN";
/// Write buffer of the dump file.
const FILE_BUFFER_BYTES: usize = 1024 * 1024;

/// Flags of `almanac backup`.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The server's console: `HOST:PORT` (`serve --console-addr`) or an
    /// `http[s]://` URL. A server with principals needs an admin's token, whose scope
    /// is everything, in $ALMANAC_TOKEN.
    #[arg(long, default_value = "127.0.0.1:8088")]
    console_addr: String,
    /// Directory to write the backup into (created; must be missing or empty).
    dir: PathBuf,
}

/// Flags of `almanac restore`.
#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    /// The new data directory (must be missing or empty); default
    /// `$XDG_DATA_HOME/almanac` or `./almanac-data`. Start `almanac serve --data-dir`
    /// on it afterwards.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// A directory written by `almanac backup`.
    dir: PathBuf,
}

fn refuse_non_empty(dir: &Path) -> anyhow::Result<()> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{} is not empty: a backup goes into a new directory",
            dir.display()
        );
    }
    Ok(())
}

/// Writes `bytes` to `path` and syncs it.
fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

/// Saves the running server's dump into `args.dir`, checks it whole, then writes the
/// manifest; prints a one-line JSON summary.
pub fn backup(args: BackupArgs) -> anyhow::Result<()> {
    refuse_non_empty(&args.dir)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let url = if args.console_addr.contains("://") {
        args.console_addr.clone()
    } else {
        format!("http://{}", args.console_addr)
    };
    let mut client = Client::new(Endpoint::parse(&url)?);
    let token = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty());
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .as_deref()
        .map(|b| ("authorization", b))
        .into_iter()
        .collect();
    let partial = args.dir.join(format!("{DUMP_FILE}.partial"));
    let started = Instant::now();
    let mut out = BufWriter::with_capacity(
        FILE_BUFFER_BYTES,
        File::create(&partial).with_context(|| format!("creating {}", partial.display()))?,
    );
    let resp = client
        .get_into("/api/backup", &headers, &mut out)
        .with_context(|| format!("asking the console at {url} (is `almanac serve` running?)"))?;
    if resp.status != 200 {
        let _ = std::fs::remove_file(&partial);
        let body: serde_json::Value = serde_json::from_slice(&resp.body).unwrap_or_default();
        let message = body
            .get("error")
            .and_then(|e| e.as_str())
            .map_or_else(|| resp.text(), str::to_owned);
        bail!(
            "the console refused the backup ({}): {message}",
            resp.status
        );
    }
    let file = out.into_inner().context("writing the dump")?;
    file.sync_all()?;
    let size = file.metadata()?.len();
    drop(file);
    let summary = almanac_engine::check_dump(BufReader::new(File::open(&partial)?))
        .context("the dump the server sent is not whole (did the server stop?)")?;
    let seconds = started.elapsed().as_secs_f64();
    let dump = args.dir.join(DUMP_FILE);
    std::fs::rename(&partial, &dump)?;
    let manifest = serde_json::json!({
        "format": "almanac-dump-1",
        "file": DUMP_FILE,
        "server": url,
        "taken_at": almanac_engine::calendar::rfc3339_millis(
            almanac_engine::clock::Clock::now_us(&almanac_engine::clock::SystemClock)
                .saturating_mul(1_000),
        ),
        "entries": summary.entries,
        "bytes": summary.bytes,
        "file_bytes": size,
        "files": summary.files,
    });
    write_synced(
        &args.dir.join(MANIFEST_FILE),
        serde_json::to_string_pretty(&manifest)?.as_bytes(),
    )?;
    File::open(&args.dir)?.sync_all()?;
    println!(
        "{}",
        serde_json::json!({
            "dir": args.dir,
            "entries": summary.entries,
            "file_bytes": size,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "mb_per_s": ((size as f64 / 1e6 / seconds) * 10.0).round() / 10.0,
        })
    );
    Ok(())
}

/// Loads the backup in `args.dir` into a new data directory; prints a one-line JSON
/// summary.
pub fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.unwrap_or_else(crate::default_data_dir);
    let dump = args.dir.join(DUMP_FILE);
    let file = File::open(&dump).with_context(|| {
        format!(
            "opening {} (a directory written by `almanac backup`)",
            dump.display()
        )
    })?;
    let size = file.metadata()?.len();
    let started = Instant::now();
    let summary =
        almanac_engine::load_dump(&data_dir, BufReader::with_capacity(FILE_BUFFER_BYTES, file))
            .with_context(|| format!("restoring {} into {}", dump.display(), data_dir.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    println!(
        "{}",
        serde_json::json!({
            "data_dir": data_dir,
            "entries": summary.entries,
            "files": summary.files,
            "file_bytes": size,
            "seconds": (seconds * 1000.0).round() / 1000.0,
            "mb_per_s": ((size as f64 / 1e6 / seconds) * 10.0).round() / 10.0,
        })
    );
    Ok(())
}
