//! The catalog's databases: create, describe, list, update and delete, each written
//! through a generation-checked row (`stored.rs`).

use super::stored::{self, Expect};
use super::{MAX_CHANGE_TRIES, SeriesCatalog, State, corrupt, db_row};
use crate::error::{Error, Result};
use crate::limits::MAX_DATABASES;
use crate::model::DatabaseInfo;
use crate::store::WideColumnStore;
use crate::tags::Tag;

impl<S: WideColumnStore> SeriesCatalog<S> {
    pub(super) fn with_count(state: &State, d: &DatabaseInfo) -> DatabaseInfo {
        let mut d = d.clone();
        d.table_count = state
            .tables
            .range((d.name.clone(), String::new())..)
            .take_while(|((db, _), _)| *db == d.name)
            .count();
        d
    }

    /// CreateDatabase.
    pub fn create_database(
        &self,
        name: &str,
        kms_key_id: Option<String>,
        tags: Vec<Tag>,
        now_ms: i64,
    ) -> Result<DatabaseInfo> {
        crate::validate::resource_name("Database", name)?;
        let mut checked = Vec::new();
        crate::tags::add(&mut checked, tags)?;
        let mut st = self.write();
        self.reload_if_shared(&mut st)?;
        if st.databases.contains_key(name) {
            return Err(Error::Conflict {
                kind: "database",
                name: name.into(),
            });
        }
        if st.databases.len() >= MAX_DATABASES {
            return Err(Error::Quota(format!(
                "The limit of {MAX_DATABASES} databases is reached."
            )));
        }
        let d = DatabaseInfo {
            name: name.into(),
            kms_key_id: kms_key_id.unwrap_or_else(|| "almanac-managed".into()),
            created_ms: now_ms,
            updated_ms: now_ms,
            table_count: 0,
            tags: checked,
        };
        let json = serde_json::to_vec(&d).map_err(corrupt)?;
        let Some(generation) =
            stored::write_row(self.store.as_ref(), &db_row(name), json, Expect::Absent)?
        else {
            // Another front-end created it first.
            self.reload(&mut st)?;
            return Err(Error::Conflict {
                kind: "database",
                name: name.into(),
            });
        };
        st.db_generations.insert(name.into(), generation);
        st.databases.insert(name.into(), d.clone());
        Ok(d)
    }

    /// DescribeDatabase.
    pub fn database(&self, name: &str) -> Result<DatabaseInfo> {
        if self.store.other_writers() {
            self.reload(&mut self.write())?;
        }
        let st = self.read();
        let d = st.databases.get(name).ok_or_else(|| Error::NotFound {
            kind: "database",
            name: name.into(),
        })?;
        Ok(Self::with_count(&st, d))
    }

    /// ListDatabases: up to `max` databases after `after` (exclusive), in name order.
    pub fn databases(&self, after: Option<&str>, max: usize) -> Result<Vec<DatabaseInfo>> {
        if self.store.other_writers() {
            self.reload(&mut self.write())?;
        }
        let st = self.read();
        Ok(st
            .databases
            .values()
            .filter(|d| after.is_none_or(|a| d.name.as_str() > a))
            .take(max)
            .map(|d| Self::with_count(&st, d))
            .collect())
    }

    /// UpdateDatabase (the KMS key).
    pub fn update_database(
        &self,
        name: &str,
        kms_key_id: String,
        now_ms: i64,
    ) -> Result<DatabaseInfo> {
        let mut st = self.write();
        let d = self.edit_database(&mut st, name, |d| {
            d.kms_key_id.clone_from(&kms_key_id);
            d.updated_ms = now_ms;
            Ok(())
        })?;
        Ok(Self::with_count(&st, &d))
    }

    /// Changes a database's description (the caller holds the catalog's write lock):
    /// `edit` changes a copy, kept only if it succeeds.
    pub(super) fn edit_database(
        &self,
        st: &mut State,
        name: &str,
        mut edit: impl FnMut(&mut DatabaseInfo) -> Result<()>,
    ) -> Result<DatabaseInfo> {
        for _ in 0..MAX_CHANGE_TRIES {
            let mut d = st
                .databases
                .get(name)
                .cloned()
                .ok_or_else(|| Error::NotFound {
                    kind: "database",
                    name: name.into(),
                })?;
            edit(&mut d)?;
            let json = serde_json::to_vec(&d).map_err(corrupt)?;
            let expect = Expect::Generation(st.db_generations.get(name).copied().unwrap_or(0));
            match stored::write_row(self.store.as_ref(), &db_row(name), json, expect)? {
                Some(generation) => {
                    st.db_generations.insert(name.into(), generation);
                    st.databases.insert(name.into(), d.clone());
                    return Ok(d);
                }
                None => self.reload(st)?,
            }
        }
        Err(self.contended(name))
    }

    /// DeleteDatabase: only an empty one, as Timestream requires.
    pub fn delete_database(&self, name: &str) -> Result<()> {
        let mut st = self.write();
        self.reload_if_shared(&mut st)?;
        for _ in 0..MAX_CHANGE_TRIES {
            let d = st.databases.get(name).ok_or_else(|| Error::NotFound {
                kind: "database",
                name: name.into(),
            })?;
            let count = Self::with_count(&st, d).table_count;
            if count > 0 {
                return Err(Error::invalid(format!(
                    "Database {name} still has {count} tables; delete them first."
                )));
            }
            let generation = st.db_generations.get(name).copied().unwrap_or(0);
            if stored::delete_row(self.store.as_ref(), &db_row(name), generation)? {
                st.databases.remove(name);
                st.db_generations.remove(name);
                return Ok(());
            }
            self.reload(&mut st)?;
        }
        Err(self.contended(name))
    }
}
