//! Instances, clusters and app profiles as the Instance Admin API manages them.
//!
//! An instance is the engine's namespace for tables. Every well-formed instance name
//! exists **implicitly**, as on the official emulator: it has one cluster
//! ([`DEFAULT_CLUSTER`], zone `local`) and the `default` app profile, so clients can
//! use any instance without creating it. `CreateInstance` makes an instance
//! **explicit**: its record, clusters and app profiles are kept in the engine's
//! settings (each under its resource name, as protobuf), and changing an implicit
//! instance (a cluster's nodes, a new app profile) first writes down its implicit
//! parts. `DeleteInstance` deletes the instance's tables, snapshots and records.
//!
//! Clusters are bookkeeping: one engine serves all of an instance's data, so a
//! cluster's nodes, zone and storage type are kept and returned but change nothing.
//!
//! Read-modify-write changes take one lock ([`Registry`]), so two admin calls never
//! lose each other's update.

use std::sync::{Arc, Mutex, MutexGuard};

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_engine::Engine;
use prost::Message;
use tonic::Status;

use crate::convert::timestamp;

mod rules;
use crate::status::{IntoStatus, invalid};
use rules::{
    INSTANCE_ID_CHARS, MAX_CLUSTERS_PER_INSTANCE, check_display_name, check_id, check_profile_id,
    default_cluster, default_profile, implicit_instance, new_cluster, routes_to,
};
pub use rules::{mask_paths, split_child};

/// The cluster of an implicit instance.
pub const DEFAULT_CLUSTER: &str = "almanac";
/// The app profile every instance has.
pub const DEFAULT_APP_PROFILE: &str = "default";

/// The registry of instances over one engine. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    engine: Engine,
    lock: Arc<Mutex<()>>,
}

/// The stored record of resource `name`.
fn decode<M: Message + Default>(name: &str, bytes: &[u8]) -> Result<M, Status> {
    M::decode(bytes).map_err(|e| Status::data_loss(format!("stored record of {name}: {e}")))
}

/// A change to the settings: the resource name and its new record (`None`: removed).
type Change = (String, Option<Vec<u8>>);

fn put<M: Message>(name: &str, m: &M) -> Change {
    (name.to_owned(), Some(m.encode_to_vec()))
}

impl Registry {
    /// A registry over `engine`.
    pub fn new(engine: Engine) -> Self {
        Self {
            engine,
            lock: Arc::new(Mutex::new(())),
        }
    }

