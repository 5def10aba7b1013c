//! The questions asked of the solver, one per finding category, as
//! formulas over the new and old bundles' models, and the same questions
//! asked of the reference evaluator for replay.

use policy_lang::diag::{Code, codes};
use serde::Serialize;

use crate::formula::{F, and, lit, not};
use crate::model::Model;
use crate::witness::Observed;

/// Finding categories; the names are stable (JSON, SARIF rule ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// A credentialed destination reachable where it was not.
    CredentialReachExpansion,
    /// A new method or path on a credentialed destination.
    CapabilityExpansion,
    /// A credentialed destination reachable without inspection.
    L7BypassCredentialed,
    /// Audit mode lets denied credentialed requests through.
    EnforcementDowngrade,
    /// Reach to link-local or cloud metadata addresses.
    MetadataReach,
    /// A secret the sandbox holds is readable by a binary that can send it.
    SecretExposure,
    /// A network rule names a binary the workload can plant.
    WritableBinaryIdentity,
    /// New reach with no credential in scope: what the credentialed
    /// categories leave out of "the candidate adds nothing".
    ReachExpansion,
    /// A filesystem right the old Landlock ruleset did not grant.
    FileRightsExpansion,
    /// Sandbox enforcement made weaker: Landlock mode or ABI, a syscall no
    /// longer denied or trapped, another user or group.
    EnforcementWeakened,
    /// A credential sends another secret, puts it elsewhere in the
    /// request, or takes another placeholder: the same requests carry
    /// something else.
    CredentialChanged,
}

impl Category {
    /// Every category, in report order.
    pub const ALL: [Category; 11] = [
        Category::CredentialReachExpansion,
        Category::CapabilityExpansion,
        Category::L7BypassCredentialed,
        Category::EnforcementDowngrade,
        Category::MetadataReach,
        Category::SecretExposure,
        Category::WritableBinaryIdentity,
        Category::ReachExpansion,
        Category::FileRightsExpansion,
        Category::EnforcementWeakened,
        Category::CredentialChanged,
    ];

    /// The stable snake_case id (JSON, SARIF, `--accept` files).
    pub fn name(self) -> &'static str {
        match self {
            Category::CredentialReachExpansion => "credential_reach_expansion",
            Category::CapabilityExpansion => "capability_expansion",
            Category::L7BypassCredentialed => "l7_bypass_credentialed",
            Category::EnforcementDowngrade => "enforcement_downgrade",
            Category::MetadataReach => "metadata_reach",
            Category::SecretExposure => "secret_exposure",
            Category::WritableBinaryIdentity => "writable_binary_identity",
            Category::ReachExpansion => "reach_expansion",
            Category::FileRightsExpansion => "file_rights_expansion",
            Category::EnforcementWeakened => "enforcement_weakened",
            Category::CredentialChanged => "credential_changed",
        }
    }

    /// The inverse of [`Category::name`].
    pub fn parse(s: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The category's code in the one registry of diagnostic codes.
    pub fn code(self) -> Code {
        match self {
            Category::CredentialReachExpansion => codes::R0101,
            Category::CapabilityExpansion => codes::R0102,
            Category::L7BypassCredentialed => codes::R0103,
            Category::EnforcementDowngrade => codes::R0104,
            Category::MetadataReach => codes::R0105,
            Category::SecretExposure => codes::R0106,
            Category::WritableBinaryIdentity => codes::R0107,
            Category::ReachExpansion => codes::R0108,
            Category::FileRightsExpansion => codes::R0109,
            Category::EnforcementWeakened => codes::R0110,
            Category::CredentialChanged => codes::R0111,
        }
    }

    /// Whether the category is new reach rather than a finding: reported
    /// in the report's `reach` section, it turns `no-new-access` into
    /// `new-reach` but does not block a change (no credential is at
    /// stake).
    #[must_use]
    pub fn is_reach(self) -> bool {
        matches!(
            self,
            Category::ReachExpansion
                | Category::FileRightsExpansion
                | Category::EnforcementWeakened
        )
    }

    /// The code's one-line summary, for rule tables.
    pub fn summary(self) -> &'static str {
        self.code().summary
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One question: a category, which flavour of it, and its formula.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub(crate) category: Category,
    /// Distinguishes the two ways a credential's reach grows.
    pub(crate) variant: Variant,
    pub(crate) f: F,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Main,
    /// A credential newly attached to a request the old policy let
    /// through without it.
    NewlyAttached,
    /// Containment: the candidate's credential of this index is injected
    /// into a request the boundary lets through with a credential, but not
    /// with one that sends the same secret the same way.
    Credential(usize),
    /// Containment: a connection the candidate relays uninspected where
    /// no credential is in scope and the boundary inspects it (or
    /// refuses it). The boundary let only HTTP requests its rules judge
    /// through; the candidate lets any bytes through.
    Uninspected,
    /// The new policy's credential of this index has its placeholder
    /// replaced by its secret in a request body the old policy refused
    /// (or let through unreplaced): `request_body_credential_rewrite`.
    BodyRewrite(usize),
    /// The same in a WebSocket text message: `websocket_credential_rewrite`.
    TextRewrite(usize),
}

