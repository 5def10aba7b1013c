//! Further commands the supervisor asks a sandbox started on its own to
//! run beside the workload (`ExecRequest`). Each is forked from the
//! workload's own plan, so it runs under the same Landlock ruleset,
//! seccomp filter, user and namespaces, with its calls brokered as the
//! workload's are; only its arguments, the variables added to the
//! workload's environment and where it starts are its own. Its output
//! goes back on an Exec stream of its own, then its exit status.
//!
//! A command past its timeout, cancelled by the supervisor, or whose
//! stream broke (nobody would see what it does) is killed with its
//! process group.

use std::ffi::OsStr;
use std::io::PipeReader;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sandbox_protocol::{ExecRequest, ExecUpKind, MAX_CHUNK};
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;

use crate::broker::{self, Broker};
use crate::launch::{self, Noexec, Own};
use crate::pid1::{self, Watched};
use crate::plan::LaunchPlan;
use crate::relay::{EXEC_ENDED_WITHIN, ExecChannel, ExecHandler, ExecSender};

/// The most further commands running at once.
pub const MAX_RUNNING: usize = 64;

/// How long output may still come once the command has ended: a process
/// it left behind may hold its pipes open for ever.
const DRAIN: Duration = Duration::from_millis(200);

/// What every further command of one sandbox is started from.
pub struct Execs {
    plan: LaunchPlan,
    noexec: Noexec,
    broker: Arc<Broker>,
    watched: Watched,
    running: AtomicUsize,
}

/// A further command that runs.
struct Child {
    pid: u32,
    status: tokio::sync::oneshot::Receiver<enforcer::ExitStatus>,
    stdout: PipeReader,
    stderr: PipeReader,
}

/// Takes a slot of [`MAX_RUNNING`] until dropped.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Execs {
    /// Further commands from the workload's settled `plan`, their calls
    /// served by `broker`, their statuses taken by the reaper of
    /// `watched`.
    pub(crate) fn new(
        plan: LaunchPlan,
        noexec: Noexec,
        broker: Arc<Broker>,
        watched: Watched,
    ) -> Arc<Self> {
        Arc::new(Self {
            plan,
            noexec,
            broker,
            watched,
            running: AtomicUsize::new(0),
        })
    }

    /// Runs `request` on a task of its own.
    pub fn dispatch(self: &Arc<Self>, request: ExecRequest, channel: ExecChannel) {
        let me = Arc::clone(self);
        tokio::spawn(async move { me.run(request, channel).await });
    }

    /// A handler for every attachment, from `later`, where the commands'
    /// runner is put once the workload runs; a request before that is
    /// refused.
    #[must_use]
    pub fn handler(later: Arc<std::sync::OnceLock<Arc<Self>>>) -> ExecHandler {
        Arc::new(move |request, channel| match later.get() {
            Some(execs) => execs.dispatch(request, channel),
            None => channel.refuse(&request, "the workload does not run yet"),
        })
    }

    async fn run(self: Arc<Self>, request: ExecRequest, channel: ExecChannel) {
        let exec_id = request.exec_id;
        if self.running.fetch_add(1, Ordering::SeqCst) >= MAX_RUNNING {
            self.running.fetch_sub(1, Ordering::SeqCst);
            return channel.refuse(
                &request,
                &format!("{MAX_RUNNING} commands already run in this sandbox: wait for one to end"),
            );
        }
        let _slot = Slot(&self.running);
        let starting = {
            let me = Arc::clone(&self);
            let request = request.clone();
            tokio::task::spawn_blocking(move || me.start(&request))
        };
        let child = match starting.await {
            Ok(Ok(child)) => child,
            Ok(Err(why)) => return channel.refuse(&request, &why),
            Err(e) => {
                return channel.refuse(&request, &format!("cannot start the command: {e}"));
            }
        };
        let (sender, cancel) = match channel.open(ExecUpKind::Started(exec_id)).await {
            Ok(halves) => halves,
            Err(_) => {
                // Nobody would see what it does.
                let _ = enforcer::signals::signal_group(child.pid, libc::SIGKILL);
                return;
            }
        };
        follow(child, &sender, cancel, request.timeout).await;
    }

    /// Forks the command from the plan, lets its calls be brokered, and
    /// lets it run.
    fn start(&self, request: &ExecRequest) -> Result<Child, String> {
        let mut plan = self.plan.clone();
        plan.envp = environment(&plan.envp, &request.env);
        let program = request.argv.first().ok_or("no program")?;
        plan.program = resolve(program, &plan.envp, &plan.workdir)?;
        plan.argv.clone_from(&request.argv);
        let (stdout, stdout_w) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
        let (stderr, stderr_w) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
        // Its standard input reads end of file at once.
        let (stdin, _) = std::io::pipe().map_err(|e| format!("cannot make a pipe: {e}"))?;
        let own = Own {
            cwd: request.workdir.as_deref(),
            stdio: [
                Some(stdin.as_fd()),
                Some(stdout_w.as_fd()),
                Some(stderr_w.as_fd()),
            ],
        };
        let (mut started, pid, status) = self
            .watched
            .spawn(|| {
                launch::start(&plan, self.noexec, own).map(|s| {
                    let pid = s.pending.pid();
                    (s, pid)
                })
            })
            .map_err(|e| e.to_string())?;
        let _ = enforcer::signals::set_own_group(pid);
        let Some(listener) = started.pending.take_listener() else {
            self.watched.forget(pid);
            return Err("the command did not hand over its listener".into());
        };
        let broker = Arc::clone(&self.broker);
        std::thread::Builder::new()
            .name("exec-broker".into())
            .spawn(move || broker::serve(&broker, listener))
            .map_err(|e| {
                self.watched.forget(pid);
                format!("cannot start its broker: {e}")
            })?;
        if let Err(e) = started.pending.start() {
            self.watched.forget(pid);
            return Err(e.to_string());
        }
        Ok(Child {
            pid,
            status,
            stdout,
            stderr,
        })
    }
}

