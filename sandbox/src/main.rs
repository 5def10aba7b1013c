//! `openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]`: runs
//! COMMAND as the workload, its PID 1 (or child subreaper), and exits as
//! it did: its exit code, or 128 + the signal that killed it.
//!
//! `openshell-sandbox [--grace-period SECS] --adopt --status-fd N`: the
//! same for a workload already forked, this process's only child (the
//! supervisor's init execs it so), writing its raw wait status on fd N.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use sandbox::pid1;

/// Exit status when this process cannot do its job (as `env` and `timeout`
/// use 125).
const EXIT_SANDBOX_FAILED: u8 = 125;

const USAGE: &str = "usage: openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]
       openshell-sandbox [--grace-period SECS] --adopt --status-fd N";

/// What to be PID 1 of.
enum Workload {
    Run(Vec<OsString>),
    Adopt { status_fd: i32 },
}

fn main() -> ExitCode {
    let (grace, workload) = match parse(std::env::args_os().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("openshell-sandbox: {message}\n{USAGE}");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    let ended = match workload {
        Workload::Run(command) => pid1::run(&command, grace),
        Workload::Adopt { status_fd } => pid1::adopt(status_fd, grace),
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
    let mut adopt = false;
    let mut status_fd = None;
    let number = |flag: &str, value: Option<OsString>| -> Result<u64, String> {
        let value = value.ok_or_else(|| format!("`{flag}` needs a number"))?;
        value
            .to_str()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("`{flag} {}`: not a whole number", value.to_string_lossy()))
    };
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--") => {
                let command: Vec<OsString> = args.collect();
                if adopt || command.is_empty() {
                    return Err("give either `--adopt` or a command after `--`".into());
                }
                return Ok((grace, Workload::Run(command)));
            }
            Some("--grace-period") => {
                grace = Duration::from_secs(number("--grace-period", args.next())?)
            }
            Some("--adopt") => adopt = true,
            Some("--status-fd") => {
                let fd = number("--status-fd", args.next())?;
                status_fd =
                    Some(i32::try_from(fd).map_err(|_| "`--status-fd`: too large".to_owned())?);
            }
            _ => {
                return Err(format!(
                    "unknown argument `{}`; the command goes after `--`",
                    arg.to_string_lossy()
                ));
            }
        }
    }
    match (adopt, status_fd) {
        (true, Some(status_fd)) => Ok((grace, Workload::Adopt { status_fd })),
        (true, None) => Err("`--adopt` needs `--status-fd`".into()),
        (false, _) => Err("no command: give it after `--`".into()),
    }
}
