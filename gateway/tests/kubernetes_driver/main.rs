//! The Kubernetes driver against an API server played in memory
//! (`fake.rs`): the order of its requests, the objects it leaves, a
//! failure injected at every request, what admission may not change, and
//! recovery of a start that never finished.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod fake;

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use fake::{FakeCluster, NAMESPACE, Played};
use gateway::driver::kubernetes::{Kubernetes, Settings, driver_role};
use gateway::driver::{Driver as _, Launch, RunSpec};
use serde_json::{Value, json};

const ID: &str = "task-1";

struct Setup {
    cluster: FakeCluster,
    driver: Kubernetes,
    _dir: tempfile::TempDir,
}

fn setup(cluster: &FakeCluster, ipv6: bool, ready_within: Duration) -> Setup {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let ca = dir.path().join("ca.pem");
    let keys = dir.path().join("trust.keys");
    std::fs::write(&ca, "gateway CA").expect("write");
    std::fs::write(&keys, "trust keys").expect("write");
    let settings = Settings {
        namespace: NAMESPACE.into(),
        supervisor_image: "registry.example/openshell/supervisor:1".into(),
        user: 65534,
        group: 65534,
        gateway_urls: vec!["https://gateway.openshell.svc:8443".into()],
        gateway_ca: ca,
        trust_keys: keys,
        ipv6,
        ready_within,
        poll: Duration::from_millis(2),
        labels: BTreeMap::new(),
    };
    Setup {
        driver: Kubernetes::new(cluster.client(), settings),
        cluster: cluster.clone(),
        _dir: dir,
    }
}

fn launch(generation: i64) -> Launch {
    Launch {
        id: ID.into(),
        generation,
        policy: "agent".into(),
        spec: RunSpec {
            driver: "kubernetes".into(),
            command: vec!["/usr/bin/make".into(), "test".into()],
            env_allow: Vec::new(),
            workspace: Some("task-1-workspace".into()),
            rootfs: None,
            image: Some("registry.example/agents/python:3.13".into()),
            timeout_seconds: None,
        },
        token: "session-token".into(),
        token_expires_at: 1_900_000_000,
    }
}

