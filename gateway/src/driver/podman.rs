//! The Podman driver: a sandbox as two containers on the gateway's host,
//! the standalone-host placement. The workload's container runs
//! `openshell-sandbox` (statically linked, so any image will do) as PID 1
//! with no network at all (`--network=none`); its only way out is the
//! Unix socket of the sandbox protocol, in a directory it shares with the
//! supervisor's container, which runs `openshell-supervisor serve` in the
//! host's network (it reaches the gateway and the upstreams). Both run as
//! one unprivileged user, with every capability dropped,
//! `no-new-privileges`, Podman's default seccomp profile, and crun.
//!
//! Everything a sandbox has is under `ROOT/ID/`: `sup/` (the supervisor's
//! own: its session file, revision floor, deny log and ready files) and
//! `shared/` (the socket, and the bootstrap the sandbox deletes once
//! read), both the container user's, mode 0700, and the containers' logs.
//! The containers are named from the driver's root and the sandbox id,
//! so a gateway started later finds them.

use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::host::{self, fail, run, tag, tail};
use super::{Driver, DriverError, DriverFut, Launch, RunSpec};

/// How long a start may take until the sandbox's workload runs.
const READY_WITHIN: Duration = Duration::from_secs(120);
/// How long a stop waits after `SIGTERM` before `SIGKILL`, in seconds.
const TERM_GRACE: &str = "5";
/// Where the shared directory is in both containers.
const SHARED: &str = "/run/openshell";
/// Where the supervisor's own directory is in its container.
const SUP: &str = "/run/openshell-supervisor";
/// Where the driver's programs are in the containers (read-only).
const BIN: &str = "/run/openshell-bin";

/// Where the Podman driver keeps its sandboxes and what it runs.
#[derive(Debug, Clone)]
pub struct Podman {
    /// `ROOT`: one directory per sandbox.
    pub root: PathBuf,
    /// `openshell-supervisor`, run in the supervisor's container with the
    /// host's `/usr`, `/lib*` and `/etc` lent read-only.
    pub supervisor: PathBuf,
    /// `openshell-sandbox`, statically linked: it runs in the workload's
    /// image whatever C library that has, or none.
    pub sandbox: PathBuf,
    /// How a supervisor reaches this gateway from the host's network.
    pub gateway_urls: Vec<String>,
    /// The gateway directory's `ca.pem`.
    pub gateway_ca: PathBuf,
    /// The gateway directory's `trust.keys`.
    pub trust_keys: PathBuf,
    /// The user (`UID:GID`, never 0) both containers run as.
    pub user: (u32, u32),
    /// More volumes (`SRC:DST[:OPTIONS]`) every workload container gets,
    /// e.g. a host tree an image lacks.
    pub volumes: Vec<String>,
}

/// One sandbox's names and files.
struct Place {
    dir: PathBuf,
    workload: String,
    supervisor: String,
}

