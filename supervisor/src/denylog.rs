//! The deny log: one JSON line per decision worth logging (denied, audited,
//! or allowed with a note), written in one `write(2)` so lines from several
//! threads never interleave. Field names follow OCSF: Network Activity
//! (class 4001) for connections and sends, HTTP Activity (class 4002) for
//! requests the L7 proxy refused or audited, DNS Activity (class 4003) for
//! refused names, Application Lifecycle (class 6002) for bundle reloads;
//! what OCSF has no field for goes under `unmapped`.
//!
//! The last [`RECENT_DENIALS`] denials (action `Denied`: refused connects,
//! sends, names and requests) are also kept in memory, each under a
//! sequence number, exactly as written: the advisor endpoint shows them to
//! the workload and forwards the ones it cites, so what the gateway reads
//! is what the supervisor logged, never text the workload made up. A line
//! holds no secret: requests are logged by method and canonical path (no
//! header, no query string, no body), credentials by name.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::Path;
use std::sync::{Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// One connection-level decision.
#[derive(Debug, Clone, Default)]
pub struct NetEvent<'a> {
    pub denied: bool,
    /// The thread that made the call, and its process.
    pub tid: u32,
    pub pid: u32,
    pub binary: Option<&'a str>,
    /// The binary's SHA-256 (lowercase hex), when the sandbox hashed it
    /// (it does under a bundle that pins binaries): `suggest` pins a rule
    /// it writes for the binary to it.
    pub binary_sha256: Option<&'a str>,
    /// The operator named `ip` for `host` (`--resolve`): the host's rules
    /// were asked without the address.
    pub operator_named: bool,
    /// `connect`, `sendto`, `sendmsg`, `sendmmsg`.
    pub syscall: &'a str,
    /// `tcp`, `udp`, `unix`, or the address family.
    pub protocol: &'a str,
    pub host: Option<&'a str>,
    pub ip: Option<IpAddr>,
    pub port: Option<u16>,
    /// A unix socket path, or another family's description.
    pub address: Option<&'a str>,
    /// The rule that decided (`file:line (name)`), `None` for the default.
    pub rule: Option<&'a str>,
    pub reason: &'a str,
    pub note: Option<&'a str>,
}

/// One request-level decision of the L7 proxy: the connection's fields
/// plus the request's method and (canonical) path.
#[derive(Debug, Clone, Default)]
pub struct HttpEvent<'a> {
    /// `denied`: refused; otherwise forwarded (audit, or a note).
    pub net: NetEvent<'a>,
    /// Forwarded although no rule allows it (audit mode).
    pub audit: bool,
    pub method: &'a str,
    pub path: &'a str,
    /// `http` or `https`.
    pub scheme: &'a str,
    /// The machine-readable code (`policy_denied`, `credential_not_bound`,
    /// `host_mismatch`...), as in the response body.
    pub error: Option<&'a str>,
    /// On a JSON-RPC or MCP endpoint: the call the decision is about (its
    /// method, and the tool of a `tools/call`).
    pub rpc_method: Option<&'a str>,
    pub rpc_tool: Option<&'a str>,
    /// On a GraphQL endpoint: the operation the decision is about.
    pub graphql: Option<GraphqlEvent<'a>>,
}

/// A GraphQL operation as the log names it.
#[derive(Debug, Clone, Default)]
pub struct GraphqlEvent<'a> {
    /// `query`, `mutation`, `subscription`; `None` for a hash-only
    /// request, whose document the request does not show.
    pub operation_type: Option<&'a str>,
    pub operation_name: Option<&'a str>,
    /// The root fields (names, never aliases).
    pub fields: &'a [String],
    /// The persisted-query hash or saved-query id the request sent.
    pub persisted_query: Option<&'a str>,
}

/// How many denials are kept for the advisor endpoint.
pub const RECENT_DENIALS: usize = 100;

/// The denials kept, oldest first, and the number the next one gets.
#[derive(Debug, Default)]
struct Recent {
    next: u64,
    lines: VecDeque<(u64, String)>,
}

/// Where the lines go, and which policy they are about.
pub struct DenyLog {
    out: Mutex<Box<dyn Write + Send>>,
    recent: Mutex<Recent>,
    policy: RwLock<Value>,
    /// The sandbox and generation every line is about.
    sandbox: Option<Value>,
}

