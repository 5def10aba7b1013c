//! Request headers that ask a server to act on another method, target or
//! host than the request line says, or that speak for a proxy in front of
//! it: the proxy removes them before forwarding. Query parameters that
//! name another method: the proxy refuses the request.
//!
//! The rules decide on the method and the canonical target of the request
//! line. A backend that honours `X-HTTP-Method-Override: DELETE` on a
//! `GET`, or `X-Original-URL: /admin` on `/public` (IIS, Symfony, some
//! gateways), would act on a request no rule allowed. Rather than guess
//! what each backend honours and decide on that too, the proxy forwards
//! only the request it decided: these headers never reach the server.
//! The workload is not a proxy either, so it cannot vouch for a client
//! address, scheme or host in front of it (`Forwarded`, `X-Forwarded-*`,
//! `X-Real-IP`, `CF-Connecting-IP`, ...): backends use those for access
//! decisions and routing.
//!
//! Names are compared the way the server will see them, not as sent. A
//! CGI or WSGI server turns `X_HTTP_Method_Override` and
//! `X-HTTP-Method-Override` into the same `HTTP_X_HTTP_METHOD_OVERRIDE`;
//! PHP turns the query key `%5Fmethod`, ` method`, `.method` and
//! `_method[]` into `_method`, and many servers split a query on `;` as
//! well as `&`.
//!
//! An override in the query is refused rather than cut out: the rules
//! read the query split on `&` alone, so removing a `;`-separated piece
//! would hand the server values (or drop ones) the rules never judged. A
//! client that relies on an override (a `POST` standing in for a long
//! `GET`) must send the real method. One in a form body is not seen (see
//! `docs/threat-model.md`).

use hyper::header::{HeaderMap, HeaderName};

/// The headers removed, in the spelling [`server_name`] gives, beyond
/// every `x-forwarded-*`.
const OVERRIDES: [&str; 20] = [
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
    // the host and the client, as a proxy (or a CDN) would say them
    "forwarded",
    "x-forwarded",
    "x-real-ip",
    "x-host",
    "x-original-host",
    "x-client-ip",
    "true-client-ip",
    "client-ip",
    "cf-connecting-ip",
    "fastly-client-ip",
    "x-cluster-client-ip",
];

/// The query keys that name a method, in the spelling [`server_name`]
/// gives to what [`server_key`] returns.
const METHOD_PARAMS: [&str; 4] = [
    "-method",
    "x-http-method-override",
    "x-http-method",
    "x-method-override",
];

/// A name as a CGI/WSGI server files it, lowercase, with every character
/// but a letter or digit as `-`: all spellings of one variable are equal.
fn server_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// Whether a header of this name is removed.
fn is_override(name: &str) -> bool {
    let name = server_name(name);
    name.starts_with("x-forwarded-") || OVERRIDES.contains(&name.as_str())
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

/// The first key of `query` that a server may read as a method override
/// (Laravel, Symfony and method-override middleware read `_method`), as
/// sent; `None` when there is none.
pub(super) fn method_in_query(query: &str) -> Option<&str> {
    query
        .split(['&', ';'])
        .map(|pair| pair.split('=').next().unwrap_or_default())
        .find(|key| {
            let (php, plain) = server_keys(key);
            [php, plain]
                .iter()
                .any(|k| METHOD_PARAMS.contains(&server_name(k).as_str()))
        })
}

/// The names servers give a raw query key: `+` and percent-escapes
/// decoded (again while that changes it: a second decoding is common
/// enough) and cut at a NUL; then as PHP files it (leading spaces
/// dropped, an `[index]` suffix dropped, space, `.` and `[` as `_`), and
/// as a server that keeps the leading spaces but maps the rest the same.
fn server_keys(raw: &str) -> (String, String) {
    let mut key = raw.to_owned();
    for _ in 0..4 {
        let next = decode(&key);
        if next == key {
            break;
        }
        key = next;
    }
    let key = key.split('\0').next().unwrap_or_default();
    let base = match key.find('[') {
        Some(open) if key.get(open..).is_some_and(|rest| rest.contains(']')) => {
            key.get(..open).unwrap_or_default()
        }
        _ => key,
    };
    let mangle = |text: &str| -> String {
        text.chars()
            .map(|c| match c {
                ' ' | '.' | '[' => '_',
                c => c,
            })
            .collect()
    };
    (mangle(base.trim_start_matches(' ')), mangle(base))
}

/// One round of form decoding, lossy: what is compared is a name, and a
/// byte that is not UTF-8 cannot make it an override.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = |k: usize| bytes.get(k).and_then(|&h| char::from(h).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(0));
                i += 3;
            }
            (b'+', ..) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
        for name in ["x-client", "x-request-id", "ip", "x-forwarded"] {
            assert_eq!(is_override(name), name == "x-forwarded", "{name}");
        }
    }

    #[test]
    fn method_parameters_are_found_in_every_spelling_a_server_reads() {
        for q in [
            "a=1&b=2",
            "x_method=1",
            "method=PUT",
            "a=_method",
            "__method=1",
            "_methods=1",
        ] {
            assert_eq!(method_in_query(q), None, "{q}");
        }
        for (q, key) in [
            ("a=1&_method=DELETE&b=2", "_method"),
            ("%5fmethod=PUT", "%5fmethod"),
            ("_METHOD", "_METHOD"),
            ("_%6Dethod=DELETE", "_%6Dethod"),
            ("%255Fmethod=DELETE", "%255Fmethod"),
            ("a=1;_method=DELETE", "_method"),
            ("a=1&b=2;%5Fmethod=DELETE", "%5Fmethod"),
            ("+method=DELETE", "+method"),
            ("%20method=DELETE", "%20method"),
            ("+%20.method=DELETE", "+%20.method"),
            (".method=DELETE", ".method"),
            ("[method=DELETE", "[method"),
            ("_method[]=DELETE", "_method[]"),
            ("_method%00x=DELETE", "_method%00x"),
            ("X-HTTP-Method-Override=DELETE", "X-HTTP-Method-Override"),
            ("x_http_method=DELETE", "x_http_method"),
        ] {
            assert_eq!(method_in_query(q), Some(key), "{q}");
        }
    }
}
