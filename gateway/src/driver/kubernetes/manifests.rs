//! The objects of one generation, and the namespace's fence.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, ExecAction,
    PersistentVolumeClaimVolumeSource, Pod, PodSchedulingGate, PodSecurityContext, PodSpec, Probe,
    SeccompProfile, Secret, SecretVolumeSource, SecurityContext, Sysctl, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::names::check_label;
use super::{
    AdmittedWorkload, Generation, ManifestError, OPENSHELL, PART_OF, ROLE, ROLE_SUPERVISOR,
    ROLE_WORKLOAD, SANDBOX_ID, SANDBOX_PORT, SCHEDULING_GATE, SupervisorTrust, WORKSPACE,
};

/// The fence's name: one per namespace.
pub const FENCE: &str = "openshell-workload-fence";

/// Where the supervisor's image keeps its programs.
const IMAGE_BIN: &str = "/usr/local/bin";
/// The workload container's memory-backed directory: the bootstrap, and
/// nothing else, until the sandbox deletes it.
const RUN: &str = "/run/openshell";
/// Where the bootstrap Secret is in the init container that copies it,
/// the one container that mounts it.
const BOOTSTRAP_SECRET_AT: &str = "/run/openshell-secret";
/// Where `openshell-sandbox` is copied to, read-only in the workload's
/// container.
const SANDBOX_BIN: &str = "/run/openshell-bin";
/// The supervisor's writable, memory-backed directory: the session it
/// refreshes, the revision floor and its ready file.
const SUP_OWN: &str = "/run/openshell-supervisor/own";
/// The supervisor's Secret, read-only.
const SUP_TRUST: &str = "/run/openshell-supervisor/trust";

/// The keys of the Secrets' files.
const BOOTSTRAP_KEY: &str = "bootstrap";
const SESSION_KEY: &str = "session.json";
const CA_KEY: &str = "ca.pem";
const TRUST_KEYS_KEY: &str = "trust.keys";
const CREDENTIAL_KEY: &str = "credential.json";

/// The file `serve --ready-file` makes once the sandbox's evidence is
/// accepted and its workload runs; the supervisor container's readiness
/// probe, and so the Pod's `Ready` condition, is its existence.
const READY_FILE: &str = "ready";

/// What a Secret holds at most (the API's limit, keys included).
const SECRET_MAX: usize = 1024 * 1024;

/// Secret files readable by their owner only; the kubelet gives them to
/// the Pod's `fsGroup`, which adds group read.
const SECRET_MODE: i32 = 0o400;

/// The namespace's workload fence. Workload Pods send nothing (`egress`
/// an empty list: with `Egress` among the policy types, nothing is
/// allowed out), and receive only supervisor Pods' connections to the
/// sandbox's port. Every connect of a workload goes through its sandbox
/// over that one connection; the fence is what holds if the sandbox
/// failed to broker one.
///
/// # Errors
/// `namespace` is not a DNS-1123 label.
pub fn fence(namespace: &str) -> Result<NetworkPolicy, ManifestError> {
    check_label("the namespace", namespace)?;
    let pods = |role: &str| LabelSelector {
        match_labels: Some(BTreeMap::from([
            (PART_OF.to_owned(), OPENSHELL.to_owned()),
            (ROLE.to_owned(), role.to_owned()),
        ])),
        ..LabelSelector::default()
    };
    Ok(NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(FENCE.into()),
            namespace: Some(namespace.into()),
            labels: Some(BTreeMap::from([(PART_OF.into(), OPENSHELL.into())])),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(pods(ROLE_WORKLOAD)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(pods(ROLE_SUPERVISOR)),
                    ..NetworkPolicyPeer::default()
                }]),
                ports: Some(vec![NetworkPolicyPort {
                    protocol: Some("TCP".into()),
                    port: Some(IntOrString::Int(i32::from(SANDBOX_PORT))),
                    ..NetworkPolicyPort::default()
                }]),
            }]),
            egress: Some(Vec::new()),
        }),
    })
}

