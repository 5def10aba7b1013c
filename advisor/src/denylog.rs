//! Reading the supervisor's deny log: one OCSF JSON object per line, as
//! `supervisor/src/denylog.rs` writes them.
//!
//! A line is one of: a denial this reader can describe (a refused
//! connection or send, OCSF Network Activity 4001, or a request the L7
//! proxy refused, HTTP Activity 4002), another event the log holds
//! (an allowed or audited decision, a refused DNS name, a bundle reload),
//! or a line that cannot be read. Nothing here panics on any input: the
//! `deny_log` fuzz target feeds it arbitrary bytes.

use std::net::IpAddr;

use serde_json::Value;

/// One refused connection or request, with what the log says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The executable, as `/proc/<pid>/exe` showed it.
    pub binary: String,
    /// The executable's SHA-256 (lowercase hex), when the log carries one
    /// (OCSF `actor.process.file.hashes`).
    pub sha256: Option<String>,
    /// The destination host name, when the connection had one.
    pub host: Option<String>,
    /// The destination address.
    pub ip: Option<IpAddr>,
    /// The destination port.
    pub port: u16,
    /// `tcp`, `udp`, ...
    pub protocol: String,
    /// The request, for a denial of the L7 proxy.
    pub http: Option<HttpDenial>,
    /// The rule the log blames (`file:line (binaries)`), `None` for the
    /// default deny.
    pub rule: Option<String>,
    /// Why, in the log's words.
    pub reason: String,
    /// The policy the supervisor enforced: its name and bundle digest.
    pub policy: Option<String>,
    /// The bundle digest (`sha256:<hex>`).
    pub digest: Option<String>,
    /// The program that wrote the line (OCSF `metadata.product.name`),
    /// to say whose line it is when it cannot be used.
    pub product: Option<String>,
    /// Written by OpenShell's own supervisor, whose lines name no policy
    /// (see [`OPENSHELL_PRODUCT`]).
    pub openshell: bool,
    /// The operator named the address for the host (`--resolve`;
    /// `unmapped.resolved_by: "operator"`): the supervisor asked the
    /// host's rules without the address.
    pub operator_named: bool,
}

/// `metadata.product.name` of OpenShell's sandbox supervisor
/// (`openshell-ocsf`, `Product::openshell_sandbox`). Its lines put the
/// binary's path in `actor.process.name` and the host in
/// `dst_endpoint.domain` (an address there too, for a bare connection),
/// and name neither policy nor bundle: `firewall_rule.name` is the
/// matched `network_policies` key, or `-`.
pub const OPENSHELL_PRODUCT: &str = "OpenShell Sandbox Supervisor";

/// The request part of an L7 denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpDenial {
    /// The method, as sent.
    pub method: String,
    /// The request target: the path, and the query when the log kept it.
    pub target: String,
    /// `http` or `https`.
    pub scheme: String,
    /// The machine-readable code (`policy_denied`, ...), when present.
    pub error: Option<String>,
    /// A JSON-RPC or GraphQL request was judged by its body: the log's
    /// words for what it carried (`rpc tools/call`, `graphql mutation`).
    pub body: Option<String>,
}

/// What one line of the log holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A refused connection or request.
    Denial(Box<Denial>),
    /// Another event: an allowed or audited decision, a DNS refusal, a
    /// reload. Named by what it is, for the summary.
    Other(&'static str),
    /// An empty line.
    Blank,
}

/// Why a line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// Not JSON at all, or cut off.
    #[error("not a JSON object ({0}); a truncated line or another file")]
    NotJson(String),
    /// JSON, but not an OCSF event the supervisor writes.
    #[error("not a deny-log event: {0}")]
    Foreign(String),
    /// A field the event needs is missing or has the wrong type.
    #[error("`{field}` {problem}")]
    Field {
        /// The field's OCSF path.
        field: &'static str,
        /// What is wrong with it.
        problem: String,
    },
}

fn field_err(field: &'static str, problem: impl Into<String>) -> LineError {
    LineError::Field {
        field,
        problem: problem.into(),
    }
}

