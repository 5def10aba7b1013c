//! The local driver: a sandbox as two process trees on the gateway's
//! host. `openshell-supervisor serve` runs in the host's network namespace
//! (it reaches the gateway and the upstreams); `openshell-sandbox` runs as
//! PID 1 of a PID namespace of its own in a network namespace of its own,
//! joined to the host by one veth pair (a /30 of 100.64.0.0/10) and fenced
//! with nftables so that nothing but the supervisor's channel gets in or
//! out. The workload's every connect is still brokered by the sandbox and
//! decided by the supervisor; the fence is what holds if that ever failed.
//!
//! Everything a sandbox has is under `ROOT/ID/`: the session token file
//! its supervisor refreshes, the bootstrap, the revision floor, the logs,
//! and a record of each process (pid and start time, so that a pid the
//! kernel gave to another process since is never signalled). Both trees
//! run in process groups of their own: they outlive the gateway, and a
//! gateway started later finds them there.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use super::host::{self, fail, run, tag, tail};
use super::{Driver, DriverError, DriverFut, Launch};

/// The port the sandbox listens on, at its end of the veth pair.
const CHANNEL_PORT: u16 = 7000;
/// How long a start may take until the sandbox's workload runs.
const READY_WITHIN: Duration = Duration::from_secs(60);
/// How long a stop waits after `SIGTERM` before `SIGKILL`.
const TERM_GRACE: Duration = Duration::from_secs(5);
/// /30 subnets of 100.64.0.0/10.
const SUBNETS: u32 = 1 << 20;

/// Where the local driver keeps its sandboxes and what it runs.
#[derive(Debug, Clone)]
pub struct Local {
    /// `ROOT`: one directory per sandbox.
    pub root: PathBuf,
    /// `openshell-supervisor`.
    pub supervisor: PathBuf,
    /// `openshell-sandbox`.
    pub sandbox: PathBuf,
    /// How a supervisor reaches this gateway (from the host's network
    /// namespace).
    pub gateway_urls: Vec<String>,
    /// The gateway directory's `ca.pem`.
    pub gateway_ca: PathBuf,
    /// The gateway directory's `trust.keys`.
    pub trust_keys: PathBuf,
}

/// A process this driver started: its pid and its start time in clock
/// ticks since boot, which together name it for as long as it lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Started {
    pid: i32,
    since: u64,
}

impl Started {
    fn of(pid: u32) -> Option<Self> {
        let pid = i32::try_from(pid).ok()?;
        Some(Self {
            pid,
            since: start_time(pid)?,
        })
    }

    fn alive(self) -> bool {
        start_time(self.pid) == Some(self.since)
    }

    fn read(path: &Path) -> Option<Self> {
        let text = std::fs::read_to_string(path).ok()?;
        let (pid, since) = text.trim().split_once(' ')?;
        Some(Self {
            pid: pid.parse().ok()?,
            since: since.parse().ok()?,
        })
    }

    fn write(self, path: &Path) -> Result<(), DriverError> {
        std::fs::write(path, format!("{} {}\n", self.pid, self.since))
            .map_err(|e| fail(&format!("cannot write `{}`", path.display()), e))
    }

