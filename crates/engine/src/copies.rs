//! Saved copies: a table's cells and schema copied at one instant and kept apart from
//! the catalog (no reads, writes or GC reach them), until they expire or are dropped,
//! and restorable as a new table. The Table Admin API's snapshots are saved copies
//! held by a cluster.
//!
//! ## Step by step
//! 1. Under the catalog lock: the source's schema and a storage snapshot are taken, a
//!    fresh table id is reserved, and a `c` marker for it is written with the advanced
//!    id counter (one batch).
//! 2. The snapshot's cells are written under the new id in batches, outside the lock:
//!    writes to the source go on, and land after the copy's instant.
//! 3. One batch removes the marker and writes the copy's record (`s` key) or, on a
//!    restore, the new table's record; only then is the copy visible.
//!
//! A crash before step 3 leaves cells under an id nothing names, and the `c` marker:
//! [`Engine::open`] turns such markers into purge markers.
//!
//! ## Record (`s` holder `0x00` id), integers big-endian
//! ```text
//! u8  version (1)
//! i64 creation time (µs), i64 expiry (µs; i64::MAX: never), u64 bytes copied
//! u16 + source instance, u16 + source table name (UTF-8)
//! u32 + the table record of the copy (catalog format, the copy's own id)
//! u32 + note (bytes the caller keeps with the copy)
//! ```

use std::sync::Arc;

use crate::catalog::{self, NEXT_TABLE_ID_KEY, TableMeta};
use crate::db::{Engine, PURGE_BATCH_KEYS, TableDirectory};
use crate::error::{Error, Result};
use crate::keys;
use crate::limits::MAX_TABLES_PER_INSTANCE;
use crate::schema::TableInfo;

/// Record format version written by this build.
const RECORD_VERSION: u8 = 1;
/// Meta key prefix of saved copies.
const COPY_TAG: u8 = b's';
/// Meta key prefix of copies being written.
const COPYING_TAG: u8 = b'c';
/// Value bytes a copy batch holds before it is committed (besides the key count
/// limit), so a table of large values is copied in bounded memory.
const COPY_BATCH_BYTES: usize = 32 * 1024 * 1024;

/// The end of a holder whose copies are backups (named `HOLDER/ID`); other holders'
/// copies are snapshots (named `HOLDER/snapshots/ID`).
pub const BACKUPS_HOLDER_SUFFIX: &str = "/backups";

/// What a copy held by `holder` is called, and its full name, for errors.
fn label(holder: &str, id: &str) -> (&'static str, String) {
    if holder.ends_with(BACKUPS_HOLDER_SUFFIX) {
        ("backup", format!("{holder}/{id}"))
    } else {
        ("snapshot", format!("{holder}/snapshots/{id}"))
    }
}

/// A saved copy of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedCopy {
    /// Who holds it (a cluster's resource name, for snapshots).
    pub holder: String,
    /// Its id within the holder.
    pub id: String,
    /// The source table's schema at the copy's instant (instance and name included).
    pub source: TableInfo,
    /// When it was made (µs since the epoch).
    pub created_us: i64,
    /// When it expires (µs since the epoch), if it does.
    pub expires_us: Option<i64>,
    /// Bytes of keys and values copied.
    pub bytes: u64,
    /// What the caller asked to keep with it.
    pub note: Vec<u8>,
    /// Id of its cells.
    pub(crate) table_id: u32,
}

impl SavedCopy {
    pub(crate) fn meta_key(&self) -> Vec<u8> {
        copy_key(&self.holder, &self.id)
    }
}

fn copy_key(holder: &str, id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + holder.len() + id.len());
    k.push(COPY_TAG);
    k.extend_from_slice(holder.as_bytes());
    k.push(0);
    k.extend_from_slice(id.as_bytes());
    k
}

