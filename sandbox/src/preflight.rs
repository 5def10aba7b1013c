//! `openshell-sandbox preflight`: whether this kernel, in this container,
//! gives the sandbox what it enforces with, tried rather than read from a
//! version number: a runtime's seccomp profile or a node's kernel may
//! refuse an operation its version has.
//!
//! A probe child is started as a workload is (a Landlock ruleset and a
//! seccomp filter trapping `connect`, its listener taken over with
//! `pidfd_getfd`), and connects twice. The first connect is answered as
//! the broker answers an allowed one: a socket of ours installed in its
//! place (`SECCOMP_IOCTL_NOTIF_ADDFD`) and a value returned; the child
//! writes through it and we read what it wrote. The second is refused
//! with an errno, which the child must see. The report is one JSON
//! document; a failure names the step.

use std::io::Read as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use enforcer::{ChildSpec, Compat, FilterSpec, FsAccess, FsRule, LandlockSpec, NotifyRule};
use serde::Serialize;

/// The argument the probe child is started with.
pub const PROBE_ARG: &str = "--preflight-probe";
/// What the child writes through the socket installed in its place.
const GREETING: &[u8] = b"preflight";
/// How long each step may take.
const STEP: Duration = Duration::from_secs(5);

/// What the preflight found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The Landlock ABI this kernel offers (0: none).
    pub landlock_abi: u8,
    /// A ruleset was applied to the probe child.
    pub landlock_enforced: bool,
    /// The probe child ran under a filter whose listener this process
    /// took over (`SECCOMP_FILTER_FLAG_NEW_LISTENER`, `pidfd_getfd`).
    pub seccomp_listener: bool,
    /// A trapped connect was answered with a socket installed in its
    /// place (`SECCOMP_IOCTL_NOTIF_RECV`, `ID_VALID`, `ADDFD`, `SEND`).
    pub socket_installed: bool,
    /// A trapped connect was refused with an errno the child saw.
    pub errno_answered: bool,
    /// This process may mount (`CAP_SYS_ADMIN`): trees the workload may
    /// write are mounted `noexec`; without it they are not.
    pub noexec_mounts: bool,
    /// Every check the sandbox needs passed.
    pub ok: bool,
    /// What failed, step by step.
    pub failures: Vec<String>,
}

/// Runs the preflight.
#[must_use]
pub fn run() -> Report {
    let mut report = Report {
        landlock_abi: enforcer::kernel_abi().unwrap_or(0),
        landlock_enforced: false,
        seccomp_listener: false,
        socket_installed: false,
        errno_answered: false,
        noexec_mounts: enforcer::effective_caps(std::process::id())
            .is_ok_and(|caps| caps & (1 << 21) != 0),
        ok: false,
        failures: Vec::new(),
    };
    if report.landlock_abi == 0 {
        report
            .failures
            .push("Landlock: this kernel offers none (or the runtime's seccomp profile refuses its calls)".into());
    }
    if let Err(why) = probe(&mut report) {
        report.failures.push(why);
    }
    report.ok = report.failures.is_empty();
    report
}

