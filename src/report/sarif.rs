//! SARIF 2.1.0, as GitHub code scanning accepts it without rewriting:
//! locations relative to a `SRCROOT` base (the working directory), so the
//! same file has the same URI on every runner; columns counted as the JSON
//! output counts them; every rule a result names described in the run; and
//! the exit code in `invocations`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use policy_lang::diag::{Code, Diagnostic, Severity};
use prover::Category;
use serde_json::{Map, Value, json};

pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// The name results' relative URIs are resolved against.
const SRCROOT: &str = "SRCROOT";

/// The rule id of an input that could not be read or used.
pub const INPUT_ERROR: &str = "input-error";

/// A rule as the run describes it. A finding has one id wherever it is
/// reported: the diagnostic code (`R0105` from `check --prove` and from
/// `diff --prove` alike), with the prover's category as its name.
pub struct Rule {
    id: String,
    name: String,
    summary: String,
    help: String,
    level: &'static str,
}

impl Rule {
    /// A diagnostic code of the one registry (E, W, R and test T codes).
    /// A prover code is named for its category, so `check --prove` and
    /// `diff --prove` describe the rule identically.
    pub fn code(c: Code) -> Rule {
        let help = match c.id.chars().next() {
            Some('E') => {
                "an error in the policy: the result's message says what is wrong at its location and how to fix it; `openshell-policy check` reports every error of a file in one run"
            }
            Some('W') => {
                "a warning about the policy: the result's message says what is risky or redundant at its location and how to change it; `check --deny-warnings` makes warnings fail the build"
            }
            Some('R') => {
                "a risk the prover found, with a concrete witness request in the message; one that widens credentialed reach blocks `diff --prove`, new reach without a credential does not: narrow the rule at the location, or record the risk in an accepted-risks file (`diff --prove --accepted-risks`)"
            }
            _ => {
                "a problem with a policy test file: the result's message says what to change at its location"
            }
        };
        let name = Category::ALL
            .iter()
            .find(|k| k.code().id == c.id)
            .map_or(c.summary, |k| k.name());
        Rule {
            id: c.id.to_owned(),
            name: name.to_owned(),
            summary: c.summary.to_owned(),
            help: help.to_owned(),
            level: level(c.severity),
        }
    }

    /// A prover category: the rule of its code.
    pub fn category(c: Category) -> Rule {
        Rule::code(c.code())
    }

    pub fn input_error() -> Rule {
        Rule::new(
            INPUT_ERROR,
            "an input that cannot be used",
            "a file that cannot be read, does not compile, or a command line that is refused: nothing was checked for it; fix the input the message names and run again",
            "error",
        )
    }

    pub fn new(id: &str, summary: &str, help: &str, level: &'static str) -> Rule {
        Rule {
            id: id.to_owned(),
            name: summary.to_owned(),
            summary: summary.to_owned(),
            help: help.to_owned(),
            level,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "shortDescription": { "text": self.summary },
            "fullDescription": { "text": format!("{}: {}", self.summary, self.help) },
            "help": { "text": self.help },
            "defaultConfiguration": { "level": self.level },
        })
    }
}

pub fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

/// 1-based line and column (Unicode code points, as in the JSON output).
#[derive(Clone, Copy, Debug)]
pub struct Region {
    pub line: u32,
    pub column: u32,
    /// The end, when the item has one.
    pub end: Option<(u32, u32)>,
}

impl Region {
    pub fn at(line: u32, column: u32) -> Region {
        Region {
            line,
            column,
            end: None,
        }
    }

    fn to_json(self) -> Value {
        let (line, column) = (self.line.max(1), self.column.max(1));
        let mut r = json!({ "startLine": line, "startColumn": column });
        if let (Some((end_line, end_column)), Some(obj)) = (self.end, r.as_object_mut()) {
            let end_line = end_line.max(line);
            let end_column = if end_line == line {
                end_column.max(column)
            } else {
                end_column.max(1)
            };
            obj.insert("endLine".to_owned(), end_line.into());
            obj.insert("endColumn".to_owned(), end_column.into());
        }
        r
    }
}

/// One run of results, built up and then closed with the exit code.
pub struct Log {
    /// The working directory: the base of relative URIs.
    base: Option<PathBuf>,
    rules: BTreeMap<String, Value>,
    results: Vec<Value>,
    notifications: Vec<Value>,
    properties: Option<Value>,
}

impl Log {
    pub fn new() -> Log {
        Log {
            base: std::env::current_dir().ok().map(|d| normalize(&d)),
            rules: BTreeMap::new(),
            results: Vec::new(),
            notifications: Vec::new(),
            properties: None,
        }
    }

    /// Adds a result of `rule` (its `ruleId` set here), and the rule to
    /// the run's rule table.
    pub fn push(&mut self, rule: &Rule, mut result: Value) {
        if let Some(obj) = result.as_object_mut() {
            obj.insert("ruleId".to_owned(), rule.id.clone().into());
        }
        self.rules
            .entry(rule.id.clone())
            .or_insert_with(|| rule.to_json());
        self.results.push(result);
    }

    /// Why the run could not answer everything, as SARIF says it: a tool
    /// execution notification.
    pub fn notify(&mut self, level: &str, text: &str) {
        self.notifications
            .push(json!({ "level": level, "message": { "text": text } }));
    }

    pub fn set_properties(&mut self, properties: Value) {
        self.properties = Some(properties);
    }

    /// `locations` for a result in `path`: none for standard input, which
    /// has no URI (such a result stays in the log for people and tools that
    /// read it, though code scanning cannot place it).
    pub fn locations(&self, path: &str, region: Option<Region>) -> Value {
        if path == super::STDIN_NAME || path == super::STDIN_YAML_NAME {
            return json!([]);
        }
        let mut physical = Map::new();
        physical.insert("artifactLocation".to_owned(), self.artifact(path));
        if let Some(r) = region {
            physical.insert("region".to_owned(), r.to_json());
        }
        json!([{ "physicalLocation": physical }])
    }