fn copying_key(table_id: u32) -> Vec<u8> {
    let mut k = vec![COPYING_TAG];
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

fn put_str(out: &mut Vec<u8>, s: &[u8], wide: bool) {
    if wide {
        out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    } else {
        out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    }
    out.extend_from_slice(s);
}

fn encode(copy: &SavedCopy, meta: &TableMeta) -> Vec<u8> {
    let mut out = vec![RECORD_VERSION];
    out.extend_from_slice(&copy.created_us.to_be_bytes());
    out.extend_from_slice(&copy.expires_us.unwrap_or(i64::MAX).to_be_bytes());
    out.extend_from_slice(&copy.bytes.to_be_bytes());
    put_str(&mut out, copy.source.instance.as_bytes(), false);
    put_str(&mut out, copy.source.name.as_bytes(), false);
    put_str(&mut out, &catalog::encode_table(meta), true);
    put_str(&mut out, &copy.note, true);
    out
}

/// A cursor over a record being decoded; every read is bounds-checked.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::Corrupt("saved copy record truncated".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn text(&mut self) -> Result<String> {
        let n = usize::from(u16::from_be_bytes(self.array()?));
        String::from_utf8(self.take(n)?.to_vec())
            .map_err(|_| Error::Corrupt("saved copy name is not UTF-8".into()))
    }
    fn blob(&mut self) -> Result<&'a [u8]> {
        let n = u32::from_be_bytes(self.array()?) as usize;
        self.take(n)
    }
}

/// Decodes a saved copy stored under `key`: the copy and its table record.
pub fn decode(key: &[u8], bytes: &[u8]) -> Result<(SavedCopy, TableMeta)> {
    let body = key
        .strip_prefix(&[COPY_TAG])
        .ok_or_else(|| Error::Corrupt("not a saved copy key".into()))?;
    let sep = body
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Error::Corrupt("saved copy key without separator".into()))?;
    let utf8 = |b: &[u8]| {
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::Corrupt("saved copy key is not UTF-8".into()))
    };
    let (holder, id) = (utf8(&body[..sep])?, utf8(&body[sep + 1..])?);
    let mut c = Cursor(bytes);
    let [version] = c.array()?;
    if version != RECORD_VERSION {
        return Err(Error::Corrupt(format!(
            "unknown saved copy record version {version}"
        )));
    }
    let created_us = i64::from_be_bytes(c.array()?);
    let expires = i64::from_be_bytes(c.array()?);
    let bytes_copied = u64::from_be_bytes(c.array()?);
    let instance = c.text()?;
    let name = c.text()?;
    let meta = catalog::decode_table(&catalog::table_meta_key(&instance, &name), c.blob()?)?;
    let note = c.blob()?.to_vec();
    if !c.0.is_empty() {
        return Err(Error::Corrupt("trailing bytes in saved copy record".into()));
    }
    let copy = SavedCopy {
        holder,
        id,
        source: meta.info(),
        created_us,
        expires_us: (expires != i64::MAX).then_some(expires),
        bytes: bytes_copied,
        note,
        table_id: meta.id,
    };
    Ok((copy, meta))
}

impl Engine {
    /// Copies table `name` of `instance` as it is now into a saved copy `id` held by
    /// `holder`, expiring at `expires_us` (never if `None`), with `note` kept beside it.
    pub fn save_copy(
        &self,
        instance: &str,
        name: &str,
        holder: &str,
        id: &str,
        expires_us: Option<i64>,
        note: Vec<u8>,
    ) -> Result<SavedCopy> {
        let (source, new_id, snapshot) = {
            let mut cat = self.catalog_mut()?;
            let source = Arc::clone(cat.get(instance, name)?);
            self.refuse_existing_copy(holder, id)?;
            let new_id = self.reserve_table_id(&mut cat)?;
            (source, new_id, self.inner.db.snapshot())
        };
        let copy = SavedCopy {
            holder: holder.to_owned(),
            id: id.to_owned(),
            source: source.info(),
            created_us: self.now_us(),
            expires_us,
            bytes: 0,
            note,
            table_id: new_id,
        };
        self.write_copy(&snapshot, (*source).clone(), copy)
    }

