//! The results cache behind `Query` pagination.
//!
//! `Query` runs a query to the end on its first call. What does not fit in the first
//! page stays here, already encoded as the JSON of `Row`s, under the query's id; the
//! response's `NextToken` is `{query id}-{nonce}`, and the cache keeps the row each
//! nonce starts at. A later call with that token and the same `QueryString` gets the
//! page that starts there.
//!
//! Token rules (after the `NextToken` notes of the service model):
//! - a token may be presented again and returns the same page (a retry is safe);
//! - presenting a token retires the query's tokens for earlier offsets;
//! - a token lives [`TTL`] after its query ran, and no longer than its query stays
//!   cached: the cache holds at most [`MAX_QUERIES`] queries and [`MAX_BYTES`] bytes of
//!   rows, and evicts the oldest first;
//! - `CancelQuery` drops a query's rows; its tokens then answer that it was cancelled.
//!
//! Ended queries (finished, cancelled, expired, evicted) are remembered, up to
//! [`MAX_ENDED`], so that a late token or `CancelQuery` gets a precise answer.
//!
//! Time is an argument of every call, so tests drive expiry without sleeping.
//!
//! Token and id layout: docs/format.md#timestream-query-tokens

mod rows;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use rows::Rows;

/// How long a query's pages stay available: the service's NextToken lifetime.
pub const TTL: Duration = Duration::from_secs(3600);
/// Queries with pages waiting, at most: each pins its rows in memory.
pub const MAX_QUERIES: usize = 256;
/// Bytes of waiting rows (encoded JSON), at most, over all queries: a bound on what
/// abandoned paginations can hold.
pub const MAX_BYTES: usize = 512 * 1024 * 1024;
/// Ended queries remembered for their tokens' and `CancelQuery`'s messages.
pub const MAX_ENDED: usize = 4096;
/// Live tokens per query: one per page served, plus retries with another `MaxRows`.
pub const MAX_TOKENS_PER_QUERY: usize = 16;
/// Mixed into the seed of a cache's tag, so the tag is not its first id's digits.
const TAG_SALT: u64 = 0x7461_6700_0000_0000;
/// Separates the query id from the nonce in a token (not in a query id's alphabet).
const TOKEN_SEPARATOR: char = '-';

/// Why a `NextToken` or a `QueryId` cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// Not a token this server issued.
    #[error("Invalid pagination token: {0:?} was not issued by this server.")]
    Malformed(String),
    /// A token of a query whose pages are gone for the given reason.
    #[error(
        "Invalid pagination token: the results of query {query_id} {reason}; run the query again."
    )]
    Gone {
        /// The query.
        query_id: String,
        /// `expired`, `were evicted …`, `were all returned`.
        reason: &'static str,
    },
    /// A token of a cancelled query.
    #[error("Query {0} was cancelled; its results can no longer be read.")]
    Cancelled(String),
    /// A token retired by the use of a later one, or never issued for this query.
    #[error(
        "Invalid pagination token: it is not the query's latest one (a later NextToken was already used); paginate with the latest token or run the query again."
    )]
    Superseded,
    /// A token presented with another query string than the one that issued it.
    #[error(
        "Invalid pagination token: the QueryString differs from the query that issued the token."
    )]
    QueryMismatch,
    /// A token of a query this process did not run (another front-end did, or this
    /// one before a restart): its pages are kept by the process that ran it.
    #[error(
        "Invalid pagination token: query {0} was not run by this front-end (another one ran it, or this one before it restarted); a query's pages stay in the memory of the front-end that ran it, so send every page request of a query there (session affinity), or run the query again."
    )]
    Elsewhere(String),
    /// `CancelQuery` of an id never seen (or forgotten).
    #[error("Query {0} is not known to this server (never run, or long finished).")]
    UnknownQuery(String),
}

/// How a query left the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// Every row was returned by its first page.
    Finished,
    /// `CancelQuery`.
    Cancelled,
    /// [`TTL`] passed.
    Expired,
    /// Pushed out by newer queries ([`MAX_QUERIES`] / [`MAX_BYTES`]).
    Evicted,
}

impl Ended {
    /// Why the pages are gone, as the end of a sentence.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Finished => "were all returned",
            Self::Cancelled => "were cancelled",
            Self::Expired => "expired",
            Self::Evicted => "were evicted from the results cache by newer queries",
        }
    }
}

