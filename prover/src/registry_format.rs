//! The registry's file format, shared by the library (user files, read at
//! run time) and the build script (the embedded defaults, read once at
//! build time so that a run does not parse nine YAML files).

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
struct Protocol {
    name: String,
    #[serde(default)]
    bypasses_l7: bool,
}

#[derive(Debug, Clone, Deserialize)]
struct Entry {
    binary: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    protocols: Vec<Protocol>,
    #[serde(default = "yes")]
    can_exfiltrate: bool,
    #[serde(default = "yes")]
    can_construct_http: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FileShape {
    List { binaries: Vec<Entry> },
    One(Entry),
}

/// One entry as the prover uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) binary: String,
    pub(crate) description: String,
    pub(crate) can_construct_http: bool,
    /// The first protocol the L7 proxy cannot inspect, if any.
    pub(crate) bypass_protocol: Option<String>,
    pub(crate) can_exfiltrate: bool,
}

/// The entries of one registry file, in file order; the message says why
/// the file is refused.
pub(crate) fn parse(text: &str) -> Result<Vec<Parsed>, String> {
    let shape: FileShape = serde_yaml::from_str(text).map_err(|e| e.to_string())?;
    let entries = match shape {
        FileShape::List { binaries } => binaries,
        FileShape::One(e) => vec![e],
    };
    entries
        .into_iter()
        .map(|e| {
            if !e.binary.starts_with('/') {
                return Err(format!("`binary: {}` is not an absolute path", e.binary));
            }
            let bypass_protocol = e
                .protocols
                .iter()
                .find(|p| p.bypasses_l7)
                .map(|p| p.name.clone());
            Ok(Parsed {
                binary: e.binary,
                description: e.description,
                can_construct_http: e.can_construct_http,
                bypass_protocol,
                can_exfiltrate: e.can_exfiltrate,
            })
        })
        .collect()
}
