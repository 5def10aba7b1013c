//! The drivers the gateway runs sandboxes with, for real: one suite every
//! driver passes. Create → `ready` (the workload runs confined, its
//! connects decided by its supervisor) → the fence holds → stop → start
//! (a new generation, the workspace kept) → delete; and a start that
//! fails leaves nothing running. The gateway runs in this process, on
//! loopback; the sandboxes' namespaces are the driver's own.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
#[path = "common/driven.rs"]
mod driven;
#[path = "../../gateway/tests/kubernetes_driver/fake.rs"]
#[allow(dead_code, reason = "the suite uses the API server, not its faults")]
mod fake;
#[path = "../../sandbox/tests/podman/host.rs"]
#[allow(dead_code, reason = "the drivers' suite uses the host's side only")]
mod host;
#[path = "common/kube_play.rs"]
#[allow(dead_code, reason = "the suite runs Pods through the kubelet")]
mod kube_play;
#[path = "common/podman_kubelet.rs"]
mod podman_kubelet;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{SUPERVISOR, http_server};
use driven::{MakeDriver, exec, gateway, local_driver, policy, workspace};
use serde_json::json;

const T: Duration = Duration::from_secs(90);

/// The workload: each generation tries the allowed upstream, a refused
/// one and the gateway, writes what happened, and waits to be stopped.
fn workload(workspace: &Path, allowed: u16, refused: u16, gateway: u16) -> PathBuf {
    let w = workspace.display();
    let script = format!(
        "try() {{ /usr/bin/curl -s --max-time 5 \"$1\" > /dev/null 2>&1; echo $?; }}\n\
         echo \"$(try http://127.0.0.1:{allowed}/) $(try http://127.0.0.1:{refused}/) $(try https://127.0.0.1:{gateway}/healthz)\" > {w}/result.tmp\n\
         /usr/bin/id -u >> {w}/result.tmp\n\
         mv {w}/result.tmp {w}/result\n\
         while true; do sleep 1; done\n"
    );
    let path = workspace.join("work.sh");
    std::fs::write(&path, script).unwrap();
    path
}

/// The workload's line of results: curl's exit status for the allowed
/// upstream, the refused one and the gateway; then its uid.
fn result(workspace: &Path) -> Vec<String> {
    let file = workspace.join("result");
    let start = Instant::now();
    while !file.exists() {
        assert!(start.elapsed() < T, "the workload wrote no result");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::read_to_string(file)
        .unwrap()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Every process whose command line names `needle`.
fn processes_naming(needle: &str) -> Vec<String> {
    let out = Command::new("pgrep")
        .args(["-af", needle])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("pgrep"))
        .map(str::to_owned)
        .collect()
}

/// What the suite asks of a driver's placement, besides the API.
struct Probes<'a> {
    /// The driver's name.
    driver: &'a str,
    /// What its `run` needs besides the command, given the workspace (a
    /// host directory): a driver may name it otherwise.
    run: &'a dyn Fn(&Path) -> serde_json::Value,
    /// What the driver made for a sandbox that must be gone once it is
    /// stopped (processes' command lines).
    owned: &'a dyn Fn(&str) -> Vec<String>,
    /// Whether the sandbox's network, bypassing the sandbox, reaches a
    /// port its host listens on.
    escapes: &'a dyn Fn(&str) -> bool,
    /// Files the driver keeps for a sandbox that could authenticate
    /// anyone (a session token, a channel key).
    secrets: &'a dyn Fn(&str) -> Vec<PathBuf>,
    /// The sandbox's deny log as its supervisor wrote it.
    deny_log: &'a dyn Fn(&str) -> String,
}