/// The cache's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// See [`MAX_QUERIES`].
    pub max_queries: usize,
    /// See [`MAX_BYTES`].
    pub max_bytes: usize,
    /// See [`TTL`].
    pub ttl: Duration,
    /// See [`MAX_ENDED`].
    pub max_ended: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_queries: MAX_QUERIES,
            max_bytes: MAX_BYTES,
            ttl: TTL,
            max_ended: MAX_ENDED,
        }
    }
}

/// What every page of one query repeats: its id, columns and scan counters.
#[derive(Debug, Clone)]
pub struct Header {
    /// The query's id.
    pub query_id: String,
    /// Who ran it (a principal's name; empty while authentication is off): only it
    /// may read the query's pages or cancel it.
    pub owner: Arc<str>,
    /// The `ColumnInfo` list, as JSON text.
    pub columns: Arc<str>,
    /// Extra members of each response (`"Almanac":{…}`), as JSON text.
    pub extension: Arc<str>,
}

/// One page taken from the cache.
#[derive(Debug, Clone)]
pub struct Page {
    /// The query's constant parts.
    pub header: Header,
    /// The rows, as JSON array members.
    pub rows: String,
    /// Rows in the page.
    pub row_count: usize,
    /// The token of the next page, when rows remain.
    pub next_token: Option<String>,
}

#[derive(Debug)]
struct Entry {
    header: Header,
    sql_hash: u64,
    rows: Rows,
    created: Instant,
    /// Live tokens: nonce and the row they start at.
    tokens: VecDeque<(u64, usize)>,
}

/// The bounded cache; see the module docs.
#[derive(Debug)]
pub struct ResultCache {
    limits: Limits,
    entries: HashMap<String, Entry>,
    /// Query ids in insertion (= expiry) order; ids no longer cached are skipped.
    order: VecDeque<String>,
    bytes: usize,
    /// How each remembered query ended, and who ran it.
    ended: HashMap<String, (Ended, Arc<str>)>,
    ended_order: VecDeque<String>,
    ids: IdSource,
    /// The first 8 digits of every query id this cache issues: which process ran it.
    tag: String,
}

impl ResultCache {
    /// An empty cache whose ids and tokens come from a generator seeded with `seed`.
    pub fn new(limits: Limits, seed: u64) -> Self {
        Self {
            limits,
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            ended: HashMap::new(),
            ended_order: VecDeque::new(),
            tag: format!("{:08X}", IdSource(seed ^ TAG_SALT).next() as u32),
            ids: IdSource(seed),
        }
    }

    /// A fresh query id: 32 uppercase hex digits (letters and digits, as the
    /// service's), the first 8 this process's tag.
    pub fn new_query_id(&mut self) -> String {
        format!(
            "{}{:016X}{:08X}",
            self.tag,
            self.ids.next(),
            self.ids.next() as u32
        )
    }

    /// Queries cached and their bytes.
    pub fn usage(&self) -> (usize, usize) {
        (self.entries.len(), self.bytes)
    }

    /// Remembers a query that needed one page only (for `CancelQuery`'s answer).
    pub fn finished(&mut self, header: &Header) {
        self.end(header.query_id.clone(), Ended::Finished, &header.owner);
    }

    /// Keeps `rows` of a query whose first page ended at row `next`, and returns the
    /// token of row `next`. Older queries are evicted to make room; a result larger
    /// than the whole cache is refused with `Err(bytes needed)`.
    pub fn insert(
        &mut self,
        header: Header,
        sql: &str,
        rows: Rows,
        next: usize,
        now: Instant,
    ) -> Result<String, usize> {
        self.expire(now);
        let bytes = rows.bytes() + header.columns.len() + header.extension.len();
        if bytes > self.limits.max_bytes {
            return Err(bytes);
        }
        while self.entries.len() >= self.limits.max_queries.max(1)
            || self.bytes + bytes > self.limits.max_bytes
        {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.remove(&oldest) {
                self.end(oldest, Ended::Evicted, &gone.header.owner);
            }
        }
        let query_id = header.query_id.clone();
        let mut entry = Entry {
            header,
            sql_hash: sql_hash(sql),
            rows,
            created: now,
            tokens: VecDeque::new(),
        };
        let token = self.token_for(&mut entry, &query_id, next);
        self.bytes += bytes;
        self.order.push_back(query_id.clone());
        self.entries.insert(query_id, entry);
        Ok(token)
    }

