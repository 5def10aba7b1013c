//! The GraphQL-over-HTTP request: a JSON object (POST, WebSocket payload)
//! or query parameters (GET), read into one document or one persisted-query
//! identifier.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{DocumentCache, GraphqlError, GraphqlOp, analyze, json};
use crate::matcher::parse_query_string;

/// Saved-query ids OpenShell recognises (Relay-style stored documents).
const SAVED_ID_MEMBERS: [&str; 3] = ["id", "documentId", "queryId"];

/// The request members a server reads, as strings already checked,
/// borrowed from the request: a document can be most of a large body, and
/// a cached one is then never copied.
#[derive(Debug, Default)]
struct Request<'a> {
    query: Option<&'a str>,
    operation_name: Option<&'a str>,
    /// `extensions.persistedQuery.sha256Hash`.
    hash: Option<String>,
    /// The member that held a saved-query id, and the id.
    saved_id: Option<(&'static str, &'a str)>,
}

/// Reads one request object (a POST body, a batch item, or the payload of
/// a WebSocket operation message).
pub(super) fn op_from_object(
    value: &Value,
    cache: Option<&DocumentCache>,
) -> Result<GraphqlOp, GraphqlError> {
    let Value::Object(members) = value else {
        return Err(GraphqlError::NotAnObject);
    };
    let mut request = Request::default();
    for (key, value) in members {
        match key.as_str() {
            "query" => request.query = string_or_null(value, "query")?,
            "operationName" => {
                request.operation_name = string_or_null(value, "operationName")?;
            }
            // Read by the server as values, never as a document; the strict
            // reader has already refused duplicate members inside.
            "variables" => {}
            "extensions" => request.hash = persisted_hash(value)?,
            other => {
                let Some(&member) = SAVED_ID_MEMBERS.iter().find(|m| **m == other) else {
                    return Err(GraphqlError::UnknownMember { key: key.clone() });
                };
                // An empty id names nothing a registry can vouch for.
                match string_or_null(value, member)? {
                    Some("") => {
                        return Err(GraphqlError::WrongType {
                            member,
                            expected: "a non-empty string or null",
                        });
                    }
                    Some(id) => request.set_saved_id(member, id)?,
                    None => {}
                }
            }
        }
    }
    request.into_op(cache)
}

/// Reads a GET query string. Empty values count as absent, as in
/// OpenShell; every parameter may appear once.
///
/// `;` separates parameters as `&` does: many servers split on both, and
/// one that did would read `variables=x;query=...` as a second `query`
/// the rules never saw. Read this way, it is a repeated parameter, and
/// refused; a client writes a literal `;` as `%3B`.
pub(super) fn op_from_query_string(
    raw: &str,
    cache: Option<&DocumentCache>,
) -> Result<GraphqlOp, GraphqlError> {
    // Same length, so the offsets of errors still point into `raw`.
    let params = parse_query_string(&raw.replace(';', "&")).map_err(GraphqlError::QueryString)?;
    let mut seen: Vec<&str> = Vec::new();
    let mut request = Request::default();
    for (key, value) in &params {
        if seen.contains(&key.as_str()) {
            return Err(GraphqlError::DuplicateParam { key: key.clone() });
        }
        seen.push(key);
        let value = Some(value.as_str()).filter(|v| !v.is_empty());
        match key.as_str() {
            "query" => request.query = value,
            "operationName" => request.operation_name = value,
            "variables" => {}
            "extensions" => {
                if let Some(text) = value {
                    request.hash = persisted_hash(&json::parse_strict(text.as_bytes())?)?;
                }
            }
            other => {
                let Some(&member) = SAVED_ID_MEMBERS.iter().find(|m| **m == other) else {
                    return Err(GraphqlError::UnknownMember { key: key.clone() });
                };
                if let Some(id) = value {
                    request.set_saved_id(member, id)?;
                }
            }
        }
    }
    request.into_op(cache)
}

impl<'a> Request<'a> {
    fn set_saved_id(&mut self, member: &'static str, id: &'a str) -> Result<(), GraphqlError> {
        if let Some((first, _)) = self.saved_id {
            return Err(GraphqlError::SeveralPersistedIds {
                first,
                second: member,
            });
        }
        self.saved_id = Some((member, id));
        Ok(())
    }