fn secret_file(cluster: &FakeCluster, name: &str, key: &str) -> Value {
    let secret = cluster.get("secrets", name).expect("the Secret");
    let text = secret["data"][key].as_str().expect("the key");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// Every request the cluster saw is one the driver's Role allows: the
/// RBAC the documentation gives is what the driver needs, and no more is
/// asked for than is used.
fn assert_within_role(cluster: &FakeCluster) {
    let (role, _) = driver_role(NAMESPACE, "openshell", "gateway").expect("a role");
    let rules = role.rules.expect("rules");
    for request in cluster.requests() {
        let (method, target) = request.split_once(' ').expect("METHOD target");
        let resource = target.split('/').next().expect("a resource");
        let verb = match method {
            "POST" => "create",
            "GET" => "get",
            "LIST" => "list",
            "PATCH" => "patch",
            "DELETE" => "delete",
            other => panic!("{other}"),
        };
        let allowed = rules.iter().any(|r| {
            r.resources.iter().flatten().any(|x| x == resource) && r.verbs.iter().any(|v| v == verb)
        });
        assert!(allowed, "`{request}` is outside the driver's Role");
    }
}

/// The requests of a start that succeeds on an empty namespace, in order.
const ORDER: [&str; 14] = [
    "LIST pods",
    "LIST secrets",
    "LIST pods",
    "GET networkpolicies/openshell-workload-fence",
    "POST networkpolicies",
    "POST pods",
    "POST secrets",
    "POST secrets",
    "PATCH pods/osp-task-1-1-workload",
    "GET pods/osp-task-1-1-workload",
    "POST pods",
    "PATCH pods/osp-task-1-1-supervisor",
    "GET pods/osp-task-1-1-workload",
    "GET pods/osp-task-1-1-supervisor",
];

#[tokio::test]
async fn a_generation_is_made_step_by_step_in_order() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.driver.start(launch(1)).await.expect("started");
    assert_eq!(s.cluster.requests(), ORDER);
    assert_eq!(
        s.cluster.names("pods"),
        ["osp-task-1-1-supervisor", "osp-task-1-1-workload"]
    );
    let workload = s.cluster.get("pods", "osp-task-1-1-workload").expect("pod");
    let supervisor = s
        .cluster
        .get("pods", "osp-task-1-1-supervisor")
        .expect("pod");
    // Both gates lifted; the supervisor attaches to the workload's IP and
    // is owned by it.
    assert!(workload["spec"]["schedulingGates"].is_null());
    assert!(supervisor["spec"]["schedulingGates"].is_null());
    let command = supervisor["spec"]["containers"][0]["command"]
        .as_array()
        .expect("command")
        .clone();
    let at = command
        .iter()
        .position(|a| a == "--sandbox")
        .expect("--sandbox");
    assert_eq!(command[at + 1], json!("10.42.0.1:7000"));
    assert_eq!(
        supervisor["metadata"]["ownerReferences"][0]["uid"],
        workload["metadata"]["uid"]
    );
    // The two halves of one generation's keys, each in its own Secret;
    // the sandbox's without a plan, which its supervisor sends.
    let bootstrap = secret_file(&s.cluster, "osp-task-1-1-bootstrap", "bootstrap");
    assert_eq!(bootstrap["version"], 3);
    assert!(bootstrap.get("plan").is_none());
    assert_eq!(bootstrap["listen"], json!("0.0.0.0:7000"));
    let credential = secret_file(&s.cluster, "osp-task-1-1-supervisor", "credential.json");
    for (half, role) in [
        (&bootstrap["credential"], "sandbox"),
        (&credential, "supervisor"),
    ] {
        assert_eq!(half["role"], role);
        assert_eq!(half["sandbox_id"], ID);
        assert_eq!(half["generation"], 1);
    }
    assert_eq!(bootstrap["credential"]["ca"], credential["ca"]);
    assert_ne!(bootstrap["credential"]["key"], credential["key"]);
    let session = secret_file(&s.cluster, "osp-task-1-1-supervisor", "session.json");
    assert_eq!(session["token"], "session-token");
    for name in ["osp-task-1-1-bootstrap", "osp-task-1-1-supervisor"] {
        let secret = s.cluster.get("secrets", name).expect("secret");
        assert_eq!(secret["immutable"], true);
        assert_eq!(
            secret["metadata"]["ownerReferences"][0]["uid"],
            workload["metadata"]["uid"]
        );
    }
    assert!(s.driver.running(ID).await.expect("running"));
    assert_within_role(&s.cluster);
}

#[tokio::test]
async fn stop_removes_both_pods_and_secrets_and_start_makes_the_next_generation() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.driver.start(launch(1)).await.expect("started");
    s.driver.stop(ID).await.expect("stopped");
    assert!(s.cluster.names("pods").is_empty());
    assert!(s.cluster.names("secrets").is_empty());
    assert!(!s.driver.running(ID).await.expect("running"));
    // Stopping what is not running succeeds.
    s.driver.stop(ID).await.expect("stopped again");
    s.driver.start(launch(2)).await.expect("started again");
    assert_eq!(
        s.cluster.names("pods"),
        ["osp-task-1-2-supervisor", "osp-task-1-2-workload"]
    );
    assert_eq!(
        s.cluster.names("secrets"),
        ["osp-task-1-2-bootstrap", "osp-task-1-2-supervisor"]
    );
    s.driver.remove(ID).await.expect("removed");
    assert!(s.cluster.names("pods").is_empty());
    // The namespace's fence stays for the other sandboxes.
    assert_eq!(
        s.cluster.names("networkpolicies"),
        ["openshell-workload-fence"]
    );
}

#[tokio::test]
async fn a_failure_at_any_request_fails_the_start_and_leaves_nothing() {
    for code in [500, 403] {
        for (at, request) in ORDER.iter().enumerate() {
            let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
            s.cluster.fail_at(at, code);
            let e = s
                .driver
                .start(launch(1))
                .await
                .expect_err("the start fails");
            assert!(
                e.0.contains(&format!("answered {code}")),
                "{code} at {request} ({at}): {e}"
            );
            assert!(
                s.cluster.names("pods").is_empty() && s.cluster.names("secrets").is_empty(),
                "{code} at {request}: left {:?} {:?}",
                s.cluster.names("pods"),
                s.cluster.names("secrets")
            );
            assert!(!s.driver.running(ID).await.expect("running"));
        }
    }
}

