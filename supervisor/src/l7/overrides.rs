//! Request headers that ask a server to act on another method, target or
//! host than the request line says, or that speak for a proxy in front of
//! it: the proxy removes them before forwarding, so the server acts on
//! the request that was decided. Which names those are, in every spelling
//! a server files under the same name, is
//! `policy_bundle::matcher::overrides`; so is the query parameter naming
//! another method, which the evaluator refuses (`override_refused`).

use hyper::header::{HeaderMap, HeaderName};
use policy_bundle::matcher::overrides::is_override_header as is_override;

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
    fn every_spelling_a_server_files_as_the_same_variable_goes() {
        for name in [
            "X_HTTP_Method_Override",
            "x-http_method-override",
            "X_Original_URL",
            "x_forwarded_for",
            "X-Forwarded_Host",
            "X_Real_IP",
            "CF-Connecting-IP",
            "cf_connecting_ip",
            "Fastly-Client-IP",
            "X-Cluster-Client-IP",
            "x_cluster_client_ip",
            "Client-IP",
            "client_ip",
            "X-Original-Host",
            "X_Original_Host",
        ] {
            let mut h = HeaderMap::new();
            h.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_static("v"),
            );
            assert_eq!(strip(&mut h), 1, "{name}");
        }
    }
}
