//! Credential placeholders replaced inside a REST request body
//! (`request_body_credential_rewrite`), as OpenShell's REST relay does
//! (`crates/openshell-supervisor-network/src/l7/rest.rs`,
//! `rewrite_buffered_body`). One function serves `eval`, which knows a
//! placeholder only by its credential's name and shape, and the proxy,
//! which knows each one and its secret, so both refuse the same bodies.
//!
//! What OpenShell does, and this does:
//!
//! - The body is held whole, at most [`REWRITE_BODY_LIMIT`] bytes (for a
//!   chunked body the proxy counts the framing too); a longer one is
//!   refused whatever it holds.
//! - The media type is the `Content-Type` up to its first `;`, trimmed and
//!   lowercased: `application/json`, `application/x-www-form-urlencoded`
//!   and any `text/*` are rewritten. Parameters, `charset` included, are
//!   not read: the body must be UTF-8 whatever they say. A body of
//!   another type (or none) is forwarded as it is, unless it holds the
//!   placeholder marker, which refuses it.
//! - A body of a rewritten type that is not UTF-8 is refused even without
//!   a placeholder. `Content-Encoding` is not read: a compressed body is
//!   judged as its bytes, as OpenShell does.
//! - JSON and text: each placeholder is replaced by its secret as it is,
//!   with no JSON escaping (OpenShell inserts it verbatim; secrets hold no
//!   control characters, but a `"` or `\` in one would change the JSON).
//! - A form: each `name=value` field is percent-decoded (`+` is a space);
//!   a placeholder in a field name is refused; a value holding one is
//!   replaced and written back percent-encoded whole (letters, digits and
//!   `-._*` as they are, a space as `+`, every other byte as `%XX`);
//!   fields without a placeholder are left byte for byte.
//! - A placeholder the caller does not replace refuses the body: one of
//!   no credential bound to the host, or (where we are stricter than
//!   OpenShell, which replaces any credential bound to the host) one of a
//!   credential whose binding does not cover the request's method and
//!   path, whose secret would otherwise leave outside its binding. So
//!   does a marker left after the replacement, including a
//!   percent-encoded one (OpenShell's check decodes once before it
//!   searches).

use std::fmt;

use crate::vocab::PLACEHOLDER_PREFIX;

/// The most a body rewritten in place may be: OpenShell's
/// `MAX_REWRITE_BODY_BYTES`.
pub const REWRITE_BODY_LIMIT: usize = 256 * 1024;

/// How a body's media type is rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// `application/json`.
    Json,
    /// `application/x-www-form-urlencoded`.
    Form,
    /// Any `text/*`.
    Text,
    /// Anything else, or no `Content-Type`: never rewritten.
    Other,
}

impl BodyKind {
    /// The kind of a body by its `Content-Type` value.
    #[must_use]
    pub fn of(content_type: Option<&str>) -> Self {
        let Some(ct) = content_type else {
            return Self::Other;
        };
        let essence = ct.split(';').next().unwrap_or_default().trim();
        let essence = essence.to_ascii_lowercase();
        match essence.as_str() {
            "application/json" => Self::Json,
            "application/x-www-form-urlencoded" => Self::Form,
            t if t.starts_with("text/") => Self::Text,
            _ => Self::Other,
        }
    }
}

/// Why a body cannot go on with its placeholders replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RewriteRefusal {
    /// Longer than [`REWRITE_BODY_LIMIT`] (`bytes`: as counted, when
    /// known).
    TooLarge {
        /// The length found, when known.
        bytes: Option<u64>,
    },
    /// A chunked body with trailers, which OpenShell does not buffer.
    Trailers,
    /// A placeholder in a body whose media type is not rewritten.
    Unsupported {
        /// The `Content-Type` as sent.
        content_type: Option<String>,
    },
    /// A body of a rewritten type that is not UTF-8.
    NotUtf8,
    /// A placeholder in the name of a form field.
    InFieldName,
    /// A placeholder that is not one of a credential bound to the host.
    NotBound,
    /// The placeholder of a credential bound to the host whose `methods`
    /// or `paths` do not cover the request.
    OutsideBinding {
        /// The credential.
        credential: String,
        /// The request's method.
        method: String,
        /// The request's canonical path.
        path: String,
    },
    /// A marker left after the replacement (percent-encoded, or brought in
    /// by a secret).
    Unresolved,
}

