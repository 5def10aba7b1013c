//! The Kubernetes driver: a generation made through the API server, step
//! by step, each checked before the next (the order is the module docs'
//! of `kubernetes`); a step that fails removes what the start made.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{Endpoint, kit};
use serde_json::json;

use super::{
    AdmittedWorkload, FENCE, Generation, GenerationSpec, Names, OPENSHELL, PART_OF, ROLE,
    ROLE_SUPERVISOR, ROLE_WORKLOAD, SANDBOX, SANDBOX_PORT, SCHEDULING_GATE, SupervisorTrust,
    bootstrap_secret, fence, inspect, supervisor_pod, supervisor_secret, workload_pod,
};
use crate::driver::{Driver, DriverError, DriverFut, Launch, RunSpec};

/// What the driver needs besides the API client.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where every sandbox's objects go.
    pub namespace: String,
    /// The supervisor's image (`GenerationSpec::supervisor_image`).
    pub supervisor_image: String,
    /// The user and group both Pods run as; never 0.
    pub user: i64,
    /// See `user`.
    pub group: i64,
    /// How a supervisor Pod reaches the gateway.
    pub gateway_urls: Vec<String>,
    /// The gateway directory's `ca.pem`, read at every start.
    pub gateway_ca: PathBuf,
    /// The gateway directory's `trust.keys`, read at every start.
    pub trust_keys: PathBuf,
    /// Whether the sandbox listens on IPv6 (`[::]`) rather than IPv4: the
    /// cluster's Pod network family, which a workload Pod's IP must match.
    pub ipv6: bool,
    /// How long the workload Pod may take to get its IP, and the
    /// supervisor to attach and confirm enforcement.
    pub ready_within: Duration,
    /// How often a Pod's status is read while waiting for it.
    pub poll: Duration,
    /// More labels for every object.
    pub labels: BTreeMap<String, String>,
}

/// How long a sandbox stays frozen after its channel dropped: the
/// supervisor's Pod is never restarted, so this only covers a channel
/// that broke and was made again.
const REATTACH_WITHIN: u64 = 30;

/// How long a stop waits for the sandbox's Pods to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(60);

/// Runs sandboxes as two Pods each in one namespace.
#[derive(Clone)]
pub struct Kubernetes {
    client: Client,
    settings: Settings,
}

impl std::fmt::Debug for Kubernetes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubernetes")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn fail(what: &str, e: impl std::fmt::Display) -> DriverError {
    DriverError(format!("{what}: {e}"))
}

/// An API error's message and code, without kube's debug dump.
fn api(what: &str) -> impl Fn(kube::Error) -> DriverError + '_ {
    move |e| match e {
        kube::Error::Api(status) => DriverError(format!(
            "{what}: the API server answered {} {}: {}",
            status.code, status.reason, status.message
        )),
        other => fail(what, other),
    }
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