impl std::fmt::Debug for DenyLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenyLog")
            .field("policy", &self.policy)
            .finish()
    }
}

impl DenyLog {
    /// Appends to `path`, or writes to stderr without one.
    pub fn open(path: Option<&Path>, policy_name: &str, digest: &str) -> io::Result<Self> {
        let out: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(OpenOptions::new().create(true).append(true).open(p)?),
            None => Box::new(io::stderr()),
        };
        Ok(Self {
            out: Mutex::new(out),
            recent: Mutex::new(Recent {
                next: 1,
                lines: VecDeque::new(),
            }),
            policy: RwLock::new(json!({ "name": policy_name, "uid": digest })),
            sandbox: None,
        })
    }

    /// Every line names sandbox `id` and its `generation`
    /// (`unmapped.sandbox`): a log collected from many sandboxes, or many
    /// generations of one, says which each line is about.
    #[must_use]
    pub fn for_sandbox(mut self, id: &str, generation: u64) -> Self {
        self.sandbox = Some(json!({ "id": id, "generation": generation }));
        self
    }

    /// The policy later lines are about (after a reload).
    pub fn set_policy(&self, policy_name: &str, digest: &str) {
        *self.policy.write().unwrap_or_else(PoisonError::into_inner) =
            json!({ "name": policy_name, "uid": digest });
    }

    fn write(&self, mut event: Value) {
        if let Some(obj) = event.as_object_mut() {
            obj.insert("time".into(), json!(now_ms()));
            let policy = self
                .policy
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            obj.insert("policy".into(), policy);
            if let Some(sandbox) = &self.sandbox {
                let unmapped = obj.entry("unmapped").or_insert_with(|| json!({}));
                if let Some(unmapped) = unmapped.as_object_mut() {
                    unmapped.insert("sandbox".into(), sandbox.clone());
                }
            }
            obj.insert(
                "metadata".into(),
                json!({
                    "version": "1.3.0",
                    "product": {
                        "name": "openshell-supervisor",
                        "vendor_name": "openshell-policy",
                        "version": env!("CARGO_PKG_VERSION"),
                    },
                }),
            );
        }
        let denied = event.get("action").and_then(Value::as_str) == Some("Denied");
        let Ok(text) = serde_json::to_string(&event) else {
            return;
        };
        let mut line = text.clone().into_bytes();
        line.push(b'\n');
        if let Ok(mut out) = self.out.lock() {
            let _ = out.write_all(&line);
            let _ = out.flush();
            // Numbered while the file is held: ids follow the file's order.
            if denied {
                let mut recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
                let id = recent.next;
                recent.next += 1;
                recent.lines.push_back((id, text));
                if recent.lines.len() > RECENT_DENIALS {
                    recent.lines.pop_front();
                }
            }
        }
    }

    /// The denials kept, oldest first, with their ids.
    pub fn recent_denials(&self) -> Vec<(u64, String)> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        recent.lines.iter().cloned().collect()
    }

    /// The lines of the denials `ids`, in the order asked; `Err` with the
    /// ids that are not (or no longer) kept.
    pub fn denial_lines(&self, ids: &[u64]) -> Result<Vec<String>, Vec<u64>> {
        let recent = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found = Vec::with_capacity(ids.len());
        let mut unknown = Vec::new();
        for id in ids {
            match recent.lines.iter().find(|(i, _)| i == id) {
                Some((_, line)) => found.push(line.clone()),
                None => unknown.push(*id),
            }
        }
        if unknown.is_empty() {
            Ok(found)
        } else {
            Err(unknown)
        }
    }

    /// A connection or send decision (OCSF Network Activity).
    pub fn network(&self, e: &NetEvent<'_>) {
        self.write(network_event(e));
    }

    /// A request the L7 proxy refused or audited (OCSF HTTP Activity).
    pub fn http(&self, e: &HttpEvent<'_>) {
        let mut event = network_event(&e.net);
        let activity_id = match e.method {
            "CONNECT" => 1,
            "DELETE" => 2,
            "GET" => 3,
            "HEAD" => 4,
            "OPTIONS" => 5,
            "POST" => 6,
            "PUT" => 7,
            "TRACE" => 8,
            _ => 99,
        };
        if let Some(obj) = event.as_object_mut() {
            obj.insert("class_uid".into(), json!(4002));
            obj.insert("class_name".into(), json!("HTTP Activity"));
            obj.insert("activity_id".into(), json!(activity_id));
            obj.insert("activity_name".into(), json!(e.method));
            obj.insert("type_uid".into(), json!(4002 * 100 + activity_id));
            if e.audit {
                obj.insert("disposition_id".into(), json!(17));
                obj.insert("disposition".into(), json!("Logged"));
            }
            obj.insert(
                "http_request".into(),
                json!({
                    "http_method": e.method,
                    "url": {
                        "hostname": e.net.host,
                        "path": e.path,
                        "port": e.net.port,
                        "scheme": e.scheme,
                    },
                }),
            );
            if let Some(unmapped) = obj.get_mut("unmapped").and_then(Value::as_object_mut) {
                unmapped.insert("error".into(), json!(e.error));
                unmapped.insert("audit".into(), json!(e.audit));
                if let Some(m) = e.rpc_method {
                    unmapped.insert("rpc_method".into(), json!(m));
                }
                if let Some(t) = e.rpc_tool {
                    unmapped.insert("rpc_tool".into(), json!(t));
                }
                if let Some(g) = &e.graphql {
                    unmapped.insert("graphql_operation_type".into(), json!(g.operation_type));
                    unmapped.insert("graphql_operation_name".into(), json!(g.operation_name));
                    unmapped.insert("graphql_fields".into(), json!(g.fields));
                    if let Some(p) = g.persisted_query {
                        unmapped.insert("graphql_persisted_query".into(), json!(p));
                    }
                }
            }
        }
        self.write(event);
    }

    /// A bundle reload, applied or refused (OCSF Application Lifecycle,
    /// Update).
    pub fn reload(&self, applied: bool, path: &str, digest: Option<&str>, message: &str) {
        let (status_id, status, severity) = if applied {
            (1, "Success", 1)
        } else {
            (2, "Failure", 4)
        };
        self.write(json!({
            "class_uid": 6002,
            "class_name": "Application Lifecycle",
            "category_uid": 6,
            "category_name": "Application Activity",
            "activity_id": 3,
            "activity_name": "Update",
            "type_uid": 6002 * 100 + 3,
            "severity_id": severity,
            "status_id": status_id,
            "status": status,
            "message": message,
            "unmapped": { "bundle": path, "digest": digest },
        }));
    }
}

