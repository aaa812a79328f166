//! Who may do what on an Almanac server.
//!
//! Authentication is off until the first principal exists, so a fresh server behaves
//! as the Bigtable emulator does. Then every request names a principal:
//! 1. Principals live in the data directory, in `principals.json` ([`store`]), made and
//!    removed with `almanac auth` on a stopped or running server (a running one sees
//!    the change within [`store::RELOAD_INTERVAL`]). Each has one [`Role`] over one
//!    [`Scope`], a bearer token (kept as its SHA-256) and an AWS access key pair.
//! 2. A gRPC call carries `authorization: Bearer TOKEN`, as Google's clients send with
//!    custom credentials; a Timestream request is signed with AWS Signature Version 4
//!    by the principal's key pair ([`sigv4`], with a guard against replays).
//! 3. The handler names what the call needs: an [`Action`] (read, write, administer),
//!    the permission's name as Bigtable or Timestream spell it, and the [`Resource`]
//!    ([`access::check`]). A principal whose role and scope cover it proceeds; any
//!    other gets a [`Denied`] naming the permission and the resource, and nothing is
//!    changed.

pub mod access;
pub mod error;
pub mod secrets;
pub mod sigv4;
pub mod store;

pub use access::{Action, Denied, Resource, Role, Scope, check};
pub use error::{Error, Result};
pub use store::{Credentials, Directory, PRINCIPALS_FILE, Principal, Principals};