impl Kubernetes {
    /// A driver over `client`.
    #[must_use]
    pub fn new(client: Client, settings: Settings) -> Self {
        Self { client, settings }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    fn policies(&self) -> Api<NetworkPolicy> {
        Api::namespaced(self.client.clone(), &self.settings.namespace)
    }

    fn generation(&self, launch: &Launch) -> Result<Generation, DriverError> {
        let s = &self.settings;
        let generation = u64::try_from(launch.generation)
            .map_err(|_| DriverError(format!("generation {}", launch.generation)))?;
        let image = launch.spec.image.clone().ok_or_else(|| {
            DriverError("the Kubernetes driver needs `run.image`, the workload's image".into())
        })?;
        Generation::new(GenerationSpec {
            namespace: s.namespace.clone(),
            sandbox_id: launch.id.clone(),
            generation,
            image,
            command: launch.spec.command.clone(),
            timeout_seconds: launch.spec.timeout_seconds,
            workspace_claim: launch.spec.workspace.clone(),
            user: s.user,
            group: s.group,
            supervisor_image: s.supervisor_image.clone(),
            gateway_urls: s.gateway_urls.clone(),
            labels: s.labels.clone(),
        })
        .map_err(|e| fail("cannot make the generation's objects", e))
    }

    /// The generation's steps; the caller removes what a failure left.
    async fn start_generation(&self, launch: &Launch) -> Result<(), DriverError> {
        let g = self.generation(launch)?;
        let names = g.names().clone();
        self.remove_objects(&names.sandbox).await?;
        self.hold_fence().await?;

        let sent = workload_pod(&g);
        let created = self
            .pods()
            .create(&PostParams::default(), &sent)
            .await
            .map_err(api("cannot create the workload Pod"))?;
        let uid = inspect::admitted(&sent, &created).map_err(DriverError)?;

        let listen = if self.settings.ipv6 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        let binding = Binding {
            sandbox_id: launch.id.clone(),
            generation: g.spec().generation,
        };
        let kit = kit(
            &binding,
            &Endpoint::Tcp(SocketAddr::new(listen, SANDBOX_PORT)),
            REATTACH_WITHIN,
        )
        .map_err(|e| fail("cannot make the generation's channel keys", e))?;
        let trust = SupervisorTrust {
            session: json!({
                "id": launch.id, "generation": launch.generation,
                "token": launch.token, "expires_at": launch.token_expires_at,
            })
            .to_string()
            .into_bytes(),
            gateway_ca: read(&self.settings.gateway_ca)?,
            trust_keys: read(&self.settings.trust_keys)?,
            credential: kit.supervisor.clone(),
        };
        let secrets = [
            bootstrap_secret(&g, &uid, &kit.bootstrap),
            supervisor_secret(&g, &uid, &trust),
        ];
        for secret in secrets {
            let secret = secret.map_err(|e| fail("cannot make the generation's Secrets", e))?;
            self.secrets()
                .create(&PostParams::default(), &secret)
                .await
                .map_err(api("cannot create the generation's Secret"))?;
        }

        self.lift_gate(&names.workload_pod, &uid).await?;
        let ip = self.scheduled(&names.workload_pod, &uid).await?;
        if ip.is_ipv6() != self.settings.ipv6 {
            return Err(DriverError(format!(
                "the workload Pod got {ip}, but the sandbox listens on {listen}: set the driver's IP family to the cluster's"
            )));
        }
        let sent = supervisor_pod(
            &g,
            &AdmittedWorkload {
                uid: uid.clone(),
                ip,
            },
        )
        .map_err(|e| fail("cannot make the supervisor Pod", e))?;
        let created = self
            .pods()
            .create(&PostParams::default(), &sent)
            .await
            .map_err(api("cannot create the supervisor Pod"))?;
        let supervisor_uid = inspect::admitted(&sent, &created).map_err(DriverError)?;
        self.lift_gate(&names.supervisor_pod, &supervisor_uid)
            .await?;
        self.ready(&names, &uid, &supervisor_uid).await
    }

    /// The namespace's fence, made when missing; one that differs from
    /// what the driver makes (narrowed or widened by someone) stops the
    /// start rather than being overwritten or trusted.
    async fn hold_fence(&self) -> Result<(), DriverError> {
        let want = fence(&self.settings.namespace).map_err(|e| fail("the fence", e))?;
        let found = self
            .policies()
            .get_opt(FENCE)
            .await
            .map_err(api("cannot read the namespace's fence"))?;
        let found = match found {
            Some(found) => found,
            None => match self.policies().create(&PostParams::default(), &want).await {
                Ok(made) => made,
                // Another gateway made it meanwhile: compare theirs.
                Err(kube::Error::Api(s)) if s.code == 409 => self
                    .policies()
                    .get(FENCE)
                    .await
                    .map_err(api("cannot read the namespace's fence"))?,
                Err(e) => return Err(api("cannot create the namespace's fence")(e)),
            },
        };
        if found.spec != want.spec {
            return Err(DriverError(format!(
                "the NetworkPolicy `{FENCE}` in namespace `{}` is not the driver's fence (workload Pods send nothing and receive only supervisors' connections on port {SANDBOX_PORT}); restore or delete it",
                self.settings.namespace
            )));
        }
        Ok(())
    }

    /// Removes the driver's scheduling gate from Pod `name`, if it is still
    /// the Pod `uid` (the uid in a patch is a precondition).
    async fn lift_gate(&self, name: &str, uid: &str) -> Result<(), DriverError> {
        let patch = json!({
            "metadata": { "uid": uid },
            "spec": { "schedulingGates": null },
        });
        self.pods()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(api(&format!(
                "cannot lift the scheduling gate `{SCHEDULING_GATE}` of Pod `{name}`"
            )))?;
        Ok(())
    }

    /// Reads Pod `name` until it has an IP; an error if it ended, went or
    /// was replaced first, or took longer than `ready_within`.
    async fn scheduled(&self, name: &str, uid: &str) -> Result<IpAddr, DriverError> {
        let deadline = tokio::time::Instant::now() + self.settings.ready_within;
        loop {
            let pod = self.current(name, uid).await?;
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .filter(|ip| !ip.is_empty());
            if let Some(ip) = ip {
                return ip.parse().map_err(|e| {
                    fail(
                        &format!("Pod `{name}` has the IP `{ip}`, which is not one"),
                        e,
                    )
                });
            }
            self.wait(deadline, &format!("Pod `{name}` got no IP"))
                .await?;
        }
    }

    /// Reads both Pods until the supervisor's is `Ready` (the sandbox's
    /// evidence accepted and its workload running), or both ended with the
    /// workload's exit status (it ran, and ended before a probe saw it
    /// ready); an error if either ended otherwise, went or was replaced.
    async fn ready(
        &self,
        names: &Names,
        uid: &str,
        supervisor_uid: &str,
    ) -> Result<(), DriverError> {
        let deadline = tokio::time::Instant::now() + self.settings.ready_within;
        loop {
            let workload = self.same(&names.workload_pod, uid).await?;
            let supervisor = self.same(&names.supervisor_pod, supervisor_uid).await?;
            let ready = supervisor
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            match (ready, ran_and_ended(&workload, &supervisor)) {
                (true, _) | (_, Ran::Ended) => return Ok(()),
                // The sandbox ends once its supervisor has closed the
                // channel: a moment after it.
                (_, Ran::Ending) => {}
                (_, Ran::No) => {
                    // The supervisor's end says more of why.
                    ended(&supervisor)?;
                    ended(&workload)?;
                }
            }
            self.wait(
                deadline,
                "the supervisor did not confirm the sandbox's enforcement",
            )
            .await?;
        }
    }

    /// Pod `name` as it is now, if it is still Pod `uid` and not being
    /// deleted.
    async fn same(&self, name: &str, uid: &str) -> Result<Pod, DriverError> {
        let pod = self
            .pods()
            .get_opt(name)
            .await
            .map_err(api(&format!("cannot read Pod `{name}`")))?
            .ok_or_else(|| DriverError(format!("Pod `{name}` is gone")))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(DriverError(format!(
                "Pod `{name}` was replaced by another of its name"
            )));
        }
        if pod.metadata.deletion_timestamp.is_some() {
            return Err(DriverError(format!("Pod `{name}` is being deleted")));
        }
        Ok(pod)
    }

