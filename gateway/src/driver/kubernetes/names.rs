//! Names and labels of a sandbox's objects. A sandbox id may hold
//! uppercase letters, `_` and `.`, and be 64 bytes long, none of which a
//! DNS-1123 label (every object name here) allows; and two sandboxes'
//! objects must never share a name, or one sandbox's driver would act on
//! the other's Pods.

use sha2::{Digest as _, Sha256};

use super::{GENERATION, ManifestError, PART_OF, ROLE, SANDBOX, SANDBOX_ID};

/// The longest id kept as it is: with `osp-`, a generation of 20 digits
/// and `-supervisor`, a name is then at most 63 bytes.
const PLAIN_MAX: usize = 27;
/// How much of an id is kept, made a label, before its hash.
const PREFIX_MAX: usize = 11;
/// Hex digits of the id's SHA-256 in a hashed name (56 bits).
const HASH_HEX: usize = 14;

/// The names of one generation's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The sandbox, as a label value: the id itself when it is a DNS-1123
    /// label of at most 27 bytes with no `--`; otherwise up to 11 bytes
    /// of it made one, `--` and 14 hex digits of its SHA-256. Only a
    /// hashed name holds `--`, so no two ids share one.
    pub sandbox: String,
    /// `osp-SANDBOX-G-workload`.
    pub workload_pod: String,
    /// `osp-SANDBOX-G-supervisor`.
    pub supervisor_pod: String,
    /// `osp-SANDBOX-G-bootstrap`.
    pub bootstrap_secret: String,
    /// `osp-SANDBOX-G-supervisor` (a Secret; Pods and Secrets have names
    /// of their own).
    pub supervisor_secret: String,
}

impl Names {
    /// The names of generation `generation` of sandbox `id`: any id, any
    /// generation.
    #[must_use]
    pub fn new(id: &str, generation: u64) -> Self {
        let sandbox = sandbox_name(id);
        let of = |role: &str| format!("osp-{sandbox}-{generation}-{role}");
        Self {
            workload_pod: of("workload"),
            supervisor_pod: of("supervisor"),
            bootstrap_secret: of("bootstrap"),
            supervisor_secret: of("supervisor"),
            sandbox,
        }
    }
}

fn sandbox_name(id: &str) -> String {
    if id.len() <= PLAIN_MAX && is_label(id) && !id.contains("--") {
        return id.to_owned();
    }
    let mut prefix = String::new();
    for c in id.chars() {
        if prefix.len() == PREFIX_MAX {
            break;
        }
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            prefix.push(c);
        } else if !prefix.is_empty() && !prefix.ends_with('-') {
            prefix.push('-');
        }
    }
    let prefix = prefix.trim_end_matches('-');
    let prefix = if prefix.is_empty() { "x" } else { prefix };
    let hash: String = Sha256::digest(id.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let hash = hash.get(..HASH_HEX).unwrap_or(&hash);
    format!("{prefix}--{hash}")
}

/// Whether `s` is a DNS-1123 label: what the API takes as a namespace's,
/// a Pod's or a Secret's name here.
pub(super) fn is_label(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || c == '-')
}

/// Whether `s` is a DNS-1123 subdomain: dot-separated labels, at most 253
/// bytes (a PersistentVolumeClaim's name).
pub(super) fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

pub(super) fn check_label(what: &'static str, value: &str) -> Result<(), ManifestError> {
    if is_label(value) {
        Ok(())
    } else {
        Err(ManifestError::NotALabel {
            what,
            value: value.to_owned(),
        })
    }
}

/// A label's name or value: at most 63 bytes of letters, digits, `-`,
/// `_` and `.`, starting and ending with a letter or digit.
fn is_label_name(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// A label given with the spec: well formed, and none the driver's own
/// (the fence selects Pods by them).
pub(super) fn check_extra_label(key: &str, value: &str) -> Result<(), ManifestError> {
    let refuse = |why| {
        Err(ManifestError::Label {
            key: key.to_owned(),
            value: value.to_owned(),
            why,
        })
    };
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if !prefix.is_none_or(is_subdomain) || !is_label_name(name) {
        return refuse("not a label key");
    }
    if !value.is_empty() && !is_label_name(value) {
        return refuse("not a label value");
    }
    let own = [PART_OF, ROLE, SANDBOX, GENERATION, SANDBOX_ID];
    if own.contains(&key) || prefix.is_some_and(|p| p == "openshell.dev") {
        return refuse("the driver sets it");
    }
    Ok(())
}
