//! Commands run in a sandbox the gateway runs: what a person asks for,
//! what the sandbox's supervisor claims and reports back, and the record
//! both read. The command's output travels as standard base64, since it
//! is bytes, not text.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::shape;
use crate::store::ExecRow;

/// Where a command is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ExecState {
    /// Waiting for the sandbox's supervisor to claim it.
    Queued,
    /// Claimed: the supervisor runs it and sends its output.
    Running,
    /// It ran and ended with `exit_status`.
    Exited,
    /// It could not run, or the sandbox stopped first; `error` says why.
    Failed,
}

impl ExecState {
    pub(crate) const ALL: [ExecState; 4] = [
        ExecState::Queued,
        ExecState::Running,
        ExecState::Exited,
        ExecState::Failed,
    ];

    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            ExecState::Queued => "queued",
            ExecState::Running => "running",
            ExecState::Exited => "exited",
            ExecState::Failed => "failed",
        }
    }

    #[must_use]
    pub(crate) fn parse(word: &str) -> Option<Self> {
        ExecState::ALL.into_iter().find(|s| s.word() == word)
    }

    /// Nothing more will change: no output is taken, waiters stop.
    #[must_use]
    pub(crate) fn ended(self) -> bool {
        matches!(self, ExecState::Exited | ExecState::Failed)
    }
}

/// One of the command's two output streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    #[must_use]
    pub(crate) fn word(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    #[must_use]
    pub(crate) fn parse(word: &str) -> Option<Self> {
        [Stream::Stdout, Stream::Stderr]
            .into_iter()
            .find(|s| s.word() == word)
    }
}

/// An exec's id: `x-` and 16 hex digits.
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
pub(crate) struct ExecId(#[schemars(pattern(r"^x-[0-9a-f]{16}$"))] String);

/// `POST /v1/sandboxes/{id}/execs`: a command for a `ready` sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecRequest {
    /// Program first; each entry non-empty for the program, without a NUL
    /// byte, at most 4096 bytes.
    #[schemars(length(min = 1, max = 256))]
    pub(crate) command: Vec<String>,
    /// Variables given to the command; every name must be in the
    /// sandbox's `run.env_allow`. The values are handed to the supervisor
    /// once and never answered or audited.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) env: BTreeMap<String, String>,
    /// An absolute path inside the sandbox; default: the sandbox's own
    /// working directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) workdir: Option<String>,
    /// Default: the sandbox's `run.timeout_seconds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub(crate) timeout_seconds: Option<u64>,
}

/// A command and what became of it; never the values of its `env`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Exec {
    #[schemars(with = "ExecId")]
    pub(crate) id: String,
    #[schemars(with = "shape::Name")]
    pub(crate) sandbox: String,
    /// The sandbox's generation it was made for: no other generation
    /// runs it.
    pub(crate) generation: i64,
    pub(crate) command: Vec<String>,
    /// The names of the variables it was given.
    pub(crate) env_names: Vec<String>,
    pub(crate) workdir: Option<String>,
    pub(crate) timeout_seconds: Option<u64>,
    pub(crate) state: ExecState,
    #[schemars(range(min = 0, max = 255))]
    pub(crate) exit_status: Option<i64>,
    /// It was killed at its timeout (`exit_status` is what the sandbox
    /// reported then).
    pub(crate) timed_out: bool,
    pub(crate) error: Option<String>,
    /// Bytes the command wrote to standard output, as its supervisor sent
    /// them; the transcript keeps at most 16 MiB of both streams.
    #[schemars(range(min = 0))]
    pub(crate) stdout_bytes: i64,
    #[schemars(range(min = 0))]
    pub(crate) stderr_bytes: i64,
    /// Output past the transcript limit was not kept.
    pub(crate) truncated: bool,
    pub(crate) created_by: String,
    #[schemars(with = "shape::Time")]
    pub(crate) created_at: i64,
    #[schemars(with = "Option<shape::Time>")]
    pub(crate) started_at: Option<i64>,
    #[schemars(with = "Option<shape::Time>")]
    pub(crate) ended_at: Option<i64>,
}

impl From<&ExecRow> for Exec {
    fn from(e: &ExecRow) -> Self {
        Self {
            id: e.id.clone(),
            sandbox: e.sandbox.clone(),
            generation: e.generation,
            command: e.command.clone(),
            env_names: e.env_names.clone(),
            workdir: e.workdir.clone(),
            timeout_seconds: e.timeout_seconds.and_then(|t| u64::try_from(t).ok()),
            state: e.state,
            exit_status: e.exit_status,
            timed_out: e.timed_out,
            error: e.error.clone(),
            stdout_bytes: e.stdout_len,
            stderr_bytes: e.stderr_len,
            truncated: e.truncated,
            created_by: e.created_by.clone(),
            created_at: e.created_at,
            started_at: e.started_at,
            ended_at: e.ended_at,
        }
    }
}

/// `GET /v1/sandboxes/{id}/execs`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct ExecList {
    pub(crate) execs: Vec<Exec>,
}

/// Bytes of one stream, from `offset` on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct OutputChunk {
    pub(crate) stream: Stream,
    #[schemars(range(min = 0))]
    pub(crate) offset: i64,
    /// Standard base64 (with padding).
    pub(crate) data: String,
}

/// `GET /v1/sandboxes/{id}/execs/{exec}/output`: the record, and the
/// output past the offsets asked for, in the order it arrived.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct ExecOutput {
    pub(crate) exec: Exec,
    pub(crate) chunks: Vec<OutputChunk>,
}

/// `GET /v1/sandboxes/{id}/execs/next`: the command a supervisor
/// claimed. `env` is answered this once: the gateway keeps no value.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct ExecClaim {
    #[schemars(with = "ExecId")]
    pub(crate) exec_id: String,
    pub(crate) command: Vec<String>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) workdir: Option<String>,
    #[schemars(range(min = 1))]
    pub(crate) timeout_seconds: Option<u64>,
}

/// `POST /v1/sandboxes/{id}/execs/{exec}/output`: bytes of one stream
/// from `offset` on. A chunk may start before what is stored (a retry):
/// only its new tail is kept. At most 1 MiB once decoded, and the whole
/// body within the 1 MiB request limit.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutputRequest {
    pub(crate) stream: Stream,
    pub(crate) offset: u64,
    /// Standard base64.
    pub(crate) data: String,
}

/// `POST /v1/sandboxes/{id}/execs/{exec}/end`: `exit_status` (and
/// `timed_out`) when the command ran, `error` when it could not.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend("oneOf" = [{ "required": ["exit_status"] }, { "required": ["error"] }]))]
pub(crate) struct EndRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 255))]
    pub(crate) exit_status: Option<i64>,
    /// With `exit_status`: the command was killed at its timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) timed_out: Option<bool>,
    /// Why the command could not run; kept up to 2 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub(crate) error: Option<String>,
}