    /// Pod `name` as it is now, if it is still Pod `uid` and has not
    /// ended.
    async fn current(&self, name: &str, uid: &str) -> Result<Pod, DriverError> {
        let pod = self.same(name, uid).await?;
        ended(&pod)?;
        Ok(pod)
    }

    async fn wait(&self, deadline: tokio::time::Instant, what: &str) -> Result<(), DriverError> {
        if tokio::time::Instant::now() >= deadline {
            return Err(DriverError(format!(
                "{what} within {} s",
                self.settings.ready_within.as_secs()
            )));
        }
        tokio::time::sleep(self.settings.poll).await;
        Ok(())
    }

    /// The selector of every object of sandbox `sandbox` (a
    /// [`Names::sandbox`]).
    fn selector(sandbox: &str) -> ListParams {
        ListParams::default().labels(&format!("{PART_OF}={OPENSHELL},{SANDBOX}={sandbox}"))
    }

    /// Deletes every Pod and Secret of the sandbox, whatever generation
    /// (a start a gateway did not finish leaves some), each by its uid, so
    /// that an object made again under its name meanwhile is not deleted.
    async fn remove_objects(&self, sandbox: &str) -> Result<(), DriverError> {
        let by_uid = |uid: Option<String>| DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let pods = self
            .pods()
            .list(&Self::selector(sandbox))
            .await
            .map_err(api("cannot list the sandbox's Pods"))?;
        for pod in pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match self.pods().delete(&name, &by_uid(pod.metadata.uid)).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(api(&format!("cannot delete Pod `{name}`"))(e)),
            }
        }
        let secrets = self
            .secrets()
            .list(&Self::selector(sandbox))
            .await
            .map_err(api("cannot list the sandbox's Secrets"))?;
        for secret in secrets {
            let name = secret.metadata.name.clone().unwrap_or_default();
            match self
                .secrets()
                .delete(&name, &by_uid(secret.metadata.uid))
                .await
            {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(api(&format!("cannot delete Secret `{name}`"))(e)),
            }
        }
        self.gone(sandbox).await
    }

    /// Waits until no Pod of the sandbox is left, so that a generation
    /// made next never meets a Pod of the last one still stopping.
    async fn gone(&self, sandbox: &str) -> Result<(), DriverError> {
        let deadline = tokio::time::Instant::now() + GONE_WITHIN;
        loop {
            let left = self
                .pods()
                .list(&Self::selector(sandbox))
                .await
                .map_err(api("cannot list the sandbox's Pods"))?;
            if left.items.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(DriverError(format!(
                    "{} Pods of the sandbox are still there after {} s",
                    left.items.len(),
                    GONE_WITHIN.as_secs()
                )));
            }
            tokio::time::sleep(self.settings.poll).await;
        }
    }

    async fn is_running(&self, sandbox: &str) -> Result<bool, DriverError> {
        let pods = self
            .pods()
            .list(&Self::selector(sandbox))
            .await
            .map_err(api("cannot list the sandbox's Pods"))?;
        let runs = |role: &str| {
            pods.items.iter().any(|p| {
                let labels = p.metadata.labels.as_ref();
                labels.and_then(|l| l.get(ROLE)).map(String::as_str) == Some(role)
                    && p.metadata.deletion_timestamp.is_none()
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
        };
        Ok(runs(ROLE_WORKLOAD) && runs(ROLE_SUPERVISOR))
    }
}

/// An error if the Pod has ended.
fn ended(pod: &Pod) -> Result<(), DriverError> {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    if let Some(phase @ ("Failed" | "Succeeded")) = phase {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let why = status
            .and_then(|s| s.message.clone().or_else(|| s.reason.clone()))
            .unwrap_or_default();
        return Err(DriverError(format!("Pod `{name}` ended ({phase}) {why}")));
    }
    Ok(())
}

/// Whether the workload ran and ended, read from both Pods' exit
/// statuses.
enum Ran {
    /// Both ended with the workload's status.
    Ended,
    /// The supervisor ended with the workload's status; the sandbox has
    /// yet to.
    Ending,
    /// Nothing says it ran.
    No,
}

/// The supervisor ends with the workload's exit status, which it learns
/// only over the channel after its Go, or with 122 (the channel dropped)
/// or 125 (the sandbox could not be served); the sandbox with the
/// workload's status, or its own failure. Both ended with the same
/// status, neither of the supervisor's own: the workload ran.
fn ran_and_ended(workload: &Pod, supervisor: &Pod) -> Ran {
    const CHANNEL_DROPPED: i32 = 122;
    const NOT_SERVED: i32 = 125;
    let code = |pod: &Pod, container: &str| {
        pod.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|all| all.iter().find(|c| c.name == container))
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code)
    };
    match (code(workload, "workload"), code(supervisor, "supervisor")) {
        (_, Some(CHANNEL_DROPPED | NOT_SERVED) | None) => Ran::No,
        (Some(a), Some(b)) if a == b => Ran::Ended,
        (None, Some(_)) if ended(workload).is_ok() => Ran::Ending,
        _ => Ran::No,
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, DriverError> {
    std::fs::read(path).map_err(|e| fail(&format!("cannot read `{}`", path.display()), e))
}

impl Driver for Kubernetes {
    fn name(&self) -> &str {
        "kubernetes"
    }

    fn check(&self, spec: &RunSpec) -> Result<(), String> {
        if spec.rootfs.is_some() {
            return Err("`run.rootfs`: the Kubernetes driver runs images; give `run.image`".into());
        }
        // Everything else the objects would refuse, refused before the
        // sandbox is stored.
        let launch = Launch {
            id: "check".into(),
            generation: 1,
            policy: String::new(),
            spec: spec.clone(),
            token: String::new(),
            token_expires_at: 0,
        };
        self.generation(&launch).map(|_| ()).map_err(|e| e.0)
    }

    fn place(&self) -> String {
        format!("kubernetes:{}", self.settings.namespace)
    }

    fn start(&self, launch: Launch) -> DriverFut<'_, ()> {
        Box::pin(async move {
            let started = self.start_generation(&launch).await;
            if started.is_err() {
                let sandbox = Names::new(&launch.id, 1).sandbox;
                let _ = self.remove_objects(&sandbox).await;
            }
            started
        })
    }

    fn running(&self, id: &str) -> DriverFut<'_, bool> {
        let sandbox = Names::new(id, 1).sandbox;
        Box::pin(async move { self.is_running(&sandbox).await })
    }

    fn stop(&self, id: &str) -> DriverFut<'_, ()> {
        let sandbox = Names::new(id, 1).sandbox;
        Box::pin(async move { self.remove_objects(&sandbox).await })
    }

    fn remove(&self, id: &str) -> DriverFut<'_, ()> {
        self.stop(id)
    }
}
