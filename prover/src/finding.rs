//! Findings as reported: category, message, witness request, blame in the
//! new policy, why the old policy did not allow it, and the region's size.

use policy_bundle::Origin;
use policy_bundle::eval::{Decision, Request, Verdict};
use serde::Serialize;

use crate::accepted::AcceptanceNote;
use crate::domain::Domain;
use crate::formula::AddrCell;
use crate::query::Category;
use crate::region::Region;
use crate::strings::{Partition, Size};
use crate::websocket::Probe;

/// A rule's place in the policy source, for blame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Loc {
    /// The source file as loaded (its path or display name).
    pub file: String,
    /// 1-based.
    pub line: u32,
    /// 1-based; 0 when unknown (then left out of JSON).
    #[serde(skip_serializing_if = "is_zero")]
    pub column: u32,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

impl Loc {
    pub(crate) fn of(o: &Origin) -> Loc {
        Loc {
            file: o.file.clone(),
            line: o.line,
            column: o.column,
        }
    }
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// The concrete request of a finding. A *connection* witness (no method,
/// no path) stands for a widening at the connection level, such as a
/// route the proxy does not inspect: any request on it passes, and naming
/// one would suggest the L7 rules decide it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Witness {
    /// The executable's resolved absolute path.
    pub binary: String,
    /// The host name, or the address when the destination has no name.
    pub host: String,
    /// The destination TCP port.
    pub port: u16,
    /// The HTTP method; `None` for a connection witness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The canonical request path; `None` for a connection witness.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The destination address, when the finding depends on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The query string (without `?`), when query rules decide.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The binary's SHA-256 (hex), when a pin decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The JSON-RPC method of the call in the body, when a JSON-RPC or
    /// MCP endpoint judges the request by it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rpc_method: Option<String>,
    /// The MCP tool of a `tools/call`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The GraphQL document of a POST body, when a GraphQL endpoint judges
    /// the request by it (`eval --graphql DOC` sends it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graphql: Option<String>,
    /// The JSON-RPC message the body holds, exactly (present whenever the
    /// request has a body).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The body's length when the message is padded with spaces to it
    /// (the difference lies in a body limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_size: Option<usize>,
    /// The body's `Content-Type` (`eval --content-type`), when it decides:
    /// a route with `request_body_credential_rewrite` replaces
    /// placeholders only in some types.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// A WebSocket witness: `upgrade` (the request is the upgrade `GET`),
    /// or `text` / `binary`, a client message after that upgrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub websocket: Option<String>,
    /// The text message (`eval --websocket-text`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub websocket_text: Option<String>,
    /// The text message's length when it is padded with spaces to it
    /// (the difference lies in a message limit; `eval
    /// --websocket-text-file`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text_size: Option<usize>,
    /// The binary message's length, in zero bytes (`eval
    /// --websocket-binary`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary_size: Option<usize>,
}

impl Witness {
    pub(crate) fn of(req: &Request) -> Witness {
        let (method, path, query) = match &req.http {
            None => (None, None, None),
            Some(h) => {
                let (path, query) = match h.target.split_once('?') {
                    Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
                    None => (h.target.clone(), None),
                };
                (Some(h.method.clone()), Some(path), query)
            }
        };
        let address = req.addr.map(|a| a.to_string());
        Witness {
            binary: req.binary.clone(),
            host: req
                .host
                .clone()
                .or_else(|| address.clone())
                .unwrap_or_default(),
            port: req.port,
            method,
            path,
            address: address.filter(|_| req.host.is_some()),
            query,
            sha256: req.sha256.clone(),
            rpc_method: None,
            tool: None,
            graphql: None,
            body: None,
            body_size: None,
            content_type: None,
            websocket: None,
            websocket_text: None,
            text_size: None,
            binary_size: None,
        }
    }

    /// The witness as the WebSocket upgrade or message `probe` says (a
    /// connection witness stays one).
    pub(crate) fn with_probe(mut self, probe: Option<&Probe>) -> Witness {
        let Some(probe) = probe.filter(|_| !self.is_connection()) else {
            return self;
        };
        self.body = None;
        self.body_size = None;
        self.websocket = Some(
            match probe {
                Probe::Upgrade => "upgrade",
                Probe::Text(_) => "text",
                Probe::Binary(_) => "binary",
            }
            .to_owned(),
        );
        match probe {
            Probe::Upgrade => {}
            Probe::Text(t) => {
                let short = t.trim_end_matches(' ');
                self.websocket_text = Some(short.to_owned());
                self.text_size = (short.len() < t.len()).then_some(t.len());
            }
            Probe::Binary(n) => self.binary_size = Some(*n),
        }
        self
    }

