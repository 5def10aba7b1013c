//! Accepted risks: findings a team has looked at and decided to live with.
//!
//! The file is OpenShell's format, `accepted_risks: [{query, reason,
//! accepted_by, binary?, endpoint?}]`, where `query` names a finding
//! category, `binary` a binary path or glob and `endpoint` a host pattern,
//! an address or CIDR, optionally with `:PORTS`. This prover also reads
//! `expires: YYYY-MM-DD` and the scope fields `hosts`, `ports`, `methods`
//! and `paths`. A finding is suppressed only when its whole region lies
//! inside the scope; an acceptance past its expiry date suppresses nothing.

use std::path::Path;

use policy_bundle::matcher::{
    AddrSet, BinaryGlob, EndpointTextError, HostPattern, HttpPathGlob, Method, PortSet,
    split_endpoint,
};
use serde::{Deserialize, Serialize};

use crate::error::ProverError;
use crate::query::Category;

#[derive(Debug, Deserialize)]
struct File {
    #[serde(default)]
    accepted_risks: Vec<Raw>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    query: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    accepted_by: String,
    #[serde(default)]
    binary: Option<String>,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    expires: Option<String>,
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    ports: Option<serde_yaml::Value>,
    #[serde(default)]
    methods: Vec<String>,
    #[serde(default)]
    paths: Vec<String>,
}

/// Where a destination scope points.
#[derive(Debug, Clone)]
pub enum DestScope {
    /// Host patterns, matched as the policy's own host patterns are.
    Hosts(Vec<HostPattern>),
    /// Addresses and CIDR ranges, for destinations named by address.
    Addrs(AddrSet),
}

/// One accepted risk: a finding whose whole region lies in its scope is
/// reported as suppressed rather than blocking, until it expires.
#[derive(Debug, Clone)]
pub struct Acceptance {
    /// The `query` as written: a category name, or an OpenShell query this
    /// prover does not report.
    pub query: String,
    /// The category `query` names; `None` suppresses nothing (and is noted in
    /// the report).
    pub category: Option<Category>,
    /// Why the risk was accepted, repeated in every report it suppresses.
    pub reason: String,
    /// Who accepted it, for the audit trail.
    pub accepted_by: String,
    /// `(year, month, day)`.
    pub expires: Option<(i32, u32, u32)>,
    /// The region's binaries must all match; `None` leaves them unconstrained.
    pub binary: Option<BinaryGlob>,
    /// The region's destinations must lie inside it.
    pub dest: Option<DestScope>,
    /// The region's ports must lie inside these.
    pub ports: Option<PortSet>,
    /// The region's HTTP methods must be among these (canonical spelling).
    pub methods: Option<Vec<String>>,
    /// The region's paths must be covered by these globs.
    pub paths: Option<Vec<HttpPathGlob>>,
}

/// Why an acceptance does or does not apply, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AcceptanceNote {
    /// The acceptance's `query`, as written.
    pub query: String,
    /// The acceptance's recorded reason.
    pub reason: String,
    /// Who accepted the risk.
    pub accepted_by: String,
    /// The expiry date when it has passed: the finding blocks again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expired: Option<String>,
    /// Why an entry of the finding's category does not suppress it: the
    /// part of the finding's region its scope leaves out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_covered: Option<String>,
}

