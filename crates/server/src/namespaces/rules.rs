//! The rules of instance, cluster and app profile requests: ids, names, masks and
//! the records an implicit instance has.

use std::ops::RangeInclusive;

use almanac_api::google::bigtable::admin::v2 as pb;
use tonic::Status;

use super::{DEFAULT_APP_PROFILE, DEFAULT_CLUSTER};
use crate::status::invalid;

/// The zone of an implicit instance's cluster.
pub(super) const ZONE: &str = "local";
/// Clusters one instance may have (Bigtable's limit).
pub(super) const MAX_CLUSTERS_PER_INSTANCE: usize = 8;
/// Length of an instance id (Bigtable's rule, with `[a-z][-a-z0-9]*[a-z0-9]`).
pub(super) const INSTANCE_ID_CHARS: RangeInclusive<usize> = 6..=33;
/// Length of a cluster id (same alphabet).
pub(super) const CLUSTER_ID_CHARS: RangeInclusive<usize> = 6..=30;
/// Length of an instance's display name.
pub(super) const DISPLAY_NAME_CHARS: RangeInclusive<usize> = 4..=30;
/// Length of an app profile id (`[_a-zA-Z0-9][-_.a-zA-Z0-9]*`).
pub(super) const APP_PROFILE_ID_CHARS: RangeInclusive<usize> = 1..=50;

/// Checks an id of lowercase letters, digits and hyphens, starting with a letter and
/// not ending with a hyphen, of a length in `chars`.
pub(super) fn check_id(kind: &str, id: &str, chars: RangeInclusive<usize>) -> Result<(), Status> {
    let ok = chars.contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_lowercase())
        && !id.ends_with('-')
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        return Ok(());
    }
    Err(invalid(format!(
        "invalid {kind} id {id:?}: {} to {} characters of a-z, 0-9 and '-', starting with \
         a letter and not ending with '-'",
        chars.start(),
        chars.end()
    )))
}

pub(super) fn check_profile_id(id: &str) -> Result<(), Status> {
    let ok = APP_PROFILE_ID_CHARS.contains(&id.len())
        && id.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        return Ok(());
    }
    Err(invalid(format!(
        "invalid app profile id {id:?}: {} to {} characters of [-_.a-zA-Z0-9], starting \
         with a letter, digit or '_'",
        APP_PROFILE_ID_CHARS.start(),
        APP_PROFILE_ID_CHARS.end()
    )))
}

/// Splits `{instance}/{kind}/{id}` into the instance and the id.
pub fn split_child<'a>(name: &'a str, kind: &str) -> Result<(String, &'a str), Status> {
    let sep = format!("/{kind}/");
    match name.split_once(&sep) {
        Some((instance, id)) if !id.is_empty() && !id.contains('/') => {
            Ok((crate::names::instance(instance)?, id))
        }
        _ => Err(invalid(format!(
            "invalid name {name:?}: expected projects/{{project}}/instances/{{instance}}{sep}{{id}}"
        ))),
    }
}

/// The update mask's paths; an empty mask is refused.
pub fn mask_paths(
    mask: Option<&prost_types::FieldMask>,
    what: &str,
) -> Result<Vec<String>, Status> {
    let paths = mask.map(|m| m.paths.clone()).unwrap_or_default();
    if paths.is_empty() {
        return Err(invalid(format!(
            "update_mask of {what} names no field to update"
        )));
    }
    Ok(paths)
}

pub(super) fn zone_of(location: &str) -> &str {
    location.rsplit('/').next().unwrap_or(location)
}

pub(super) fn default_cluster(instance: &str) -> pb::Cluster {
    let project = instance.split('/').nth(1).unwrap_or("-");
    pb::Cluster {
        name: format!("{instance}/clusters/{DEFAULT_CLUSTER}"),
        location: format!("projects/{project}/locations/{ZONE}"),
        state: pb::cluster::State::Ready as i32,
        serve_nodes: 1,
        default_storage_type: pb::StorageType::Ssd as i32,
        ..pb::Cluster::default()
    }
}

pub(super) fn default_profile(instance: &str, cluster: &str) -> pb::AppProfile {
    pb::AppProfile {
        name: format!("{instance}/appProfiles/{DEFAULT_APP_PROFILE}"),
        description: "Default application profile".into(),
        routing_policy: Some(pb::app_profile::RoutingPolicy::SingleClusterRouting(
            pb::app_profile::SingleClusterRouting {
                cluster_id: cluster.to_owned(),
                allow_transactional_writes: true,
            },
        )),
        ..pb::AppProfile::default()
    }
}

pub(super) fn implicit_instance(name: &str) -> pb::Instance {
    let id = name.rsplit('/').next().unwrap_or_default();
    pb::Instance {
        name: name.to_owned(),
        display_name: id.to_owned(),
        state: pb::instance::State::Ready as i32,
        r#type: pb::instance::Type::Production as i32,
        ..pb::Instance::default()
    }
}

pub(super) fn routes_to(p: &pb::AppProfile, cluster: &str) -> bool {
    use pb::app_profile::RoutingPolicy;
    match &p.routing_policy {
        Some(RoutingPolicy::SingleClusterRouting(s)) => s.cluster_id == cluster,
        Some(RoutingPolicy::MultiClusterRoutingUseAny(m)) => {
            m.cluster_ids.iter().any(|c| c == cluster)
        }
        None => false,
    }
}

pub(super) fn check_display_name(name: &str) -> Result<(), Status> {
    let n = name.chars().count();
    if DISPLAY_NAME_CHARS.contains(&n) {
        return Ok(());
    }
    Err(invalid(format!(
        "display name {name:?} has {n} characters; it has {} to {}",
        DISPLAY_NAME_CHARS.start(),
        DISPLAY_NAME_CHARS.end()
    )))
}

/// A new cluster `id` of `instance` from the request's fields.
pub(super) fn new_cluster(
    instance: &str,
    id: &str,
    mut c: pb::Cluster,
) -> Result<pb::Cluster, Status> {
    check_id("cluster", id, CLUSTER_ID_CHARS)?;
    if c.location.is_empty() || zone_of(&c.location).is_empty() {
        return Err(invalid(format!(
            "cluster {id} needs a location (projects/{{project}}/locations/{{zone}})"
        )));
    }
    if c.serve_nodes < 0 {
        return Err(invalid(format!(
            "serve_nodes must not be negative, got {}",
            c.serve_nodes
        )));
    }
    c.name = format!("{instance}/clusters/{id}");
    c.state = pb::cluster::State::Ready as i32;
    if c.default_storage_type == pb::StorageType::Unspecified as i32 {
        c.default_storage_type = pb::StorageType::Ssd as i32;
    }
    Ok(c)
}
