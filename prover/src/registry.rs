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

use crate::error::ProverError;
use crate::registry_format;

/// An embedded entry, as the build script writes it.
struct Builtin {
    binary: &'static str,
    description: &'static str,
    can_construct_http: bool,
    bypass_protocol: Option<&'static str>,
    can_exfiltrate: bool,
}

// The embedded defaults, read from `registry/binaries/` by `build.rs`.
include!(concat!(env!("OUT_DIR"), "/embedded_registry.rs"));

/// What the registry says about one executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Facts {
    pub(crate) description: String,
    pub(crate) can_construct_http: bool,
    /// The first protocol the L7 proxy cannot inspect, if any.
    pub(crate) bypass_protocol: Option<String>,
    pub(crate) can_exfiltrate: bool,
}

impl Facts {
    /// What is assumed about a binary the registry does not know.
    pub(crate) fn unknown() -> Facts {
        Facts {
            description: String::new(),
            can_construct_http: true,
            bypass_protocol: None,
            can_exfiltrate: true,
        }
    }

    pub(crate) fn bypasses_l7(&self) -> bool {
        self.bypass_protocol.is_some()
    }
}

/// What the prover knows about binaries: the embedded table, plus files
/// (`--registry`) that override it per binary.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    pub(crate) binaries: BTreeMap<String, Facts>,
}

impl Registry {
    /// The embedded defaults.
    pub fn embedded() -> Registry {
        let binaries = EMBEDDED
            .iter()
            .map(|b| {
                (
                    b.binary.to_owned(),
                    Facts {
                        description: b.description.to_owned(),
                        can_construct_http: b.can_construct_http,
                        bypass_protocol: b.bypass_protocol.map(str::to_owned),
                        can_exfiltrate: b.can_exfiltrate,
                    },
                )
            })
            .collect();
        Registry { binaries }
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

    pub(crate) fn add_text(&mut self, name: &str, text: &str) -> Result<(), ProverError> {
        let entries = registry_format::parse(text).map_err(|message| ProverError::Registry {
            path: name.to_owned(),
            message,
        })?;
        for e in entries {
            self.binaries.insert(
                e.binary,
                Facts {
                    description: e.description,
                    can_construct_http: e.can_construct_http,
                    bypass_protocol: e.bypass_protocol,
                    can_exfiltrate: e.can_exfiltrate,
                },
            );
        }
        Ok(())
    }

    pub(crate) fn facts(&self, binary: &str) -> Facts {
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

    #[test]
    fn the_built_table_is_what_the_files_say() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("registry/binaries");
        let mut files = 0;
        let mut parsed = Registry::default();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|e| e == "yaml") {
                files += 1;
            }
        }
        parsed.add_path(&dir).unwrap();
        assert_eq!(files, 9);
        assert_eq!(parsed.binaries, Registry::embedded().binaries);
    }
}
