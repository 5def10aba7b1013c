//! The policy in force, and how it is swapped at run time.
//!
//! What a running sandbox can change is the network part of its bundle:
//! routes, L7 endpoints, DNS names and credentials. The Landlock ruleset and
//! the seccomp filter were applied by the workload itself before its `exec`
//! and cannot be loosened or tightened from outside, so a reload replaces
//! [`Active`] (evaluator, DNS names, credentials) and nothing else; see
//! [`crate::reload`].
//!
//! Readers take a snapshot ([`Swap::current`]) and decide with it: a
//! decision is always made on one bundle, never half of each. The DNS
//! stub's names live in a cell of their own: they are needed before the
//! workload's `exec`, while the decision indexes are built after it.

use std::sync::{Arc, PoisonError, RwLock};

use policy_bundle::Bundle;
use policy_bundle::eval::Evaluator;

use crate::broker::aliases::Aliases;
use crate::credentials::{CredentialSet, Placeholders};

/// One bundle, ready to decide.
#[derive(Debug)]
pub struct Active {
    pub eval: Evaluator,
    /// The secrets this bundle's credentials name, read by the supervisor.
    pub credentials: CredentialSet,
    /// Some identity pins a SHA-256: the broker hashes binaries.
    pub pins: bool,
    /// 0 for the bundle the sandbox started with, +1 per reload.
    pub generation: u64,
    /// Link targets of the binaries named through a symbolic link.
    pub aliases: Aliases,
}

/// Whether some identity of `bundle` pins a SHA-256, so that deciding
/// needs each caller's hash.
#[must_use]
pub fn pins(bundle: &Bundle) -> bool {
    bundle
        .enforcement
        .seccomp
        .identities
        .iter()
        .any(|i| i.binary.sha256.is_some())
}

impl Active {
    /// Builds the indexes and reads the credentials' secrets.
    #[must_use]
    pub fn new(bundle: Bundle, placeholders: &Placeholders, generation: u64) -> Self {
        let pins = pins(&bundle);
        let credentials = CredentialSet::load(&bundle, placeholders);
        Self {
            eval: Evaluator::new(bundle),
            credentials,
            pins,
            generation,
            aliases: Aliases::default(),
        }
    }

    /// The same, with the link targets of its binaries as the workload's
    /// filesystem shows them.
    #[must_use]
    pub fn with_aliases(mut self, aliases: Aliases) -> Self {
        self.aliases = aliases;
        self
    }

    #[must_use]
    pub fn bundle(&self) -> &Bundle {
        self.eval.bundle()
    }
}

/// The policy in force, shared by the broker and the proxy.
pub type Policy = Swap<Active>;

/// A value readers snapshot and a reload replaces whole.
#[derive(Debug)]
pub struct Swap<T> {
    current: RwLock<Arc<T>>,
}

impl<T> Swap<T> {
    #[must_use]
    pub fn new(value: T) -> Self {
        Self {
            current: RwLock::new(Arc::new(value)),
        }
    }

    /// A snapshot: everything decided with it comes from one bundle.
    #[must_use]
    pub fn current(&self) -> Arc<T> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Puts `value` in force; returns the one it replaced.
    pub fn replace(&self, value: T) -> Arc<T> {
        let mut slot = self.current.write().unwrap_or_else(PoisonError::into_inner);
        std::mem::replace(&mut *slot, Arc::new(value))
    }
}