/// The suite.
fn conformance(make: &MakeDriver, probes: &Probes<'_>) {
    let Probes {
        driver,
        run: more,
        owned,
        escapes,
        secrets,
        deny_log,
    } = probes;
    let space = workspace();
    let more = more(space.path());
    let with = |mut run: serde_json::Value| {
        for (k, v) in more.as_object().into_iter().flatten() {
            run[k] = v.clone();
        }
        run
    };
    let allowed = http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    let refused = http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    // A workload that ended is noticed within a second.
    let gw = gateway(make, &policy(space.path(), allowed), 2);
    let gw_port: u16 = gw.url.rsplit(':').next().unwrap().parse().unwrap();
    let script = workload(space.path(), allowed, refused, gw_port);
    let run = with(json!({
        "driver": driver,
        "command": ["/usr/bin/bash", script.display().to_string()],
        "workspace": space.path().display().to_string(),
        "env_allow": ["GREETING"],
    }));

    // What the driver cannot run is refused before anything is stored.
    let bad = json!({"driver": driver, "command": ["nonexistent-program"], "workspace": space.path().display().to_string()});
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "bad", "policy": "agent", "run": bad})),
    );
    assert_eq!(r.status, 400, "{:?}", r.json());
    assert_eq!(gw.call("GET", "/v1/sandboxes/bad", None).status, 404);

    // A start that fails once its processes run (the sandbox cannot
    // resolve the policy's user) leaves nothing running and no secret.
    let nouser = policy(space.path(), allowed)
        .replace("\"agent\"", "\"nouser\"")
        .replace(
            "run_as user nobody group nogroup",
            "run_as user osp-no-such-user",
        );
    gw.approve(&gw.author("bob"), "nouser", &nouser);
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "bad", "policy": "nouser", "run": run})),
    );
    assert_eq!(r.status, 502, "{:?}", r.json());
    let v = gw.call("GET", "/v1/sandboxes/bad", None).json();
    assert_eq!(v["phase"], "failed", "{v}");
    assert!(owned("bad").is_empty(), "{:?}", owned("bad"));
    assert!(secrets("bad").is_empty(), "{:?}", secrets("bad"));
    assert_eq!(gw.call("DELETE", "/v1/sandboxes/bad", None).status, 200);

    // Create: ready once the workload runs, confined.
    let started = Instant::now();
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "sb", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    eprintln!("create → ready: {:?}", started.elapsed());
    assert_eq!(r.json()["phase"], "ready");
    let got = result(space.path());
    let nobody = Command::new("id").args(["-u", "nobody"]).output().unwrap();
    let nobody = String::from_utf8_lossy(&nobody.stdout).trim().to_owned();
    assert_eq!(got[0], "0", "the allowed upstream is relayed: {got:?}");
    assert_ne!(got[1], "0", "the refused upstream is refused: {got:?}");
    assert_ne!(got[2], "0", "the gateway is out of reach: {got:?}");
    assert_eq!(got[3], nobody, "the workload runs as `nobody`: {got:?}");
    assert!(!owned("sb").is_empty(), "nothing runs for `sb`");
    assert!(!escapes("sb"), "the sandbox's network reaches its host");

    // Exec: further commands, confined as the workload is, their output
    // and exit status kept.
    let ran = exec(
        &gw,
        "sb",
        json!({"command": ["/usr/bin/bash", "-c", "echo out; echo err >&2; echo $GREETING; /usr/bin/id -u; exit 3"], "env": {"GREETING": "hi"}}),
    );
    assert_eq!(ran.record["state"], "exited", "{}", ran.record);
    assert_eq!(ran.record["exit_status"], 3, "{}", ran.record);
    assert_eq!(ran.stdout, format!("out\nhi\n{nobody}\n"));
    assert_eq!(ran.stderr, "err\n");
    let curl = |port: u16| json!({"command": ["/usr/bin/curl", "-s", "--max-time", "5", format!("http://127.0.0.1:{port}/")]});
    let ran = exec(&gw, "sb", curl(allowed));
    assert_eq!(
        (&ran.record["exit_status"], ran.stdout.as_str()),
        (&json!(0), "ok"),
        "{}",
        ran.record
    );
    let ran = exec(&gw, "sb", curl(refused));
    assert_ne!(ran.record["exit_status"], 0, "{}", ran.record);
    let log = deny_log("sb");
    let denied = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .any(|e| e["dst_endpoint"]["port"] == refused && e["unmapped"]["sandbox"]["id"] == "sb");
    assert!(denied, "the refused connect is not in the deny log:\n{log}");
    let ran = exec(&gw, "sb", json!({"command": ["no-such-program"]}));
    assert_eq!(ran.record["state"], "failed", "{}", ran.record);
    assert!(
        ran.record["error"]
            .as_str()
            .unwrap_or_default()
            .contains("no-such-program"),
        "{}",
        ran.record
    );
    let ran = exec(
        &gw,
        "sb",
        json!({"command": ["/usr/bin/sleep", "60"], "timeout_seconds": 1}),
    );
    assert_eq!(ran.record["timed_out"], true, "{}", ran.record);
    assert_eq!(ran.record["exit_status"], 137, "{}", ran.record);
    let r = gw.call(
        "POST",
        "/v1/sandboxes/sb/execs",
        Some(json!({"command": ["/usr/bin/env"], "env": {"HOME": "/"}})),
    );
    assert_eq!(r.status, 400, "{:?}", r.json());
    let listed = gw.call("GET", "/v1/sandboxes/sb/execs", None).json();
    assert_eq!(
        listed["execs"].as_array().map_or(0, Vec::len),
        5,
        "{listed}"
    );

    // Stop: nothing left running, the session revoked, the workspace kept.
    let r = gw.call("POST", "/v1/sandboxes/sb/stop", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["phase"], "stopped");
    assert!(owned("sb").is_empty(), "{:?}", owned("sb"));
    assert!(secrets("sb").is_empty(), "{:?}", secrets("sb"));
    assert!(space.path().join("result").exists());
    let r = gw.call(
        "POST",
        "/v1/sandboxes/sb/execs",
        Some(json!({"command": ["/usr/bin/true"]})),
    );
    assert_eq!(r.status, 409, "{:?}", r.json());

    // Start: a new generation in the same workspace.
    std::fs::remove_file(space.path().join("result")).unwrap();
    let r = gw.call("POST", "/v1/sandboxes/sb/start", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["generation"], 2);
    assert_eq!(result(space.path())[0], "0");

    // A workload that ends on its own leaves its sandbox stopped.
    let r = gw.call("POST", "/v1/sandboxes/sb/stop", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    std::fs::write(space.path().join("work.sh"), "exit 3\n").unwrap();
    let r = gw.call("POST", "/v1/sandboxes/sb/start", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    let deadline = Instant::now() + T;
    loop {
        let v = gw.call("GET", "/v1/sandboxes/sb", None).json();
        if v["phase"] == "stopped" {
            assert_eq!(v["reason"], "the workload ended on its own", "{v}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the ended workload was not noticed: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(owned("sb").is_empty(), "{:?}", owned("sb"));

    // Delete: gone, the workspace kept.
    let r = gw.call("DELETE", "/v1/sandboxes/sb", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert!(owned("sb").is_empty(), "{:?}", owned("sb"));
    assert_eq!(gw.call("GET", "/v1/sandboxes/sb", None).status, 404);
    assert!(space.path().join("work.sh").exists());
    drop(gw);
}

#[test]
fn the_local_driver_passes_the_conformance_suite() {
    let root = tempfile::Builder::new()
        .prefix("osp-local-")
        .tempdir()
        .unwrap();
    let make = local_driver(root.path());
    let dir = root.path().to_path_buf();
    // A listener on the host's end of the sandbox's veth pair: the host
    // reaches it, the sandbox's namespace does not.
    let escapes = |id: &str| {
        let (netns, host) = gateway::driver::local::network_of(&dir, id);
        let host = host.expect("the sandbox has a subnet");
        reaches_from(&host, &["ip", "netns", "exec", &netns])
    };
    let secrets = |id: &str| -> Vec<PathBuf> {
        std::fs::read_dir(dir.join(id))
            .map(|entries| {
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        let name = p.file_name().unwrap().to_string_lossy().into_owned();
                        name.starts_with("session.json") || name.starts_with("bootstrap-")
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    conformance(
        &make,
        &Probes {
            driver: "local",
            run: &|_| json!({}),
            owned: &|id| processes_naming(&dir.join(id).display().to_string()),
            escapes: &escapes,
            secrets: &secrets,
            deny_log: &|id| {
                std::fs::read_to_string(dir.join(id).join("deny.log")).unwrap_or_default()
            },
        },
    );
    assert!(
        std::fs::read_dir(root.path()).unwrap().all(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "the driver left sandboxes behind"
    );
}

/// `openshell-gateway ARGS` against the gateway at `url` with the token
/// in `token`: exit code, stdout, stderr.
fn gateway_cli(dir: &Path, url: &str, token: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(gateway_program())
        .args(args)
        .env("OPENSHELL_GATEWAY", url)
        .env("OPENSHELL_GATEWAY_CA", dir.join("ca.pem"))
        .env("OPENSHELL_GATEWAY_TOKEN_FILE", token)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `openshell-gateway`, beside the supervisor in the workspace's target
/// directory.
fn gateway_program() -> PathBuf {
    Path::new(SUPERVISOR).with_file_name("openshell-gateway")
}

/// `openshell-gateway serve` on `d` (made by `init`) with the driver
/// flags `driver`, listening on `listen`, started once it says where it
/// listens.
fn serve_program(d: &Path, listen: &str, driver: &[String]) -> std::process::Child {
    let mut serve = Command::new(gateway_program())
        .args(["serve", "--dir"])
        .arg(d)
        .args(["--listen", listen])
        .args(driver)
        .stdout(std::process::Stdio::piped())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join("serve.log"))
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert!(line.contains(listen), "serve did not start: {line}");
    serve
}

/// `serve`'s flags for the local driver.
fn local_flags() -> Vec<String> {
    let sandbox = common::standalone::sandbox_exe();
    [
        "--driver",
        "local",
        "--supervisor-bin",
        SUPERVISOR,
        "--sandbox-bin",
    ]
    .map(str::to_owned)
    .into_iter()
    .chain([sandbox.display().to_string()])
    .collect()
}

/// A gateway directory with policy `agent` approved for `space` (the
/// allowed upstream on `allowed`), served by `openshell-gateway serve
/// --driver local`: the directory, the URL, the process.
fn program_gateway(
    space: &Path,
    allowed: u16,
    driver: &[String],
) -> (tempfile::TempDir, String, std::process::Child) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = Command::new(gateway_program())
        .args(["init", "--dir"])
        .arg(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let serve = serve_program(d, &listen, driver);
    let url = format!("https://{listen}");
    let admin = d.join("admin.token");
    let source = d.join("agent.policy");
    std::fs::write(&source, policy(space, allowed)).unwrap();
    let (rc, out, err) = gateway_cli(
        d,
        &url,
        &admin,
        &["token", "create", "alice", "--role", "author"],
    );
    assert_eq!(rc, 0, "{err}");
    std::fs::write(d.join("alice"), out).unwrap();
    let alice = d.join("alice");
    let (rc, _, err) = gateway_cli(
        d,
        &url,
        &alice,
        &["propose", "agent", source.to_str().unwrap()],
    );
    assert_eq!(rc, 0, "{err}");
    let (rc, _, err) = gateway_cli(d, &url, &admin, &["approve", "1"]);
    assert_eq!(rc, 0, "{err}");
    (dir, url, serve)
}

/// The command line, end to end: `serve --driver local` and the client's
/// `sandbox create --driver local`, `stop`, `start`, `delete`.
#[test]
fn the_gateway_program_runs_a_sandbox_with_the_local_driver() {
    let space = workspace();
    let allowed = http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    let (dir, url, mut serve) = program_gateway(space.path(), allowed, &local_flags());
    let d = dir.path();
    let admin = d.join("admin.token");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let script = workload(space.path(), allowed, 9, port);
    let w = space.path().to_str().unwrap();
    let create = [
        "sandbox",
        "create",
        "sb",
        "--policy",
        "agent",
        "--driver",
        "local",
        "--workspace",
        w,
        "--",
        "/usr/bin/bash",
        script.to_str().unwrap(),
    ];
    let (rc, out, err) = gateway_cli(d, &url, &admin, &create);
    assert_eq!(
        rc,
        0,
        "{err}\n{}",
        std::fs::read_to_string(d.join("serve.log")).unwrap_or_default()
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["phase"], "ready", "{v}");
    assert_eq!(
        result(space.path())[0],
        "0",
        "the allowed upstream is relayed"
    );
    // Its files are in the default place, `DIR/local/ID`.
    assert!(d.join("local/sb/supervisor.log").exists());

    for (verb, phase) in [("stop", "stopped"), ("start", "ready")] {
        let (rc, out, err) = gateway_cli(d, &url, &admin, &["sandbox", verb, "sb"]);
        assert_eq!(rc, 0, "{verb}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["phase"], phase, "{v}");
    }
    let (rc, out, err) = gateway_cli(d, &url, &admin, &["sandbox", "delete", "sb"]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out, "sandbox `sb` deleted; its tokens are revoked\n");
    assert!(!d.join("local/sb").exists());
    let _ = serve.kill();
    let _ = serve.wait();
}

/// A gateway killed while the local driver starts a sandbox, at three
/// points of the start: the next one on the database takes the start over
/// and either finds it running (`ready`, its workload confined) or stops
/// what was made (`failed`, nothing left running).
#[test]
fn a_gateway_killed_mid_start_leaves_a_ready_sandbox_or_nothing() {
    killed_mid_start(&Killed {
        driver: "local",
        run: json!({}),
        flags: local_flags(),
        after: [0, 30, 60],
        running: &|d, id| processes_naming(&d.join("local").join(id).display().to_string()),
    });
}

/// A driver as the gateway program runs it, for [`killed_mid_start`].
struct Killed<'a> {
    driver: &'a str,
    /// What its `run` needs besides the command and the workspace.
    run: serde_json::Value,
    /// `serve`'s flags for it.
    flags: Vec<String>,
    /// When to kill the gateway, in milliseconds into a start.
    after: [u64; 3],
    /// What runs of sandbox `id` of the gateway directory `d`.
    running: &'a dyn Fn(&Path, &str) -> Vec<String>,
}

/// The gateway program is killed a little later into each start; the
/// next one finishes it: a ready sandbox whose workload runs confined, or
/// a failed one with nothing running.
fn killed_mid_start(k: &Killed<'_>) {
    let space = workspace();
    let allowed = http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    let (dir, url, mut serve) = program_gateway(space.path(), allowed, &k.flags);
    let d = dir.path();
    let admin = d.join("admin.token");
    let listen = url.trim_start_matches("https://").to_owned();
    let ca = std::fs::read(d.join("ca.pem")).unwrap();
    let token = std::fs::read_to_string(&admin).unwrap();
    let client = bundle_trust::client::Client::new(&url, &ca, &token).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let script = workload(space.path(), allowed, 9, 9);
    for (i, after) in k.after.into_iter().enumerate() {
        let id = format!("sb{i}");
        let _ = std::fs::remove_file(space.path().join("result"));
        let mut run = json!({
            "driver": k.driver,
            "command": ["/usr/bin/bash", script.display().to_string()],
            "workspace": space.path().display().to_string(),
        });
        for (key, v) in k.run.as_object().into_iter().flatten() {
            run[key] = v.clone();
        }
        let body = json!({"id": id, "policy": "agent", "run": run});
        let r = rt
            .block_on(client.send(
                "POST",
                "/v1/sandboxes?wait=0",
                Some(&body),
                &[],
                Duration::from_secs(30),
            ))
            .unwrap();
        assert_eq!(r.status, 202, "{:?}", r.json());
        std::thread::sleep(Duration::from_millis(after));
        serve.kill().unwrap();
        serve.wait().unwrap();
        serve = serve_program(d, &listen, &k.flags);
        let deadline = Instant::now() + Duration::from_secs(60);
        let v = loop {
            let (rc, out, err) = gateway_cli(d, &url, &admin, &["sandbox", "show", &id]);
            assert_eq!(rc, 0, "{err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            if matches!(v["phase"].as_str(), Some("ready" | "failed")) {
                break v;
            }
            assert!(
                Instant::now() < deadline,
                "the start was never finished: {v}"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        let running = (k.running)(d, &id);
        eprintln!("killed {after} ms into the start: {}", v["phase"]);
        match v["phase"].as_str() {
            Some("ready") => {
                assert!(!running.is_empty(), "ready, but nothing runs: {v}");
                assert_eq!(result(space.path())[0], "0", "the workload runs confined");
            }
            _ => assert!(running.is_empty(), "failed, but {running:?} run: {v}"),
        }
        let (rc, _, err) = gateway_cli(d, &url, &admin, &["sandbox", "delete", &id]);
        assert_eq!(rc, 0, "{err}");
        assert!((k.running)(d, &id).is_empty());
    }
    let _ = serve.kill();
    let _ = serve.wait();
}

#[test]
fn a_gateway_killed_mid_start_leaves_a_ready_podman_sandbox_or_nothing() {
    host::require_podman();
    let sandbox = host::static_sandbox();
    let mut volumes = Vec::new();
    let image = podman_rootfs(&sandbox, &mut volumes);
    let mut flags: Vec<String> = ["--driver", "podman", "--supervisor-bin", SUPERVISOR]
        .map(str::to_owned)
        .to_vec();
    flags.extend([
        "--podman-sandbox-bin".to_owned(),
        sandbox.display().to_string(),
    ]);
    for v in &volumes {
        flags.extend(["--podman-volume".to_owned(), v.clone()]);
    }
    killed_mid_start(&Killed {
        driver: "podman",
        run: json!({"rootfs": image.path().display().to_string()}),
        flags,
        after: [0, 80, 160],
        running: &|d, id| {
            let (workload, supervisor) =
                gateway::driver::podman::containers_of(&d.join("podman"), id);
            [workload, supervisor]
                .into_iter()
                .filter(|c| !containers_named(c, false).is_empty())
                .collect()
        },
    });
}

/// A root filesystem for the Podman driver's workloads: the static
/// sandbox, the host's users, and the host's /usr lent by `volumes`.
fn podman_rootfs(sandbox: &Path, volumes: &mut Vec<String>) -> tempfile::TempDir {
    host::rootfs(sandbox, |r| {
        *volumes = host::host_usr(r);
        for f in ["passwd", "group"] {
            std::fs::copy(Path::new("/etc").join(f), r.join("etc").join(f)).unwrap();
        }
    })
}

/// Whether a command run with `enter` (a program and its arguments that
/// run the rest in the sandbox's network namespace) reaches a listener
/// on `host`, an address of this host; the host itself must reach it, or
/// the answer would prove nothing.
fn reaches_from(host: &str, enter: &[&str]) -> bool {
    let port = http_server(TcpListener::bind((host, 0)).unwrap()).port();
    let connect = format!("exec 3<>/dev/tcp/{host}/{port}");
    let from_host = Command::new("timeout")
        .args(["3", "bash", "-c", &connect])
        .status()
        .unwrap();
    assert!(from_host.success(), "the host does not reach {host}:{port}");
    let (program, args) = enter.split_first().unwrap();
    Command::new(program)
        .args(args)
        .args(["timeout", "3", "bash", "-c", &connect])
        .status()
        .unwrap()
        .success()
}

/// Containers of Podman whose name starts with `prefix`: those that run,
/// or with `all` those that ended too.
fn containers_named(prefix: &str, all: bool) -> Vec<String> {
    let mut ps = Command::new("podman");
    ps.args(["ps", "--format", "{{.Names}}"]);
    if all {
        ps.arg("-a");
    }
    let out = ps.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

/// An IPv4 address of this host other than loopback.
fn host_address() -> String {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            l.split_whitespace()
                .nth(3)?
                .split('/')
                .next()
                .map(str::to_owned)
        })
        .expect("this host has no global IPv4 address to listen on")
}

#[test]
fn the_podman_driver_passes_the_conformance_suite() {
    host::require_podman();
    let sandbox = host::static_sandbox();
    let root = tempfile::Builder::new()
        .prefix("osp-podman-")
        .tempdir()
        .unwrap();
    // No registry is reachable: the workload's image is a root filesystem
    // with the host's /usr lent read-only, and the host's users.
    let mut volumes = Vec::new();
    let image = podman_rootfs(&sandbox, &mut volumes);
    let dir = root.path().to_path_buf();
    let make = driven::podman_driver(&dir, &sandbox, &volumes);
    let prefix = |id: &str| {
        let (workload, _) = gateway::driver::podman::containers_of(&dir, id);
        workload.trim_end_matches("-workload").to_owned()
    };
    // A listener on an address of the host: the host reaches it, the
    // workload's container (no network) does not.
    let escapes = |id: &str| {
        let (workload, _) = gateway::driver::podman::containers_of(&dir, id);
        let out = Command::new("podman")
            .args(["inspect", "-f", "{{.State.Pid}}", &workload])
            .output()
            .unwrap();
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && pid != "0",
            "{workload} does not run"
        );
        reaches_from(&host_address(), &["nsenter", "-t", &pid, "-n"])
    };
    let secrets = |id: &str| -> Vec<PathBuf> {
        ["sup", "shared"]
            .iter()
            .flat_map(|sub| {
                std::fs::read_dir(dir.join(id).join(sub))
                    .into_iter()
                    .flatten()
            })
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                name.starts_with("session.json") || name.starts_with("bootstrap-")
            })
            .collect()
    };
    conformance(
        &make,
        &Probes {
            driver: "podman",
            run: &|_| json!({"rootfs": image.path().display().to_string()}),
            owned: &|id| containers_named(&prefix(id), false),
            escapes: &escapes,
            secrets: &secrets,
            deny_log: &|id| {
                std::fs::read_to_string(dir.join(id).join("sup").join("deny.log"))
                    .unwrap_or_default()
            },
        },
    );
    assert!(
        std::fs::read_dir(root.path()).unwrap().all(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with('.')),
        "the driver left sandboxes behind"
    );
    for id in ["sb", "bad"] {
        let left = containers_named(&prefix(id), true);
        assert!(left.is_empty(), "containers left behind: {left:?}");
    }
}

/// An image Podman has (no registry is asked): a root filesystem imported
/// with `podman import`, the host's /usr lent by a driver volume. A
/// sandbox runs from it and runs a command; the image stays, the
/// containers go.
#[test]
fn the_podman_driver_runs_a_sandbox_from_an_image() {
    host::require_podman();
    let sandbox = host::static_sandbox();
    let mut volumes = Vec::new();
    let rootfs = podman_rootfs(&sandbox, &mut volumes);
    let tar = tempfile::NamedTempFile::new().unwrap();
    let status = Command::new("tar")
        .args(["-C"])
        .arg(rootfs.path())
        .args(["-cf"])
        .arg(tar.path())
        .arg(".")
        .status()
        .unwrap();
    assert!(status.success());
    let image = format!("localhost/osp-test-image-{}", std::process::id());
    let out = Command::new("podman")
        .args(["import", "-q"])
        .arg(tar.path())
        .arg(&image)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = tempfile::Builder::new()
        .prefix("osp-podman-")
        .tempdir()
        .unwrap();
    let space = workspace();
    let allowed = http_server(TcpListener::bind("127.0.0.1:0").unwrap()).port();
    let gw = gateway(
        &driven::podman_driver(root.path(), &sandbox, &volumes),
        &policy(space.path(), allowed),
        30,
    );
    let run = json!({
        "driver": "podman",
        "command": ["/usr/bin/sleep", "600"],
        "workspace": space.path().display().to_string(),
        "image": image,
    });
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "img", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    let ran = exec(&gw, "img", json!({"command": ["/usr/bin/id", "-u"]}));
    assert_eq!(
        (ran.record["exit_status"].as_u64(), ran.stdout.trim()),
        (Some(0), "65534")
    );
    let r = gw.call("DELETE", "/v1/sandboxes/img", None);
    assert_eq!(r.status, 200, "{:?}", r.json());

    // A volume as the workspace: made at the first start, given to the
    // containers' user, kept across stop and start.
    let volume = format!("osp-test-workspace-{}", std::process::id());
    let at_volume = policy(Path::new("/workspace"), allowed).replace("\"agent\"", "\"vol\"");
    gw.approve(&gw.author("bob"), "vol", &at_volume);
    let run = json!({
        "driver": "podman",
        "command": ["/usr/bin/sleep", "600"],
        "workspace": volume,
        "image": image,
    });
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "vol", "policy": "vol", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    let ran = exec(
        &gw,
        "vol",
        json!({"command": ["/usr/bin/bash", "-c", "pwd; echo kept > kept"]}),
    );
    assert_eq!(
        (ran.record["exit_status"].as_u64(), ran.stdout.as_str()),
        (Some(0), "/workspace\n"),
        "{}",
        ran.stderr
    );
    for step in ["stop", "start"] {
        let r = gw.call("POST", &format!("/v1/sandboxes/vol/{step}"), None);
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
    let ran = exec(
        &gw,
        "vol",
        json!({"command": ["/usr/bin/cat", "/workspace/kept"]}),
    );
    assert_eq!(ran.stdout, "kept\n", "{}", ran.stderr);
    let r = gw.call("DELETE", "/v1/sandboxes/vol", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    let _ = Command::new("podman")
        .args(["volume", "rm", "-f", &volume])
        .output();

    let (workload, supervisor) = gateway::driver::podman::containers_of(root.path(), "img");
    for c in [workload, supervisor] {
        assert!(containers_named(&c, true).is_empty(), "{c} is left");
    }
    let _ = Command::new("podman").args(["rmi", "-f", &image]).output();
    // An image Podman does not have is refused before anything is stored.
    let run = json!({"driver": "podman", "command": ["/usr/bin/true"], "workspace": space.path().display().to_string(), "image": "localhost/osp-no-such-image"});
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "none", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 400, "{:?}", r.json());
}

/// The Kubernetes driver against the API server played in memory, its
/// Pods run for real by a kubelet of `podman kube play`
/// (`common/podman_kubelet.rs` says what that node lends them).
#[test]
fn the_kubernetes_driver_passes_the_conformance_suite() {
    host::require_podman();
    let sandbox = host::static_sandbox();
    let images = kube_play::images(&sandbox, Path::new(SUPERVISOR));
    let cluster = fake::FakeCluster::default();
    let kubelet = podman_kubelet::PodmanKubelet::new();
    cluster.kubelet(std::sync::Arc::new(kubelet.clone()));
    // The played API server's task and kube's own run here; the gateway
    // calls the client from its runtime.
    let k8s = tokio::runtime::Runtime::new().unwrap();
    let client = {
        let _in = k8s.enter();
        cluster.client()
    };
    let make = driven::kubernetes_driver(
        client,
        fake::NAMESPACE,
        &images.supervisor,
        T,
        Duration::from_millis(200),
    );
    let of = |id: &str| {
        let prefix = format!("osp-{id}-");
        move |pod: &str| pod.starts_with(&prefix)
    };
    let escapes = |id: &str| {
        let workload = |pod: &str| of(id)(pod) && pod.ends_with("-workload");
        let pids = kubelet.with_pods(workload, kube_play::Played::netns_pid);
        let pid = pids.first().expect("the workload Pod runs");
        reaches_from(&host_address(), &["nsenter", "-t", pid, "-n"])
    };
    let secrets = |id: &str| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = kubelet
            .with_pods(of(id), kube_play::Played::secret_files)
            .into_iter()
            .flatten()
            .collect();
        found.extend(
            cluster
                .names("secrets")
                .into_iter()
                .filter(|n| of(id)(n))
                .map(PathBuf::from),
        );
        found
    };
    let deny_log = |id: &str| {
        let supervisor = |pod: &str| of(id)(pod) && pod.ends_with("-supervisor");
        kubelet
            .with_pods(supervisor, |p| p.logs("supervisor"))
            .concat()
    };
    conformance(
        &make,
        &Probes {
            driver: "kubernetes",
            run: &|workspace| {
                kubelet.claim("conformance", workspace);
                json!({"image": images.workload, "workspace": "conformance"})
            },
            owned: &|id| containers_named(&format!("osp-{id}-"), false),
            escapes: &escapes,
            secrets: &secrets,
            deny_log: &deny_log,
        },
    );
    for id in ["sb", "bad"] {
        let left = containers_named(&format!("osp-{id}-"), true);
        assert!(left.is_empty(), "containers left behind: {left:?}");
    }
    assert!(
        cluster.names("pods").is_empty(),
        "{:?}",
        cluster.names("pods")
    );
    assert!(
        cluster.names("secrets").is_empty(),
        "{:?}",
        cluster.names("secrets")
    );
}

/// The Kubernetes driver on a real cluster, when one is given
/// (`OPENSHELL_TEST_KUBECONFIG`, with the images and an address of this
/// host its Pods reach): a sandbox made ready, a command run in it as the
/// Pods' user, stopped with nothing left, deleted. No cluster is reachable
/// where this project's CI runs: it says so and passes.
#[test]
fn the_kubernetes_driver_runs_a_sandbox_on_a_real_cluster() {
    let Some(kubeconfig) = std::env::var_os("OPENSHELL_TEST_KUBECONFIG") else {
        println!(
            "not run: no cluster (OPENSHELL_TEST_KUBECONFIG is not set; with it set, \
             OPENSHELL_TEST_K8S_SUPERVISOR_IMAGE, OPENSHELL_TEST_K8S_WORKLOAD_IMAGE (with /bin/sh \
             and a `nobody` user) and OPENSHELL_TEST_K8S_GATEWAY_ADDRESS (an address of this host \
             the cluster's Pods reach) are needed too; OPENSHELL_TEST_K8S_NAMESPACE defaults to \
             openshell-test)"
        );
        return;
    };
    let var = |name: &str| {
        std::env::var(name)
            .unwrap_or_else(|_| panic!("OPENSHELL_TEST_KUBECONFIG is set but {name} is not"))
    };
    let supervisor_image = var("OPENSHELL_TEST_K8S_SUPERVISOR_IMAGE");
    let workload_image = var("OPENSHELL_TEST_K8S_WORKLOAD_IMAGE");
    let address = var("OPENSHELL_TEST_K8S_GATEWAY_ADDRESS");
    let namespace =
        std::env::var("OPENSHELL_TEST_K8S_NAMESPACE").unwrap_or_else(|_| "openshell-test".into());
    let k8s = tokio::runtime::Runtime::new().unwrap();
    let client = k8s.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    let make = driven::kubernetes_driver(
        client.clone(),
        &namespace,
        &supervisor_image,
        Duration::from_secs(300),
        Duration::from_secs(1),
    );
    let policy = "policy \"agent\" {\n  landlock hard min_abi 4\n  fs exec /bin /etc\n  fs read /proc\n  fs write /dev/null /workspace\n  run_as user nobody group nogroup\n}\n";
    let listener = TcpListener::bind((address.as_str(), 0)).unwrap();
    let gw = driven::gateway_on(listener, std::slice::from_ref(&address), &make, policy, 30);
    let run = json!({"driver": "kubernetes", "image": workload_image, "command": ["/bin/sh", "-c", "sleep 3600"]});
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "real", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    assert_eq!(r.json()["phase"], "ready");
    let ran = exec(
        &gw,
        "real",
        json!({"command": ["/bin/sh", "-c", "id -u; echo hi"]}),
    );
    assert_eq!(ran.record["exit_status"], 0, "{}", ran.record);
    assert_eq!(ran.stdout, "65534\nhi\n");
    let r = gw.call("POST", "/v1/sandboxes/real/stop", None);
    assert_eq!(r.status, 200, "{:?}", r.json());
    let left = k8s.block_on(async {
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, &namespace);
        let selector = "app.kubernetes.io/part-of=openshell,openshell.dev/sandbox=real";
        pods.list(&kube::api::ListParams::default().labels(selector))
            .await
            .unwrap()
            .items
            .len()
    });
    assert_eq!(left, 0, "Pods left after the stop");
    assert_eq!(gw.call("DELETE", "/v1/sandboxes/real", None).status, 200);
}
