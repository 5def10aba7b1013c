//! The Kubernetes driver's manifests: snapshotted, their safeguards
//! checked on what the API would be sent (the JSON, not the Rust
//! objects), and written as YAML into `OPENSHELL_K8S_MANIFESTS_DIR` when
//! it is set, for `scripts/validate-k8s-manifests` to check against
//! Kubernetes' own schemas.

// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr};

use gateway::driver::kubernetes::{
    AdmittedWorkload, FENCE, Generation, GenerationSpec, ManifestError, Names, SANDBOX_PORT,
    SCHEDULING_GATE, SupervisorTrust, bootstrap_secret, manifests_for_validation, supervisor_pod,
    supervisor_secret,
};
use serde_json::{Value, json};

fn manifests() -> Vec<(String, Value)> {
    manifests_for_validation().expect("the samples are valid")
}

fn of_kind<'a>(all: &'a [(String, Value)], kind: &str) -> Vec<&'a Value> {
    let found: Vec<&Value> = all
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["kind"] == kind)
        .collect();
    assert!(!found.is_empty(), "no {kind} among the samples");
    found
}

fn role<'a>(all: &'a [(String, Value)], role: &str) -> Vec<&'a Value> {
    let pods: Vec<&Value> = of_kind(all, "Pod")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["openshell.dev/role"] == role)
        .collect();
    assert_eq!(pods.len(), 2, "two sample {role} Pods");
    pods
}

/// Every container of a Pod, init containers first.
fn containers(pod: &Value) -> Vec<&Value> {
    let spec = &pod["spec"];
    let init = spec["initContainers"].as_array().into_iter().flatten();
    init.chain(spec["containers"].as_array().into_iter().flatten())
        .collect()
}

fn container<'a>(pod: &'a Value, name: &str) -> &'a Value {
    containers(pod)
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container `{name}` in {}", pod["metadata"]["name"]))
}

/// A DNS-1123 label, checked independently of the driver's own check.
fn dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    let ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (1..=63).contains(&b.len())
        && b.first().is_some_and(ok)
        && b.last().is_some_and(ok)
        && b.iter().all(|c| ok(c) || *c == b'-')
}

#[test]
fn manifests_are_snapshotted_and_written() {
    let all = manifests();
    let dir = std::env::var_os("OPENSHELL_K8S_MANIFESTS_DIR").map(std::path::PathBuf::from);
    if let Some(dir) = &dir {
        std::fs::create_dir_all(dir).expect("make the manifests' directory");
    }
    let mut files = HashSet::new();
    for (file, value) in &all {
        assert!(files.insert(file.clone()), "`{file}` twice");
        let yaml = serde_yaml::to_string(value).expect("YAML");
        if let Some(dir) = &dir {
            std::fs::write(dir.join(file), &yaml).expect("write a manifest");
        }
        insta::assert_snapshot!(file.trim_end_matches(".yaml"), yaml);
    }
    assert_eq!(
        all.len(),
        11,
        "the fence, the driver's Role and its binding, and two generations of four objects"
    );
}