    /// The WebSocket upgrade or message the witness stands for.
    pub fn probe(&self) -> Option<Probe> {
        match self.websocket.as_deref()? {
            "upgrade" => Some(Probe::Upgrade),
            "text" => {
                let mut t = self.websocket_text.clone().unwrap_or_default();
                while t.len() < self.text_size.unwrap_or_default() {
                    t.push(' ');
                }
                Some(Probe::Text(t))
            }
            "binary" => Some(Probe::Binary(self.binary_size.unwrap_or_default())),
            _ => None,
        }
    }

    /// The witness of a request with this body (`None`: no body).
    pub(crate) fn with_body(req: &Request, body: Option<&[u8]>) -> Witness {
        let mut w = Witness::of(req);
        let Some(body) = body.filter(|_| req.http.is_some()) else {
            return w;
        };
        let text = String::from_utf8_lossy(body);
        let message = text.trim_end_matches(' ');
        if message.len() != text.len() {
            w.body_size = Some(body.len());
        }
        if let Ok(serde_json::Value::Object(o)) = serde_json::from_str(message) {
            w.rpc_method = o
                .get("method")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            w.tool = o
                .get("params")
                .and_then(|p| p.get("name"))
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            w.graphql = o
                .get("query")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
        }
        w.body = Some(message.to_owned());
        w
    }

    /// The body bytes the witness stands for (`None`: no body).
    pub fn body_bytes(&self) -> Option<Vec<u8>> {
        let mut out = self.body.clone()?.into_bytes();
        if let Some(n) = self.body_size {
            out.resize(n, b' ');
        }
        Some(out)
    }

    /// The call as `eval` takes it: `--jsonrpc-method M [--tool T]`, and
    /// the exact body when it is not the plain request those flags make
    /// (a notification, a null id, a response frame, padding).
    pub fn call_flags(&self) -> Option<String> {
        if let Some(probe) = self.probe() {
            return Some(match probe {
                Probe::Upgrade => "--websocket".to_owned(),
                Probe::Text(t) => match (&self.websocket_text, self.text_size) {
                    (Some(short), Some(n)) => format!(
                        "--websocket-text-file FILE (FILE: `{short}` padded with spaces to {n} bytes)"
                    ),
                    _ => format!("--websocket-text {}", shell_word(&t)),
                },
                Probe::Binary(n) => format!("--websocket-binary FILE (FILE: {n} zero bytes)"),
            });
        }
        let body = self.body.as_ref()?;
        let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
        if let Some(doc) = &self.graphql {
            let mut out = format!("--graphql {}", shell_word(doc));
            if *body != format!(r#"{{"query":{}}}"#, quote(doc)) || self.body_size.is_some() {
                out.push_str(&format!(" (body `{body}`"));
                if let Some(n) = self.body_size {
                    out.push_str(&format!(", padded with spaces to {n} bytes"));
                }
                out.push(')');
            }
            return Some(out);
        }
        let Some(m) = &self.rpc_method else {
            return Some(match &self.content_type {
                Some(t) => format!("--body FILE --content-type {t} (FILE: `{body}`)"),
                None => format!("with body `{body}`"),
            });
        };
        let mut out = format!("--jsonrpc-method {}", shell_word(m));
        let plain = match &self.tool {
            Some(t) => {
                out.push_str(&format!(" --tool {}", shell_word(t)));
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":{},"params":{{"name":{}}}}}"#,
                    quote(m),
                    quote(t)
                )
            }
            None => format!(r#"{{"jsonrpc":"2.0","id":1,"method":{}}}"#, quote(m)),
        };
        if *body != plain || self.body_size.is_some() {
            out.push_str(&format!(" (body `{body}`"));
            if let Some(n) = self.body_size {
                out.push_str(&format!(", padded with spaces to {n} bytes"));
            }
            out.push(')');
        }
        Some(out)
    }

    /// [`Self::url`] followed by the call, when there is one.
    pub fn request_text(&self) -> String {
        match self.call_flags() {
            Some(c) => format!("{} {c}", self.url()),
            None => self.url(),
        }
    }

    /// Whether this is a connection witness (no request on it).
    pub fn is_connection(&self) -> bool {
        self.method.is_none()
    }