/// The generation's workload Pod: `openshell-sandbox` as PID 1 of its
/// one container, the workload its child. Gated until the driver has
/// inspected it. Two init containers copy in what the image lacks:
/// `openshell-sandbox` (statically linked, so any image will do) and the
/// bootstrap, from its Secret into a memory-backed directory, since the
/// sandbox deletes the bootstrap once read, which it cannot do in a
/// Secret's read-only volume, and the workload must never find it.
#[must_use]
pub fn workload_pod(g: &Generation) -> Pod {
    let spec = g.spec();
    let names = g.names();
    let copy = |name: &str, from: String, to: String, mounts: Vec<VolumeMount>| Container {
        name: name.into(),
        image: Some(spec.supervisor_image.clone()),
        command: Some(vec!["cp".into(), from, to]),
        security_context: Some(container_security(true)),
        volume_mounts: Some(mounts),
        ..Container::default()
    };
    let init = vec![
        copy(
            "sandbox-binary",
            format!("{IMAGE_BIN}/openshell-sandbox"),
            format!("{SANDBOX_BIN}/openshell-sandbox"),
            vec![mount("sandbox-binary", SANDBOX_BIN, false)],
        ),
        copy(
            "bootstrap",
            format!("{BOOTSTRAP_SECRET_AT}/{BOOTSTRAP_KEY}"),
            format!("{RUN}/{BOOTSTRAP_KEY}"),
            vec![
                mount("bootstrap-secret", BOOTSTRAP_SECRET_AT, true),
                mount("run", RUN, false),
            ],
        ),
    ];
    let workload = Container {
        name: "workload".into(),
        image: Some(spec.image.clone()),
        command: Some(vec![
            format!("{SANDBOX_BIN}/openshell-sandbox"),
            "--bootstrap".into(),
            format!("{RUN}/{BOOTSTRAP_KEY}"),
        ]),
        ports: Some(vec![ContainerPort {
            name: Some("sandbox".into()),
            container_port: i32::from(SANDBOX_PORT),
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        // The workload may write where its image lets it; what its
        // policy lets it is the sandbox's to enforce.
        security_context: Some(container_security(false)),
        volume_mounts: Some(vec![
            mount("run", RUN, false),
            mount("sandbox-binary", SANDBOX_BIN, true),
            mount("workspace", WORKSPACE, false),
        ]),
        ..Container::default()
    };
    let workspace = match &spec.workspace_claim {
        Some(claim) => Volume {
            name: "workspace".into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.clone(),
                read_only: Some(false),
            }),
            ..Volume::default()
        },
        None => empty_dir("workspace", None, None),
    };
    let volumes = vec![
        secret_volume("bootstrap-secret", &names.bootstrap_secret),
        empty_dir("run", Some("Memory"), Some("1Mi")),
        empty_dir("sandbox-binary", None, Some("64Mi")),
        workspace,
    ];
    Pod {
        metadata: meta(g, &names.workload_pod, Some(ROLE_WORKLOAD)),
        spec: Some(pod_spec(g, init, workload, volumes)),
        status: None,
    }
}

/// The generation's supervisor Pod: `openshell-supervisor serve`,
/// attaching to the sandbox at the workload Pod's IP. Owned by the
/// workload Pod (its uid, so a Pod made again under that name is not
/// its owner), but not controlled: nothing of the workload Pod's manages
/// it, and deleting the workload Pod deletes it. Gated like the workload
/// Pod. An init container copies the session out of the read-only Secret,
/// since the supervisor writes back every session it refreshes.
///
/// # Errors
/// `workload.uid` is not a uid.
pub fn supervisor_pod(g: &Generation, workload: &AdmittedWorkload) -> Result<Pod, ManifestError> {
    let owner = owner(g, &workload.uid)?;
    let spec = g.spec();
    let names = g.names();
    let mounts = || {
        vec![
            mount("supervisor-secret", SUP_TRUST, true),
            mount("own", SUP_OWN, false),
        ]
    };
    let session = Container {
        name: "session".into(),
        image: Some(spec.supervisor_image.clone()),
        command: Some(vec![
            "cp".into(),
            format!("{SUP_TRUST}/{SESSION_KEY}"),
            format!("{SUP_OWN}/{SESSION_KEY}"),
        ]),
        security_context: Some(container_security(true)),
        volume_mounts: Some(mounts()),
        ..Container::default()
    };
    let sandbox_at = SocketAddr::new(workload.ip, SANDBOX_PORT);
    // Every address of the Pod's family: a Pod on IPv6 only has no IPv4
    // address to listen on.
    let any = match workload.ip {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
    };
    let listen_at = SocketAddr::new(any, SANDBOX_PORT);
    let mut command = vec![format!("{IMAGE_BIN}/openshell-supervisor"), "serve".into()];
    for url in spec.gateway_urls.iter().filter(|u| !u.trim().is_empty()) {
        command.extend(["--gateway".into(), url.clone()]);
    }
    let flags = [
        ("--token-file", format!("{SUP_OWN}/{SESSION_KEY}")),
        ("--gateway-ca", format!("{SUP_TRUST}/{CA_KEY}")),
        ("--trust-key", format!("{SUP_TRUST}/{TRUST_KEYS_KEY}")),
        ("--state-dir", format!("{SUP_OWN}/state")),
        ("--sandbox", sandbox_at.to_string()),
        ("--sandbox-listen", listen_at.to_string()),
        ("--sandbox-id", spec.sandbox_id.clone()),
        ("--generation", spec.generation.to_string()),
        ("--credential", format!("{SUP_TRUST}/{CREDENTIAL_KEY}")),
        ("--ready-file", format!("{SUP_OWN}/{READY_FILE}")),
        ("--workdir", WORKSPACE.into()),
    ];
    for (flag, value) in flags {
        command.extend([flag.into(), value]);
    }
    if let Some(secs) = spec.timeout_seconds {
        command.extend(["--timeout".into(), secs.to_string()]);
    }
    command.push("--".into());
    command.extend(spec.command.iter().cloned());
    let supervisor = Container {
        name: "supervisor".into(),
        image: Some(spec.supervisor_image.clone()),
        command: Some(command),
        security_context: Some(container_security(true)),
        volume_mounts: Some(mounts()),
        readiness_probe: Some(ready_probe()),
        ..Container::default()
    };
    let volumes = vec![
        secret_volume("supervisor-secret", &names.supervisor_secret),
        empty_dir("own", Some("Memory"), Some("16Mi")),
    ];
    let mut metadata = meta(g, &names.supervisor_pod, Some(ROLE_SUPERVISOR));
    metadata.owner_references = Some(vec![owner]);
    Ok(Pod {
        metadata,
        spec: Some(pod_spec(g, vec![session], supervisor, volumes)),
        status: None,
    })
}

/// The sandbox's bootstrap for this generation (its half of the channel
/// keys). Immutable, and named for the generation: a new generation gets
/// a new Secret, never an old one changed, and the kubelet need not watch
/// it. Owned by the workload Pod `workload_uid`, so the cluster deletes
/// it with the Pod, whoever deletes that.
///
/// # Errors
/// `bootstrap` is larger than a Secret holds, or the uid is not one.
pub fn bootstrap_secret(
    g: &Generation,
    workload_uid: &str,
    bootstrap: &[u8],
) -> Result<Secret, ManifestError> {
    secret(
        g,
        workload_uid,
        &g.names().bootstrap_secret,
        "bootstrap",
        [(BOOTSTRAP_KEY, bootstrap)],
    )
}

/// The supervisor's session, trust and half of the channel keys for this
/// generation, apart from the sandbox's: the workload Pod never mounts
/// it. Immutable and owned as the bootstrap's.
///
/// # Errors
/// It would be larger than a Secret holds, or the uid is not one.
pub fn supervisor_secret(
    g: &Generation,
    workload_uid: &str,
    trust: &SupervisorTrust,
) -> Result<Secret, ManifestError> {
    secret(
        g,
        workload_uid,
        &g.names().supervisor_secret,
        "supervisor",
        [
            (SESSION_KEY, trust.session.as_slice()),
            (CA_KEY, trust.gateway_ca.as_slice()),
            (TRUST_KEYS_KEY, trust.trust_keys.as_slice()),
            (CREDENTIAL_KEY, trust.credential.as_slice()),
        ],
    )
}

fn secret<const N: usize>(
    g: &Generation,
    workload_uid: &str,
    name: &str,
    what: &'static str,
    files: [(&str, &[u8]); N],
) -> Result<Secret, ManifestError> {
    let size: usize = files.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > SECRET_MAX {
        return Err(ManifestError::SecretTooLarge(what, size));
    }
    let mut metadata = meta(g, name, None);
    metadata.owner_references = Some(vec![owner(g, workload_uid)?]);
    Ok(Secret {
        metadata,
        immutable: Some(true),
        type_: Some("Opaque".into()),
        data: Some(
            files
                .into_iter()
                .map(|(k, v)| (k.to_owned(), ByteString(v.to_vec())))
                .collect(),
        ),
        string_data: None,
    })
}

/// A reference to the generation's workload Pod by its uid, so that an
/// object made again under its name is not the owner. Not a controller:
/// nothing of the workload Pod's manages what it owns.
fn owner(g: &Generation, uid: &str) -> Result<OwnerReference, ManifestError> {
    let uid_ok = !uid.is_empty()
        && uid.len() <= 64
        && uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !uid_ok {
        return Err(ManifestError::Uid(uid.to_owned()));
    }
    Ok(OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: g.names().workload_pod.clone(),
        uid: uid.to_owned(),
        controller: Some(false),
        // Blocking the owner's deletion needs the right to set its
        // finalizers; what it owns may go after it.
        block_owner_deletion: Some(false),
    })
}

