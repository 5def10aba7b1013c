//! Table tests for the matcher module, read from `tests/matcher_cases/*.yaml`.
//!
//! Adding a case needs no Rust: each file is a list of entries whose fields
//! say what to check (see the comment at the top of each file). Every
//! pattern/input case is also checked against the pattern's regex, and every
//! pattern that parses is checked to print canonically and parse back equal.
//!
//! The proptests for the same agreement on random patterns and inputs live
//! in `src/matcher/proptests.rs`.

// clippy's test exemptions cover `#[test]` functions only, not the harness
// helpers of an integration test.
#![expect(
    clippy::unwrap_used,
    clippy::panic,
    reason = "test harness: a broken table or generator must fail loudly"
)]

use std::net::IpAddr;
use std::path::Path;

use policy_bundle::matcher::{
    AddrSet, BinaryGlob, CanonError, HostPattern, HttpPathGlob, MethodSet, PortSet, QueryMatcher,
    ValueGlob, canonical_ip, canonicalize_path, classify_addr, net, normalize_host,
    parse_query_string,
};
use regex_automata::meta::Regex;
use serde::Deserialize;

/// One table entry. Which fields are set decides what is checked.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Case {
    /// Pattern text (host, path, binary or value pattern, by file).
    pattern: Option<String>,
    /// Input to match; for hosts it is normalized first, like the proxy.
    input: Option<String>,
    matches: Option<bool>,
    /// Parsing (or canonicalizing) must fail; a string must appear in the
    /// error message (or be the `CanonError` variant name).
    error: Option<ErrorSpec>,
    /// With `error`: the byte offset the error points at.
    offset: Option<usize>,
    /// Expected canonical text / output.
    canonical: Option<String>,
    exact: Option<String>,
    prefix: Option<String>,
    suffix: Option<String>,
    example: Option<String>,
    // host.yaml
    normalize: Option<String>,
    // canon.yaml
    target: Option<String>,
    allow_encoded_slash: Option<bool>,
    path: Option<String>,
    query: Option<String>,
    // net.yaml
    ports: Option<String>,
    port: Option<u16>,
    addrs: Option<String>,
    ip: Option<String>,
    union: Option<String>,
    intersection: Option<String>,
    difference: Option<String>,
    subset_of: Option<String>,
    result: Option<String>,
    len: Option<u128>,
    len_v6: Option<u128>,
    class: Option<String>,
    metadata_host: Option<String>,
    // query.yaml
    raw_query: Option<String>,
    params: Option<Vec<(String, String)>>,
    key: Option<String>,
    any: Option<Vec<String>>,
    allows: Option<bool>,
    denies: Option<bool>,
    // method.yaml
    methods: Option<String>,
    method: Option<String>,
    /// Why the case holds; documentation only.
    why: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ErrorSpec {
    Any(bool),
    Containing(String),
}

struct Report {
    failures: Vec<String>,
    checks: usize,
}

impl Report {
    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.checks += 1;
        if !ok {
            self.failures.push(what());
        }
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, got: T, want: T, what: &str) {
        self.check(got == want, || {
            format!("{what}: got {got:?}, want {want:?}")
        });
    }
}

fn full_match(regex: &str, input: &str) -> bool {
    Regex::new(&format!("^(?:{regex})$"))
        .unwrap_or_else(|e| panic!("regex `{regex}` does not compile: {e}"))
        .is_match(input)
}

/// What every pattern type offers, so one runner checks them all.
trait Pattern: Sized + Clone + PartialEq + std::fmt::Debug + std::fmt::Display {
    fn parse(text: &str) -> Result<Self, String>;
    fn matches(&self, input: &str) -> bool;
    fn to_regex(&self) -> String;
    fn example(&self) -> String;
    /// Brings an input to the form `matches` expects, as enforcement does.
    fn prepare(input: &str) -> Option<String> {
        Some(input.to_owned())
    }
}

macro_rules! pattern {
    ($ty:ty) => {
        impl Pattern for $ty {
            fn parse(text: &str) -> Result<Self, String> {
                <$ty>::parse(text).map_err(|e| format!("{e} (help: {}; at {})", e.help, e.offset))
            }
            fn matches(&self, input: &str) -> bool {
                <$ty>::matches(self, input)
            }
            fn to_regex(&self) -> String {
                <$ty>::to_regex(self)
            }
            fn example(&self) -> String {
                <$ty>::example(self)
            }
        }
    };
}
pattern!(HttpPathGlob);
pattern!(BinaryGlob);
pattern!(ValueGlob);