type Change = fn(&mut Value);

/// What admission may not do to a Pod, each with a word its refusal
/// names.
fn weakenings() -> Vec<(&'static str, Change)> {
    vec![
        ("containers", |p| {
            p["spec"]["containers"]
                .as_array_mut()
                .expect("containers")
                .push(json!({"name": "mesh-proxy", "image": "mesh/proxy:1"}));
        }),
        ("securityContext", |p| {
            p["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] =
                json!(["NET_ADMIN"]);
        }),
        ("securityContext", |p| {
            p["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true);
        }),
        ("env", |p| {
            p["spec"]["containers"][0]["env"] = json!([{"name": "AWS_ROLE", "value": "x"}]);
        }),
        ("volumes", |p| {
            p["spec"]["volumes"]
                .as_array_mut()
                .expect("volumes")
                .push(json!({"name": "host", "hostPath": {"path": "/"}}));
        }),
        ("lifecycle", |p| {
            p["spec"]["containers"][0]["lifecycle"] =
                json!({"postStart": {"exec": {"command": ["/bin/sh", "-c", "id"]}}});
        }),
        ("scheduling gate", |p| {
            p["spec"]["schedulingGates"] = json!([]);
        }),
        ("annotation", |p| {
            p["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/workload"] =
                json!("unconfined");
        }),
        ("runtimeClassName", |p| {
            p["spec"]["runtimeClassName"] = json!("runc-unconfined");
        }),
        ("dnsPolicy", |p| {
            p["spec"]["dnsPolicy"] = json!("None");
            p["spec"]["dnsConfig"] = json!({"nameservers": ["192.0.2.53"]});
        }),
        ("dnsConfig", |p| {
            p["spec"]["dnsConfig"] = json!({"nameservers": ["192.0.2.53"]});
        }),
        ("hostNetwork", |p| {
            p["spec"]["hostNetwork"] = json!(true);
        }),
        ("automountServiceAccountToken", |p| {
            p["spec"]["automountServiceAccountToken"] = json!(true);
        }),
        ("initContainers", |p| {
            p["spec"]["initContainers"][0]["command"] = json!(["sh", "-c", "cp /x /y"]);
        }),
        ("label", |p| {
            p["metadata"]["labels"]["openshell.dev/role"] = json!("other");
        }),
    ]
}

#[tokio::test]
async fn what_admission_weakens_stops_the_start_before_anything_runs() {
    for (word, change) in weakenings() {
        let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
        s.cluster.admission(Some(Box::new(change)));
        let e = s
            .driver
            .start(launch(1))
            .await
            .expect_err("the start fails");
        assert!(
            e.0.contains("admission changed Pod `osp-task-1-1-workload`") && e.0.contains(word),
            "{word}: {e}"
        );
        // The gate was never lifted, no Secret made, no supervisor made.
        let requests = s.cluster.requests();
        assert!(
            !requests
                .iter()
                .any(|r| r.starts_with("PATCH") || r == "POST secrets"),
            "{word}: {requests:?}"
        );
        assert!(s.cluster.names("pods").is_empty(), "{word}");
    }
}

#[tokio::test]
async fn what_admission_may_fill_in_is_accepted() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.cluster.admission(Some(Box::new(|p: &mut Value| {
        p["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "1Gi"}});
        p["metadata"]["labels"]["example.com/cost-centre"] = json!("agents");
        p["metadata"]["annotations"]["example.com/admitted-by"] = json!("policy");
        p["spec"]["priorityClassName"] = json!("batch");
    })));
    s.driver.start(launch(1)).await.expect("started");
}

#[tokio::test]
async fn a_changed_fence_is_neither_trusted_nor_overwritten() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.cluster.put(
        "networkpolicies",
        json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "openshell-workload-fence", "namespace": NAMESPACE},
            "spec": {
                "podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "openshell", "openshell.dev/role": "workload"}},
                "policyTypes": ["Ingress", "Egress"],
                "egress": [{}],
            },
        }),
    );
    let e = s
        .driver
        .start(launch(1))
        .await
        .expect_err("the start fails");
    assert!(e.0.contains("is not the driver's fence"), "{e}");
    assert!(s.cluster.names("pods").is_empty());
    let kept = s
        .cluster
        .get("networkpolicies", "openshell-workload-fence")
        .expect("kept");
    assert_eq!(kept["spec"]["egress"], json!([{}]));
}

