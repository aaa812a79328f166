//! Principals, kept in `DATA_DIR/principals.json`.
//!
//! The file is JSON, `{"version": 1, "principals": [...]}`, each principal with its
//! name, role, scope, the SHA-256 of its bearer token (the token itself is shown once,
//! when made), its access key id and secret access key (kept: verifying a SigV4
//! signature needs the secret, as AWS does), and when it was made. It is written whole
//! to a temporary file, synced, and renamed over the old one, readable by its owner
//! only; a server re-reads it when it changes ([`Directory`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::{Error, Result, Role, Scope, secrets};

/// The file's name in the data directory.
pub const PRINCIPALS_FILE: &str = "principals.json";
/// The version of the file's format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Most principals a server keeps: each is looked up in a hash map per request, and
/// the file is rewritten whole on every change.
pub const MAX_PRINCIPALS: usize = 10_000;
/// Longest principal name.
pub const MAX_NAME_BYTES: usize = 128;
/// How often a running server looks whether the file changed.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// One principal, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Its name: letters, digits and `._@-`.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// Where.
    pub scope: Scope,
    /// SHA-256 of its bearer token, hex.
    pub token_sha256: String,
    /// Its AWS access key id.
    pub access_key_id: String,
    /// Its AWS secret access key.
    pub secret_access_key: String,
    /// When it was made, milliseconds since the epoch.
    pub created_ms: i64,
}

/// A new principal's credentials, printed once by `almanac auth create-principal`.
#[derive(Debug, Clone, Serialize)]
pub struct Credentials {
    /// The principal.
    pub name: String,
    /// Its bearer token, for gRPC (`authorization: Bearer …`) and the console.
    pub token: String,
    /// Its access key id, for the Timestream endpoint (SigV4).
    pub access_key_id: String,
    /// Its secret access key.
    pub secret_access_key: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    principals: Vec<Principal>,
}

/// The principals of a data directory, indexed for lookups.
#[derive(Debug, Default)]
pub struct Principals {
    list: Vec<Arc<Principal>>,
    by_token: HashMap<[u8; 32], Arc<Principal>>,
    by_key: HashMap<String, Arc<Principal>>,
}

impl Principals {
    /// Reads `dir`'s principals; none when the file does not exist.
    pub fn load(dir: &Path) -> Result<Self> {
        let list = read(&dir.join(PRINCIPALS_FILE))?;
        let mut out = Self::default();
        for p in list {
            let p = Arc::new(p);
            let mut hash = [0u8; 32];
            if hex::decode_to_slice(&p.token_sha256, &mut hash).is_ok() {
                out.by_token.insert(hash, Arc::clone(&p));
            }
            out.by_key.insert(p.access_key_id.clone(), Arc::clone(&p));
            out.list.push(p);
        }
        Ok(out)
    }

    /// Whether there are none (then authentication is off).
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Every principal, in the order made.
    pub fn all(&self) -> &[Arc<Principal>] {
        &self.list
    }

    /// The principal whose bearer token is `token`.
    pub fn by_token(&self, token: &str) -> Option<&Arc<Principal>> {
        self.by_token.get(&secrets::token_hash(token))
    }

    /// The principal whose access key id is `id`.
    pub fn by_access_key(&self, id: &str) -> Option<&Arc<Principal>> {
        self.by_key.get(id)
    }
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.display().to_string(),
        source,
    }
}

fn read(path: &Path) -> Result<Vec<Principal>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(path)(e)),
    };
    let corrupt = |message: String| Error::Corrupt {
        path: path.display().to_string(),
        message,
    };
    let file: File = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
    if file.version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "format version {} (this build reads {FORMAT_VERSION})",
            file.version
        )));
    }
    Ok(file.principals)
}

fn write(path: &Path, principals: Vec<Principal>) -> Result<()> {
    use std::io::Write as _;
    let file = File {
        version: FORMAT_VERSION,
        principals,
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| Error::Invalid(e.to_string()))?;
    let tmp = path.with_extension("json.tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options.open(&tmp).map_err(io_error(&tmp))?;
    f.write_all(&bytes).map_err(io_error(&tmp))?;
    f.sync_all().map_err(io_error(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io_error(path))?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io_error(dir))?;
    }
    Ok(())
}

fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._@-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "principal name {name:?}: use 1 to {MAX_NAME_BYTES} letters, digits and . _ @ -"
        )))
    }
}

