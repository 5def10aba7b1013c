//! REST request bodies with their credential placeholders replaced
//! (`request_body_credential_rewrite`), as OpenShell's REST relay does
//! (`crates/openshell-supervisor-network/src/l7/rest.rs`,
//! `collect_and_rewrite_request_body`).
//!
//! On a route that rewrites bodies (`Evaluator::body_rewrites`), once the
//! head is allowed, the body is read whole ([`read`]) before anything goes
//! upstream, up to [`REWRITE_BODY_LIMIT`] bytes:
//!
//! - A `Content-Length` over the limit is refused (`413`) without reading
//!   the body (nor inviting it, after `Expect: 100-continue`).
//! - A chunked body counts as OpenShell counts it, on the wire: each
//!   chunk's size line and CRLFs, the last chunk and the final CRLF.
//!   hyper has already undone the chunking, so each piece it hands over
//!   is counted as a chunk of its own with the shortest size line; a
//!   chunk hyper hands over in several pieces counts more framing than it
//!   had, never less. What cannot be counted is what hyper drops: chunk
//!   extensions (hyper refuses more than 16 KiB of them in a body) and
//!   leading zeros of a size. Trailers refuse the body, as in OpenShell,
//!   which does not buffer a body that has them.
//!
//! `Evaluator::decide_typed_body` then judges the body with its
//! `Content-Type`, and [`apply`] replaces the placeholders with the
//! secrets (`policy_bundle::l7body::rewrite`, which `eval` uses too):
//! only towards a TLS server, and only those of the credentials the
//! decision names, whose binding covers host, method and path (a
//! placeholder of one bound to the host for other methods or paths was
//! refused by the decision), found by the exact placeholder the
//! supervisor issued. The
//! body goes upstream as one block with its own `Content-Length`, without
//! `Transfer-Encoding`, `Trailer` or `Expect`, whether or not anything was
//! replaced, as OpenShell re-sends a buffered body. The response is
//! scrubbed of every secret put in (`forward`), since a server may echo
//! the body. Deny-log lines name credentials, never secrets.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as _, Incoming};
use hyper::header::{
    CONTENT_LENGTH, CONTENT_TYPE, EXPECT, HeaderValue, TRAILER, TRANSFER_ENCODING,
};
use hyper::{Request, StatusCode};
use policy_bundle::l7body::rewrite::{Found, REWRITE_BODY_LIMIT, RewriteRefusal, rewrite_body};

use super::body::{self, UpstreamBody};
use super::forward::Injected;
use super::respond::Refusal;
use super::state::UpstreamHop;
use crate::credentials::{CredentialSet, Secret};

/// The last chunk (`0\r\n`) and the CRLF that ends the trailer section.
const CHUNKED_END: usize = 5;

/// A body read whole, and what it was sent as.
#[derive(Debug)]
pub(super) struct ReadBody {
    pub bytes: Bytes,
    /// The first `Content-Type`, as OpenShell reads it.
    pub content_type: Option<String>,
}

fn too_large(bytes: Option<u64>) -> Refusal {
    let why = RewriteRefusal::TooLarge { bytes };
    Refusal::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        why.refusal_code(),
        why.to_string(),
    )
    .closing()
}

/// Reads the body of `req` whole, up to [`REWRITE_BODY_LIMIT`] bytes as
/// the wire carried them: the request carrying exactly those bytes,
/// framed by a `Content-Length` of its own, and the body.
pub(super) async fn read(
    req: Request<Incoming>,
) -> Result<(Request<UpstreamBody>, ReadBody), Refusal> {
    let (mut parts, mut incoming) = req.into_parts();
    let expect_continue = parts
        .headers
        .get(EXPECT)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let chunked = parts.headers.contains_key(TRANSFER_ENCODING);
    let framed = chunked || parts.headers.contains_key(CONTENT_LENGTH);
    let declared = incoming.size_hint().exact();
    if let Some(len) = declared
        && usize::try_from(len).map_or(true, |n| n > REWRITE_BODY_LIMIT)
    {
        // The client reads the refusal, not a reset for unread data; one
        // waiting for `100 Continue` is not invited to upload.
        if !expect_continue {
            body::drain(incoming).await;
        }
        return Err(too_large(Some(len)));
    }
    let mut wire = if chunked { CHUNKED_END } else { 0 };
    let mut got = BytesMut::new();
    while let Some(frame) = incoming.frame().await {
        let frame = frame.map_err(|e| {
            Refusal::new(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("the request body could not be read: {e}"),
            )
            .closing()
        })?;
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(_) => {
                body::drain(incoming).await;
                let why = RewriteRefusal::Trailers;
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    why.refusal_code(),
                    why.to_string(),
                )
                .closing());
            }
        };
        wire = wire.saturating_add(wire_len(data.len(), chunked));
        if wire > REWRITE_BODY_LIMIT {
            body::drain(incoming).await;
            return Err(too_large(None));
        }
        got.extend_from_slice(&data);
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // The body goes upstream as one block of known length: no transfer
    // coding, no trailers, no expectation (hyper answered it already).
    parts.headers.remove(EXPECT);
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.remove(TRAILER);
    if framed || !got.is_empty() {
        parts
            .headers
            .insert(CONTENT_LENGTH, HeaderValue::from(got.len()));
    } else {
        parts.headers.remove(CONTENT_LENGTH);
    }
    let bytes = got.freeze();
    let req = Request::from_parts(parts, UpstreamBody::Checked(Full::new(bytes.clone())));
    Ok((
        req,
        ReadBody {
            bytes,
            content_type,
        },
    ))
}

