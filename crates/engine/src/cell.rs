//! What reads return: rows of cells.

use std::sync::Arc;

/// One cell: a value at `family:qualifier` and a timestamp, with the labels that
/// filters applied on the way out (labels are never stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Column family name.
    pub family: Arc<str>,
    /// Column qualifier (any bytes).
    pub qualifier: Arc<[u8]>,
    /// Timestamp in microseconds.
    pub timestamp_us: i64,
    /// The value (for aggregate families: the encoded aggregate).
    pub value: Vec<u8>,
    /// Labels applied by `apply_label` filters during this read.
    pub labels: Vec<String>,
}

/// A row as a read returns it: the key and its cells, ordered by family (in the order
/// the families were created), then qualifier (bytes ascending), then timestamp
/// (newest first).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    /// Row key.
    pub key: Vec<u8>,
    /// Cells in row order (see the type docs).
    pub cells: Vec<Cell>,
}

impl Row {
    /// Bytes of keys, qualifiers and values: what the row-size limit counts.
    pub fn size_bytes(&self) -> usize {
        self.key.len()
            + self
                .cells
                .iter()
                .map(|c| c.family.len() + c.qualifier.len() + c.value.len() + 8)
                .sum::<usize>()
    }
}

impl Row {
    /// The row's bytes as reads and Key Visualizer count them: the key, and each
    /// cell's qualifier and value.
    pub fn bytes(&self) -> u64 {
        self.key.len() as u64
            + self
                .cells
                .iter()
                .map(|c| (c.qualifier.len() + c.value.len()) as u64)
                .sum::<u64>()
    }
}