    /// Copies saved copy `id` of `holder` into a new saved copy `to_id` held by
    /// `to_holder`, expiring at `expires_us`, with `note`: the same cells, schema,
    /// source and creation time.
    pub fn duplicate_copy(
        &self,
        holder: &str,
        id: &str,
        to_holder: &str,
        to_id: &str,
        expires_us: Option<i64>,
        note: Vec<u8>,
    ) -> Result<SavedCopy> {
        let (source, meta, new_id, snapshot) = {
            let mut cat = self.catalog_mut()?;
            let (source, meta) = self.saved_copy_meta(holder, id)?;
            self.refuse_existing_copy(to_holder, to_id)?;
            let new_id = self.reserve_table_id(&mut cat)?;
            (source, meta, new_id, self.inner.db.snapshot())
        };
        let copy = SavedCopy {
            holder: to_holder.to_owned(),
            id: to_id.to_owned(),
            expires_us,
            bytes: 0,
            note,
            table_id: new_id,
            ..source
        };
        self.write_copy(&snapshot, meta, copy)
    }

    /// Writes the cells of `meta`'s table in `snapshot` under `copy`'s table id, then
    /// publishes `copy` (unless another copy took its name meanwhile).
    fn write_copy(
        &self,
        snapshot: &fjall::Snapshot,
        mut meta: TableMeta,
        mut copy: SavedCopy,
    ) -> Result<SavedCopy> {
        copy.bytes = self.copy_cells(snapshot, meta.id, copy.table_id, false)?;
        meta.id = copy.table_id;
        meta.deletion_protection = false;
        let _cat = self.catalog_mut()?;
        if let Err(e) = self.refuse_existing_copy(&copy.holder, &copy.id) {
            self.abandon_copy(copy.table_id)?;
            return Err(e);
        }
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, copying_key(copy.table_id));
        batch.insert(&self.inner.meta, copy.meta_key(), encode(&copy, &meta));
        self.commit(batch)?;
        Ok(copy)
    }

    /// Sets when saved copy `id` of `holder` expires (never with `None`).
    pub fn set_copy_expiry(
        &self,
        holder: &str,
        id: &str,
        expires_us: Option<i64>,
    ) -> Result<SavedCopy> {
        let _cat = self.catalog_mut()?;
        let (mut copy, meta) = self.saved_copy_meta(holder, id)?;
        copy.expires_us = expires_us;
        self.inner
            .meta
            .insert(copy.meta_key(), encode(&copy, &meta))?;
        self.sync()?;
        Ok(copy)
    }

    fn refuse_existing_copy(&self, holder: &str, id: &str) -> Result<()> {
        if self.inner.meta.get(copy_key(holder, id))?.is_some() {
            let (kind, name) = label(holder, id);
            return Err(Error::AlreadyExists { kind, name });
        }
        Ok(())
    }

    /// The unexpired saved copies whose holder starts with `holder_prefix`, in key order.
    pub fn saved_copies(&self, holder_prefix: &str) -> Result<Vec<SavedCopy>> {
        let mut prefix = vec![COPY_TAG];
        prefix.extend_from_slice(holder_prefix.as_bytes());
        let now = self.now_us();
        let mut out = Vec::new();
        for g in self.inner.meta.prefix(&prefix) {
            let (k, v) = g.into_inner()?;
            let (copy, _) = decode(&k, &v)?;
            if copy.expires_us.is_none_or(|e| e > now) {
                out.push(copy);
            }
        }
        Ok(out)
    }

    /// The saved copy `id` of `holder` (`NotFound` if it is missing or expired).
    pub fn saved_copy(&self, holder: &str, id: &str) -> Result<SavedCopy> {
        Ok(self.saved_copy_meta(holder, id)?.0)
    }

    fn saved_copy_meta(&self, holder: &str, id: &str) -> Result<(SavedCopy, TableMeta)> {
        let key = copy_key(holder, id);
        let missing = || {
            let (kind, name) = label(holder, id);
            Error::NotFound { kind, name }
        };
        let bytes = self.inner.meta.get(&key)?.ok_or_else(missing)?;
        let (copy, meta) = decode(&key, &bytes)?;
        if copy.expires_us.is_some_and(|e| e <= self.now_us()) {
            return Err(missing());
        }
        Ok((copy, meta))
    }

    /// Drops a saved copy; its cells are purged in the background.
    pub fn drop_saved_copy(&self, holder: &str, id: &str) -> Result<()> {
        let _cat = self.catalog_mut()?;
        let (copy, _) = self.saved_copy_meta(holder, id)?;
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, copy.meta_key());
        batch.insert(
            &self.inner.meta,
            catalog::dead_table_key(copy.table_id),
            Vec::new(),
        );
        self.commit(batch)?;
        self.inner.sweeper.wake();
        Ok(())
    }

    /// Creates table `name` of `instance` from a saved copy: its schema and cells.
    pub fn restore_copy(
        &self,
        holder: &str,
        id: &str,
        instance: &str,
        name: &str,
    ) -> Result<TableInfo> {
        crate::schema::validate_table_id(name)?;
        let (new_id, snapshot, mut meta) = {
            let mut cat = self.catalog_mut()?;
            let (_, meta) = self.saved_copy_meta(holder, id)?;
            refuse_table_name(&cat, instance, name)?;
            (
                self.reserve_table_id(&mut cat)?,
                self.inner.db.snapshot(),
                meta,
            )
        };
        self.copy_cells(&snapshot, meta.id, new_id, true)?;
        drop(snapshot);
        meta.id = new_id;
        meta.instance = instance.to_owned();
        meta.name = name.to_owned();
        let mut cat = self.catalog_mut()?;
        if let Err(e) = refuse_table_name(&cat, instance, name) {
            self.abandon_copy(new_id)?;
            return Err(e);
        }
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, copying_key(new_id));
        self.publish_table(&mut cat, batch, meta)
    }

    /// Reserves a fresh table id for a copy: the advanced counter and the copy's `c`
    /// marker in one batch.
    fn reserve_table_id(&self, cat: &mut TableDirectory) -> Result<u32> {
        let id = cat.next_table_id;
        let next = id
            .checked_add(1)
            .ok_or_else(|| Error::Exhausted("table ids are used up".into()))?;
        let mut batch = self.inner.db.batch();
        batch.insert(
            &self.inner.meta,
            NEXT_TABLE_ID_KEY,
            next.to_be_bytes().to_vec(),
        );
        batch.insert(&self.inner.meta, copying_key(id), Vec::new());
        self.commit(batch)?;
        cat.next_table_id = next;
        Ok(id)
    }

    /// Gives up a copy being written: its cells are purged.
    fn abandon_copy(&self, table_id: u32) -> Result<()> {
        let mut batch = self.inner.db.batch();
        batch.remove(&self.inner.meta, copying_key(table_id));
        batch.insert(
            &self.inner.meta,
            catalog::dead_table_key(table_id),
            Vec::new(),
        );
        self.commit(batch)?;
        self.inner.sweeper.wake();
        Ok(())
    }

    /// Turns the markers of copies a crash interrupted into purge markers (at open).
    pub(crate) fn abandon_interrupted_copies(&self) -> Result<()> {
        let mut batch = self.inner.db.batch();
        let mut any = false;
        for g in self.inner.meta.prefix([COPYING_TAG]) {
            let k = g.key()?;
            let id: [u8; 4] = k[1..]
                .try_into()
                .map_err(|_| Error::Corrupt("copy marker".into()))?;
            batch.remove(&self.inner.meta, k.to_vec());
            batch.insert(
                &self.inner.meta,
                catalog::dead_table_key(u32::from_be_bytes(id)),
                Vec::new(),
            );
            any = true;
        }
        if any {
            self.commit(batch)?;
        }
        Ok(())
    }

    /// Marks saved copies past their expiry for purging. Returns how many expired.
    pub(crate) fn expire_copies(&self) -> Result<u64> {
        let now = self.now_us();
        self.expire_records(COPY_TAG, |k, v| {
            let (copy, _) = decode(k, v)?;
            Ok(copy
                .expires_us
                .is_some_and(|e| e <= now)
                .then_some(copy.table_id))
        })
    }

    /// Writes every cell of table `from` in `snapshot` under table id `to`. `live`: the
    /// copy becomes a table, so rows as large as the row-size survey remembers are
    /// remembered for it too. Returns the bytes of keys and values copied.
    fn copy_cells(
        &self,
        snapshot: &fjall::Snapshot,
        from: u32,
        to: u32,
        live: bool,
    ) -> Result<u64> {
        let (lo, hi) = (keys::table_prefix(from), keys::table_end(from));
        let to_prefix = keys::table_prefix(to);
        let mut batch = self.inner.db.batch();
        let (mut n, mut pending, mut total) = (0usize, 0usize, 0u64);
        let mut row: Vec<u8> = Vec::new();
        let mut row_bytes = 0u64;
        for g in fjall::Readable::range(snapshot, &self.inner.cells, lo.as_slice()..hi.as_slice()) {
            let (k, v) = g.into_inner()?;
            let mut key = to_prefix.clone();
            key.extend_from_slice(&k[to_prefix.len()..]);
            if live {
                let parts = keys::KeyParts::parse(&key)?;
                if key[..parts.row_end] != row[..] {
                    self.inner.row_sizes.note_copied_row(&row, row_bytes);
                    row = key[..parts.row_end].to_vec();
                    row_bytes = keys::row_of_prefix(&row).len() as u64;
                }
                row_bytes += (parts.qualifier_len(&key) + v.len()) as u64;
            }
            total += (k.len() + v.len()) as u64;
            pending += v.len();
            batch.insert(&self.inner.cells, key, v);
            n += 1;
            if n >= PURGE_BATCH_KEYS || pending >= COPY_BATCH_BYTES {
                self.commit(std::mem::replace(&mut batch, self.inner.db.batch()))?;
                (n, pending) = (0, 0);
            }
        }
        self.commit(batch)?;
        self.inner.oldest.forget(to);
        if live {
            self.inner.row_sizes.note_copied_row(&row, row_bytes);
        }
        Ok(total)
    }
}

