//! Timestream's jobs over the time-series layer and SQL: scheduled queries and
//! batch-load tasks. Both are kept in the store ([`stored`], table `_jobs`), so they
//! survive a restart, and both turn rows with named columns into records through
//! one mapping ([`mapping`]) and write them in batches ([`sink`]).
//!
//! A scheduled query, step by step (details in [`scheduled`]):
//! 1. CreateScheduledQuery checks the definition, plans the query and holds the
//!    target mapping against its columns; the definition is kept.
//! 2. `serve`'s scheduler calls [`ScheduledQueries::run_due`] every second; a due
//!    query runs with `@scheduled_runtime` bound and writes its rows into its target.
//! 3. The run's summary and any error report ([`report`]) are kept for
//!    DescribeScheduledQuery.
//!
//! Invariants: a definition is in the store before it is answered; runs of one
//! query never overlap; reports are written only under the bucket directory.

pub mod batch;
mod error;
pub mod mapping;
pub mod measures;
mod paging;
pub mod report;
pub mod requests;
pub mod rows;
pub mod scheduled;
pub mod sink;
mod stored;

pub use batch::BatchLoads;
pub use error::{Error, Result};
pub use scheduled::{ScheduledQueries, State as ScheduledQueryState};
