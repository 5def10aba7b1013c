//! `POST /proposals`: the agent cites denials by id and says why; the
//! supervisor sends the gateway the lines it logged for those ids, never
//! text of the agent's, under its own sandbox token
//! (`POST /v1/sandboxes/{id}/proposals`, `{"denials": LINES, "rationale":
//! TEXT}`), and hands back what the gateway decided without the review
//! token an approval needs.

use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::EXPECT;
use hyper::{Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Answer, Desk, MAX_BODY, answer};
use crate::l7::body;
use crate::l7::respond::{ProxyBody, Refusal};
use crate::l7::state::ConnState;

/// Ids one proposal may cite.
const MAX_IDS: usize = 50;
/// The longest rationale, in characters (as the gateway counts them).
const MAX_RATIONALE: usize = 2000;
/// How long the gateway may take: it compiles and proves the proposal
/// before it answers.
const GATEWAY_TIME: Duration = Duration::from_secs(60);
/// What of the gateway's answer reaches the agent: never the review token
/// (the agent must not be able to approve), nor the policy source.
const RELAYED: [&str; 6] = ["id", "state", "verdict", "origin", "held", "advice"];

/// What the agent sends.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ask {
    denials: Vec<u64>,
    rationale: String,
}

pub(super) async fn handle(
    st: &ConnState,
    desk: &Desk,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Answer> {
    let expect_continue = req.headers().contains_key(EXPECT);
    let bytes = body::read(req.into_body(), MAX_BODY, expect_continue)
        .await
        .map_err(|e| match e {
            body::ReadError::TooLarge { .. } => Refusal::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("a proposal is at most {MAX_BODY} bytes of JSON"),
            )
            .closing(),
            body::ReadError::Broken(why) => Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the request body could not be read: {why}"),
            )
            .closing(),
        })?;
    let Some(gateway) = desk.gateway() else {
        return Err(Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "gateway_unavailable",
            "proposals need a gateway: this sandbox runs a bundle of its own (`run --bundle`), so there is no one to send one to; its denials are still listed at GET /denials",
        )
        .into());
    };
    let ask: Ask = serde_json::from_slice(&bytes).map_err(|e| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "a proposal is `{{\"denials\": [ids from GET /denials], \"rationale\": \"why\"}}`: {e}"
            ),
        )
    })?;
    let mut ids = ask.denials;
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() || ids.len() > MAX_IDS {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("a proposal cites 1 to {MAX_IDS} denials"),
        )
        .into());
    }
    let chars = ask.rationale.chars().count();
    if ask.rationale.trim().is_empty() || chars > MAX_RATIONALE {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "`rationale` says why the change is needed, in 1 to {MAX_RATIONALE} characters"
            ),
        )
        .into());
    }
    let lines = st.proxy.log.denial_lines(&ids).map_err(|unknown| {
        let list = unknown
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_denials",
            format!(
                "no denial with id {list} is kept here: cite ids GET /denials lists (the last {} of this sandbox)",
                crate::denylog::RECENT_DENIALS
            ),
        )
    })?;
    if let Err(secs) = desk.take_token() {
        return Err(Answer {
            refusal: Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("three proposals at once, then one a minute: try again in {secs} s"),
            ),
            retry_after: Some(secs),
        });
    }
    // Each line as the log holds it, newline included.
    let denials: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let path = format!("/v1/sandboxes/{}/proposals", gateway.sandbox);
    let body = json!({ "denials": denials, "rationale": ask.rationale });
    let resp = gateway
        .session
        .client()
        .send("POST", &path, Some(&body), &[], GATEWAY_TIME)
        .await
        .map_err(|e| {
            Refusal::new(
                StatusCode::BAD_GATEWAY,
                "gateway_unreachable",
                format!("the proposal could not be sent: {e}"),
            )
        })?;
    let reply = resp.json();
    if matches!(resp.status, 200 | 201) {
        let mut relayed = Map::new();
        for key in RELAYED {
            if let Some(v) = reply.get(key) {
                relayed.insert(key.to_owned(), v.clone());
            }
        }
        return Ok(answer(StatusCode::CREATED, &Value::Object(relayed)));
    }
    let code = reply
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let message = reply
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or("no message");
    let status = StatusCode::from_u16(resp.status)
        .ok()
        .filter(|s| s.is_client_error() || s.is_server_error())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    Err(Refusal::new(
        status,
        "proposal_refused",
        format!(
            "the gateway refused the proposal ({} {code}): {message}",
            resp.status
        ),
    )
    .into())
}
