//! The binary capability registry: what a program can do on the network,
//! in OpenShell's format (`binary`, `protocols[].bypasses_l7`,
//! `can_exfiltrate`, `can_construct_http`). Defaults are embedded (copied
//! from OpenShell, Apache-2.0); `--registry FILE|DIR` adds or overrides
//! entries.
//!
//! A binary the registry does not know is assumed able to construct any
//! HTTP request and to exfiltrate; it is not assumed to bypass inspection,
//! because on an inspected route the proxy refuses what it cannot parse.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::ProverError;

const EMBEDDED: &[(&str, &str)] = &[
    (
        "claude.yaml",
        include_str!("../registry/binaries/claude.yaml"),
    ),
    ("curl.yaml", include_str!("../registry/binaries/curl.yaml")),
    ("gh.yaml", include_str!("../registry/binaries/gh.yaml")),
    ("git.yaml", include_str!("../registry/binaries/git.yaml")),
    ("nc.yaml", include_str!("../registry/binaries/nc.yaml")),
    ("node.yaml", include_str!("../registry/binaries/node.yaml")),
    (
        "python3.yaml",
        include_str!("../registry/binaries/python3.yaml"),
    ),
    ("ssh.yaml", include_str!("../registry/binaries/ssh.yaml")),
    ("wget.yaml", include_str!("../registry/binaries/wget.yaml")),
];

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

/// What the registry says about one executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub description: String,
    pub can_construct_http: bool,
    /// The first protocol the L7 proxy cannot inspect, if any.
    pub bypass_protocol: Option<String>,
    pub can_exfiltrate: bool,
}

impl Facts {
    /// What is assumed about a binary the registry does not know.
    pub fn unknown() -> Facts {
        Facts {
            description: String::new(),
            can_construct_http: true,
            bypass_protocol: None,
            can_exfiltrate: true,
        }
    }

    pub fn bypasses_l7(&self) -> bool {
        self.bypass_protocol.is_some()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub binaries: BTreeMap<String, Facts>,
}

impl Registry {
    /// The embedded defaults.
    pub fn embedded() -> Registry {
        let mut r = Registry::default();
        for (name, text) in EMBEDDED {
            // The embedded files are tested to parse.
            let _ = r.add_text(name, text);
        }
        r
    }

    /// Adds a user file, or every `.yaml`/`.yml` file of a directory.
    pub fn add_path(&mut self, path: &Path) -> Result<(), ProverError> {
        let read = |p: &Path| {
            std::fs::read_to_string(p).map_err(|source| ProverError::Read {
                path: p.display().to_string(),
                source,
            })
        };
        if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .map_err(|source| ProverError::Read {
                    path: path.display().to_string(),
                    source,
                })?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.is_dir()
                        || matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
                })
                .collect();
            files.sort();
            for f in files {
                if f.is_dir() {
                    // OpenShell keeps binaries under `binaries/`; `apis/`
                    // holds token scopes, which this prover does not use.
                    if f.file_name().is_some_and(|n| n == "binaries") {
                        self.add_path(&f)?;
                    }
                    continue;
                }
                self.add_text(&f.display().to_string(), &read(&f)?)?;
            }
            return Ok(());
        }
        self.add_text(&path.display().to_string(), &read(path)?)
    }

    pub fn add_text(&mut self, name: &str, text: &str) -> Result<(), ProverError> {
        let shape: FileShape = serde_yaml::from_str(text).map_err(|e| ProverError::Registry {
            path: name.to_owned(),
            message: e.to_string(),
        })?;
        let entries = match shape {
            FileShape::List { binaries } => binaries,
            FileShape::One(e) => vec![e],
        };
        for e in entries {
            if !e.binary.starts_with('/') {
                return Err(ProverError::Registry {
                    path: name.to_owned(),
                    message: format!("`binary: {}` is not an absolute path", e.binary),
                });
            }
            let bypass = e
                .protocols
                .iter()
                .find(|p| p.bypasses_l7)
                .map(|p| p.name.clone());
            self.binaries.insert(
                e.binary,
                Facts {
                    description: e.description,
                    can_construct_http: e.can_construct_http,
                    bypass_protocol: bypass,
                    can_exfiltrate: e.can_exfiltrate,
                },
            );
        }
        Ok(())
    }

    pub fn facts(&self, binary: &str) -> Facts {
        self.binaries
            .get(binary)
            .cloned()
            .unwrap_or_else(Facts::unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_entries_parse() {
        let r = Registry::embedded();
        assert_eq!(r.binaries.len(), EMBEDDED.len());
        let git = r.facts("/usr/bin/git");
        assert_eq!(git.bypass_protocol.as_deref(), Some("git-smart-http"));
        assert!(!git.can_construct_http);
        assert!(r.facts("/usr/bin/curl").can_construct_http);
        assert_eq!(r.facts("/opt/unknown"), Facts::unknown());
    }
}
