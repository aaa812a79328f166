//! A query's encoded result rows, and how they cut into pages.

/// Bytes of one chunk of [`Rows`]' text. Text grows chunk by chunk, so a large result
/// is never copied to grow; a row longer than this gets a chunk of its own.
const CHUNK_BYTES: usize = 256 * 1024;

/// A query's result rows, each encoded as `{"Data":[…]},` (with the comma), back to
/// back in chunks of text (a row never straddles two), so a page is rows copied out
/// without the last comma.
#[derive(Debug, Default)]
pub struct Rows {
    chunks: Vec<String>,
    /// `ends[i]`: the end of row `i` (after its comma), counting the bytes of every
    /// chunk before its own.
    ends: Vec<usize>,
    /// `starts[c]`: where chunk `c` starts in that count.
    starts: Vec<usize>,
    /// Bytes of every chunk.
    len: usize,
}

impl Rows {
    /// Appends one encoded row: `row` must be a `{"Data":[…]}` object, without comma.
    pub fn push(&mut self, row: &str) {
        let need = row.len() + 1;
        let mut chunk = match self.chunks.pop() {
            Some(c) if c.capacity() - c.len() >= need => c,
            full => {
                self.chunks.extend(full);
                self.starts.push(self.len);
                String::with_capacity(CHUNK_BYTES.max(need))
            }
        };
        chunk.push_str(row);
        chunk.push(',');
        self.chunks.push(chunk);
        self.len += need;
        self.ends.push(self.len);
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
        self.len + (self.ends.len() + self.starts.len()) * std::mem::size_of::<usize>()
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
    pub fn slice(&self, start: usize, end: usize) -> String {
        if end <= start {
            return String::new();
        }
        let (from, to) = (self.start_of(start), self.ends[end - 1] - 1); // no last comma
        let mut out = String::with_capacity(to - from);
        let first = self.starts.partition_point(|&s| s <= from) - 1;
        for (c, chunk) in self.chunks.iter().enumerate().skip(first) {
            let base = self.starts[c];
            if base >= to {
                break;
            }
            out.push_str(&chunk[from.saturating_sub(base)..(to - base).min(chunk.len())]);
        }
        out
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

    #[test]
    fn pages_across_chunks_are_the_rows_back_to_back() {
        let mut r = Rows::default();
        let mut want = Vec::new();
        // Rows of many sizes, one longer than a chunk: several chunks.
        for i in 0..3000 {
            let pad = if i == 1234 { CHUNK_BYTES + 10 } else { i % 500 };
            let row = format!(
                "{{\"Data\":[{{\"ScalarValue\":\"{i}{}\"}}]}}",
                "x".repeat(pad)
            );
            r.push(&row);
            want.push(row);
        }
        assert!(r.chunks.len() > 3, "{} chunks", r.chunks.len());
        for (start, end) in [
            (0, 3000),
            (0, 1),
            (1233, 1236),
            (7, 2999),
            (2999, 3000),
            (500, 1500),
        ] {
            assert_eq!(
                r.slice(start, end),
                want[start..end].join(","),
                "{start}..{end}"
            );
        }
        let mut start = 0;
        while start < r.len() {
            let end = r.page_end(start, 1000, 64 * 1024);
            assert!(end > start);
            assert_eq!(r.slice(start, end), want[start..end].join(","));
            start = end;
        }
    }
}
