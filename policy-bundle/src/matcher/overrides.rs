//! The names a server reads as a request for another method, target or
//! host than the request line says, compared the way the server will see
//! them: the evaluator refuses a query that names another method
//! (`override_refused`), and the proxy removes such headers before
//! forwarding (`is_override_header`).
//!
//! The rules decide on the method and the canonical target of the request
//! line. A backend that honours `X-HTTP-Method-Override: DELETE` on a
//! `GET`, or `X-Original-URL: /admin` on `/public` (IIS, Symfony, some
//! gateways), would act on a request no rule allowed. Rather than guess
//! what each backend honours and decide on that too, the proxy forwards
//! only the request that was decided: these headers never reach the
//! server, so they change no decision. The workload is not a proxy
//! either, so it cannot vouch for a client address, scheme or host in
//! front of it (`Forwarded`, `X-Forwarded-*`, `X-Real-IP`,
//! `CF-Connecting-IP`, ...): backends use those for access decisions and
//! routing.
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

/// Whether a header of this name asks for another method, target, host
/// or client: the proxy removes it before forwarding.
pub fn is_override_header(name: &str) -> bool {
    let name = server_name(name);
    name.starts_with("x-forwarded-") || OVERRIDES.contains(&name.as_str())
}

/// The first key of `query` that a server may read as a method override
/// (Laravel, Symfony and method-override middleware read `_method`), as
/// sent; `None` when there is none.
pub fn method_in_query(query: &str) -> Option<&str> {
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

    #[test]
    fn every_spelling_a_server_files_as_the_same_header_is_an_override() {
        for name in [
            "X_HTTP_Method_Override",
            "x-http_method-override",
            "X_Original_URL",
            "x_forwarded_for",
            "cf_connecting_ip",
            "Client-IP",
        ] {
            assert!(is_override_header(name), "{name}");
        }
        for name in ["x-client", "x-request-id", "ip", "x-forwarded"] {
            assert_eq!(is_override_header(name), name == "x-forwarded", "{name}");
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