#[test]
fn both_pods_are_confined_and_gated() {
    let all = manifests();
    for pod in of_kind(&all, "Pod") {
        let name = &pod["metadata"]["name"];
        let spec = &pod["spec"];
        let sc = &spec["securityContext"];
        assert_eq!(sc["runAsNonRoot"], true, "{name}");
        assert!(sc["runAsUser"].as_i64().is_some_and(|u| u > 0), "{name}");
        assert!(sc["runAsGroup"].as_i64().is_some_and(|g| g > 0), "{name}");
        assert!(sc["fsGroup"].as_i64().is_some_and(|g| g > 0), "{name}");
        assert_eq!(
            sc["seccompProfile"],
            json!({"type": "RuntimeDefault"}),
            "{name}"
        );
        assert_eq!(
            sc["sysctls"],
            json!([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]),
            "{name}"
        );
        assert_eq!(spec["automountServiceAccountToken"], false, "{name}");
        assert_eq!(spec["enableServiceLinks"], false, "{name}");
        for shared in ["hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"] {
            assert_eq!(spec[shared], false, "{name}: {shared}");
        }
        assert_eq!(spec["restartPolicy"], "Never", "{name}");
        assert_eq!(
            spec["schedulingGates"],
            json!([{"name": SCHEDULING_GATE}]),
            "{name}"
        );
        for c in containers(pod) {
            let at = format!("{name}: container {}", c["name"]);
            let csc = &c["securityContext"];
            assert_eq!(csc["allowPrivilegeEscalation"], false, "{at}");
            assert_eq!(csc["privileged"], false, "{at}");
            assert_eq!(csc["runAsNonRoot"], true, "{at}");
            assert_eq!(csc["capabilities"], json!({"drop": ["ALL"]}), "{at}");
            assert!(csc.get("runAsUser").is_none(), "{at}: the Pod's user only");
        }
        for v in spec["volumes"].as_array().expect("volumes") {
            let kinds: Vec<&String> = v.as_object().expect("volume").keys().collect();
            assert!(
                kinds.iter().all(|k| matches!(
                    k.as_str(),
                    "name" | "emptyDir" | "secret" | "persistentVolumeClaim"
                )),
                "{name}: volume {v}"
            );
        }
        let labels = &pod["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/part-of"], "openshell", "{name}");
        assert!(labels["openshell.dev/generation"].is_string(), "{name}");
        assert!(labels["openshell.dev/sandbox"].is_string(), "{name}");
        assert!(
            pod["metadata"]["annotations"]["openshell.dev/sandbox-id"].is_string(),
            "{name}"
        );
    }
}

#[test]
fn the_bootstrap_reaches_the_sandbox_through_memory_only() {
    let all = manifests();
    for pod in role(&all, "workload") {
        let name = &pod["metadata"]["name"];
        let volumes = pod["spec"]["volumes"].as_array().expect("volumes");
        let volume = |n: &str| {
            volumes
                .iter()
                .find(|v| v["name"] == n)
                .unwrap_or_else(|| panic!("{name}: no volume `{n}`"))
        };
        let secret = volume("bootstrap-secret");
        assert_eq!(secret["secret"]["defaultMode"], 0o400, "{name}");
        let secret_name = secret["secret"]["secretName"].as_str().expect("secret");
        assert!(secret_name.ends_with("-bootstrap"), "{name}: {secret_name}");
        assert_eq!(volume("run")["emptyDir"]["medium"], "Memory", "{name}");
        // Only the init container that copies it mounts the Secret.
        for c in containers(pod) {
            let mounts = c["volumeMounts"].as_array().expect("mounts");
            let has_secret = mounts.iter().any(|m| m["name"] == "bootstrap-secret");
            assert_eq!(
                has_secret,
                c["name"] == "bootstrap",
                "{name}: {}",
                c["name"]
            );
        }
        let copy = container(pod, "bootstrap");
        assert_eq!(
            copy["command"],
            json!([
                "cp",
                "/run/openshell-secret/bootstrap",
                "/run/openshell/bootstrap"
            ]),
            "{name}"
        );
        let workload = container(pod, "workload");
        assert_eq!(
            workload["command"],
            json!([
                "/run/openshell-bin/openshell-sandbox",
                "--bootstrap",
                "/run/openshell/bootstrap"
            ]),
            "{name}"
        );
        assert!(
            workload["volumeMounts"]
                .as_array()
                .expect("mounts")
                .iter()
                .any(|m| m["name"] == "run" && m["mountPath"] == "/run/openshell"),
            "{name}"
        );
        assert_eq!(
            workload["ports"],
            json!([{"name": "sandbox", "containerPort": SANDBOX_PORT, "protocol": "TCP"}]),
            "{name}"
        );
        assert_eq!(pod["spec"]["containers"].as_array().map(Vec::len), Some(1));
    }
}

