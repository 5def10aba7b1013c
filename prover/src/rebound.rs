//! Credentials whose secret, injection or placeholder changed. The
//! request questions ask whether a request carries *a* credential, not
//! which secret it carries or where the proxy puts it: a change from
//! `secret env SVC_TOKEN` to `secret file /root/.ssh/id_rsa`, or from
//! `inject replace` to a header the server echoes back, reaches exactly
//! the requests it reached before, and would read as "adds nothing". So
//! the binding itself is compared, as a table, like the sandbox.
//!
//! A credential is matched by name. One whose name the old policy does
//! not have counts as unchanged only when an old credential sends the
//! same secret the same way (a rename); otherwise it is a new secret going
//! out, and renaming a credential cannot hide a swapped secret.

use policy_bundle::{Bundle, CredentialBinding, Injection, SecretSource};
use serde::Serialize;

use crate::finding::Loc;
use crate::query::Category;

/// What a credential sends and how, in the policy's words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    /// `env NAME` or `file PATH`.
    pub secret: String,
    /// `replace`, or `header NAME "TEMPLATE"`.
    pub inject: String,
    /// The environment variable holding the placeholder, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placeholder: Option<String>,
}

impl Binding {
    fn of(c: &CredentialBinding) -> Binding {
        Binding {
            secret: source_text(&c.source),
            inject: inject_text(&c.inject),
            placeholder: c.placeholder.clone(),
        }
    }
}

/// One credential that sends another secret, or puts it elsewhere, than
/// the old policy's did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredentialChange {
    /// Always `credential_changed`.
    pub category: Category,
    /// The diagnostic code of the category.
    pub code: &'static str,
    /// The credential's name in the new policy.
    pub credential: String,
    /// Which parts changed: `secret`, `inject`, `placeholder`; `new` for a
    /// credential the old policy did not have.
    pub changed: Vec<&'static str>,
    /// The old policy's binding of the same name; absent for `new`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<Binding>,
    /// The new policy's binding.
    pub after: Binding,
    /// Where the new policy defines the credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<Loc>,
    /// One sentence for people.
    pub message: String,
}

/// `env NAME` / `file PATH`, as the policy writes a secret source.
#[must_use]
pub fn source_text(s: &SecretSource) -> String {
    match s {
        SecretSource::Env(v) => format!("env {v}"),
        SecretSource::File(f) => format!("file {f}"),
    }
}

/// `replace`, or `header NAME "TEMPLATE"`, as the policy writes an injection.
pub(crate) fn inject_text(i: &Injection) -> String {
    match i {
        Injection::Replace => "replace".to_owned(),
        Injection::Header { name, template } => format!("header {name} {template:?}"),
    }
}

/// Every credential of `new` that sends another secret, another way, or
/// with another placeholder than `old`'s, in `new`'s order.
#[must_use]
pub(crate) fn compare(old: &Bundle, new: &Bundle) -> Vec<CredentialChange> {
    let olds = &old.enforcement.credentials;
    let mut out = Vec::new();
    for (i, n) in new.enforcement.credentials.iter().enumerate() {
        let rule = new.provenance.credentials.get(i).map(Loc::of);
        let after = Binding::of(n);
        let change = match olds.iter().find(|o| o.name == n.name) {
            Some(o) if crate::secret::same_secret(o, n) => continue,
            Some(o) => {
                let before = Binding::of(o);
                let changed: Vec<&'static str> = [
                    (o.source != n.source, "secret"),
                    (o.inject != n.inject, "inject"),
                    (o.placeholder != n.placeholder, "placeholder"),
                ]
                .into_iter()
                .filter_map(|(differs, part)| differs.then_some(part))
                .collect();
                let message = changed_message(&n.name, &changed, &before, &after);
                (changed, Some(before), message)
            }
            None if olds.iter().any(|o| crate::secret::same_secret(o, n)) => continue,
            None => (
                vec!["new"],
                None,
                format!(
                    "credential `{}` is new: the proxy now sends secret `{}` ({})",
                    n.name,
                    after.secret,
                    how(&after.inject)
                ),
            ),
        };
        let (changed, before, message) = change;
        out.push(CredentialChange {
            category: Category::CredentialChanged,
            code: Category::CredentialChanged.code().id,
            credential: n.name.clone(),
            changed,
            before,
            after,
            rule,
            message,
        });
    }
    out
}

fn how(inject: &str) -> String {
    if inject == "replace" {
        "in place of its placeholder".to_owned()
    } else {
        format!("as `{inject}`")
    }
}

fn changed_message(name: &str, changed: &[&str], before: &Binding, after: &Binding) -> String {
    let shown = |p: &Option<String>| {
        p.as_deref()
            .map_or("none".to_owned(), |v| format!("`env {v}`"))
    };
    let parts: Vec<String> = changed
        .iter()
        .map(|part| match *part {
            "secret" => format!(
                "sends secret `{}` instead of `{}`",
                after.secret, before.secret
            ),
            "inject" => format!(
                "puts its secret into requests {} instead of {}",
                how(&after.inject),
                how(&before.inject)
            ),
            _ => format!(
                "takes placeholder {} instead of {}",
                shown(&after.placeholder),
                shown(&before.placeholder)
            ),
        })
        .collect();
    format!(
        "credential `{name}` now {}, to the same requests",
        parts.join(", and ")
    )
}