impl Place {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The containers of sandbox `id` of the driver at `root`: the
/// workload's and the supervisor's.
#[must_use]
pub fn containers_of(root: &Path, id: &str) -> (String, String) {
    let t = tag(root, id);
    (format!("osp-{t}-workload"), format!("osp-{t}-supervisor"))
}

fn podman() -> Command {
    let mut c = Command::new("podman");
    c.args(["--runtime", "crun"]);
    c
}

/// The confinement both containers share.
fn confined(user: (u32, u32)) -> Vec<String> {
    [
        "--cgroups=disabled",
        "--user",
        &format!("{}:{}", user.0, user.1),
        "--cap-drop",
        "all",
        "--security-opt",
        "no-new-privileges",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Whether container `name` runs.
fn container_runs(name: &str) -> bool {
    podman()
        .args(["container", "inspect", "-f", "{{.State.Running}}", name])
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "true")
}

/// Stops and removes container `name`, if there is one.
fn remove_container(name: &str) {
    let _ = podman()
        .args(["stop", "-t", TERM_GRACE, name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let _ = podman()
        .args(["rm", "-f", name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// A directory owned by `user`, mode 0700.
fn own_dir(path: &Path, user: (u32, u32)) -> Result<(), DriverError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|e| fail(&format!("cannot make `{}`", path.display()), e))?;
    std::os::unix::fs::chown(path, Some(user.0), Some(user.1))
        .map_err(|e| fail(&format!("cannot give `{}` away", path.display()), e))
}

/// A root filesystem for the supervisor's container: only the mount
/// points; its programs and configuration are the host's, lent read-only.
fn supervisor_root(root: &Path) -> Result<PathBuf, DriverError> {
    let dir = root.join(".supervisor-root");
    for sub in [
        "proc", "dev", "sys", "tmp", "etc", "usr", "run", "bin", "lib",
    ] {
        std::fs::create_dir_all(dir.join(sub))
            .map_err(|e| fail(&format!("cannot make `{}`", dir.display()), e))?;
    }
    Ok(dir)
}

/// The host's trees the supervisor's container lends, read-only.
fn host_trees() -> Vec<String> {
    let mut volumes = vec!["/usr:/usr:ro".to_owned(), "/etc:/etc:ro".to_owned()];
    for dir in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(dir);
        if host.exists() {
            // A link into /usr (merged /usr) is lent as its target's tree.
            let target = std::fs::canonicalize(&host).unwrap_or(host);
            volumes.push(format!("{}:/{dir}:ro", target.display()));
        }
    }
    volumes
}

/// Where the workload's workspace comes from.
enum Workspace<'a> {
    /// A directory of the host, mounted at the same path.
    Dir(&'a str),
    /// A Podman volume (made at the first start if missing, kept across
    /// stop and start, and after a delete), mounted at [`VOLUME_AT`].
    Volume(&'a str),
}

/// Where a volume workspace is in the workload's container.
const VOLUME_AT: &str = "/workspace";

impl<'a> Workspace<'a> {
    fn of(workspace: &'a str) -> Self {
        if workspace.starts_with('/') {
            Self::Dir(workspace)
        } else {
            Self::Volume(workspace)
        }
    }

    /// The workload's working directory, and the `-v` that gives it.
    fn mount(&self) -> (&'a str, String) {
        match *self {
            Self::Dir(dir) => (dir, format!("{dir}:{dir}")),
            // `U`: the volume is given to the containers' user.
            Self::Volume(name) => (VOLUME_AT, format!("{name}:{VOLUME_AT}:U")),
        }
    }
}

fn volume_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// What the Podman driver cannot run.
fn check(spec: &RunSpec) -> Result<(), String> {
    let Some(workspace) = spec.workspace.as_deref() else {
        return Err(
            "the Podman driver needs `run.workspace`: a directory of the gateway's host (mounted at the same path) or a volume's name (mounted at /workspace)"
                .into(),
        );
    };
    match Workspace::of(workspace) {
        Workspace::Dir(dir) if !Path::new(dir).is_dir() => {
            return Err(format!(
                "`run.workspace` `{workspace}` is not a directory on the gateway's host"
            ));
        }
        Workspace::Volume(name) if !volume_name(name) => {
            return Err(format!(
                "`run.workspace` `{workspace}` is neither an absolute path nor a volume name (letters, digits, `_`, `.`, `-`, not starting with `.` or `-`)"
            ));
        }
        _ => {}
    }
    match (&spec.rootfs, &spec.image) {
        (None, None) => {
            return Err(
                "the Podman driver needs `run.rootfs` (a directory of the host) or `run.image` (an image Podman has)"
                    .into(),
            );
        }
        (Some(dir), _) if !Path::new(dir).is_absolute() || !Path::new(dir).is_dir() => {
            return Err(format!(
                "`run.rootfs` `{dir}` is not an absolute path to a directory on the gateway's host"
            ));
        }
        (_, Some(image)) => {
            let known = podman()
                .args(["image", "exists", image])
                .status()
                .is_ok_and(|s| s.success());
            if !known {
                return Err(format!(
                    "`run.image` `{image}` is not an image Podman has here: pull or import it first"
                ));
            }
        }
        _ => {}
    }
    match spec.command.first() {
        None => Err("the Podman driver needs `run.command`".into()),
        Some(program) if !program.starts_with('/') => Err(format!(
            "`run.command` starts with `{program}`: give the program's absolute path in the container"
        )),
        Some(_) => Ok(()),
    }
}

impl Podman {
    fn place(&self, id: &str) -> Place {
        let (workload, supervisor) = containers_of(&self.root, id);
        Place {
            dir: self.root.join(id),
            workload,
            supervisor,
        }
    }

    /// Waits until `file` exists while every container of `alive` runs.
    fn wait_for(
        &self,
        file: &Path,
        alive: &[&str],
        deadline: Instant,
        place: &Place,
    ) -> Result<(), DriverError> {
        let mut checked = Instant::now();
        loop {
            if file.exists() {
                return Ok(());
            }
            // `podman inspect` takes tens of milliseconds: asked less often.
            if checked.elapsed() > Duration::from_millis(500) {
                checked = Instant::now();
                if let Some(gone) = alive.iter().find(|c| !container_runs(c)) {
                    let log = |name: &str| tail(&place.file(name));
                    return Err(DriverError(format!(
                        "container {gone} ended before the sandbox was ready; supervisor: {}; sandbox: {}",
                        log("supervisor.log"),
                        log("sandbox.log")
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(DriverError(format!(
                    "the sandbox was not ready within {READY_WITHIN:?}; supervisor: {}",
                    tail(&place.file("supervisor.log"))
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl host::Steps for Podman {
    fn start_blocking(&self, l: &Launch) -> Result<(), DriverError> {
        check(&l.spec).map_err(DriverError)?;
        let (workspace, workspace_volume) =
            Workspace::of(l.spec.workspace.as_deref().unwrap_or_default()).mount();
        let place = self.place(&l.id);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&place.dir)
            .map_err(|e| fail(&format!("cannot make `{}`", place.dir.display()), e))?;
        self.stop_blocking(&l.id);
        let sup = place.file("sup");
        let shared = place.file("shared");
        own_dir(&sup, self.user)?;
        own_dir(&shared, self.user)?;
        let _ = std::fs::remove_file(shared.join("sandbox.sock"));
        let session = json!({
            "id": l.id, "generation": l.generation, "token": l.token, "expires_at": l.token_expires_at,
        });
        let token_file = sup.join("session.json");
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&token_file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, session.to_string().as_bytes()))
            .map_err(|e| fail("cannot write the session", e))?;
        std::os::unix::fs::chown(&token_file, Some(self.user.0), Some(self.user.1))
            .map_err(|e| fail("cannot give the session away", e))?;
        let g = l.generation;
        let ready = sup.join(format!("ready-{g}"));
        let bootstrap = shared.join(format!("bootstrap-{g}"));
        let _ = std::fs::remove_file(&ready);
        let _ = std::fs::remove_file(&bootstrap);

        // The supervisor's container.
        let mut serve = podman();
        serve
            .args(["run", "-d", "--name", &place.supervisor, "--network=host"])
            .args(confined(self.user))
            .args(["--log-driver", "k8s-file", "--log-opt"])
            .arg(format!("path={}", place.file("supervisor.log").display()));
        for v in host_trees() {
            serve.args(["-v", &v]);
        }
        serve
            .arg("-v")
            .arg(format!(
                "{}:{BIN}/openshell-supervisor:ro",
                self.supervisor.display()
            ))
            .arg("-v")
            .arg(format!("{}:{SUP}/ca.pem:ro", self.gateway_ca.display()))
            .arg("-v")
            .arg(format!("{}:{SUP}/trust.keys:ro", self.trust_keys.display()))
            .arg("-v")
            .arg(format!("{}:{SUP}/own", sup.display()))
            .arg("-v")
            .arg(format!("{}:{SHARED}", shared.display()))
            .arg("--rootfs")
            .arg(supervisor_root(&self.root)?)
            .args([&format!("{BIN}/openshell-supervisor"), "serve"]);
        for url in &self.gateway_urls {
            serve.args(["--gateway", url]);
        }
        serve
            .args(["--token-file", &format!("{SUP}/own/session.json")])
            .args(["--gateway-ca", &format!("{SUP}/ca.pem")])
            .args(["--trust-key", &format!("{SUP}/trust.keys")])
            .args(["--state-dir", &format!("{SUP}/own/state")])
            .args(["--sandbox", &format!("unix:{SHARED}/sandbox.sock")])
            .args(["--sandbox-id", &l.id, "--generation", &g.to_string()])
            .args(["--bootstrap", &format!("{SHARED}/bootstrap-{g}")])
            .args(["--ready-file", &format!("{SUP}/own/ready-{g}")])
            .args(["--log", &format!("{SUP}/own/deny.log")])
            .args(["--workdir", workspace]);
        if let Some(secs) = l.spec.timeout_seconds {
            serve.args(["--timeout", &secs.to_string()]);
        }
        serve.arg("--").args(&l.spec.command);
        run(&mut serve, "`podman run` (the supervisor)")?;
        let deadline = Instant::now() + READY_WITHIN;
        self.wait_for(&bootstrap, &[&place.supervisor], deadline, &place)?;

        // The workload's container.
        let mut sbx = podman();
        sbx.args(["run", "-d", "--name", &place.workload, "--network=none"])
            .args(confined(self.user))
            .args(["--log-driver", "k8s-file", "--log-opt"])
            .arg(format!("path={}", place.file("sandbox.log").display()))
            .arg("-v")
            .arg(format!(
                "{}:{BIN}/openshell-sandbox:ro",
                self.sandbox.display()
            ))
            .arg("-v")
            .arg(format!("{}:{SHARED}", shared.display()))
            .arg("-v")
            .arg(workspace_volume);
        for v in &self.volumes {
            sbx.args(["-v", v]);
        }
        match (&l.spec.rootfs, &l.spec.image) {
            (Some(dir), _) => {
                sbx.args(["--rootfs", dir]);
            }
            (None, Some(image)) => {
                sbx.arg(image);
            }
            (None, None) => {}
        }
        sbx.args([
            &format!("{BIN}/openshell-sandbox"),
            "--bootstrap",
            &format!("{SHARED}/bootstrap-{g}"),
        ]);
        run(&mut sbx, "`podman run` (the workload)")?;
        self.wait_for(
            &ready,
            &[&place.supervisor, &place.workload],
            deadline,
            &place,
        )
    }

    fn running_blocking(&self, id: &str) -> bool {
        let place = self.place(id);
        container_runs(&place.workload) && container_runs(&place.supervisor)
    }

    /// The workload's container first (its processes end with its PID
    /// 1), then the supervisor's; then nothing that could authenticate
    /// stays behind.
    fn stop_blocking(&self, id: &str) {
        let place = self.place(id);
        remove_container(&place.workload);
        remove_container(&place.supervisor);
        for dir in ["sup", "shared"] {
            if let Ok(entries) = std::fs::read_dir(place.file(dir)) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let secret = name.starts_with("session.json")
                        || name.starts_with("bootstrap-")
                        || name.starts_with("ready-");
                    if secret {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
    }

    fn dir_of(&self, id: &str) -> PathBuf {
        self.place(id).dir
    }
}

impl Driver for Podman {
    fn name(&self) -> &str {
        "podman"
    }

    fn check(&self, spec: &RunSpec) -> Result<(), String> {
        check(spec)
    }

    /// This host's Podman and this root.
    fn place(&self) -> String {
        host::place("podman", &self.root)
    }

    fn start(&self, launch: Launch) -> DriverFut<'_, ()> {
        host::start(self, launch)
    }

    fn running(&self, id: &str) -> DriverFut<'_, bool> {
        host::running(self, id)
    }

    fn stop(&self, id: &str) -> DriverFut<'_, ()> {
        host::stop(self, id)
    }

    fn remove(&self, id: &str) -> DriverFut<'_, ()> {
        host::remove(self, id)
    }
}
