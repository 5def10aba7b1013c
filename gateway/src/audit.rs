//! The audit log's hash chain. Each row's hash covers the previous row's
//! hash and the row's own fields, so editing a row breaks its hash and
//! deleting one breaks the link of the next; the head (last sequence number
//! and hash, kept apart) catches a deleted last row.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// One audit row as stored, with its place in the hash chain.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct AuditRow {
    #[schemars(range(min = 1))]
    pub(crate) seq: i64,
    #[schemars(with = "crate::wire::shape::Time")]
    pub(crate) at: i64,
    pub actor: String,
    pub(crate) action: String,
    pub subject: String,
    /// JSON text, as hashed.
    pub(crate) detail: String,
    #[schemars(pattern(r"^[0-9a-f]{64}$"))]
    pub(crate) prev: String,
    #[schemars(pattern(r"^[0-9a-f]{64}$"))]
    pub(crate) hash: String,
}

/// The `prev` of the first row.
pub(crate) const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The hash of a row: SHA-256 of the previous hash, a newline, and the
/// canonical JSON of `{action, actor, at, detail, seq, subject}`.
#[must_use]
pub(crate) fn row_hash(
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
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[schemars(extend("additionalProperties" = false))]
pub(crate) struct Problem {
    pub(crate) seq: i64,
    pub(crate) problem: String,
}

/// The chain check, fed one row at a time (in sequence order) so that a
/// log of any length is checked a page at a time, never held whole.
#[derive(Debug)]
pub(crate) struct Verifier {
    problems: Vec<Problem>,
    prev: String,
    expected: i64,
    last: i64,
    rows: u64,
}

impl Default for Verifier {
    fn default() -> Self {
        Self {
            problems: Vec::new(),
            prev: GENESIS.to_owned(),
            expected: 1,
            last: 0,
            rows: 0,
        }
    }
}

impl Verifier {
    #[must_use]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Checks the next row against the one before it.
    pub(crate) fn feed(&mut self, r: &AuditRow) {
        let expected = self.expected;
        if r.seq != expected {
            self.problems.push(Problem {
                seq: expected,
                problem: format!(
                    "rows {expected} to {} are missing (deleted)",
                    r.seq.saturating_sub(1)
                ),
            });
        }
        if r.prev != self.prev {
            self.problems.push(Problem {
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
            self.problems.push(Problem {
                seq: r.seq,
                problem: "its content does not match its hash (the row was edited)".into(),
            });
        }
        self.prev.clone_from(&r.hash);
        self.expected = r.seq.saturating_add(1);
        self.last = r.seq;
        self.rows = self.rows.saturating_add(1);
    }

    /// How many rows were fed.
    #[must_use]
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// The problems found, with the last row checked against the head.
    #[must_use]
    pub(crate) fn finish(mut self, head: (i64, &str)) -> Vec<Problem> {
        let (head_seq, head_hash) = head;
        let last = self.last;
        if head_seq != last || (last > 0 && head_hash != self.prev) {
            self.problems.push(Problem {
                seq: head_seq,
                problem: format!(
                    "the chain's head is row {head_seq}, but the last row is {last} (rows at the end were deleted or edited)"
                ),
            });
        }
        self.problems
    }
}