/// Ready once the ready file exists. Every field the API server would
/// default is given, so that the admitted Pod is compared with exactly
/// what was sent.
fn ready_probe() -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(vec![
                "test".into(),
                "-e".into(),
                format!("{SUP_OWN}/{READY_FILE}"),
            ]),
        }),
        initial_delay_seconds: Some(0),
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        ..Probe::default()
    }
}

fn meta(g: &Generation, name: &str, role: Option<&str>) -> ObjectMeta {
    let mut labels = g.labels();
    if let Some(role) = role {
        labels.insert(ROLE.into(), role.into());
    }
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(g.spec().namespace.clone()),
        labels: Some(labels),
        annotations: Some(BTreeMap::from([(
            SANDBOX_ID.into(),
            g.spec().sandbox_id.clone(),
        )])),
        ..ObjectMeta::default()
    }
}

/// What both Pods share: gated, never restarted (a generation that ended
/// is the driver's to replace), no service account token and no service
/// links (the workload must learn nothing of the cluster), and
/// [`pod_security`].
fn pod_spec(
    g: &Generation,
    init: Vec<Container>,
    main: Container,
    volumes: Vec<Volume>,
) -> PodSpec {
    PodSpec {
        scheduling_gates: Some(vec![PodSchedulingGate {
            name: SCHEDULING_GATE.into(),
        }]),
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        host_network: Some(false),
        host_pid: Some(false),
        host_ipc: Some(false),
        share_process_namespace: Some(false),
        termination_grace_period_seconds: Some(5),
        security_context: Some(pod_security(g)),
        init_containers: Some(init),
        containers: vec![main],
        volumes: Some(volumes),
        ..PodSpec::default()
    }
}

