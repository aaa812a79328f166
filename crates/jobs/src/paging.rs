//! Pages of List operations: `MaxResults` checked against the operation's limit, and
//! the items after a `NextToken` (the key of the last item of the page before) in
//! key order.

use crate::error::{Error, Result};

/// `MaxResults`, or `limit` when absent; outside `1..=limit` is an error.
pub fn max_results(given: Option<i64>, limit: usize) -> Result<usize> {
    match given {
        None => Ok(limit),
        Some(n) if n >= 1 && n as u64 <= limit as u64 => Ok(n as usize),
        Some(n) => Err(Error::invalid(format!(
            "MaxResults {n} is outside [1, {limit}]."
        ))),
    }
}

/// At most `max` of `items` (in key order) whose key is after `after`, and the
/// token of the next page when there are more.
pub fn page<'a, T>(
    items: impl Iterator<Item = &'a T>,
    after: Option<&str>,
    max: usize,
    key: impl Fn(&T) -> &str,
) -> (Vec<&'a T>, Option<String>) {
    let mut page: Vec<&T> = items
        .filter(|t| after.is_none_or(|a| key(t) > a))
        .take(max + 1)
        .collect();
    let next = (page.len() > max).then(|| {
        page.truncate(max);
        page.last().map(|t| key(t).to_string())
    });
    (page, next.flatten())
}
