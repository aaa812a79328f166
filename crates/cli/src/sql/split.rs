//! Statements from a stream of lines: each ends at a `;` outside string literals
//! (`'it''s'`), quoted identifiers (`"a;b"`), line comments (`-- …`) and block
//! comments (`/* … */`). Text that holds only whitespace and comments is no
//! statement.

/// Where the scanner is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum State {
    #[default]
    Code,
    /// Inside `'…'`.
    Literal,
    /// Inside `"…"`.
    Identifier,
    LineComment,
    BlockComment,
}

/// Accumulates text and hands back whole statements.
#[derive(Debug, Default)]
pub struct Splitter {
    current: String,
    state: State,
    /// The current statement has something besides whitespace and comments.
    substantive: bool,
}

impl Splitter {
    /// Nothing of a statement is pending (whitespace and comments aside).
    pub fn is_empty(&self) -> bool {
        !self.substantive && self.state == State::Code
    }

    /// Adds `text`; returns the statements it completed, without their `;`.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        let mut done = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let next = chars.peek().copied();
            match self.state {
                State::Code => match c {
                    ';' => {
                        if self.substantive {
                            done.push(self.current.trim().to_string());
                        }
                        self.current.clear();
                        self.substantive = false;
                        continue;
                    }
                    '\'' => self.state = State::Literal,
                    '"' => self.state = State::Identifier,
                    '-' if next == Some('-') => self.state = State::LineComment,
                    '/' if next == Some('*') => {
                        self.state = State::BlockComment;
                        self.current.push(c);
                        self.current.extend(chars.next());
                        continue;
                    }
                    _ => {}
                },
                State::Literal if c == '\'' => self.state = State::Code,
                State::Identifier if c == '"' => self.state = State::Code,
                State::LineComment if c == '\n' => self.state = State::Code,
                State::BlockComment if c == '*' && next == Some('/') => {
                    self.state = State::Code;
                    self.current.push(c);
                    self.current.extend(chars.next());
                    continue;
                }
                _ => {}
            }
            if !c.is_whitespace() && !matches!(self.state, State::LineComment | State::BlockComment)
            {
                self.substantive = true;
            }
            self.current.push(c);
        }
        done
    }

    /// The last statement when the input ends without a `;`.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.current);
        let substantive = std::mem::take(&mut self.substantive);
        self.state = State::Code;
        substantive.then(|| rest.trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> Vec<String> {
        let mut s = Splitter::default();
        let mut out = Vec::new();
        for line in text.split_inclusive('\n') {
            out.extend(s.push(line));
        }
        out.extend(s.finish());
        out
    }

    #[test]
    fn statements_end_at_semicolons_outside_quotes_and_comments() {
        assert_eq!(
            split("SELECT 1; SELECT 'a;b''c';\nSELECT \"x;y\"\n FROM t;"),
            ["SELECT 1", "SELECT 'a;b''c'", "SELECT \"x;y\"\n FROM t"]
        );
        assert_eq!(
            split("-- a; comment\nSELECT /* ; */ 2;\n;\n  -- only a comment\n"),
            ["-- a; comment\nSELECT /* ; */ 2"]
        );
        assert_eq!(split("SELECT 3"), ["SELECT 3"], "the last one needs no ';'");
        assert!(split("  \n/* nothing */\n").is_empty());
    }

    #[test]
    fn pending_text_is_visible() {
        let mut s = Splitter::default();
        assert!(s.is_empty());
        assert!(s.push("SELECT\n").is_empty());
        assert!(!s.is_empty());
        assert_eq!(s.push("1;\n"), ["SELECT\n1"]);
        assert!(s.is_empty());
        s.push("SELECT 'open\n");
        assert!(!s.is_empty());
    }
}