/// Makes a principal in `dir` and returns its credentials (shown only now).
pub fn create(
    dir: &Path,
    name: &str,
    role: Role,
    scope: Scope,
    now_ms: i64,
) -> Result<Credentials> {
    check_name(name)?;
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let path = dir.join(PRINCIPALS_FILE);
    let mut list = read(&path)?;
    if list.iter().any(|p| p.name == name) {
        return Err(Error::Exists(name.to_string()));
    }
    if list.len() >= MAX_PRINCIPALS {
        return Err(Error::Invalid(format!(
            "a server keeps at most {MAX_PRINCIPALS} principals"
        )));
    }
    let credentials = Credentials {
        name: name.to_string(),
        token: secrets::new_token()?,
        access_key_id: secrets::new_access_key_id()?,
        secret_access_key: secrets::new_secret_access_key()?,
    };
    list.push(Principal {
        name: name.to_string(),
        role,
        scope,
        token_sha256: hex::encode(secrets::token_hash(&credentials.token)),
        access_key_id: credentials.access_key_id.clone(),
        secret_access_key: credentials.secret_access_key.clone(),
        created_ms: now_ms,
    });
    write(&path, list)?;
    Ok(credentials)
}

/// Removes the principal `name` from `dir`.
pub fn delete(dir: &Path, name: &str) -> Result<()> {
    let path = dir.join(PRINCIPALS_FILE);
    let mut list = read(&path)?;
    let before = list.len();
    list.retain(|p| p.name != name);
    if list.len() == before {
        return Err(Error::NotFound(name.to_string()));
    }
    write(&path, list)
}

/// The principals of `dir`, as stored.
pub fn list(dir: &Path) -> Result<Vec<Principal>> {
    read(&dir.join(PRINCIPALS_FILE))
}

/// A running server's view of its principals: re-read when the file changes, looked
/// at no more often than [`RELOAD_INTERVAL`].
#[derive(Debug)]
pub struct Directory {
    path: PathBuf,
    current: RwLock<Arc<Principals>>,
    /// When the file was last looked at, and its modification time and length then.
    seen: Mutex<(Instant, Option<(SystemTime, u64)>)>,
}

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Directory {
    /// The principals of data directory `dir`, read now.
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join(PRINCIPALS_FILE);
        let seen = stamp(&path);
        Ok(Self {
            current: RwLock::new(Arc::new(Principals::load(dir)?)),
            seen: Mutex::new((Instant::now(), seen)),
            path,
        })
    }

    /// The principals now. A file that changed is read again; one that cannot be
    /// read keeps the last good principals in force (and says so on stderr).
    pub fn current(&self) -> Arc<Principals> {
        if let Ok(mut seen) = self.seen.try_lock()
            && seen.0.elapsed() >= RELOAD_INTERVAL
        {
            seen.0 = Instant::now();
            let now = stamp(&self.path);
            if now != seen.1 {
                seen.1 = now;
                match self.path.parent().map(Principals::load) {
                    Some(Ok(fresh)) => {
                        if let Ok(mut current) = self.current.write() {
                            *current = Arc::new(fresh);
                        }
                    }
                    Some(Err(e)) => eprintln!("almanac: principals not reloaded: {e}"),
                    None => {}
                }
            }
        }
        self.current
            .read()
            .map_or_else(|e| Arc::clone(&e.into_inner()), |c| Arc::clone(&c))
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "test")]
mod tests {
    use super::*;

    #[test]
    fn principals_are_made_found_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Principals::load(dir.path()).unwrap().is_empty());
        let c = create(dir.path(), "alice", Role::Reader, Scope::All, 1).unwrap();
        assert!(matches!(
            create(dir.path(), "alice", Role::Admin, Scope::All, 2),
            Err(Error::Exists(_))
        ));
        assert!(matches!(
            create(dir.path(), "bad name", Role::Admin, Scope::All, 2),
            Err(Error::Invalid(_))
        ));
        let p = Principals::load(dir.path()).unwrap();
        assert_eq!(p.by_token(&c.token).unwrap().name, "alice");
        assert_eq!(
            p.by_access_key(&c.access_key_id).unwrap().secret_access_key,
            c.secret_access_key
        );
        assert!(p.by_token("alm_nope").is_none());
        let stored = std::fs::read_to_string(dir.path().join(PRINCIPALS_FILE)).unwrap();
        assert!(!stored.contains(&c.token), "the token itself is not kept");
        delete(dir.path(), "alice").unwrap();
        assert!(matches!(
            delete(dir.path(), "alice"),
            Err(Error::NotFound(_))
        ));
        assert!(Principals::load(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn a_file_of_another_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(PRINCIPALS_FILE),
            r#"{"version":9,"principals":[]}"#,
        )
        .unwrap();
        assert!(matches!(
            Principals::load(dir.path()),
            Err(Error::Corrupt { .. })
        ));
    }
}