impl Pattern for HostPattern {
    fn parse(text: &str) -> Result<Self, String> {
        HostPattern::parse(text).map_err(|e| format!("{e} (help: {}; at {})", e.help, e.offset))
    }
    fn matches(&self, input: &str) -> bool {
        HostPattern::matches(self, input)
    }
    fn to_regex(&self) -> String {
        HostPattern::to_regex(self)
    }
    fn example(&self) -> String {
        HostPattern::example(self)
    }
    fn prepare(input: &str) -> Option<String> {
        normalize_host(input).ok()
    }
}

fn pe(e: policy_bundle::matcher::PatternError) -> String {
    format!("{e} (help: {}; at {})", e.help, e.offset)
}

fn check_error(r: &mut Report, result: Result<String, String>, spec: &ErrorSpec, what: &str) {
    check_error_at(r, result, spec, None, what);
}

fn check_error_at(
    r: &mut Report,
    result: Result<String, String>,
    spec: &ErrorSpec,
    offset: Option<usize>,
    what: &str,
) {
    if let (Err(e), Some(at)) = (&result, offset) {
        r.check(e.ends_with(&format!("at {at})")), || {
            format!("{what}: error `{e}` is not at offset {at}")
        });
    }
    match (result, spec) {
        (Ok(got), _) => r.check(false, || format!("{what}: expected an error, got `{got}`")),
        (Err(e), ErrorSpec::Containing(s)) => {
            r.check(e.contains(s.as_str()), || {
                format!("{what}: error `{e}` lacks `{s}`")
            });
        }
        (Err(e), ErrorSpec::Any(want)) => {
            r.check(*want, || format!("{what}: unexpected error {e}"))
        }
    }
}

/// Checks a pattern case: parse/error, canonical text, round trip, example,
/// and match/regex agreement.
fn run_pattern<P: Pattern>(r: &mut Report, c: &Case, what: &str) -> Option<P> {
    let text = c.pattern.as_deref()?;
    let parsed = P::parse(text);
    if let Some(spec) = &c.error {
        check_error_at(r, parsed.map(|p| p.to_string()), spec, c.offset, what);
        return None;
    }
    let p = match parsed {
        Ok(p) => p,
        Err(e) => {
            r.check(false, || format!("{what}: `{text}` failed to parse: {e}"));
            return None;
        }
    };
    let shown = p.to_string();
    r.check(P::parse(&shown).as_ref() == Ok(&p), || {
        format!("{what}: `{shown}` does not parse back equal")
    });
    if let Some(want) = &c.canonical {
        r.eq(shown.as_str(), want.as_str(), &format!("{what}: canonical"));
    }
    let example = p.example();
    r.check(p.matches(&example), || {
        format!("{what}: example `{example}` does not match")
    });
    if let Some(want) = &c.example {
        r.eq(example.as_str(), want.as_str(), &format!("{what}: example"));
    }
    if let (Some(input), Some(want)) = (&c.input, c.matches) {
        let prepared = P::prepare(input);
        let got = prepared.as_deref().is_some_and(|i| p.matches(i));
        r.check(got == want, || {
            format!("{what}: `{text}` vs `{input}`: got {got}")
        });
        let by_regex = prepared
            .as_deref()
            .is_some_and(|i| full_match(&p.to_regex(), i));
        r.check(by_regex == want, || {
            format!(
                "{what}: regex `{}` vs `{input}`: got {by_regex}",
                p.to_regex()
            )
        });
    }
    Some(p)
}

fn run_host(r: &mut Report, c: &Case, what: &str) {
    if let Some(raw) = &c.normalize {
        let got = normalize_host(raw).map_err(pe);
        match &c.error {
            Some(spec) => check_error_at(r, got, spec, c.offset, what),
            None => r.eq(got, Ok(c.canonical.clone().unwrap_or_default()), what),
        }
        return;
    }
    if let Some(p) = run_pattern::<HostPattern>(r, c, what) {
        if let Some(want) = &c.exact {
            r.eq(
                p.exact(),
                Some(want.as_str()).filter(|w| !w.is_empty()),
                what,
            );
        }
        if let Some(want) = &c.suffix {
            r.eq(p.literal_suffix(), want.as_str(), what);
        }
    }
}