/// Sends the command's output and end; kills it at its timeout, on a
/// cancel, or once its stream is gone.
async fn follow(
    child: Child,
    sender: &ExecSender,
    mut cancel: crate::relay::ExecCancel,
    timeout: Option<Duration>,
) {
    let Child {
        pid,
        mut status,
        stdout,
        stderr,
    } = child;
    let kill = || {
        let _ = enforcer::signals::signal_group(pid, libc::SIGKILL);
    };
    let (mut out, mut err) = match (reader(stdout), reader(stderr)) {
        (Ok(out), Ok(err)) => (out, err),
        _ => {
            kill();
            return;
        }
    };
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let (mut out_open, mut err_open) = (true, true);
    let mut ended: Option<enforcer::ExitStatus> = None;
    let mut drain_until: Option<tokio::time::Instant> = None;
    let mut timed_out = false;
    let mut gone = false;
    let mut out_buf = vec![0_u8; MAX_CHUNK];
    let mut err_buf = vec![0_u8; MAX_CHUNK];
    while ended.is_none() || out_open || err_open {
        tokio::select! {
            read = out.read(&mut out_buf), if out_open => match read {
                Ok(n) if n > 0 => {
                    let chunk = out_buf.get(..n).unwrap_or_default().to_vec();
                    if sender.send(ExecUpKind::Stdout(chunk)).await.is_err() {
                        gone = true;
                        break;
                    }
                }
                _ => out_open = false,
            },
            read = err.read(&mut err_buf), if err_open => match read {
                Ok(n) if n > 0 => {
                    let chunk = err_buf.get(..n).unwrap_or_default().to_vec();
                    if sender.send(ExecUpKind::Stderr(chunk)).await.is_err() {
                        gone = true;
                        break;
                    }
                }
                _ => err_open = false,
            },
            got = &mut status, if ended.is_none() => {
                ended = Some(got.unwrap_or(enforcer::ExitStatus::Signal(libc::SIGKILL)));
                drain_until = Some(tokio::time::Instant::now() + DRAIN);
            }
            () = sleep_until(deadline), if ended.is_none() && !timed_out => {
                timed_out = true;
                kill();
            }
            () = cancel.cancelled(), if ended.is_none() && !gone => {
                gone = true;
                kill();
            }
            () = sleep_until(drain_until), if drain_until.is_some() => break,
        }
    }
    if gone {
        if ended.is_none() {
            kill();
        }
        return;
    }
    if let Some(status) = ended {
        let sent = sender
            .send(ExecUpKind::Exited {
                status: pid1::exit_code(status),
                timed_out,
            })
            .await;
        if sent.is_ok() {
            cancel.closed_within(EXEC_ENDED_WITHIN).await;
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn reader(pipe: PipeReader) -> std::io::Result<pipe::Receiver> {
    pipe::Receiver::from_owned_fd(OwnedFd::from(pipe))
}

/// The workload's environment with `added` (`NAME=VALUE`) in place of
/// any entry of the same name.
fn environment(base: &[Vec<u8>], added: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let name = |entry: &[u8]| -> Vec<u8> {
        entry
            .split(|&b| b == b'=')
            .next()
            .unwrap_or_default()
            .to_vec()
    };
    let replaced: Vec<Vec<u8>> = added.iter().map(|e| name(e)).collect();
    base.iter()
        .filter(|e| !replaced.contains(&name(e)))
        .chain(added)
        .cloned()
        .collect()
}

/// The program's path: `program` itself when it names a path, else the
/// first executable file of that name in the environment's `PATH`.
fn resolve(program: &[u8], envp: &[Vec<u8>], workdir: &[u8]) -> Result<Vec<u8>, String> {
    let shown = String::from_utf8_lossy(program).into_owned();
    if program.contains(&b'/') {
        if program.first() == Some(&b'/') {
            return Ok(program.to_vec());
        }
        // Relative to where the workload starts, as its shell would take it.
        let mut path = workdir.to_vec();
        path.push(b'/');
        path.extend_from_slice(program);
        return Ok(path);
    }
    let path = envp
        .iter()
        .find_map(|e| e.strip_prefix(b"PATH="))
        .unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    path.split(|&b| b == b':')
        .filter(|dir| dir.first() == Some(&b'/'))
        .map(|dir| {
            let mut p = dir.to_vec();
            p.push(b'/');
            p.extend_from_slice(program);
            p
        })
        .find(|p| is_executable(Path::new(OsStr::from_bytes(p))))
        .ok_or_else(|| format!("`{shown}` is not an executable file in the sandbox's PATH"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_variables_replace_the_workloads_of_the_same_name() {
        let base = [b"PATH=/bin".to_vec(), b"HOME=/w".to_vec()];
        let added = [b"HOME=/x".to_vec(), b"TOKEN=a=b".to_vec()];
        assert_eq!(
            environment(&base, &added),
            [
                b"PATH=/bin".to_vec(),
                b"HOME=/x".to_vec(),
                b"TOKEN=a=b".to_vec()
            ]
        );
    }

    #[test]
    fn a_bare_name_is_looked_up_in_path_and_a_missing_one_named() {
        let envp = [b"PATH=relative:/usr/bin:/bin".to_vec()];
        let sh = resolve(b"sh", &envp, b"/").unwrap();
        assert!(sh.ends_with(b"/sh"), "{}", String::from_utf8_lossy(&sh));
        assert_eq!(resolve(b"/x/y", &envp, b"/").unwrap(), b"/x/y");
        assert_eq!(resolve(b"./run", &envp, b"/w").unwrap(), b"/w/./run");
        let err = resolve(b"no-such-program-here", &envp, b"/").unwrap_err();
        assert!(err.contains("`no-such-program-here`"), "{err}");
    }
}
