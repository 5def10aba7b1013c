//! What a candidate bundle lets the workload do outside the network that
//! the old one did not: a filesystem right on a path the old Landlock
//! ruleset did not cover, or sandbox enforcement made weaker. These are
//! table comparisons, not solver questions: a right is granted or not, a
//! syscall denied or not, whatever the request.
//!
//! A right counts as held before when the old ruleset granted it on the
//! path or on any path above it (Landlock rights are inherited, see
//! `sandbox`). Rights are compared by name whatever ABI introduced them:
//! the ABI a right needs does not make it narrower.

use std::collections::BTreeSet;

use policy_bundle::LandlockMode;
use policy_bundle::{Bundle, LandlockPath, RightsAtAbi};
use serde::Serialize;

use crate::finding::Loc;
use crate::query::Category;
use crate::sandbox::covers;

/// One thing the new sandbox allows that the old one did not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxChange {
    /// `file_rights_expansion` or `enforcement_weakened`.
    pub category: Category,
    /// The diagnostic code `check` reports it under.
    pub code: &'static str,
    /// One sentence for people.
    pub message: String,
    /// The path new rights are granted on (`<workdir>` for the working
    /// directory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The Landlock rights newly granted there, in the table's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rights: Vec<String>,
    /// The setting made weaker (`landlock.mode`, `seccomp.deny`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    /// The new policy's rule that grants the rights, when one does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Loc>,
}

impl SandboxChange {
    /// One entry per path: a new tree usually brings a dozen rights, and
    /// a line per right would bury the path.
    fn rights(path: &str, shown: &str, rights: Vec<&str>, by: By) -> Option<SandboxChange> {
        if rights.is_empty() {
            return None;
        }
        let list = rights
            .iter()
            .map(|r| format!("`{r}`"))
            .collect::<Vec<_>>()
            .join(", ");
        Some(SandboxChange {
            category: Category::FileRightsExpansion,
            code: Category::FileRightsExpansion.code().id,
            message: match by {
                By::Old => format!(
                    "{shown} is now granted {list}, which the old ruleset granted neither there nor above"
                ),
                By::Boundary => format!(
                    "{shown} is granted {list}, which the boundary grants neither there nor above"
                ),
            },
            path: Some(path.to_owned()),
            rights: rights.into_iter().map(str::to_owned).collect(),
            setting: None,
            rule: None,
        })
    }

    fn weakened(setting: &str, message: String) -> SandboxChange {
        SandboxChange {
            category: Category::EnforcementWeakened,
            code: Category::EnforcementWeakened.code().id,
            message,
            path: None,
            rights: Vec::new(),
            setting: Some(setting.to_owned()),
            rule: None,
        }
    }
}

fn rights(access: &[RightsAtAbi]) -> BTreeSet<&str> {
    access
        .iter()
        .flat_map(|a| a.rights.iter().map(String::as_str))
        .collect()
}

/// The granted path of `paths` that gives `right` on `path`, if any.
fn granted_by<'a>(paths: &'a [LandlockPath], path: &str, right: &str) -> Option<&'a str> {
    paths
        .iter()
        .find(|p| covers(&p.path, path) && rights(&p.access).contains(right))
        .map(|p| p.path.as_str())
}

/// What the candidate is compared against: the old revision (`diff`), or
/// a boundary it must stay inside (containment), which changes the
/// wording and what `run_as` may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum By {
    Old,
    Boundary,
}

/// Everything `new`'s sandbox allows beyond `old`'s, in table order.
#[must_use]
pub(crate) fn compare(old: &Bundle, new: &Bundle) -> Vec<SandboxChange> {
    compare_by(old, new, By::Old)
}

/// Everything the candidate's sandbox allows beyond the boundary's. The
/// same comparison as [`compare`], except that a boundary naming no
/// `run_as` user (or group) admits any: it leaves the choice to the
/// policy, where a revision that starts naming one changes what runs.
#[must_use]
pub(crate) fn within(boundary: &Bundle, candidate: &Bundle) -> Vec<SandboxChange> {
    compare_by(boundary, candidate, By::Boundary)
}