#[test]
fn the_supervisor_is_owned_by_its_workload_and_attaches_to_it() {
    let all = manifests();
    let workloads = role(&all, "workload");
    let supervisors = role(&all, "supervisor");
    let expected = [
        (
            "5f0c2a8e-3b1d-4c6f-9a7e-2d4b6c8e0f13",
            "10.42.0.17:7000",
            "0.0.0.0:7000",
        ),
        (
            "b7d1e4f2-8a3c-4e5b-9f60-1c2d3e4f5a6b",
            "[fd00:10:42::17]:7000",
            "[::]:7000",
        ),
    ];
    for ((workload, sup), (uid, sandbox_at, listen_at)) in
        workloads.iter().zip(&supervisors).zip(expected)
    {
        let name = &sup["metadata"]["name"];
        assert_eq!(
            sup["metadata"]["ownerReferences"],
            json!([{
                "apiVersion": "v1", "kind": "Pod", "name": workload["metadata"]["name"],
                "uid": uid, "controller": false, "blockOwnerDeletion": false,
            }]),
            "{name}"
        );
        let command: Vec<&str> = container(sup, "supervisor")["command"]
            .as_array()
            .expect("command")
            .iter()
            .map(|a| a.as_str().expect("a string"))
            .collect();
        let flag = |f: &str| {
            command
                .windows(2)
                .find(|w| w.first() == Some(&f))
                .and_then(|w| w.get(1).copied())
        };
        assert_eq!(command.get(1), Some(&"serve"), "{name}");
        assert_eq!(flag("--sandbox"), Some(sandbox_at), "{name}");
        assert_eq!(flag("--sandbox-listen"), Some(listen_at), "{name}");
        assert_eq!(
            flag("--generation"),
            workload["metadata"]["labels"]["openshell.dev/generation"].as_str(),
            "{name}"
        );
        assert!(flag("--gateway").is_some(), "{name}");
        // Its half of the channel keys comes from its Secret; it writes no
        // bootstrap of its own.
        assert_eq!(
            flag("--credential"),
            Some("/run/openshell-supervisor/trust/credential.json"),
            "{name}"
        );
        assert_eq!(flag("--bootstrap"), None, "{name}");
        // Ready, for the driver, only once the ready file exists.
        let ready = flag("--ready-file").expect("--ready-file");
        assert_eq!(
            container(sup, "supervisor")["readinessProbe"]["exec"]["command"],
            json!(["test", "-e", ready]),
            "{name}"
        );
        // Its Secret, read-only; the sandbox's bootstrap Secret not at all.
        let volumes = sup["spec"]["volumes"].as_array().expect("volumes");
        let secrets: Vec<&Value> = volumes.iter().filter(|v| v["secret"].is_object()).collect();
        assert_eq!(secrets.len(), 1, "{name}");
        let secret = secrets.first().expect("one");
        assert!(
            secret["secret"]["secretName"]
                .as_str()
                .is_some_and(|s| s.ends_with("-supervisor")),
            "{name}"
        );
        for c in containers(sup) {
            for m in c["volumeMounts"].as_array().expect("mounts") {
                if m["name"] == secret["name"] {
                    assert_eq!(m["readOnly"], true, "{name}: {}", c["name"]);
                }
            }
        }
    }
}

