//! The schema as stored: one record per table in the `meta` keyspace.
//!
//! ## On-disk format (version 2; version 1 records are read as unprotected tables)
//! Meta keys:
//! - `n` → next table id, u32 big-endian. Table ids are never reused, so the data of
//!   a deleted table can be purged in the background while a new table of the same
//!   name starts empty.
//! - `t` instance `0x00` table name → a table record (below).
//! - `x` table_id (u32 BE) → empty: a deleted table whose cells are still to purge.
//! - `y` table_id (u32 BE) family_id (u32 BE) → empty: a dropped family to purge.
//! - `d` instance `0x00` table name → a deleted table that can still be undeleted:
//!   i64 BE deletion time (µs), then its table record ([`crate::lifecycle`]).
//! - `s` holder `0x00` copy id → a saved copy of a table ([`crate::copies`]).
//! - `c` table_id (u32 BE) → empty: a copy being written; at open, its cells are purged.
//! - `a` resource name … → opaque bytes kept for the server ([`crate::lifecycle`]).
//!
//! A table record, all integers big-endian:
//! ```text
//! u8  format version (2)
//! u32 table id
//! u8  granularity (0 millis, 1 micros)
//! u32 next family id
//! u16 family count, then per family in creation order:
//!     u32 family id, u16 name length, name bytes (UTF-8),
//!     u8 value type (0 bytes, 1 sum, 2 min, 3 max, 4 hll), GC rule (below)
//! u8  flags (version 2 only): bit 0 deletion protection, bit 1 change stream
//! i64 change-stream retention in µs (only with flag bit 1)
//! GC rule: u8 tag — 0 keep all; 1 max versions + u32; 2 max age + i64 µs;
//!          3 intersection / 4 union + u16 count + that many rules
//! ```
//! Decoding never panics: a short or unknown record is `Error::Corrupt`.
//!
//! Byte layout: docs/format.md#meta-keyspace

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::schema::{Aggregate, FamilySpec, GcRule, Granularity, TableInfo, ValueType};

/// Format version written by this build.
const FORMAT_VERSION: u8 = 2;
/// The version before the flags byte.
const FORMAT_VERSION_1: u8 = 1;
/// Flag bit: the table is protected from deletion.
const FLAG_DELETION_PROTECTION: u8 = 1;
/// Flag bit: the table has a change stream; its retention (`i64` µs) follows.
const FLAG_CHANGE_STREAM: u8 = 2;
/// GC rules nest at most this deep when decoding, so corrupt input cannot recurse
/// without bound (the 500-byte limit allows far less nesting than this anyway).
const MAX_DECODE_DEPTH: usize = 64;

/// Meta key of the table-id counter.
pub const NEXT_TABLE_ID_KEY: &[u8] = b"n";
/// Key of the count of major compactions ([`crate::Engine::compact`]): written after
/// each one, so that fjall runs its version maintenance and deletes the table files
/// the compaction replaced (it runs when a memtable is rotated).
pub const COMPACTIONS_KEY: &[u8] = b"k";

/// A column family as the engine tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyMeta {
    /// Id in keys; creation order within the table.
    pub id: u32,
    /// Name.
    pub name: Arc<str>,
    /// GC rule and value type.
    pub spec: FamilySpec,
}

/// A table as the engine tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMeta {
    /// Id in keys.
    pub id: u32,
    /// Namespace (`projects/p/instances/i`).
    pub instance: String,
    /// Table id within the instance.
    pub name: String,
    /// Timestamp granularity.
    pub granularity: Granularity,
    /// Families in creation (= id) order.
    pub families: Vec<FamilyMeta>,
    /// Id the next created family gets.
    pub next_family_id: u32,
    /// Whether DeleteTable and family drops are refused.
    pub deletion_protection: bool,
    /// How long the table's change stream keeps changes (µs); `None`: no change stream.
    pub change_retention_us: Option<i64>,
}

impl TableMeta {
    /// The family named `name`.
    pub fn family(&self, name: &str) -> Option<&FamilyMeta> {
        self.families.iter().find(|f| &*f.name == name)
    }

    /// The family with key id `id`.
    pub fn family_by_id(&self, id: u32) -> Option<&FamilyMeta> {
        self.families
            .binary_search_by_key(&id, |f| f.id)
            .ok()
            .map(|i| &self.families[i])
    }

    /// The public description.
    pub fn info(&self) -> TableInfo {
        TableInfo {
            instance: self.instance.clone(),
            name: self.name.clone(),
            families: self
                .families
                .iter()
                .map(|f| (f.name.to_string(), f.spec.clone()))
                .collect(),
            granularity: self.granularity,
            deletion_protection: self.deletion_protection,
            change_retention_us: self.change_retention_us,
        }
    }

    /// The table's resource name, as Bigtable spells it: `<instance>/tables/<name>`.
    pub fn resource_name(&self) -> String {
        format!("{}/tables/{}", self.instance, self.name)
    }

