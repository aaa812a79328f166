//! Temporary: rejects every filter until the evaluator is merged.
use super::RowFilter;
use crate::Cell;
use crate::clock::Rng;
use crate::error::{Error, Result};
use crate::plan::ReadPlan;

/// A compiled filter.
#[derive(Debug)]
pub struct CompiledFilter;

impl CompiledFilter {
    /// Compiles.
    pub fn compile(_f: &RowFilter) -> Result<Self> {
        Err(Error::Invalid("filters are not supported yet".into()))
    }
    /// Plans.
    pub fn plan(&self, _families: &[&str]) -> ReadPlan {
        ReadPlan::default()
    }
    /// Applies.
    pub fn apply(&self, _key: &[u8], cells: Vec<Cell>, _rng: &Rng) -> Vec<Cell> {
        cells
    }
}
