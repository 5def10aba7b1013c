//! `openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]`: runs
//! COMMAND as the workload, its PID 1 (or child subreaper), and exits as
//! it did: its exit code, or 128 + the signal that killed it.
//!
//! `openshell-sandbox [--grace-period SECS] --plan-fd P --control-fd C`:
//! as the supervisor starts it, inside the workload's namespaces: the
//! launch plan on fd P, the launch link on fd C (`sandbox::launch`), and
//! with `--relay-fd R` the channel to the supervisor on fd R, when the
//! sandbox brokers the workload's calls itself.
//!
//! `openshell-sandbox [--grace-period SECS] --bootstrap FILE`: started on
//! its own, on another host than its supervisor (`sandbox::standalone`).
//!
//! `openshell-sandbox preflight`: whether this kernel, here, gives the
//! sandbox what it enforces with (`sandbox::preflight`): a JSON report,
//! exit status 0 when it does, 1 when it does not.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use sandbox::{launch, pid1, preflight, standalone};

/// Exit status when this process cannot do its job (as `env` and `timeout`
/// use 125).
const EXIT_SANDBOX_FAILED: u8 = 125;

const USAGE: &str = "usage: openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]
       openshell-sandbox [--grace-period SECS] --plan-fd P --control-fd C [--relay-fd R]
       openshell-sandbox [--grace-period SECS] --bootstrap FILE
       openshell-sandbox preflight";

/// What to be PID 1 of.
enum Workload {
    Run(Vec<OsString>),
    Launch(launch::Inherited),
    Standalone(PathBuf),
}

fn main() -> ExitCode {
    match std::env::args_os()
        .nth(1)
        .as_deref()
        .and_then(|a| a.to_str())
    {
        Some("preflight") => {
            let report = preflight::run();
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
            return ExitCode::from(u8::from(!report.ok));
        }
        Some(preflight::PROBE_ARG) => return ExitCode::from(preflight::child()),
        _ => {}
    }
    let (grace, workload) = match parse(std::env::args_os().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("openshell-sandbox: {message}\n{USAGE}");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    let ended = match workload {
        Workload::Run(command) => pid1::run(&command, grace).map_err(|e| e.to_string()),
        Workload::Launch(fds) => launch::launch(fds, grace).map_err(|e| e.to_string()),
        Workload::Standalone(path) => {
            return match standalone::run(&path, grace) {
                Ok(code) => ExitCode::from(code),
                Err(e) => {
                    eprintln!("openshell-sandbox: {e}");
                    ExitCode::from(EXIT_SANDBOX_FAILED)
                }
            };
        }
    };
    match ended {
        Ok(status) => ExitCode::from(u8::try_from(status.code()).unwrap_or(EXIT_SANDBOX_FAILED)),
        Err(e) => {
            eprintln!("openshell-sandbox: {e}");
            ExitCode::from(EXIT_SANDBOX_FAILED)
        }
    }
}

/// The grace period and the workload.
fn parse(mut args: impl Iterator<Item = OsString>) -> Result<(Duration, Workload), String> {
    let mut grace = pid1::DEFAULT_GRACE;
    let mut plan_fd = None;
    let mut control_fd = None;
    let mut relay_fd = None;
    let mut bootstrap = None;
    let number = |flag: &str, value: Option<OsString>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("`{flag}` needs a number"))?;
        value
            .to_str()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("`{flag} {}`: not a whole number", value.to_string_lossy()))
    };
    let fd = |flag: &str, value: Option<OsString>| -> Result<Option<i32>, String> {
        let fd = number(flag, value)?;
        i32::try_from(fd)
            .map(Some)
            .map_err(|_| format!("`{flag}`: too large"))
    };
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--") => {
                let command: Vec<OsString> = args.collect();
                if plan_fd.is_some()
                    || control_fd.is_some()
                    || relay_fd.is_some()
                    || bootstrap.is_some()
                    || command.is_empty()
                {
                    return Err(
                        "give either `--plan-fd` and `--control-fd` or a command after `--`".into(),
                    );
                }
                return Ok((grace, Workload::Run(command)));
            }
            Some("--grace-period") => {
                grace = Duration::from_secs(number("--grace-period", args.next())?)
            }
            Some("--plan-fd") => plan_fd = fd("--plan-fd", args.next())?,
            Some("--control-fd") => control_fd = fd("--control-fd", args.next())?,
            Some("--relay-fd") => relay_fd = fd("--relay-fd", args.next())?,
            Some("--bootstrap") => {
                bootstrap = Some(PathBuf::from(
                    args.next().ok_or("`--bootstrap` needs a file")?,
                ));
            }
            _ => {
                return Err(format!(
                    "unknown argument `{}`; the command goes after `--`",
                    arg.to_string_lossy()
                ));
            }
        }
    }
    if let Some(path) = bootstrap {
        if plan_fd.is_some() || control_fd.is_some() || relay_fd.is_some() {
            return Err(
                "`--bootstrap` starts on its own: no `--plan-fd`, `--control-fd` or `--relay-fd`"
                    .into(),
            );
        }
        return Ok((grace, Workload::Standalone(path)));
    }
    match (plan_fd, control_fd) {
        (Some(plan), Some(control)) => Ok((
            grace,
            Workload::Launch(launch::Inherited {
                plan,
                control,
                relay: relay_fd,
            }),
        )),
        (None, None) => Err("no command: give it after `--`".into()),
        _ => Err("`--plan-fd` and `--control-fd` go together".into()),
    }
}
