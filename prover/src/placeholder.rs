//! The witness of a rewrite question (`crate::rewrite`): the request of
//! a point with a body or text message carrying a credential's
//! placeholder, what the evaluator decides of it, and how a finding reads.
//! Apart from `rewrite` because it reads the findings' types, which the
//! models must not depend on.

use policy_bundle::eval::{Decision, Evaluator, Reason, Request, Verdict};

use crate::calls::Calls;
use crate::domain::Domain;
use crate::rewrite::{body, placeholder};
use crate::websocket::{Kinds, Probe};

/// The `Content-Type` a witness body is sent with: JSON is one of the
/// types the proxy rewrites.
pub(crate) const CONTENT_TYPE: &str = "application/json";

/// The text message of the class of `size` bytes whose content is body
/// value `v`, carrying the placeholder of credential `name`: on an
/// endpoint that reads GraphQL over WebSocket, the message of `v` with the
/// placeholder in one more member; otherwise [`body`]. Padded with spaces
/// into the class. `Err` when it is longer than the class allows.
pub(crate) fn text(
    calls: &Calls,
    kinds: &Kinds,
    size: usize,
    v: u32,
    name: &str,
) -> Result<String, String> {
    let mut msg = if calls.is_ws(v) {
        let plain = crate::websocket::text(calls, kinds, size, v)?;
        match serde_json::from_str::<serde_json::Value>(plain.trim_end()) {
            Ok(serde_json::Value::Object(mut o)) => {
                o.insert(
                    "token".to_owned(),
                    serde_json::Value::String(placeholder(name)),
                );
                serde_json::Value::Object(o).to_string()
            }
            _ => body(name),
        }
    } else {
        body(name)
    };
    if let Some(upper) = kinds.upper(size).filter(|&u| msg.len() > u) {
        return Err(format!(
            "the text message `{msg}` is longer than {upper} bytes, the message limit it must stay within"
        ));
    }
    let first = kinds.classes.first().is_some_and(|c| c.size == size);
    if !first {
        while msg.len() < size {
            msg.push(' ');
        }
    }
    Ok(msg)
}

/// The credentials whose placeholders a let-through decision replaces.
pub(crate) fn replaced(d: &Decision) -> Vec<String> {
    fn of(r: &Reason) -> Vec<String> {
        match r {
            Reason::Rewritten { credentials, .. } | Reason::BodyRewritten { credentials, .. } => {
                credentials.clone()
            }
            Reason::Resolved { inner, .. } | Reason::LinkTarget { inner, .. } => of(inner),
            _ => Vec::new(),
        }
    }
    of(&d.reason)
}

/// A witness request, with its body or its WebSocket message.
pub(crate) type Shown = (Request, Option<Vec<u8>>, Option<Probe>);

/// The witness of a point of a rewrite question: its request, and the
/// body or (`text_message`) the text message carrying the placeholder of
/// credential `name`.
pub(crate) fn witness(
    dom: &Domain,
    p: &crate::formula::Point,
    name: &str,
    text_message: bool,
) -> Result<Shown, String> {
    let req = crate::witness::request(dom, p);
    if !text_message {
        return Ok((req, Some(body(name).into_bytes()), None));
    }
    let kinds = dom
        .ws
        .as_ref()
        .ok_or_else(|| "no WebSocket message kind was found".to_owned())?;
    let Some(crate::websocket::Kind::Text(size)) = kinds.kind(p.method) else {
        return Err("the point is no WebSocket text message".to_owned());
    };
    let t = text(&dom.calls, kinds, size, p.call, name)?;
    Ok((req, None, Some(Probe::Text(t))))
}

/// The evaluator's decision on a rewrite witness: the body sent as
/// [`CONTENT_TYPE`], or the message after the upgrade.
pub(crate) fn decide(
    ev: &Evaluator,
    req: &Request,
    body: Option<&[u8]>,
    probe: Option<&Probe>,
) -> Decision {
    match probe {
        Some(pr) => pr.decide(ev, req),
        None => ev.eval_with_typed_body(req, body, Some(CONTENT_TYPE)),
    }
}

/// Whether `d` lets the witness through with the placeholder of `name`
/// replaced by its secret.
pub(crate) fn sends_secret(d: &Decision, name: &str) -> bool {
    matches!(d.decision, Verdict::Allow | Verdict::Audit) && replaced(d).iter().any(|c| c == name)
}

/// Why the old policy did not send the secret, in words.
pub(crate) fn old_reason(d: &Decision, conn_allowed: bool) -> String {
    if !conn_allowed {
        format!("default deny: {}", d.reason)
    } else if d.decision == Verdict::Deny {
        format!("the old policy refused it: {}", d.reason)
    } else {
        format!(
            "the old policy let it through with the placeholder as it was: {}",
            d.reason
        )
    }
}

/// One sentence for people (the region follows it; the witness line
/// shows the request).
pub(crate) fn message(name: &str, w: &crate::finding::Witness, text_message: bool) -> String {
    let (what, flag) = if text_message {
        ("a WebSocket text message", "websocket_credential_rewrite")
    } else {
        ("a request body", "request_body_credential_rewrite")
    };
    format!(
        "`{}` can now send the secret of credential `{name}` to `{}:{}` in {what}, in place of its placeholder (`{flag}`)",
        w.binary, w.host, w.port
    )
}