fn network_event(e: &NetEvent<'_>) -> Value {
    let (activity_id, activity) = if e.syscall == "connect" {
        (1, "Open")
    } else {
        (6, "Traffic")
    };
    let (action, disposition, status, severity) = if e.denied {
        ((2, "Denied"), (2, "Blocked"), (2, "Failure"), 3)
    } else {
        ((1, "Allowed"), (1, "Allowed"), (1, "Success"), 1)
    };
    let mut dst = serde_json::Map::new();
    if let Some(h) = e.host {
        dst.insert("hostname".into(), json!(h));
    }
    if let Some(ip) = e.ip {
        dst.insert("ip".into(), json!(ip.to_string()));
    }
    if let Some(p) = e.port {
        dst.insert("port".into(), json!(p));
    }
    let mut file = serde_json::Map::new();
    file.insert("path".into(), json!(e.binary));
    if let Some(sha) = e.binary_sha256 {
        file.insert(
            "hashes".into(),
            json!([{ "algorithm_id": 3, "algorithm": "SHA-256", "value": sha }]),
        );
    }
    let mut unmapped = serde_json::Map::new();
    unmapped.insert("syscall".into(), json!(e.syscall));
    unmapped.insert("address".into(), json!(e.address));
    unmapped.insert("note".into(), json!(e.note));
    if e.operator_named {
        unmapped.insert("resolved_by".into(), json!("operator"));
    }
    json!({
        "class_uid": 4001,
        "class_name": "Network Activity",
        "category_uid": 4,
        "category_name": "Network Activity",
        "activity_id": activity_id,
        "activity_name": activity,
        "type_uid": 4001 * 100 + activity_id,
        "severity_id": severity,
        "action_id": action.0,
        "action": action.1,
        "disposition_id": disposition.0,
        "disposition": disposition.1,
        "status_id": status.0,
        "status": status.1,
        "message": e.reason,
        "actor": { "process": {
            "pid": e.pid,
            "tid": e.tid,
            "file": file,
        }},
        "dst_endpoint": dst,
        "connection_info": {
            "protocol_name": e.protocol,
            "direction": "Outbound",
            "direction_id": 2,
        },
        "firewall_rule": {
            "name": e.rule.unwrap_or("default"),
            "type": if e.rule.is_some() { "policy rule" } else { "default deny" },
        },
        "unmapped": unmapped,
    })
}

