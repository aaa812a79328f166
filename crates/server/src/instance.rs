//! Just enough of the Instance Admin API for clients and `cbt`: every
//! `projects/{p}/instances/{i}` exists (instances are namespaces), with one cluster
//! and the default app profile.

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_api::google::bigtable::admin::v2::bigtable_instance_admin_server::BigtableInstanceAdmin;
use almanac_engine::Engine;
use tonic::{Request, Response, Status};

use crate::data::blocking;
use crate::names;
use crate::status::{IntoStatus, invalid};

/// The cluster id every instance reports.
const CLUSTER_ID: &str = "almanac";
/// The app profile every instance has.
const DEFAULT_APP_PROFILE: &str = "default";
/// The zone every cluster reports.
const ZONE: &str = "local";

/// Instance Admin over one engine.
#[derive(Clone)]
pub struct InstanceAdminService {
    engine: Engine,
}

impl InstanceAdminService {
    /// Serves `engine`.
    pub fn new(engine: Engine) -> Self {
        Self { engine }
    }
}

fn project(parent: &str) -> Result<&str, Status> {
    match parent.split('/').collect::<Vec<_>>().as_slice() {
        ["projects", p] if !p.is_empty() => Ok(p),
        _ => Err(invalid(format!(
            "invalid project name {parent:?}: expected projects/{{project}}"
        ))),
    }
}

fn instance_proto(name: &str) -> pb::Instance {
    let id = name.rsplit('/').next().unwrap_or_default();
    pb::Instance {
        name: name.to_owned(),
        display_name: id.to_owned(),
        state: pb::instance::State::Ready as i32,
        r#type: pb::instance::Type::Production as i32,
        ..pb::Instance::default()
    }
}

/// The one app profile of an instance: `default`, routing every request to its one
/// cluster.
fn default_profile(instance: &str) -> pb::AppProfile {
    pb::AppProfile {
        name: format!("{instance}/appProfiles/{DEFAULT_APP_PROFILE}"),
        description: "Almanac's single-cluster default profile".into(),
        routing_policy: Some(pb::app_profile::RoutingPolicy::SingleClusterRouting(
            pb::app_profile::SingleClusterRouting {
                cluster_id: CLUSTER_ID.into(),
                allow_transactional_writes: true,
            },
        )),
        ..pb::AppProfile::default()
    }
}

fn cluster_proto(instance: &str) -> pb::Cluster {
    pb::Cluster {
        name: format!("{instance}/clusters/{CLUSTER_ID}"),
        location: format!("projects/-/locations/{ZONE}"),
        state: pb::cluster::State::Ready as i32,
        serve_nodes: 1,
        default_storage_type: pb::StorageType::Ssd as i32,
        ..pb::Cluster::default()
    }
}

#[tonic::async_trait]
impl BigtableInstanceAdmin for InstanceAdminService {
    async fn get_instance(
        &self,
        request: Request<pb::GetInstanceRequest>,
    ) -> Result<Response<pb::Instance>, Status> {
        let name = names::instance(&request.get_ref().name)?;
        Ok(Response::new(instance_proto(&name)))
    }

    async fn list_instances(
        &self,
        request: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        let p = project(&request.get_ref().parent)?.to_owned();
        let engine = self.engine.clone();
        let all = blocking(move || engine.list_instances().status()).await?;
        let prefix = format!("projects/{p}/instances/");
        let instances = all
            .iter()
            .filter(|i| i.starts_with(&prefix))
            .map(|i| instance_proto(i))
            .collect();
        Ok(Response::new(pb::ListInstancesResponse {
            instances,
            failed_locations: vec![],
            next_page_token: String::new(),
        }))
    }

    async fn get_cluster(
        &self,
        request: Request<pb::GetClusterRequest>,
    ) -> Result<Response<pb::Cluster>, Status> {
        let name = &request.get_ref().name;
        let Some((instance, cluster)) = name.split_once("/clusters/") else {
            return Err(invalid(format!("invalid cluster name {name:?}")));
        };
        names::instance(instance)?;
        if cluster != CLUSTER_ID {
            return Err(Status::not_found(format!("cluster not found: {name}")));
        }
        Ok(Response::new(cluster_proto(instance)))
    }

    async fn list_clusters(
        &self,
        request: Request<pb::ListClustersRequest>,
    ) -> Result<Response<pb::ListClustersResponse>, Status> {
        let instance = names::instance(&request.get_ref().parent)?;
        // Instance "-" means every instance of the project (as on the service).
        let clusters = match instance.strip_suffix("/instances/-") {
            Some(project) => {
                let prefix = format!("{project}/instances/");
                let engine = self.engine.clone();
                let all = blocking(move || engine.list_instances().status()).await?;
                all.iter()
                    .filter(|i| i.starts_with(&prefix))
                    .map(|i| cluster_proto(i))
                    .collect()
            }
            None => vec![cluster_proto(&instance)],
        };
        Ok(Response::new(pb::ListClustersResponse {
            clusters,
            failed_locations: vec![],
            next_page_token: String::new(),
        }))
    }

    async fn get_app_profile(
        &self,
        request: Request<pb::GetAppProfileRequest>,
    ) -> Result<Response<pb::AppProfile>, Status> {
        let name = request.get_ref().name.clone();
        match name.split_once("/appProfiles/") {
            Some((instance, DEFAULT_APP_PROFILE)) => {
                let instance = names::instance(instance)?;
                Ok(Response::new(default_profile(&instance)))
            }
            _ => Err(Status::not_found(format!("app profile not found: {name}"))),
        }
    }

    async fn list_app_profiles(
        &self,
        request: Request<pb::ListAppProfilesRequest>,
    ) -> Result<Response<pb::ListAppProfilesResponse>, Status> {
        let instance = names::instance(&request.get_ref().parent)?;
        Ok(Response::new(pb::ListAppProfilesResponse {
            app_profiles: vec![default_profile(&instance)],
            next_page_token: String::new(),
            failed_locations: vec![],
        }))
    }
}
