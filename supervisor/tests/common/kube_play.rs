//! Kubernetes Pods run for real by `podman kube play`, standing in for a
//! kubelet: the driver's Pods and Secrets as it would send them, with the
//! few changes Podman 4.3 needs, each named here:
//!
//! - a `secret` volume becomes a `hostPath` directory holding the
//!   Secret's files as the kubelet lays them out (owned by root, group
//!   `fsGroup`, the volume's mode plus group read): Podman 4.3 crashes on
//!   a Secret volume;
//! - the Pod's sysctls become Podman's default ones for its containers
//!   (Podman 4.3 drops a Pod's);
//! - the scheduling gates are gone (the driver has lifted them);
//! - a container's `ports` are left out: without a `hostPort` they only
//!   inform, and Podman 4.3 makes them port mappings, which a Pod in a
//!   namespace of its own cannot have;
//! - a readiness probe is run by the harness with `podman exec`, as the
//!   kubelet would run it (Podman 4.3 turns probes into systemd timers).
//!
//! What runs is otherwise the driver's: the init containers, the
//! volumes, the users, the capabilities, `no_new_privs` and the runtime's
//! default seccomp profile. Podman backs an `emptyDir` of `medium:
//! Memory` with a directory on disk, not a tmpfs.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The images the Pods run: the supervisor's (the programs of
/// `GenerationSpec::supervisor_image`) and a workload's.
pub struct Images {
    pub supervisor: String,
    pub workload: String,
}

/// Imported from root filesystems (no registry is reachable); removed on
/// drop.
pub fn images(sandbox: &Path, supervisor: &Path) -> Images {
    let tag = std::process::id();
    let images = Images {
        supervisor: format!("localhost/osp-kube-supervisor:{tag}"),
        workload: format!("localhost/osp-kube-workload:{tag}"),
    };
    let root = tempfile::tempdir().unwrap();
    let sup = root.path().join("supervisor");
    busybox_root(&sup);
    let bin = sup.join("usr/local/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::copy(supervisor, bin.join("openshell-supervisor")).unwrap();
    std::fs::copy(sandbox, bin.join("openshell-sandbox")).unwrap();
    for lib in shared_libraries(supervisor) {
        let to = sup.join(lib.strip_prefix("/").unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&lib, &to).unwrap();
    }
    import(&sup, &images.supervisor);
    let work = root.path().join("workload");
    busybox_root(&work);
    usr_links(&work);
    import(&work, &images.workload);
    images
}

impl Drop for Images {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["rmi", "-f", &self.supervisor, &self.workload])
            .output();
    }
}

/// A root filesystem of the static busybox (`sh`, `cp`, `test`, `wget`,
/// `nc`...) and the host's users.
fn busybox_root(root: &Path) {
    for dir in ["bin", "etc", "tmp", "proc", "dev", "sys", "run"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
    for applet in [
        "sh", "cp", "test", "cat", "ls", "id", "sleep", "wget", "nc", "echo",
    ] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet)).unwrap();
    }
    for f in ["passwd", "group"] {
        std::fs::copy(Path::new("/etc").join(f), root.join("etc").join(f)).unwrap();
    }
}

/// Links into `/usr` where the host has them, for a node that lends its
/// `/usr`.
fn usr_links(root: &Path) {
    for dir in ["sbin", "lib", "lib32", "lib64", "libx32"] {
        if let Ok(target) = std::fs::read_link(Path::new("/").join(dir)) {
            std::os::unix::fs::symlink(target, root.join(dir)).unwrap();
        }
    }
}

/// The shared libraries `program` loads, as `ldd` lists them.
fn shared_libraries(program: &Path) -> Vec<std::path::PathBuf> {
    let out = Command::new("ldd").arg(program).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(std::path::PathBuf::from)
        })
        .collect()
}