    /// `METHOD https://host:port/path?query` for one-line reports;
    /// `connection to host:port` for a connection witness.
    pub fn url(&self) -> String {
        let (Some(method), Some(path)) = (&self.method, &self.path) else {
            let host = if self.host.contains(':') {
                format!("[{}]", self.host)
            } else {
                self.host.clone()
            };
            let via = self
                .address
                .as_ref()
                .map(|a| format!(" (address {a})"))
                .unwrap_or_default();
            return format!("connection to {host}:{}{via}", self.port);
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let scheme = match (self.port == 80, self.websocket.is_some()) {
            (true, false) => "http",
            (false, false) => "https",
            (true, true) => "ws",
            (false, true) => "wss",
        };
        let port = if self.port == 443 || self.port == 80 {
            String::new()
        } else {
            format!(":{}", self.port)
        };
        let q = self
            .query
            .as_ref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        format!("{method} {scheme}://{host}{port}{path}{q}")
    }
}

/// A word as a shell reads it back: quoted unless plainly safe.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_.-:@".contains(&b))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// How large a region is, per dimension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RegionSummary {
    pub binaries: Vec<String>,
    pub hosts: Vec<String>,
    /// Number of host names (`"infinite"` for a wildcard).
    pub host_count: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Number of addresses, as a decimal string (IPv6 counts exceed JSON
    /// numbers).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address_count: String,
    pub ports: String,
    pub methods: Vec<String>,
    pub paths: Vec<String>,
    /// The JSON-RPC calls, when a JSON-RPC or MCP endpoint decides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<String>,
    /// One line for people.
    pub text: String,
}

/// One widening or risk, with a concrete request that shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// Which question found it.
    pub category: Category,
    /// One sentence for people.
    pub message: String,
    /// A request the new policy decides as the category says.
    pub witness: Witness,
    /// The new policy's rule that allows the witness, when one does.
    pub new_rule: Option<Loc>,
    /// Why the old policy did not allow the witness (empty for `check`).
    pub old_reason: String,
    /// The old policy's rule behind `old_reason`, when one decided.
    pub old_rule: Option<Loc>,
    /// An accepted risk matches: reported, but it does not block.
    pub suppressed: bool,
    /// The acceptance that matched, expired or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<AcceptanceNote>,
    /// How many requests are like the witness, per dimension.
    pub region: RegionSummary,
    /// The witness was replayed through the reference evaluator and the
    /// decision flips as the category says.
    pub verified: bool,
    /// The diagnostic code `check` reports it under.
    pub code: &'static str,
}

/// Up to `max` names and "and N more".
fn listed(names: Vec<String>, max: usize) -> String {
    let n = names.len();
    let mut shown: Vec<String> = names
        .into_iter()
        .take(max)
        .map(|s| format!("`{s}`"))
        .collect();
    if n > max {
        shown.push(format!("and {} more", n - max));
    }
    shown.join(", ")
}

/// How to call an atom: the string itself, or the narrowest pattern
/// covering it.
fn atom_name(part: &Partition, atom: u32, other: &str) -> String {
    let Some(a) = part.atom(atom) else {
        return String::new();
    };
    if a.exact
        && let Some(w) = &a.witness
    {
        return w.clone();
    }
    a.sig
        .iter()
        .filter(|&&p| !part.name(p).starts_with('<'))
        .min_by_key(|&&p| part.members.get(p as usize).map_or(usize::MAX, Vec::len))
        .map_or_else(|| other.to_owned(), |&p| part.name(p).to_owned())
}

pub(crate) fn names(part: &Partition, set: &[u32], other: &str) -> Vec<String> {
    let mut v: Vec<String> = set.iter().map(|&a| atom_name(part, a, other)).collect();
    v.sort();
    v.dedup();
    v
}

fn size_of(part: &Partition, set: &[u32]) -> Size {
    set.iter()
        .filter_map(|&a| part.atom(a))
        .fold(Size::Finite(0), |s, a| s.plus(a.size))
}

fn size_text(s: Size) -> String {
    match s {
        Size::Finite(n) => n.to_string(),
        Size::Infinite => "infinite".to_owned(),
    }
}

fn addr_strings(cells: &[AddrCell]) -> (Vec<String>, u128) {
    let mut v4: Vec<(u128, u128)> = Vec::new();
    let mut v6: Vec<(u128, u128)> = Vec::new();
    let mut count = 0u128;
    for c in cells {
        count = count.saturating_add(c.count());
        match *c {
            AddrCell::V4(lo, hi) => v4.push((u128::from(lo), u128::from(hi))),
            AddrCell::V6(lo, hi) => v6.push((lo, hi)),
            AddrCell::None => {}
        }
    }
    let mut nets = Vec::new();
    for (lo, hi) in v4 {
        let (a, b) = (
            std::net::Ipv4Addr::from(u32::try_from(lo).unwrap_or(0)),
            std::net::Ipv4Addr::from(u32::try_from(hi).unwrap_or(0)),
        );
        nets.extend(ipnet::Ipv4Subnets::new(a, b, 0).map(ipnet::IpNet::V4));
    }
    for (lo, hi) in v6 {
        nets.extend(ipnet::Ipv6Subnets::new(lo.into(), hi.into(), 0).map(ipnet::IpNet::V6));
    }
    let set = policy_bundle::matcher::AddrSet::from_nets(nets);
    (set.to_strings(), count)
}

