//! The Kubernetes driver's Pods run for real: its workload and supervisor
//! Pods and their Secrets, exactly as it builds them, played by `podman
//! kube play` (`common/kube_play.rs` names what it changes for Podman
//! 4.3). The workload Pod is on Podman's bridge, and the namespace's
//! NetworkPolicy is played by an nftables fence in its network namespace:
//! in only the supervisor's connections to the sandbox's port, out
//! nothing. The supervisor Pod runs in the host's network, where a real
//! gateway and the upstreams listen on loopback.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
#[path = "common/driven.rs"]
mod driven;
#[path = "../../sandbox/tests/podman/host.rs"]
#[allow(
    dead_code,
    reason = "only the static sandbox and the Podman check are used"
)]
mod host;
#[path = "common/kube_play.rs"]
#[allow(
    dead_code,
    reason = "the Pods' Secrets are looked at by the drivers' suite"
)]
mod kube_play;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use common::{SUPERVISOR, http_server};
use gateway::driver::kubernetes::{
    AdmittedWorkload, Generation, GenerationSpec, SANDBOX_PORT, SupervisorTrust, bootstrap_secret,
    supervisor_pod, supervisor_secret, workload_pod,
};
use kube_play::Network;
use sandbox_protocol::Binding;
use sandbox_protocol::channel::{Endpoint, kit};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(90);

/// The workload: the allowed upstream, the refused one, its user; then it
/// waits for `/workspace/end` and exits 7.
fn script(allowed: u16, refused: u16) -> String {
    format!(
        "wget -q -O - http://127.0.0.1:{allowed}/ && echo; echo allowed $?\n\
         nc 127.0.0.1 {refused} < /dev/null > /dev/null 2>&1; echo refused $?\n\
         echo uid $(id -u)\n\
         while [ ! -e /workspace/end ]; do sleep 0.2; done\n\
         exit 7\n"
    )
}

fn policy(allowed: u16) -> String {
    format!(
        "policy \"agent\" {{\n  landlock hard min_abi 4\n  fs exec /bin /etc\n  fs read /proc /dev/urandom\n  fs write /dev/null /workspace\n  run_as user nobody group nogroup\n  binaries tools = /bin/busybox\n  allow tools -> 127.0.0.1:{allowed}\n}}\n"
    )
}

fn json_of(object: &impl serde::Serialize) -> Value {
    serde_json::to_value(object).unwrap()
}

/// `/proc/PID/status` lines naming `fields`.
fn status_of(pid: u32, fields: &[&str]) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .filter(|l| fields.iter().any(|f| l.starts_with(&format!("{f}:"))))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn the_drivers_pods_run_under_podman_kube_play() {
    host::require_podman();
    let sandbox = host::static_sandbox();
    let images = kube_play::images(&sandbox, Path::new(SUPERVISOR));
    // Dropped last: the Pods go before their images.
    let upstream = || http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    let (allowed, refused) = (upstream(), upstream());
    let unused = tempfile::tempdir().unwrap();
    let gw = driven::gateway(&driven::local_driver(unused.path()), &policy(allowed), 30);
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "kp", "policy": "agent"})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    let token = r.json()["token"].as_str().unwrap().to_owned();

    let g = Generation::new(GenerationSpec {
        namespace: "sandboxes".into(),
        sandbox_id: "kp".into(),
        generation: 1,
        image: images.workload.clone(),
        command: vec!["/bin/sh".into(), "-c".into(), script(allowed, refused)],
        timeout_seconds: None,
        workspace_claim: None,
        user: 65534,
        group: 65534,
        supervisor_image: images.supervisor.clone(),
        gateway_urls: vec![gw.url.clone()],
        labels: Default::default(),
    })
    .unwrap();
    let binding = Binding {
        sandbox_id: "kp".into(),
        generation: 1,
    };
    let listen = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), SANDBOX_PORT);
    let kit = kit(&binding, &Endpoint::Tcp(listen), 30).unwrap();
    let uid = "7c1e4a52-0d3b-4f6e-8a9c-2b5d7e9f1a30";
    let bootstrap = json_of(&bootstrap_secret(&g, uid, &kit.bootstrap).unwrap());
    let gw_dir = gw.dir();
    let trust = SupervisorTrust {
        session: token.into_bytes(),
        gateway_ca: std::fs::read(gw_dir.join("ca.pem")).unwrap(),
        trust_keys: std::fs::read(gw_dir.join("trust.keys")).unwrap(),
        credential: kit.supervisor.clone(),
    };
    let sup_secret = json_of(&supervisor_secret(&g, uid, &trust).unwrap());
    let workload = kube_play::play(&json_of(&workload_pod(&g)), &[bootstrap], Network::Bridge);
    let ip = workload.ip();
    workload.fence(&kube_play::host_towards(&ip), SANDBOX_PORT);
    let admitted = AdmittedWorkload {
        uid: uid.into(),
        ip: ip.parse().unwrap(),
    };
    let supervisor = kube_play::play(
        &json_of(&supervisor_pod(&g, &admitted).unwrap()),
        &[sup_secret],
        Network::Host,
    );

    // Ready: the supervisor attached, sent the launch, accepted the
    // sandbox's evidence, and the workload runs.
    let ready = supervisor.ready("supervisor", T);
    assert!(
        ready,
        "not ready:\n{}\n{}",
        supervisor.logs("supervisor"),
        workload.logs("workload")
    );
    let deadline = std::time::Instant::now() + T;
    while !workload.logs("workload").contains("uid ") && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = workload.logs("workload");
    assert!(out.contains("ok\nallowed 0"), "{out}");
    assert!(!out.contains("refused 0"), "{out}");
    assert!(out.contains("uid 65534"), "{out}");
    let log = supervisor.logs("supervisor");
    let denied = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|e| e["dst_endpoint"]["port"] == refused && e["unmapped"]["sandbox"]["id"] == "kp");
    assert!(
        denied,
        "the refused connect is not in the deny log:\n{log}\nthe workload's:\n{out}"
    );

    // The bootstrap was read and deleted before the workload ran; the
    // supervisor's Secret is not in the workload's Pod at all.
    let run = workload.exec("workload", &["ls", "-A", "/run/openshell"]);
    assert!(run.status.success());
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), "");
    assert!(
        !workload
            .exec("workload", &["ls", "/run/openshell-supervisor"])
            .status
            .success()
    );

    // Both Pods' first processes: not root, no capability, no privilege
    // gain, seccomp filtering.
    for (pod, container) in [(&workload, "workload"), (&supervisor, "supervisor")] {
        let pid = pod.pid(container).expect("it runs");
        let status = status_of(pid, &["Uid", "CapEff", "CapPrm", "NoNewPrivs", "Seccomp"]);
        assert_eq!(
            status,
            [
                "Uid: 65534 65534 65534 65534",
                "CapPrm: 0000000000000000",
                "CapEff: 0000000000000000",
                "NoNewPrivs: 1",
                "Seccomp: 2",
            ],
            "{container}"
        );
    }

    // The workload's end is both Pods' end, with its status.
    let end = workload.exec("workload", &["sh", "-c", ": > /workspace/end"]);
    assert!(
        end.status.success(),
        "{}",
        String::from_utf8_lossy(&end.stderr)
    );
    assert_eq!(workload.exit_status("workload", T), Some(7));
    assert_eq!(
        supervisor.exit_status("supervisor", T),
        Some(7),
        "{}",
        supervisor.logs("supervisor")
    );
}
