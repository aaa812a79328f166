//! IAM policy bindings as grants: a principal that its role and scope do not allow a
//! Bigtable call may still be granted it by the IAM policy of the table or of its
//! instance (`SetIamPolicy`), as on Cloud Bigtable. A binding grants its role to the
//! principals its members name: `user:NAME` or `principal:NAME` (a principal's name),
//! `allAuthenticatedUsers` and `allUsers` (every principal). The predefined roles:
//!
//! | role | grants |
//! |---|---|
//! | `roles/bigtable.admin` | everything |
//! | `roles/bigtable.user` | reading and writing data, and metadata |
//! | `roles/bigtable.reader` | reading data and metadata |
//! | `roles/bigtable.viewer` | metadata (`…get`, `…list`) |
//!
//! Other roles grant nothing. Timestream resources have no IAM policies.

use almanac_api::google::iam::v1 as iam;
use almanac_auth::{Action, Resource};
use almanac_engine::Engine;

/// Where a caller's IAM grants are read from (`None`: no policies are consulted).
#[derive(Clone, Default)]
pub struct Grants(Option<Engine>);

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Grants(policies)"
        } else {
            "Grants(none)"
        })
    }
}

/// Whether `role` grants `action` (`permission`).
fn role_grants(role: &str, action: Action, permission: &str) -> bool {
    match role {
        "roles/bigtable.admin" => true,
        "roles/bigtable.user" => matches!(action, Action::Read | Action::Write),
        "roles/bigtable.reader" => action == Action::Read,
        "roles/bigtable.viewer" => {
            action == Action::Read && matches!(permission.rsplit('.').next(), Some("get" | "list"))
        }
        _ => false,
    }
}

/// Whether a binding's `member` names principal `name`.
fn names(member: &str, name: &str) -> bool {
    match member.split_once(':') {
        Some(("user" | "principal", who)) => who == name,
        _ => matches!(member, "allAuthenticatedUsers" | "allUsers"),
    }
}

/// Whether `policy` grants principal `name` the action.
fn policy_grants(policy: &iam::Policy, name: &str, action: Action, permission: &str) -> bool {
    policy.bindings.iter().any(|b| {
        role_grants(&b.role, action, permission) && b.members.iter().any(|m| names(m, name))
    })
}

impl Grants {
    /// Grants read from the IAM policies `engine` keeps.
    pub fn from(engine: Engine) -> Self {
        Self(Some(engine))
    }

    /// Whether a policy on `resource` (or, for a table, on its instance) grants
    /// principal `name` the action.
    pub fn allow(
        &self,
        name: &str,
        action: Action,
        permission: &str,
        resource: &Resource<'_>,
    ) -> bool {
        let Some(engine) = &self.0 else {
            return false;
        };
        let resources = match resource {
            Resource::Table { instance, table } => {
                vec![format!("{instance}/tables/{table}"), (*instance).to_owned()]
            }
            Resource::Instance(instance) => vec![(*instance).to_owned()],
            _ => return false,
        };
        resources.iter().any(|r| {
            crate::iam::get(engine, r)
                .is_ok_and(|policy| policy_grants(&policy, name, action, permission))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_members_grant_as_documented() {
        let policy = iam::Policy {
            bindings: vec![
                iam::Binding {
                    role: "roles/bigtable.user".into(),
                    members: vec!["user:alice".into()],
                    ..iam::Binding::default()
                },
                iam::Binding {
                    role: "roles/bigtable.viewer".into(),
                    members: vec!["allAuthenticatedUsers".into()],
                    ..iam::Binding::default()
                },
            ],
            ..iam::Policy::default()
        };
        let p = "bigtable.tables.mutateRows";
        assert!(policy_grants(&policy, "alice", Action::Write, p));
        assert!(!policy_grants(
            &policy,
            "alice",
            Action::Administer,
            "bigtable.tables.delete"
        ));
        assert!(!policy_grants(&policy, "bob", Action::Write, p));
        assert!(policy_grants(
            &policy,
            "bob",
            Action::Read,
            "bigtable.tables.get"
        ));
        assert!(!policy_grants(
            &policy,
            "bob",
            Action::Read,
            "bigtable.tables.readRows"
        ));
        assert!(!names("user:alice2", "alice") && names("principal:alice", "alice"));
    }
}
