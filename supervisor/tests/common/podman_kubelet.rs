//! A kubelet for the played API server (`fake.rs`) that runs each Pod
//! for real with `podman kube play` (`kube_play.rs`): a workload Pod on
//! Podman's bridge behind the namespace's fence (nftables in its network
//! namespace, set before its supervisor can exist), a supervisor Pod in
//! the host's network, where the gateway listens. Besides what
//! `kube_play.rs` changes for Podman 4.3, this node lends what no
//! registry here can: the host's `/usr` (read-only) to workload
//! containers, and each workspace claim as a host directory, mounted
//! where the Pod asks and at its own path.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fake::Kubelet;
use crate::kube_play::{self, Network, Played};

/// The port the fence lets the supervisors in to.
const SANDBOX_PORT: u16 = 7000;

enum Pod {
    /// `podman kube play` runs.
    Starting,
    Started {
        played: Played,
        ip: String,
    },
    /// It could not be played: the Pod failed.
    Failed(String),
}

/// Runs Pods with Podman; what it runs goes on drop.
#[derive(Clone)]
pub struct PodmanKubelet {
    pods: Arc<Mutex<BTreeMap<String, Pod>>>,
    /// Workspace claims, by name: host directories.
    claims: Arc<Mutex<BTreeMap<String, PathBuf>>>,
}

impl PodmanKubelet {
    pub fn new() -> Self {
        Self {
            pods: Arc::default(),
            claims: Arc::default(),
        }
    }

    /// Claim `name` is the host directory `dir`.
    pub fn claim(&self, name: &str, dir: &std::path::Path) {
        let mut claims = self
            .claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        claims.insert(name.to_owned(), dir.to_path_buf());
    }

    fn pods(&self) -> MutexGuard<'_, BTreeMap<String, Pod>> {
        self.pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `f` of each Pod played whose name `which` picks.
    pub fn with_pods<T>(&self, which: impl Fn(&str) -> bool, f: impl Fn(&Played) -> T) -> Vec<T> {
        let pods = self.pods();
        pods.iter()
            .filter_map(|(n, p)| match p {
                Pod::Started { played, .. } if which(n) => Some(f(played)),
                _ => None,
            })
            .collect()
    }

    /// `pod` as this node runs it: the workload's container lent the
    /// host's `/usr`, each claim a host directory.
    fn for_this_node(&self, pod: &Value) -> Value {
        let mut pod = pod.clone();
        let workload = is_workload(&pod);
        let mut extra_mounts = Vec::new();
        let volumes = pod["spec"]["volumes"].as_array_mut().expect("volumes");
        for v in volumes.iter_mut() {
            let Some(claim) = v["persistentVolumeClaim"]["claimName"].as_str() else {
                continue;
            };
            let claims = self
                .claims
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let dir = claims
                .get(claim)
                .unwrap_or_else(|| panic!("no volume for claim `{claim}`"))
                .clone();
            extra_mounts.push(json!({"name": v["name"], "mountPath": dir, "readOnly": false}));
            *v = json!({"name": v["name"], "hostPath": {"path": dir, "type": "Directory"}});
        }
        if workload {
            volumes.push(
                json!({"name": "host-usr", "hostPath": {"path": "/usr", "type": "Directory"}}),
            );
            extra_mounts.push(json!({"name": "host-usr", "mountPath": "/usr", "readOnly": true}));
        }
        for c in pod["spec"]["containers"]
            .as_array_mut()
            .expect("containers")
        {
            let mounts = c["volumeMounts"].as_array_mut().expect("mounts");
            mounts.extend(extra_mounts.iter().cloned());
        }
        pod
    }
}

fn is_workload(pod: &Value) -> bool {
    pod["metadata"]["labels"]["openshell.dev/role"] == "workload"
}

fn name_of(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().unwrap_or("").to_owned()
}

impl Kubelet for PodmanKubelet {
    fn start(&self, pod: &Value, secrets: &[Value]) {
        let name = name_of(pod);
        self.pods().insert(name.clone(), Pod::Starting);
        let pod = self.for_this_node(pod);
        let secrets = secrets.to_vec();
        let me = self.clone();
        std::thread::spawn(move || {
            let started = std::panic::catch_unwind(|| {
                if is_workload(&pod) {
                    let played = kube_play::play(&pod, &secrets, Network::Bridge);
                    let ip = played.ip();
                    played.fence(&kube_play::host_towards(&ip), SANDBOX_PORT);
                    (played, ip)
                } else {
                    let played = kube_play::play(&pod, &secrets, Network::Host);
                    (played, "127.0.0.1".to_owned())
                }
            });
            let state = match started {
                Ok((played, ip)) => Pod::Started { played, ip },
                Err(e) => Pod::Failed(
                    e.downcast_ref::<String>()
                        .cloned()
                        .unwrap_or_else(|| "podman kube play failed".into()),
                ),
            };
            let mut pods = me.pods();
            // Removed while it was being played: it goes now.
            if pods.contains_key(&name) {
                pods.insert(name, state);
            }
        });
    }

    fn status(&self, pod: &str) -> Value {
        let pods = self.pods();
        let (played, ip) = match pods.get(pod) {
            None | Some(Pod::Starting) => return json!({"phase": "Pending"}),
            Some(Pod::Failed(why)) => return json!({"phase": "Failed", "message": why}),
            Some(Pod::Started { played, ip }) => (played, ip.clone()),
        };
        let main = if pod.ends_with("-workload") {
            "workload"
        } else {
            "supervisor"
        };
        let exited = played.exit_status(main, Duration::ZERO);
        let (phase, message, state) = match exited {
            None => ("Running", String::new(), json!({"running": {}})),
            Some(code) => (
                if code == 0 { "Succeeded" } else { "Failed" },
                format!("{main} exited with status {code}: {}", played.logs(main)),
                json!({"terminated": {"exitCode": code}}),
            ),
        };
        let ready = exited.is_none() && played.probe_passes(main);
        json!({
            "phase": phase,
            "message": message,
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{
                "name": main, "image": "", "imageID": "", "ready": ready,
                "restartCount": 0, "state": state,
            }],
        })
    }

    fn remove(&self, pod: &str) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let mut pods = self.pods();
            if !matches!(pods.get(pod), Some(Pod::Starting)) || Instant::now() > deadline {
                // Dropping a played Pod removes it.
                let gone = pods.remove(pod);
                drop(pods);
                drop(gone);
                return;
            }
            drop(pods);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
