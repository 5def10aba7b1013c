//! The paths of commands run in a sandbox the gateway runs: the person's
//! half (queue, list, read, follow) and the supervisor's (claim, output,
//! end).

use serde_json::{Value, json};

use super::{ADMIN, N, NC, Op, PathItem, Schemas, param, query};
use crate::wire;

const SUPERVISOR: &[&str] = &["admin", "sandbox"];

fn exec_param() -> Value {
    json!({
        "name": "exec", "in": "path", "required": true,
        "description": "An exec id: `x-` and 16 hex digits.",
        "schema": { "type": "string", "pattern": "^x-[0-9a-f]{16}$" },
    })
}

fn offset(stream: &str) -> Value {
    query(
        stream,
        "The bytes of this stream already read: the answer starts past them (default 0).",
        json!({ "type": "integer", "minimum": 0, "default": 0 }),
    )
}

/// Every exec path.
pub(super) fn items(s: &mut Schemas) -> Vec<PathItem> {
    let exec = s.answer::<wire::Exec>();
    vec![
        (
            "/v1/sandboxes/{id}/execs",
            vec![param("SandboxId")],
            vec![
                (
                    "post",
                    Op::new("createExec", ADMIN, "Run a command in a ready sandbox the gateway runs.")
                        .says("Roles: admin. Queued for the sandbox's running generation; its supervisor claims it (`GET …/execs/next`). Every name in `env` must be in the sandbox's `run.env_allow` (`400` otherwise, naming it); `timeout_seconds` defaults to the sandbox's `run.timeout_seconds`. `409` when the sandbox is not `ready`, `400` for a registered sandbox. Audited as `sandbox-exec` (the command and the names of `env`, never its values).")
                        .body(true, s.request::<wire::ExecRequest>())
                        .answer("201", "The exec, `queued`.", exec.clone())
                        .extra(NC),
                ),
                (
                    "get",
                    Op::new("execs", ADMIN, "A sandbox's execs, newest first.")
                        .says("Roles: admin.")
                        .param(query("limit", "At most this many (default 100; more than 1000 is answered as 1000).", json!({ "type": "integer", "minimum": 1, "default": 100 })))
                        .answer("200", "Execs, newest first.", s.answer::<wire::ExecList>())
                        .extra(N),
                ),
            ],
        ),
        (
            "/v1/sandboxes/{id}/execs/next",
            vec![param("SandboxId")],
            vec![(
                "get",
                Op::new("nextExec", SUPERVISOR, "The sandbox's supervisor claims the next command (long-poll).")
                    .says("Roles: the sandbox's own token, admin. Claims the oldest `queued` exec of the sandbox's current generation while it is `ready`: it becomes `running`, and its `env` is answered this once and leaves the database. Of two claims racing, one gets it. Otherwise waits up to `wait` seconds for one and answers `204`.")
                    .param(param("Wait"))
                    .answer("200", "The claimed command.", s.answer::<wire::ExecClaim>())
                    .empty("204", "No command came within the wait; no body.")
                    .extra(N),
            )],
        ),
        (
            "/v1/sandboxes/{id}/execs/{exec}",
            vec![param("SandboxId"), exec_param()],
            vec![(
                "get",
                Op::new("exec", ADMIN, "One exec.")
                    .says("Roles: admin.")
                    .answer("200", "The exec.", exec.clone())
                    .extra(N),
            )],
        ),
        (
            "/v1/sandboxes/{id}/execs/{exec}/output",
            vec![param("SandboxId"), exec_param()],
            vec![
                (
                    "get",
                    Op::new("execOutput", ADMIN, "Follow an exec's output (long-poll).")
                        .says("Roles: admin. The stored output past `stdout` and `stderr` (bytes already read of each), in the order it arrived, at most 1 MiB an answer: ask again from the new offsets. With nothing new and the exec not ended, waits up to `wait` seconds for output or the end. The transcript keeps at most 16 MiB of both streams (`truncated` past it).")
                        .param(offset("stdout"))
                        .param(offset("stderr"))
                        .param(param("Wait"))
                        .answer("200", "The exec and the new output.", s.answer::<wire::ExecOutput>())
                        .extra(N),
                ),
                (
                    "post",
                    Op::new("appendExecOutput", SUPERVISOR, "The supervisor sends a chunk of a running exec's output.")
                        .says("Roles: the sandbox's own token, admin. `offset` is where the chunk starts in its stream. A chunk starting before the stored length stores only its new tail (a retry is acknowledged); one starting past it is `409`, the message naming the stored length. At most 1 MiB decoded, within the 1 MiB request limit. Only while the exec is `running` (`409`). Past the 16 MiB transcript limit bytes are counted, not kept, and the exec is `truncated`.")
                        .body(true, s.request::<wire::OutputRequest>())
                        .empty("204", "Stored (or already stored); no body.")
                        .extra(NC),
                ),
            ],
        ),
        (
            "/v1/sandboxes/{id}/execs/{exec}/end",
            vec![param("SandboxId"), exec_param()],
            vec![(
                "post",
                Op::new("endExec", SUPERVISOR, "The supervisor says how a running exec ended.")
                    .says("Roles: the sandbox's own token, admin. `exit_status` (0 to 255) and `timed_out` when the command ran: `exited`; `error` when it could not run: `failed`. The same end again is `204`; another after the end, or an end of an exec never claimed, is `409`. Audited as `sandbox-exec-end`.")
                    .body(true, s.request::<wire::EndRequest>())
                    .empty("204", "Ended (or already ended so); no body.")
                    .extra(NC),
            )],
        ),
    ]
}
