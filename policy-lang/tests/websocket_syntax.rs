//! WebSocket endpoints in the language: the formatter's canonical form,
//! that formatting never changes the bundle, and what reaches the bundle.

mod support;

use policy_bundle::matcher::MethodSet;
use policy_bundle::{L7Endpoint, L7Protocol};
use support::{assert_formats_to, compile};

const MESSY: &str = "policy \"ws\" {
  allow   /usr/bin/agent ->  realtime.example.com:443   websocket {
      body_limit   65536
    allow   get  /v1/realtime/**   ?model=gpt-*
    allow WEBSOCKET_TEXT   /v1/realtime/**  # messages
     deny websocket_text /v1/realtime/admin/**
  }
  allow /usr/bin/agent -> api.example.com:443 websocket {
    path /graphql
    allow GET /graphql
    allow graphql   subscription field messageAdded
    persisted abc subscription name OnMessage field messageAdded
  }
  allow /usr/bin/agent -> open.example.com:443 read-write   websocket
}
";

const CANONICAL: &str = "policy \"ws\" {
  allow /usr/bin/agent -> realtime.example.com:443 websocket {
    body_limit 65536
    allow GET /v1/realtime/** ?model=gpt-*
    allow WEBSOCKET_TEXT /v1/realtime/**  # messages
    deny WEBSOCKET_TEXT /v1/realtime/admin/**
  }
  allow /usr/bin/agent -> api.example.com:443 websocket {
    path /graphql
    allow GET /graphql
    allow graphql subscription field messageAdded
    persisted abc subscription name OnMessage field messageAdded
  }
  allow /usr/bin/agent -> open.example.com:443 websocket read-write
}
";

#[test]
fn formatting_is_canonical_and_keeps_the_digest() {
    assert_formats_to(MESSY, CANONICAL, "ws");
}

#[test]
fn rules_presets_and_limits_reach_the_bundle() {
    let b = compile("ws-bundle", CANONICAL);
    let l7 = &b.enforcement.l7;
    assert_eq!(l7.len(), 3);
    assert!(l7.iter().all(|e| e.protocol() == L7Protocol::Websocket));
    assert!(l7.iter().all(|e| !e.reads_body()));
    let rt = l7.iter().find(|e| e.body_limit().is_some()).unwrap();
    assert_eq!(rt.body_limit(), Some(65536));
    assert_eq!(rt.rest().unwrap().allow.len(), 2);
    assert_eq!(rt.rest().unwrap().deny.len(), 1);
    assert_eq!(
        rt.rest().unwrap().deny[0].methods,
        MethodSet::parse("WEBSOCKET_TEXT").unwrap()
    );
    assert!(!rt.graphql_over_websocket());
    let gql = l7.iter().find(|e| e.path.is_some()).unwrap();
    assert!(gql.graphql_over_websocket());
    assert_eq!(gql.graphql().unwrap().allow.len(), 1);
    assert!(gql.persisted_query("abc").is_some());
    // read-write: the upgrade and client text messages, nothing else.
    let open = l7
        .iter()
        .find(|e| e.path.is_none() && e.body_limit().is_none())
        .unwrap();
    assert_eq!(open.rest().unwrap().allow.len(), 1);
    assert_eq!(
        open.rest().unwrap().allow[0].methods,
        MethodSet::parse("GET WEBSOCKET_TEXT").unwrap()
    );
    // Blame: each rule keeps the line it was written on.
    let prov = b
        .enforcement
        .l7
        .iter()
        .map(L7Endpoint::provenance)
        .find(|p| p.deny.len() == 1)
        .unwrap();
    assert_eq!(prov.deny[0][0].line, 6);
}
