//! The path skeleton: every route the server answers, with its roles,
//! parameters, body and statuses. The bodies' schemas come from
//! [`crate::wire`]; what is written here is only what no type can say
//! (who may call, which statuses, the prose).

use serde_json::{Map, Value, json};

use super::Schemas;
use crate::wire;

mod exec;

pub(super) const DESCRIPTION: &str = "\
Proposes, proves, approves, signs and delivers policies to the
supervisors of AI-agent sandboxes. Every request but `/healthz` and
`/readyz` carries `Authorization: Bearer <token>`. Bodies are JSON and
unknown fields are refused (`400`). Every refusal has the body
`{\"error\": {\"status\", \"code\", \"message\"}}`.

Each operation's `x-roles` lists the token roles it serves (others are
refused with `403`); `sandbox` there means a sandbox's own token, for
its own sandbox only.
";

/// The shared refusals, by status, and the description of each.
const ERRORS: &[(&str, &str)] = &[
    (
        "BadRequest",
        "Malformed JSON, unknown fields, a bad name, number or format; a request that is not valid HTTP/1.1.",
    ),
    (
        "MalformedRequest",
        "A request that is not valid HTTP/1.1 (`code` `malformed_request`).",
    ),
    (
        "Unauthorized",
        "No token, an unknown token, an expired token (`code` `token_expired`).",
    ),
    (
        "Forbidden",
        "The role may not do this; self-approval; approving, without the admin role, a proposal whose proof within its boundary is not settled; another sandbox's endpoints; revoking `admin`.",
    ),
    (
        "NotFound",
        "No such proposal, revision, sandbox, policy, token; no approved revision yet.",
    ),
    (
        "BodyTimeout",
        "The body did not arrive within `--body-timeout` (`code` `body_timeout`).",
    ),
    (
        "Conflict",
        "A lost race, a policy with no active revision for denials to be read against (`code` `no_active_revision`), a stale review token, a proposal not pending, a boundary changed since the proposal was proved, a token name or sandbox id taken; a sandbox not in the phase the operation needs; an exec's output chunk past its stream's stored length, or an exec not running or ended otherwise.",
    ),
    ("TooLarge", "A body over 1 MiB (`code` `body_too_large`)."),
    (
        "Unprocessable",
        "The log of a `from-denials` proposal holds nothing to admit (`code` `nothing_to_suggest`) or its rules cannot be written into the source (`code` `cannot_patch`); the candidate compiles to the active bundle, is over a compiled-size limit (`code` `policy_too_large`), or has a credential reading a secret source outside `serve --allow-secret-source` (`code` `secret_source_not_allowed`); a status report naming a revision or digest the gateway did not offer.",
    ),
    (
        "UriTooLong",
        "A request path longer than the gateway reads (`code` `uri_too_long`).",
    ),
    (
        "HeaderTooLarge",
        "A request head over about 400 KiB (`code` `header_too_large`).",
    ),
    (
        "Unavailable",
        "The database did not answer (`code` `store_unavailable`); the gateway is stopping while a sandbox's transition goes on (`code` `stopping`: another gateway on the database finishes it).",
    ),
    (
        "TooManyPending",
        "The sandbox already has as many proposals waiting for a person as it may (`code` `too_many_pending`).",
    ),
    (
        "DriverFailed",
        "The driver failed to act on the sandbox (`code` `driver_failed`); the sandbox rolled back, and the message says to which phase.",
    ),
];

/// `components/responses`: each refusal with the one error body.
pub(super) fn error_responses() -> Value {
    let mut out = Map::new();
    for (name, description) in ERRORS {
        out.insert(
            (*name).to_owned(),
            json!({
                "description": description,
                "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } },
            }),
        );
    }
    // The refusal of a boundary: its body carries what backs it.
    out.insert(
        "BoundaryRefused".to_owned(),
        json!({
            "description": "The policy's active revision exceeds the boundary (`code` `boundary_exceeded`, the findings in `containment`), or the boundary does not compile (`code` `boundary_invalid`, its `diagnostics`); or another `422` of a policy source (the compiled-size limits).",
            "content": { "application/json": { "schema": { "$ref": "#/components/schemas/BoundaryRefusal" } } },
        }),
    );
    Value::Object(out)
}

