//! The opening handshake (RFC 6455 §4): what makes an upgrade request a
//! WebSocket one the proxy may judge, what it forwards, and which `101`
//! it accepts back.
//!
//! No extension is ever negotiated: the offer is taken out of the request,
//! and a `101` that names one anyway is refused. With permessage-deflate
//! the server would read inflated bytes the proxy never judged.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hyper::header::{
    CONNECTION, CONTENT_LENGTH, HeaderMap, HeaderValue, TRANSFER_ENCODING, UPGRADE,
};
use hyper::{Method, Version};

pub(in crate::l7) const SEC_WEBSOCKET_KEY: &str = "sec-websocket-key";
pub(in crate::l7) const SEC_WEBSOCKET_VERSION: &str = "sec-websocket-version";
pub(in crate::l7) const SEC_WEBSOCKET_ACCEPT: &str = "sec-websocket-accept";
pub(in crate::l7) const SEC_WEBSOCKET_PROTOCOL: &str = "sec-websocket-protocol";
pub(in crate::l7) const SEC_WEBSOCKET_EXTENSIONS: &str = "sec-websocket-extensions";

/// The GUID every `Sec-WebSocket-Accept` is derived with.
const ACCEPT_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What the client offered: the key the answer must prove it read, and
/// the subprotocols the server may pick from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::l7) struct Offer {
    pub key: String,
    pub protocols: Vec<String>,
}

/// The tokens of a comma-separated header, trimmed, across all its lines.
fn tokens(headers: &HeaderMap, name: impl hyper::header::AsHeaderName) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t).trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect()
}

fn one<'a>(headers: &'a HeaderMap, name: &str) -> Result<&'a HeaderValue, String> {
    let mut all = headers.get_all(name).iter();
    match (all.next(), all.next()) {
        (Some(v), None) => Ok(v),
        (None, _) => Err(format!("no `{name}` header")),
        (Some(_), Some(_)) => Err(format!("several `{name}` headers")),
    }
}

/// `Upgrade` names `websocket`: the client asks for a WebSocket (well-formed
/// or not), rather than another protocol.
pub(in crate::l7) fn asks_for_websocket(headers: &HeaderMap) -> bool {
    tokens(headers, UPGRADE)
        .iter()
        .any(|t| t.eq_ignore_ascii_case("websocket"))
}

