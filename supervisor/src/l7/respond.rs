//! What the proxy answers itself, and what it logs.
//!
//! A refused request gets a JSON body and an `x-openshell-policy` header
//! naming the same code:
//!
//! ```json
//! {"error":"policy_denied","rule":"gh.policy:12 (agent)","reason":"POST /repos/o/r matches no allow rule","method":"POST","path":"/repos/o/r"}
//! ```
//!
//! | code | status | when |
//! |---|---|---|
//! | `policy_denied` | 403 | the rules deny the request (enforce mode) |
//! | `credential_not_bound` | 403 | a credential's placeholder on a request its binding does not cover, in the request target, or in a request body (any body, in a sandbox with credentials; then closed) |
//! | `host_mismatch` | 421 | Host, absolute-form target, SNI, port or destination disagree |
//! | `connect_refused`, `upgrade_refused` | 403 | `CONNECT`; an upgrade other than a well-formed WebSocket one to a websocket endpoint |
//! | `upgrade_refused` | 502 | a server's `101` that names an extension or a subprotocol not offered, or does not prove the key (then closed) |
//! | `connection_revoked` | 403 | a reload no longer allows the connection (then it is closed) |
//! | `credential_unavailable` | 503 | the supervisor could not read the secret |
//! | `bad_request` | 400 | no usable host or target |
//! | `body_too_large` | 413 | a JSON-RPC, MCP or GraphQL body over the endpoint's limit (then closed) |
//! | `body_not_inspectable` | 415 | a JSON-RPC, MCP or GraphQL body with a content coding; a GraphQL POST not sent as `application/json` |
//! | `upstream_error` | 502 | the destination cannot be reached, or its certificate does not verify |
//! | `response_not_scrubbable` | 502 | a coded response to a request that carried a secret |
//!
//! Bodies carry the method, the canonical path, the rule and the reason:
//! never a header value, so never a secret. Every refusal except
//! `upstream_error` is one line in the deny log (OCSF HTTP Activity), and
//! so is every audited request.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::header::{CACHE_CONTROL, CONNECTION, CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use policy_bundle::l7body::graphql::GraphqlOp;
use policy_bundle::l7body::jsonrpc::RpcCall;
use serde_json::json;

use super::state::ConnState;
use crate::denylog::{GraphqlEvent, HttpEvent, NetEvent};

/// A concrete error type: a boxed `dyn Error` here trips rustc's `Send`
/// inference for the spawned connection future.
pub(super) type BoxError = std::io::Error;
/// Every response body the proxy sends.
pub(super) type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// The header naming the proxy's decision on a response it generated.
pub const POLICY_HEADER: &str = "x-openshell-policy";

/// What logs and bodies say about the request.
#[derive(Debug, Clone, Copy)]
pub(super) struct RequestInfo<'a> {
    pub method: &'a str,
    /// Canonical when canonicalization succeeded, else as sent.
    pub path: &'a str,
    pub host: Option<&'a str>,
    pub rule: Option<&'a str>,
    /// The JSON-RPC call the decision is about, on an endpoint that
    /// judges bodies.
    pub rpc: Option<&'a RpcCall>,
    /// The GraphQL operation the decision is about, on a GraphQL endpoint.
    pub graphql: Option<&'a GraphqlOp>,
}

/// A request the proxy answers itself.
#[derive(Debug, Clone)]
pub(super) struct Refusal {
    pub status: StatusCode,
    pub code: &'static str,
    pub reason: String,
    pub rule: Option<String>,
    pub path: Option<String>,
    /// Close the connection after answering.
    pub close: bool,
}

impl Refusal {
    pub fn new(status: StatusCode, code: &'static str, reason: impl Into<String>) -> Self {
        Self {
            status,
            code,
            reason: reason.into(),
            rule: None,
            path: None,
            close: false,
        }
    }

    #[must_use]
    pub fn rule(mut self, rule: Option<String>) -> Self {
        self.rule = rule;
        self
    }

    #[must_use]
    pub fn path(mut self, path: String) -> Self {
        self.path = Some(path);
        self
    }

    #[must_use]
    pub fn closing(mut self) -> Self {
        self.close = true;
        self
    }

    /// Logs the refusal and builds the response.
    pub fn respond(self, st: &ConnState, info: &RequestInfo<'_>) -> Response<ProxyBody> {
        self.log(st, info);
        self.response(info)
    }

    /// The refusal's deny-log line (none for `upstream_error`).
    pub fn log(&self, st: &ConnState, info: &RequestInfo<'_>) {
        if self.code == "upstream_error" {
            return;
        }
        st.log_http(
            &RequestInfo {
                path: self.path.as_deref().unwrap_or(info.path),
                rule: self.rule.as_deref().or(info.rule),
                ..*info
            },
            true,
            false,
            &self.reason,
            Some(self.code),
        );
    }

    /// The response alone, for a refusal logged when it was decided.
    pub fn response(self, info: &RequestInfo<'_>) -> Response<ProxyBody> {
        let path = self.path.as_deref().unwrap_or(info.path);
        let rule = self.rule.as_deref().or(info.rule);
        let body = json!({
            "error": self.code,
            "rule": rule,
            "reason": self.reason,
            "method": info.method,
            "path": path,
        });
        let mut bytes = serde_json::to_vec(&body).unwrap_or_default();
        bytes.push(b'\n');
        let mut resp = Response::new(full(bytes));
        *resp.status_mut() = self.status;
        let headers = resp.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        headers.insert(POLICY_HEADER, HeaderValue::from_static(self.code));
        if self.close {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }
}

/// A complete body.
pub(super) fn full(bytes: Vec<u8>) -> ProxyBody {
    Full::new(Bytes::from(bytes))
        .map_err(|never| match never {})
        .boxed_unsync()
}

impl ConnState {
    /// An audited request: forwarded, and one log line.
    pub(super) fn log_audit(&self, info: &RequestInfo<'_>, reason: &str) {
        self.log_http(info, false, true, reason, None);
    }

    pub(super) fn log_http(
        &self,
        info: &RequestInfo<'_>,
        denied: bool,
        audit: bool,
        reason: &str,
        code: Option<&str>,
    ) {
        let note = if audit {
            Some("audit: forwarded although no rule allows it")
        } else {
            None
        };
        let host = info.host.or(self.meta.host.as_deref());
        self.proxy.log.http(&HttpEvent {
            net: NetEvent {
                denied,
                tid: self.meta.tid,
                pid: self.meta.pid,
                binary: Some(&self.meta.binary.path),
                operator_named: self.proxy.decider.operator_named(host, self.ip),
                syscall: "",
                protocol: "tcp",
                host,
                ip: Some(self.ip),
                port: Some(self.meta.original_dst.port()),
                rule: info.rule,
                reason,
                note,
                ..NetEvent::default()
            },
            audit,
            method: info.method,
            path: info.path,
            scheme: if self.tls { "https" } else { "http" },
            error: code,
            rpc_method: info.rpc.map(|c| c.method.as_str()),
            rpc_tool: info.rpc.and_then(|c| c.tool.as_deref()),
            graphql: info.graphql.map(|op| GraphqlEvent {
                operation_type: op.kind().map(|k| k.as_str()),
                operation_name: op.name(),
                fields: op.root_fields(),
                persisted_query: match op {
                    GraphqlOp::Parsed { persisted_hash, .. } => persisted_hash.as_deref(),
                    GraphqlOp::Persisted { hash, .. } => Some(hash),
                },
            }),
        });
    }
}