fn import(root: &Path, image: &str) {
    let mut tar = Command::new("tar")
        .arg("-C")
        .arg(root)
        .args(["-c", "."])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Command::new("podman")
        .args([
            "import",
            "--change",
            "ENV=PATH=/usr/local/bin:/bin",
            "-",
            image,
        ])
        .stdin(tar.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(tar.wait().unwrap().success(), "tar of {}", root.display());
    assert!(
        out.status.success(),
        "podman import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Pod `podman kube play` runs; removed with its files on drop.
pub struct Played {
    pub pod: String,
    /// The Secrets' files, and the played manifest.
    _files: tempfile::TempDir,
    /// The readiness probes, by container.
    probes: Vec<(String, Vec<String>)>,
}

/// Where a played Pod's network is.
#[derive(Clone, Copy)]
pub enum Network {
    /// Podman's bridge: an address of its own, reached from the host.
    Bridge,
    /// The host's (as the Podman driver runs its supervisors: the gateway
    /// is on the host's loopback), whose sysctls are left as they are.
    Host,
}

/// Plays `pod` (the API's JSON of a Pod) with the `secrets` it mounts.
pub fn play(pod: &Value, secrets: &[Value], network: Network) -> Played {
    let mut pod = pod.clone();
    let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
    let files = tempfile::tempdir().unwrap();
    std::fs::set_permissions(files.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let group = pod["spec"]["securityContext"]["fsGroup"]
        .as_u64()
        .unwrap_or(0);
    for volume in pod["spec"]["volumes"].as_array_mut().into_iter().flatten() {
        let Some(secret_name) = volume["secret"]["secretName"].as_str().map(str::to_owned) else {
            continue;
        };
        let secret = secrets
            .iter()
            .find(|s| s["metadata"]["name"] == secret_name.as_str())
            .unwrap_or_else(|| panic!("Pod `{name}` mounts Secret `{secret_name}`, not given"));
        let mode = volume["secret"]["defaultMode"].as_u64().unwrap_or(0o644) as u32 | 0o040;
        let dir = files.path().join(&secret_name);
        std::fs::create_dir(&dir).unwrap();
        for (key, data) in secret["data"].as_object().unwrap() {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data.as_str().unwrap())
                .unwrap();
            let file = dir.join(key);
            std::fs::write(&file, bytes).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
            std::os::unix::fs::chown(&file, Some(0), Some(group as u32)).unwrap();
        }
        std::os::unix::fs::chown(&dir, Some(0), Some(group as u32)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).unwrap();
        *volume = json!({"name": volume["name"], "hostPath": {"path": dir, "type": "Directory"}});
    }
    let spec = &mut pod["spec"];
    let sysctls: Vec<String> = spec["securityContext"]["sysctls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            format!(
                "\"{}={}\"",
                s["name"].as_str().unwrap(),
                s["value"].as_str().unwrap()
            )
        })
        .collect();
    // The host's own configuration, less the defaults a Pod in its
    // network must not change, plus the Pod's sysctls; the limits as
    // scripts/podman-host-prep keeps them.
    let conf = files.path().join("containers.conf");
    let sysctls = match network {
        Network::Bridge => sysctls.join(", "),
        Network::Host => String::new(),
    };
    std::fs::write(
        &conf,
        format!("[containers]\ndefault_ulimits = []\ndefault_sysctls = [{sysctls}]\n"),
    )
    .unwrap();
    spec["securityContext"]
        .as_object_mut()
        .unwrap()
        .remove("sysctls");
    spec.as_object_mut().unwrap().remove("schedulingGates");
    let mut probes = Vec::new();
    for c in spec["containers"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("ports");
        if let Some(probe) = c.as_object_mut().unwrap().remove("readinessProbe") {
            let command = probe["exec"]["command"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            probes.push((c["name"].as_str().unwrap().to_owned(), command));
        }
    }
    let manifest = files.path().join("pod.yaml");
    std::fs::File::create(&manifest)
        .unwrap()
        // JSON is YAML: Podman reads it as is.
        .write_all(serde_json::to_string_pretty(&pod).unwrap().as_bytes())
        .unwrap();
    let mut kube_play = Command::new("podman");
    kube_play
        .env("CONTAINERS_CONF", &conf)
        .args(["kube", "play"]);
    if let Network::Host = network {
        kube_play.args(["--network", "host"]);
    }
    let out = kube_play.arg(&manifest).output().unwrap();
    let played = Played {
        pod: name,
        _files: files,
        probes,
    };
    assert!(
        out.status.success(),
        "podman kube play: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    played
}

impl Played {
    /// The name Podman gives container `container` of the Pod.
    pub fn container(&self, container: &str) -> String {
        format!("{}-{container}", self.pod)
    }

    /// The Pod's address on Podman's bridge.
    pub fn ip(&self) -> String {
        let infra = podman(&["pod", "inspect", "-f", "{{.InfraContainerID}}", &self.pod]);
        podman(&[
            "inspect",
            "-f",
            "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
            &infra,
        ])
    }

    /// The NetworkPolicy of a workload Pod, played by nftables in its
    /// network namespace: in only `from` to TCP `port`, out only the
    /// replies (and loopback, both ways). Set before its supervisor
    /// attaches, so before anything of the workload runs.
    pub fn fence(&self, from: &str, port: u16) {
        let pid = self.netns_pid();
        crate::common::standalone::fence_with(&["nsenter", "-t", &pid, "-n"], from, port);
    }

    /// The host's pid of the process holding the Pod's namespaces.
    pub fn netns_pid(&self) -> String {
        let infra = podman(&["pod", "inspect", "-f", "{{.InfraContainerID}}", &self.pod]);
        podman(&["inspect", "-f", "{{.State.Pid}}", &infra])
    }

    /// The host's pid of the container's first process, while it runs.
    pub fn pid(&self, container: &str) -> Option<u32> {
        let out = Command::new("podman")
            .args([
                "inspect",
                "-f",
                "{{.State.Pid}}",
                &self.container(container),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .ok()
            .filter(|p| *p != 0)
    }

    /// Runs `args` in the container (as its user).
    pub fn exec(&self, container: &str, args: &[&str]) -> Output {
        Command::new("podman")
            .args(["exec", &self.container(container)])
            .args(args)
            .output()
            .unwrap()
    }

    /// Whether the container's readiness probe passes now, run as the
    /// kubelet runs it; a container without one is ready once it runs.
    pub fn probe_passes(&self, container: &str) -> bool {
        match self.probes.iter().find(|(c, _)| c == container) {
            None => true,
            Some((_, command)) => {
                let args: Vec<&str> = command.iter().map(String::as_str).collect();
                self.exec(container, &args).status.success()
            }
        }
    }

    /// Waits until the container's readiness probe passes; false if it
    /// did not within `within`.
    pub fn ready(&self, container: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if self.probe_passes(container) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// The files of the Secrets it mounts, as laid out on this host.
    pub fn secret_files(&self) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(self._files.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten())
            .map(|e| e.path())
            .collect()
    }

    /// What the container wrote to its standard output and error.
    pub fn logs(&self, container: &str) -> String {
        let out = Command::new("podman")
            .args(["logs", &self.container(container)])
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The container's exit status once it has ended, waiting up to
    /// `within`.
    pub fn exit_status(&self, container: &str, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            let out = Command::new("podman")
                .args([
                    "inspect",
                    "-f",
                    "{{.State.Status}} {{.State.ExitCode}}",
                    &self.container(container),
                ])
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if let Some(code) = text.strip_prefix("exited ") {
                return code.parse().ok();
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The host's address on the way to `ip` (Podman's bridge, for a Pod's
/// address): where the host's connections to it come from.
pub fn host_towards(ip: &str) -> String {
    let out = Command::new("ip")
        .args(["-o", "route", "get", ip])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut words = text.split_whitespace();
    words
        .find(|w| *w == "src")
        .and_then(|_| words.next())
        .unwrap_or_else(|| panic!("no route to {ip}: {text}"))
        .to_owned()
}

/// What `podman ARGS` printed, trimmed; it must succeed.
fn podman(args: &[&str]) -> String {
    let out = Command::new("podman").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "podman {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Drop for Played {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args(["pod", "rm", "-f", "-t", "0", &self.pod])
            .output();
    }
}