impl RewriteRefusal {
    /// The code the proxy answers with.
    #[must_use]
    pub fn refusal_code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "body_too_large",
            _ => "credential_not_bound",
        }
    }
}

impl fmt::Display for RewriteRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { bytes: Some(n) } => write!(
                f,
                "the request body ({n} bytes) is over the {REWRITE_BODY_LIMIT} bytes a body whose placeholders are replaced may have; nothing was forwarded"
            ),
            Self::TooLarge { bytes: None } => write!(
                f,
                "the request body is over the {REWRITE_BODY_LIMIT} bytes a body whose placeholders are replaced may have (a chunked body's framing counts); nothing was forwarded"
            ),
            Self::Trailers => f.write_str(
                "a chunked request body with trailers cannot have its placeholders replaced",
            ),
            Self::Unsupported { content_type } => write!(
                f,
                "the request body holds a credential placeholder, and placeholders are replaced only in `application/json`, `application/x-www-form-urlencoded` and `text/*` bodies; this one is {}",
                content_type
                    .as_deref()
                    .map_or_else(|| "untyped".to_owned(), |t| format!("`{t}`"))
            ),
            Self::NotUtf8 => f.write_str(
                "the request body is not UTF-8, and a body whose placeholders are replaced must be",
            ),
            Self::InFieldName => {
                f.write_str("a credential placeholder in a form field name is never replaced")
            }
            Self::NotBound => f.write_str(
                "the request body carries a credential placeholder that is not one of a credential bound to this host; only those are replaced",
            ),
            Self::OutsideBinding {
                credential,
                method,
                path,
            } => write!(
                f,
                "the request body carries the placeholder of credential `{credential}`, whose binding does not cover {method} {path}; only placeholders of credentials whose binding covers the request are replaced (widen the credential's `methods` or `paths` to cover it, or send the placeholder only on requests its binding covers)"
            ),
            Self::Unresolved => f.write_str(
                "the request body still holds a credential placeholder marker after the replacement (percent-encoded, say); it is not sent on",
            ),
        }
    }
}

/// A placeholder found at the start of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found<'a> {
    /// Its length in bytes.
    pub len: usize,
    /// The credential it stands for.
    pub credential: &'a str,
    /// What replaces it.
    pub secret: &'a str,
}

/// A body that may go on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rewritten<'a> {
    /// The new body; `None` when it goes on unchanged.
    pub body: Option<String>,
    /// The credentials whose placeholders were replaced, in the order first
    /// seen.
    pub credentials: Vec<&'a str>,
}

/// `body` with its placeholders replaced, or why it is refused.
/// `placeholder_at` reads the placeholder a text starts with (the text
/// starts with the marker), or says why it is not replaced: the caller
/// knows which credentials' placeholders may be, and why the others may
/// not.
///
/// # Errors
///
/// A [`RewriteRefusal`] when the body cannot go on; see the module.
pub fn rewrite_body<'a>(
    content_type: Option<&str>,
    body: &[u8],
    placeholder_at: &dyn Fn(&str) -> Result<Found<'a>, RewriteRefusal>,
) -> Result<Rewritten<'a>, RewriteRefusal> {
    if body.len() > REWRITE_BODY_LIMIT {
        return Err(RewriteRefusal::TooLarge {
            bytes: u64::try_from(body.len()).ok(),
        });
    }
    if body.is_empty() {
        return Ok(Rewritten::default());
    }
    let kind = BodyKind::of(content_type);
    if kind == BodyKind::Other {
        return if holds_marker(body) {
            Err(RewriteRefusal::Unsupported {
                content_type: content_type.map(str::to_owned),
            })
        } else {
            Ok(Rewritten::default())
        };
    }
    let text = std::str::from_utf8(body).map_err(|_| RewriteRefusal::NotUtf8)?;
    if !holds_marker(text.as_bytes()) {
        return Ok(Rewritten::default());
    }
    let mut credentials = Vec::new();
    let out = if kind == BodyKind::Form {
        rewrite_form(text, placeholder_at, &mut credentials)?
    } else {
        replace(text, placeholder_at, &mut credentials)?
    };
    if credentials.is_empty() || holds_marker(out.as_bytes()) {
        return Err(RewriteRefusal::Unresolved);
    }
    Ok(Rewritten {
        body: Some(out),
        credentials,
    })
}