fn compare_by(old: &Bundle, new: &Bundle, by: By) -> Vec<SandboxChange> {
    let (o, n) = (&old.enforcement, &new.enforcement);
    let mut out = Vec::new();
    for (i, p) in n.landlock.paths.iter().enumerate() {
        let granted: Vec<&str> = rights(&p.access)
            .into_iter()
            .filter(|r| granted_by(&o.landlock.paths, &p.path, r).is_none())
            .collect();
        // The compiler writes Landlock paths and their provenance from
        // the same list, in the same order.
        let rule = new.provenance.fs.get(i).map(Loc::of);
        out.extend(
            SandboxChange::rights(&p.path, &format!("`{}`", p.path), granted, by)
                .map(|c| SandboxChange { rule, ..c }),
        );
    }
    let old_wd = o
        .landlock
        .workdir
        .as_deref()
        .map(rights)
        .unwrap_or_default();
    let new_wd: Vec<&str> = n
        .landlock
        .workdir
        .as_deref()
        .map(rights)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| !old_wd.contains(r))
        .collect();
    out.extend(SandboxChange::rights(
        "<workdir>",
        "the working directory",
        new_wd,
        by,
    ));
    if o.landlock.mode == LandlockMode::Hard && n.landlock.mode == LandlockMode::BestEffort {
        out.push(SandboxChange::weakened(
            "landlock.mode",
            match by {
                By::Old => "Landlock is now `best_effort`: on an older kernel the sandbox starts with less of the ruleset applied",
                By::Boundary => "Landlock is `best_effort` where the boundary requires `hard`: on an older kernel the sandbox starts with less of the ruleset applied",
            }
            .to_owned(),
        ));
    }
    if n.landlock.min_abi < o.landlock.min_abi {
        out.push(SandboxChange::weakened(
            "landlock.min_abi",
            match by {
                By::Old => format!(
                    "the lowest Landlock ABI accepted fell from {} to {}",
                    o.landlock.min_abi, n.landlock.min_abi
                ),
                By::Boundary => format!(
                    "the lowest Landlock ABI accepted is {}, below the boundary's {}",
                    n.landlock.min_abi, o.landlock.min_abi
                ),
            },
        ));
    }
    let new_ports = &n.landlock.tcp_connect_ports;
    let old_ports = &o.landlock.tcp_connect_ports;
    if let Some(port) = new_ports
        .ranges()
        .iter()
        .flat_map(|&(lo, hi)| lo..=hi)
        .find(|&p| !old_ports.contains(p))
    {
        out.push(SandboxChange::weakened(
            "landlock.tcp_connect_ports",
            format!("Landlock now lets the workload connect to TCP port {port} (and perhaps more)"),
        ));
    }
    out.extend(advisor_reach(o, n, by));
    for s in o
        .landlock
        .scoped
        .iter()
        .filter(|s| !n.landlock.scoped.contains(s))
    {
        out.push(SandboxChange::weakened(
            "landlock.scoped",
            format!("Landlock no longer scopes `{s}` to the sandbox"),
        ));
    }
    // A denial whose conditions changed counts as removed: comparing
    // argument conditions for inclusion is not worth the risk of a wrong
    // "nothing new".
    for d in o
        .seccomp
        .deny
        .iter()
        .filter(|d| !n.seccomp.deny.contains(d))
    {
        out.push(SandboxChange::weakened(
            "seccomp.deny",
            format!(
                "syscall `{}` is no longer denied{}",
                d.syscall,
                if d.when.is_empty() {
                    ""
                } else {
                    " under the same conditions"
                }
            ),
        ));
    }
    for t in o
        .seccomp
        .notify
        .iter()
        .filter(|t| !n.seccomp.notify.contains(t))
    {
        out.push(SandboxChange::weakened(
            "seccomp.notify",
            format!(
                "syscall `{}` is no longer trapped to the supervisor",
                t.syscall
            ),
        ));
    }
    let who = |u: &Option<String>| {
        u.as_deref()
            .map_or("(unchanged by the policy)".to_owned(), |u| format!("`{u}`"))
    };
    let differs = |old: &Option<String>, new: &Option<String>| match by {
        By::Old => old != new,
        By::Boundary => old.is_some() && old != new,
    };
    let now = match by {
        By::Old => "now ",
        By::Boundary => "",
    };
    let than = match by {
        By::Old => "instead of",
        By::Boundary => "where the boundary names",
    };
    if differs(&o.process.user, &n.process.user) {
        out.push(SandboxChange::weakened(
            "run_as.user",
            format!(
                "the workload {now}runs as user {} {than} {}",
                who(&n.process.user),
                who(&o.process.user)
            ),
        ));
    }
    if differs(&o.process.group, &n.process.group) {
        out.push(SandboxChange::weakened(
            "run_as.group",
            format!(
                "the workload {now}runs as group {} {than} {}",
                who(&n.process.group),
                who(&o.process.group)
            ),
        ));
    }
    out
}

/// Binaries the new `advisor` statement names that the old did not: they
/// may now reach `policy.local`, read the sandbox's denials and ask the
/// gateway for changes. Compared entry by entry, so a rewritten pattern
/// that names the same binaries is reported too: a person reads it.
fn advisor_reach(
    o: &policy_bundle::Tables,
    n: &policy_bundle::Tables,
    by: By,
) -> Option<SandboxChange> {
    let before = o
        .advisor
        .as_ref()
        .map(|a| a.binaries.as_slice())
        .unwrap_or_default();
    let added: Vec<String> = n
        .advisor
        .iter()
        .flat_map(|a| &a.binaries)
        .filter(|b| !before.contains(b))
        .map(|b| match &b.sha256 {
            Some(sha) => format!("`{}` (sha256:{sha})", b.glob),
            None => format!("`{}`", b.glob),
        })
        .collect();
    if added.is_empty() {
        return None;
    }
    let list = added.join(", ");
    Some(SandboxChange::weakened(
        "advisor",
        match by {
            By::Old => format!(
                "{list} may now reach the in-sandbox advisor (`policy.local`): read the sandbox's denials and ask the gateway for changes"
            ),
            By::Boundary => format!(
                "{list} may reach the in-sandbox advisor (`policy.local`), which the boundary does not allow them"
            ),
        },
    ))
}