    /// A relative, percent-encoded URI under `SRCROOT` when `path` is in
    /// the working directory, an absolute `file:` URI otherwise.
    fn artifact(&self, path: &str) -> Value {
        let p = Path::new(path);
        let Some(base) = &self.base else {
            return json!({ "uri": encode_path(p) });
        };
        let abs = normalize(&base.join(p));
        let inside = abs
            .strip_prefix(base)
            .ok()
            .map(Path::to_path_buf)
            .or_else(|| {
                // A path through a symbolic link to the working directory.
                let real = std::fs::canonicalize(&abs).ok()?;
                let real_base = std::fs::canonicalize(base).ok()?;
                real.strip_prefix(&real_base).ok().map(Path::to_path_buf)
            });
        match inside {
            Some(rel) if rel.as_os_str().is_empty() => {
                json!({ "uri": ".", "uriBaseId": SRCROOT })
            }
            Some(rel) => json!({ "uri": encode_path(&rel), "uriBaseId": SRCROOT }),
            None => json!({ "uri": file_uri(&abs) }),
        }
    }

    /// The whole SARIF log. `executionSuccessful` says whether the tool
    /// did its job, findings or not: exit 0 or 1, never 2 (unusable input)
    /// or 3 (a question left unanswered).
    pub fn finish(self, exit_code: u8) -> Value {
        let mut invocation = json!({
            "executionSuccessful": exit_code <= 1,
            "exitCode": exit_code,
        });
        if !self.notifications.is_empty()
            && let Some(obj) = invocation.as_object_mut()
        {
            obj.insert(
                "toolExecutionNotifications".to_owned(),
                Value::Array(self.notifications),
            );
        }
        let mut run = json!({
            "tool": {
                "driver": {
                    "name": "openshell-policy",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": "https://github.com/openshell-policy/openshell-policy",
                    "rules": self.rules.into_values().collect::<Vec<_>>(),
                }
            },
            "invocations": [invocation],
            "columnKind": "unicodeCodePoints",
            "results": self.results,
        });
        if let Some(obj) = run.as_object_mut() {
            if let Some(base) = &self.base {
                obj.insert(
                    "originalUriBaseIds".to_owned(),
                    json!({ SRCROOT: { "uri": format!("{}/", file_uri(base).trim_end_matches('/')) } }),
                );
            }
            if let Some(p) = self.properties {
                obj.insert("properties".to_owned(), p);
            }
        }
        json!({
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [run],
        })
    }
}

impl Default for Log {
    fn default() -> Self {
        Log::new()
    }
}

/// A diagnostic as a result at its span, with its code as the rule.
pub fn push_diagnostic(log: &mut Log, d: &Diagnostic) {
    let (line, column) = d.line_col();
    let end = d.file.line_col(d.span.end);
    let text = if d.help.is_empty() {
        d.message.clone()
    } else {
        format!("{} (help: {})", d.message, d.help)
    };
    let locations = log.locations(
        d.file.path(),
        Some(Region {
            line,
            column,
            end: Some(end),
        }),
    );
    log.push(
        &Rule::code(d.code),
        json!({
            "level": level(d.severity),
            "message": { "text": text },
            "locations": locations,
        }),
    );
}

/// `.` and `..` resolved without touching the file system (the file may
/// not exist: it is reported because it cannot be read).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => out.push(c),
        }
    }
    out
}

fn file_uri(abs: &Path) -> String {
    format!("file://{}", encode_path(abs))
}

/// The path's components joined by `/`, each percent-encoded as RFC 3986
/// wants in a path segment: everything but the unreserved characters, so a
/// space, `%`, `#`, `?` or a non-ASCII character (as its UTF-8 bytes)
/// cannot end the path or change its meaning.
fn encode_path(p: &Path) -> String {
    let mut out = String::new();
    for (i, c) in p.components().enumerate() {
        match c {
            Component::RootDir => {
                out.push('/');
                continue;
            }
            Component::CurDir => continue,
            Component::ParentDir | Component::Normal(_) | Component::Prefix(_) => {}
        }
        if i > 0 && !out.is_empty() && !out.ends_with('/') {
            out.push('/');
        }
        for b in c.as_os_str().as_encoded_bytes() {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(*b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_what_a_uri_path_cannot_hold() {
        assert_eq!(
            encode_path(Path::new("a dir/50%#?/é.policy")),
            "a%20dir/50%25%23%3F/%C3%A9.policy"
        );
        assert_eq!(encode_path(Path::new("/abs/x.policy")), "/abs/x.policy");
        assert_eq!(encode_path(Path::new("./x/./y")), "x/y");
    }

    #[test]
    fn relative_inside_the_base_absolute_outside() {
        let log = Log {
            base: Some(PathBuf::from("/no/such/base")),
            ..Log::new()
        };
        assert_eq!(
            log.artifact("./p/a b.policy"),
            json!({ "uri": "p/a%20b.policy", "uriBaseId": "SRCROOT" })
        );
        assert_eq!(
            log.artifact("/no/such/base/p/x.policy"),
            json!({ "uri": "p/x.policy", "uriBaseId": "SRCROOT" })
        );
        assert_eq!(
            log.artifact("../other/x.policy"),
            json!({ "uri": "file:///no/such/other/x.policy" })
        );
        assert_eq!(
            log.artifact("/etc/x.policy"),
            json!({ "uri": "file:///etc/x.policy" })
        );
    }
}