    /// Meta key of this table's record.
    pub fn meta_key(&self) -> Vec<u8> {
        table_meta_key(&self.instance, &self.name)
    }
}

/// Meta key of a table record.
pub fn table_meta_key(instance: &str, name: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(2 + instance.len() + name.len());
    k.push(b't');
    k.extend_from_slice(instance.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

/// Meta key marking a deleted table's data for purging.
pub fn dead_table_key(table_id: u32) -> Vec<u8> {
    let mut k = vec![b'x'];
    k.extend_from_slice(&table_id.to_be_bytes());
    k
}

/// Meta key marking a dropped family's data for purging.
pub fn dead_family_key(table_id: u32, family_id: u32) -> Vec<u8> {
    let mut k = vec![b'y'];
    k.extend_from_slice(&table_id.to_be_bytes());
    k.extend_from_slice(&family_id.to_be_bytes());
    k
}

/// Encodes a table record.
pub fn encode_table(t: &TableMeta) -> Vec<u8> {
    let mut out = vec![FORMAT_VERSION];
    out.extend_from_slice(&t.id.to_be_bytes());
    out.push(match t.granularity {
        Granularity::Millis => 0,
        Granularity::Micros => 1,
    });
    out.extend_from_slice(&t.next_family_id.to_be_bytes());
    out.extend_from_slice(&(t.families.len() as u16).to_be_bytes());
    for f in &t.families {
        out.extend_from_slice(&f.id.to_be_bytes());
        out.extend_from_slice(&(f.name.len() as u16).to_be_bytes());
        out.extend_from_slice(f.name.as_bytes());
        out.push(match f.spec.value_type {
            ValueType::Bytes => 0,
            ValueType::Aggregate(Aggregate::Sum) => 1,
            ValueType::Aggregate(Aggregate::Min) => 2,
            ValueType::Aggregate(Aggregate::Max) => 3,
            ValueType::Aggregate(Aggregate::HllCountDistinct) => 4,
        });
        encode_rule(&f.spec.gc_rule, &mut out);
    }
    let mut flags = 0;
    if t.deletion_protection {
        flags |= FLAG_DELETION_PROTECTION;
    }
    if t.change_retention_us.is_some() {
        flags |= FLAG_CHANGE_STREAM;
    }
    out.push(flags);
    if let Some(r) = t.change_retention_us {
        out.extend_from_slice(&r.to_be_bytes());
    }
    out
}

fn encode_rule(r: &GcRule, out: &mut Vec<u8>) {
    match r {
        GcRule::KeepAll => out.push(0),
        GcRule::MaxVersions(n) => {
            out.push(1);
            out.extend_from_slice(&n.to_be_bytes());
        }
        GcRule::MaxAge { max_age_us } => {
            out.push(2);
            out.extend_from_slice(&max_age_us.to_be_bytes());
        }
        GcRule::Intersection(rules) | GcRule::Union(rules) => {
            out.push(if matches!(r, GcRule::Intersection(_)) {
                3
            } else {
                4
            });
            out.extend_from_slice(&(rules.len() as u16).to_be_bytes());
            for x in rules {
                encode_rule(x, out);
            }
        }
    }
}

/// A cursor over a record being decoded.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let s = self
            .bytes
            .get(self.at..self.at + n)
            .ok_or_else(|| Error::Corrupt(format!("table record truncated at byte {}", self.at)))?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes([self.u8()?, self.u8()?]))
    }
    fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
}

/// Decodes a table record stored under `meta_key`.
pub fn decode_table(meta_key: &[u8], bytes: &[u8]) -> Result<TableMeta> {
    let (instance, name) = split_meta_key(meta_key)?;
    let mut r = Reader { bytes, at: 0 };
    let version = r.u8()?;
    if version != FORMAT_VERSION && version != FORMAT_VERSION_1 {
        return Err(Error::Corrupt(format!(
            "unknown table record version {version}"
        )));
    }
    let id = r.u32()?;
    let granularity = match r.u8()? {
        0 => Granularity::Millis,
        1 => Granularity::Micros,
        g => return Err(Error::Corrupt(format!("unknown granularity {g}"))),
    };
    let next_family_id = r.u32()?;
    let count = r.u16()?;
    let mut families = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        let fid = r.u32()?;
        let len = usize::from(r.u16()?);
        let fname = std::str::from_utf8(r.take(len)?)
            .map_err(|_| Error::Corrupt("family name is not UTF-8".into()))?;
        let value_type = match r.u8()? {
            0 => ValueType::Bytes,
            1 => ValueType::Aggregate(Aggregate::Sum),
            2 => ValueType::Aggregate(Aggregate::Min),
            3 => ValueType::Aggregate(Aggregate::Max),
            4 => ValueType::Aggregate(Aggregate::HllCountDistinct),
            v => return Err(Error::Corrupt(format!("unknown value type {v}"))),
        };
        let gc_rule = decode_rule(&mut r, 0)?;
        families.push(FamilyMeta {
            id: fid,
            name: fname.into(),
            spec: FamilySpec {
                gc_rule,
                value_type,
            },
        });
    }
    let flags = if version == FORMAT_VERSION_1 {
        0
    } else {
        r.u8()?
    };
    if flags & !(FLAG_DELETION_PROTECTION | FLAG_CHANGE_STREAM) != 0 {
        return Err(Error::Corrupt(format!("unknown table flags {flags:#x}")));
    }
    let change_retention_us = if flags & FLAG_CHANGE_STREAM != 0 {
        Some(r.i64()?)
    } else {
        None
    };
    if r.at != bytes.len() {
        return Err(Error::Corrupt(format!(
            "{} trailing bytes in table record",
            bytes.len() - r.at
        )));
    }
    if !families.windows(2).all(|w| w[0].id < w[1].id)
        || families.last().is_some_and(|f| f.id >= next_family_id)
    {
        return Err(Error::Corrupt("family ids out of order".into()));
    }
    Ok(TableMeta {
        id,
        instance,
        name,
        granularity,
        families,
        next_family_id,
        deletion_protection: flags & FLAG_DELETION_PROTECTION != 0,
        change_retention_us,
    })
}

