//! Property tests: every pattern kind's `matches` agrees with its regex on
//! random patterns and inputs drawn from small alphabets that hit the edge
//! cases (segments, `/`, `.`, `-`, empty segments and labels); canonical text
//! parses back equal; examples match; canonicalization is idempotent and
//! total; address classes agree with `internal_ranges`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use regex_automata::meta::Regex;

use super::net::{self, AddrClass};
use super::{
    AddrSet, BinaryGlob, DottedGlob, GraphqlNameGlob, HostPattern, HttpPathGlob, OperationTypeSet,
    PortSet, RpcMethod, ToolSet, ValueGlob, canonicalize_path, classify_addr,
};

/// What the agreement check needs from a pattern kind.
trait Pattern: Sized + Clone + PartialEq + std::fmt::Debug + std::fmt::Display {
    fn parse(text: &str) -> Option<Self>;
    fn matches(&self, input: &str) -> bool;
    fn to_regex(&self) -> String;
    fn example(&self) -> String;
}

macro_rules! pattern {
    ($($ty:ty),*) => {$(
        impl Pattern for $ty {
            fn parse(text: &str) -> Option<Self> {
                <$ty>::parse(text).ok()
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
    )*};
}
pattern!(
    HttpPathGlob,
    BinaryGlob,
    HostPattern,
    ValueGlob,
    DottedGlob,
    GraphqlNameGlob,
    RpcMethod,
    ToolSet
);

impl Pattern for OperationTypeSet {
    fn parse(text: &str) -> Option<Self> {
        Self::parse(text).ok()
    }
    fn matches(&self, input: &str) -> bool {
        Self::matches(self, input)
    }
    fn to_regex(&self) -> String {
        Self::to_regex(self)
    }
    fn example(&self) -> String {
        Self::example(self)
            .map(|t| t.to_string())
            .unwrap_or_default()
    }
}

fn agree<P: Pattern>(pattern: &str, inputs: &[String]) -> Result<(), TestCaseError> {
    let Some(p) = P::parse(pattern) else {
        return Ok(());
    };
    let regex = Regex::new(&format!("^(?:{})$", p.to_regex())).unwrap();
    // Near misses of a known match hit the boundaries random inputs rarely do.
    let example = p.example();
    let mut near: Vec<String> = ["", "/", "/a", "a", ".a", "-"]
        .iter()
        .flat_map(|s| [format!("{example}{s}"), format!("{s}{example}")])
        .collect();
    let chars: Vec<char> = example.chars().collect();
    for i in 0..chars.len() {
        let mut dropped = chars.clone();
        dropped.remove(i);
        near.push(dropped.iter().collect());
        let mut swapped = chars.clone();
        swapped[i] = if swapped[i] == 'a' { '/' } else { 'a' };
        near.push(swapped.iter().collect());
    }
    for input in inputs.iter().chain(&near) {
        prop_assert_eq!(
            p.matches(input),
            regex.is_match(input),
            "pattern `{}` regex `{}` input `{}`",
            pattern,
            p.to_regex(),
            input
        );
    }
    prop_assert_eq!(
        P::parse(&p.to_string()),
        Some(p.clone()),
        "round trip of `{}`",
        pattern
    );
    prop_assert!(
        p.matches(&p.example()),
        "example `{}` of `{}`",
        p.example(),
        pattern
    );
    Ok(())
}

fn joined(pieces: &'static [&'static str], max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 0..max).prop_map(|v| v.concat())
}

/// A segment pattern: `**` or one to three glob pieces.
fn path_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("**".to_owned()),
        5 => prop::collection::vec(
            prop::sample::select(&["a", "b", "a", "*", "?", "[a-b]", "[!a]", "-", ".", "%2F", "\\*"][..]),
            1..4,
        )
        .prop_map(|v| v.concat()),
    ]
}