/// Reads one line of the log.
pub fn read_line(line: &str) -> Result<Entry, LineError> {
    let text = line.trim();
    if text.is_empty() {
        return Ok(Entry::Blank);
    }
    let value: Value = serde_json::from_str(text).map_err(|e| LineError::NotJson(e.to_string()))?;
    let Some(obj) = value.as_object() else {
        return Err(LineError::NotJson(
            "a JSON value that is not an object".into(),
        ));
    };
    let class = obj
        .get("class_uid")
        .and_then(Value::as_u64)
        .ok_or_else(|| LineError::Foreign("no numeric `class_uid`".into()))?;
    match class {
        4001 | 4002 => {}
        4003 => return Ok(Entry::Other("DNS refusal")),
        6002 => return Ok(Entry::Other("bundle reload")),
        other => return Err(LineError::Foreign(format!("OCSF class {other}"))),
    }
    let action = obj.get("action_id").and_then(Value::as_u64);
    if action != Some(2) {
        return Ok(Entry::Other(if action == Some(1) {
            "allowed or audited decision"
        } else {
            "event without a denial"
        }));
    }
    let product = str_at(&value, &["metadata", "product", "name"]).map(str::to_owned);
    let openshell = product.as_deref() == Some(OPENSHELL_PRODUCT);
    let binary = str_at(&value, &["actor", "process", "file", "path"])
        .or_else(|| {
            // OpenShell writes the path as the process's name, `-` when
            // it could not tell.
            str_at(&value, &["actor", "process", "name"])
                .filter(|n| openshell && n.starts_with('/'))
        })
        .ok_or_else(|| {
            field_err(
                "actor.process.file.path",
                "is missing: the log does not name the binary",
            )
        })?
        .to_owned();
    let dst = value.get("dst_endpoint");
    let named = |key: &str| dst.and_then(|d| d.get(key)).and_then(Value::as_str);
    let (mut host, mut domain_ip) = (named("hostname").map(str::to_owned), None);
    if openshell && host.is_none() {
        match named("domain").map(|d| (d, d.parse::<IpAddr>())) {
            Some((_, Ok(ip))) => domain_ip = Some(ip),
            Some((d, Err(_))) => host = Some(d.to_owned()),
            None => {}
        }
    }
    let ip = match dst.and_then(|d| d.get("ip")) {
        None | Some(Value::Null) => domain_ip,
        Some(v) => Some(
            v.as_str()
                .and_then(|s| s.parse::<IpAddr>().ok())
                .ok_or_else(|| field_err("dst_endpoint.ip", "is not an IP address"))?,
        ),
    };
    let port = match dst.and_then(|d| d.get("port")) {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| field_err("dst_endpoint.port", "is not a port number"))?,
        ),
    };
    let protocol = str_at(&value, &["connection_info", "protocol_name"])
        .unwrap_or("tcp")
        .to_owned();
    let http = if class == 4002 {
        Some(http_denial(&value)?)
    } else {
        None
    };
    let port = port.ok_or_else(|| {
        let address = str_at(&value, &["unmapped", "address"]).unwrap_or("");
        if address.is_empty() {
            field_err("dst_endpoint.port", "is missing")
        } else {
            field_err(
                "dst_endpoint",
                format!("names no host and port but `{address}` ({protocol}), which no `allow` rule can name"),
            )
        }
    })?;
    if host.is_none() && ip.is_none() {
        return Err(field_err("dst_endpoint", "has neither `hostname` nor `ip`"));
    }
    let rule = obj
        .get("firewall_rule")
        .and_then(|r| r.get("type"))
        .and_then(Value::as_str)
        .filter(|t| *t == "policy rule")
        .and_then(|_| str_at(&value, &["firewall_rule", "name"]))
        .map(str::to_owned);
    Ok(Entry::Denial(Box::new(Denial {
        sha256: sha256_of(&value),
        binary,
        host,
        ip,
        port,
        protocol,
        http,
        rule,
        reason: obj
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        policy: str_at(&value, &["policy", "name"]).map(str::to_owned),
        digest: str_at(&value, &["policy", "uid"]).map(str::to_owned),
        product,
        openshell,
        operator_named: str_at(&value, &["unmapped", "resolved_by"]) == Some("operator"),
    })))
}