    fn guard(&self) -> Result<MutexGuard<'_, ()>, Status> {
        self.lock
            .lock()
            .map_err(|_| Status::internal("instance registry lock poisoned"))
    }

    fn load<M: Message + Default>(&self, name: &str) -> Result<Option<M>, Status> {
        match self.engine.setting(name).status()? {
            Some(b) => decode(name, &b).map(Some),
            None => Ok(None),
        }
    }

    /// The records of kind `kind` (`clusters`, `appProfiles`) under `instance`.
    fn children<M: Message + Default>(&self, instance: &str, kind: &str) -> Result<Vec<M>, Status> {
        self.records(&format!("{instance}/{kind}/"))
    }

    /// The records directly under `prefix` (not those of their children, nor their
    /// IAM policies).
    fn records<M: Message + Default>(&self, prefix: &str) -> Result<Vec<M>, Status> {
        let mut out = Vec::new();
        for (key, bytes) in self.engine.settings(prefix).status()? {
            if !key[prefix.len()..].contains(['/', '#']) {
                out.push(decode(&key, &bytes)?);
            }
        }
        Ok(out)
    }

    fn stored(&self, instance: &str) -> Result<Option<pb::Instance>, Status> {
        self.load(instance)
    }

    /// The instance named `name` (implicit if never created).
    pub fn instance(&self, name: &str) -> Result<pb::Instance, Status> {
        Ok(self
            .stored(name)?
            .unwrap_or_else(|| implicit_instance(name)))
    }

    /// The instances of `project`: those created and those holding tables.
    pub fn instances(&self, project: &str) -> Result<Vec<pb::Instance>, Status> {
        let prefix = format!("projects/{project}/instances/");
        let mut out: Vec<pb::Instance> = self.records(&prefix)?;
        for name in self.engine.list_instances().status()? {
            if name.starts_with(&prefix) && !out.iter().any(|i| i.name == name) {
                out.push(implicit_instance(&name));
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The clusters of `instance`.
    pub fn clusters(&self, instance: &str) -> Result<Vec<pb::Cluster>, Status> {
        if self.stored(instance)?.is_none() {
            return Ok(vec![default_cluster(instance)]);
        }
        self.children(instance, "clusters")
    }

    /// The cluster named `name`.
    pub fn cluster(&self, name: &str) -> Result<pb::Cluster, Status> {
        let (instance, _) = split_child(name, "clusters")?;
        self.clusters(&instance)?
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| Status::not_found(format!("cluster not found: {name}")))
    }

    /// The app profiles of `instance`.
    pub fn profiles(&self, instance: &str) -> Result<Vec<pb::AppProfile>, Status> {
        if self.stored(instance)?.is_none() {
            return Ok(vec![default_profile(instance, DEFAULT_CLUSTER)]);
        }
        self.children(instance, "appProfiles")
    }

    /// The app profile named `name`.
    pub fn profile(&self, name: &str) -> Result<pb::AppProfile, Status> {
        let (instance, _) = split_child(name, "appProfiles")?;
        self.profiles(&instance)?
            .into_iter()
            .find(|p| p.name == name)
            .ok_or_else(|| Status::not_found(format!("app profile not found: {name}")))
    }

    /// The records that make an implicit instance explicit (none if it is already).
    fn materialize(&self, instance: &str) -> Result<Vec<Change>, Status> {
        if self.stored(instance)?.is_some() {
            return Ok(Vec::new());
        }
        let mut i = implicit_instance(instance);
        i.create_time = Some(timestamp(self.engine.now_us()));
        let c = default_cluster(instance);
        let p = default_profile(instance, DEFAULT_CLUSTER);
        Ok(vec![put(instance, &i), put(&c.name, &c), put(&p.name, &p)])
    }

    fn write(&self, changes: Vec<Change>) -> Result<(), Status> {
        self.engine.put_settings(&changes).status()
    }

    /// `CreateInstance`: the instance, its clusters and its `default` app profile.
    pub fn create_instance(&self, req: pb::CreateInstanceRequest) -> Result<pb::Instance, Status> {
        let project = req
            .parent
            .strip_prefix("projects/")
            .filter(|p| !p.is_empty() && !p.contains('/'))
            .ok_or_else(|| invalid(format!("invalid project name {:?}", req.parent)))?;
        check_id("instance", &req.instance_id, INSTANCE_ID_CHARS)?;
        let name = format!("projects/{project}/instances/{}", req.instance_id);
        let mut inst = req.instance.unwrap_or_default();
        if inst.display_name.is_empty() {
            inst.display_name = req.instance_id.clone();
        }
        check_display_name(&inst.display_name)?;
        if req.clusters.is_empty() || req.clusters.len() > MAX_CLUSTERS_PER_INSTANCE {
            return Err(invalid(format!(
                "an instance has 1 to {MAX_CLUSTERS_PER_INSTANCE} clusters; the request names {}",
                req.clusters.len()
            )));
        }
        let _g = self.guard()?;
        let has_tables = !self.engine.list_tables(&name).status()?.is_empty();
        if self.stored(&name)?.is_some() || has_tables {
            return Err(Status::already_exists(format!(
                "instance already exists: {name}"
            )));
        }
        let now = self.engine.now_us();
        inst.name = name.clone();
        inst.state = pb::instance::State::Ready as i32;
        if inst.r#type == pb::instance::Type::Unspecified as i32 {
            inst.r#type = pb::instance::Type::Production as i32;
        }
        inst.create_time = Some(timestamp(now));
        let mut changes = vec![put(&name, &inst)];
        let mut ids: Vec<&String> = req.clusters.keys().collect();
        ids.sort();
        for id in &ids {
            let c = new_cluster(&name, id, req.clusters[*id].clone())?;
            changes.push(put(&c.name, &c));
        }
        let p = default_profile(&name, ids[0]);
        changes.push(put(&p.name, &p));
        self.write(changes)?;
        Ok(inst)
    }

    /// `UpdateInstance` and `PartialUpdateInstance`: the fields `paths` names.
    pub fn update_instance(
        &self,
        update: pb::Instance,
        paths: &[String],
    ) -> Result<pb::Instance, Status> {
        let name = crate::names::instance(&update.name)?;
        let _g = self.guard()?;
        let mut changes = self.materialize(&name)?;
        let mut inst = self.instance(&name)?;
        if let Some((_, Some(bytes))) = changes.first() {
            inst = pb::Instance::decode(bytes.as_slice()).unwrap_or(inst);
        }
        for path in paths {
            match path.as_str() {
                "display_name" => {
                    check_display_name(&update.display_name)?;
                    inst.display_name = update.display_name.clone();
                }
                "labels" => inst.labels = update.labels.clone(),
                "type" => {
                    if update.r#type == pb::instance::Type::Unspecified as i32 {
                        return Err(invalid("instance type must be PRODUCTION or DEVELOPMENT"));
                    }
                    inst.r#type = update.r#type;
                }
                other => {
                    return Err(invalid(format!(
                        "update_mask names {other:?}; an instance update sets display_name, \
                         labels or type"
                    )));
                }
            }
        }
        changes.retain(|(k, _)| k != &name);
        changes.push(put(&name, &inst));
        self.write(changes)?;
        Ok(inst)
    }

    /// `DeleteInstance`: its tables, snapshots and records.
    pub fn delete_instance(&self, name: &str) -> Result<(), Status> {
        let name = crate::names::instance(name)?;
        let _g = self.guard()?;
        self.engine.delete_instance(&name).status()
    }

    /// `CreateCluster`.
    pub fn create_cluster(&self, req: pb::CreateClusterRequest) -> Result<pb::Cluster, Status> {
        let instance = crate::names::instance(&req.parent)?;
        let _g = self.guard()?;
        let mut changes = self.materialize(&instance)?;
        let mut existing = self.children::<pb::Cluster>(&instance, "clusters")?;
        existing.extend(
            changes
                .iter()
                .filter(|(k, _)| k.contains("/clusters/"))
                .filter_map(|(_, v)| pb::Cluster::decode(v.as_deref()?).ok()),
        );
        let c = new_cluster(&instance, &req.cluster_id, req.cluster.unwrap_or_default())?;
        if existing.iter().any(|e| e.name == c.name) {
            return Err(Status::already_exists(format!(
                "cluster already exists: {}",
                c.name
            )));
        }
        if existing.len() >= MAX_CLUSTERS_PER_INSTANCE {
            return Err(Status::resource_exhausted(format!(
                "instance {instance} has {} clusters, the limit of {MAX_CLUSTERS_PER_INSTANCE}",
                existing.len()
            )));
        }
        changes.push(put(&c.name, &c));
        self.write(changes)?;
        Ok(c)
    }

    /// `UpdateCluster` (`paths` empty: its nodes) and `PartialUpdateCluster`.
    pub fn update_cluster(
        &self,
        update: pb::Cluster,
        paths: &[String],
    ) -> Result<pb::Cluster, Status> {
        let (instance, _) = split_child(&update.name, "clusters")?;
        let _g = self.guard()?;
        let changes = self.materialize(&instance)?;
        self.write(changes)?;
        let mut c = self.cluster(&update.name)?;
        let set_nodes = paths.is_empty() || paths.iter().any(|p| p == "serve_nodes");
        for path in paths {
            match path.as_str() {
                "serve_nodes" => {}
                "cluster_config.cluster_autoscaling_config" => c.config = update.config,
                other => {
                    return Err(invalid(format!(
                        "update_mask names {other:?}; a cluster update sets serve_nodes or \
                         cluster_config.cluster_autoscaling_config"
                    )));
                }
            }
        }
        if set_nodes {
            if update.serve_nodes < 0 {
                return Err(invalid(format!(
                    "serve_nodes must not be negative, got {}",
                    update.serve_nodes
                )));
            }
            c.serve_nodes = update.serve_nodes;
        }
        self.write(vec![put(&c.name, &c)])?;
        Ok(c)
    }

    /// `DeleteCluster`: refused for the last cluster and for one an app profile uses.
    pub fn delete_cluster(&self, name: &str) -> Result<(), Status> {
        let (instance, id) = split_child(name, "clusters")?;
        let _g = self.guard()?;
        let clusters = self.clusters(&instance)?;
        if !clusters.iter().any(|c| c.name == name) {
            return Err(Status::not_found(format!("cluster not found: {name}")));
        }
        if clusters.len() == 1 {
            return Err(Status::failed_precondition(format!(
                "{name} is the last cluster of its instance; delete the instance instead"
            )));
        }
        if let Some(p) = self.profiles(&instance)?.iter().find(|p| routes_to(p, id)) {
            return Err(Status::failed_precondition(format!(
                "app profile {} routes to cluster {id}; change its routing first",
                p.name
            )));
        }
        self.write(vec![(name.to_owned(), None)])
    }

    /// `CreateAppProfile`.
    pub fn create_profile(
        &self,
        req: pb::CreateAppProfileRequest,
    ) -> Result<pb::AppProfile, Status> {
        let instance = crate::names::instance(&req.parent)?;
        check_profile_id(&req.app_profile_id)?;
        let _g = self.guard()?;
        let changes = self.materialize(&instance)?;
        self.write(changes)?;
        let name = format!("{instance}/appProfiles/{}", req.app_profile_id);
        if self.profiles(&instance)?.iter().any(|p| p.name == name) {
            return Err(Status::already_exists(format!(
                "app profile already exists: {name}"
            )));
        }
        let mut p = req.app_profile.unwrap_or_default();
        p.name = name;
        self.check_routing(&instance, &p)?;
        self.write(vec![put(&p.name, &p)])?;
        Ok(p)
    }

    /// `UpdateAppProfile`: the fields `paths` names.
    pub fn update_profile(
        &self,
        update: pb::AppProfile,
        paths: &[String],
    ) -> Result<pb::AppProfile, Status> {
        let (instance, _) = split_child(&update.name, "appProfiles")?;
        let _g = self.guard()?;
        let changes = self.materialize(&instance)?;
        self.write(changes)?;
        let mut p = self.profile(&update.name)?;
        for path in paths {
            match path.as_str() {
                "description" => p.description = update.description.clone(),
                "multi_cluster_routing_use_any" | "single_cluster_routing" => {
                    p.routing_policy = update.routing_policy.clone();
                }
                "standard_isolation" | "data_boost_isolation_read_only" | "priority" => {
                    p.isolation = update.isolation;
                }
                other => {
                    return Err(invalid(format!(
                        "update_mask names {other:?}; an app profile update sets description, \
                         multi_cluster_routing_use_any, single_cluster_routing, \
                         standard_isolation or data_boost_isolation_read_only"
                    )));
                }
            }
        }
        self.check_routing(&instance, &p)?;
        self.write(vec![put(&p.name, &p)])?;
        Ok(p)
    }

    /// `DeleteAppProfile`.
    pub fn delete_profile(&self, name: &str) -> Result<(), Status> {
        let (instance, _) = split_child(name, "appProfiles")?;
        let _g = self.guard()?;
        let changes = self.materialize(&instance)?;
        self.write(changes)?;
        self.profile(name)?;
        self.write(vec![(name.to_owned(), None)])
    }

    /// A profile's routing names clusters of its instance.
    fn check_routing(&self, instance: &str, p: &pb::AppProfile) -> Result<(), Status> {
        use pb::app_profile::RoutingPolicy;
        let clusters = self.clusters(instance)?;
        let known = |id: &str| {
            clusters
                .iter()
                .any(|c| c.name.ends_with(&format!("/clusters/{id}")))
        };
        let named: Vec<&str> = match &p.routing_policy {
            Some(RoutingPolicy::SingleClusterRouting(s)) => vec![s.cluster_id.as_str()],
            Some(RoutingPolicy::MultiClusterRoutingUseAny(m)) => {
                m.cluster_ids.iter().map(String::as_str).collect()
            }
            None => {
                return Err(invalid(format!(
                    "app profile {} needs a routing policy (single_cluster_routing or \
                     multi_cluster_routing_use_any)",
                    p.name
                )));
            }
        };
        match named.iter().find(|id| !known(id)) {
            Some(id) => Err(invalid(format!(
                "app profile {} routes to cluster {id:?}, which {instance} does not have",
                p.name
            ))),
            None => Ok(()),
        }
    }
}