#[tokio::test]
async fn a_supervisor_that_never_confirms_enforcement_fails_the_start() {
    let s = setup(&FakeCluster::default(), false, Duration::from_millis(300));
    s.cluster.played(Played::NeverReady);
    let e = s.driver.start(launch(1)).await.expect_err("fails");
    assert!(
        e.0.contains("the supervisor did not confirm the sandbox's enforcement within"),
        "{e}"
    );
    assert!(s.cluster.names("pods").is_empty());
    assert!(s.cluster.names("secrets").is_empty());
}

#[tokio::test]
async fn a_workload_that_ran_and_ended_before_a_probe_saw_it_ready_started() {
    // Both ended with the workload's status, which the supervisor learns
    // only after its Go: the start happened, and the gateway sees it end.
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.cluster.played(Played::EndsAtOnce(3));
    s.driver.start(launch(1)).await.expect("started");
    assert!(!s.driver.running(ID).await.expect("running"));
    // The supervisor's own statuses say the workload never ran.
    for code in [122, 125] {
        let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
        s.cluster.played(Played::EndsAtOnce(code));
        let e = s.driver.start(launch(1)).await.expect_err("fails");
        assert!(e.0.contains(&format!("exited with status {code}")), "{e}");
        assert!(s.cluster.names("pods").is_empty());
    }
}

#[tokio::test]
async fn a_workload_pod_that_fails_as_it_starts_fails_the_start() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.cluster.played(Played::WorkloadFails);
    let e = s.driver.start(launch(1)).await.expect_err("fails");
    assert!(
        e.0.contains("Pod `osp-task-1-1-workload` ended (Failed)"),
        "{e}"
    );
    assert!(s.cluster.names("pods").is_empty());
}

#[tokio::test]
async fn the_sandbox_listens_in_the_pod_networks_family() {
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.cluster.played(Played::RunsOnIpv6);
    let e = s.driver.start(launch(1)).await.expect_err("fails");
    assert!(e.0.contains("set the driver's IP family"), "{e}");
    assert!(s.cluster.names("pods").is_empty());

    let s = setup(&FakeCluster::default(), true, Duration::from_secs(5));
    s.cluster.played(Played::RunsOnIpv6);
    s.driver.start(launch(1)).await.expect("started");
    let bootstrap = secret_file(&s.cluster, "osp-task-1-1-bootstrap", "bootstrap");
    assert_eq!(bootstrap["listen"], json!("[::]:7000"));
    let supervisor = s
        .cluster
        .get("pods", "osp-task-1-1-supervisor")
        .expect("pod");
    let command = supervisor["spec"]["containers"][0]["command"].to_string();
    assert!(command.contains("\"[fd00:10:42::1]:7000\""), "{command}");
}

#[tokio::test]
async fn a_start_that_never_finished_is_recovered_by_the_next() {
    for hang_at in [6, 8, 9, 11, 13] {
        let cluster = FakeCluster::default();
        let s = setup(&cluster, false, Duration::from_secs(5));
        // The gateway stops answering at request `hang_at` and is gone.
        cluster.hang_from(Some(hang_at));
        let interrupted =
            tokio::time::timeout(Duration::from_millis(200), s.driver.start(launch(1))).await;
        assert!(interrupted.is_err(), "{}: it finished", ORDER[hang_at]);
        assert!(
            !cluster.names("pods").is_empty(),
            "{}: nothing left to recover",
            ORDER[hang_at]
        );
        // Another gateway takes over with the next generation.
        cluster.hang_from(None);
        let next = setup(&cluster, false, Duration::from_secs(5));
        next.driver.start(launch(2)).await.expect("started");
        assert_eq!(
            cluster.names("pods"),
            ["osp-task-1-2-supervisor", "osp-task-1-2-workload"],
            "{}",
            ORDER[hang_at]
        );
        assert_eq!(
            cluster.names("secrets"),
            ["osp-task-1-2-bootstrap", "osp-task-1-2-supervisor"],
            "{}",
            ORDER[hang_at]
        );
        assert_within_role(&cluster);
    }
}

