//! Reading the compiled bundle. Its kernel tables go to
//! `openshell-sandbox` in the launch plan (`sandbox::plan`), which turns
//! them into what the enforcer applies; nothing adds or drops a rule
//! silently.

use std::path::Path;

use policy_bundle::Bundle;

use crate::error::LaunchError;

/// Reads and verifies a bundle: format version and digest.
pub fn load_bundle(path: &Path) -> Result<Bundle, LaunchError> {
    let bytes = std::fs::read(path).map_err(|source| LaunchError::BundleUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    Bundle::from_slice(&bytes).map_err(|source| LaunchError::BundleRefused {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use enforcer::TrappedCall;

    #[test]
    fn the_broker_answers_exactly_the_calls_the_compiler_traps() {
        let trapped: std::collections::BTreeSet<String> = policy_bundle::kernel::notify_list()
            .into_iter()
            .map(|t| t.syscall)
            .collect();
        let answered = TrappedCall::ALL.map(|c| c.name().to_owned());
        assert_eq!(trapped, answered.into_iter().collect());
    }
}
