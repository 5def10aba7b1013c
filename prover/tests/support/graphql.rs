//! GraphQL endpoints for the generated tests: rule blocks that compile,
//! and requests drawn from the rules' types, names and fields, in the
//! shapes the evaluator tells apart: named and anonymous operations,
//! shorthand queries, aliases, fragments at the root, several operations
//! with and without `operationName`, batches, persisted-query hashes
//! (registered or not), GET requests with the document in the query
//! string, unreadable bodies and bodies around the limits.

use super::generate::Rng;

const TYPES: &[&str] = &["query", "mutation", "subscription", "query mutation", "*"];
const NAME_GLOBS: &[&str] = &["Get*", "*", "IssueCreate", "Get?iewer", "X"];
const FIELD_GLOBS: &[&str] = &[
    "viewer",
    "create*",
    "*",
    "repo?itory",
    "__typename",
    "deleteRepo",
];
const NAMES: &[&str] = &["GetViewer", "IssueCreate", "X", "Getx"];
const FIELDS: &[&str] = &[
    "viewer",
    "repository",
    "createIssue",
    "deleteRepo",
    "__typename",
    "search",
];
const IDS: &[&str] = &["h1", "h2"];
const LIMITS: &[u32] = &[120, 65536];

#[derive(Debug, Clone)]
pub struct Gql {
    pub audit: bool,
    /// `read-only`, `read-write` or `full`.
    pub preset: Option<&'static str>,
    pub limit: Option<u32>,
    pub rules: Vec<GqlRule>,
    /// Registered persisted queries: id, type, name, fields.
    pub persisted: Vec<(&'static str, &'static str, &'static str, Vec<&'static str>)>,
}

#[derive(Debug, Clone)]
pub struct GqlRule {
    pub deny: bool,
    pub types: &'static str,
    pub name: Option<&'static str>,
    pub fields: Option<Vec<&'static str>>,
}

fn rule(rng: &mut Rng, deny: bool) -> GqlRule {
    GqlRule {
        deny,
        types: TYPES[rng.below(TYPES.len())],
        name: rng.chance(35).then(|| *rng.pick(NAME_GLOBS)),
        fields: rng.chance(60).then(|| rng.some(FIELD_GLOBS, 2)),
    }
}

fn persisted(rng: &mut Rng) -> (&'static str, &'static str, &'static str, Vec<&'static str>) {
    (
        *rng.pick(IDS),
        *rng.pick(&["query", "mutation"]),
        *rng.pick(NAMES),
        rng.some(FIELDS, 2),
    )
}

impl Gql {
    pub fn random(rng: &mut Rng) -> Gql {
        let mut g = Gql {
            audit: rng.chance(15),
            preset: rng
                .chance(20)
                .then(|| *rng.pick(&["read-only", "read-write", "full"])),
            limit: rng.chance(15).then(|| *rng.pick(LIMITS)),
            rules: Vec::new(),
            persisted: Vec::new(),
        };
        for _ in 0..1 + rng.below(2) {
            g.rules.push(rule(rng, false));
        }
        for _ in 0..rng.below(2) {
            g.rules.push(rule(rng, true));
        }
        if rng.chance(25) {
            g.persisted.push(persisted(rng));
        }
        g.fix();
        g
    }

    /// One small edit, the kind a pull request makes.
    pub fn mutate(&mut self, rng: &mut Rng) {
        match rng.below(7) {
            0 => {
                self.preset = match self.preset {
                    None => Some(*rng.pick(&["read-only", "read-write", "full"])),
                    Some(_) => None,
                }
            }
            1 => self.limit = rng.chance(50).then(|| *rng.pick(LIMITS)),
            2 => {
                let deny = rng.chance(40);
                self.rules.push(rule(rng, deny));
            }
            3 if self.rules.len() > 1 => {
                let i = rng.below(self.rules.len());
                self.rules.remove(i);
            }
            4 => self.audit = !self.audit,
            5 => {
                if self.persisted.is_empty() || rng.chance(30) {
                    self.persisted = vec![persisted(rng)];
                } else {
                    self.persisted.clear();
                }
            }
            _ => {
                if !self.rules.is_empty() {
                    let i = rng.below(self.rules.len());
                    let deny = if rng.chance(20) {
                        !self.rules[i].deny
                    } else {
                        self.rules[i].deny
                    };
                    self.rules[i] = rule(rng, deny);
                }
            }
        }
        self.fix();
    }