/// `/` + segments, sometimes with a trailing `/` (HTTP only: binary paths
/// name files).
pub(crate) fn path_pattern(http: bool) -> impl Strategy<Value = String> {
    let min = usize::from(!http);
    (prop::collection::vec(path_segment(), min..5), any::<bool>()).prop_map(
        move |(segs, trailing)| {
            let mut out = format!("/{}", segs.join("/"));
            if http && trailing && !segs.is_empty() {
                out.push('/');
            }
            out
        },
    )
}

/// Inputs near the patterns: segments from a small alphabet, empty ones
/// included, with and without the leading `/`.
fn path_inputs() -> impl Strategy<Value = Vec<String>> {
    let segment = joined(&["a", "b", ".", "-", "%2F", "*", "x"], 3);
    let path = (prop::collection::vec(segment, 0..6), 0u8..4).prop_map(|(segs, form)| match form {
        0 => segs.join("/"),
        _ => format!("/{}", segs.join("/")),
    });
    prop::collection::vec(path, 32)
}

/// Path patterns in both cases, with a trailing `/` at times.
fn folding_path_pattern() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        1 => Just("**".to_owned()),
        5 => prop::collection::vec(
            prop::sample::select(&["a", "A", "b", "B", "*", "?", "[A-B]", "[!A]", "[a-b]", "[!b]", "%25"][..]),
            1..4,
        )
        .prop_map(|v| v.concat()),
    ];
    (prop::collection::vec(segment, 0..4), any::<bool>()).prop_map(|(segs, trailing)| {
        let mut out = format!("/{}", segs.join("/"));
        if trailing && !segs.is_empty() {
            out.push('/');
        }
        out
    })
}

/// Canonical-looking paths in both cases, with and without a trailing `/`.
fn folding_path_inputs() -> impl Strategy<Value = Vec<String>> {
    let segment = joined(&["a", "A", "b", "B", "x", "%25"], 3);
    let path =
        (prop::collection::vec(segment, 0..5), any::<bool>()).prop_map(|(segs, trailing)| {
            let mut out = format!("/{}", segs.join("/"));
            if trailing && !segs.is_empty() {
                out.push('/');
            }
            out
        });
    prop::collection::vec(path, 32)
}

fn host_pattern() -> impl Strategy<Value = String> {
    let label = prop::sample::select(
        &[
            "a", "b", "ab", "a-b", "x_y", "*", "*", "**", "a*", "*b", "a*b", "*-*", "A",
        ][..],
    );
    prop::collection::vec(label, 1..4).prop_map(|v| format!("{}.ex.com", v.join(".")))
}

fn host_inputs() -> impl Strategy<Value = Vec<String>> {
    let label = prop::sample::select(
        &[
            "a", "b", "ab", "a-b", "x_y", "axb", "b-a", "a-", "-b", "A", "é", "",
        ][..],
    );
    let host = (prop::collection::vec(label, 0..4), 0u8..5).prop_map(|(labels, form)| {
        let mut host = labels.join(".");
        if form > 0 {
            host.push_str(".ex.com");
        }
        host
    });
    prop::collection::vec(host, 32)
}

const VALUE_PIECES: &[&str] = &[
    "a", "b", "/", "*", "**", "?", "[ab]", "[!a]", "\\*", ".", "é",
];
const VALUE_INPUT: &[&str] = &["a", "b", "/", "*", ".", "é", "\n", ""];

/// Dotted globs: labels of glob pieces (`**` among them), joined by `.`,
/// sometimes with an empty label.
fn dotted_pattern() -> impl Strategy<Value = String> {
    let label = prop_oneof![
        1 => Just("**".to_owned()),
        1 => Just(String::new()),
        5 => prop::collection::vec(
            prop::sample::select(&["a", "b", "*", "?", "[ab]", "[!a]", "/", "\\*", "é"][..]),
            1..4,
        )
        .prop_map(|v| v.concat()),
    ];
    prop::collection::vec(label, 1..5).prop_map(|v| v.join("."))
}

/// Plain and dotted value globs mixed, as a query matcher holds them.
fn value_pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        joined(VALUE_PIECES, 7),
        dotted_pattern().prop_map(|p| format!("dotted:{p}")),
    ]
}