    /// The page at `token` of the query `sql`, at most `max_rows` rows and `max_bytes`
    /// bytes (at least one row).
    /// A token of a query `owner` did not run reads as one this server never issued.
    pub fn page(
        &mut self,
        token: &str,
        sql: &str,
        owner: &str,
        max_rows: usize,
        max_bytes: usize,
        now: Instant,
    ) -> Result<Page, PageError> {
        self.expire(now);
        let (query_id, nonce) = parse_token(token)?;
        let mine = self
            .entries
            .get(query_id)
            .is_some_and(|e| &*e.header.owner == owner);
        let Some(mut entry) = mine.then(|| self.entries.remove(query_id)).flatten() else {
            return Err(match self.ended.get(query_id) {
                Some((Ended::Cancelled, who)) if &**who == owner => {
                    PageError::Cancelled(query_id.to_string())
                }
                Some((how, who)) if &**who == owner => PageError::Gone {
                    query_id: query_id.to_string(),
                    reason: how.reason(),
                },
                None if !query_id.starts_with(&self.tag) => {
                    PageError::Elsewhere(query_id.to_string())
                }
                _ => PageError::Malformed(token.to_string()),
            });
        };
        let result = self.page_of(&mut entry, query_id, nonce, sql, max_rows, max_bytes);
        self.entries.insert(query_id.to_string(), entry);
        result
    }

    fn page_of(
        &mut self,
        entry: &mut Entry,
        query_id: &str,
        nonce: u64,
        sql: &str,
        max_rows: usize,
        max_bytes: usize,
    ) -> Result<Page, PageError> {
        if entry.sql_hash != sql_hash(sql) {
            return Err(PageError::QueryMismatch);
        }
        let Some(&(_, start)) = entry.tokens.iter().find(|(n, _)| *n == nonce) else {
            return Err(PageError::Superseded);
        };
        entry.tokens.retain(|(_, offset)| *offset >= start);
        let end = entry.rows.page_end(start, max_rows, max_bytes);
        let next_token = if end < entry.rows.len() {
            Some(self.token_for(entry, query_id, end))
        } else {
            None
        };
        Ok(Page {
            header: entry.header.clone(),
            rows: entry.rows.slice(start, end),
            row_count: end - start,
            next_token,
        })
    }

    /// `CancelQuery`: drops the query's rows. `Ok(None)` when it was cancelled now,
    /// `Ok(Some(how))` when it had already ended (cancelling is idempotent).
    /// A query `owner` did not run is unknown to it.
    pub fn cancel(
        &mut self,
        query_id: &str,
        owner: &str,
        now: Instant,
    ) -> Result<Option<Ended>, PageError> {
        self.expire(now);
        if self
            .entries
            .get(query_id)
            .is_some_and(|e| &*e.header.owner == owner)
            && let Some(gone) = self.remove(query_id)
        {
            self.end(query_id.to_string(), Ended::Cancelled, &gone.header.owner);
            return Ok(None);
        }
        match self.ended.get(query_id) {
            Some((how, who)) if &**who == owner => Ok(Some(*how)),
            _ => Err(PageError::UnknownQuery(query_id.to_string())),
        }
    }

    /// The token of row `offset` of `entry`: an existing one, or a new one (the
    /// oldest live token goes when there are too many).
    fn token_for(&mut self, entry: &mut Entry, query_id: &str, offset: usize) -> String {
        let nonce = match entry.tokens.iter().find(|(_, o)| *o == offset) {
            Some(&(n, _)) => n,
            None => {
                let n = self.ids.next();
                if entry.tokens.len() >= MAX_TOKENS_PER_QUERY {
                    entry.tokens.pop_front();
                }
                entry.tokens.push_back((n, offset));
                n
            }
        };
        format!("{query_id}{TOKEN_SEPARATOR}{nonce:016x}")
    }

