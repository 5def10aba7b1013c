//! `openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]`: runs
//! COMMAND as the workload, its PID 1 (or child subreaper), and exits as
//! it did: its exit code, or 128 + the signal that killed it.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::process::ExitCode;
use std::time::Duration;

use sandbox::pid1;

/// Exit status when this process cannot do its job (as `env` and `timeout`
/// use 125).
const EXIT_SANDBOX_FAILED: u8 = 125;

const USAGE: &str = "usage: openshell-sandbox [--grace-period SECS] -- COMMAND [ARGS...]";

fn main() -> ExitCode {
    let (grace, command) = match parse(std::env::args_os().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("openshell-sandbox: {message}\n{USAGE}");
            return ExitCode::from(EXIT_SANDBOX_FAILED);
        }
    };
    match pid1::run(&command, grace) {
        Ok(status) => ExitCode::from(u8::try_from(status.code()).unwrap_or(EXIT_SANDBOX_FAILED)),
        Err(e) => {
            eprintln!("openshell-sandbox: {e}");
            ExitCode::from(EXIT_SANDBOX_FAILED)
        }
    }
}

/// The grace period and the command.
fn parse(mut args: impl Iterator<Item = OsString>) -> Result<(Duration, Vec<OsString>), String> {
    let mut grace = pid1::DEFAULT_GRACE;
    loop {
        let Some(arg) = args.next() else {
            return Err("no command: give it after `--`".into());
        };
        match arg.to_str() {
            Some("--") => break,
            Some("--grace-period") => {
                let value = args
                    .next()
                    .ok_or("`--grace-period` needs a number of seconds")?;
                let secs: u64 = value.to_str().and_then(|v| v.parse().ok()).ok_or_else(|| {
                    format!(
                        "`--grace-period {}`: not a whole number of seconds",
                        value.to_string_lossy()
                    )
                })?;
                grace = Duration::from_secs(secs);
            }
            _ => {
                return Err(format!(
                    "unknown argument `{}`; the command goes after `--`",
                    arg.to_string_lossy()
                ));
            }
        }
    }
    let command: Vec<OsString> = args.collect();
    if command.is_empty() {
        return Err("no command after `--`".into());
    }
    Ok((grace, command))
}
