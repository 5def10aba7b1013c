//! GraphQL request analysis on a realistic GitHub GraphQL POST body of about
//! 2 KiB: `ops_from_post` alone (every request parsed), the proxy's
//! `GraphqlReader` once the document is cached, each with the rule matching
//! a proxy does after it (operation type, name glob, every root field
//! against a list of field globs), and the phases of a parse (the document
//! phase is the purpose-built reader, which answers for this document;
//! apollo-parser alone is what the fallback would pay).
//! Run: `cargo bench -p policy-lang --bench graphql`.
#![expect(clippy::expect_used, reason = "a benchmark stops at the first failure")]

use std::hint::black_box;
use std::time::{Duration, Instant};

use policy_bundle::l7body::graphql::{GraphqlOp, GraphqlReader, check_content_type, ops_from_post};
use policy_bundle::matcher::{GraphqlNameGlob, OperationTypeSet};

/// The kind of query `gh pr list` sends: variables, fragments, aliases,
/// nested connections.
const DOCUMENT: &str = r"query PullRequestList($owner: String!, $repo: String!, $limit: Int!, $endCursor: String, $state: [PullRequestState!] = [OPEN]) {
  repository(owner: $owner, name: $repo) {
    pullRequests(first: $limit, after: $endCursor, states: $state, orderBy: {field: CREATED_AT, direction: DESC}) {
      totalCount
      nodes {
        ...PullRequestFields
        reviewDecision
        statusCheckRollup: commits(last: 1) {
          nodes {
            commit {
              statusCheckRollup {
                state
                contexts(first: 100) {
                  nodes {
                    __typename
                    ... on StatusContext { context state targetUrl }
                    ... on CheckRun { name status conclusion detailsUrl }
                  }
                }
              }
            }
          }
        }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
  viewer { login }
  rateLimit { limit cost remaining resetAt }
}

fragment PullRequestFields on PullRequest {
  number
  title
  state
  url
  isDraft
  createdAt
  updatedAt
  headRefName
  baseRefName
  headRepositoryOwner { login }
  author { login ... on User { name } }
  labels(first: 20) { nodes { name color } totalCount }
  assignees(first: 20) { nodes { login name } totalCount }
  reviewRequests(first: 20) { nodes { requestedReviewer { ... on User { login } ... on Team { slug } } } }
  milestone { title number }
  reactionGroups { content users { totalCount } }
  comments(last: 3) { totalCount nodes { author { login } body createdAt } }
  additions
  deletions
  changedFiles
}";

fn body() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "query": DOCUMENT,
        "operationName": "PullRequestList",
        "variables": {"owner": "cli", "repo": "cli", "limit": 30, "endCursor": null},
    }))
    .expect("serializes")
}

struct Rule {
    types: OperationTypeSet,
    name: Option<GraphqlNameGlob>,
    fields: Vec<GraphqlNameGlob>,
}

/// Allow-rule semantics: every root field matches one of the rule's globs.
fn allowed(rules: &[Rule], op: &GraphqlOp) -> bool {
    rules.iter().any(|r| {
        op.kind().is_some_and(|k| r.types.contains(k))
            && r.name
                .as_ref()
                .is_none_or(|g| g.matches_operation_name(op.name()))
            && op
                .root_fields()
                .iter()
                .all(|f| r.fields.iter().any(|g| g.matches(f)))
    })
}

