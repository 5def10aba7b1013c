use sandbox_protocol::Binding;
use sandbox_protocol::channel::{KIT_BOOTSTRAP_VERSION, issue, kit};

use super::*;
use crate::plan::{PLAN_VERSION, RelayPlan};

fn binding() -> Binding {
    Binding {
        sandbox_id: "sb".into(),
        generation: 3,
    }
}

fn launch_for(binding: &Binding) -> Launch {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.policy");
    std::fs::write(&path, "policy \"t\" {\n  fs read /usr\n}\n").unwrap();
    let (checked, bundle) = policy_lang::load::compile_file(&path, None).unwrap();
    let bundle = bundle.unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
    Launch {
        plan: LaunchPlan {
            version: PLAN_VERSION,
            landlock: bundle.enforcement.landlock,
            deny: bundle.enforcement.seccomp.deny,
            notify: bundle.enforcement.seccomp.notify,
            workdir: b"/".to_vec(),
            read_only: Vec::new(),
            private_proc: false,
            root_workload: false,
            shared_pid_namespace: true,
            drop_bounding: false,
            user: None,
            program: b"/bin/true".to_vec(),
            argv: vec![b"true".to_vec()],
            envp: Vec::new(),
            relay: Some(RelayPlan {
                sandbox_id: binding.sandbox_id.clone(),
                generation: binding.generation,
                bundle_digest: bundle.digest,
                hash_binaries: false,
                own_network: false,
                binaries: Vec::new(),
            }),
        },
        run_as: None,
        trust: None,
        timeout_seconds: None,
    }
}

fn bootstrap(listen: &str) -> Bootstrap {
    let (credential, _) = issue(&binding()).unwrap();
    Bootstrap::with_launch(
        listen.parse().unwrap(),
        credential,
        launch_for(&binding()),
        REATTACH_WITHIN,
    )
}

/// `bytes` as a bootstrap file, taken back.
fn taken_bytes(bytes: &[u8]) -> Result<Bootstrap, String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bootstrap.json");
    std::fs::write(&path, bytes).unwrap();
    let got = Bootstrap::take(&path).map_err(|e| e.to_string());
    assert!(!path.exists(), "the bootstrap was left on disk");
    got
}

/// `b` written with `version`, then taken back.
fn taken(b: &Bootstrap, version: u32) -> Result<Bootstrap, String> {
    let mut json: serde_json::Value = serde_json::from_slice(&b.to_bytes()).unwrap();
    json["version"] = version.into();
    taken_bytes(&serde_json::to_vec(&json).unwrap())
}

/// Version 1 (TCP only, as written before Unix sockets) still reads;
/// a Unix socket needs version 2; any other version is refused by
/// name.
#[test]
fn a_bootstrap_of_version_1_to_3_is_read_and_a_unix_socket_needs_2() {
    let tcp = bootstrap("10.0.0.7:7443");
    let unix = bootstrap("unix:/run/openshell/sandbox.sock");
    assert_eq!(taken(&tcp, 1).unwrap().listen, tcp.listen);
    assert_eq!(taken(&tcp, 2).unwrap().listen, tcp.listen);
    assert_eq!(taken(&tcp, 3).unwrap().listen, tcp.listen);
    assert_eq!(taken(&unix, 2).unwrap().listen, unix.listen);
    let err = taken(&unix, 1).unwrap_err();
    assert!(
        err.contains(
            "version 1 listens on TCP only, and it names `unix:/run/openshell/sandbox.sock` (a Unix socket is version 2)"
        ),
        "{err}"
    );
    for version in [0, 4] {
        let err = taken(&tcp, version).unwrap_err();
        assert!(
            err.contains(&format!(
                "version {version}; this openshell-sandbox reads versions 1 to 3"
            )),
            "{err}"
        );
    }
    let mut json: serde_json::Value = serde_json::from_slice(&tcp.to_bytes()).unwrap();
    json["listen"] = "unix:relative.sock".into();
    let err = taken_bytes(&serde_json::to_vec(&json).unwrap()).unwrap_err();
    assert!(
        err.contains("`unix:` needs an absolute path, not `relative.sock`"),
        "{err}"
    );
}

/// The kit (made where this crate is not) writes the bootstrap this crate
/// reads: its field names are this `Bootstrap`'s, and it has no plan.
#[test]
fn a_kits_bootstrap_is_a_planless_bootstrap_of_this_version() {
    assert_eq!(KIT_BOOTSTRAP_VERSION, BOOTSTRAP_VERSION);
    let listen: Endpoint = "unix:/run/openshell/sandbox.sock".parse().unwrap();
    let made = kit(&binding(), &listen, 17).unwrap();
    let b = taken_bytes(&made.bootstrap).unwrap();
    assert_eq!(b.version, BOOTSTRAP_VERSION);
    assert_eq!(b.listen, listen);
    assert_eq!(b.reattach_within, 17);
    assert_eq!(b.credential.binding(), binding());
    assert!(b.plan.is_none() && b.run_as.is_none() && b.trust.is_none());
    let (channel, launch) = b.into_parts();
    assert!(launch.is_none());
    assert_eq!(channel.credential.role, Role::Sandbox);
}

/// Only version 3 may wait for its launch, and a bootstrap that waits
/// holds nothing of the launch: half a launch would be silently dropped.
#[test]
fn a_planless_bootstrap_is_version_3_and_holds_nothing_of_the_launch() {
    let made = kit(&binding(), &"127.0.0.1:7443".parse().unwrap(), 30).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&made.bootstrap).unwrap();
    let mut old = json.clone();
    old["version"] = 2.into();
    let err = taken_bytes(&serde_json::to_vec(&old).unwrap()).unwrap_err();
    assert!(
        err.contains("version 2 has no plan (a bootstrap that waits for its launch is version 3)"),
        "{err}"
    );
    let mut half = json;
    half["timeout_seconds"] = 5.into();
    let err = taken_bytes(&serde_json::to_vec(&half).unwrap()).unwrap_err();
    assert!(
        err.contains("it has no plan but names `run_as`, `trust` or `timeout_seconds`"),
        "{err}"
    );
}

/// A launch is taken only for the sandbox and generation of the
/// sandbox's own credential, whoever sent it.
#[test]
fn a_launch_for_another_sandbox_or_generation_is_refused() {
    let (credential, _) = issue(&binding()).unwrap();
    let own = launch_for(&binding());
    let got = Launch::from_welcome(&own.to_bytes(), &credential).unwrap();
    assert_eq!(got.relay(), own.relay());
    for other in [
        Binding {
            generation: 4,
            ..binding()
        },
        Binding {
            sandbox_id: "other".into(),
            ..binding()
        },
    ] {
        let err = Launch::from_welcome(&launch_for(&other).to_bytes(), &credential).unwrap_err();
        assert!(
            err.contains(&format!(
                "its plan is for sandbox \"{}\" generation {}, its credential for sandbox \"sb\" generation 3",
                other.sandbox_id, other.generation
            )),
            "{err}"
        );
    }
    let mut relayless = own.clone();
    relayless.plan.relay = None;
    let err = Launch::from_welcome(&relayless.to_bytes(), &credential).unwrap_err();
    assert!(err.contains("its plan has no relay"), "{err}");
    let mut extra: serde_json::Value = serde_json::from_slice(&own.to_bytes()).unwrap();
    extra["listen"] = "0.0.0.0:1".into();
    let err = Launch::from_welcome(&serde_json::to_vec(&extra).unwrap(), &credential).unwrap_err();
    assert!(
        err.contains("not a launch: unknown field `listen`"),
        "{err}"
    );
}
