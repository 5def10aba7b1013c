//! The admitted Pod compared with the one sent. Admission (mutating
//! webhooks, defaulting, quotas) may change a Pod between the request and
//! the object stored; what it changed that bears on confinement (a
//! sidecar, a capability, an environment variable, a host path, a probe
//! or hook that runs outside the sandbox, another runtime class, a DNS
//! server) stops the start, before anything of the Pod has run.
//!
//! Every field must be as sent, except the few the API server fills in
//! that change nothing of what the Pod may do ([`DEFAULTED_POD`],
//! [`DEFAULTED_CONTAINER`]): a field admission adds that this list does
//! not know is a refusal, not a pass.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value};

use super::SCHEDULING_GATE;

/// Pod spec fields the API server sets when left out, and that bear on
/// where a Pod runs or when it is evicted, not on what it may do.
const DEFAULTED_POD: &[&str] = &[
    "schedulerName",
    "serviceAccountName",
    "serviceAccount",
    "tolerations",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "affinity",
    "nodeSelector",
    "topologySpreadConstraints",
    "overhead",
];

/// Container fields the API server sets when left out, or a LimitRange
/// fills: what is pulled when, where the termination message goes, how
/// much it may use.
const DEFAULTED_CONTAINER: &[&str] = &[
    "imagePullPolicy",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "resources",
    "resizePolicy",
];

/// The DNS policy the API server sets when none is given: the Pod's
/// resolver is the cluster's. Any other (`Default`, `None` with servers
/// of admission's choosing) is a change.
const DEFAULT_DNS_POLICY: &str = "ClusterFirst";

/// Annotations that weaken a container's confinement on runtimes that
/// still read them, whatever the Pod's fields say.
const CONFINEMENT_ANNOTATIONS: &[&str] = &[
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/",
    "container.seccomp.security.alpha.kubernetes.io/",
];

/// Compares the Pod admitted with the Pod `sent`; its uid when they
/// agree on everything that bears on confinement and it is still gated.
///
/// # Errors
/// What admission changed, in a sentence naming the field.
pub fn admitted(sent: &Pod, admitted: &Pod) -> Result<String, String> {
    let name = sent.metadata.name.clone().unwrap_or_default();
    let refuse = |what: String| {
        Err(format!(
            "admission changed Pod `{name}`: {what}; the sandbox is not started on a weaker posture than asked for"
        ))
    };
    let uid = match &admitted.metadata.uid {
        Some(uid) if !uid.is_empty() => uid.clone(),
        _ => return refuse("it has no uid".into()),
    };
    if admitted.metadata.name != sent.metadata.name
        || admitted.metadata.namespace != sent.metadata.namespace
    {
        return refuse("its name or namespace".into());
    }
    for (key, value) in sent.metadata.labels.iter().flatten() {
        let got = admitted.metadata.labels.as_ref().and_then(|l| l.get(key));
        if got != Some(value) {
            return refuse(format!("its label `{key}`"));
        }
    }
    if admitted.metadata.owner_references != sent.metadata.owner_references {
        return refuse("its owner references".into());
    }
    if let Some(key) = admitted
        .metadata
        .annotations
        .iter()
        .flatten()
        .map(|(k, _)| k)
        .find(|k| CONFINEMENT_ANNOTATIONS.iter().any(|p| k.starts_with(p)))
    {
        return refuse(format!("the annotation `{key}` was added"));
    }
    let gated = admitted
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| gates.iter().any(|g| g.name == SCHEDULING_GATE));
    if !gated {
        return refuse(format!("the scheduling gate `{SCHEDULING_GATE}` is gone"));
    }
    let (Ok(sent_spec), Ok(got_spec)) = (
        serde_json::to_value(&sent.spec),
        serde_json::to_value(&admitted.spec),
    ) else {
        return refuse("its spec cannot be read".into());
    };
    match spec_difference(&sent_spec, &got_spec) {
        Some(what) => refuse(what),
        None => Ok(uid),
    }
}

/// The first field of the admitted spec that differs from the sent one,
/// beyond what the API server defaults.
fn spec_difference(sent: &Value, got: &Value) -> Option<String> {
    let empty = Map::new();
    let sent = sent.as_object().unwrap_or(&empty);
    let got = got.as_object().unwrap_or(&empty);
    if let Some(policy) = got.get("dnsPolicy")
        && sent.get("dnsPolicy").unwrap_or(&Value::Null) != policy
        && policy != DEFAULT_DNS_POLICY
    {
        return Some(format!("`spec.dnsPolicy` is {policy}"));
    }
    let skip = |k: &str| DEFAULTED_POD.contains(&k) || k == "dnsPolicy";
    for key in keys(sent, got).filter(|k| !skip(k)) {
        let (a, b) = (sent.get(key), got.get(key));
        let differs = match key {
            "containers" | "initContainers" => {
                containers_difference(a, b).map(|what| format!("`spec.{key}`: {what}"))
            }
            _ => (a != b).then(|| format!("`spec.{key}` is {}", shown(b))),
        };
        if differs.is_some() {
            return differs;
        }
    }
    None
}

fn containers_difference(sent: Option<&Value>, got: Option<&Value>) -> Option<String> {
    let list = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
    let (sent, got) = (list(sent), list(got));
    let names = |l: &[Value]| {
        l.iter()
            .map(|c| {
                c.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            })
            .collect::<Vec<_>>()
    };
    if names(&sent) != names(&got) {
        return Some(format!(
            "the containers are {:?}, not {:?}",
            names(&got),
            names(&sent)
        ));
    }
    let empty = Map::new();
    for (a, b) in sent.iter().zip(&got) {
        let (a, b) = (
            a.as_object().unwrap_or(&empty),
            b.as_object().unwrap_or(&empty),
        );
        for key in keys(a, b).filter(|k| !DEFAULTED_CONTAINER.contains(k)) {
            if a.get(key) != b.get(key) {
                let name = b.get("name").and_then(Value::as_str).unwrap_or("");
                return Some(format!(
                    "container `{name}`'s `{key}` is {}",
                    shown(b.get(key))
                ));
            }
        }
    }
    None
}

/// Every key of either object, each once.
fn keys<'a>(a: &'a Map<String, Value>, b: &'a Map<String, Value>) -> impl Iterator<Item = &'a str> {
    let mut all: Vec<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    all.sort_unstable();
    all.dedup();
    all.into_iter()
}

fn shown(v: Option<&Value>) -> String {
    match v {
        None => "missing".into(),
        Some(v) => {
            let text = v.to_string();
            if text.len() > 160 {
                format!("{}…", text.chars().take(160).collect::<String>())
            } else {
                text
            }
        }
    }
}
