//! JSON-RPC and MCP endpoints for the generated tests: rule blocks that
//! compile (the language refuses what OpenShell refuses), and request
//! bodies drawn from the rules' methods and tools, with the shapes the
//! evaluator tells apart: notifications, null ids, `tools/call` without a
//! name or with a name outside the strict pattern, response frames,
//! batches, bodies that are not JSON-RPC, and bodies around the limits.

use super::generate::Rng;

const MCP_METHODS: &[&str] = &[
    "initialize",
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/*",
    "resources/read",
    "ping",
];
const JSON_METHODS: &[&str] = &["a.get", "a.put", "b", "*", "tools/call"];
const TOOL_GLOBS: &[&str] = &[
    "search",
    "search_*",
    "read_*",
    "send_email",
    "*",
    "a.b",
    "dotted:a.*",
    "x?",
];
const TOOL_LITERALS: &[&str] = &["search", "send_email", "a.b", "read_file"];
const LIMITS: &[u32] = &[80, 200, 65536, 100_000];

#[derive(Debug, Clone)]
pub struct Rpc {
    pub mcp: bool,
    pub audit: bool,
    pub all_methods: bool,
    pub loose: bool,
    pub limit: Option<u32>,
    pub rules: Vec<RpcRule>,
}

#[derive(Debug, Clone)]
pub struct RpcRule {
    pub deny: bool,
    pub methods: Vec<&'static str>,
    pub tools: Option<Vec<&'static str>>,
}

fn rule(rng: &mut Rng, mcp: bool, deny: bool) -> RpcRule {
    let methods = rng.some(if mcp { MCP_METHODS } else { JSON_METHODS }, 2);
    let tools = (mcp && rng.chance(60)).then(|| rng.some(TOOL_GLOBS, 2));
    RpcRule {
        deny,
        methods,
        tools,
    }
}

impl Rpc {
    pub fn random(rng: &mut Rng) -> Rpc {
        let mcp = rng.chance(65);
        let mut r = Rpc {
            mcp,
            audit: rng.chance(15),
            all_methods: mcp && rng.chance(20),
            loose: mcp && rng.chance(20),
            limit: rng.chance(20).then(|| *rng.pick(LIMITS)),
            rules: Vec::new(),
        };
        for _ in 0..1 + rng.below(2) {
            r.rules.push(rule(rng, mcp, false));
        }
        for _ in 0..rng.below(2) {
            r.rules.push(rule(rng, mcp, true));
        }
        r.fix();
        r
    }

    /// One small edit, the kind a pull request makes.
    pub fn mutate(&mut self, rng: &mut Rng) {
        match rng.below(7) {
            0 => self.all_methods = !self.all_methods,
            1 => self.loose = !self.loose,
            2 => self.limit = rng.chance(50).then(|| *rng.pick(LIMITS)),
            3 => {
                let deny = rng.chance(40);
                self.rules.push(rule(rng, self.mcp, deny));
            }
            4 if self.rules.len() > 1 => {
                let i = rng.below(self.rules.len());
                self.rules.remove(i);
            }
            5 => self.audit = !self.audit,
            _ => {
                if !self.rules.is_empty() {
                    let i = rng.below(self.rules.len());
                    let deny = if rng.chance(20) {
                        !self.rules[i].deny
                    } else {
                        self.rules[i].deny
                    };
                    self.rules[i] = rule(rng, self.mcp, deny);
                }
            }
        }
        self.fix();
    }

    /// Makes the block one the language accepts.
    fn fix(&mut self) {
        if !self.mcp {
            self.all_methods = false;
            self.loose = false;
        }
        for r in &mut self.rules {
            if !self.mcp {
                r.tools = None;
            }
            if let Some(ts) = &mut r.tools {
                // Tools narrow `tools/call` only; with loose names, only
                // literal tools.
                r.methods = vec!["tools/call"];
                if self.loose {
                    ts.retain(|t| TOOL_LITERALS.contains(t));
                    if ts.is_empty() {
                        ts.push("search");
                    }
                }
            }
        }
        let narrowed = self.rules.iter().any(|r| !r.deny && r.tools.is_some());
        if narrowed {
            for r in &mut self.rules {
                if r.tools.is_none() {
                    r.methods.retain(|m| !m.starts_with("tools/"));
                }
            }
            self.rules.retain(|r| !r.methods.is_empty());
        }
        let allows = self.rules.iter().any(|r| !r.deny);
        if !allows && !self.all_methods {
            self.rules.push(RpcRule {
                deny: false,
                methods: vec![if self.mcp { "initialize" } else { "a.get" }],
                tools: None,
            });
        }
    }

    /// The words after the destination: protocol and flags.
    pub fn options(&self) -> String {
        let mut out = String::from(if self.mcp { " mcp" } else { " json-rpc" });
        if self.audit {
            out.push_str(" audit");
        }
        if self.all_methods {
            out.push_str(" all_mcp_methods");
        }
        if self.loose {
            out.push_str(" loose_tool_names");
        }
        out
    }

    /// The lines of the block.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(n) = self.limit {
            out.push(format!("body_limit {n}"));
        }
        for r in &self.rules {
            let mut line = format!(
                "{} rpc {}",
                if r.deny { "deny" } else { "allow" },
                r.methods.join(" ")
            );
            if let Some(ts) = &r.tools {
                line.push_str(&format!(" tool {}", ts.join(" ")));
            }
            out.push(line);
        }
        out
    }

    /// A body drawn from this endpoint's rules.
    pub fn body(&self, rng: &mut Rng) -> Option<Vec<u8>> {
        let methods: Vec<&str> = self
            .rules
            .iter()
            .flat_map(|r| r.methods.iter().copied())
            .collect();
        let tools: Vec<&str> = self
            .rules
            .iter()
            .flat_map(|r| r.tools.iter().flatten().copied())
            .collect();
        body_from(rng, &methods, &tools)
    }
}

fn concrete_method(rng: &mut Rng, m: &str) -> String {
    match m {
        "*" => (*rng.pick(&["a.get", "zz", "tools/call", "x y"])).to_owned(),
        "tools/*" => (*rng.pick(&["tools/call", "tools/list", "tools/x.y"])).to_owned(),
        m => m.to_owned(),
    }
}

fn concrete_tool(rng: &mut Rng, t: &str) -> String {
    let t = t.strip_prefix("dotted:").unwrap_or(t);
    let mut out = String::new();
    for c in t.chars() {
        match c {
            '*' => out.push_str(rng.pick::<&str>(&["", "x", "a.b", "q r"])),
            '?' => out.push_str(rng.pick::<&str>(&["z", "."])),
            c => out.push(c),
        }
    }
    out
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn call(rng: &mut Rng, methods: &[&str], tools: &[&str]) -> String {
    let method = if methods.is_empty() || rng.chance(15) {
        (*rng.pick(&["tools/call", "", "zz", "notifications/initialized", "ping"])).to_owned()
    } else {
        let m = *rng.pick(methods);
        concrete_method(rng, m)
    };
    let id = match rng.below(20) {
        0 | 1 => None,
        2 => Some("null"),
        3 => Some("\"s\""),
        _ => Some("1"),
    };
    let mut out = String::from(r#"{"jsonrpc":"2.0""#);
    if let Some(id) = id {
        out.push_str(&format!(r#","id":{id}"#));
    }
    out.push_str(&format!(r#","method":{}"#, quote(&method)));
    if method == "tools/call" && rng.chance(92) {
        let name = if tools.is_empty() || rng.chance(20) {
            let long = "x".repeat(129);
            let odd = ["a b", long.as_str(), "ü", "", "search", "send_email"];
            (*rng.pick(&odd)).to_owned()
        } else {
            let t = *rng.pick(tools);
            concrete_tool(rng, t)
        };
        out.push_str(&format!(r#","params":{{"name":{}}}"#, quote(&name)));
    }
    out.push('}');
    out
}

/// A body from these methods and tools, in every shape the evaluator
/// tells apart.
pub fn body_from(rng: &mut Rng, methods: &[&str], tools: &[&str]) -> Option<Vec<u8>> {
    let mut text = match rng.below(100) {
        0..5 => return None,
        5..9 => "not json".to_owned(),
        9..13 => r#"{"jsonrpc":"2.0","id":3,"result":{}}"#.to_owned(),
        13..23 => format!(
            "[{},{}]",
            call(rng, methods, tools),
            call(rng, methods, tools)
        ),
        _ => call(rng, methods, tools),
    };
    if rng.chance(8) {
        let n = *rng.pick(&[79usize, 81, 199, 201, 65536, 65537, 100_001]);
        if text.len() < n {
            text.push_str(&" ".repeat(n - text.len()));
        }
    }
    Some(text.into_bytes())
}

/// A body from the pools, for endpoints the request was not drawn from.
pub fn any_body(rng: &mut Rng) -> Option<Vec<u8>> {
    let methods: Vec<&str> = MCP_METHODS.iter().chain(JSON_METHODS).copied().collect();
    body_from(rng, &methods, TOOL_GLOBS)
}
