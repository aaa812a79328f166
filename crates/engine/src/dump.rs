//! Whole-store dumps: every key of every keyspace at one instant, written as one
//! stream while the engine keeps serving, and loaded into a fresh data directory.
//! `almanac backup` and `almanac restore` are built on these.
//!
//! ## Step by step
//! - [`Engine::dump`] takes one storage snapshot (all keyspaces at one seqno: every
//!   write visible before it, none after), then streams `cells`, `meta` and
//!   `changes` in key order, then the files the caller adds (the principals file).
//! - [`load_dump`] opens an engine on an empty directory, writes the stream's keys in
//!   batches, checks the trailer (entry count and CRC-32C of everything before it),
//!   syncs, and reopens the directory to check its catalog. A stream that fails any
//!   check leaves no data directory behind.
//!
//! ## Stream (integers big-endian)
//! ```text
//! "ALMANAC DUMP\n" u8 version (1)
//! entry*: u8 kind (1 cells, 2 meta, 3 changes, 4 file) u32 key length, key, u32 value length, value
//!         (a file's key is its name in the data directory: letters, digits, '.', '-', '_')
//! trailer: u8 0, u64 entries, u32 CRC-32C of every byte before this field
//! ```

use std::io::{BufWriter, ErrorKind, Read, Write};
use std::path::Path;

use crate::db::{Engine, Options, PURGE_BATCH_KEYS};
use crate::error::{Error, Result};

/// The stream's first bytes.
const MAGIC: &[u8; 13] = b"ALMANAC DUMP\n";
/// Stream version written by this build.
const VERSION: u8 = 1;
/// Longest key an entry may have (fjall's own limit on keys).
pub const MAX_DUMP_KEY_BYTES: usize = 65_536;
/// Largest value an entry may have: a whole row's worth, which no cell reaches.
pub const MAX_DUMP_VALUE_BYTES: usize = crate::limits::MAX_ROW_BYTES;
/// Value bytes a load batch holds before it is committed.
const LOAD_BATCH_BYTES: usize = 32 * 1024 * 1024;
/// Write buffer between the snapshot and the output.
const WRITE_BUFFER_BYTES: usize = 1024 * 1024;

/// The kinds of entry, in stream order.
const CELLS: u8 = 1;
const META: u8 = 2;
const CHANGES: u8 = 3;
const FILE: u8 = 4;
const END: u8 = 0;

/// A file carried by a dump: its name in the data directory and its bytes.
type DumpFile = (String, Vec<u8>);

/// What a dump held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DumpSummary {
    /// Keys of the three keyspaces.
    pub entries: u64,
    /// Bytes of those keys and values.
    pub bytes: u64,
    /// Names of the files that came with them.
    pub files: Vec<String>,
}

/// Writes bytes through, keeping the running CRC-32C.
struct Summed<W> {
    inner: W,
    crc: u32,
}

impl<W: Write> Summed<W> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.inner.write_all(bytes)?;
        Ok(())
    }

    fn entry(&mut self, kind: u8, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(&[kind])?;
        self.put(&(key.len() as u32).to_be_bytes())?;
        self.put(key)?;
        self.put(&(value.len() as u32).to_be_bytes())?;
        self.put(value)
    }
}

/// Whether `name` may be a file of a dump: a plain name in the data directory.
fn plain_file_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name[0] != b'.'
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

impl Engine {
    /// Writes every key of the store as of now to `out`, then `files` (name, bytes),
    /// while reads and writes go on. Returns what was written.
    pub fn dump(&self, out: impl Write, files: &[(String, Vec<u8>)]) -> Result<DumpSummary> {
        for (name, bytes) in files {
            if !plain_file_name(name.as_bytes()) || bytes.len() > MAX_DUMP_VALUE_BYTES {
                return Err(Error::Invalid(format!("cannot dump file {name:?}")));
            }
        }
        let snapshot = self.inner.db.snapshot();
        let mut w = Summed {
            inner: BufWriter::with_capacity(WRITE_BUFFER_BYTES, out),
            crc: 0,
        };
        w.put(MAGIC)?;
        w.put(&[VERSION])?;
        let mut summary = DumpSummary::default();
        for (kind, keyspace) in [
            (CELLS, &self.inner.cells),
            (META, &self.inner.meta),
            (CHANGES, &self.inner.changes),
        ] {
            for g in fjall::Readable::iter(&snapshot, keyspace) {
                let (k, v) = g.into_inner()?;
                w.entry(kind, &k, &v)?;
                summary.entries += 1;
                summary.bytes += (k.len() + v.len()) as u64;
            }
        }
        drop(snapshot);
        for (name, bytes) in files {
            w.entry(FILE, name.as_bytes(), bytes)?;
            summary.files.push(name.clone());
        }
        w.put(&[END])?;
        w.put(&summary.entries.to_be_bytes())?;
        let crc = w.crc;
        w.inner.write_all(&crc.to_be_bytes())?;
        w.inner.flush()?;
        Ok(summary)
    }
}

/// Reads bytes, keeping the running CRC-32C.
struct Checked<R> {
    inner: R,
    crc: u32,
}