    fn remove(&mut self, query_id: &str) -> Option<Entry> {
        let entry = self.entries.remove(query_id)?;
        self.bytes = self.bytes.saturating_sub(
            entry.rows.bytes() + entry.header.columns.len() + entry.header.extension.len(),
        );
        Some(entry)
    }

    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.order.front() {
            match self.entries.get(oldest) {
                None => {
                    self.order.pop_front();
                }
                Some(e) if now.saturating_duration_since(e.created) >= self.limits.ttl => {
                    let id = oldest.clone();
                    self.order.pop_front();
                    if let Some(gone) = self.remove(&id) {
                        self.end(id, Ended::Expired, &gone.header.owner);
                    }
                }
                Some(_) => break,
            }
        }
    }

    fn end(&mut self, query_id: String, how: Ended, owner: &Arc<str>) {
        if self
            .ended
            .insert(query_id.clone(), (how, Arc::clone(owner)))
            .is_none()
        {
            self.ended_order.push_back(query_id);
        }
        while self.ended_order.len() > self.limits.max_ended {
            if let Some(old) = self.ended_order.pop_front() {
                self.ended.remove(&old);
            }
        }
    }
}

/// A stable hash of a query string (tokens are tied to the query that issued them).
fn sql_hash(sql: &str) -> u64 {
    let mut h =
        std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
            .build_hasher();
    h.write(sql.as_bytes());
    h.finish()
}

fn parse_token(token: &str) -> Result<(&str, u64), PageError> {
    let malformed = || PageError::Malformed(token.chars().take(80).collect());
    let (query_id, nonce) = token.split_once(TOKEN_SEPARATOR).ok_or_else(malformed)?;
    let nonce = u64::from_str_radix(nonce, 16).map_err(|_| malformed())?;
    if query_id.is_empty() || !query_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(malformed());
    }
    Ok((query_id, nonce))
}

/// splitmix64: ids and token nonces, unpredictable enough for a local server once
/// seeded from the process's random hasher keys (see [`random_seed`]).
#[derive(Debug)]
struct IdSource(u64);

impl IdSource {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A seed from the standard library's per-process random hasher keys.
pub fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests stop at the first surprise")]
mod tests {
    use super::*;

    fn rows(n: usize) -> Rows {
        let mut r = Rows::default();
        for i in 0..n {
            r.push(&format!("{{\"Data\":[{{\"ScalarValue\":\"{i}\"}}]}}"));
        }
        r
    }

    fn header(cache: &mut ResultCache) -> Header {
        Header {
            query_id: cache.new_query_id(),
            owner: Arc::from(""),
            columns: Arc::from("[]"),
            extension: Arc::from(""),
        }
    }

    #[test]
    fn only_the_owner_pages_or_cancels_a_query() {
        let t0 = Instant::now();
        let mut c = ResultCache::new(Limits::default(), 9);
        let h = Header {
            owner: Arc::from("alice"),
            ..header(&mut c)
        };
        let id = h.query_id.clone();
        let token = c.insert(h, "q", rows(5), 1, t0).unwrap();
        // Another principal learns nothing: the token reads as never issued.
        assert!(matches!(
            c.page(&token, "q", "bob", 1, 1 << 20, t0),
            Err(PageError::Malformed(_))
        ));
        assert!(matches!(
            c.cancel(&id, "bob", t0),
            Err(PageError::UnknownQuery(_))
        ));
        assert_eq!(
            values(&c.page(&token, "q", "alice", 1, 1 << 20, t0).unwrap()),
            ["1"]
        );
        assert_eq!(c.cancel(&id, "alice", t0), Ok(None));
        assert!(matches!(
            c.cancel(&id, "bob", t0),
            Err(PageError::UnknownQuery(_))
        ));
    }

    #[test]
    fn a_token_from_another_front_end_says_where_its_pages_are() {
        let t0 = Instant::now();
        let (mut here, mut there) = (
            ResultCache::new(Limits::default(), 5),
            ResultCache::new(Limits::default(), 6),
        );
        let h = header(&mut there);
        let token = there.insert(h, "q", rows(5), 1, t0).unwrap();
        let e = here.page(&token, "q", "", 1, 1 << 20, t0).unwrap_err();
        assert!(matches!(e, PageError::Elsewhere(_)), "{e:?}");
        assert!(e.to_string().contains("not run by this front-end"), "{e}");
        // A token this process issued, for a query it does not know, is not that.
        let mine = here.new_query_id();
        let forged = format!("{mine}{TOKEN_SEPARATOR}{:016x}", 1);
        assert!(matches!(
            here.page(&forged, "q", "", 1, 1 << 20, t0),
            Err(PageError::Malformed(_))
        ));
    }

