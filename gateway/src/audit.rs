//! The audit log's hash chain. Each row's hash covers the previous row's
//! hash and the row's own fields, so editing a row breaks its hash and
//! deleting one breaks the link of the next; the head (last sequence number
//! and hash, kept apart) catches a deleted last row.

use serde::Serialize;
use sha2::{Digest as _, Sha256};

/// One audit row as stored, with its place in the hash chain.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRow {
    pub seq: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub subject: String,
    /// JSON text.
    pub detail: String,
    pub prev: String,
    pub hash: String,
}

/// The `prev` of the first row.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of a row: SHA-256 of the previous hash, a newline, and the
/// canonical JSON of `{action, actor, at, detail, seq, subject}`.
#[must_use]
pub fn row_hash(
    prev: &str,
    seq: i64,
    at: i64,
    actor: &str,
    action: &str,
    subject: &str,
    detail: &str,
) -> String {
    #[derive(Serialize)]
    struct Fields<'a> {
        action: &'a str,
        actor: &'a str,
        at: i64,
        detail: &'a str,
        seq: i64,
        subject: &'a str,
    }
    let fields = Fields {
        action,
        actor,
        at,
        detail,
        seq,
        subject,
    };
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(serde_json::to_vec(&fields).unwrap_or_default());
    hex(&h.finalize())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        s.push_str(&format!("{b:02x}"));
        s
    })
}

/// One break in the chain.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    pub seq: i64,
    pub problem: String,
}

/// Checks the rows (in sequence order) against each other and the head.
#[must_use]
pub fn verify(rows: &[AuditRow], head: (i64, &str)) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut prev = GENESIS.to_owned();
    let mut expected = 1;
    for r in rows {
        if r.seq != expected {
            problems.push(Problem {
                seq: expected,
                problem: format!(
                    "rows {expected} to {} are missing (deleted)",
                    r.seq.saturating_sub(1)
                ),
            });
        }
        if r.prev != prev {
            problems.push(Problem {
                seq: r.seq,
                problem:
                    "its link to the previous row is broken (a row before it was deleted or edited)"
                        .into(),
            });
        }
        let computed = row_hash(
            &r.prev, r.seq, r.at, &r.actor, &r.action, &r.subject, &r.detail,
        );
        if computed != r.hash {
            problems.push(Problem {
                seq: r.seq,
                problem: "its content does not match its hash (the row was edited)".into(),
            });
        }
        prev = r.hash.clone();
        expected = r.seq.saturating_add(1);
    }
    let (head_seq, head_hash) = head;
    let last = rows.last().map_or(0, |r| r.seq);
    if head_seq != last || (last > 0 && head_hash != prev) {
        problems.push(Problem {
            seq: head_seq,
            problem: format!(
                "the chain's head is row {head_seq}, but the last row is {last} (rows at the end were deleted or edited)"
            ),
        });
    }
    problems
}