fn run_http(r: &mut Report, c: &Case, what: &str) {
    if let Some(p) = run_pattern::<HttpPathGlob>(r, c, what)
        && let Some(want) = &c.prefix
    {
        r.eq(p.literal_prefix(), want.clone(), what);
    }
}

fn run_binary(r: &mut Report, c: &Case, what: &str) {
    if let Some(p) = run_pattern::<BinaryGlob>(r, c, what) {
        if let Some(want) = &c.prefix {
            r.eq(p.literal_prefix(), want.as_str(), what);
        }
        if let Some(want) = &c.exact {
            r.eq(
                p.exact(),
                Some(want.as_str()).filter(|w| !w.is_empty()),
                what,
            );
        }
    }
}

fn canon_error_name(e: &CanonError) -> String {
    let debug = format!("{e:?}");
    debug.split([' ', '{', '(']).next().unwrap_or("").to_owned()
}

fn run_canon(r: &mut Report, c: &Case, what: &str) {
    let Some(target) = &c.target else {
        return r.check(false, || format!("{what}: canon case without `target`"));
    };
    let got = canonicalize_path(target, c.allow_encoded_slash.unwrap_or(false));
    if let Some(spec) = &c.error {
        let got = got.map(|t| t.path).map_err(|e| {
            let name = canon_error_name(&e);
            format!("{name}: {e}")
        });
        return check_error(r, got, spec, what);
    }
    let t = match got {
        Ok(t) => t,
        Err(e) => return r.check(false, || format!("{what}: `{target}` refused: {e}")),
    };
    if let Some(want) = &c.path {
        r.eq(t.path.as_str(), want.as_str(), what);
    }
    if let Some(want) = &c.query {
        r.eq(
            t.query.as_deref(),
            Some(want.as_str()).filter(|w| *w != "~none"),
            what,
        );
    }
    let again = canonicalize_path(&t.path, c.allow_encoded_slash.unwrap_or(false));
    r.eq(
        again.map(|a| a.path).ok(),
        Some(t.path.clone()),
        &format!("{what}: idempotent"),
    );
    if let (Some(pattern), Some(want)) = (&c.pattern, c.matches) {
        match HttpPathGlob::parse(pattern) {
            Ok(p) => r.eq(p.matches(&t.path), want, &format!("{what}: `{pattern}`")),
            Err(e) => r.check(false, || format!("{what}: `{pattern}`: {e}")),
        }
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse()
        .unwrap_or_else(|e| panic!("bad ip `{text}` in table: {e}"))
}

fn run_ports(r: &mut Report, c: &Case, what: &str, text: &str) {
    let parsed = PortSet::parse(text);
    if let Some(spec) = &c.error {
        return check_error_at(
            r,
            parsed.map(|p| p.to_string()).map_err(pe),
            spec,
            c.offset,
            what,
        );
    }
    let Ok(p) = parsed.map_err(|e| r.check(false, || format!("{what}: {e}"))) else {
        return;
    };
    r.eq(
        PortSet::parse(&p.to_string()).ok(),
        Some(p.clone()),
        &format!("{what}: round trip"),
    );
    if let Some(want) = &c.canonical {
        r.eq(p.to_string(), want.clone(), what);
    }
    if let (Some(port), Some(want)) = (c.port, c.matches) {
        r.eq(p.contains(port), want, &format!("{what}: contains {port}"));
    }
    if let Some(want) = c.len {
        r.eq(u128::from(p.len()), want, &format!("{what}: len"));
    }
    let other = |t: &Option<String>| t.as_deref().map(|t| PortSet::parse(t).unwrap());
    let result = if let Some(o) = other(&c.union) {
        Some(p.union(&o))
    } else if let Some(o) = other(&c.intersection) {
        Some(p.intersection(&o))
    } else {
        other(&c.difference).map(|o| p.difference(&o))
    };
    if let (Some(got), Some(want)) = (result, &c.result) {
        r.eq(got.to_string(), want.clone(), &format!("{what}: result"));
    }
    if let (Some(o), Some(want)) = (other(&c.subset_of), c.matches) {
        r.eq(p.is_subset(&o), want, &format!("{what}: subset"));
    }
}

fn run_addrs(r: &mut Report, c: &Case, what: &str, text: &str) {
    let parsed = AddrSet::parse(text);
    if let Some(spec) = &c.error {
        return check_error_at(
            r,
            parsed.map(|p| p.to_string()).map_err(pe),
            spec,
            c.offset,
            what,
        );
    }
    let Ok(a) = parsed.map_err(|e| r.check(false, || format!("{what}: {e}"))) else {
        return;
    };
    r.eq(
        AddrSet::parse(&a.to_string()).ok(),
        Some(a.clone()),
        &format!("{what}: round trip"),
    );
    if let Some(want) = &c.canonical {
        r.eq(a.to_string(), want.clone(), what);
    }
    if let (Some(addr), Some(want)) = (&c.ip, c.matches) {
        r.eq(
            a.contains(ip(addr)),
            want,
            &format!("{what}: contains {addr}"),
        );
    }
    let other = |t: &Option<String>| t.as_deref().map(|t| AddrSet::parse(t).unwrap());
    let result = if let Some(o) = other(&c.union) {
        a.union(&o)
    } else if let Some(o) = other(&c.intersection) {
        a.intersection(&o)
    } else if let Some(o) = other(&c.difference) {
        a.difference(&o)
    } else {
        a.clone()
    };
    if let Some(want) = &c.result {
        r.eq(result.to_string(), want.clone(), &format!("{what}: result"));
    }
    if let Some(want) = c.len {
        r.eq(
            u128::from(result.len_v4()),
            want,
            &format!("{what}: len_v4"),
        );
    }
    if let Some(want) = c.len_v6 {
        r.eq(result.len_v6(), want, &format!("{what}: len_v6"));
    }
    if let (Some(o), Some(want)) = (other(&c.subset_of), c.matches) {
        r.eq(a.is_subset(&o), want, &format!("{what}: subset"));
    }
}

fn run_net(r: &mut Report, c: &Case, what: &str) {
    if let Some(text) = &c.ports {
        run_ports(r, c, what, text);
    } else if let Some(text) = &c.addrs {
        run_addrs(r, c, what, text);
    } else if let (Some(addr), Some(want)) = (&c.ip, &c.class) {
        let got = serde_json::to_value(classify_addr(ip(addr))).unwrap();
        r.eq(
            got.as_str().unwrap_or(""),
            want.as_str(),
            &format!("{what}: class of {addr}"),
        );
        let internal = net::internal_ranges().contains(ip(addr));
        r.eq(
            internal,
            want != "public",
            &format!("{what}: internal_ranges has {addr}"),
        );
    } else if let (Some(addr), Some(want)) = (&c.ip, &c.canonical) {
        r.eq(
            canonical_ip(ip(addr)),
            ip(want),
            &format!("{what}: canonical_ip"),
        );
    } else if let (Some(host), Some(want)) = (&c.metadata_host, c.matches) {
        r.eq(
            net::is_metadata_host(host),
            want,
            &format!("{what}: metadata host"),
        );
    } else {
        r.check(false, || format!("{what}: net case checks nothing"));
    }
}

fn run_query(r: &mut Report, c: &Case, what: &str) {
    if c.pattern.is_some() {
        run_pattern::<ValueGlob>(r, c, what);
    } else if let Some(key) = &c.key {
        let globs: Vec<ValueGlob> = c
            .any
            .iter()
            .flatten()
            .map(|g| ValueGlob::parse(g).unwrap())
            .collect();
        let m = QueryMatcher::new(key.clone(), globs).unwrap();
        let params = parse_query_string(c.raw_query.as_deref().unwrap_or("")).unwrap();
        if let Some(want) = c.allows {
            r.eq(m.allows(&params), want, &format!("{what}: allows"));
        }
        if let Some(want) = c.denies {
            r.eq(m.denies(&params), want, &format!("{what}: denies"));
        }
    } else if let Some(raw) = &c.raw_query {
        let got = parse_query_string(raw);
        match &c.error {
            Some(spec) => check_error_at(
                r,
                got.map(|p| format!("{p:?}")).map_err(pe),
                spec,
                c.offset,
                what,
            ),
            None => r.eq(got.ok(), c.params.clone(), what),
        }
    } else {
        r.check(false, || format!("{what}: query case checks nothing"));
    }
}

fn run_method(r: &mut Report, c: &Case, what: &str) {
    let Some(text) = &c.methods else {
        return r.check(false, || format!("{what}: method case without `methods`"));
    };
    let parsed = MethodSet::parse(text);
    if let Some(spec) = &c.error {
        return check_error_at(
            r,
            parsed.map(|m| m.to_string()).map_err(pe),
            spec,
            c.offset,
            what,
        );
    }
    let Ok(m) = parsed.map_err(|e| r.check(false, || format!("{what}: {e}"))) else {
        return;
    };
    r.eq(
        MethodSet::parse(&m.to_string()).ok(),
        Some(m.clone()),
        &format!("{what}: round trip"),
    );
    if let Some(want) = &c.canonical {
        r.eq(m.to_string(), want.clone(), what);
    }
    if let (Some(method), Some(want)) = (&c.method, c.matches) {
        r.eq(
            m.contains(method),
            want,
            &format!("{what}: contains {method}"),
        );
        let by_regex = full_match(&m.to_regex(), &method.to_ascii_uppercase());
        r.eq(by_regex, want, &format!("{what}: regex contains {method}"));
    }
    if let (Some(other), Some(want)) = (&c.subset_of, c.matches.filter(|_| c.method.is_none())) {
        r.eq(
            m.is_subset(&MethodSet::parse(other).unwrap()),
            want,
            &format!("{what}: subset"),
        );
    }
}

#[test]
fn matcher_tables() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/matcher_cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut report = Report {
        failures: Vec::new(),
        checks: 0,
    };
    let mut total = 0;
    for file in &files {
        let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        let cases: Vec<Case> =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for (i, case) in cases.iter().enumerate() {
            let what = format!("{stem}.yaml #{} ({})", i + 1, describe(case));
            let run = match stem.as_str() {
                "host" => run_host,
                "http_path" => run_http,
                "binary" => run_binary,
                "canon" => run_canon,
                "net" => run_net,
                "query" => run_query,
                "method" => run_method,
                other => panic!("no runner for {other}.yaml"),
            };
            run(&mut report, case, &what);
        }
        total += cases.len();
    }
    eprintln!(
        "{total} cases, {} checks, {} files",
        report.checks,
        files.len()
    );
    assert!(total >= 150, "only {total} cases");
    assert!(
        report.failures.is_empty(),
        "{} failures:\n{}",
        report.failures.len(),
        report.failures.join("\n")
    );
}

