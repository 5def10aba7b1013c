//! From a supervisor's deny log to the narrowest change to a policy that
//! admits what it denied: the log read line by line ([`log`], over
//! [`denylog`]'s reader), the denials grouped into rules ([`narrow`]), and
//! the rules written into the policy's own text ([`patch`]).
//!
//! `openshell-policy suggest` proves and replays what this returns; the
//! gateway's `propose --from-denials` submits it as a proposal a person
//! approves. Neither the proof nor the replay is here: each caller proves
//! with its own prover settings.

#![forbid(unsafe_code)]

pub mod denylog;
pub mod log;
pub mod narrow;
mod patch;

use policy_bundle::Bundle;

pub use narrow::{Generalize, L7Rule, Named, Suggestion};

/// A log line that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineProblem {
    pub line: usize,
    pub message: String,
}

/// What the log asks of the policy, and the policy's text changed to give
/// it.
#[derive(Debug)]
pub struct Advice {
    pub read: log::Read,
    pub suggestions: Vec<Suggestion>,
    /// The rules (or OpenShell YAML entries) the change adds.
    pub patch: String,
    /// The policy's text with the rules in it; why not, when they cannot
    /// be put in (the text is unchanged when nothing is suggested).
    pub patched: Result<String, String>,
    /// What a reviewer should know of the rules: credentials their hosts
    /// carry, what `--generalize` added, what YAML cannot say.
    pub notes: Vec<String>,
}

/// The narrowest change to `text` (the source of `policy`, OpenShell YAML
/// when `yaml`) that admits the denials of the deny log `log`, whose
/// name the added rules cite.
#[must_use]
pub fn advise(
    text: &str,
    yaml: bool,
    policy: &Bundle,
    log: &[u8],
    log_name: &str,
    generalize: &[Generalize],
) -> Advice {
    let read = log::read(log, policy, yaml);
    let suggestions = narrow::suggest(&read.named, policy, generalize);
    let mut advice = Advice {
        read,
        suggestions,
        patch: String::new(),
        patched: Ok(text.to_owned()),
        notes: Vec::new(),
    };
    if advice.read.openshell > 0 {
        advice.notes.push(format!(
            "{} denial(s) come from OpenShell's own log, which names no policy: they were taken as denials of this policy",
            advice.read.openshell
        ));
    }
    if advice.suggestions.is_empty() {
        return advice;
    }
    let s = &advice.suggestions;
    let patched = if yaml {
        advice.notes.extend(patch::yaml_notes(s));
        advice.patch = patch::yaml(s, log_name);
        patch::insert_yaml(text, &advice.patch)
            .ok_or("`network_policies` is a flow-style map; the entries below go into it by hand")
    } else {
        advice.patch = patch::dsl(s, log_name, text);
        patch::insert_dsl(text, &advice.patch)
            .ok_or("no closing `}` of a policy block to insert the rules before")
    };
    advice.patched = patched.map_err(str::to_owned);
    if advice.patched.is_err() {
        return advice;
    }
    for s in &advice.suggestions {
        for c in &s.credentials {
            advice.notes.push(format!(
                "`{}:{}` is a host of credential `{c}`: the proxy injects it on requests inside its binding (the log's requests went there; no binding is added or widened)",
                s.dest, s.port
            ));
        }
        advice.notes.extend(s.widened.iter().cloned());
    }
    advice
}