fn http_denial(value: &Value) -> Result<HttpDenial, LineError> {
    let method = str_at(value, &["http_request", "http_method"])
        .ok_or_else(|| field_err("http_request.http_method", "is missing"))?;
    let target = str_at(value, &["http_request", "url", "path"])
        .ok_or_else(|| field_err("http_request.url.path", "is missing"))?;
    let scheme = str_at(value, &["http_request", "url", "scheme"]).unwrap_or("https");
    let unmapped = value.get("unmapped");
    let text = |k: &str| unmapped.and_then(|u| u.get(k)).and_then(Value::as_str);
    let body = if let Some(m) = text("rpc_method") {
        Some(match text("rpc_tool") {
            Some(t) => format!("rpc {m} tool {t}"),
            None => format!("rpc {m}"),
        })
    } else if unmapped.is_some_and(|u| u.get("graphql_fields").is_some()) {
        Some(format!(
            "graphql {}",
            text("graphql_operation_type").unwrap_or("operation")
        ))
    } else {
        None
    };
    Ok(HttpDenial {
        method: method.to_owned(),
        target: target.to_owned(),
        scheme: scheme.to_owned(),
        error: text("error").map(str::to_owned),
        body,
    })
}

/// The SHA-256 among OCSF's `file.hashes` (`[{algorithm_id: 3, value}]`
/// or `algorithm: "SHA-256"`), lowercased, when it is 64 hex digits.
fn sha256_of(value: &Value) -> Option<String> {
    let hashes = value
        .get("actor")?
        .get("process")?
        .get("file")?
        .get("hashes")?
        .as_array()?;
    hashes.iter().find_map(|h| {
        let is_sha256 = h.get("algorithm_id").and_then(Value::as_u64) == Some(3)
            || h.get("algorithm")
                .and_then(Value::as_str)
                .is_some_and(|a| a.eq_ignore_ascii_case("sha-256"));
        let v = h.get("value")?.as_str()?;
        (is_sha256 && v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| v.to_ascii_lowercase())
    })
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut v = value;
    for k in path {
        v = v.get(k)?;
    }
    v.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_refused_connect() {
        let line = r#"{"class_uid":4001,"action_id":2,"actor":{"process":{"pid":1,"tid":1,"file":{"path":"/usr/bin/curl"}}},"dst_endpoint":{"hostname":"example.com","ip":"93.184.216.34","port":443},"connection_info":{"protocol_name":"tcp"},"firewall_rule":{"name":"default","type":"default deny"},"message":"no rule","policy":{"name":"p","uid":"sha256:00"}}"#;
        let Ok(Entry::Denial(d)) = read_line(line) else {
            panic!("not a denial");
        };
        assert_eq!(d.binary, "/usr/bin/curl");
        assert_eq!(d.host.as_deref(), Some("example.com"));
        assert_eq!(d.port, 443);
        assert_eq!(d.rule, None);
        assert_eq!(d.digest.as_deref(), Some("sha256:00"));
    }

    /// A refused connect and a refused request as OpenShell's supervisor
    /// writes them (`proxy.rs`, through `openshell-ocsf`'s builders).
    #[test]
    fn reads_openshells_own_lines() {
        let connect = r#"{"class_uid":4001,"class_name":"Network Activity","activity_id":1,"action_id":2,"action":"Denied","disposition_id":2,"severity_id":3,"status_id":2,"message":"CONNECT denied pypi.org:443","dst_endpoint":{"domain":"pypi.org","port":443},"src_endpoint":{"ip":"10.42.0.2","port":50123},"actor":{"process":{"name":"/usr/bin/python3","pid":77}},"firewall_rule":{"name":"-","type":"opa"},"metadata":{"version":"1.8.0","product":{"name":"OpenShell Sandbox Supervisor","vendor_name":"OpenShell","version":"0.5.0"},"uid":"sb-1"}}"#;
        let Ok(Entry::Denial(d)) = read_line(connect) else {
            panic!("not a denial: {:?}", read_line(connect));
        };
        assert_eq!(d.binary, "/usr/bin/python3");
        assert_eq!(d.host.as_deref(), Some("pypi.org"));
        assert_eq!((d.ip, d.port), (None, 443));
        assert!(d.openshell && d.policy.is_none() && d.rule.is_none());

        let request = r#"{"class_uid":4002,"activity_id":3,"action_id":2,"dst_endpoint":{"domain":"10.0.0.5","port":8080},"http_request":{"http_method":"POST","url":{"scheme":"http","hostname":"10.0.0.5","path":"/v1/items","port":8080}},"actor":{"process":{"name":"/usr/bin/curl","pid":9}},"firewall_rule":{"name":"internal","type":"opa"},"metadata":{"product":{"name":"OpenShell Sandbox Supervisor"}}}"#;
        let Ok(Entry::Denial(d)) = read_line(request) else {
            panic!("not a denial: {:?}", read_line(request));
        };
        assert_eq!(d.host, None);
        assert_eq!(d.ip, Some("10.0.0.5".parse().unwrap()));
        let http = d.http.as_ref().unwrap();
        assert_eq!(
            (http.method.as_str(), http.target.as_str()),
            ("POST", "/v1/items")
        );

        // An unknown binary (`-`) names none.
        let unknown = connect.replace("/usr/bin/python3", "-");
        assert!(matches!(
            read_line(&unknown),
            Err(LineError::Field {
                field: "actor.process.file.path",
                ..
            })
        ));
        // Another product's `name` is a name, not a path.
        let other = connect.replace("OpenShell Sandbox Supervisor", "Other");
        assert!(read_line(&other).is_err());
    }

    #[test]
    fn a_line_without_a_policy_reads_with_none_and_its_product() {
        let line = r#"{"class_uid":4001,"action_id":2,"actor":{"process":{"file":{"path":"/usr/bin/curl"}}},"dst_endpoint":{"hostname":"example.com","port":443},"metadata":{"product":{"name":"OpenShell"}}}"#;
        let Ok(Entry::Denial(d)) = read_line(line) else {
            panic!("not a denial");
        };
        assert_eq!((d.policy, d.digest), (None, None));
        assert_eq!(d.product.as_deref(), Some("OpenShell"));
    }

    /// What the `deny_log` fuzz target asks, on every prefix of a real
    /// line and every one-byte change of it.
    #[test]
    fn every_truncation_and_byte_change_reads_without_panic() {
        let line = r#"{"class_uid":4002,"action_id":2,"actor":{"process":{"file":{"path":"/usr/bin/gh","hashes":[{"algorithm_id":3,"value":"00"}]}}},"dst_endpoint":{"hostname":"api.github.com","ip":"140.82.112.6","port":443},"http_request":{"http_method":"GET","url":{"path":"/repos/o/r","scheme":"https"}},"unmapped":{"rpc_method":"x"},"policy":{"name":"p","uid":"sha256:00"}}"#;
        for end in 0..=line.len() {
            if let Some(prefix) = line.get(..end) {
                let _ = read_line(prefix);
            }
        }
        let bytes = line.as_bytes();
        for i in 0..bytes.len() {
            for b in [b'"', b'{', b'1', b'x', b'\\', 0xff] {
                let mut changed = bytes.to_vec();
                if let Some(c) = changed.get_mut(i) {
                    *c = b;
                }
                if let Ok(text) = std::str::from_utf8(&changed) {
                    let _ = read_line(text);
                }
            }
        }
    }

    #[test]
    fn bad_lines_are_errors_not_panics() {
        assert!(matches!(
            read_line("{\"class_uid\":40"),
            Err(LineError::NotJson(_))
        ));
        assert!(matches!(read_line("[1]"), Err(LineError::NotJson(_))));
        assert!(matches!(read_line("{\"a\":1}"), Err(LineError::Foreign(_))));
        assert!(matches!(
            read_line(r#"{"class_uid":4001,"action_id":2}"#),
            Err(LineError::Field { .. })
        ));
        assert_eq!(read_line("  "), Ok(Entry::Blank));
        assert_eq!(
            read_line(r#"{"class_uid":4003}"#),
            Ok(Entry::Other("DNS refusal"))
        );
    }
}