fn decode_rule(r: &mut Reader<'_>, depth: usize) -> Result<GcRule> {
    if depth > MAX_DECODE_DEPTH {
        return Err(Error::Corrupt("GC rule nested too deep".into()));
    }
    Ok(match r.u8()? {
        0 => GcRule::KeepAll,
        1 => GcRule::MaxVersions(r.u32()?),
        2 => GcRule::MaxAge {
            max_age_us: r.i64()?,
        },
        tag @ (3 | 4) => {
            let n = r.u16()?;
            let mut rules = Vec::new();
            for _ in 0..n {
                rules.push(decode_rule(r, depth + 1)?);
            }
            if tag == 3 {
                GcRule::Intersection(rules)
            } else {
                GcRule::Union(rules)
            }
        }
        t => return Err(Error::Corrupt(format!("unknown GC rule tag {t}"))),
    })
}

fn split_meta_key(key: &[u8]) -> Result<(String, String)> {
    let body = key
        .strip_prefix(b"t")
        .ok_or_else(|| Error::Corrupt("not a table key".into()))?;
    let sep = body
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| Error::Corrupt("table key without separator".into()))?;
    let utf8 = |b: &[u8]| {
        String::from_utf8(b.to_vec()).map_err(|_| Error::Corrupt("table key not UTF-8".into()))
    };
    Ok((utf8(&body[..sep])?, utf8(&body[sep + 1..])?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::clock::Rng;

    fn sample() -> TableMeta {
        TableMeta {
            id: 42,
            instance: "projects/p/instances/i".into(),
            name: "t1".into(),
            granularity: Granularity::Millis,
            families: vec![
                FamilyMeta {
                    id: 0,
                    name: "cf".into(),
                    spec: FamilySpec::default(),
                },
                FamilyMeta {
                    id: 3,
                    name: "sum".into(),
                    spec: FamilySpec {
                        gc_rule: GcRule::Union(vec![
                            GcRule::MaxVersions(3),
                            GcRule::Intersection(vec![GcRule::MaxAge {
                                max_age_us: 5_000_000,
                            }]),
                        ]),
                        value_type: ValueType::Aggregate(Aggregate::Sum),
                    },
                },
            ],
            next_family_id: 4,
            deletion_protection: true,
            change_retention_us: Some(86_400_000_000),
        }
    }

    #[test]
    fn round_trip() {
        let t = sample();
        assert_eq!(decode_table(&t.meta_key(), &encode_table(&t)).unwrap(), t);
    }

    #[test]
    fn version_1_records_read_as_unprotected() {
        let mut t = sample();
        let mut v1 = encode_table(&t);
        v1[0] = FORMAT_VERSION_1;
        v1.truncate(v1.len() - 9);
        t.deletion_protection = false;
        t.change_retention_us = None;
        assert_eq!(decode_table(&t.meta_key(), &v1).unwrap(), t);
    }

    #[test]
    fn corrupted_records_never_panic() {
        let t = sample();
        let good = encode_table(&t);
        let key = t.meta_key();
        let rng = Rng::new(7);
        for i in 0..good.len() {
            assert!(
                decode_table(&key, &good[..i]).is_err(),
                "truncation at {i} accepted"
            );
        }
        for _ in 0..5_000 {
            let mut b = good.clone();
            let n = 1 + (rng.next_u64() % 4) as usize;
            for _ in 0..n {
                let at = (rng.next_u64() as usize) % b.len();
                b[at] = rng.next_u64() as u8;
            }
            let _ = decode_table(&key, &b);
        }
    }
}