    /// Signals its whole process group (it leads one: `setsid`).
    fn signal(self, signal: &str) {
        if self.alive() {
            let _ = Command::new("kill")
                .args([&format!("-{signal}"), "--", &format!("-{}", self.pid)])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Field 22 of `/proc/PID/stat`, after the command's parenthesis.
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The /30s of 100.64.0.0/10 the host's interfaces hold, but `except`.
fn host_subnets(except: &str) -> Result<std::collections::BTreeSet<u32>, DriverError> {
    let out = Command::new("ip")
        .args(["-4", "-o", "addr", "show"])
        .output()
        .map_err(|e| fail("cannot run `ip addr show`", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter(|l| l.split_whitespace().nth(1) != Some(except))
        .filter_map(|l| {
            let cidr = l.split_whitespace().nth(3)?;
            let ip: std::net::Ipv4Addr = cidr.split('/').next()?.parse().ok()?;
            let ip = u32::from(ip);
            let base = (100u32 << 24) | (64 << 16);
            (ip >> 22 == base >> 22).then(|| (ip - base) >> 2)
        })
        .collect())
}

/// Held while a sandbox's subnet is chosen and given to its veth pair:
/// every local driver on the host takes it, whatever its root.
const HOST_LOCK: &str = "/run/lock/openshell-local-driver.lock";

fn host_lock() -> Result<std::fs::File, DriverError> {
    if let Some(dir) = Path::new(HOST_LOCK).parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(&format!("cannot make `{}`", dir.display()), e))?;
    }
    let lock = std::fs::File::create(HOST_LOCK)
        .map_err(|e| fail(&format!("cannot open `{HOST_LOCK}`"), e))?;
    lock.lock()
        .map_err(|e| fail(&format!("cannot take `{HOST_LOCK}`"), e))?;
    Ok(lock)
}

/// One sandbox's names and files.
struct Place {
    dir: PathBuf,
    netns: String,
    host_if: String,
    sandbox_if: String,
}

impl Place {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The network namespace sandbox `id` of the driver at `root` runs in,
/// and the host's address on its veth pair (once it was started).
#[must_use]
pub fn network_of(root: &Path, id: &str) -> (String, Option<String>) {
    let place = place(root, id);
    let host = std::fs::read_to_string(place.file("subnet"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .map(|n| Local::addresses(n).0);
    (place.netns, host)
}

fn place(root: &Path, id: &str) -> Place {
    let t = tag(root, id);
    Place {
        dir: root.join(id),
        netns: format!("osp-{t}"),
        host_if: format!("osh{t}"),
        sandbox_if: format!("oss{t}"),
    }
}

impl Local {
    fn place(&self, id: &str) -> Place {
        place(&self.root, id)
    }

    /// The sandbox's /30, kept in its directory: the one it had if no
    /// other interface of the host holds it since, else the lowest one no
    /// sandbox here and no interface of the host holds. The caller holds
    /// the host's lock until its veth pair has the address.
    fn subnet(&self, place: &Place) -> Result<u32, DriverError> {
        let mine = place.file("subnet");
        let on_host = host_subnets(&place.host_if)?;
        let kept = std::fs::read_to_string(&mine)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        if let Some(n) = kept.filter(|n| !on_host.contains(n)) {
            return Ok(n);
        }
        let here: std::collections::BTreeSet<u32> = std::fs::read_dir(&self.root)
            .map_err(|e| fail("cannot list the sandboxes", e))?
            .filter_map(|e| {
                let e = e.ok()?;
                (e.path() != place.dir)
                    .then(|| std::fs::read_to_string(e.path().join("subnet")).ok())?
            })
            .filter_map(|t| t.trim().parse().ok())
            .collect();
        let n = (0..SUBNETS)
            .find(|n| !here.contains(n) && !on_host.contains(n))
            .ok_or_else(|| DriverError("every /30 of 100.64.0.0/10 is taken".into()))?;
        std::fs::write(&mine, format!("{n}\n")).map_err(|e| fail("cannot keep the subnet", e))?;
        Ok(n)
    }

    /// The host's and the sandbox's address on the /30.
    fn addresses(n: u32) -> (String, String) {
        let base = (100u32 << 24) | (64 << 16) | (n << 2);
        let ip = |a: u32| std::net::Ipv4Addr::from(a).to_string();
        (ip(base + 1), ip(base + 2))
    }

    /// The sandbox's network namespace, its veth pair and its fence, made
    /// anew.
    fn network(&self, place: &Place, host: &str, sandbox: &str) -> Result<(), DriverError> {
        self.drop_network(place);
        run(
            Command::new("ip").args(["netns", "add", &place.netns]),
            "`ip netns add`",
        )?;
        run(
            Command::new("ip").args([
                "link",
                "add",
                &place.host_if,
                "type",
                "veth",
                "peer",
                "name",
                &place.sandbox_if,
                "netns",
                &place.netns,
            ]),
            "`ip link add`",
        )?;
        let ip = |args: &[&str]| run(Command::new("ip").args(args), "`ip`");
        ip(&["addr", "add", &format!("{host}/30"), "dev", &place.host_if])?;
        ip(&["link", "set", &place.host_if, "up"])?;
        let ns = &place.netns;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{sandbox}/30"),
            "dev",
            &place.sandbox_if,
        ])?;
        ip(&["-n", ns, "link", "set", &place.sandbox_if, "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        // In: the supervisor's channel only. Out: answers only. Loopback
        // stays the sandbox's own.
        let rules = format!(
            "table inet fence {{\n  chain input {{ type filter hook input priority 0; policy drop; iif \"lo\" accept; ct state established,related accept; ip saddr {host} tcp dport {CHANNEL_PORT} accept; }}\n  chain output {{ type filter hook output priority 0; policy drop; oif \"lo\" accept; ct state established,related accept; }}\n}}\n"
        );
        let mut nft = Command::new("ip")
            .args(["netns", "exec", ns, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| fail("cannot run nft", e))?;
        if let Some(mut stdin) = nft.stdin.take() {
            stdin
                .write_all(rules.as_bytes())
                .map_err(|e| fail("cannot write the fence", e))?;
        }
        let out = nft
            .wait_with_output()
            .map_err(|e| fail("nft did not finish", e))?;
        if !out.status.success() {
            return Err(DriverError(format!(
                "the fence could not be set: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    /// Removes the namespace (its end of the veth pair, and so the pair).
    fn drop_network(&self, place: &Place) {
        let _ = Command::new("ip")
            .args(["netns", "del", &place.netns])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &place.host_if])
            .stderr(Stdio::null())
            .status();
    }

    /// Starts `cmd` in a session of its own, its output appended to `log`.
    fn spawn(cmd: &mut Command, log: &Path) -> Result<Started, DriverError> {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(log)
            .map_err(|e| fail(&format!("cannot open `{}`", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| fail("cannot share the log", e))?;
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| fail(&format!("cannot start {:?}", cmd.get_program()), e))?;
        let started = Started::of(child.id())
            .ok_or_else(|| DriverError("the process ended at once".into()))?;
        // Its exit is collected by the reaper below; the gateway does not
        // wait on it, so that it outlives the gateway.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        Ok(started)
    }

    /// Waits until `file` exists while every process in `alive` lives.
    fn wait_for(
        &self,
        file: &Path,
        alive: &[Started],
        deadline: Instant,
        place: &Place,
    ) -> Result<(), DriverError> {
        loop {
            if file.exists() {
                return Ok(());
            }
            if let Some(gone) = alive.iter().find(|p| !p.alive()) {
                let log = |name: &str| tail(&place.file(name));
                return Err(DriverError(format!(
                    "process {} ended before the sandbox was ready; supervisor: {}; sandbox: {}",
                    gone.pid,
                    log("supervisor.log"),
                    log("sandbox.log")
                )));
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

impl host::Steps for Local {
    fn start_blocking(&self, l: &Launch) -> Result<(), DriverError> {
        // Checked again: the workspace or the program may be gone since
        // the sandbox was created.
        check(&l.spec).map_err(DriverError)?;
        let workspace = l.spec.workspace.as_deref().unwrap_or_default();
        let place = self.place(&l.id);
        // Traversable, not listable: the workload reads its trust file
        // here by name; everything else in it is the owner's alone.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o711)
            .create(&place.dir)
            .map_err(|e| fail(&format!("cannot make `{}`", place.dir.display()), e))?;
        std::fs::set_permissions(&place.dir, std::fs::Permissions::from_mode(0o711)).map_err(
            |e| {
                fail(
                    &format!("cannot set the mode of `{}`", place.dir.display()),
                    e,
                )
            },
        )?;
        self.stop_blocking(&l.id);
        let session = json!({
            "id": l.id, "generation": l.generation, "token": l.token, "expires_at": l.token_expires_at,
        });
        let token_file = place.file("session.json");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&token_file)
            .map_err(|e| fail("cannot write the session", e))?;
        f.write_all(session.to_string().as_bytes())
            .map_err(|e| fail("cannot write the session", e))?;
        let lock = host_lock()?;
        let (host, sandbox) = Self::addresses(self.subnet(&place)?);
        self.network(&place, &host, &sandbox)?;
        drop(lock);
        let bootstrap = place.file(&format!("bootstrap-{}", l.generation));
        let ready = place.file(&format!("ready-{}", l.generation));
        let trust = place.file(&format!("trust-{}", l.generation));
        for stale in [&bootstrap, &ready] {
            let _ = std::fs::remove_file(stale);
        }
        let _ = std::fs::remove_dir_all(&trust);
        let at = format!("{sandbox}:{CHANNEL_PORT}");
        let mut serve = Command::new(&self.supervisor);
        serve.arg("serve");
        for url in &self.gateway_urls {
            serve.args(["--gateway", url]);
        }
        serve
            .arg("--token-file")
            .arg(&token_file)
            .arg("--gateway-ca")
            .arg(&self.gateway_ca)
            .arg("--trust-key")
            .arg(&self.trust_keys)
            .arg("--state-dir")
            .arg(place.file("state"))
            .args(["--sandbox", &at, "--sandbox-listen", &at])
            .args(["--sandbox-id", &l.id])
            .args(["--generation", &l.generation.to_string()])
            .arg("--bootstrap")
            .arg(&bootstrap)
            .arg("--ready-file")
            .arg(&ready)
            .arg("--trust-dir")
            .arg(&trust)
            .arg("--log")
            .arg(place.file("deny.log"))
            .args(["--workdir", workspace]);
        if let Some(secs) = l.spec.timeout_seconds {
            serve.args(["--timeout", &secs.to_string()]);
        }
        serve.arg("--").args(&l.spec.command);
        let supervisor = Self::spawn(&mut serve, &place.file("supervisor.log"))?;
        supervisor.write(&place.file("supervisor.pid"))?;
        let deadline = Instant::now() + READY_WITHIN;
        self.wait_for(&bootstrap, &[supervisor], deadline, &place)?;
        // As a container runtime starts it: PID 1 of a PID namespace of its
        // own, its own /proc, an environment of its own.
        let mut sbx = Command::new("ip");
        sbx.args(["netns", "exec", &place.netns])
            .args(["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
            .args(["unshare", "--mount", "--propagation", "private", "--"])
            .args([
                "sh",
                "-c",
                "umount -l /proc && exec unshare --pid --fork --kill-child --mount-proc -- \"$0\" --bootstrap \"$1\"",
            ])
            .arg(&self.sandbox)
            .arg(&bootstrap);
        let sandbox_proc = Self::spawn(&mut sbx, &place.file("sandbox.log"))?;
        sandbox_proc.write(&place.file("sandbox.pid"))?;
        self.wait_for(&ready, &[supervisor, sandbox_proc], deadline, &place)
    }

    fn running_blocking(&self, id: &str) -> bool {
        let place = self.place(id);
        ["supervisor.pid", "sandbox.pid"]
            .iter()
            .all(|f| Started::read(&place.file(f)).is_some_and(Started::alive))
    }

    /// The sandbox first (its workload dies with its PID namespace), then
    /// its supervisor, then the network.
    fn stop_blocking(&self, id: &str) {
        let place = self.place(id);
        for name in ["sandbox.pid", "supervisor.pid"] {
            let path = place.file(name);
            if let Some(p) = Started::read(&path) {
                p.signal("TERM");
                let deadline = Instant::now() + TERM_GRACE;
                while p.alive() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                p.signal("KILL");
                while p.alive() && Instant::now() < deadline + TERM_GRACE {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let _ = std::fs::remove_file(&path);
        }
        self.drop_network(&place);
        // Nothing that could authenticate stays behind: the session (its
        // token is revoked once the stop commits, but need not be read
        // anywhere meanwhile) and a bootstrap the sandbox never read (the
        // channel's key).
        if let Ok(entries) = std::fs::read_dir(&place.dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let secret = name == "session.json"
                    || name.starts_with("session.json.")
                    || name.starts_with("bootstrap-")
                    || name.starts_with("ready-");
                if secret {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }

    fn dir_of(&self, id: &str) -> PathBuf {
        self.place(id).dir
    }
}

/// What the local driver cannot run. A missing program is told here:
/// the sandbox could tell it only once the workload was let go.
fn check(spec: &super::RunSpec) -> Result<(), String> {
    let Some(workspace) = spec.workspace.as_deref() else {
        return Err("the local driver needs `run.workspace`: the workload's directory".into());
    };
    if !Path::new(workspace).is_absolute() || !Path::new(workspace).is_dir() {
        return Err(format!(
            "`run.workspace` `{workspace}` is not an absolute path to a directory on the gateway's host"
        ));
    }
    if spec.rootfs.is_some() || spec.image.is_some() {
        return Err(
            "the local driver runs on the host's own filesystem: leave out `run.rootfs` and `run.image`".into(),
        );
    }
    let Some(program) = spec.command.first() else {
        return Err("the local driver needs `run.command`".into());
    };
    if !Path::new(program).is_absolute() {
        return Err(format!(
            "`run.command` starts with `{program}`: the local driver needs the program's absolute path"
        ));
    }
    let executable = std::fs::metadata(program)
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if !executable {
        return Err(format!(
            "`run.command` starts with `{program}`, which is not an executable file on the gateway's host"
        ));
    }
    Ok(())
}

impl Driver for Local {
    fn name(&self) -> &str {
        "local"
    }

    fn check(&self, spec: &super::RunSpec) -> Result<(), String> {
        check(spec)
    }

    /// This host and this root: another gateway's local driver finds none
    /// of these sandboxes' processes.
    fn place(&self) -> String {
        host::place("local", &self.root)
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

#[cfg(test)]
mod tests {
    use super::Local;

    #[test]
    fn subnets_are_distinct_slash_30s_of_the_shared_range() {
        assert_eq!(
            Local::addresses(0),
            ("100.64.0.1".to_owned(), "100.64.0.2".to_owned())
        );
        assert_eq!(
            Local::addresses(1),
            ("100.64.0.5".to_owned(), "100.64.0.6".to_owned())
        );
        assert_eq!(
            Local::addresses((1 << 20) - 1),
            ("100.127.255.253".to_owned(), "100.127.255.254".to_owned())
        );
    }
}