/// What a question is stated over: formulas when the solver is asked, and
/// `bool` when a witness is replayed through the reference evaluator. Each
/// category is written once, in [`question`], for both.
pub(crate) trait Logic: Clone {
    fn all<const N: usize>(parts: [Self; N]) -> Self;
    fn negate(self) -> Self;
}

impl Logic for F {
    fn all<const N: usize>(parts: [F; N]) -> F {
        and(parts)
    }
    fn negate(self) -> F {
        not(self)
    }
}

impl Logic for bool {
    fn all<const N: usize>(parts: [bool; N]) -> bool {
        parts.into_iter().all(|b| b)
    }
    fn negate(self) -> bool {
        !self
    }
}

/// One policy's facts about a request, as the questions read them.
#[derive(Debug, Clone)]
pub(crate) struct Facts<L> {
    pub(crate) conn: L,
    pub(crate) allow: L,
    pub(crate) audit: L,
    pub(crate) scope: L,
    pub(crate) credentialed: L,
    pub(crate) bypass: L,
    pub(crate) plantable: L,
}

impl Facts<F> {
    fn of(m: &Model) -> Self {
        Facts {
            conn: m.conn.clone(),
            allow: m.allow.clone(),
            audit: m.audit.clone(),
            scope: m.scope.clone(),
            credentialed: m.credentialed.clone(),
            bypass: m.bypass.clone(),
            plantable: m.plantable.clone(),
        }
    }
}

impl Facts<bool> {
    fn of(o: &Observed) -> Self {
        Facts {
            conn: o.conn,
            allow: o.allow,
            audit: o.audit,
            scope: o.scope(),
            credentialed: o.credentialed(),
            bypass: o.bypass,
            plantable: o.plantable,
        }
    }
}