/// `components/parameters`.
pub(super) fn parameters() -> Value {
    json!({
        "PolicyName": {
            "name": "name", "in": "path", "required": true,
            "description": "A policy name.",
            "schema": { "$ref": "#/components/schemas/Name" },
        },
        "ProposalId": {
            "name": "id", "in": "path", "required": true,
            "description": "A proposal id, 1 or more.",
            "schema": { "type": "integer", "minimum": 1 },
        },
        "SandboxId": {
            "name": "id", "in": "path", "required": true,
            "description": "A sandbox id.",
            "schema": { "$ref": "#/components/schemas/Name" },
        },
        "Wait": {
            "name": "wait", "in": "query", "required": false,
            "description": "Seconds to wait for a change (at most 300; more is answered as 300).",
            "schema": { "type": "integer", "minimum": 0 },
        },
    })
}

fn param(name: &str) -> Value {
    json!({ "$ref": format!("#/components/parameters/{name}") })
}

fn query(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "in": "query", "required": false, "description": description, "schema": schema })
}

/// The refusals an operation gives beyond those every `/v1` one does.
#[derive(Clone, Copy, Default)]
struct Extra {
    not_found: bool,
    conflict: bool,
    unprocessable: bool,
}

const NONE: Extra = Extra {
    not_found: false,
    conflict: false,
    unprocessable: false,
};
const N: Extra = Extra {
    not_found: true,
    ..NONE
};
const C: Extra = Extra {
    conflict: true,
    ..NONE
};
const NC: Extra = Extra {
    not_found: true,
    conflict: true,
    ..NONE
};
const CU: Extra = Extra {
    conflict: true,
    unprocessable: true,
    ..NONE
};
const NCU: Extra = Extra {
    not_found: true,
    conflict: true,
    unprocessable: true,
};

/// The refusals of a `/v1` operation, by status.
fn refusals(extra: Extra) -> Vec<(&'static str, &'static str)> {
    let mut out = vec![
        ("400", "BadRequest"),
        ("401", "Unauthorized"),
        ("403", "Forbidden"),
        ("408", "BodyTimeout"),
        ("413", "TooLarge"),
        ("414", "UriTooLong"),
        ("431", "HeaderTooLarge"),
        ("503", "Unavailable"),
    ];
    if extra.not_found {
        out.push(("404", "NotFound"));
    }
    if extra.conflict {
        out.push(("409", "Conflict"));
    }
    if extra.unprocessable {
        out.push(("422", "Unprocessable"));
    }
    out
}

/// One operation.
struct Op {
    id: &'static str,
    roles: &'static [&'static str],
    summary: &'static str,
    description: &'static str,
    parameters: Vec<Value>,
    body: Option<(bool, Value)>,
    /// `(status, description, schema)` of each answer that is not a
    /// refusal; a `None` schema is an answer without a body.
    answers: Vec<(&'static str, &'static str, Option<Value>)>,
    refusals: Vec<(&'static str, &'static str)>,
}