fn describe(c: &Case) -> String {
    [
        &c.pattern,
        &c.input,
        &c.target,
        &c.normalize,
        &c.ports,
        &c.addrs,
        &c.ip,
        &c.raw_query,
        &c.methods,
    ]
    .iter()
    .filter_map(|f| f.as_deref())
    .collect::<Vec<_>>()
    .join(" | ")
}

#[test]
fn serde_stores_canonical_strings() {
    let host: HostPattern = serde_json::from_str("\"*.Example.COM.\"").unwrap();
    assert_eq!(serde_json::to_string(&host).unwrap(), "\"*.example.com\"");
    let ports: PortSet = serde_json::from_str("\"8443, 443,80\"").unwrap();
    assert_eq!(serde_json::to_string(&ports).unwrap(), "\"80,443,8443\"");
    let addrs: AddrSet =
        serde_json::from_str("[\"10.0.0.0/9\", \"10.128.0.0/9\", \"::1\"]").unwrap();
    assert_eq!(
        serde_json::to_string(&addrs).unwrap(),
        "[\"10.0.0.0/8\",\"::1\"]"
    );
    let methods: MethodSet = serde_json::from_str("[\"get\", \"HEAD\"]").unwrap();
    assert_eq!(
        serde_json::to_string(&methods).unwrap(),
        "[\"GET\",\"HEAD\"]"
    );
    assert_eq!(
        serde_json::to_string(&MethodSet::full()).unwrap(),
        "[\"*\"]"
    );
    let m = QueryMatcher::new("page", [ValueGlob::parse("[0-9]*").unwrap()]).unwrap();
    let json = serde_json::to_string(&m).unwrap();
    assert_eq!(json, "{\"key\":\"page\",\"any\":[\"[0-9]*\"]}");
    assert_eq!(serde_json::from_str::<QueryMatcher>(&json).unwrap(), m);
    assert!(serde_json::from_str::<HttpPathGlob>("\"/a/**b\"").is_err());
}