    fn into_op(self, cache: Option<&DocumentCache>) -> Result<GraphqlOp, GraphqlError> {
        let name = self.operation_name.filter(|n| !n.is_empty());
        // A blank document is no document: Apollo-style servers then look
        // the hash up, others refuse the request.
        let document = self.query.filter(|q| !q.trim().is_empty());
        match (document, self.hash, self.saved_id) {
            (Some(_), _, Some((member, _))) => Err(GraphqlError::DocumentAndSavedId { member }),
            (Some(document), hash, None) => {
                if let Some(hash) = &hash {
                    check_hash(document, hash)?;
                }
                let selected = analyze(cache, document, name)?;
                Ok(GraphqlOp::Parsed {
                    kind: selected.kind,
                    name: selected.name,
                    root_fields: selected.root_fields,
                    persisted_hash: hash,
                })
            }
            (None, Some(_), Some((member, _))) => Err(GraphqlError::SeveralPersistedIds {
                first: "extensions.persistedQuery.sha256Hash",
                second: member,
            }),
            (None, Some(hash), None) => Ok(GraphqlOp::Persisted {
                hash,
                name: name.map(str::to_owned),
            }),
            (None, None, Some((_, id))) => Ok(GraphqlOp::Persisted {
                hash: id.to_owned(),
                name: name.map(str::to_owned),
            }),
            (None, None, None) => Err(GraphqlError::NoQuery),
        }
    }
}

fn string_or_null<'a>(
    value: &'a Value,
    member: &'static str,
) -> Result<Option<&'a str>, GraphqlError> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        _ => Err(GraphqlError::WrongType {
            member,
            expected: "a string or null",
        }),
    }
}

/// `extensions.persistedQuery.sha256Hash`. Other extensions are left alone;
/// a `persistedQuery` without a string hash is refused, since a server
/// would treat the request as a persisted query all the same.
fn persisted_hash(extensions: &Value) -> Result<Option<String>, GraphqlError> {
    let members = match extensions {
        Value::Null => return Ok(None),
        Value::Object(members) => members,
        _ => {
            return Err(GraphqlError::WrongType {
                member: "extensions",
                expected: "an object or null",
            });
        }
    };
    match members.get("persistedQuery") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(pq)) => match pq.get("sha256Hash") {
            Some(Value::String(hash)) if !hash.is_empty() => Ok(Some(hash.clone())),
            _ => Err(GraphqlError::WrongType {
                member: "extensions.persistedQuery.sha256Hash",
                expected: "a non-empty string",
            }),
        },
        Some(_) => Err(GraphqlError::WrongType {
            member: "extensions.persistedQuery",
            expected: "an object or null",
        }),
    }
}

/// An APQ request registers the document under its hash; a server that
/// trusts the hash would run the stored document, so the two must agree.
fn check_hash(document: &str, hash: &str) -> Result<(), GraphqlError> {
    let digest = Sha256::digest(document.as_bytes());
    let ours: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    if ours.eq_ignore_ascii_case(hash) {
        Ok(())
    } else {
        Err(GraphqlError::HashMismatch {
            hash: hash.to_owned(),
        })
    }
}

/// Checks a POST's `Content-Type` before its body is read as JSON.
///
/// Only `application/json` (with at most a UTF-8 `charset`) is read.
/// OpenShell reads any body as JSON and refuses only `multipart/*`, but a
/// server picks its body reader by this header: a body that is valid JSON
/// can also be a valid `application/x-www-form-urlencoded` body whose
/// `query` field is a different document, and `application/graphql` or a
/// UTF-16 charset are read differently again. A request without the header
/// is refused for the same reason.
pub fn check_content_type(content_type: Option<&str>) -> Result<(), GraphqlError> {
    let refuse = || GraphqlError::UnsupportedContentType {
        content_type: content_type.unwrap_or("").to_owned(),
    };
    let mut parts = content_type.ok_or_else(refuse)?.split(';');
    let media = parts.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(refuse());
    }
    for param in parts {
        let param = param.trim();
        if param.is_empty() {
            continue;
        }
        let (name, value) = param.split_once('=').ok_or_else(refuse)?;
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .unwrap_or(value);
        let utf8 = value.eq_ignore_ascii_case("utf-8") || value.eq_ignore_ascii_case("utf8");
        if !(name.trim().eq_ignore_ascii_case("charset") && utf8) {
            return Err(refuse());
        }
    }
    Ok(())
}