impl Op {
    fn new(id: &'static str, roles: &'static [&'static str], summary: &'static str) -> Self {
        Self {
            id,
            roles,
            summary,
            description: "",
            parameters: Vec::new(),
            body: None,
            answers: Vec::new(),
            refusals: refusals(NONE),
        }
    }

    fn says(mut self, description: &'static str) -> Self {
        self.description = description;
        self
    }

    fn extra(mut self, extra: Extra) -> Self {
        self.refusals = refusals(extra);
        self
    }

    /// A refusal with a response of its own instead of the shared one.
    fn refusal(mut self, status: &'static str, name: &'static str) -> Self {
        self.refusals.retain(|(s, _)| *s != status);
        self.refusals.push((status, name));
        self
    }

    fn param(mut self, p: Value) -> Self {
        self.parameters.push(p);
        self
    }

    fn body(mut self, required: bool, schema: Value) -> Self {
        self.body = Some((required, schema));
        self
    }

    fn answer(mut self, status: &'static str, description: &'static str, schema: Value) -> Self {
        self.answers.push((status, description, Some(schema)));
        self
    }

    fn empty(mut self, status: &'static str, description: &'static str) -> Self {
        self.answers.push((status, description, None));
        self
    }

    fn to_json(&self) -> Value {
        let mut responses = Map::new();
        let etag = json!({ "ETag": { "description": "The quoted digest.", "schema": { "type": "string" } } });
        for (status, description, schema) in &self.answers {
            let mut r = Map::new();
            r.insert("description".into(), json!(description));
            if let Some(schema) = schema {
                let media = if schema.get("type") == Some(&json!("string")) && self.id == "metrics"
                {
                    "text/plain"
                } else {
                    "application/json"
                };
                r.insert("content".into(), json!({ media: { "schema": schema } }));
            }
            if self.id == "bundle" {
                r.insert("headers".into(), etag.clone());
            }
            responses.insert((*status).to_owned(), Value::Object(r));
        }
        for (status, name) in &self.refusals {
            responses
                .entry((*status).to_owned())
                .or_insert_with(|| json!({ "$ref": format!("#/components/responses/{name}") }));
        }
        let mut op = Map::new();
        op.insert("operationId".into(), json!(self.id));
        op.insert("summary".into(), json!(self.summary));
        if !self.description.is_empty() {
            op.insert("description".into(), json!(self.description));
        }
        if self.roles.is_empty() {
            op.insert("security".into(), json!([]));
        } else {
            op.insert("x-roles".into(), json!(self.roles));
        }
        if !self.parameters.is_empty() {
            op.insert("parameters".into(), json!(self.parameters));
        }
        if let Some((required, schema)) = &self.body {
            op.insert(
                "requestBody".into(),
                json!({ "required": required, "content": { "application/json": { "schema": schema } } }),
            );
        }
        op.insert("responses".into(), Value::Object(responses));
        Value::Object(op)
    }
}

const READERS: &[&str] = &["admin", "author", "reader"];
const PEOPLE: &[&str] = &["admin", "author"];
const ADMIN: &[&str] = &["admin"];

/// What every unauthenticated endpoint may answer before it is reached.
fn raw_refusals() -> Vec<(&'static str, &'static str)> {
    vec![
        ("400", "MalformedRequest"),
        ("414", "UriTooLong"),
        ("431", "HeaderTooLarge"),
    ]
}

/// A path, its path-level parameters and its operations by method.
type PathItem = (&'static str, Vec<Value>, Vec<(&'static str, Op)>);