fn err(path: &str, message: impl Into<String>) -> ProverError {
    ProverError::AcceptedRisks {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn parse_date(s: &str) -> Option<(i32, u32, u32)> {
    let mut parts = s.trim().splitn(3, '-');
    let y = parts.next()?.parse().ok()?;
    let m = parts.next()?.parse().ok()?;
    let d = parts.next()?.parse().ok()?;
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some((y, m, d))
}

/// Today's date (UTC), from the system clock.
pub(crate) fn today() -> (i32, u32, u32) {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    civil_from_days(i64::try_from(secs / 86_400).unwrap_or(0))
}

/// Howard Hinnant's days-to-civil conversion.
fn civil_from_days(z: i64) -> (i32, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        i32::try_from(y).unwrap_or(0),
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

fn parse_endpoint(path: &str, text: &str) -> Result<(DestScope, Option<PortSet>), ProverError> {
    let text = text.trim();
    // `[v6]:port`, `host:port`, `cidr:port`, or without a port.
    let parts = split_endpoint(text, false).map_err(|e| {
        err(
            path,
            match e {
                EndpointTextError::UnclosedBracket => format!("unclosed `[` in endpoint `{text}`"),
                EndpointTextError::NoPort | EndpointTextError::UnbracketedV6 => {
                    format!("endpoint `{text}`: write `host`, `host:port` or `[v6]:port`")
                }
            },
        )
    })?;
    let (dest, port) = (parts.host, parts.ports.map(|(p, _)| p));
    let ports = port
        .map(|p| PortSet::parse(p).map_err(|e| err(path, e.message)))
        .transpose()?;
    let scope = match AddrSet::parse(dest) {
        Ok(a) => DestScope::Addrs(a),
        Err(_) => DestScope::Hosts(vec![
            HostPattern::parse(dest)
                .map_err(|e| err(path, format!("endpoint `{text}`: {}", e.message)))?,
        ]),
    };
    Ok((scope, ports))
}

/// Reads an accepted-risks file (`--accept`); a file that cannot be read
/// is an error rather than no acceptances.
pub fn load(path: &Path) -> Result<Vec<Acceptance>, ProverError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ProverError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&shown, &text)
}

/// Parses accepted-risks YAML; `shown` names the file in errors.
pub fn parse(shown: &str, text: &str) -> Result<Vec<Acceptance>, ProverError> {
    let file: File = serde_yaml::from_str(text).map_err(|e| err(shown, e.to_string()))?;
    let mut out = Vec::new();
    for raw in file.accepted_risks {
        let expires = match &raw.expires {
            Some(e) => Some(parse_date(e).ok_or_else(|| {
                err(
                    shown,
                    format!("`expires: {e}` is not a date (write YYYY-MM-DD)"),
                )
            })?),
            None => None,
        };
        for (field, text) in raw
            .binary
            .iter()
            .map(|b| ("binary", b))
            .chain(raw.hosts.iter().map(|h| ("hosts", h)))
            .chain(raw.paths.iter().map(|p| ("paths", p)))
            .chain(raw.endpoint.iter().map(|e| ("endpoint", e)))
        {
            if text.contains(['{', '}']) {
                return Err(err(
                    shown,
                    format!(
                        "{field} `{text}`: `{{...}}` alternatives are not read here (the braces would be matched literally, so the entry would suppress nothing); write one accepted risk per alternative"
                    ),
                ));
            }
        }
        let binary = raw
            .binary
            .as_deref()
            .map(|b| {
                BinaryGlob::parse(b).map_err(|e| err(shown, format!("binary `{b}`: {}", e.message)))
            })
            .transpose()?;
        let (mut dest, mut ports) = match raw.endpoint.as_deref() {
            Some(e) => {
                let (d, p) = parse_endpoint(shown, e)?;
                (Some(d), p)
            }
            None => (None, None),
        };
        if !raw.hosts.is_empty() {
            let hosts = raw
                .hosts
                .iter()
                .map(|h| {
                    HostPattern::parse(h)
                        .map_err(|e| err(shown, format!("host `{h}`: {}", e.message)))
                })
                .collect::<Result<Vec<_>, _>>()?;
            dest = Some(DestScope::Hosts(hosts));
        }
        if let Some(p) = &raw.ports {
            let text = match p {
                serde_yaml::Value::Number(n) => n.to_string(),
                serde_yaml::Value::String(s) => s.clone(),
                other => return Err(err(shown, format!("`ports: {other:?}` is not a port set"))),
            };
            ports = Some(PortSet::parse(&text).map_err(|e| err(shown, e.message))?);
        }
        let methods = if raw.methods.is_empty() {
            None
        } else {
            Some(
                raw.methods
                    .iter()
                    .map(|m| {
                        Method::parse(m)
                            .map(|m| m.to_string())
                            .map_err(|e| err(shown, e.message))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            )
        };
        let paths = if raw.paths.is_empty() {
            None
        } else {
            Some(
                raw.paths
                    .iter()
                    .map(|p| {
                        HttpPathGlob::parse(p)
                            .map_err(|e| err(shown, format!("path `{p}`: {}", e.message)))
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            )
        };
        out.push(Acceptance {
            category: Category::parse(&raw.query),
            query: raw.query,
            reason: raw.reason,
            accepted_by: raw.accepted_by,
            expires,
            binary,
            dest,
            ports,
            methods,
            paths,
        });
    }
    Ok(out)
}

impl Acceptance {
    pub(crate) fn expired(&self, today: (i32, u32, u32)) -> bool {
        self.expires.is_some_and(|e| e < today)
    }

    pub(crate) fn note(&self, today: (i32, u32, u32)) -> AcceptanceNote {
        AcceptanceNote {
            query: self.query.clone(),
            reason: self.reason.clone(),
            accepted_by: self.accepted_by.clone(),
            expired: self
                .expires
                .filter(|_| self.expired(today))
                .map(|(y, m, d)| {
                    format!("expired on {y:04}-{m:02}-{d:02}; it no longer suppresses")
                }),
            not_covered: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_openshell_and_extensions() {
        let text = "accepted_risks:\n  - query: inference_relay\n    reason: demo\n    accepted_by: demo\n  - query: l7_bypass_credentialed\n    reason: git\n    accepted_by: ops\n    binary: /usr/bin/git\n    endpoint: github.com:443\n    expires: 2001-02-03\n";
        let a = parse("x", text).unwrap();
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].category, None);
        assert_eq!(a[1].category, Some(Category::L7BypassCredentialed));
        assert!(a[1].expired(today()));
        assert_eq!(a[1].ports.as_ref().unwrap().to_string(), "443");
    }

    #[test]
    fn brace_alternatives_are_refused_not_matched_literally() {
        let text =
            "accepted_risks:\n  - query: l7_bypass_credentialed\n    binary: /usr/bin/{git,curl}\n";
        let e = parse("x", text).unwrap_err().to_string();
        assert!(
            e.contains("`/usr/bin/{git,curl}`") && e.contains("one accepted risk per alternative"),
            "{e}"
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
    }
}
