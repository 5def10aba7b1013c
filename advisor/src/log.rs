//! The deny log, line by line: denials this language can name, other
//! events counted, and a message for every line that cannot be used.

use policy_bundle::Bundle;

use crate::LineProblem;
use crate::denylog::{Entry, read_line};
use crate::narrow::{self, Named};

/// What the log holds.
#[derive(Debug)]
pub struct Read {
    /// Lines in the file.
    pub lines: usize,
    /// Denials to suggest rules for.
    pub named: Vec<Named>,
    /// Events that are not denials (allowed, audited, DNS, reloads).
    pub other: usize,
    /// Lines that could not be used, in order.
    pub problems: Vec<LineProblem>,
    /// Denials of OpenShell's own log, taken as of the OpenShell policy
    /// given: its lines name no policy.
    pub openshell: usize,
}

/// Reads every line; a line of another policy (a bundle digest or policy
/// name other than `policy`'s) is a problem, not a denial, and so is a
/// line that names no policy at all, except one of OpenShell's own log
/// when `policy` is OpenShell YAML (`yaml`): OpenShell names no policy on
/// any line, and the one given is taken as the one it enforced.
pub fn read(bytes: &[u8], policy: &Bundle, yaml: bool) -> Read {
    let mut out = Read {
        lines: 0,
        named: Vec::new(),
        other: 0,
        problems: Vec::new(),
        openshell: 0,
    };
    let problem = |line: usize, message: String| LineProblem { line, message };
    let mut rest = bytes;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        let (line, next) = match rest.iter().position(|b| *b == b'\n') {
            Some(i) => (
                rest.get(..i).unwrap_or_default(),
                rest.get(i + 1..).unwrap_or_default(),
            ),
            None => (rest, &[][..]),
        };
        rest = next;
        let Ok(text) = std::str::from_utf8(line) else {
            out.problems.push(problem(
                number,
                "not UTF-8 text; a deny-log line is JSON".into(),
            ));
            continue;
        };
        let denial = match read_line(text) {
            Ok(Entry::Denial(d)) => d,
            Ok(Entry::Other(_)) => {
                out.other += 1;
                continue;
            }
            Ok(Entry::Blank) => continue,
            Err(e) => {
                out.problems.push(problem(number, e.to_string()));
                continue;
            }
        };
        let unnamed = denial.policy.is_none() && denial.digest.is_none();
        if unnamed && !(denial.openshell && yaml) {
            out.problems
                .push(problem(number, names_no_policy(&denial, policy)));
            continue;
        }
        if let Some(name) = denial
            .policy
            .as_deref()
            .filter(|n| *n != policy.provenance.policy)
        {
            out.problems.push(problem(
                number,
                format!(
                    "a denial under policy `{name}`, not `{}`; give the policy the supervisor enforced",
                    policy.provenance.policy
                ),
            ));
            continue;
        }
        if let Some(digest) = denial.digest.as_deref().filter(|d| *d != policy.digest) {
            out.problems.push(problem(
                number,
                format!(
                    "a denial under bundle `{digest}`, but the policy compiles to `{}`: it changed since (or needs the `--credentials` the bundle was compiled with)",
                    policy.digest
                ),
            ));
            continue;
        }
        match narrow::name(number, *denial) {
            Ok(n) => {
                out.openshell += usize::from(unnamed);
                out.named.push(n);
            }
            Err(why) => out.problems.push(problem(number, why)),
        }
    }
    out.lines = number;
    out
}

/// The message for a denial with neither `policy.name` nor `policy.uid`.
///
/// Such a line is skipped like a line of another policy, not used: the
/// supervisor names the policy on every line, so a line without one was
/// written by something else (another product's OCSF export, a log edited
/// by hand), and nothing ties it to `policy`. Used, it could turn another
/// policy's denials into rules for this one, and the proof and replay would
/// then vouch for a change no denial under `policy` asked for.
fn names_no_policy(denial: &crate::denylog::Denial, policy: &Bundle) -> String {
    if denial.openshell {
        return format!(
            "a line of OpenShell's own log, which names no policy: it is read only against the OpenShell YAML policy the sandbox ran (`suggest POLICY.yaml --from LOG`), not against `{}`",
            policy.provenance.policy
        );
    }
    let by = denial
        .product
        .as_deref()
        .map(|p| format!(" (written by `{p}`)"))
        .unwrap_or_default();
    format!(
        "a denial that names no policy (no `policy.name` or `policy.uid`){by}, so it cannot be told to be of `{}`; skipped, as a line of another policy is",
        policy.provenance.policy
    )
}