/// The median time of `runs` calls of `f`.
fn median_time(runs: usize, f: &dyn Fn()) -> Duration {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        f();
        times.push(t.elapsed());
    }
    median(times)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn main() {
    let body = body();
    let glob = |s: &str| GraphqlNameGlob::parse(s).expect("glob");
    let rules = vec![
        Rule {
            types: OperationTypeSet::parse("mutation").expect("types"),
            name: Some(glob("Issue*")),
            fields: vec![glob("createIssue"), glob("updateIssue")],
        },
        Rule {
            types: OperationTypeSet::read_only(),
            name: None,
            fields: vec![
                glob("viewer"),
                glob("repository"),
                glob("rateLimit"),
                glob("search*"),
            ],
        },
    ];
    let ops = ops_from_post(&body).expect("analyses");
    assert!(ops.iter().all(|op| allowed(&rules, op)), "{ops:?}");
    println!(
        "body {} bytes, {:?}",
        body.len(),
        ops.first().map(GraphqlOp::root_fields)
    );

    let reader = GraphqlReader::default();
    let runs = 20_000;
    let mut analyse = Vec::with_capacity(runs);
    let mut whole = Vec::with_capacity(runs);
    let mut cached = Vec::with_capacity(runs);
    let mut cached_whole = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let ops = ops_from_post(black_box(&body));
        analyse.push(t.elapsed());
        black_box(ops.expect("analyses"));

        let t = Instant::now();
        let verdict = check_content_type(black_box(Some("application/json")))
            .and_then(|()| ops_from_post(black_box(&body)))
            .is_ok_and(|ops| ops.iter().all(|op| allowed(black_box(&rules), op)));
        whole.push(t.elapsed());
        assert!(black_box(verdict));

        let t = Instant::now();
        let ops = reader.ops_from_post(black_box(&body));
        cached.push(t.elapsed());
        black_box(ops.expect("analyses"));

        let t = Instant::now();
        let verdict = check_content_type(black_box(Some("application/json")))
            .and_then(|()| reader.ops_from_post(black_box(&body)))
            .is_ok_and(|ops| ops.iter().all(|op| allowed(black_box(&rules), op)));
        cached_whole.push(t.elapsed());
        assert!(black_box(verdict));
    }
    let phase = |f: &dyn Fn()| median_time(runs / 4, f);
    println!(
        "phases: JSON (serde_json::Value) {:?}, document (op_from_document) {:?}, apollo-parser alone {:?}",
        phase(&|| {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(&body)).ok());
        }),
        phase(&|| {
            black_box(
                policy_bundle::l7body::graphql::op_from_document(black_box(DOCUMENT), None).ok(),
            );
        }),
        phase(&|| {
            black_box(apollo_parser::Parser::new(black_box(DOCUMENT)).parse());
        }),
    );
    println!(
        "ops_from_post: median {:?} over {runs} runs",
        median(analyse)
    );
    println!(
        "content type + ops_from_post + rule match: median {:?} over {runs} runs",
        median(whole)
    );
    println!(
        "GraphqlReader::ops_from_post, document cached: median {:?} over {runs} runs",
        median(cached)
    );
    println!(
        "content type + cached reader + rule match: median {:?} over {runs} runs",
        median(cached_whole)
    );
    large(&reader);
}

/// The 32 KiB document of the proxy's largest GraphQL figure
/// (`supervisor/benches/proxy.rs`): a query of aliased root fields, each
/// with arguments and a selection, first seen and cached.
fn large(reader: &GraphqlReader) {
    let mut document = String::from("query Search($q: String!) { ");
    let mut i = 0;
    while document.len() < 32 * 1024 - 80 {
        document.push_str(&format!(
            "r{i}: repository(name: $q) {{ name issues(first: 10) {{ title }} }} "
        ));
        i += 1;
    }
    document.push('}');
    let body = serde_json::to_vec(&serde_json::json!({"query": document, "variables": {"q": "x"}}))
        .expect("serializes");
    let time = |f: &dyn Fn()| median_time(2_000, f);
    // The whole judgement a proxy asks for, through the shipped
    // github-graphql policy's evaluator (its document cache warm).
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../policies/github-graphql.policy");
    let (_, bundle) = policy_lang::load::compile_file(&path, None).expect("reads");
    let eval = policy_bundle::eval::Evaluator::new(bundle.expect("compiles"));
    let conn = eval.decide_connection("/usr/bin/gh", None, Some("api.github.com"), None, 443);
    let judge = || {
        eval.decide_body(
            &conn,
            Some("api.github.com"),
            "POST",
            "/graphql",
            black_box(&body),
        )
    };
    assert_eq!(
        judge().decision,
        policy_bundle::eval::Verdict::Allow,
        "{:?}",
        judge()
    );
    println!(
        "{} bytes, {i} root fields: JSON {:?}, document {:?}, ops_from_post {:?}, cached reader {:?}, Evaluator::decide_body {:?}",
        body.len(),
        time(&|| {
            black_box(serde_json::from_slice::<serde_json::Value>(black_box(&body)).ok());
        }),
        time(&|| {
            black_box(
                policy_bundle::l7body::graphql::op_from_document(black_box(&document), None).ok(),
            );
        }),
        time(&|| {
            black_box(ops_from_post(black_box(&body)).ok());
        }),
        time(&|| {
            black_box(reader.ops_from_post(black_box(&body)).ok());
        }),
        time(&|| {
            black_box(judge());
        }),
    );
}
