//! Every workload process stopped at once when the channel to the
//! supervisor drops, and let go on, or killed, after.
//!
//! Where the host offers a cgroup v2 hierarchy the sandbox may write, the
//! workload runs in a cgroup of its own, made before it execs, and the
//! kernel's freezer stops it as one (`cgroup.freeze`): a process forked
//! meanwhile is born frozen. The cgroup is root's when the sandbox is, so
//! a workload of another user cannot write its files.
//!
//! Every descendant outside that cgroup (all of them, without one) is
//! sent `SIGSTOP`, which no process can catch or ignore, and the tree is
//! walked again until every one has stopped: one forked while the tree
//! was walked is found on the next walk. Once all are stopped none runs,
//! so none can send the `SIGCONT` or write the `cgroup.freeze` that would
//! resume another; only this process can.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a freeze may take before it is given up as failed.
const FREEZE_WITHIN: Duration = Duration::from_secs(2);

/// A process's state letter (`/proc/<pid>/stat`, after the command's
/// closing parenthesis); `None` once it is gone.
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// Stopped, traced-stopped, or no longer running at all.
fn still(state: Option<char>) -> bool {
    matches!(state, None | Some('T' | 't' | 'Z' | 'X'))
}

/// The cgroup v2 path of process `pid` (`/proc/<pid>/cgroup`, `0::`).
fn cgroup_of(pid: &str) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// The workload's own cgroup.
#[derive(Debug)]
struct Cgroup {
    /// Its directory.
    dir: PathBuf,
    /// Its path as `/proc/<pid>/cgroup` shows it.
    path: String,
}

impl Cgroup {
    /// A new cgroup below this process's, with process `pid` in it.
    fn for_process(pid: u32) -> Result<Self, String> {
        let own = cgroup_of("self").ok_or("this process is in no cgroup v2")?;
        let mounts = crate::mountinfo::read().map_err(|e| e.to_string())?;
        let mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup2" && Path::new(&own).starts_with(&m.root))
            .ok_or("no cgroup v2 hierarchy is mounted here")?;
        let below = Path::new(&own)
            .strip_prefix(&mount.root)
            .map_err(|e| e.to_string())?;
        let name = format!("openshell-workload-{}", std::process::id());
        let dir = mount.mount_point.join(below).join(&name);
        // One left by an earlier start in this cgroup (a restarted
        // container) goes if it is empty.
        let created = std::fs::create_dir(&dir).or_else(|e| {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(e);
            }
            std::fs::remove_dir(&dir)?;
            std::fs::create_dir(&dir)
        });
        created.map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // The kernel makes a cgroup's files; a directory without them is
        // not one (a hierarchy hidden by another mount).
        if !dir.join("cgroup.freeze").exists() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!("{} is no cgroup with a freezer", dir.display()));
        }
        let cgroup = Self {
            path: Path::new(&own).join(&name).to_string_lossy().into_owned(),
            dir,
        };
        if let Err(e) = cgroup.write("cgroup.procs", &pid.to_string()) {
            cgroup.remove();
            return Err(format!("cannot move the workload into it: {e}"));
        }
        Ok(cgroup)
    }

    fn write(&self, file: &str, value: &str) -> std::io::Result<()> {
        std::fs::write(self.dir.join(file), value)
    }

    fn frozen(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|e| e.lines().any(|l| l == "frozen 1"))
    }

    fn holds(&self, pid: u32) -> bool {
        cgroup_of(&pid.to_string()).is_some_and(|p| p == self.path)
    }

    fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// How the workload is frozen: its cgroup, where there is one, and
/// `SIGSTOP` for every process outside it.
#[derive(Debug)]
pub struct Freezer {
    cgroup: Option<Cgroup>,
}

impl Freezer {
    /// The freezer of the workload `pid` (forked, before its exec), and
    /// a line saying how it freezes.
    #[must_use]
    pub fn for_workload(pid: u32) -> (Self, String) {
        match Cgroup::for_process(pid) {
            Ok(cgroup) => {
                let line = format!(
                    "the workload runs in cgroup {}, which a dropped channel freezes",
                    cgroup.path
                );
                (
                    Self {
                        cgroup: Some(cgroup),
                    },
                    line,
                )
            }
            Err(why) => (
                Self { cgroup: None },
                format!(
                    "no cgroup of the workload's own ({why}): a dropped channel stops its processes with SIGSTOP"
                ),
            ),
        }
    }

    fn outside(&self, pid: u32) -> bool {
        !self.cgroup.as_ref().is_some_and(|c| c.holds(pid))
    }

    /// Stops every descendant of this process; how many there are, or an
    /// error when some still ran after [`FREEZE_WITHIN`].
    pub fn freeze(&self) -> Result<usize, String> {
        let deadline = Instant::now() + FREEZE_WITHIN;
        if let Some(c) = &self.cgroup {
            c.write("cgroup.freeze", "1")
                .map_err(|e| format!("cannot freeze cgroup {}: {e}", c.path))?;
        }
        loop {
            let tree = enforcer::descendants();
            for &pid in tree.iter().filter(|&&p| self.outside(p)) {
                let _ = enforcer::send_signal(pid, libc::SIGSTOP);
            }
            // A stop is delivered when the process next runs kernel code:
            // look again until every process of the tree, new ones
            // included, has stopped, and the cgroup says it is frozen.
            let running: Vec<u32> = enforcer::descendants()
                .into_iter()
                .filter(|&p| self.outside(p) && !still(state(p)))
                .collect();
            let frozen = self.cgroup.as_ref().is_none_or(Cgroup::frozen);
            if running.is_empty() && frozen {
                return Ok(tree.len());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} workload processes still run ({running:?}){}",
                    running.len(),
                    if frozen {
                        ""
                    } else {
                        ", the cgroup is not frozen"
                    }
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets every descendant go on.
    pub fn thaw(&self) {
        for pid in enforcer::descendants() {
            let _ = enforcer::send_signal(pid, libc::SIGCONT);
        }
        if let Some(c) = &self.cgroup {
            let _ = c.write("cgroup.freeze", "0");
        }
    }

    /// Kills every descendant, stopped, frozen or not, without reaping:
    /// the init's loop reaps them and learns the workload's end.
    pub fn kill(&self) {
        if let Some(c) = &self.cgroup {
            let _ = c.write("cgroup.kill", "1");
        }
        for _ in 0..3 {
            let tree = enforcer::descendants();
            if tree.is_empty() {
                return;
            }
            for pid in tree {
                let _ = enforcer::send_signal(pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Once the workload has ended: kills what is left of it in its
    /// cgroup and removes the cgroup.
    pub fn release(&self) {
        let Some(c) = &self.cgroup else { return };
        let _ = c.write("cgroup.kill", "1");
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            let events = std::fs::read_to_string(c.dir.join("cgroup.events")).unwrap_or_default();
            if events.lines().any(|l| l == "populated 0") {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        c.remove();
    }
}