/// The question a category asks of a request: of the new policy `n`
/// against the old one `o` (`diff --prove`), or of one policy on its own
/// (`check`, `o` is `None`). `None` when the category asks nothing there.
pub(crate) fn question<L: Logic>(
    category: Category,
    variant: Variant,
    n: &Facts<L>,
    o: Option<&Facts<L>>,
    meta: &L,
) -> Option<L> {
    let n = n.clone();
    let Some(o) = o.cloned() else {
        return match category {
            Category::L7BypassCredentialed => Some(L::all([n.bypass, n.scope])),
            Category::EnforcementDowngrade => Some(L::all([n.audit, n.scope])),
            Category::MetadataReach => Some(L::all([n.allow, meta.clone()])),
            Category::WritableBinaryIdentity => Some(L::all([n.plantable, n.allow])),
            Category::SecretExposure => Some(n.allow),
            Category::CredentialReachExpansion
            | Category::CapabilityExpansion
            | Category::ReachExpansion
            | Category::FileRightsExpansion
            | Category::EnforcementWeakened
            | Category::CredentialChanged => None,
        };
    };
    Some(match (category, variant) {
        (Category::CredentialReachExpansion, Variant::Main) => {
            L::all([n.allow, n.scope, o.conn.negate()])
        }
        (Category::CredentialReachExpansion, Variant::NewlyAttached) => {
            L::all([n.credentialed, o.allow, o.credentialed.negate()])
        }
        // Which credential is injected is asked in `within`, of formulas
        // per credential; the replay compares credential names.
        // Placeholder content is not a fact of the request questions
        // (`crate::rewrite`); the replay reads the decision's reason.
        (
            Category::CredentialReachExpansion,
            Variant::Credential(_)
            | Variant::Uninspected
            | Variant::BodyRewrite(_)
            | Variant::TextRewrite(_),
        ) => {
            return None;
        }
        (Category::CapabilityExpansion, _) => {
            L::all([o.conn, n.scope, n.allow, n.audit.negate(), o.allow.negate()])
        }
        (Category::EnforcementDowngrade, _) => L::all([o.conn, n.scope, n.audit, o.allow.negate()]),
        (Category::L7BypassCredentialed, _) => {
            L::all([n.bypass, n.scope, L::all([o.bypass, o.scope]).negate()])
        }
        (Category::MetadataReach, _) => L::all([n.allow, meta.clone(), o.allow.negate()]),
        (Category::WritableBinaryIdentity, _) => L::all([
            n.plantable,
            n.allow,
            L::all([o.plantable, o.allow]).negate(),
        ]),
        (Category::SecretExposure, _) => n.allow,
        // The credentialed categories together ask `n.allow ∧ n.scope ∧
        // ¬o.allow` (reach, a method or path, audit mode on a credentialed
        // destination); this is the rest of `n.allow ∧ ¬o.allow`, so every
        // request NEW lets through and OLD did not is in exactly one.
        (Category::ReachExpansion, Variant::Uninspected) => {
            L::all([n.bypass, n.scope.negate(), o.bypass.negate()])
        }
        (Category::ReachExpansion, _) => L::all([n.allow, n.scope.negate(), o.allow.negate()]),
        // Decided from the Landlock and process tables, not per request.
        (
            Category::FileRightsExpansion
            | Category::EnforcementWeakened
            | Category::CredentialChanged,
            _,
        ) => return None,
    })
}

/// The questions of `diff --prove`, in the order they are reported (the
/// secret-exposure question is asked apart, of the new policy alone).
const DIFF: [(Category, Variant); 8] = [
    (Category::CredentialReachExpansion, Variant::Main),
    (Category::CredentialReachExpansion, Variant::NewlyAttached),
    (Category::CapabilityExpansion, Variant::Main),
    (Category::EnforcementDowngrade, Variant::Main),
    (Category::L7BypassCredentialed, Variant::Main),
    (Category::MetadataReach, Variant::Main),
    (Category::WritableBinaryIdentity, Variant::Main),
    (Category::ReachExpansion, Variant::Main),
];

/// The questions of `check`: risks of one policy on its own.
const SINGLE: [Category; 4] = [
    Category::L7BypassCredentialed,
    Category::EnforcementDowngrade,
    Category::MetadataReach,
    Category::WritableBinaryIdentity,
];

/// The queries of `diff --prove`: what the new policy allows that the old
/// one did not.
pub(crate) fn diff(n: &Model, o: &Model, meta: &F) -> Vec<Query> {
    let (nf, of) = (Facts::<F>::of(n), Facts::<F>::of(o));
    let mut out: Vec<Query> = DIFF
        .into_iter()
        .filter_map(|(category, variant)| {
            let f = question(category, variant, &nf, Some(&of), meta)?;
            Some(Query {
                category,
                variant,
                f,
            })
        })
        .collect();
    out.extend(rewrites(n, o));
    out
}