/// GraphQL name globs: name characters, wildcards, classes (one of no name
/// character), escapes and characters no name holds (refused).
fn name_pattern() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(
        &[
            "a", "b", "a", "B", "_", "1", "*", "**", "?", "[ab]", "[!a]", "[a-c_]", "[.]", "\\a",
            ".", "-",
        ][..],
    );
    prop::collection::vec(piece, 1..5).prop_map(|v| v.concat())
}

/// Names and near names: empty, a leading digit, characters no name holds.
fn name_inputs() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        joined(&["a", "b", "B", "_", "1", "c", ".", "-", "é"], 6),
        32,
    )
}

fn operation_type_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(
            &[
                "query",
                "Mutation",
                "subscription",
                "*",
                "QUERY",
                "query",
                "update",
            ][..],
        ),
        1..3,
    )
    .prop_map(|v| v.join(", "))
}

fn operation_type_inputs() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(
            &[
                "query",
                "mutation",
                "subscription",
                "Query",
                "",
                "*",
                "querymutation",
            ][..],
        )
        .prop_map(str::to_owned),
        8,
    )
}

/// RPC method patterns: `*`, exact names and `tools/` globs (plain and
/// dotted), with a few refused ones mixed in.
fn rpc_method_pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("*".to_owned()),
        2 => joined(&["a", "b", ".", "/", "tools", "é"], 4).prop_filter("non-empty", |s| !s.is_empty()),
        4 => joined(&["a", "c", "*", "?", "[ab]", ".", "/"], 4).prop_map(|g| format!("tools/{g}")),
        2 => joined(&["a", "*", "?", "."], 4).prop_map(|g| format!("dotted:tools/{g}")),
        1 => joined(&["a", "*"], 3).prop_map(|g| format!("resources/{g}")),
    ]
}

fn rpc_method_inputs() -> impl Strategy<Value = Vec<String>> {
    let method = (
        prop::sample::select(&["tools/", "", "tools", "a", "resources/"][..]),
        joined(&["a", "b", "c", ".", "/", "é", "call"], 4),
    )
        .prop_map(|(p, rest)| format!("{p}{rest}"));
    prop::collection::vec(method, 32)
}

/// Tool sets: one to three value globs separated by spaces.
fn tool_pattern() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => joined(&["a", "b", "_", "*", "?", "[ab]", "."], 4),
            1 => joined(&["a", "*", "."], 3).prop_map(|g| format!("dotted:{g}")),
        ]
        .prop_filter("non-empty", |s| !s.is_empty()),
        1..4,
    )
    .prop_map(|v| v.join(" "))
}

/// Guards against vacuous proptests: most generated patterns must parse and
/// a fair share of generated inputs must match.
fn coverage<P: Pattern>(
    pattern: impl Strategy<Value = String>,
    inputs: impl Strategy<Value = Vec<String>>,
) {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut parsed, mut pairs, mut hits) = (0, 0, 0);
    for _ in 0..300 {
        let text = pattern.new_tree(&mut runner).unwrap().current();
        let Some(p) = P::parse(&text) else { continue };
        parsed += 1;
        for input in inputs.new_tree(&mut runner).unwrap().current() {
            pairs += 1;
            hits += usize::from(p.matches(&input));
        }
    }
    let name = std::any::type_name::<P>();
    eprintln!("{name}: {parsed}/300 patterns parse, {hits}/{pairs} inputs match");
    assert!(parsed > 150, "{name}: only {parsed} of 300 patterns parse");
    assert!(
        hits * 40 > pairs,
        "{name}: only {hits} of {pairs} inputs match"
    );
}