impl<R: Read> Checked<R> {
    fn take(&mut self, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => Error::Corrupt("the dump ends early".into()),
            _ => Error::from(e),
        })?;
        self.crc = crc32c::crc32c_append(self.crc, buf);
        Ok(())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        self.take(&mut a)?;
        Ok(a)
    }

    fn blob(&mut self, max: usize, what: &str) -> Result<Vec<u8>> {
        let n = u32::from_be_bytes(self.array()?) as usize;
        if n > max {
            return Err(Error::Corrupt(format!(
                "a dump {what} of {n} bytes is over the limit of {max}"
            )));
        }
        // Read as it arrives, so a damaged length fails at the end of the input
        // instead of allocating what it claims.
        let mut v = Vec::new();
        (&mut self.inner).take(n as u64).read_to_end(&mut v)?;
        if v.len() != n {
            return Err(Error::Corrupt("the dump ends early".into()));
        }
        self.crc = crc32c::crc32c_append(self.crc, &v);
        Ok(v)
    }
}

/// Loads a dump into `dir`, which must be missing or empty, as a data directory
/// [`Engine::open`] can open. Returns what was loaded; on any error `dir` is removed.
pub fn load_dump(dir: &Path, input: impl Read) -> Result<DumpSummary> {
    if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Error::Precondition(format!(
            "{} is not empty: a dump loads only into a new data directory",
            dir.display()
        )));
    }
    let loaded = load_into(dir, input);
    if loaded.is_err() {
        let _ = std::fs::remove_dir_all(dir);
    }
    loaded
}

/// Reads a whole dump, handing each keyspace entry (kind, key, value) to `entry`,
/// and checks its trailer. Returns the summary and the files.
fn read_dump(
    input: impl Read,
    mut entry: impl FnMut(u8, Vec<u8>, Vec<u8>) -> Result<()>,
) -> Result<(DumpSummary, Vec<DumpFile>)> {
    let mut r = Checked {
        inner: input,
        crc: 0,
    };
    if &r.array::<13>()? != MAGIC {
        return Err(Error::Corrupt("not an Almanac dump".into()));
    }
    let [version] = r.array()?;
    if version != VERSION {
        return Err(Error::Corrupt(format!(
            "dump version {version} is not one this build reads ({VERSION})"
        )));
    }
    let mut summary = DumpSummary::default();
    let mut files = Vec::new();
    loop {
        let [kind] = r.array()?;
        match kind {
            END => break,
            CELLS | META | CHANGES => {
                let key = r.blob(MAX_DUMP_KEY_BYTES, "key")?;
                let value = r.blob(MAX_DUMP_VALUE_BYTES, "value")?;
                if key.is_empty() {
                    return Err(Error::Corrupt("a dump entry has an empty key".into()));
                }
                summary.entries += 1;
                summary.bytes += (key.len() + value.len()) as u64;
                entry(kind, key, value)?;
            }
            FILE => {
                let name = r.blob(MAX_DUMP_KEY_BYTES, "file name")?;
                let bytes = r.blob(MAX_DUMP_VALUE_BYTES, "file")?;
                if !plain_file_name(&name) {
                    return Err(Error::Corrupt("a dump file has an unsafe name".into()));
                }
                let name = String::from_utf8_lossy(&name).into_owned();
                summary.files.push(name.clone());
                files.push((name, bytes));
            }
            other => return Err(Error::Corrupt(format!("unknown dump entry kind {other}"))),
        }
    }
    let entries = u64::from_be_bytes(r.array()?);
    let want = r.crc;
    let mut crc = [0u8; 4];
    r.inner
        .read_exact(&mut crc)
        .map_err(|_| Error::Corrupt("the dump ends early".into()))?;
    if u32::from_be_bytes(crc) != want {
        return Err(Error::Corrupt(
            "the dump's checksum does not match its bytes".into(),
        ));
    }
    if entries != summary.entries {
        return Err(Error::Corrupt(format!(
            "the dump says {entries} entries but holds {}",
            summary.entries
        )));
    }
    if r.inner.read(&mut [0u8; 1])? != 0 {
        return Err(Error::Corrupt("bytes follow the dump's trailer".into()));
    }
    Ok((summary, files))
}

/// Reads a whole dump and checks it (format, limits, entry count, checksum) without
/// loading it.
pub fn check_dump(input: impl Read) -> Result<DumpSummary> {
    Ok(read_dump(input, |_, _, _| Ok(()))?.0)
}

fn load_into(dir: &Path, input: impl Read) -> Result<DumpSummary> {
    // Written without a sync per batch: the load ends with one full sync, and a load
    // that fails is removed.
    let options = || Options {
        durability: crate::Durability::None,
        sweep_interval: None,
        count_access: false,
        ..Options::default()
    };
    let engine = Engine::open(dir, options())?;
    let inner = &engine.inner;
    let mut batch = inner.db.batch();
    let (mut n, mut pending) = (0usize, 0usize);
    let (summary, files) = read_dump(input, |kind, key, value| {
        let keyspace = match kind {
            CELLS => &inner.cells,
            META => &inner.meta,
            _ => &inner.changes,
        };
        pending += value.len();
        batch.insert(keyspace, key, value);
        n += 1;
        if n >= PURGE_BATCH_KEYS || pending >= LOAD_BATCH_BYTES {
            engine.commit(std::mem::replace(&mut batch, inner.db.batch()))?;
            (n, pending) = (0, 0);
        }
        Ok(())
    })?;
    engine.commit(batch)?;
    engine.flush()?;
    engine.shutdown()?;
    drop(engine);
    for (name, bytes) in &files {
        write_file(&dir.join(name), bytes)?;
    }
    // Opening checks that the catalog decodes and the table-id counter is past every id.
    Engine::open(dir, options())?.shutdown()?;
    Ok(summary)
}

/// Writes `bytes` to `path` durably, readable by the owner only (principals hold secrets).
fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let mut f = open.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}