/// Fails if `instance` has a table `name` or has no room for another.
fn refuse_table_name(cat: &TableDirectory, instance: &str, name: &str) -> Result<()> {
    let tables = cat.tables.get(instance);
    if tables.is_some_and(|t| t.contains_key(name)) {
        return Err(Error::AlreadyExists {
            kind: "table",
            name: name.to_owned(),
        });
    }
    let n = tables.map_or(0, |t| t.len());
    if n >= MAX_TABLES_PER_INSTANCE {
        return Err(Error::Exhausted(format!(
            "instance {instance} has {n} tables, the limit of {MAX_TABLES_PER_INSTANCE}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::Rng;
    use crate::schema::Granularity;

    #[test]
    fn records_round_trip_and_corruption_never_panics() {
        let meta = TableMeta {
            id: 9,
            instance: "projects/p/instances/i".into(),
            name: "t".into(),
            granularity: Granularity::Micros,
            families: Vec::new(),
            next_family_id: 0,
            deletion_protection: false,
            change_retention_us: None,
        };
        let copy = SavedCopy {
            holder: "projects/p/instances/i/clusters/c".into(),
            id: "snap".into(),
            source: meta.info(),
            created_us: 5,
            expires_us: Some(7),
            bytes: 11,
            note: b"note".to_vec(),
            table_id: 9,
        };
        let key = copy.meta_key();
        let good = encode(&copy, &meta);
        assert_eq!(decode(&key, &good).unwrap(), (copy, meta));
        for i in 0..good.len() {
            assert!(decode(&key, &good[..i]).is_err(), "truncation at {i}");
        }
        let rng = Rng::new(3);
        for _ in 0..5_000 {
            let mut b = good.clone();
            let at = (rng.next_u64() as usize) % b.len();
            b[at] = rng.next_u64() as u8;
            let _ = decode(&key, &b);
        }
    }
}
