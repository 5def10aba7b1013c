//! The questions asked of the solver, one per finding category, as
//! formulas over the new and old bundles' models, and the same questions
//! asked of the reference evaluator for replay.

use policy_lang::diag::{Code, codes};
use serde::Serialize;

use crate::formula::{F, and, not};
use crate::model::Model;
use crate::witness::Observed;

/// Finding categories; the names are stable (JSON, SARIF rule ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    CredentialReachExpansion,
    CapabilityExpansion,
    L7BypassCredentialed,
    EnforcementDowngrade,
    MetadataReach,
    SecretExposure,
    WritableBinaryIdentity,
}

impl Category {
    pub const ALL: [Category; 7] = [
        Category::CredentialReachExpansion,
        Category::CapabilityExpansion,
        Category::L7BypassCredentialed,
        Category::EnforcementDowngrade,
        Category::MetadataReach,
        Category::SecretExposure,
        Category::WritableBinaryIdentity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Category::CredentialReachExpansion => "credential_reach_expansion",
            Category::CapabilityExpansion => "capability_expansion",
            Category::L7BypassCredentialed => "l7_bypass_credentialed",
            Category::EnforcementDowngrade => "enforcement_downgrade",
            Category::MetadataReach => "metadata_reach",
            Category::SecretExposure => "secret_exposure",
            Category::WritableBinaryIdentity => "writable_binary_identity",
        }
    }

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
        }
    }

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
pub struct Query {
    pub category: Category,
    /// Distinguishes the two ways a credential's reach grows.
    pub variant: Variant,
    pub f: F,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Main,
    /// A credential newly attached to a request the old policy let
    /// through without it.
    NewlyAttached,
}

/// The queries of `diff --prove`: what the new policy allows that the old
/// one did not.
pub fn diff(n: &Model, o: &Model, meta: &F) -> Vec<Query> {
    let q = |category, variant, f| Query {
        category,
        variant,
        f,
    };
    vec![
        q(
            Category::CredentialReachExpansion,
            Variant::Main,
            and([n.allow.clone(), n.scope.clone(), not(o.conn.clone())]),
        ),
        q(
            Category::CredentialReachExpansion,
            Variant::NewlyAttached,
            and([
                n.credentialed.clone(),
                o.allow.clone(),
                not(o.credentialed.clone()),
            ]),
        ),
        q(
            Category::CapabilityExpansion,
            Variant::Main,
            and([
                o.conn.clone(),
                n.scope.clone(),
                n.allow.clone(),
                not(n.audit.clone()),
                not(o.allow.clone()),
            ]),
        ),
        q(
            Category::EnforcementDowngrade,
            Variant::Main,
            and([
                o.conn.clone(),
                n.scope.clone(),
                n.audit.clone(),
                not(o.allow.clone()),
            ]),
        ),
        q(
            Category::L7BypassCredentialed,
            Variant::Main,
            and([
                n.bypass.clone(),
                n.scope.clone(),
                not(and([o.bypass.clone(), o.scope.clone()])),
            ]),
        ),
        q(
            Category::MetadataReach,
            Variant::Main,
            and([n.allow.clone(), meta.clone(), not(o.allow.clone())]),
        ),
        q(
            Category::WritableBinaryIdentity,
            Variant::Main,
            and([
                n.plantable.clone(),
                n.allow.clone(),
                not(and([o.plantable.clone(), o.allow.clone()])),
            ]),
        ),
    ]
}

/// The queries of `check`: risks of one policy on its own.
pub fn single(n: &Model, meta: &F) -> Vec<Query> {
    let q = |category, f| Query {
        category,
        variant: Variant::Main,
        f,
    };
    vec![
        q(
            Category::L7BypassCredentialed,
            and([n.bypass.clone(), n.scope.clone()]),
        ),
        q(
            Category::EnforcementDowngrade,
            and([n.audit.clone(), n.scope.clone()]),
        ),
        q(
            Category::MetadataReach,
            and([n.allow.clone(), meta.clone()]),
        ),
        q(
            Category::WritableBinaryIdentity,
            and([n.plantable.clone(), n.allow.clone()]),
        ),
    ]
}

/// The same question asked of the reference evaluator's observations of
/// one request (`old` is `None` for `check`).
pub fn holds(
    category: Category,
    variant: Variant,
    n: &Observed,
    o: Option<&Observed>,
    meta: bool,
) -> bool {
    let Some(o) = o else {
        return match category {
            Category::L7BypassCredentialed => n.bypass && n.scope(),
            Category::EnforcementDowngrade => n.audit && n.scope(),
            Category::MetadataReach => n.allow && meta,
            Category::WritableBinaryIdentity => n.plantable && n.allow,
            Category::SecretExposure => n.allow,
            Category::CredentialReachExpansion | Category::CapabilityExpansion => false,
        };
    };
    match (category, variant) {
        (Category::CredentialReachExpansion, Variant::Main) => n.allow && n.scope() && !o.conn,
        (Category::CredentialReachExpansion, Variant::NewlyAttached) => {
            n.credentialed() && o.allow && !o.credentialed()
        }
        (Category::CapabilityExpansion, _) => {
            o.conn && n.scope() && n.allow && !n.audit && !o.allow
        }
        (Category::EnforcementDowngrade, _) => o.conn && n.scope() && n.audit && !o.allow,
        (Category::L7BypassCredentialed, _) => n.bypass && n.scope() && !(o.bypass && o.scope()),
        (Category::MetadataReach, _) => n.allow && meta && !o.allow,
        (Category::WritableBinaryIdentity, _) => {
            n.plantable && n.allow && !(o.plantable && o.allow)
        }
        (Category::SecretExposure, _) => n.allow,
    }
}