#[tokio::test]
async fn an_object_made_again_under_its_name_is_not_deleted() {
    // A Pod left by a start that never finished, and a Secret whose Pod
    // is gone: each is made again by someone else between the driver's
    // list and its delete, and its new uid fails the delete's
    // precondition.
    for (resource, name) in [
        ("pods", "osp-task-1-1-workload"),
        ("secrets", "osp-task-1-0-bootstrap"),
    ] {
        let cluster = FakeCluster::default();
        let s = setup(&cluster, false, Duration::from_secs(5));
        cluster.hang_from(Some(8));
        let _ = tokio::time::timeout(Duration::from_millis(200), s.driver.start(launch(1))).await;
        cluster.hang_from(None);
        cluster.put(
            "secrets",
            json!({"metadata": {"name": "osp-task-1-0-bootstrap", "labels": {
                "app.kubernetes.io/part-of": "openshell", "openshell.dev/sandbox": ID,
            }}}),
        );
        cluster.remake_before_delete(resource, name);
        let s = setup(&cluster, false, Duration::from_secs(5));
        let e = s.driver.stop(ID).await.expect_err("refused");
        assert!(e.0.contains("answered 409"), "{name}: {e}");
        assert!(cluster.get(resource, name).is_some(), "{name}");
    }
}

#[tokio::test]
async fn the_played_api_server_refuses_what_a_real_one_refuses() {
    use k8s_openapi::api::core::v1::{Pod, Secret};
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};

    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    s.driver.start(launch(1)).await.expect("started");
    let client = s.cluster.client();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), NAMESPACE);
    let secrets: kube::Api<Secret> = kube::Api::namespaced(client, NAMESPACE);
    let code = |e: kube::Error| match e {
        kube::Error::Api(s) => s.code,
        other => panic!("{other}"),
    };
    let params = PatchParams::default();
    let changed = Patch::Merge(json!({"data": {"bootstrap": "eA=="}}));
    let e = secrets
        .patch("osp-task-1-1-bootstrap", &params, &changed)
        .await
        .expect_err("an immutable Secret");
    assert_eq!(code(e), 422);
    let gated = Patch::Merge(json!({"spec": {"schedulingGates": [{"name": "x"}]}}));
    let e = pods
        .patch("osp-task-1-1-workload", &params, &gated)
        .await
        .expect_err("a gate added");
    assert_eq!(code(e), 422);
    let mut orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "orphan", "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": ""}]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .expect("a pod");
    let e = pods
        .create(&PostParams::default(), &orphan)
        .await
        .expect_err("an owner without uid");
    assert_eq!(code(e), 422);
    orphan.metadata.owner_references = None;
    pods.create(&PostParams::default(), &orphan)
        .await
        .expect("created");
    let e = pods
        .create(&PostParams::default(), &orphan)
        .await
        .expect_err("a name taken");
    assert_eq!(code(e), 409);
    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("not-its-uid".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let e = pods
        .delete("orphan", &wrong_uid)
        .await
        .expect_err("a precondition");
    assert_eq!(code(e), 409);
    // Deleting the workload Pod takes what it owns: its supervisor and
    // both Secrets.
    pods.delete("osp-task-1-1-workload", &DeleteParams::default())
        .await
        .expect("deleted");
    assert_eq!(s.cluster.names("pods"), ["orphan"]);
    assert!(s.cluster.names("secrets").is_empty());
}

#[test]
fn what_the_driver_cannot_run_is_refused_before_it_is_stored() {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let _entered = rt.enter();
    let s = setup(&FakeCluster::default(), false, Duration::from_secs(5));
    let base = launch(1).spec;
    type Edit = fn(&mut RunSpec);
    let cases: [(Edit, &str); 4] = [
        (|r| r.image = None, "needs `run.image`"),
        (
            |r| {
                r.image = None;
                r.rootfs = Some("/srv/root".into());
            },
            "runs images",
        ),
        (|r| r.command[0] = "make".into(), "absolute path"),
        (
            |r| r.workspace = Some("Not_A_Claim".into()),
            "not a DNS-1123 subdomain",
        ),
    ];
    for (edit, want) in cases {
        let mut spec = base.clone();
        edit(&mut spec);
        let e = s.driver.check(&spec).expect_err("refused");
        assert!(e.contains(want), "{e}");
    }
    assert_eq!(s.driver.check(&base), Ok(()));
}
