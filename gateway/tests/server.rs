//! The HTTPS layer as an attacker and an operator meet it, over raw TLS on
//! loopback: slow and oversized bodies, connections held open, refusals
//! that would grow the audit log, the health and metrics endpoints, and
//! the graceful stop.
// `cfg(test)` extends clippy.toml's test exemptions to the helpers below.
#![cfg(test)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use gateway::app::ClientLimits;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A TLS connection to the gateway from `from` (another loopback address
/// is another peer).
async fn connect(gw: &Gw, from: &str) -> std::io::Result<TlsStream<TcpStream>> {
    connect_raw(gw.running.addr, &gw.ca, from).await
}

fn admin_token(gw: &Gw) -> String {
    std::fs::read_to_string(gw.path("admin.token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// Reads one answer: status, head, JSON body.
async fn read_answer(s: &mut TlsStream<TcpStream>) -> (u16, String, Value) {
    let (status, head, body) = read_raw_answer(s).await;
    (
        status,
        head,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    )
}

/// Whether the server closes the connection (EOF or reset) within `t`.
async fn closes_within(s: &mut TlsStream<TcpStream>, t: Duration) -> bool {
    let mut rest = [0u8; 256];
    matches!(
        tokio::time::timeout(t, s.read(&mut rest)).await,
        Ok(Ok(0) | Err(_))
    )
}

fn limits(f: impl FnOnce(&mut ClientLimits)) -> ClientLimits {
    let mut l = quiet();
    f(&mut l);
    l
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_sent_too_slowly_is_answered_408_and_the_connection_closed() {
    let gw = Gw::start_limited(
        Backend::Sqlite,
        limits(|l| l.body_timeout = Duration::from_secs(1)),
    )
    .await;
    let mut s = connect(&gw, "127.0.0.1").await.unwrap();
    let head = format!(
        "POST /v1/policies/p/proposals HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{",
        admin_token(&gw)
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.flush().await.unwrap();
    let (status, head, body) = tokio::time::timeout(T, read_answer(&mut s)).await.unwrap();
    assert_eq!(status, 408, "{body}");
    assert_eq!(body["error"]["code"], "body_timeout");
    assert!(head.contains("connection: close"), "{head}");
    assert!(closes_within(&mut s, T).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_body_is_never_read() {
    // The body timeout is longer than the test waits for the answer: a
    // server that read the body first would not answer in time.
    let gw = Gw::start_limited(
        Backend::Sqlite,
        limits(|l| l.body_timeout = Duration::from_secs(600)),
    )
    .await;
    let mut s = connect(&gw, "127.0.0.1").await.unwrap();
    s.write_all(
        b"POST /v1/policies/p/proposals HTTP/1.1\r\nhost: localhost\r\ncontent-length: 1000\r\n\r\n",
    )
    .await
    .unwrap();
    s.flush().await.unwrap();
    let (status, head, body) = tokio::time::timeout(Duration::from_secs(30), read_answer(&mut s))
        .await
        .expect("the refusal waited for the body");
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized");
    assert!(head.contains("connection: close"), "{head}");
    assert!(closes_within(&mut s, T).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_announced_past_the_drain_limit_gets_its_413_before_it_is_sent() {
    let gw = Gw::start_limited(Backend::Sqlite, quiet()).await;
    let mut s = connect(&gw, "127.0.0.1").await.unwrap();
    let head = format!(
        "POST /v1/policies/p/proposals HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\ncontent-length: {}\r\nexpect: 100-continue\r\n\r\n",
        admin_token(&gw),
        17 * 1024 * 1024
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.flush().await.unwrap();
    let (status, _, body) = tokio::time::timeout(T, read_answer(&mut s)).await.unwrap();
    assert_eq!(
        status, 413,
        "a `100 Continue` or another answer came first: {body}"
    );
    assert_eq!(body["error"]["code"], "body_too_large");
    assert_eq!(body["error"]["status"], 413);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_of_one_address_cannot_starve_another() {
    let gw = Gw::start_limited(
        Backend::Sqlite,
        limits(|l| {
            l.max_connections_per_peer = 20;
            l.header_timeout = Duration::from_secs(2);
        }),
    )
    .await;
    // 100 connections from 127.0.0.2 that send their head one byte at a
    // time: the first 20 are served (and cut off at the head timeout),
    // the rest closed at once.
    let mut attackers = Vec::new();
    for _ in 0..100 {
        let gw_addr = gw.running.addr;
        let ca = gw.ca.clone();
        attackers.push(tokio::spawn(async move {
            let probe = connect_raw(gw_addr, &ca, "127.0.0.2").await;
            let Ok(mut s) = probe else { return "refused" };
            for b in b"GET /v1/proposals HTTP/1.1\r\nhost: localhost\r\nx-slow: " {
                if s.write_all(&[*b]).await.is_err() || s.flush().await.is_err() {
                    return "cut";
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            "lasted"
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..20 {
        let r = send(&gw.admin, "GET", "/v1/proposals", None).await;
        assert_eq!(r.status, 200, "{:?}", r.json());
    }
    let mut seen = std::collections::BTreeMap::new();
    for a in attackers {
        *seen.entry(a.await.unwrap()).or_insert(0) += 1;
    }
    assert_eq!(
        seen.get("lasted"),
        None,
        "a trickling head outlived the head timeout: {seen:?}"
    );
    let refused = gw
        .running
        .app
        .metrics
        .connections_refused
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(refused >= 80, "{refused} connections refused; {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let gw = Gw::start_limited(Backend::Sqlite, quiet()).await;
    let anonymous = gw.admin.with_token("osg_not_a_token");
    let h = send(&anonymous, "GET", "/healthz", None).await;
    assert_eq!((h.status, h.json()), (200, json!({"status": "ok"})));
    let r = send(&anonymous, "GET", "/readyz", None).await;
    assert_eq!(r.status, 200, "{:?}", r.json());
    assert_eq!(r.json()["database"], "ok");
    assert_eq!(r.json()["stopping"], false);
    let m = send(&anonymous, "GET", "/metrics", None).await;
    assert_eq!(m.status, 401);
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    propose(&alice, "agent", &wide()).await;
    let sb = gw.sandbox("sb", "agent").await;
    assert_eq!(send(&sb, "GET", "/metrics", None).await.status, 403);
    let reader = gw.person("carol", "reader").await;
    let m = send(&reader, "GET", "/metrics", None).await;
    assert_eq!(m.status, 200);
    let text = String::from_utf8(m.body.to_vec()).unwrap();
    for want in [
        "openshell_gateway_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1",
        "openshell_gateway_requests_total{method=\"POST\",route=\"/v1/policies/{name}/proposals\",status=\"201\"} 2",
        "openshell_gateway_proof_duration_seconds_count{verdict=\"widened\"} 1",
        "openshell_gateway_request_duration_seconds_count{route=\"/readyz\"} 1",
        "# TYPE openshell_gateway_proof_duration_seconds histogram",
        "openshell_gateway_waiting_polls 0",
        "openshell_gateway_store_errors_total 0",
    ] {
        assert!(text.contains(want), "`{want}` missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_stop_answers_waiting_polls_and_takes_no_new_connection() {
    let gw = Gw::start_limited(Backend::Sqlite, quiet()).await;
    let alice = gw.person("alice", "author").await;
    let bob = gw.person("bob", "author").await;
    assert_eq!(
        approve(&bob, &propose(&alice, "agent", BASE).await)
            .await
            .status,
        200
    );
    let sb = gw.sandbox("sb", "agent").await;
    let first = send(&sb, "GET", "/v1/sandboxes/sb/bundle", None).await;
    let digest = first.json()["claims"]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let inm = format!("\"{digest}\"");
    let poll = {
        let sb = sb.clone();
        tokio::spawn(async move {
            sb.send(
                "GET",
                "/v1/sandboxes/sb/bundle?wait=120",
                None,
                &[("if-none-match", inm.as_str())],
                Duration::from_secs(150),
            )
            .await
            .unwrap()
        })
    };
    let app = Arc::clone(&gw.running.app);
    while app.wakeups.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let addr = gw.running.addr;
    let Gw {
        running, dir, ca, ..
    } = gw;
    let stopped = tokio::spawn(running.shutdown());
    let answered = tokio::time::timeout(T, poll).await.unwrap().unwrap();
    assert_eq!(answered.status, 304, "the waiting poll was not answered");
    assert_eq!(stopped.await.unwrap(), 0, "connections left at the end");
    assert!(
        connect_raw(addr, &ca, "127.0.0.1").await.is_err(),
        "a connection was taken after the stop"
    );
    drop(dir);
}

async fn audit_seq(gw: &Gw) -> i64 {
    gw.running.app.store.audit_head().await.unwrap().0
}

both!(
    refusals_without_a_token_are_audited_at_a_bounded_rate,
    |b| async move {
        let gw = Gw::start_limited(b, limits(|l| l.audited_refusals_per_minute = 5)).await;
        let anonymous = gw.admin.with_token("osg_not_a_token");
        let before = audit_seq(&gw).await;
        let long = format!("/v1/policies/{}/proposals", "a".repeat(10_000));
        for _ in 0..200 {
            let r = send(&anonymous, "POST", &long, None).await;
            assert_eq!(r.status, 401);
        }
        let written = audit_seq(&gw).await - before;
        // Five a minute, plus one summary and five more if a minute ended
        // during the loop.
        assert!((1..=11).contains(&written), "{written} audit rows");
        let rows = gw
            .running
            .app
            .store
            .audit_rows(0, i64::MAX, 1000)
            .await
            .unwrap();
        for r in rows.iter().filter(|r| r.actor == "anonymous") {
            assert!(
                r.subject.len() < 300,
                "{} bytes of subject",
                r.subject.len()
            );
        }
        let unaudited = gw
            .running
            .app
            .metrics
            .refusals_unaudited
            .load(std::sync::atomic::Ordering::Relaxed);
        assert!(unaudited >= 189, "{unaudited}");
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_hyper_cannot_parse_get_json_errors_too() {
    let gw = Gw::start_limited(Backend::Sqlite, quiet()).await;
    let cases: [(Vec<u8>, u16, &str); 4] = [
        (
            b"GET /x HTTP/1.1\r\nhost: a\r\nbad header\r\n\r\n".to_vec(),
            400,
            "malformed_request",
        ),
        (
            b"GET /x HTTP/1.1\r\nhost: a\r\ncontent-length: abc\r\n\r\n".to_vec(),
            400,
            "malformed_request",
        ),
        (b"NOT A REQUEST\r\n\r\n".to_vec(), 400, "malformed_request"),
        (
            format!(
                "GET /x HTTP/1.1\r\nhost: a\r\nx: {}\r\n\r\n",
                "a".repeat(600_000)
            )
            .into_bytes(),
            431,
            "header_too_large",
        ),
    ];
    for (req, status, code) in cases {
        let mut s = connect(&gw, "127.0.0.1").await.unwrap();
        // The head over the limit is cut off while it is still sent.
        let _ = s.write_all(&req).await;
        let _ = s.flush().await;
        let (got, head, body) = tokio::time::timeout(T, read_answer(&mut s)).await.unwrap();
        assert_eq!(
            (got, body["error"]["code"].as_str()),
            (status, Some(code)),
            "{head}"
        );
        assert_eq!(body["error"]["status"], status);
        assert!(head.contains("content-type: application/json"), "{head}");
    }
    let counted = gw
        .running
        .app
        .metrics
        .malformed_requests
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(counted, 4);
}