impl DenyLog {
    /// A name the DNS stub refused (OCSF DNS Activity, query).
    pub fn dns_refused(&self, name: &str, qtype: &str, rcode: &str, reason: &str) {
        self.write(json!({
            "class_uid": 4003,
            "class_name": "DNS Activity",
            "category_uid": 4,
            "category_name": "Network Activity",
            "activity_id": 1,
            "activity_name": "Query",
            "type_uid": 4003 * 100 + 1,
            "severity_id": 3,
            "action_id": 2,
            "action": "Denied",
            "disposition_id": 2,
            "disposition": "Blocked",
            "status_id": 2,
            "status": "Failure",
            "message": reason,
            "query": { "hostname": name, "type": qtype },
            "rcode": rcode,
            "firewall_rule": { "name": "default", "type": "default deny" },
        }));
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denied_connect_is_one_json_line_with_ocsf_fields() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deny.log");
        let log = DenyLog::open(Some(&path), "p", "sha256:00").unwrap();
        log.network(&NetEvent {
            denied: true,
            tid: 11,
            pid: 10,
            binary: Some("/usr/bin/curl"),
            syscall: "connect",
            protocol: "tcp",
            host: Some("example.com"),
            ip: Some("93.184.216.34".parse().unwrap()),
            port: Some(443),
            reason: "no rule allows it",
            ..NetEvent::default()
        });
        log.dns_refused("evil.example", "A", "NXDomain", "no rule names it");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        let e = &lines[0];
        assert_eq!(e["class_uid"], 4001);
        assert_eq!(e["action"], "Denied");
        assert_eq!(e["actor"]["process"]["file"]["path"], "/usr/bin/curl");
        assert_eq!(e["dst_endpoint"]["hostname"], "example.com");
        assert_eq!(e["dst_endpoint"]["port"], 443);
        assert_eq!(e["firewall_rule"]["name"], "default");
        assert_eq!(e["policy"]["uid"], "sha256:00");
        assert!(e["time"].as_u64().unwrap() > 0);
        assert_eq!(lines[1]["query"]["hostname"], "evil.example");
        assert!(e["actor"]["process"]["file"].get("hashes").is_none());
    }

    #[test]
    fn the_last_denials_are_kept_numbered_as_written_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deny.log");
        let log = DenyLog::open(Some(&path), "p", "sha256:00").unwrap();
        log.reload(true, "b", Some("sha256:00"), "applied");
        for i in 0..(RECENT_DENIALS + 5) {
            log.dns_refused(&format!("n{i}.example"), "A", "NXDomain", "no rule");
        }
        let kept = log.recent_denials();
        assert_eq!(kept.len(), RECENT_DENIALS);
        assert_eq!(kept.first().unwrap().0, 6, "the oldest went first");
        let written = std::fs::read_to_string(&path).unwrap();
        let last = written.lines().last().unwrap();
        assert_eq!(kept.last().unwrap(), &(105, last.to_owned()));
        assert_eq!(log.denial_lines(&[105, 6]).unwrap().first().unwrap(), last);
        assert_eq!(log.denial_lines(&[5, 6, 106]), Err(vec![5, 106]));
    }

    #[test]
    fn a_hashed_binary_is_logged_with_its_sha256_as_ocsf_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deny.log");
        let log = DenyLog::open(Some(&path), "p", "sha256:00").unwrap();
        let sha = "ab".repeat(32);
        log.network(&NetEvent {
            denied: true,
            binary: Some("/usr/bin/wget"),
            binary_sha256: Some(&sha),
            syscall: "connect",
            protocol: "tcp",
            ..NetEvent::default()
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let e: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(
            e["actor"]["process"]["file"],
            json!({
                "path": "/usr/bin/wget",
                "hashes": [{ "algorithm_id": 3, "algorithm": "SHA-256", "value": sha }]
            })
        );
    }
}
