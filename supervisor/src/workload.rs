//! What the workload is given: its user, its environment, the program path.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use policy_bundle::Bundle;
use policy_bundle::SecretSource;

use crate::cli::EnvArg;
use crate::error::LaunchError;

/// The environment every workload starts from; `--env` adds to it.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The user and groups to become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub name: String,
}

pub use enforcer::own_ids;

/// The bundle's `run_as`, resolved before the fork. `None` when the
/// workload keeps the supervisor's user. `can_switch`: the supervisor holds
/// `CAP_SETUID` and `CAP_SETGID`.
///
/// A policy without a user keeps the supervisor's, root included: OpenShell
/// policies leave the user to whatever starts them, so refusing would
/// refuse them. Such a root workload is returned as an identity all the
/// same, so the launch applies the root restrictions to it (and `check`
/// warns, W0131).
pub fn identity(bundle: &Bundle, can_switch: bool) -> Result<Option<Identity>, LaunchError> {
    let process = &bundle.enforcement.process;
    let (own_uid, own_gid) = own_ids();
    if process.user.is_none() && process.group.is_none() {
        // Under a root supervisor the workload is uid 0 either way; naming
        // it makes the launch apply what it applies to every root workload.
        return Ok((own_uid == 0).then(|| Identity {
            uid: 0,
            gid: own_gid,
            name: "root".into(),
        }));
    }
    let lookup = |e: enforcer::LookupError| LaunchError::Usage(format!("run_as: {e}"));
    let (uid, mut gid, name) = match &process.user {
        Some(u) => {
            let ids = enforcer::resolve_user(u).map_err(lookup)?;
            (ids.uid, ids.gid, u.clone())
        }
        None => (own_uid, own_gid, format!("uid {own_uid}")),
    };
    if let Some(g) = &process.group {
        gid = enforcer::resolve_group(g).map_err(lookup)?;
    }
    if !can_switch && (uid, gid) != (own_uid, own_gid) {
        return Err(LaunchError::Usage(format!(
            "the bundle runs the workload as `{name}`, and this supervisor may not change user: run it as root, or as that user"
        )));
    }
    Ok(Some(Identity { uid, gid, name }))
}

/// The workload's environment: the defaults, then `given` (the CA trust
/// variables, the credentials' placeholders), then each `--env`. Refuses
/// to pass on a variable that holds a credential's real secret, and to
/// override a placeholder.
pub fn environment(
    args: &[EnvArg],
    workdir: &Path,
    bundle: &Bundle,
    given: &[(String, OsString)],
) -> Result<BTreeMap<String, OsString>, LaunchError> {
    let mut env: BTreeMap<String, OsString> = BTreeMap::new();
    env.insert("PATH".into(), DEFAULT_PATH.into());
    env.insert("HOME".into(), workdir.as_os_str().to_owned());
    env.insert("LANG".into(), "C.UTF-8".into());
    for (name, value) in given {
        env.insert(name.clone(), value.clone());
    }
    let placeholders: Vec<(&str, &str)> = bundle
        .enforcement
        .credentials
        .iter()
        .filter_map(|c| Some((c.placeholder.as_deref()?, c.name.as_str())))
        .collect();
    let secrets: Vec<(&str, &str)> = bundle
        .enforcement
        .credentials
        .iter()
        .filter_map(|c| match &c.source {
            SecretSource::Env(var) => Some((var.as_str(), c.name.as_str())),
            SecretSource::File(_) => None,
        })
        .collect();
    for arg in args {
        if let Some((_, cred)) = placeholders.iter().find(|(var, _)| *var == arg.name) {
            return Err(LaunchError::Usage(format!(
                "`--env {}`: that variable holds the placeholder of credential `{cred}`",
                arg.name
            )));
        }
        let value = match &arg.value {
            Some(v) => Some(v.clone()),
            None => std::env::var_os(&arg.name),
        };
        for (var, cred) in &secrets {
            let real = std::env::var_os(var);
            let leaks = arg.name == *var && arg.value.is_none() || value.is_some() && value == real;
            if leaks && real.is_some() {
                return Err(LaunchError::Usage(format!(
                    "`--env {}` would give the workload the real secret of credential `{cred}`; the proxy injects it instead",
                    arg.name
                )));
            }
        }
        match value {
            Some(v) => {
                env.insert(arg.name.clone(), v);
            }
            None => {
                env.remove(&arg.name);
            }
        }
    }
    Ok(env)
}

/// `NAME=VALUE` strings for `execve`.
pub fn envp(env: &BTreeMap<String, OsString>) -> Result<Vec<CString>, LaunchError> {
    env.iter()
        .map(|(k, v)| {
            let mut bytes = k.clone().into_bytes();
            bytes.push(b'=');
            bytes.extend_from_slice(v.as_bytes());
            CString::new(bytes)
                .map_err(|_| LaunchError::Usage(format!("the value of `{k}` contains a NUL byte")))
        })
        .collect()
}

/// The arguments as C strings.
pub fn argv(command: &[OsString]) -> Result<Vec<CString>, LaunchError> {
    command
        .iter()
        .map(|a| {
            CString::new(a.clone().into_vec())
                .map_err(|_| LaunchError::Usage("an argument contains a NUL byte".into()))
        })
        .collect()
}

/// The program to execute: a name with a `/` is taken as a path (relative
/// to the working directory); otherwise the workload's `PATH` is searched.
pub fn find_program(
    name: &OsStr,
    path: Option<&OsStr>,
    workdir: &Path,
) -> Result<PathBuf, LaunchError> {
    if name.as_bytes().contains(&b'/') {
        return Ok(workdir.join(name));
    }
    let dirs = path.map(std::env::split_paths).into_iter().flatten();
    for dir in dirs {
        let candidate = workdir.join(dir).join(name);
        let executable = std::fs::metadata(&candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
        if executable {
            return Ok(candidate);
        }
    }
    Err(LaunchError::NotFound(name.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_on_the_workload_path() {
        let found = find_program(
            OsStr::new("sh"),
            Some(OsStr::new("/usr/bin:/bin")),
            Path::new("/"),
        )
        .unwrap();
        assert!(found.ends_with("sh"));
        assert_eq!(
            find_program(OsStr::new("./x"), None, Path::new("/w")).unwrap(),
            Path::new("/w/./x")
        );
        assert!(
            find_program(
                OsStr::new("no-such-program-here"),
                Some(OsStr::new("/usr/bin")),
                Path::new("/")
            )
            .is_err()
        );
    }
}