    fn values(page: &Page) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&format!("[{}]", page.rows)).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["Data"][0]["ScalarValue"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn tokens_walk_the_result_and_can_be_retried() {
        let t0 = Instant::now();
        let mut c = ResultCache::new(Limits::default(), 7);
        let h = header(&mut c);
        let token = c.insert(h, "SELECT 1", rows(7), 3, t0).unwrap();
        let p = c.page(&token, "SELECT 1", "", 3, 1 << 20, t0).unwrap();
        assert_eq!(values(&p), ["3", "4", "5"]);
        let again = c.page(&token, "SELECT 1", "", 3, 1 << 20, t0).unwrap();
        assert_eq!(
            values(&again),
            ["3", "4", "5"],
            "a retry returns the same page"
        );
        assert_eq!(again.next_token, p.next_token, "and the same next token");
        let next = p.next_token.unwrap();
        assert_ne!(next, token);
        let last = c.page(&next, "SELECT 1", "", 3, 1 << 20, t0).unwrap();
        assert_eq!(values(&last), ["6"]);
        assert_eq!(last.next_token, None);
        assert_eq!(
            c.page(&token, "SELECT 1", "", 3, 1 << 20, t0).unwrap_err(),
            PageError::Superseded
        );
        assert_eq!(
            c.page(&next, "SELECT 2", "", 3, 1 << 20, t0).unwrap_err(),
            PageError::QueryMismatch
        );
        assert!(matches!(
            c.page("nonsense", "SELECT 1", "", 3, 1 << 20, t0),
            Err(PageError::Malformed(_))
        ));
    }

    #[test]
    fn cancel_drops_rows_and_answers_later_tokens() {
        let t0 = Instant::now();
        let mut c = ResultCache::new(Limits::default(), 1);
        let h = header(&mut c);
        let id = h.query_id.clone();
        let token = c.insert(h, "q", rows(5), 1, t0).unwrap();
        assert_eq!(c.usage().0, 1);
        assert_eq!(c.cancel(&id, "", t0), Ok(None));
        assert_eq!(c.usage(), (0, 0));
        assert_eq!(
            c.page(&token, "q", "", 1, 1 << 20, t0).unwrap_err(),
            PageError::Cancelled(id.clone())
        );
        assert_eq!(c.cancel(&id, "", t0), Ok(Some(Ended::Cancelled)));
        assert!(matches!(
            c.cancel("NOPE", "", t0),
            Err(PageError::UnknownQuery(_))
        ));
    }

    #[test]
    fn expiry_and_eviction_are_reported() {
        let t0 = Instant::now();
        let limits = Limits {
            max_queries: 2,
            max_bytes: 10_000,
            ttl: Duration::from_secs(60),
            max_ended: 10,
        };
        let mut c = ResultCache::new(limits, 3);
        let mut tokens = Vec::new();
        for _ in 0..3 {
            let h = header(&mut c);
            tokens.push(c.insert(h, "q", rows(4), 1, t0).unwrap());
        }
        assert_eq!(c.usage().0, 2, "the oldest was evicted");
        assert!(matches!(
            c.page(&tokens[0], "q", "", 1, 1 << 20, t0),
            Err(PageError::Gone { reason, .. }) if reason.contains("evicted")
        ));
        let later = t0 + Duration::from_secs(61);
        assert!(matches!(
            c.page(&tokens[2], "q", "", 1, 1 << 20, later),
            Err(PageError::Gone {
                reason: "expired",
                ..
            })
        ));
        assert_eq!(c.usage(), (0, 0));
        let h = header(&mut c);
        assert!(
            c.insert(h, "q", rows(1000), 1, later).is_err(),
            "larger than the cache"
        );
    }

    #[test]
    fn byte_budget_evicts_oldest_first() {
        let t0 = Instant::now();
        let one = rows(10).bytes() + 2;
        let limits = Limits {
            max_bytes: one * 2,
            ..Limits::default()
        };
        let mut c = ResultCache::new(limits, 9);
        let ids: Vec<String> = (0..3)
            .map(|_| {
                let h = header(&mut c);
                let id = h.query_id.clone();
                c.insert(h, "q", rows(10), 1, t0).unwrap();
                id
            })
            .collect();
        assert_eq!(c.usage().0, 2);
        assert!(c.usage().1 <= one * 2);
        assert_eq!(c.cancel(&ids[0], "", t0), Ok(Some(Ended::Evicted)));
        assert_eq!(c.cancel(&ids[2], "", t0), Ok(None));
    }
}