pub(crate) fn summarize(dom: &Domain, r: &Region) -> RegionSummary {
    let all_bins = r.bins.len() >= dom.bins.len();
    let binaries = if all_bins {
        vec!["any binary".to_owned()]
    } else {
        names(&dom.bins, &r.bins, "any other binary")
    };
    let named: Vec<u32> = r
        .hosts
        .iter()
        .copied()
        .filter(|&h| h != dom.host_none())
        .collect();
    let hosts = names(&dom.hosts, &named, "any other host");
    let host_count = size_text(size_of(&dom.hosts, &named));
    // Addresses are only the destination when there is no host name;
    // beside a name they are what it resolved to.
    let by_address = r.hosts.contains(&dom.host_none());
    let (addresses, count) = if by_address {
        addr_strings(&r.addr_cells(dom))
    } else {
        (Vec::new(), 0)
    };
    let ports = crate::region::merge(&r.port_cells(dom))
        .iter()
        .map(|&(lo, hi)| {
            if lo == hi {
                lo.to_string()
            } else {
                format!("{lo}-{hi}")
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    let methods: Vec<String> = if r.methods.len() >= dom.methods.len() {
        vec!["*".to_owned()]
    } else {
        r.methods
            .iter()
            .filter_map(|&m| dom.methods.get(m as usize).cloned())
            .map(|m| {
                if Some(&m) == dom.methods.last() {
                    "other methods".to_owned()
                } else {
                    m
                }
            })
            .collect()
    };
    let paths = if r.paths.len() >= dom.paths.len() {
        vec!["/**".to_owned()]
    } else {
        names(&dom.paths, &r.paths, "other paths")
    };
    let mut parts = Vec::new();
    parts.push(if all_bins {
        "any binary".to_owned()
    } else {
        listed(binaries.clone(), 3)
    });
    let mut dest = Vec::new();
    if !hosts.is_empty() {
        let wildcard = host_count == "infinite";
        dest.push(if wildcard {
            format!("every host matching {}", listed(hosts.clone(), 3))
        } else {
            format!(
                "{} ({} host{})",
                listed(hosts.clone(), 3),
                host_count,
                if host_count == "1" { "" } else { "s" }
            )
        });
    }
    if count > 0 {
        dest.push(format!(
            "+{count} addresses ({})",
            listed(addresses.clone(), 3)
        ));
    }
    parts.push(format!("→ {} port {ports}", dest.join(" or ")));
    parts.push(format!("methods {}", methods.join(" ")));
    parts.push(format!("paths {}", listed(paths.clone(), 3)));
    // Calls are named only when they decide: a region of every body value
    // is one the body does not matter for.
    let calls: Vec<String> = if r.calls.len() >= dom.calls.len() {
        Vec::new()
    } else {
        r.calls.iter().map(|&c| dom.calls.describe(c)).collect()
    };
    if !calls.is_empty() {
        let mut shown: Vec<String> = calls.iter().take(3).cloned().collect();
        if calls.len() > 3 {
            shown.push(format!("and {} more", calls.len() - 3));
        }
        parts.push(format!("body {}", shown.join(", ")));
    }
    RegionSummary {
        binaries,
        hosts,
        host_count,
        addresses,
        address_count: if count > 0 {
            count.to_string()
        } else {
            String::new()
        },
        ports,
        methods,
        paths,
        calls,
        text: parts.join(", "),
    }
}

/// Why the old policy did not let the request through, in words.
pub(crate) fn old_reason(d: &Decision, conn_allowed: bool) -> (String, Option<Loc>) {
    let at = d.rule.as_ref().map(Loc::of);
    let text = if !conn_allowed {
        format!("default deny: {}", d.reason)
    } else if d.decision == Verdict::Deny && d.reason.by_deny_rule() {
        match &at {
            Some(l) => format!("a deny rule at {l}: {}", d.reason),
            None => format!("a deny rule: {}", d.reason),
        }
    } else if d.decision == Verdict::Deny {
        match &at {
            Some(l) => format!("a narrower pattern at {l}: {}", d.reason),
            None => format!("a narrower pattern: {}", d.reason),
        }
    } else {
        match &at {
            Some(l) => format!("allowed by the rule at {l}, but {}", d.reason),
            None => d.reason.to_string(),
        }
    };
    (text, at)
}
