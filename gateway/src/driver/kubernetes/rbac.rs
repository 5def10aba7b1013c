//! What the gateway's service account may do in the sandboxes'
//! namespace: exactly the driver's requests, nothing cluster-wide.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::names::check_label;
use super::{ManifestError, OPENSHELL, PART_OF};

/// The Role's and the RoleBinding's name.
pub const DRIVER_ROLE: &str = "openshell-gateway-driver";

/// The Role the driver needs in `namespace`, and its binding to the
/// service account `account` of namespace `account_namespace` (the
/// gateway's). Pods: made, read while starting, listed by label, gates
/// lifted, deleted. Secrets: made, listed by label for recovery, deleted;
/// never read one by one or changed (they are immutable). The fence: read
/// and made once.
///
/// # Errors
/// A namespace or the account is not a DNS-1123 label.
pub fn driver_role(
    namespace: &str,
    account_namespace: &str,
    account: &str,
) -> Result<(Role, RoleBinding), ManifestError> {
    check_label("the namespace", namespace)?;
    check_label("the gateway's namespace", account_namespace)?;
    check_label("the gateway's service account", account)?;
    let meta = || ObjectMeta {
        name: Some(DRIVER_ROLE.into()),
        namespace: Some(namespace.into()),
        labels: Some(BTreeMap::from([(PART_OF.into(), OPENSHELL.into())])),
        ..ObjectMeta::default()
    };
    let rule = |group: &str, resource: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    };
    let role = Role {
        metadata: meta(),
        rules: Some(vec![
            rule("", "pods", &["create", "get", "list", "patch", "delete"]),
            rule("", "secrets", &["create", "list", "delete"]),
            rule("networking.k8s.io", "networkpolicies", &["get", "create"]),
        ]),
    };
    let binding = RoleBinding {
        metadata: meta(),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: DRIVER_ROLE.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(account_namespace.into()),
            api_group: None,
        }]),
    };
    Ok((role, binding))
}