#[test]
fn secrets_are_immutable_and_per_generation() {
    let all = manifests();
    let secrets = of_kind(&all, "Secret");
    assert_eq!(secrets.len(), 4);
    for s in secrets {
        let name = s["metadata"]["name"].as_str().expect("name");
        let labels = &s["metadata"]["labels"];
        assert_eq!(s["immutable"], true, "{name}");
        // Deleted with its generation's workload Pod, whoever deletes it.
        let owner = &s["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "Pod", "{name}");
        assert!(
            owner["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("-workload")),
            "{name}"
        );
        assert!(
            owner["uid"].as_str().is_some_and(|u| !u.is_empty()),
            "{name}"
        );
        assert_eq!(owner["controller"], false, "{name}");
        assert_eq!(s["type"], "Opaque", "{name}");
        let sandbox = labels["openshell.dev/sandbox"].as_str().expect("sandbox");
        let generation = labels["openshell.dev/generation"]
            .as_str()
            .expect("generation");
        assert!(
            name.starts_with(&format!("osp-{sandbox}-{generation}-")),
            "{name}"
        );
        assert_eq!(labels["app.kubernetes.io/part-of"], "openshell", "{name}");
        assert!(s.get("stringData").is_none(), "{name}");
    }
}

#[test]
fn the_fence_admits_only_supervisors_on_the_sandbox_port() {
    let all = manifests();
    let fences = of_kind(&all, "NetworkPolicy");
    let fence = fences.first().expect("the fence");
    assert_eq!(fence["metadata"]["name"], FENCE);
    let spec = &fence["spec"];
    assert_eq!(spec["policyTypes"], json!(["Ingress", "Egress"]));
    // Present and empty: nothing goes out. Absent would mean the same
    // only while `Egress` is among the policy types.
    assert_eq!(spec["egress"], json!([]));
    let selects = |selector: &Value, pod: &Value| {
        let labels = &pod["metadata"]["labels"];
        selector["matchLabels"]
            .as_object()
            .expect("matchLabels")
            .iter()
            .all(|(k, v)| &labels[k] == v)
    };
    let ingress = spec["ingress"].as_array().expect("ingress");
    assert_eq!(ingress.len(), 1);
    let rule = ingress.first().expect("one rule");
    assert_eq!(
        rule["ports"],
        json!([{"protocol": "TCP", "port": SANDBOX_PORT}])
    );
    let from = rule["from"].as_array().expect("from");
    assert_eq!(from.len(), 1);
    let peer = from.first().expect("one peer");
    assert_eq!(
        peer.as_object().map(|p| p.keys().collect::<Vec<_>>()),
        Some(vec![&"podSelector".to_owned()]),
        "no namespace selector or IP block"
    );
    for w in role(&all, "workload") {
        assert!(selects(&spec["podSelector"], w));
        assert!(!selects(&peer["podSelector"], w));
    }
    for s in role(&all, "supervisor") {
        assert!(selects(&peer["podSelector"], s));
        assert!(!selects(&spec["podSelector"], s));
    }
}

#[test]
fn names_are_dns_labels_and_never_shared() {
    let long = "a".repeat(64);
    let mut ids: Vec<String> = [
        "task-17",
        "Task-17",
        "task_17",
        "task.17",
        "task-17-",
        "-task-17",
        "_",
        "-",
        "a",
        "0",
        "task--17",
        "UPPER",
        "x",
        "ab.cd_ef-GH",
        "a-b-c-d-e-f-g-h-i-j-k-l-m-n",
        "a-b-c-d-e-f-g-h-i-j-k-l-m-n-",
        "abcdefghijklmnopqrstuvwxyz0",
        "abcdefghijklmnopqrstuvwxyz01",
        "ééé",
        long.as_str(),
    ]
    .map(str::to_owned)
    .to_vec();
    ids.extend((0..300).map(|i| format!("sandbox-{i}")));
    ids.extend((0..300).map(|i| format!("Sandbox_{i}.{}", "x".repeat(i % 64))));
    // A hashed name used as an id is hashed again, never kept.
    let hashed = Names::new("Task_17", 1).sandbox;
    assert!(hashed.contains("--"), "{hashed}");
    assert_ne!(Names::new(&hashed, 1).sandbox, hashed);
    ids.push(hashed);
    let mut seen = HashSet::new();
    for id in &ids {
        for generation in [1, 3, u64::MAX] {
            let n = Names::new(id, generation);
            for name in [
                &n.workload_pod,
                &n.supervisor_pod,
                &n.bootstrap_secret,
                &n.supervisor_secret,
                &n.sandbox,
            ] {
                assert!(dns_label(name), "`{name}` (of `{id}`, {generation})");
            }
            assert_ne!(n.workload_pod, n.supervisor_pod);
            assert_ne!(n.bootstrap_secret, n.supervisor_secret);
        }
        assert!(
            seen.insert(Names::new(id, 1).sandbox),
            "`{id}` shares a name"
        );
    }
    let plain = Names::new("task-17", 3);
    assert_eq!(plain.sandbox, "task-17");
    assert_eq!(plain.workload_pod, "osp-task-17-3-workload");
    assert_eq!(plain.supervisor_pod, "osp-task-17-3-supervisor");
    assert_eq!(plain.bootstrap_secret, "osp-task-17-3-bootstrap");
    assert_eq!(plain.supervisor_secret, "osp-task-17-3-supervisor");
    let long_name = Names::new(&long, u64::MAX).supervisor_pod;
    assert_eq!(long_name.len(), 63, "{long_name}");
}

fn spec() -> GenerationSpec {
    GenerationSpec {
        namespace: "openshell".into(),
        sandbox_id: "t".into(),
        generation: 1,
        image: "img".into(),
        command: vec!["/bin/true".into()],
        timeout_seconds: None,
        workspace_claim: None,
        user: 1000,
        group: 1000,
        supervisor_image: "sup".into(),
        gateway_urls: vec!["https://gw:8443".into()],
        labels: BTreeMap::new(),
    }
}

#[test]
fn what_the_api_or_the_confinement_would_refuse_is_refused() {
    assert!(Generation::new(spec()).is_ok());
    let refused = |change: fn(&mut GenerationSpec), what: &str| {
        let mut s = spec();
        change(&mut s);
        let e = Generation::new(s).expect_err(what);
        assert!(!e.to_string().is_empty());
        e
    };
    refused(|s| s.namespace = "Open_Shell".into(), "namespace");
    refused(|s| s.namespace = String::new(), "empty namespace");
    refused(|s| s.sandbox_id = String::new(), "empty id");
    assert_eq!(
        refused(|s| s.generation = 0, "generation"),
        ManifestError::GenerationZero
    );
    refused(|s| s.user = 0, "root");
    refused(|s| s.group = 0, "root's group");
    refused(|s| s.user = -1, "negative");
    refused(|s| s.user = i64::from(i32::MAX) + 1, "too large");
    refused(|s| s.image = " ".into(), "image");
    refused(|s| s.supervisor_image = String::new(), "supervisor image");
    refused(|s| s.command = Vec::new(), "command");
    refused(|s| s.command = vec!["make".into()], "relative program");
    refused(|s| s.timeout_seconds = Some(0), "timeout");
    refused(|s| s.workspace_claim = Some("Work_Space".into()), "claim");
    refused(|s| s.gateway_urls = Vec::new(), "gateway");
    for (k, v) in [
        ("openshell.dev/role", "supervisor"),
        ("openshell.dev/anything", "x"),
        ("app.kubernetes.io/part-of", "openshell"),
        ("bad key!", "x"),
        ("example.com/ok", "not ok!"),
        ("-x", "y"),
    ] {
        let mut s = spec();
        s.labels.insert(k.into(), v.into());
        assert!(
            matches!(Generation::new(s), Err(ManifestError::Label { .. })),
            "{k}={v}"
        );
    }
    let mut s = spec();
    s.labels.insert("example.com/team".into(), String::new());
    assert!(Generation::new(s).is_ok(), "an empty label value is one");

    let g = Generation::new(spec()).expect("valid");
    let workload = |uid: &str| AdmittedWorkload {
        uid: uid.into(),
        ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    const UID: &str = "5f0c2a8e-3b1d-4c6f-9a7e-2d4b6c8e0f13";
    assert!(supervisor_pod(&g, &workload(UID)).is_ok());
    assert!(matches!(
        supervisor_pod(&g, &workload("")),
        Err(ManifestError::Uid(_))
    ));
    assert!(matches!(
        supervisor_pod(&g, &workload("a/b")),
        Err(ManifestError::Uid(_))
    ));
    assert!(matches!(
        bootstrap_secret(&g, UID, &vec![0; 1024 * 1024]),
        Err(ManifestError::SecretTooLarge(..))
    ));
    let trust = SupervisorTrust {
        session: vec![b'x'; 512 * 1024],
        gateway_ca: vec![b'x'; 512 * 1024],
        trust_keys: Vec::new(),
        credential: Vec::new(),
    };
    assert!(matches!(
        supervisor_secret(&g, UID, &trust),
        Err(ManifestError::SecretTooLarge(..))
    ));
    assert!(matches!(
        bootstrap_secret(&g, "a/b", b"{}"),
        Err(ManifestError::Uid(_))
    ));
}
