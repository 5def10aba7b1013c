//! The platform's contract, end to end through the gateway and the local
//! driver: a task goes in as a workspace, a command and an environment
//! allow-list; its transcript and exit status come out; a timeout kills a
//! command that hangs. The policy lets `git fetch` read a Git server on
//! loopback and refuses a push to it, which the deny log records with the
//! sandbox's id. The server itself accepts pushes (checked from the host),
//! so the refusal is the policy's.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;
#[path = "common/driven.rs"]
mod driven;

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::SYSTEM;
use driven::{exec, gateway, local_driver, workspace};
use serde_json::{Value, json};

/// Git's smart HTTP protocol on loopback: `git http-backend` behind a
/// small CGI server, pushes enabled. Prints its port, then serves.
const GIT_SERVER_PY: &str = r#"
import http.server, os, subprocess, sys
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def cgi(self):
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = dict(os.environ, GIT_PROJECT_ROOT=root, GIT_HTTP_EXPORT_ALL="1",
                   REQUEST_METHOD=self.command, PATH_INFO=path, QUERY_STRING=query,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_USER="tester", REMOTE_ADDR="127.0.0.1")
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status, headers = 200, []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)
    do_GET = do_POST = cgi
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

fn git(args: &[&str], dir: &Path) -> String {
    let out = Command::new("/usr/bin/git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.org")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.org")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The Git server, stopped when dropped.
struct GitServer {
    child: Child,
    port: u16,
}

impl Drop for GitServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn git_server(root: &Path) -> GitServer {
    let mut child = Command::new("python3")
        .args(["-c", GIT_SERVER_PY])
        .arg(root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    GitServer { child, port }
}

fn policy(space: &Path, git_port: u16) -> String {
    format!(
        "policy \"agent\" {{\n  landlock hard min_abi 4\n{SYSTEM}  fs write {}\n  run_as user nobody group nogroup\n  binaries git_http = /usr/lib/git-core/git-remote-http\n  allow git_http -> 127.0.0.1:{git_port} http {{\n    allow GET /*/info/refs ?service=git-upload-pack\n    allow POST /*/git-upload-pack\n  }}\n}}\n",
        space.display()
    )
}

#[test]
fn a_task_fetches_its_repository_is_refused_a_push_and_a_hang_is_killed() {
    // The server's repository, and a clone of it in the workspace.
    let srv = tempfile::tempdir().unwrap();
    let seed = srv.path().join("seed");
    std::fs::create_dir(&seed).unwrap();
    git(&["init", "-q", "-b", "main"], &seed);
    std::fs::write(seed.join("README"), "first\n").unwrap();
    git(&["add", "README"], &seed);
    git(&["commit", "-q", "-m", "first"], &seed);
    git(&["clone", "-q", "--bare", "seed", "repo.git"], srv.path());
    git(
        &["config", "http.receivepack", "true"],
        &srv.path().join("repo.git"),
    );
    let server = git_server(srv.path());
    let url = format!("http://127.0.0.1:{}/repo.git", server.port);

    let space = workspace();
    let work = space.path().join("repo");
    git(&["clone", "-q", &url, work.to_str().unwrap()], space.path());
    // The server moves on: the task's fetch has something to get.
    std::fs::write(seed.join("README"), "second\n").unwrap();
    git(&["commit", "-q", "-am", "second"], &seed);
    git(&["push", "-q", &url, "main"], &seed);
    let second = git(&["rev-parse", "HEAD"], &seed);
    // The server takes a push from the host: a refusal in the sandbox is
    // the policy's, not the server's.
    git(&["push", "-q", &url, "main:refs/heads/from-host"], &seed);
    let status = Command::new("chown")
        .args(["-R", "nobody:nogroup"])
        .arg(&work)
        .status()
        .unwrap();
    assert!(status.success());

    let root = tempfile::Builder::new()
        .prefix("osp-contract-")
        .tempdir()
        .unwrap();
    let gw = gateway(
        &local_driver(root.path()),
        &policy(space.path(), server.port),
        30,
    );
    let run = json!({
        "driver": "local",
        "command": ["/usr/bin/sleep", "infinity"],
        "workspace": work.display().to_string(),
        "env_allow": ["TASK"],
    });
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "task", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());

    let script = "echo \"task $TASK\"\n\
                  /usr/bin/git fetch -q origin 2>&1; echo \"fetch $?\"\n\
                  /usr/bin/git rev-parse origin/main\n\
                  /usr/bin/git push -q origin HEAD:refs/heads/from-task 2>&1; echo \"push $?\"\n\
                  exit 7\n";
    let ran = exec(
        &gw,
        "task",
        json!({"command": ["/usr/bin/bash", "-c", script], "env": {"TASK": "42"}}),
    );
    let logs = |id: &str| {
        ["supervisor.log", "sandbox.log"]
            .map(|f| std::fs::read_to_string(root.path().join(id).join(f)).unwrap_or_default())
            .join("\n")
    };
    assert_eq!(
        ran.record["state"],
        "exited",
        "{}\n{}\n{}",
        ran.record,
        ran.stdout,
        logs("task")
    );
    assert_eq!(ran.record["exit_status"], 7, "{}", ran.record);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(lines.first(), Some(&"task 42"), "{}", ran.stdout);
    assert!(ran.stdout.contains("fetch 0\n"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains(&format!("{second}\n")),
        "{}",
        ran.stdout
    );
    let push = lines.iter().find(|l| l.starts_with("push ")).unwrap();
    assert_ne!(*push, "push 0", "{}", ran.stdout);

    // The transcript is kept: read back, it is what streamed.
    let id = ran.record["id"].as_str().unwrap();
    let kept = gw
        .call("GET", &format!("/v1/sandboxes/task/execs/{id}"), None)
        .json();
    assert_eq!(kept["exit_status"], 7, "{kept}");
    assert_eq!(kept["stdout_bytes"], ran.stdout.len(), "{kept}");

    // The refused push is in the deny log, with the sandbox's id: its
    // discovery request (`?service=git-receive-pack`; the fetch's, of
    // upload-pack, was allowed).
    let log = std::fs::read_to_string(root.path().join("task").join("deny.log")).unwrap();
    let refused: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["unmapped"]["sandbox"]["id"] == "task"
                && e["action"] == "Denied"
                && e["http_request"]["url"]["path"] == "/repo.git/info/refs"
        })
        .collect();
    assert!(
        !refused.is_empty(),
        "no refused push in the deny log:\n{log}"
    );
    // Nothing reached the server from the sandbox.
    let heads = git(&["branch", "--list"], &srv.path().join("repo.git"));
    assert!(!heads.contains("from-task"), "{heads}");

    // A command that hangs is killed at its timeout.
    let started = Instant::now();
    let ran = exec(
        &gw,
        "task",
        json!({"command": ["/usr/bin/sleep", "600"], "timeout_seconds": 2}),
    );
    assert_eq!(ran.record["timed_out"], true, "{}", ran.record);
    assert!(started.elapsed() < Duration::from_secs(60));

    // So is a task's own command, with the sandbox's run.
    let run = json!({
        "driver": "local",
        "command": ["/usr/bin/sleep", "600"],
        "workspace": work.display().to_string(),
        "timeout_seconds": 2,
    });
    let r = gw.call(
        "POST",
        "/v1/sandboxes",
        Some(json!({"id": "hang", "policy": "agent", "run": run})),
    );
    assert_eq!(r.status, 201, "{:?}", r.json());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let v = gw.call("GET", "/v1/sandboxes/hang", None).json();
        if v["phase"] == "stopped" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the hanging task was not ended: {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let sandbox_log =
        std::fs::read_to_string(root.path().join("hang").join("sandbox.log")).unwrap();
    assert!(sandbox_log.contains("past its timeout"), "{sandbox_log}");
    for id in ["task", "hang"] {
        let r = gw.call("DELETE", &format!("/v1/sandboxes/{id}"), None);
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
}
