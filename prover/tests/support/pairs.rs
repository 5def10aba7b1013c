//! Small random OLD/NEW policy pairs whose patterns are built the way the
//! matcher module's own property tests build them (segments and labels
//! from small piece alphabets: literals, `*`, `?`, classes, `**`), and
//! concrete requests drawn from both policies' patterns, so that the
//! strings where two patterns differ (one component deeper, one label
//! more, an empty `*`) are the strings the requests try.

use policy_bundle::eval::{HttpRequest, Request};

use super::generate::Rng;
use super::graphql::Gql;
use super::rpc::{self, Rpc};
use prover::websocket::Probe;

/// One of a list of static strings.
fn pick(rng: &mut Rng, xs: &[&'static str]) -> &'static str {
    xs[rng.below(xs.len())]
}

/// One piece of a segment or label pattern, and how to instantiate it.
#[derive(Debug, Clone, Copy)]
enum Piece {
    Lit(&'static str),
    /// `*`: within one segment or label.
    Star,
    /// `?`: one character.
    One,
    /// `[a-b]`.
    AB,
    /// `[!a]`.
    NotA,
}

impl Piece {
    fn text(self) -> &'static str {
        match self {
            Piece::Lit(s) => s,
            Piece::Star => "*",
            Piece::One => "?",
            Piece::AB => "[a-b]",
            Piece::NotA => "[!a]",
        }
    }

    fn concrete(self, rng: &mut Rng) -> &'static str {
        match self {
            Piece::Lit(s) => s,
            Piece::Star => pick(rng, &["", "a", "b", "x", "ab", "xa"]),
            Piece::One => pick(rng, &["a", "b", "x"]),
            Piece::AB => pick(rng, &["a", "b"]),
            Piece::NotA => pick(rng, &["b", "x"]),
        }
    }
}

/// A segment (or label): `**`, or one to three pieces.
#[derive(Debug, Clone)]
enum Part {
    Many,
    Pieces(Vec<Piece>),
}

const SEG_PIECES: &[Piece] = &[
    Piece::Lit("a"),
    Piece::Lit("b"),
    Piece::Lit("a"),
    Piece::Lit("x"),
    Piece::Star,
    Piece::Star,
    Piece::One,
    Piece::AB,
    Piece::NotA,
];

fn part(rng: &mut Rng, pieces: &[Piece], many: u64) -> Part {
    if rng.chance(many) {
        return Part::Many;
    }
    let n = 1 + rng.below(3);
    let mut out: Vec<Piece> = Vec::new();
    for _ in 0..n {
        let p = *rng.pick(pieces);
        // `**` inside a segment or label is refused: one `*` in a row.
        if matches!(p, Piece::Star) && matches!(out.last(), Some(Piece::Star)) {
            continue;
        }
        out.push(p);
    }
    Part::Pieces(out)
}

fn part_text(p: &Part) -> String {
    match p {
        Part::Many => "**".to_owned(),
        Part::Pieces(ps) => ps.iter().map(|p| p.text()).collect(),
    }
}

fn part_concrete(p: &Part, rng: &mut Rng, many: &[&'static str]) -> Vec<String> {
    match p {
        Part::Many => (0..rng.below(3))
            .map(|_| (*rng.pick(many)).to_owned())
            .collect(),
        Part::Pieces(ps) => vec![ps.iter().map(|p| p.concrete(rng)).collect()],
    }
}

/// A path-like pattern (binary or HTTP path): a fixed prefix, then
/// segments.
#[derive(Debug, Clone)]
pub struct PathPat {
    prefix: &'static str,
    parts: Vec<Part>,
    trailing: bool,
}

impl PathPat {
    fn random(rng: &mut Rng, prefix: &'static str, http: bool) -> PathPat {
        let n = usize::from(!http) + rng.below(3);
        PathPat {
            prefix,
            parts: (0..n).map(|_| part(rng, SEG_PIECES, 20)).collect(),
            trailing: http && rng.chance(10),
        }
    }

    pub fn text(&self) -> String {
        let mut out = self.prefix.to_owned();
        for p in &self.parts {
            out.push('/');
            out.push_str(&part_text(p));
        }
        if self.trailing || out.is_empty() {
            out.push('/');
        }
        out
    }

    /// A string the pattern means to match (not always: an empty `*`
    /// makes an empty segment, which the matcher may refuse — the point
    /// is to sit on the boundary).
    pub fn concrete(&self, rng: &mut Rng) -> String {
        let mut out = self.prefix.to_owned();
        for p in &self.parts {
            for s in part_concrete(p, rng, &["a", "b", "x", "ab"]) {
                out.push('/');
                out.push_str(&s);
            }
        }
        if rng.chance(15) {
            out.push_str(pick(rng, &["/x", "/a", "/a/b"]));
        }
        if self.trailing || out.is_empty() {
            out.push('/');
        }
        out
    }
}

const LABEL_PIECES: &[Piece] = &[
    Piece::Lit("a"),
    Piece::Lit("b"),
    Piece::Lit("api"),
    Piece::Star,
];

/// A host pattern under `ex.com`: `**` only leftmost.
#[derive(Debug, Clone)]
pub struct HostPat {
    labels: Vec<Part>,
}

impl HostPat {
    pub fn random(rng: &mut Rng) -> HostPat {
        let n = rng.below(3);
        let labels = (0..n)
            .map(|i| {
                let p = part(rng, LABEL_PIECES, if i == 0 { 20 } else { 0 });
                // A label of `*` pieces only is the whole-label `*`.
                match p {
                    Part::Pieces(ps) if ps.iter().all(|p| matches!(p, Piece::Star)) => {
                        Part::Pieces(vec![Piece::Star])
                    }
                    p => p,
                }
            })
            .collect();
        HostPat { labels }
    }

    pub fn text(&self) -> String {
        let mut out: Vec<String> = self.labels.iter().map(part_text).collect();
        out.push("ex.com".to_owned());
        out.join(".")
    }

    pub fn concrete(&self, rng: &mut Rng) -> String {
        let mut out: Vec<String> = Vec::new();
        for l in &self.labels {
            match l {
                Part::Many => {
                    for _ in 0..1 + rng.below(2) {
                        out.push((*rng.pick(&["a", "b", "x"])).to_owned());
                    }
                }
                Part::Pieces(ps) => {
                    let s: String = ps
                        .iter()
                        .map(|p| match p {
                            Piece::Star => *rng.pick(&["", "a", "x", "xy"]),
                            p => p.concrete(rng),
                        })
                        .collect();
                    out.push(s);
                }
            }
        }
        if rng.chance(10) {
            out.insert(0, "q".to_owned());
        }
        out.push("ex.com".to_owned());
        out.join(".")
    }
}

/// A small policy over generated patterns.
#[derive(Debug, Clone)]
pub struct Spec {
    pub creds: Vec<Cred>,
    pub endpoints: Vec<Endpoint>,
}

#[derive(Debug, Clone)]
pub struct Cred {
    pub hosts: Vec<HostPat>,
    pub methods: Option<&'static str>,
    pub paths: Option<Vec<PathPat>>,
}

#[derive(Debug, Clone)]
pub struct Endpoint {
    pub bins: Vec<PathPat>,
    pub host: HostPat,
    pub ports: &'static str,
    /// `None` (and no `rpc`): L4; else the L7 rules.
    pub http: Option<Http>,
    /// A JSON-RPC or MCP endpoint (then `http` is `None`).
    pub rpc: Option<Rpc>,
    /// A GraphQL endpoint (then `http` and `rpc` are `None`).
    pub graphql: Option<Gql>,
}

#[derive(Debug, Clone)]
pub struct Http {
    pub audit: bool,
    pub rules: Vec<Rule>,
    /// A `websocket` endpoint: the rules judge upgrades (`GET`) and text
    /// messages (`WEBSOCKET_TEXT`).
    pub websocket: bool,
    /// `uninspected_credentials` (websocket endpoints only).
    pub uninspected: bool,
    /// `body_limit` (websocket endpoints only; `None`: the default).
    pub message_limit: Option<usize>,
    /// GraphQL rules and registry (websocket endpoints only): text
    /// messages are then GraphQL-over-WebSocket messages.
    pub gql: Option<Gql>,
}

/// Message limits of the generated websocket endpoints, and message sizes
/// around them for the probes.
const MESSAGE_LIMITS: &[Option<usize>] = &[None, None, Some(64), Some(1024)];
const MESSAGE_SIZES: &[usize] = &[2, 64, 65, 1024, 1025, 4096];

#[derive(Debug, Clone)]
pub struct Rule {
    pub deny: bool,
    pub methods: &'static str,
    pub path: PathPat,
    pub query: &'static str,
}

const METHODS: &[&str] = &["GET", "POST", "GET HEAD", "*", "DELETE"];
const WS_METHODS: &[&str] = &["GET", "WEBSOCKET_TEXT", "*", "GET", "WEBSOCKET_TEXT"];
const PORTS: &[&str] = &["443", "443,8443", "80-443"];
const QUERIES: &[&str] = &["", "", "", " ?q=a*", " ?state=open|closed"];

fn rule(rng: &mut Rng, deny: bool, websocket: bool) -> Rule {
    Rule {
        deny,
        methods: pick(rng, if websocket { WS_METHODS } else { METHODS }),
        path: PathPat::random(rng, "", true),
        query: pick(rng, QUERIES),
    }
}

fn endpoint(rng: &mut Rng) -> Endpoint {
    let rpc = rng.chance(20).then(|| Rpc::random(rng));
    let graphql = (rpc.is_none() && rng.chance(15)).then(|| Gql::random(rng));
    let http = if rpc.is_none() && graphql.is_none() && rng.chance(70) {
        let audit = rng.chance(15);
        let websocket = rng.chance(20);
        let mut rules: Vec<Rule> = (0..1 + rng.below(2))
            .map(|_| rule(rng, false, websocket))
            .collect();
        for _ in 0..rng.below(2) {
            rules.push(rule(rng, true, websocket));
        }
        let uninspected = websocket && rng.chance(30);
        let message_limit = if websocket {
            *rng.pick(MESSAGE_LIMITS)
        } else {
            None
        };
        let gql = (websocket && rng.chance(50)).then(|| Gql::random(rng));
        Some(Http {
            audit,
            rules,
            websocket,
            uninspected,
            message_limit,
            gql,
        })
    } else {
        None
    };
    Endpoint {
        bins: (0..1 + rng.below(2))
            .map(|_| PathPat::random(rng, "/usr/bin", false))
            .collect(),
        host: HostPat::random(rng),
        ports: pick(rng, PORTS),
        http,
        rpc,
        graphql,
    }
}

impl Spec {
    pub fn random(rng: &mut Rng) -> Spec {
        let mut s = Spec {
            creds: (0..1 + rng.below(2))
                .map(|_| Cred {
                    hosts: (0..1 + rng.below(2))
                        .map(|_| HostPat::random(rng))
                        .collect(),
                    methods: rng
                        .chance(25)
                        .then(|| *rng.pick(&["GET", "GET HEAD", "POST"])),
                    paths: rng.chance(25).then(|| vec![PathPat::random(rng, "", true)]),
                })
                .collect(),
            endpoints: (0..1 + rng.below(2)).map(|_| endpoint(rng)).collect(),
        };
        // Most endpoints are credentialed: their host is one a credential
        // is bound to.
        for e in &mut s.endpoints {
            if rng.chance(60) {
                let c = &s.creds[rng.below(s.creds.len())];
                e.host = c.hosts[rng.below(c.hosts.len())].clone();
            }
        }
        s
    }

    /// The same policy with one random change: most changes widen or
    /// narrow one pattern a little, the kind of edit a pull request makes.
    pub fn mutate(&self, rng: &mut Rng) -> Spec {
        let mut s = self.clone();
        let e = rng.below(s.endpoints.len());
        let ep = &mut s.endpoints[e];
        match rng.below(11) {
            0 | 9 => {
                let b = rng.below(ep.bins.len());
                ep.bins[b] = PathPat::random(rng, "/usr/bin", false);
            }
            1 | 10 => {
                let b = rng.below(ep.bins.len());
                let p = &mut ep.bins[b];
                if rng.chance(50) {
                    p.parts.push(Part::Many);
                } else if let Some(last) = p.parts.last_mut() {
                    *last = Part::Many;
                }
            }
            2 => ep.host = HostPat::random(rng),
            3 => ep.ports = *rng.pick(PORTS),
            4..=6 if ep.rpc.is_some() => {
                if let Some(r) = &mut ep.rpc {
                    r.mutate(rng);
                }
            }
            4..=6 if ep.graphql.is_some() => {
                if let Some(g) = &mut ep.graphql {
                    g.mutate(rng);
                }
            }
            4..=6 if ep.http.as_ref().is_some_and(|h| h.gql.is_some()) && rng.chance(60) => {
                if let Some(g) = ep.http.as_mut().and_then(|h| h.gql.as_mut()) {
                    g.mutate(rng);
                }
            }
            4 => match &mut ep.http {
                Some(_) if rng.chance(20) => {
                    // A REST endpoint turned into a JSON-RPC, MCP or
                    // GraphQL one.
                    ep.http = None;
                    if rng.chance(50) {
                        ep.rpc = Some(Rpc::random(rng));
                    } else {
                        ep.graphql = Some(Gql::random(rng));
                    }
                }
                Some(h) => h.audit = !h.audit,
                None => {
                    let other = endpoint(rng);
                    ep.http = other.http;
                    ep.rpc = other.rpc;
                    ep.graphql = other.graphql;
                }
            },
            5 => match &mut ep.http {
                Some(h) if h.rules.len() > 1 => {
                    let i = rng.below(h.rules.len());
                    h.rules.remove(i);
                }
                Some(h) if h.websocket && rng.chance(20) => h.uninspected = !h.uninspected,
                Some(h) if h.websocket && rng.chance(20) => {
                    h.message_limit = *rng.pick(MESSAGE_LIMITS);
                }
                Some(h) if h.websocket && rng.chance(30) => match &mut h.gql {
                    Some(g) if rng.chance(75) => g.mutate(rng),
                    Some(_) => h.gql = None,
                    None => h.gql = Some(Gql::random(rng)),
                },
                Some(h) if rng.chance(10) => {
                    // REST turned websocket, or back: methods the other
                    // protocol refuses become `*`.
                    h.websocket = !h.websocket;
                    h.uninspected = false;
                    h.message_limit = None;
                    h.gql = None;
                    let allowed = if h.websocket { WS_METHODS } else { METHODS };
                    for r in &mut h.rules {
                        if !allowed.contains(&r.methods) {
                            r.methods = "*";
                        }
                    }
                }
                Some(h) => {
                    let deny = rng.chance(50);
                    h.rules.push(rule(rng, deny, h.websocket));
                }
                None => {}
            },
            6 => {
                if let Some(h) = &mut ep.http {
                    let i = rng.below(h.rules.len());
                    h.rules[i] = rule(rng, h.rules[i].deny, h.websocket);
                }
            }
            7 => {
                let c = rng.below(s.creds.len());
                let cred = &mut s.creds[c];
                match rng.below(3) {
                    0 => cred.methods = None,
                    1 => cred.paths = None,
                    _ => cred.hosts.push(HostPat::random(rng)),
                }
            }
            _ => s.endpoints.push(endpoint(rng)),
        }
        s
    }

    pub fn text(&self) -> String {
        let mut out = String::from("policy \"p\" {\n  fs read /usr /etc\n  fs exec /usr/bin\n");
        for (i, c) in self.creds.iter().enumerate() {
            let hosts: Vec<String> = c.hosts.iter().map(HostPat::text).collect();
            out.push_str(&format!(
                "  credential c{i} {{\n    secret env T{i}\n    placeholder env T{i}\n    inject replace\n    hosts {}\n",
                hosts.join(" ")
            ));
            if let Some(m) = c.methods {
                out.push_str(&format!("    methods {m}\n"));
            }
            if let Some(ps) = &c.paths {
                let ps: Vec<String> = ps.iter().map(PathPat::text).collect();
                out.push_str(&format!("    paths {}\n", ps.join(" ")));
            }
            out.push_str("  }\n");
        }
        for e in &self.endpoints {
            let bins: Vec<String> = e.bins.iter().map(PathPat::text).collect();
            out.push_str(&format!(
                "  allow {} -> {}:{}",
                bins.join(" "),
                e.host.text(),
                e.ports
            ));
            if let Some(g) = &e.graphql {
                out.push_str(&g.options());
                out.push_str(" {\n");
                for line in g.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
                out.push_str("  }\n");
                continue;
            }
            if let Some(r) = &e.rpc {
                out.push_str(&r.options());
                out.push_str(" {\n");
                for line in r.lines() {
                    out.push_str(&format!("    {line}\n"));
                }
                out.push_str("  }\n");
                continue;
            }
            match &e.http {
                None => out.push('\n'),
                Some(h) => {
                    out.push_str(if h.websocket { " websocket" } else { " http" });
                    if h.audit {
                        out.push_str(" audit");
                    }
                    if h.uninspected {
                        out.push_str(" uninspected_credentials");
                    }
                    out.push_str(" {\n");
                    // A websocket endpoint needs an allow rule; one
                    // that allows no upgrade lets nothing through.
                    if h.websocket && h.rules.iter().all(|r| r.deny) {
                        out.push_str(if h.gql.is_some() {
                            "    allow GET /z\n"
                        } else {
                            "    allow WEBSOCKET_TEXT /z\n"
                        });
                    }
                    if let Some(n) = h.message_limit {
                        out.push_str(&format!("    body_limit {n}\n"));
                    }
                    for r in &h.rules {
                        // Beside GraphQL rules a `WEBSOCKET_TEXT`
                        // allowance is refused (E0507): it allows the
                        // upgrade instead.
                        let methods = match (&h.gql, r.deny, r.methods) {
                            (Some(_), false, "WEBSOCKET_TEXT") => "GET",
                            (_, _, m) => m,
                        };
                        out.push_str(&format!(
                            "    {} {} {}{}\n",
                            if r.deny { "deny" } else { "allow" },
                            methods,
                            r.path.text(),
                            r.query
                        ));
                    }
                    for line in h.gql.iter().flat_map(Gql::rule_lines) {
                        out.push_str(&format!("    {line}\n"));
                    }
                    out.push_str("  }\n");
                }
            }
        }
        out.push_str("}\n");
        out
    }

    /// A request built from this policy's patterns, with its body
    /// (`None`: no body).
    pub fn request(&self, rng: &mut Rng) -> (Request, Option<Vec<u8>>, Option<Probe>) {
        let e = &self.endpoints[rng.below(self.endpoints.len())];
        let bin = e.bins[rng.below(e.bins.len())].concrete(rng);
        let host = if rng.chance(20) && !self.creds.is_empty() {
            let c = &self.creds[rng.below(self.creds.len())];
            c.hosts[rng.below(c.hosts.len())].concrete(rng)
        } else {
            e.host.concrete(rng)
        };
        let mut graphql = e.graphql.as_ref().map(|g| g.request(rng));
        let (method, path) = match &e.http {
            _ if graphql.is_some() => (
                graphql.as_ref().map_or("POST", |g| g.0),
                (*rng.pick(&["/graphql", "/graphql", "/"])).to_owned(),
            ),
            _ if e.rpc.is_some() => (
                *rng.pick(&["POST", "POST", "POST", "POST", "GET", "DELETE"]),
                (*rng.pick(&["/", "/mcp"])).to_owned(),
            ),
            Some(h) if !h.rules.is_empty() && rng.chance(85) => {
                let r = &h.rules[rng.below(h.rules.len())];
                let m = match r.methods {
                    "*" => *rng.pick(&["GET", "POST", "PUT", "PROPFIND"]),
                    "GET HEAD" => *rng.pick(&["GET", "HEAD"]),
                    "WEBSOCKET_TEXT" => "GET",
                    m => m,
                };
                (m, r.path.concrete(rng))
            }
            _ => (
                *rng.pick(&["GET", "POST", "DELETE"]),
                (*rng.pick(&["/", "/a", "/a/b", "/x/a"])).to_owned(),
            ),
        };
        let query = match &graphql {
            Some((_, q, _)) if !q.is_empty() => q.clone(),
            _ => (*rng.pick(&["", "", "?q=ab", "?state=open", "?q=b&q=a"])).to_owned(),
        };
        let body = match (&e.rpc, graphql.take()) {
            (_, Some((_, _, body))) => body,
            (Some(r), None) => r.body(rng),
            (None, None) if rng.chance(10) => rpc::any_body(rng),
            (None, None) => None,
        };
        let websocket = e.http.as_ref().is_some_and(|h| h.websocket);
        let ws_gql = e.http.as_ref().and_then(|h| h.gql.as_ref());
        let probe = if rng.chance(if websocket { 75 } else { 10 }) {
            Some(match rng.below(5) {
                0 => Probe::Upgrade,
                1 | 2 if ws_gql.is_some() && rng.chance(80) => {
                    let mut t = ws_gql.map(|g| g.ws_message(rng)).unwrap_or_default();
                    if rng.chance(20) {
                        let n = *rng.pick(MESSAGE_SIZES);
                        while t.len() < n {
                            t.push(' ');
                        }
                    }
                    Probe::Text(t)
                }
                1 => Probe::Text("hi".to_owned()),
                2 => Probe::Text("x".repeat(*rng.pick(MESSAGE_SIZES))),
                3 => Probe::Binary(1),
                _ => Probe::Binary(*rng.pick(MESSAGE_SIZES)),
            })
        } else {
            None
        };
        let body = body.filter(|_| probe.is_none());
        let req = Request {
            binary: bin,
            sha256: None,
            host: Some(host),
            addr: None,
            port: *rng.pick(&[443, 443, 8443, 80]),
            http: Some(HttpRequest {
                method: method.to_owned(),
                target: format!("{path}{query}"),
            }),
        };
        (req, body, probe)
    }
}
