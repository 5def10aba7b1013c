//! `openshell-gateway sandbox create --driver D … | stop | start`: the
//! commands for sandboxes the gateway runs.

use clap::Args;

use super::{Conn, EXIT_USAGE, TIMEOUT, call, connect, fail, print_json};
use crate::driver::RunSpec;

/// How the gateway is to run the sandbox; none of them without `--driver`.
#[derive(Args, Debug, Default)]
pub(crate) struct RunArgs {
    /// The gateway runs the sandbox with driver D (`local`, `podman`).
    #[arg(long, value_name = "D")]
    driver: Option<String>,
    /// A directory (or volume) kept across stop and start.
    #[arg(long, value_name = "W")]
    workspace: Option<String>,
    /// The root filesystem: a directory of the driver's host.
    #[arg(long, value_name = "DIR")]
    rootfs: Option<String>,
    /// An image the driver knows, instead of `--rootfs`.
    #[arg(long, value_name = "I")]
    image: Option<String>,
    /// An environment variable a command may be given (repeatable).
    #[arg(long = "env-allow", value_name = "NAME")]
    env_allow: Vec<String>,
    /// A command running longer than S seconds is killed.
    #[arg(long, value_name = "S")]
    timeout: Option<u64>,
    /// The workload's command, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl RunArgs {
    /// The `run` of the request; `None` for a registered sandbox.
    pub(super) fn spec(self) -> Result<Option<RunSpec>, u8> {
        let Some(driver) = self.driver else {
            let given = self.workspace.is_some()
                || self.rootfs.is_some()
                || self.image.is_some()
                || !self.env_allow.is_empty()
                || self.timeout.is_some()
                || !self.command.is_empty();
            if given {
                return Err(fail(
                    EXIT_USAGE,
                    "`--workspace`, `--rootfs`, `--image`, `--env-allow`, `--timeout` and a command are for a sandbox the gateway runs: add `--driver D`",
                ));
            }
            return Ok(None);
        };
        Ok(Some(RunSpec {
            driver,
            command: self.command,
            env_allow: self.env_allow,
            workspace: self.workspace,
            rootfs: self.rootfs,
            image: self.image,
            timeout_seconds: self.timeout,
        }))
    }
}

/// `POST /v1/sandboxes/{id}/{verb}`, printing the sandbox as it then is.
pub(super) async fn act(conn: &Conn, id: &str, verb: &str) -> Result<u8, u8> {
    let client = connect(conn)?;
    let path = format!("/v1/sandboxes/{id}/{verb}");
    let v: serde_json::Value = call(&client, "POST", &path, None::<&()>, TIMEOUT).await?;
    print_json(&v);
    Ok(0)
}