/// The bytes a piece of `len` bytes took on the wire: as a chunk of its
/// own when the body is chunked (hex size, CRLF, data, CRLF).
fn wire_len(len: usize, chunked: bool) -> usize {
    if !chunked || len == 0 {
        return len;
    }
    let digits = (usize::BITS - len.leading_zeros()).div_ceil(4);
    len.saturating_add(usize::try_from(digits).unwrap_or(usize::MAX))
        .saturating_add(4)
}

/// `req`, which carries the body `read`, with the placeholders of
/// `credentials` (those the decision says are replaced) replaced by their
/// secrets, and the secrets put in, for the response to be scrubbed of.
pub(super) fn apply(
    creds: &CredentialSet,
    hop: UpstreamHop,
    req: Request<UpstreamBody>,
    read: &ReadBody,
    credentials: &[String],
) -> Result<(Request<UpstreamBody>, Vec<Injected>), Refusal> {
    if credentials.is_empty() {
        return Ok((req, Vec::new()));
    }
    let refuse = |why: String| Refusal::new(StatusCode::FORBIDDEN, "credential_not_bound", why);
    if let UpstreamHop::Plain(dst) = hop {
        return Err(refuse(format!(
            "a credential is only sent over TLS, and this request body would reach `{dst}` in plain HTTP; use https"
        )));
    }
    let mut subs = Vec::with_capacity(credentials.len());
    for name in credentials {
        let cred = creds.get(name);
        let placeholder = cred.and_then(|c| c.placeholder.as_deref());
        let secret = cred.map(|c| c.secret.as_ref());
        match (placeholder, secret) {
            (Some(p), Some(Ok(s))) => subs.push((name.as_str(), p, s)),
            (_, Some(Err(why))) => {
                return Err(Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "credential_unavailable",
                    format!("credential `{name}` is not available: {why}"),
                ));
            }
            _ => {
                return Err(refuse(format!(
                    "credential `{name}` has no placeholder to replace in the request body"
                )));
            }
        }
    }
    // Longest first, so that one placeholder is never read as a shorter
    // one it begins with.
    subs.sort_by_key(|(_, p, _)| std::cmp::Reverse(p.len()));
    let at = |text: &str| {
        subs.iter()
            .find(|(_, p, _)| text.starts_with(*p))
            .map(|(name, p, secret)| Found {
                len: p.len(),
                credential: name,
                secret: secret.expose(),
            })
            .ok_or(RewriteRefusal::NotBound)
    };
    let rewritten = rewrite_body(read.content_type.as_deref(), &read.bytes, &at)
        .map_err(|why| refuse(why.to_string()))?;
    let injected = subs
        .iter()
        .filter(|(name, _, _)| rewritten.credentials.contains(name))
        .map(|(_, p, secret)| Injected {
            secret: Secret::clone(secret),
            replacement: (*p).to_owned(),
        })
        .collect();
    let Some(new) = rewritten.body else {
        return Ok((req, injected));
    };
    let (mut parts, _) = req.into_parts();
    parts
        .headers
        .insert(CONTENT_LENGTH, HeaderValue::from(new.len()));
    let body = UpstreamBody::Checked(Full::new(Bytes::from(new)));
    Ok((Request::from_parts(parts, body), injected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_counts_its_size_line_and_crlfs() {
        assert_eq!(wire_len(1, true), 1 + 1 + 4);
        assert_eq!(wire_len(15, true), 15 + 1 + 4);
        assert_eq!(wire_len(16, true), 16 + 2 + 4);
        assert_eq!(wire_len(0x1000, true), 0x1000 + 4 + 4);
        assert_eq!(wire_len(0, true), 0);
        assert_eq!(wire_len(100, false), 100);
    }
}
