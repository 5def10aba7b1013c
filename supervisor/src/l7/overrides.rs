//! Request headers that ask a server to act on another method, target or
//! host than the request line says, or that speak for a proxy in front of
//! it: the proxy removes them before forwarding.
//!
//! The rules decide on the method and the canonical target of the request
//! line. A backend that honours `X-HTTP-Method-Override: DELETE` on a
//! `GET`, or `X-Original-URL: /admin` on `/public` (IIS, Symfony, some
//! gateways), would act on a request no rule allowed. Rather than guess
//! what each backend honours and decide on that too, the proxy forwards
//! only the request it decided: these headers never reach the server.
//! The workload is not a proxy either, so it cannot vouch for a client
//! address, scheme or host in front of it (`Forwarded`, `X-Forwarded-*`,
//! `X-Real-IP`): backends use those for access decisions and routing.
//!
//! A client that relies on an override (a `POST` standing in for a long
//! `GET`) must send the real method. Overrides carried in the query
//! (`_method=`) are removed from the forwarded query for the same reason;
//! one in a form body is not seen (see `docs/threat-model.md`).

use hyper::header::{HeaderMap, HeaderName};

/// The headers removed, lowercase, beyond every `x-forwarded-*`.
const OVERRIDES: [&str; 14] = [
    // the method
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
    "x-original-method",
    // the target
    "x-original-url",
    "x-original-uri",
    "x-rewrite-url",
    "x-override-url",
    "x-envoy-original-path",
    // the host and the client, as a proxy would say them
    "forwarded",
    "x-real-ip",
    "x-host",
    "x-client-ip",
    "true-client-ip",
];

/// Whether `name` (lowercase, as `HeaderName` keeps it) is removed.
fn is_override(name: &str) -> bool {
    name.starts_with("x-forwarded-") || OVERRIDES.contains(&name)
}

/// Removes every override header; returns how many distinct names went.
pub(super) fn strip(headers: &mut HeaderMap) -> usize {
    if !headers.keys().any(|n| is_override(n.as_str())) {
        return 0;
    }
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_override(n.as_str()))
        .cloned()
        .collect();
    for name in &names {
        headers.remove(name);
    }
    names.len()
}

/// The query without `_method` parameters (Laravel, Symfony and
/// method-override middleware read the method from there); `None` when
/// it has none.
pub(super) fn strip_from_query(query: &str) -> Option<String> {
    let is_method = |pair: &&str| {
        let key = pair.split('=').next().unwrap_or_default();
        key.eq_ignore_ascii_case("_method") || key.eq_ignore_ascii_case("%5Fmethod")
    };
    if !query.split('&').any(|p| is_method(&p)) {
        return None;
    }
    Some(
        query
            .split('&')
            .filter(|p| !is_method(p))
            .collect::<Vec<_>>()
            .join("&"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn override_headers_go_and_the_rest_stays() {
        let mut h = HeaderMap::new();
        for name in [
            "X-HTTP-Method-Override",
            "x-original-url",
            "X-Rewrite-URL",
            "x-forwarded-host",
            "X-Forwarded-For",
            "forwarded",
            "accept",
            "authorization",
            "x-request-id",
        ] {
            h.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static("v"),
            );
        }
        assert_eq!(strip(&mut h), 6);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "authorization", "x-request-id"]);
        assert_eq!(strip(&mut h), 0);
    }

    #[test]
    fn method_parameters_leave_the_query() {
        assert_eq!(strip_from_query("a=1&b=2"), None);
        assert_eq!(
            strip_from_query("a=1&_method=DELETE&b=2").as_deref(),
            Some("a=1&b=2")
        );
        assert_eq!(strip_from_query("%5fmethod=PUT").as_deref(), Some(""));
        assert_eq!(strip_from_query("_METHOD").as_deref(), Some(""));
        assert_eq!(strip_from_query("x_method=1"), None);
    }
}
