//! The Instance Admin API (`google.bigtable.admin.v2.BigtableInstanceAdmin`):
//! instances, clusters and app profiles ([`crate::namespaces`] keeps them) and IAM
//! policies on instances ([`crate::iam`]). Changes finish before the answer, so their
//! long-running operations come back done ([`crate::operations`]).

use almanac_api::google::bigtable::admin::v2 as pb;
use almanac_api::google::bigtable::admin::v2::bigtable_instance_admin_server::BigtableInstanceAdmin;
use almanac_api::google::iam::v1 as iam;
use almanac_api::google::longrunning::Operation;
use almanac_auth::Action;
use almanac_engine::Engine;
use tonic::{Request, Response, Status};

use crate::convert::timestamp;
use crate::data::blocking;
use crate::namespaces::{Registry, mask_paths};
use crate::operations::done;
use crate::status::invalid;
use crate::{iam as policies, names};

/// Instance Admin over one engine.
#[derive(Clone)]
pub struct InstanceAdminService {
    engine: Engine,
    registry: Registry,
}

impl InstanceAdminService {
    /// Serves `engine`, whose instances `registry` keeps.
    pub fn new(engine: Engine, registry: Registry) -> Self {
        Self { engine, registry }
    }

    /// Runs `f` on the registry on a blocking thread.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Registry) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let registry = self.registry.clone();
        blocking(move || f(&registry)).await
    }

    fn now(&self) -> Option<prost_types::Timestamp> {
        Some(timestamp(self.engine.now_us()))
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

/// An IAM resource of this service: an instance.
fn iam_resource(resource: &str) -> Result<String, Status> {
    names::instance(resource)
}

#[tonic::async_trait]
impl BigtableInstanceAdmin for InstanceAdminService {
    async fn create_instance(
        &self,
        request: Request<pb::CreateInstanceRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let inst = self.run(move |r| r.create_instance(req)).await?;
        let meta = pb::CreateInstanceMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&inst.name, &meta, &inst)))
    }

    async fn get_instance(
        &self,
        request: Request<pb::GetInstanceRequest>,
    ) -> Result<Response<pb::Instance>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.instances.get",
            &request.get_ref().name,
        )?;
        let name = names::instance(&request.get_ref().name)?;
        Ok(Response::new(self.run(move |r| r.instance(&name)).await?))
    }

    async fn list_instances(
        &self,
        request: Request<pb::ListInstancesRequest>,
    ) -> Result<Response<pb::ListInstancesResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.instances.list",
            &request.get_ref().parent,
        )?;
        let p = project(&request.get_ref().parent)?.to_owned();
        let instances = self.run(move |r| r.instances(&p)).await?;
        Ok(Response::new(pb::ListInstancesResponse {
            instances,
            failed_locations: vec![],
            next_page_token: String::new(),
        }))
    }

    async fn update_instance(
        &self,
        request: Request<pb::Instance>,
    ) -> Result<Response<pb::Instance>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.update",
            &request.get_ref().name,
        )?;
        let update = request.into_inner();
        let paths = ["display_name", "type", "labels"]
            .map(String::from)
            .to_vec();
        Ok(Response::new(
            self.run(move |r| r.update_instance(update, &paths)).await?,
        ))
    }

    async fn partial_update_instance(
        &self,
        request: Request<pb::PartialUpdateInstanceRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.update",
            request
                .get_ref()
                .instance
                .as_ref()
                .map_or("", |i| i.name.as_str()),
        )?;
        let req = request.into_inner();
        let start = self.now();
        let paths = mask_paths(req.update_mask.as_ref(), "the instance")?;
        let update = req.instance.clone().unwrap_or_default();
        let inst = self.run(move |r| r.update_instance(update, &paths)).await?;
        let meta = pb::UpdateInstanceMetadata {
            original_request: Some(req),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&inst.name, &meta, &inst)))
    }

    async fn delete_instance(
        &self,
        request: Request<pb::DeleteInstanceRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.delete",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        self.run(move |r| r.delete_instance(&name)).await?;
        Ok(Response::new(()))
    }

    async fn create_cluster(
        &self,
        request: Request<pb::CreateClusterRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.clusters.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        let start = self.now();
        let original = req.clone();
        let c = self.run(move |r| r.create_cluster(req)).await?;
        let meta = pb::CreateClusterMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
            ..pb::CreateClusterMetadata::default()
        };
        Ok(Response::new(done(&c.name, &meta, &c)))
    }

    async fn get_cluster(
        &self,
        request: Request<pb::GetClusterRequest>,
    ) -> Result<Response<pb::Cluster>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.clusters.get",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        Ok(Response::new(self.run(move |r| r.cluster(&name)).await?))
    }

    async fn list_clusters(
        &self,
        request: Request<pb::ListClustersRequest>,
    ) -> Result<Response<pb::ListClustersResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.clusters.list",
            &request.get_ref().parent,
        )?;
        let instance = names::instance(&request.get_ref().parent)?;
        let clusters = self
            .run(move |r| {
                // Instance "-" means every instance of the project (as on the service).
                match instance.strip_suffix("/instances/-") {
                    Some(project) => {
                        let id = project.trim_start_matches("projects/");
                        let mut all = Vec::new();
                        for i in r.instances(id)? {
                            all.extend(r.clusters(&i.name)?);
                        }
                        Ok(all)
                    }
                    None => r.clusters(&instance),
                }
            })
            .await?;
        Ok(Response::new(pb::ListClustersResponse {
            clusters,
            failed_locations: vec![],
            next_page_token: String::new(),
        }))
    }

    async fn update_cluster(
        &self,
        request: Request<pb::Cluster>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.clusters.update",
            &request.get_ref().name,
        )?;
        let update = request.into_inner();
        let start = self.now();
        let original = update.clone();
        let c = self.run(move |r| r.update_cluster(update, &[])).await?;
        let meta = pb::UpdateClusterMetadata {
            original_request: Some(original),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&c.name, &meta, &c)))
    }

    async fn partial_update_cluster(
        &self,
        request: Request<pb::PartialUpdateClusterRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.clusters.update",
            request
                .get_ref()
                .cluster
                .as_ref()
                .map_or("", |c| c.name.as_str()),
        )?;
        let req = request.into_inner();
        let start = self.now();
        let paths = mask_paths(req.update_mask.as_ref(), "the cluster")?;
        let update = req.cluster.clone().unwrap_or_default();
        let c = self.run(move |r| r.update_cluster(update, &paths)).await?;
        let meta = pb::PartialUpdateClusterMetadata {
            original_request: Some(req),
            request_time: start,
            finish_time: self.now(),
        };
        Ok(Response::new(done(&c.name, &meta, &c)))
    }

    async fn delete_cluster(
        &self,
        request: Request<pb::DeleteClusterRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.clusters.delete",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        self.run(move |r| r.delete_cluster(&name)).await?;
        Ok(Response::new(()))
    }

    async fn create_app_profile(
        &self,
        request: Request<pb::CreateAppProfileRequest>,
    ) -> Result<Response<pb::AppProfile>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.appProfiles.create",
            &request.get_ref().parent,
        )?;
        let req = request.into_inner();
        Ok(Response::new(
            self.run(move |r| r.create_profile(req)).await?,
        ))
    }

    async fn get_app_profile(
        &self,
        request: Request<pb::GetAppProfileRequest>,
    ) -> Result<Response<pb::AppProfile>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.appProfiles.get",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        Ok(Response::new(self.run(move |r| r.profile(&name)).await?))
    }

    async fn list_app_profiles(
        &self,
        request: Request<pb::ListAppProfilesRequest>,
    ) -> Result<Response<pb::ListAppProfilesResponse>, Status> {
        crate::auth::check_named(
            &request,
            Action::Read,
            "bigtable.appProfiles.list",
            &request.get_ref().parent,
        )?;
        let instance = names::instance(&request.get_ref().parent)?;
        let app_profiles = self.run(move |r| r.profiles(&instance)).await?;
        Ok(Response::new(pb::ListAppProfilesResponse {
            app_profiles,
            next_page_token: String::new(),
            failed_locations: vec![],
        }))
    }

    async fn update_app_profile(
        &self,
        request: Request<pb::UpdateAppProfileRequest>,
    ) -> Result<Response<Operation>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.appProfiles.update",
            request
                .get_ref()
                .app_profile
                .as_ref()
                .map_or("", |p| p.name.as_str()),
        )?;
        let req = request.into_inner();
        let paths = mask_paths(req.update_mask.as_ref(), "the app profile")?;
        let update = req.app_profile.unwrap_or_default();
        let p = self.run(move |r| r.update_profile(update, &paths)).await?;
        Ok(Response::new(done(
            &p.name,
            &pb::UpdateAppProfileMetadata::default(),
            &p,
        )))
    }

    async fn delete_app_profile(
        &self,
        request: Request<pb::DeleteAppProfileRequest>,
    ) -> Result<Response<()>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.appProfiles.delete",
            &request.get_ref().name,
        )?;
        let name = request.into_inner().name;
        self.run(move |r| r.delete_profile(&name)).await?;
        Ok(Response::new(()))
    }

    async fn get_iam_policy(
        &self,
        request: Request<iam::GetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.getIamPolicy",
            &request.get_ref().resource,
        )?;
        let resource = iam_resource(&request.get_ref().resource)?;
        let engine = self.engine.clone();
        Ok(Response::new(
            blocking(move || policies::get(&engine, &resource)).await?,
        ))
    }

    async fn set_iam_policy(
        &self,
        request: Request<iam::SetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        crate::auth::check_named(
            &request,
            Action::Administer,
            "bigtable.instances.setIamPolicy",
            &request.get_ref().resource,
        )?;
        let req = request.into_inner();
        let resource = iam_resource(&req.resource)?;
        let engine = self.engine.clone();
        Ok(Response::new(
            blocking(move || policies::set(&engine, &resource, req.policy)).await?,
        ))
    }

    async fn test_iam_permissions(
        &self,
        request: Request<iam::TestIamPermissionsRequest>,
    ) -> Result<Response<iam::TestIamPermissionsResponse>, Status> {
        let caller = crate::auth::Caller::of(&request)?;
        let req = request.into_inner();
        iam_resource(&req.resource)?;
        Ok(Response::new(policies::test(
            &caller,
            &req.resource,
            req.permissions,
        )?))
    }
}