/// The request is a well-formed WebSocket opening handshake: `Err` says
/// what is wrong with it.
pub(in crate::l7) fn check_request(
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<Offer, String> {
    if *method != Method::GET {
        return Err(format!("a WebSocket upgrade is a GET, not {method}"));
    }
    if version != Version::HTTP_11 {
        return Err("a WebSocket upgrade is an HTTP/1.1 request".into());
    }
    let upgrade = tokens(headers, UPGRADE);
    if !matches!(upgrade.as_slice(), [one] if one.eq_ignore_ascii_case("websocket")) {
        return Err("`Upgrade` must name `websocket` alone".into());
    }
    if !tokens(headers, CONNECTION)
        .iter()
        .any(|t| t.eq_ignore_ascii_case("upgrade"))
    {
        return Err("`Connection` must name `upgrade`".into());
    }
    if one(headers, SEC_WEBSOCKET_VERSION)?.as_bytes() != b"13" {
        return Err("`Sec-WebSocket-Version` must be 13".into());
    }
    let key = one(headers, SEC_WEBSOCKET_KEY)?
        .to_str()
        .map_err(|_| "`Sec-WebSocket-Key` is not text".to_owned())?
        .trim()
        .to_owned();
    if STANDARD.decode(&key).map(|k| k.len()) != Ok(16) {
        return Err("`Sec-WebSocket-Key` is not 16 bytes in base64".into());
    }
    if headers.contains_key(TRANSFER_ENCODING)
        || headers
            .get_all(CONTENT_LENGTH)
            .iter()
            .any(|v| v.as_bytes() != b"0")
    {
        return Err("a WebSocket upgrade request has no body".into());
    }
    Ok(Offer {
        key,
        protocols: tokens(headers, SEC_WEBSOCKET_PROTOCOL),
    })
}

/// The `Sec-WebSocket-Accept` that proves a server read `key`.
pub(in crate::l7) fn accept_for(key: &str) -> String {
    let mut input = key.as_bytes().to_vec();
    input.extend_from_slice(ACCEPT_GUID.as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
    STANDARD.encode(digest.as_ref())
}

/// The headers the request goes upstream with, after the hop-by-hop ones
/// were dropped: the upgrade named again, no extension offered.
pub(in crate::l7) fn prepare_request(headers: &mut HeaderMap) {
    headers.remove(SEC_WEBSOCKET_EXTENSIONS);
    headers.remove(CONTENT_LENGTH);
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
}

/// The `101` as the client gets it, after the hop-by-hop headers were
/// dropped: the upgrade named again.
pub(in crate::l7) fn prepare_switch(headers: &mut HeaderMap) {
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
}

/// A `101` answer the relay may start on: the upgrade confirmed, the key
/// proven, no extension, and a subprotocol only from those offered.
pub(in crate::l7) fn check_switch(headers: &HeaderMap, offer: &Offer) -> Result<(), String> {
    let upgrade = tokens(headers, UPGRADE);
    if !matches!(upgrade.as_slice(), [one] if one.eq_ignore_ascii_case("websocket")) {
        return Err("the server's 101 does not upgrade to `websocket`".into());
    }
    if !tokens(headers, CONNECTION)
        .iter()
        .any(|t| t.eq_ignore_ascii_case("upgrade"))
    {
        return Err("the server's 101 lacks `Connection: upgrade`".into());
    }
    let accept =
        one(headers, SEC_WEBSOCKET_ACCEPT).map_err(|why| format!("the server's 101 has {why}"))?;
    if accept.as_bytes() != accept_for(&offer.key).as_bytes() {
        return Err("the server's `Sec-WebSocket-Accept` does not match the key".into());
    }
    if headers.contains_key(SEC_WEBSOCKET_EXTENSIONS) {
        return Err(
            "the server's 101 negotiates an extension, which the proxy did not offer".into(),
        );
    }
    let chosen = tokens(headers, SEC_WEBSOCKET_PROTOCOL);
    match chosen.as_slice() {
        [] => Ok(()),
        [p] if offer.protocols.iter().any(|o| o == p) => Ok(()),
        _ => Err("the server's 101 picks a subprotocol the client did not offer".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    const GOOD: &[(&str, &str)] = &[
        ("upgrade", "websocket"),
        ("connection", "keep-alive, Upgrade"),
        ("sec-websocket-version", "13"),
        ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("sec-websocket-protocol", "graphql-transport-ws, chat"),
    ];

    #[test]
    fn the_rfc_example_accept_key() {
        assert_eq!(
            accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn a_well_formed_request_yields_its_offer() {
        let offer = check_request(&Method::GET, Version::HTTP_11, &headers(GOOD)).unwrap();
        assert_eq!(offer.key, "dGhlIHNhbXBsZSBub25jZQ==");
        assert_eq!(offer.protocols, ["graphql-transport-ws", "chat"]);
    }

    #[test]
    fn malformed_requests_are_refused() {
        let without = |name: &str| {
            let mut h = headers(GOOD);
            h.remove(name);
            h
        };
        let with = |name: &str, value: &str| {
            let mut h = headers(GOOD);
            h.insert(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
            h
        };
        let cases = [
            (Method::POST, Version::HTTP_11, headers(GOOD)),
            (Method::GET, Version::HTTP_10, headers(GOOD)),
            (Method::GET, Version::HTTP_11, without("connection")),
            (
                Method::GET,
                Version::HTTP_11,
                with("upgrade", "h2c, websocket"),
            ),
            (
                Method::GET,
                Version::HTTP_11,
                with("sec-websocket-version", "8"),
            ),
            (Method::GET, Version::HTTP_11, without("sec-websocket-key")),
            (
                Method::GET,
                Version::HTTP_11,
                with("sec-websocket-key", "c2hvcnQ="),
            ),
            (Method::GET, Version::HTTP_11, with("content-length", "4")),
            (
                Method::GET,
                Version::HTTP_11,
                with("transfer-encoding", "chunked"),
            ),
        ];
        for (method, version, h) in cases {
            assert!(
                check_request(&method, version, &h).is_err(),
                "{method} {version:?} {h:?}"
            );
        }
    }

    #[test]
    fn the_forwarded_request_offers_no_extension() {
        let mut h = headers(GOOD);
        h.insert(
            SEC_WEBSOCKET_EXTENSIONS,
            HeaderValue::from_static("permessage-deflate"),
        );
        prepare_request(&mut h);
        assert!(!h.contains_key(SEC_WEBSOCKET_EXTENSIONS));
        assert_eq!(h[UPGRADE], "websocket");
        assert_eq!(h[CONNECTION], "Upgrade");
    }

    #[test]
    fn only_a_faithful_switch_is_accepted() {
        let offer = check_request(&Method::GET, Version::HTTP_11, &headers(GOOD)).unwrap();
        let accept = accept_for(&offer.key);
        let base = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-accept", accept.as_str()),
        ];
        assert_eq!(check_switch(&headers(&base), &offer), Ok(()));
        let mut chat = base.to_vec();
        chat.push(("sec-websocket-protocol", "chat"));
        assert_eq!(check_switch(&headers(&chat), &offer), Ok(()));
        let mut other = base.to_vec();
        other.push(("sec-websocket-protocol", "mqtt"));
        assert!(check_switch(&headers(&other), &offer).is_err());
        let mut deflate = base.to_vec();
        deflate.push(("sec-websocket-extensions", "permessage-deflate"));
        assert!(check_switch(&headers(&deflate), &offer).is_err());
        let wrong = [
            ("upgrade", "websocket"),
            ("connection", "Upgrade"),
            ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        ];
        let other_offer = Offer {
            key: "AAAAAAAAAAAAAAAAAAAAAA==".into(),
            protocols: vec![],
        };
        assert!(check_switch(&headers(&wrong), &other_offer).is_err());
        assert!(check_switch(&headers(&base[..2]), &offer).is_err());
    }
}