    /// Makes the block one the language accepts: an allow rule or a
    /// preset.
    fn fix(&mut self) {
        if self.preset.is_none() && !self.rules.iter().any(|r| !r.deny) {
            self.rules.push(GqlRule {
                deny: false,
                types: "query",
                name: None,
                fields: None,
            });
        }
    }

    /// The words after the destination: protocol, mode and preset.
    pub fn options(&self) -> String {
        let mut out = String::from(" graphql");
        if self.audit {
            out.push_str(" audit");
        }
        if let Some(p) = self.preset {
            out.push(' ');
            out.push_str(p);
        }
        out
    }

    /// The lines of the block.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(n) = self.limit {
            out.push(format!("body_limit {n}"));
        }
        out.extend(self.rule_lines());
        out
    }

    /// The rule and registry lines, as a websocket endpoint takes them
    /// too (GraphQL over WebSocket).
    pub fn rule_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.rules {
            let mut line = format!(
                "{} graphql {}",
                if r.deny { "deny" } else { "allow" },
                r.types
            );
            if let Some(n) = r.name {
                line.push_str(&format!(" name {n}"));
            }
            if let Some(fs) = &r.fields {
                line.push_str(&format!(" field {}", fs.join(" ")));
            }
            out.push(line);
        }
        for (id, ty, name, fields) in &self.persisted {
            out.push(format!(
                "persisted {id} {ty} name {name} field {}",
                fields.join(" ")
            ));
        }
        out
    }

    /// Names and fields this endpoint's rules speak of, made concrete.
    fn pools(&self, rng: &mut Rng) -> (Vec<String>, Vec<String>) {
        let mut names: Vec<String> = NAMES.iter().map(|n| (*n).to_owned()).collect();
        let mut fields: Vec<String> = FIELDS.iter().map(|f| (*f).to_owned()).collect();
        for r in &self.rules {
            if let Some(n) = r.name {
                names.push(concrete(rng, n));
            }
            for f in r.fields.iter().flatten() {
                fields.push(concrete(rng, f));
            }
        }
        (names, fields)
    }

    /// A GraphQL-over-WebSocket client text message drawn from this
    /// endpoint's rules: `subscribe` or legacy `start` with one request
    /// object, a persisted-query hash, lifecycle messages, a message of
    /// another type, and ones the endpoint cannot read.
    pub fn ws_message(&self, rng: &mut Rng) -> String {
        let (names, fields) = self.pools(rng);
        let kind = if rng.chance(80) { "subscribe" } else { "start" };
        match rng.below(100) {
            0..5 => "not json".to_owned(),
            5..15 => (*rng.pick(&[
                r#"{"type":"connection_init"}"#,
                r#"{"type":"ping"}"#,
                r#"{"type":"complete","id":"1"}"#,
                r#"{"type":"stop","id":"1"}"#,
            ]))
            .to_owned(),
            15..20 => r#"{"type":"next","id":"1","payload":{}}"#.to_owned(),
            20..23 => format!(r#"{{"type":"{kind}","payload":{{"query":"{{ viewer }}"}}}}"#),
            23..33 => {
                let id = if rng.chance(80) { *rng.pick(IDS) } else { "h9" };
                format!(r#"{{"type":"{kind}","id":"1","payload":{{"id":"{id}"}}}}"#)
            }
            _ => format!(
                r#"{{"type":"{kind}","id":"1","payload":{}}}"#,
                request_object(rng, &names, &fields)
            ),
        }
    }

    /// A request drawn from this endpoint's rules: method, target suffix
    /// (a GET's query string) and body.
    pub fn request(&self, rng: &mut Rng) -> (&'static str, String, Option<Vec<u8>>) {
        let (names, fields) = self.pools(rng);
        if rng.chance(15) {
            let (document, name) = document(rng, &names, &fields);
            let mut query = format!("?query={}", encode(&document));
            if let Some(n) = name {
                query.push_str(&format!("&operationName={}", encode(&n)));
            }
            return ("GET", query, None);
        }
        let method = if rng.chance(5) { "PUT" } else { "POST" };
        let mut text = match rng.below(100) {
            0..4 => "not json".to_owned(),
            4..12 => {
                let id = if rng.chance(80) { *rng.pick(IDS) } else { "h9" };
                format!(
                    r#"{{"extensions":{{"persistedQuery":{{"version":1,"sha256Hash":"{id}"}}}}}}"#
                )
            }
            12..22 => format!(
                "[{},{}]",
                request_object(rng, &names, &fields),
                request_object(rng, &names, &fields)
            ),
            _ => request_object(rng, &names, &fields),
        };
        if rng.chance(8) {
            let n = *rng.pick(&[119usize, 121, 65536, 65537]);
            if text.len() < n {
                text.push_str(&" ".repeat(n - text.len()));
            }
        }
        (method, String::new(), Some(text.into_bytes()))
    }
}

/// A name or field matching `glob` (a GraphQL name with `*` and `?`).
fn concrete(rng: &mut Rng, glob: &str) -> String {
    let mut out = String::new();
    for c in glob.chars() {
        match c {
            '*' => out.push_str(rng.pick::<&str>(&["", "x", "Issue", "_q"])),
            '?' => out.push_str(rng.pick::<&str>(&["z", "V"])),
            c => out.push(c),
        }
    }
    if out.is_empty() { "e".to_owned() } else { out }
}

fn selection(rng: &mut Rng, fields: &[String]) -> String {
    let mut parts = Vec::new();
    for _ in 0..1 + rng.below(2) {
        let f = rng.pick(fields);
        let part = match rng.below(10) {
            0 => format!("a{}: {f}", rng.below(9)),
            1 => format!("... on Query {{ {f} }}"),
            _ => f.clone(),
        };
        parts.push(part);
    }
    parts.join(" ")
}

/// A document of one or two operations, and the `operationName` to send.
fn document(rng: &mut Rng, names: &[String], fields: &[String]) -> (String, Option<String>) {
    let ty = *rng.pick(&["query", "query", "mutation", "subscription"]);
    let name = rng.chance(75).then(|| rng.pick(names).clone());
    let body = selection(rng, fields);
    let mut doc = match (&name, rng.below(10)) {
        (None, 0..3) if ty == "query" => format!("{{ {body} }}"),
        (Some(n), 3) => format!("{ty} {n} {{ ...F }} fragment F on Query {{ {body} }}"),
        (Some(n), _) => format!("{ty} {n} {{ {body} }}"),
        (None, _) => format!("{ty} {{ {body} }}"),
    };
    let mut sent = name.clone();
    if name.is_some() && rng.chance(15) {
        let other = format!("Other{}", rng.below(3));
        let oty = *rng.pick(&["query", "mutation"]);
        doc.push_str(&format!(" {oty} {other} {{ {} }}", selection(rng, fields)));
        sent = match rng.below(3) {
            0 => None,
            1 => Some(other),
            _ => name,
        };
    } else if rng.chance(20) {
        sent = None;
    }
    (doc, sent)
}

fn request_object(rng: &mut Rng, names: &[String], fields: &[String]) -> String {
    let (doc, name) = document(rng, names, fields);
    let mut out = format!(r#"{{"query":{}"#, quote(&doc));
    if let Some(n) = name {
        out.push_str(&format!(r#","operationName":{}"#, quote(&n)));
    }
    out.push('}');
    out
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// Percent-encodes a query-string value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
