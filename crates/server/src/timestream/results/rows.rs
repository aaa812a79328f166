//! A query's encoded result rows, and how they cut into pages.

/// A query's result rows, each encoded as `{"Data":[…]},` (with the comma), back to
/// back, so a page is one slice of `text` without its last comma.
#[derive(Debug, Default)]
pub struct Rows {
    text: String,
    /// `ends[i]`: the end of row `i` in `text` (after its comma).
    ends: Vec<usize>,
}

impl Rows {
    /// Appends one encoded row: `row` must be a `{"Data":[…]}` object, without comma.
    pub fn push(&mut self, row: &str) {
        self.text.push_str(row);
        self.text.push(',');
        self.ends.push(self.text.len());
    }

    /// Rows held.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No rows.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes held (text and index).
    pub fn bytes(&self) -> usize {
        self.text.len() + self.ends.len() * std::mem::size_of::<usize>()
    }

    fn start_of(&self, row: usize) -> usize {
        if row == 0 { 0 } else { self.ends[row - 1] }
    }

    /// The end of the page that starts at row `start`: at most `max_rows` rows and
    /// `max_bytes` bytes, but always at least one row when any is left.
    pub fn page_end(&self, start: usize, max_rows: usize, max_bytes: usize) -> usize {
        let first = self.start_of(start);
        let mut end = start;
        while end < self.ends.len() && end - start < max_rows {
            if end > start && self.ends[end] - first > max_bytes {
                break;
            }
            end += 1;
        }
        end
    }

    /// Rows `start..end` as JSON array members (`r,r,r`).
    pub fn slice(&self, start: usize, end: usize) -> &str {
        if end <= start {
            return "";
        }
        let from = self.start_of(start);
        let to = self.ends[end - 1] - 1; // without the last comma
        &self.text[from..to]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(n: usize) -> Rows {
        let mut r = Rows::default();
        for i in 0..n {
            r.push(&format!("{{\"Data\":[{{\"ScalarValue\":\"{i}\"}}]}}"));
        }
        r
    }

    #[test]
    fn pages_split_by_rows_and_bytes_and_keep_one_row_at_least() {
        let r = rows(10);
        assert_eq!(r.page_end(0, 3, 1 << 20), 3);
        assert_eq!(r.page_end(9, 3, 1 << 20), 10);
        assert_eq!(r.page_end(0, 100, 1), 1, "one row even over the byte cap");
        let one = r.slice(0, 1).len() + 1;
        assert_eq!(r.page_end(0, 100, 2 * one), 2);
        assert_eq!(r.slice(0, 0), "");
        assert!(r.slice(8, 10).ends_with('}'));
    }
}
