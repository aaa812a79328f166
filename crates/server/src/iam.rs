//! IAM policies of instances and tables (`GetIamPolicy`, `SetIamPolicy`,
//! `TestIamPermissions` on both admin services). Policies are kept in the engine's
//! settings under `{resource}#iam`, with an etag that changes on every write: a
//! `SetIamPolicy` carrying an older etag is refused with ABORTED, as IAM does.
//!
//! Access is granted by principals' roles ([`crate::auth`]) and by the bindings of
//! these policies ([`crate::grants`]: predefined Bigtable roles for members naming
//! principals). `TestIamPermissions` answers the permissions of those asked that the
//! caller holds on the resource (all of them while authentication is off).

use almanac_api::google::iam::v1 as iam;
use almanac_engine::Engine;
use prost::Message;
use tonic::Status;

use crate::status::{IntoStatus, invalid};

/// Policy versions IAM defines.
const POLICY_VERSIONS: [i32; 3] = [0, 1, 3];
/// Permissions one TestIamPermissions call may name (IAM's limit).
const MAX_TESTED_PERMISSIONS: usize = 100;

fn key(resource: &str) -> String {
    format!("{resource}#iam")
}

/// The etag of the policy at `version` (the number of writes so far).
fn etag(version: u64) -> bytes::Bytes {
    bytes::Bytes::copy_from_slice(&version.to_be_bytes())
}

fn etag_version(etag: &[u8]) -> Option<u64> {
    Some(u64::from_be_bytes(etag.try_into().ok()?))
}

/// The policy of `resource` (an empty one, version 1, if none was set).
pub fn get(engine: &Engine, resource: &str) -> Result<iam::Policy, Status> {
    match engine.setting(&key(resource)).status()? {
        Some(bytes) => iam::Policy::decode(bytes.as_slice())
            .map_err(|e| Status::data_loss(format!("stored IAM policy of {resource}: {e}"))),
        None => Ok(iam::Policy {
            version: 1,
            etag: etag(0),
            ..iam::Policy::default()
        }),
    }
}

/// Replaces the policy of `resource`; refused if the caller's etag is stale.
pub fn set(
    engine: &Engine,
    resource: &str,
    policy: Option<iam::Policy>,
) -> Result<iam::Policy, Status> {
    let Some(mut policy) = policy else {
        return Err(invalid("SetIamPolicy needs a policy"));
    };
    if !POLICY_VERSIONS.contains(&policy.version) {
        return Err(invalid(format!(
            "policy version {} is not one of {POLICY_VERSIONS:?}",
            policy.version
        )));
    }
    for b in &policy.bindings {
        if !b.role.starts_with("roles/") || b.members.is_empty() {
            return Err(invalid(format!(
                "a binding names a role (roles/…) and at least one member; got role {:?} with {} members",
                b.role,
                b.members.len()
            )));
        }
    }
    let current = get(engine, resource)?;
    if !policy.etag.is_empty() && policy.etag != current.etag {
        return Err(Status::aborted(format!(
            "the policy of {resource} changed since its etag was read; read it again"
        )));
    }
    let version = etag_version(&current.etag).unwrap_or(0).saturating_add(1);
    policy.etag = etag(version);
    engine
        .put_settings(&[(key(resource), Some(policy.encode_to_vec()))])
        .status()?;
    Ok(policy)
}

/// The permissions of `permissions` that `caller` holds on `resource`.
pub fn test(
    caller: &crate::auth::Caller,
    resource: &str,
    permissions: Vec<String>,
) -> Result<iam::TestIamPermissionsResponse, Status> {
    if permissions.len() > MAX_TESTED_PERMISSIONS {
        return Err(invalid(format!(
            "{} permissions named, over the limit of {MAX_TESTED_PERMISSIONS}",
            permissions.len()
        )));
    }
    if let Some(p) = permissions.iter().find(|p| !p.starts_with("bigtable.")) {
        return Err(invalid(format!(
            "permission {p:?} is not a Bigtable permission (bigtable.…)"
        )));
    }
    let permissions = permissions
        .into_iter()
        .filter(|p| crate::auth::allowed_named(caller, crate::auth::action_of(p), p, resource))
        .collect();
    Ok(iam::TestIamPermissionsResponse { permissions })
}
