//! When two credentials are the same credential to the prover.

use policy_bundle::CredentialBinding;

/// Whether two credentials send the same secret the same way (with the
/// same placeholder), whatever their names.
pub(crate) fn same_secret(a: &CredentialBinding, b: &CredentialBinding) -> bool {
    a.source == b.source && a.inject == b.inject && a.placeholder == b.placeholder
}