/// Never root; the runtime's default seccomp profile under the sandbox's
/// own filter; ports below 1024 open to the unprivileged user, since the
/// sandbox's DNS stub binds 127.0.0.1:53 in the workload's Pod with no
/// capability to. The supervisor's Pod is confined the same way, so an
/// admission policy has one shape to allow (Pod Security's `restricted`
/// admits both).
fn pod_security(g: &Generation) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(g.spec().user),
        run_as_group: Some(g.spec().group),
        fs_group: Some(g.spec().group),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        sysctls: Some(vec![Sysctl {
            name: "net.ipv4.ip_unprivileged_port_start".into(),
            value: "0".into(),
        }]),
        ..PodSecurityContext::default()
    }
}

/// Every container: no capability, no privilege escalation (which also
/// sets `no_new_privs`, as the sandbox's seccomp filter needs).
fn container_security(read_only_root: bool) -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(read_only_root),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        ..SecurityContext::default()
    }
}

fn mount(volume: &str, at: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.into(),
        mount_path: at.into(),
        read_only: Some(read_only),
        ..VolumeMount::default()
    }
}

fn empty_dir(name: &str, medium: Option<&str>, size: Option<&str>) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: medium.map(str::to_owned),
            size_limit: size.map(|s| Quantity(s.into())),
        }),
        ..Volume::default()
    }
}

fn secret_volume(name: &str, secret: &str) -> Volume {
    Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.into()),
            default_mode: Some(SECRET_MODE),
            optional: Some(false),
            items: None,
        }),
        ..Volume::default()
    }
}