/// Each placeholder of `text` replaced by its secret, in one pass (a
/// secret is never read as a placeholder).
fn replace<'a>(
    text: &str,
    placeholder_at: &dyn Fn(&str) -> Result<Found<'a>, RewriteRefusal>,
    credentials: &mut Vec<&'a str>,
) -> Result<String, RewriteRefusal> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PLACEHOLDER_PREFIX) {
        let (before, tail) = rest.split_at_checked(at).ok_or(RewriteRefusal::NotBound)?;
        out.push_str(before);
        let found = placeholder_at(tail)?;
        out.push_str(found.secret);
        if !credentials.contains(&found.credential) {
            credentials.push(found.credential);
        }
        rest = tail.get(found.len..).ok_or(RewriteRefusal::NotBound)?;
    }
    out.push_str(rest);
    Ok(out)
}

fn rewrite_form<'a>(
    text: &str,
    placeholder_at: &dyn Fn(&str) -> Result<Found<'a>, RewriteRefusal>,
    credentials: &mut Vec<&'a str>,
) -> Result<String, RewriteRefusal> {
    let mut out = String::with_capacity(text.len());
    for (i, field) in text.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        let (name, value) = match field.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (field, None),
        };
        if holds_marker(form_decode(name)?.as_bytes()) {
            return Err(RewriteRefusal::InFieldName);
        }
        out.push_str(name);
        let Some(value) = value else { continue };
        out.push('=');
        let decoded = form_decode(value)?;
        if !holds_marker(decoded.as_bytes()) {
            out.push_str(value);
            continue;
        }
        let before = credentials.len();
        let replaced = replace(&decoded, placeholder_at, credentials)?;
        if credentials.len() == before && !decoded.contains(PLACEHOLDER_PREFIX) {
            // Only a percent-encoded marker: nothing to replace it with.
            return Err(RewriteRefusal::Unresolved);
        }
        out.push_str(&form_encode(&replaced));
    }
    Ok(out)
}

/// Whether `bytes` hold the marker as it is or percent-decoded once.
#[must_use]
pub fn holds_marker(bytes: &[u8]) -> bool {
    let marker = PLACEHOLDER_PREFIX.as_bytes();
    let found = |b: &[u8]| b.windows(marker.len()).any(|w| w == marker);
    found(bytes) || (bytes.contains(&b'%') && found(&percent_decode(bytes)))
}

fn percent_decode(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let pair = bytes
            .get(i + 1)
            .and_then(|&h| hex(h))
            .zip(bytes.get(i + 2).and_then(|&l| hex(l)));
        match (b, pair) {
            (b'%', Some((h, l))) => {
                out.push((h << 4) | l);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// A form field's name or value decoded: `+` is a space, `%XX` a byte.
fn form_decode(text: &str) -> Result<String, RewriteRefusal> {
    let spaced = text.replace('+', " ");
    String::from_utf8(percent_decode(spaced.as_bytes())).map_err(|_| RewriteRefusal::NotUtf8)
}

/// As OpenShell writes a rewritten form value.
fn form_encode(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(char::from(b));
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