/// Every path, its path-level parameters and its operations.
pub(super) fn paths(s: &mut Schemas) -> Value {
    // The one error body every refusal in `components/responses` names.
    let _ = s.answer::<wire::ErrorBody>();
    // The body of the `BoundaryRefused` response.
    let _ = s.answer::<wire::BoundaryRefusal>();
    let proposal = s.answer::<wire::Proposal>();
    let sandbox = s.answer::<wire::Sandbox>();
    let mut healthz = Op::new("healthz", &[], "Liveness (no token).").answer(
        "200",
        "The process serves.",
        s.answer::<wire::Health>(),
    );
    healthz.refusals = raw_refusals();
    let readiness = s.answer::<wire::Readiness>();
    let mut readyz = Op::new("readyz", &[], "Readiness (no token).")
        .says(
            "`200` when the database answers within 5 s; `503` otherwise and once `SIGTERM` came.",
        )
        .answer("200", "Ready.", readiness.clone())
        .answer(
            "503",
            "The database does not answer, or the gateway is stopping.",
            readiness,
        );
    readyz.refusals = raw_refusals();
    let mut metrics = Op::new("metrics", READERS, "Prometheus metrics.")
        .says("Roles: admin, author, reader (not a sandbox token).")
        .answer(
            "200",
            "Prometheus text format.",
            json!({ "type": "string" }),
        );
    metrics.refusals = vec![
        ("400", "MalformedRequest"),
        ("401", "Unauthorized"),
        ("403", "Forbidden"),
        ("413", "TooLarge"),
        ("414", "UriTooLong"),
        ("431", "HeaderTooLarge"),
        ("503", "Unavailable"),
    ];

    let mut items: Vec<PathItem> = vec![
        ("/healthz", vec![], vec![("get", healthz)]),
        ("/readyz", vec![], vec![("get", readyz)]),
        ("/metrics", vec![], vec![("get", metrics)]),
        (
            "/v1/policies/{name}/proposals",
            vec![param("PolicyName")],
            vec![(
                "post",
                Op::new("propose", PEOPLE, "Propose a policy source.")
                    .says("Roles: author, admin. Compiles the source and proves it against the active revision. A source that does not compile is stored `invalid` (`201`, with `diagnostics`). When the policy has a boundary the candidate is also proved within it (`containment`): one that exceeds it is stored `refused` by `gateway` (`201`, `decision` `boundary`, the excesses in `containment`, the first in `reason`), in either approval mode. With `--approval auto`, a change whose verdict is `no-new-access`, that changes no credential's secret, injection or placeholder and that is proved within the boundary (when there is one) is approved at once by `gateway`; any other waits for a person, and the answer's `held` says why.")
                    .body(true, s.request::<wire::ProposalRequest>())
                    .answer("201", "The proposal as stored.", proposal.clone())
                    .extra(CU),
            )],
        ),
        (
            "/v1/policies/{name}/proposals/from-denials",
            vec![param("PolicyName")],
            vec![(
                "post",
                Op::new("proposeFromDenials", PEOPLE, "Propose the narrowest change that admits a deny log's denials.")
                    .says("Roles: author, admin. The gateway reads the supervisor's deny log against the policy's active revision and writes into that revision's source the narrowest rules that admit its denials, as `openshell-policy suggest` does (the exact binary and pin, host and port; for inspected requests the exact methods and the smallest path patterns; widened only as `generalize` asks). The candidate keeps the revision's included files and credentials and is compiled and proved like any proposal; its `origin` is `advisor`, and it is never approved by `--approval auto`, whatever its verdict: it admits what was denied by construction. The answer's `advice` says what was read: lines not used (another policy's, unreadable) are listed and the rest still used. `409` (`code` `no_active_revision`) when the policy has no active revision; `422` when the log holds nothing to admit (`code` `nothing_to_suggest`) or the rules cannot be written into the source (`code` `cannot_patch`), besides the refusals of a proposal.")
                    .body(true, s.request::<wire::DenialsRequest>())
                    .answer("201", "The proposal as stored, with `advice`.", proposal.clone())
                    .extra(CU),
            )],
        ),
        (
            "/v1/policies/{name}/boundary",
            vec![param("PolicyName")],
            vec![
                (
                    "put",
                    Op::new("setBoundary", ADMIN, "Set the boundary every proposal to the policy is proved within.")
                        .says("Roles: admin. The boundary is a policy source, sent like a proposal. The policy's active revision is proved within it first: when it exceeds it, the boundary is refused (`422`, `code` `boundary_exceeded`, the findings in `containment`); when the boundary does not compile, `422` with `code` `boundary_invalid` and its `diagnostics`. When the proof is `unsupported` or `inconclusive` the boundary is set and the answer's `containment` says so. A policy with no proposal yet is made. Pending proposals proved against another boundary (or none) can no longer be approved (`409`): re-propose them.")
                        .body(true, s.request::<wire::BoundaryRequest>())
                        .answer("200", "The boundary as stored, with the active revision's proof within it.", s.answer::<wire::Boundary>())
                        .extra(C)
                        .refusal("422", "BoundaryRefused"),
                ),
                (
                    "get",
                    Op::new("boundary", READERS, "A policy's boundary.")
                        .says("Roles: reader, author, admin. `404` when the policy has none.")
                        .answer("200", "The boundary as stored.", s.answer::<wire::Boundary>())
                        .extra(N),
                ),
                (
                    "delete",
                    Op::new("removeBoundary", ADMIN, "Remove a policy's boundary.")
                        .says("Roles: admin. `404` when the policy has none. Pending proposals proved within it can no longer be approved (`409`): re-propose them.")
                        .answer("200", "Removed.", s.answer::<wire::RemovedBoundary>())
                        .extra(N),
                ),
            ],
        ),
        (
            "/v1/policies/{name}/revisions",
            vec![param("PolicyName")],
            vec![(
                "get",
                Op::new("revisions", READERS, "A policy's revisions and the active one.")
                    .says("Roles: reader, author, admin. `404` for a policy never proposed.")
                    .answer("200", "Every revision, oldest first.", s.answer::<wire::RevisionList>())
                    .extra(N),
            )],
        ),
        (
            "/v1/policies/{name}/revisions/{rev}",
            vec![
                param("PolicyName"),
                json!({
                    "name": "rev", "in": "path", "required": true,
                    "description": "A revision number, 1 or more.",
                    "schema": { "type": "integer", "minimum": 1 },
                }),
            ],
            vec![(
                "get",
                Op::new("revision", READERS, "One revision, with its bundle.")
                    .says("Roles: reader, author, admin.")
                    .answer("200", "The revision and its compiled bundle.", s.answer::<wire::RevisionWithBundle>())
                    .extra(N),
            )],
        ),
        (
            "/v1/policies/{name}/rollback",
            vec![param("PolicyName")],
            vec![(
                "post",
                Op::new("rollback", PEOPLE, "Propose an old revision's source again.")
                    .says("Roles: author, admin. Compiled and proved against what is active like any change; approved, it becomes a new, higher revision.")
                    .body(true, s.request::<wire::RollbackRequest>())
                    .answer("201", "A proposal with `rollback_of`.", proposal.clone())
                    .extra(NCU),
            )],
        ),
        (
            "/v1/proposals",
            vec![],
            vec![(
                "get",
                Op::new("proposals", READERS, "List proposals.")
                    .says("Roles: reader, author, admin.")
                    .param(query("policy", "Only this policy's proposals.", json!({ "$ref": "#/components/schemas/Name" })))
                    .answer("200", "Proposals, by id.", s.answer::<wire::ProposalList>()),
            )],
        ),
        (
            "/v1/proposals/{id}",
            vec![param("ProposalId")],
            vec![(
                "get",
                Op::new("proposal", READERS, "One proposal, with its proof or diagnostics.")
                    .says("Roles: reader, author, admin.")
                    .answer("200", "The proposal.", proposal.clone())
                    .extra(N),
            )],
        ),
        (
            "/v1/proposals/{id}/approve",
            vec![param("ProposalId")],
            vec![(
                "post",
                Op::new("approve", PEOPLE, "Approve a pending proposal.")
                    .says("Roles: author, admin; never the proposer (`403`). The review token must be the proposal's, and neither the active revision nor the policy's boundary may have changed since it was proved (`409` otherwise). A proposal whose proof within the boundary is `unsupported` or `inconclusive` may be approved by an admin only (`403`).")
                    .body(true, s.request::<wire::ApproveRequest>())
                    .answer("200", "The proposal, `approved`, with the revision it made.", proposal.clone())
                    .extra(NC),
            )],
        ),
        (
            "/v1/proposals/{id}/reject",
            vec![param("ProposalId")],
            vec![(
                "post",
                Op::new("reject", PEOPLE, "Reject a pending proposal.")
                    .says("Roles: author, admin. `409` when the proposal is not pending.")
                    .body(true, s.request::<wire::RejectRequest>())
                    .answer("200", "The proposal, `rejected`.", proposal.clone())
                    .extra(NC),
            )],
        ),
        (
            "/v1/sandboxes",
            vec![],
            vec![
                (
                    "post",
                    Op::new("createSandbox", ADMIN, "Create a sandbox of an existing policy: run by a driver, or registered to run elsewhere.")
                        .says("Roles: admin. The policy must have been proposed (`404` otherwise); an id in use is `409`. With `run`, the gateway starts the sandbox with that driver and waits up to `wait` seconds (default 120) for it to be `ready`: `201` with the sandbox, `202` while it is still `provisioning`, `502` when the driver failed (it is then `failed`). Without `run`, the sandbox is registered and its token (named `sandbox:ID`) is shown once.")
                        .param(param("Wait"))
                        .body(true, s.request::<wire::CreateSandboxRequest>())
                        .answer("201", "The sandbox, `ready`; or, registered, the sandbox and its token.", json!({ "oneOf": [s.answer::<wire::Sandbox>(), s.answer::<wire::SandboxCreated>()] }))
                        .answer("202", "The sandbox, still `provisioning`.", sandbox.clone())
                        .extra(NC)
                        .refusal("502", "DriverFailed"),
                ),
                (
                    "get",
                    Op::new("sandboxes", READERS, "Every sandbox and what it runs.")
                        .says("Roles: reader, author, admin.")
                        .answer("200", "Sandboxes, by id.", s.answer::<wire::SandboxList>()),
                ),
            ],
        ),
        (
            "/v1/sandboxes/{id}",
            vec![param("SandboxId")],
            vec![
                (
                    "get",
                    Op::new("sandbox", &["admin", "author", "reader", "sandbox"], "What a sandbox runs; optionally wait for a revision.")
                        .says("Roles: reader, author, admin, and the sandbox's own token. With `revision`, waits up to `wait` seconds for the sandbox to report that revision applied (`applied` or `network_only`), then answers as it is.")
                        .param(query("revision", "The revision to wait for.", json!({ "type": "integer", "minimum": 1 })))
                        .param(param("Wait"))
                        .answer("200", "The sandbox.", sandbox.clone())
                        .extra(N),
                ),
                (
                    "delete",
                    Op::new("deleteSandbox", ADMIN, "Remove a sandbox and revoke its tokens.")
                        .says("Roles: admin. A sandbox the gateway runs goes through `deleting` while its driver removes it (waiting as `stop` does); its tokens are revoked when that commits. A delete that fails rolls back (`502`), and a sandbox that still runs keeps its session.")
                        .param(param("Wait"))
                        .answer("200", "Deleted.", s.answer::<wire::DeletedSandbox>())
                        .answer("202", "The sandbox, still `deleting`.", sandbox.clone())
                        .extra(NC)
                        .refusal("502", "DriverFailed"),
                ),
            ],
        ),
        (
            "/v1/sandboxes/{id}/stop",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("stopSandbox", ADMIN, "Stop a sandbox the gateway runs; its workspace stays.")
                    .says("Roles: admin. `ready` → `stopping` → `stopped`; waits up to `wait` seconds (default 120). `409` from another phase or for a registered sandbox. The sandbox's tokens are revoked when the stop commits; a stop that fails rolls back to `ready` (`502`) with the session still working.")
                    .param(param("Wait"))
                    .answer("200", "The sandbox, `stopped`.", sandbox.clone())
                    .answer("202", "The sandbox, still `stopping`.", sandbox.clone())
                    .extra(NC)
                    .refusal("502", "DriverFailed"),
            )],
        ),
        (
            "/v1/sandboxes/{id}/start",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("startSandbox", ADMIN, "Start a new generation of a stopped or failed sandbox.")
                    .says("Roles: admin. `stopped` or `failed` → `starting` → `ready`, with a new generation number and a new session token for its supervisor; waits up to `wait` seconds (default 120). A start that fails leaves nothing running and rolls back (`502`).")
                    .param(param("Wait"))
                    .answer("200", "The sandbox, `ready`.", sandbox.clone())
                    .answer("202", "The sandbox, still `starting`.", sandbox.clone())
                    .extra(NC)
                    .refusal("502", "DriverFailed"),
            )],
        ),
        (
            "/v1/sandboxes/{id}/session",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("refreshSession", &["sandbox"], "A new session token for a sandbox the gateway runs, of the same generation.")
                    .says("Roles: the sandbox's own session token (not a registered sandbox's token). Every gateway on the database answers it. The token asking works until it expires (an answer lost on its way leaves the supervisor a working one); every older one of the sandbox is revoked. `401` (`session_revoked`) once the sandbox stopped or started another generation.")
                    .answer("201", "The new token, shown once.", s.answer::<wire::SessionToken>()),
            )],
        ),
        (
            "/v1/sandboxes/{id}/token",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("renewSandboxToken", ADMIN, "A new token for a sandbox; its older tokens are revoked.")
                    .says("Roles: admin. The body may be left out (no expiry).")
                    .body(false, s.request::<wire::RenewTokenRequest>())
                    .answer("201", "The new token, shown once.", s.answer::<wire::SandboxToken>())
                    .extra(NC),
            )],
        ),
        (
            "/v1/sandboxes/{id}/bundle",
            vec![param("SandboxId")],
            vec![(
                "get",
                Op::new("bundle", &["admin", "sandbox"], "The signed envelope of the active revision (long-poll).")
                    .says("Roles: the sandbox's own token, admin. `200` with `ETag: \"<digest>\"` when the active revision's digest is not the one `If-None-Match` names; otherwise waits up to `wait` seconds and answers `304` if nothing changed. `404` when the policy has no approved revision yet.")
                    .param(param("Wait"))
                    .param(query("nonce", "A client nonce, echoed as `claims.nonce` in the signed envelope (16 to 128 characters of A-Z a-z 0-9 - _; otherwise 400).", json!({ "type": "string" })))
                    .param(json!({
                        "name": "If-None-Match", "in": "header", "required": false,
                        "description": "The quoted digest the client already has.",
                        "schema": { "type": "string" },
                    }))
                    .answer("200", "The envelope.", s.answer::<wire::Envelope>())
                    .empty("304", "Nothing changed within the wait; no body.")
                    .extra(N),
            )],
        ),
        (
            "/v1/sandboxes/{id}/proposals",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("proposeFromSandbox", &["sandbox"], "A sandbox's agent asks for what it was refused.")
                    .says("Roles: the sandbox's own token only (its supervisor forwards what its agent asked at `policy.local`). `denials` are deny-log lines the supervisor wrote for this sandbox; the gateway writes the narrowest change to the sandbox's policy's active revision that admits them, as `from-denials` does, and proposes it with `proposer` `sandbox:ID`, `origin` `advisor` and the agent's `rationale` (1 to 2000 characters). Only where the active revision of the sandbox's policy has an `advisor` statement (`403`, `code` `advisor_disabled`, otherwise), as its supervisor checks too. A person approves it; `--approval auto` never does. A sandbox may have 3 proposals pending at once (`429`, `code` `too_many_pending`). `409` `no_active_revision`, `422` `nothing_to_suggest` or `cannot_patch` as for `from-denials`.")
                    .body(true, s.request::<wire::SandboxProposalRequest>())
                    .answer("201", "The proposal as stored, with `advice`.", proposal.clone())
                    .extra(NCU)
                    .refusal("429", "TooManyPending"),
            )],
        ),
        (
            "/v1/sandboxes/{id}/status",
            vec![param("SandboxId")],
            vec![(
                "post",
                Op::new("reportStatus", &["admin", "sandbox"], "A supervisor reports what it did with a revision.")
                    .says("Roles: the sandbox's own token, admin. `revision` must be a revision of the sandbox's policy and `digest` its digest (`422` otherwise). `error` is kept up to 2 KiB.")
                    .body(true, s.request::<wire::StatusReportRequest>())
                    .answer("200", "The sandbox as it is now.", sandbox)
                    .extra(NCU),
            )],
        ),
        (
            "/v1/tokens",
            vec![],
            vec![
                (
                    "post",
                    Op::new("createToken", ADMIN, "A token for a person or a program.")
                        .says("Roles: admin. A name in use is `409`; a reserved one (`admin`, `gateway`, `anonymous`, `sandbox:…`) or the role `sandbox` is `400`.")
                        .body(true, s.request::<wire::CreateTokenRequest>())
                        .answer("201", "The token, shown once.", s.answer::<wire::TokenCreated>())
                        .extra(C),
                ),
                (
                    "get",
                    Op::new("tokens", ADMIN, "Every token, never the token or its hash.")
                        .says("Roles: admin.")
                        .answer("200", "Tokens, by name.", s.answer::<wire::TokenList>()),
                ),
            ],
        ),
        (
            "/v1/tokens/{name}",
            vec![json!({
                "name": "name", "in": "path", "required": true,
                "description": "A token's name, or `sandbox:ID` (the `:` may be written `%3A`).",
                "schema": { "type": "string" },
            })],
            vec![(
                "delete",
                Op::new("revokeToken", ADMIN, "Revoke a token.")
                    .says("Roles: admin. `admin` is refused (`403`); an unknown name is `404`.")
                    .answer("200", "Revoked.", s.answer::<wire::RevokedToken>())
                    .extra(N),
            )],
        ),
        (
            "/v1/audit",
            vec![],
            vec![(
                "get",
                Op::new("audit", READERS, "One page of the audit log, oldest first.")
                    .says("Roles: reader, author, admin.")
                    .param(query("after", "The rows with a higher `seq` (default 0).", json!({ "type": "integer", "minimum": 0, "default": 0 })))
                    .param(query("limit", "At most this many rows (default 100; more than 1000 is answered as 1000).", json!({ "type": "integer", "minimum": 1, "default": 100 })))
                    .answer("200", "A page; `next` is the `after` of the next page, `null` on the last.", s.answer::<wire::AuditPage>()),
            )],
        ),
        (
            "/v1/audit/verify",
            vec![],
            vec![(
                "get",
                Op::new("auditVerify", READERS, "Recompute the audit log's hash chain.")
                    .says("Roles: reader, author, admin.")
                    .answer("200", "`ok` is false when any problem was found.", s.answer::<wire::AuditVerification>()),
            )],
        ),
    ];
    items.extend(exec::items(s));
    let mut out = Map::new();
    for (path, params, ops) in items {
        let mut item = Map::new();
        if !params.is_empty() {
            item.insert("parameters".into(), json!(params));
        }
        for (method, op) in ops {
            item.insert(method.to_owned(), op.to_json());
        }
        out.insert(path.to_owned(), Value::Object(item));
    }
    Value::Object(out)
}
