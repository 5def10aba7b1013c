//! `openshell-gateway boundary set|show|remove`: an admin's commands for
//! the boundary a policy's every proposal is proved within.

use std::path::PathBuf;

use clap::Subcommand;

use super::{Conn, EXIT_REFUSED, EXIT_UNREACHABLE, TIMEOUT, call, connect, fail, get, print_json};
use crate::wire;

#[derive(Subcommand, Debug)]
pub(crate) enum BoundaryCommand {
    /// Set FILE as the boundary of policy NAME; refused, with the
    /// findings, when NAME's active revision exceeds it.
    Set {
        #[command(flatten)]
        conn: Conn,
        name: String,
        file: PathBuf,
        /// An OpenShell credentials file.
        #[arg(long, value_name = "F")]
        credentials: Option<PathBuf>,
    },
    /// The boundary of policy NAME, as JSON.
    Show {
        #[command(flatten)]
        conn: Conn,
        name: String,
    },
    /// Remove the boundary of policy NAME.
    Remove {
        #[command(flatten)]
        conn: Conn,
        name: String,
    },
}

pub(super) async fn run(command: BoundaryCommand) -> Result<u8, u8> {
    match command {
        BoundaryCommand::Set {
            conn,
            name,
            file,
            credentials,
        } => set(&conn, &name, &file, credentials.as_deref()).await,
        BoundaryCommand::Show { conn, name } => {
            let client = connect(&conn)?;
            let path = format!("/v1/policies/{name}/boundary");
            print_json(&get::<wire::Boundary>(&client, &path, TIMEOUT).await?);
            Ok(0)
        }
        BoundaryCommand::Remove { conn, name } => {
            let client = connect(&conn)?;
            let path = format!("/v1/policies/{name}/boundary");
            let _: wire::RemovedBoundary =
                call(&client, "DELETE", &path, None::<&()>, TIMEOUT).await?;
            println!("the boundary of `{name}` is removed");
            Ok(0)
        }
    }
}

async fn set(
    conn: &Conn,
    name: &str,
    file: &std::path::Path,
    credentials: Option<&std::path::Path>,
) -> Result<u8, u8> {
    let client = connect(conn)?;
    let body = super::policy_request(file, credentials)?;
    let path = format!("/v1/policies/{name}/boundary");
    let body = serde_json::to_value(wire::BoundaryRequest {
        source: body.source,
        format: body.format,
        credentials: body.credentials,
        files: body.files,
    })
    .map_err(|e| fail(super::EXIT_USAGE, format!("cannot write the request: {e}")))?;
    let resp = client
        .send("PUT", &path, Some(&body), &[], TIMEOUT)
        .await
        .map_err(|e| fail(EXIT_UNREACHABLE, e))?;
    // A refusal of the boundary carries what backs it: print that too.
    if resp.status == 422
        && let Ok(r) = serde_json::from_slice::<wire::BoundaryRefusal>(&resp.body)
    {
        eprintln!("openshell-gateway: {} (422)", r.error.message);
        let view: wire::ContainmentView = r
            .containment
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default();
        for text in crate::show::containment(&view) {
            eprintln!("  {text}");
        }
        let check: wire::CheckReport = r
            .diagnostics
            .and_then(|d| serde_json::from_value(d).ok())
            .unwrap_or_default();
        for d in check.files.iter().flat_map(|f| &f.diagnostics) {
            eprintln!(
                "  {} {} {}:{}:{}: {}",
                d.severity,
                d.code,
                d.file,
                super::shown(d.line),
                super::shown(d.column),
                d.message
            );
        }
        return Err(EXIT_REFUSED);
    }
    let b: wire::Boundary = super::read_answer(&resp, "PUT", &path)?;
    let verdict = b
        .containment
        .as_ref()
        .and_then(|c| c.get("verdict"))
        .and_then(serde_json::Value::as_str);
    match (b.checked_revision, verdict) {
        (Some(rev), Some("within")) => println!(
            "boundary of `{name}` set ({}): revision {rev}, which is active, is within it",
            b.digest
        ),
        (Some(rev), v) => {
            println!(
                "boundary of `{name}` set ({}), but revision {rev}, which is active, is not proved within it ({})",
                b.digest,
                v.unwrap_or("no proof")
            );
            let view: wire::ContainmentView = b
                .containment
                .and_then(|c| serde_json::from_value(c).ok())
                .unwrap_or_default();
            for text in crate::show::containment(&view) {
                println!("  {text}");
            }
        }
        (None, _) => println!(
            "boundary of `{name}` set ({}): `{name}` has no active revision yet; its first is proved within it",
            b.digest
        ),
    }
    Ok(0)
}