/// Per credential of the new policy with a placeholder: a request body,
/// and a WebSocket text message, carrying it that the new policy lets
/// through with the secret in its place and the old one does not (it
/// refuses it, or sends the placeholder on as it is). Both lie inside the
/// credential's binding, since a placeholder outside it is refused
/// whatever the flags: a credential whose binding covers no request (or,
/// for messages, no upgrade) asks nothing. The old policy's credential is
/// the one of the same name: another name has another placeholder. A
/// `credential_reach_expansion`: the secret reaches the host in requests
/// that could not carry it before.
fn rewrites(n: &Model, o: &Model) -> Vec<Query> {
    let (nr, or_) = (&n.rewrites, &o.rewrites);
    let no_body = lit(crate::formula::Lit::Call(crate::formula::ids(vec![0])));
    let mut out = Vec::new();
    for (i, p) in nr.placeholders.iter().enumerate() {
        let old = or_.placeholders.iter().find(|q| q.name == p.name);
        let old_binding = |of: fn(&crate::rewrite::Placeholder) -> &F| {
            old.map_or(crate::formula::FALSE, |q| of(q).clone())
        };
        if !matches!(p.body_binding, F::Const(false)) {
            out.push(Query {
                category: Category::CredentialReachExpansion,
                variant: Variant::BodyRewrite(i),
                f: and([
                    n.allow.clone(),
                    nr.body.clone(),
                    p.body_binding.clone(),
                    no_body.clone(),
                    not(and([
                        o.allow.clone(),
                        or_.body.clone(),
                        old_binding(|q| &q.body_binding),
                    ])),
                ]),
            });
        }
        if !matches!(p.text_binding, F::Const(false)) {
            out.push(Query {
                category: Category::CredentialReachExpansion,
                variant: Variant::TextRewrite(i),
                f: and([
                    n.allow.clone(),
                    nr.text.clone(),
                    p.text_binding.clone(),
                    p.text_fits.clone(),
                    not(and([
                        o.allow.clone(),
                        or_.text.clone(),
                        old_binding(|q| &q.text_binding),
                    ])),
                ]),
            });
        }
    }
    out
}

/// The queries of containment (`diff --prove --within BOUNDARY
/// CANDIDATE`): every question of `diff` with the boundary as the old
/// policy, and per credential of the candidate, the requests it is
/// injected into where the boundary lets them through carrying another
/// secret (or a secret the workload holds) instead. The other ways a
/// credential can go where the boundary's does not are already asked:
/// the boundary refusing the request (the reach questions), or letting
/// it through with no credential at all (`NewlyAttached`).
pub(crate) fn within(
    n: &Model,
    o: &Model,
    candidate: &policy_bundle::Bundle,
    boundary: &policy_bundle::Bundle,
    meta: &F,
) -> Vec<Query> {
    let mut out = diff(n, o, meta);
    let (nf, of) = (Facts::<F>::of(n), Facts::<F>::of(o));
    if let Some(f) = question(
        Category::ReachExpansion,
        Variant::Uninspected,
        &nf,
        Some(&of),
        meta,
    ) {
        out.push(Query {
            category: Category::ReachExpansion,
            variant: Variant::Uninspected,
            f,
        });
    }
    let (n_injects, o_injects) = (n.injects(), o.injects());
    for (i, c) in candidate.enforcement.credentials.iter().enumerate() {
        let same = boundary
            .enforcement
            .credentials
            .iter()
            .zip(&o_injects)
            .filter(|(b, _)| crate::secret::same_secret(b, c))
            .map(|(_, f)| f.clone());
        let Some(injected) = n_injects.get(i) else {
            continue;
        };
        out.push(Query {
            category: Category::CredentialReachExpansion,
            variant: Variant::Credential(i),
            f: and([
                injected.clone(),
                o.allow.clone(),
                o.credentialed.clone(),
                not(crate::formula::or(same)),
            ]),
        });
    }
    out
}

/// The queries of `check`: risks of one policy on its own.
pub(crate) fn single(n: &Model, meta: &F) -> Vec<Query> {
    let n = Facts::<F>::of(n);
    SINGLE
        .into_iter()
        .filter_map(|category| {
            let f = question(category, Variant::Main, &n, None, meta)?;
            Some(Query {
                category,
                variant: Variant::Main,
                f,
            })
        })
        .collect()
}

/// The same question asked of the reference evaluator's observations of
/// one request (`old` is `None` for `check`).
pub(crate) fn holds(
    category: Category,
    variant: Variant,
    n: &Observed,
    o: Option<&Observed>,
    meta: bool,
) -> bool {
    let o = o.map(Facts::<bool>::of);
    question(category, variant, &Facts::<bool>::of(n), o.as_ref(), &meta).unwrap_or(false)
}