#[test]
fn proptest_generators_are_not_vacuous() {
    coverage::<HttpPathGlob>(path_pattern(true), path_inputs());
    coverage::<BinaryGlob>(path_pattern(false), path_inputs());
    coverage::<HostPattern>(host_pattern(), host_inputs());
    coverage::<ValueGlob>(
        value_pattern(),
        prop::collection::vec(joined(VALUE_INPUT, 6), 32),
    );
    coverage::<DottedGlob>(
        dotted_pattern(),
        prop::collection::vec(joined(VALUE_INPUT, 6), 32),
    );
    coverage::<GraphqlNameGlob>(name_pattern(), name_inputs());
    coverage::<OperationTypeSet>(operation_type_pattern(), operation_type_inputs());
    coverage::<RpcMethod>(rpc_method_pattern(), rpc_method_inputs());
    coverage::<ToolSet>(
        tool_pattern(),
        prop::collection::vec(joined(&["a", "b", "_", "."], 4), 32),
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn http_path_regex_agrees(pattern in path_pattern(true), inputs in path_inputs()) {
        agree::<HttpPathGlob>(&pattern, &inputs)?;
    }

    /// `matches_folded(p)` is: the pattern text lowercased, without one
    /// trailing `/`, matches `fold_path(p)`; and `to_folded_regex` accepts
    /// exactly those paths.
    #[test]
    fn folded_path_matching_is_matching_folded_text(
        pattern in folding_path_pattern(),
        inputs in folding_path_inputs(),
    ) {
        let Ok(glob) = HttpPathGlob::parse(&pattern) else {
            return Ok(());
        };
        let lowered = pattern.to_ascii_lowercase();
        let text = match lowered.strip_suffix('/') {
            Some(rest) if !rest.is_empty() => rest,
            _ => lowered.as_str(),
        };
        let reference = HttpPathGlob::parse(text).unwrap();
        let regex = Regex::new(&format!("^(?:{})$", glob.to_folded_regex())).unwrap();
        let example = glob.folded_example();
        prop_assert!(glob.matches_folded(&example), "example `{}` of `{}`", example, pattern);
        for input in inputs.iter().chain(std::iter::once(&example)) {
            let want = reference.matches(&super::fold_path(input));
            prop_assert_eq!(glob.matches_folded(input), want, "`{}` on `{}`", pattern, input);
            prop_assert_eq!(regex.is_match(input), want, "regex of `{}` on `{}`", pattern, input);
        }
    }

    #[test]
    fn binary_regex_agrees(pattern in path_pattern(false), inputs in path_inputs()) {
        agree::<BinaryGlob>(&pattern, &inputs)?;
    }

    #[test]
    fn host_regex_agrees(pattern in host_pattern(), inputs in host_inputs()) {
        agree::<HostPattern>(&pattern, &inputs)?;
    }

    #[test]
    fn value_regex_agrees(
        pattern in value_pattern(),
        inputs in prop::collection::vec(joined(VALUE_INPUT, 8), 32),
    ) {
        agree::<ValueGlob>(&pattern, &inputs)?;
    }

    #[test]
    fn rpc_method_regex_agrees(pattern in rpc_method_pattern(), inputs in rpc_method_inputs()) {
        agree::<RpcMethod>(&pattern, &inputs)?;
    }

    #[test]
    fn tool_regex_agrees(
        pattern in tool_pattern(),
        inputs in prop::collection::vec(joined(&["a", "b", "_", ".", "é", "*"], 5), 32),
    ) {
        agree::<ToolSet>(&pattern, &inputs)?;
    }

    #[test]
    fn dotted_regex_agrees(
        pattern in dotted_pattern(),
        inputs in prop::collection::vec(joined(VALUE_INPUT, 8), 32),
    ) {
        agree::<DottedGlob>(&pattern, &inputs)?;
    }

    #[test]
    fn graphql_name_regex_agrees(pattern in name_pattern(), inputs in name_inputs()) {
        agree::<GraphqlNameGlob>(&pattern, &inputs)?;
    }

    #[test]
    fn operation_type_regex_agrees(pattern in operation_type_pattern(), inputs in operation_type_inputs()) {
        agree::<OperationTypeSet>(&pattern, &inputs)?;
    }

    /// On names, a name glob means what the plain value glob of the same
    /// text means: the name restriction only refuses what no name holds.
    #[test]
    fn graphql_name_and_value_glob_agree_on_names(
        pattern in name_pattern(),
        inputs in prop::collection::vec(joined(&["a", "b", "B", "_", "1"], 6), 16),
    ) {
        if let (Ok(n), Ok(v)) = (GraphqlNameGlob::parse(&pattern), ValueGlob::parse(&pattern)) {
            for input in &inputs {
                prop_assert_eq!(n.matches(input), v.matches(input), "`{}` on `{}`", pattern, input);
            }
        }
    }

    /// A dotted glob agrees with the plain glob of the same text on values
    /// without `.`, where the two kinds cannot differ.
    #[test]
    fn dotted_and_plain_agree_without_dots(
        pattern in dotted_pattern().prop_filter("one label", |p| !p.contains('.')),
        inputs in prop::collection::vec(joined(&["a", "b", "/", "*", "é", ""], 6), 16),
    ) {
        if let (Ok(d), Ok(p)) = (DottedGlob::parse(&pattern), ValueGlob::parse(&pattern)) {
            for input in &inputs {
                prop_assert_eq!(d.matches(input), p.matches(input), "`{}` on `{}`", pattern, input);
            }
        }
    }

    #[test]
    fn canonicalize_is_idempotent(
        raw in joined(&["/", "/", "a", ".", "..", "%2e", "%2E", "%2f", "%7e", "%41", "%zz", "%", "?", "#", ";", "%3b", "\\", " "], 10),
        allow in any::<bool>(),
    ) {
        let raw = format!("/{raw}");
        if let Ok(t) = canonicalize_path(&raw, allow) {
            let again = canonicalize_path(&t.path, allow).map(|a| a.path);
            prop_assert_eq!(again, Ok(t.path.clone()), "raw `{}`", raw);
        }
    }

    #[test]
    fn canonicalize_never_panics(raw in any::<String>(), allow in any::<bool>()) {
        let _ = canonicalize_path(&raw, allow);
    }

    #[test]
    fn internal_ranges_agree_with_classify(bits in any::<u128>(), v4 in any::<u32>(), pick in 0u8..4) {
        let addr: IpAddr = match pick {
            0 => IpAddr::from(Ipv4Addr::from(v4)),
            1 => IpAddr::from(Ipv6Addr::from((0x64_ff9b_u128 << 96) | u128::from(v4))),
            2 => IpAddr::from(Ipv6Addr::from((0x2002_u128 << 112) | (u128::from(v4) << 80) | (bits & 0xffff))),
            _ => IpAddr::from(Ipv6Addr::from(bits)),
        };
        let internal = net::internal_ranges().contains(addr);
        prop_assert_eq!(internal, classify_addr(addr) != AddrClass::Public, "{}", addr);
    }

    #[test]
    fn addr_set_algebra(a in prop::collection::vec((any::<u32>(), 8u8..=32), 1..5), b in prop::collection::vec((any::<u32>(), 8u8..=32), 1..5), probe in any::<u32>()) {
        let set = |v: &Vec<(u32, u8)>| AddrSet::from_nets(v.iter().map(|&(a, l)| ipnet::IpNet::new(IpAddr::from(Ipv4Addr::from(a)), l).unwrap()));
        let (sa, sb) = (set(&a), set(&b));
        let probe = IpAddr::from(Ipv4Addr::from(probe));
        prop_assert_eq!(sa.union(&sb).contains(probe), sa.contains(probe) || sb.contains(probe));
        prop_assert_eq!(sa.intersection(&sb).contains(probe), sa.contains(probe) && sb.contains(probe));
        prop_assert_eq!(sa.difference(&sb).contains(probe), sa.contains(probe) && !sb.contains(probe));
        prop_assert_eq!(sa.union(&sb).len_v4(), sa.len_v4() + sb.len_v4() - sa.intersection(&sb).len_v4());
        prop_assert_eq!(AddrSet::parse(&sa.to_string()).unwrap(), sa);
    }

    #[test]
    fn port_set_round_trips(ranges in prop::collection::vec((1u16..=u16::MAX, 0u16..200), 1..6)) {
        let set = PortSet::from_ranges(ranges.iter().map(|&(lo, w)| (lo, lo.saturating_add(w))));
        prop_assert_eq!(PortSet::parse(&set.to_string()).unwrap(), set);
    }
}