fn probe(report: &mut Report) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot name this program: {e}"))?;
    let landlock = LandlockSpec {
        mode: Compat::BestEffort,
        min_abi: 1,
        fs: vec![FsRule {
            path: "/".into(),
            access: FsAccess::EXECUTE | FsAccess::READ_FILE | FsAccess::READ_DIR,
        }],
        tcp_connect_ports: None,
        tcp_bind_ports: None,
        scope_signals_and_abstract_unix: false,
        private_proc: false,
    };
    let ruleset = enforcer::prepare(&landlock).map_err(|e| format!("Landlock: {e}"))?;
    report.landlock_enforced = report.landlock_abi > 0
        && !ruleset
            .report()
            .downgrades
            .iter()
            .any(|d| matches!(d, enforcer::Downgrade::Unavailable));
    let filter = enforcer::build(&FilterSpec {
        deny: Vec::new(),
        notify: vec![NotifyRule {
            syscall: "connect".into(),
            arg_conditions: Vec::new(),
        }],
        wait_killable_recv: false,
    })
    .map_err(|e| format!("seccomp: cannot build a filter: {e}"))?;
    let c = |bytes: &[u8]| std::ffi::CString::new(bytes).map_err(|_| "a NUL byte".to_owned());
    let program = c(exe.as_os_str().as_bytes())?;
    let argv = [c(b"openshell-sandbox")?, c(PROBE_ARG.as_bytes())?];
    let cwd = c(b"/")?;
    let spec = ChildSpec {
        new_netns: false,
        bind_file: None,
        noexec: &[],
        exec_again: &[],
        stdio: [None, None, None],
        drop_bounding: false,
        last_cap: enforcer::cap_last_cap().map_err(|e| e.to_string())?,
        identity: None,
        cwd: &cwd,
        ruleset: &ruleset,
        filter: &filter,
        program: &program,
        argv: &argv,
        envp: &[],
    };
    let mut pending = enforcer::spawn(&spec)
        .map_err(|e| format!("seccomp: the probe could not be started under a filter: {e}"))?;
    let listener = pending
        .take_listener()
        .ok_or("seccomp: no listener came back from the probe")?;
    report.seccomp_listener = true;
    let running = pending
        .start()
        .map_err(|e| format!("the probe did not run: {e}"))?;
    let answered = answer_both(&listener, report);
    let status = running.wait();
    answered?;
    match status {
        Ok(enforcer::ExitStatus::Code(0)) => Ok(()),
        Ok(other) => Err(format!(
            "the probe ended with {other}: it did not see what it was answered"
        )),
        Err(e) => Err(format!("cannot wait for the probe: {e}")),
    }
}

/// The next trapped call, within [`STEP`].
fn next(listener: &std::os::fd::OwnedFd) -> Result<enforcer::Notif, String> {
    match enforcer::wait_listener(listener, Some(STEP)) {
        Ok(enforcer::ListenerEvent::Ready) => {}
        Ok(other) => return Err(format!("seccomp: no trapped connect came ({other:?})")),
        Err(e) => return Err(format!("seccomp: cannot wait on the listener: {e}")),
    }
    let notif = enforcer::recv(listener).map_err(|e| format!("seccomp: NOTIF_RECV: {e}"))?;
    if !enforcer::id_valid(listener, notif.id) {
        return Err("seccomp: NOTIF_ID_VALID refused a pending call".into());
    }
    Ok(notif)
}

fn answer_both(listener: &std::os::fd::OwnedFd, report: &mut Report) -> Result<(), String> {
    let first = next(listener)?;
    let (mut ours, theirs) =
        UnixStream::pair().map_err(|e| format!("cannot make a socket pair: {e}"))?;
    let target = i32::try_from(first.args[0]).map_err(|_| "a trapped fd out of range")?;
    enforcer::addfd_setfd(listener, first.id, &theirs, target, true)
        .map_err(|e| format!("seccomp: NOTIF_ADDFD: {e}"))?;
    enforcer::respond_value(listener, first.id, 0)
        .map_err(|e| format!("seccomp: NOTIF_SEND (a value): {e}"))?;
    drop(theirs);
    ours.set_read_timeout(Some(STEP))
        .map_err(|e| e.to_string())?;
    let mut got = vec![0_u8; GREETING.len()];
    ours.read_exact(&mut got)
        .map_err(|e| format!("nothing came through the installed socket: {e}"))?;
    if got != GREETING {
        return Err("the installed socket carried something else".into());
    }
    report.socket_installed = true;
    let second = next(listener)?;
    enforcer::respond_errno(listener, second.id, libc::ECONNREFUSED)
        .map_err(|e| format!("seccomp: NOTIF_SEND (an errno): {e}"))?;
    report.errno_answered = true;
    Ok(())
}

/// The probe child: connects twice, as [`probe`] expects; its exit status
/// says whether it saw what it was answered.
pub fn child() -> u8 {
    let mut first = match std::net::TcpStream::connect(("127.0.0.1", 9)) {
        Ok(s) => s,
        Err(_) => return 2,
    };
    if std::io::Write::write_all(&mut first, GREETING).is_err() {
        return 3;
    }
    match std::net::TcpStream::connect(("127.0.0.1", 9)) {
        Err(e) if e.raw_os_error() == Some(libc::ECONNREFUSED) => 0,
        _ => 4,
    }
}
