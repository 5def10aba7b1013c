//! Request-target canonicalization: the one spelling of a path that rules
//! are matched against.
//!
//! A deny rule is only as strong as the path it sees. Backends decode `%2e`,
//! collapse `//` and resolve `..` before routing, so if the proxy matched the
//! raw text, `/repos/o/r/%2e%2e/x` would slip past a deny on `/repos/o/x`.
//! Everything that could be spelled two ways is either brought to one form
//! here or rejected. The proxy should forward the canonical form, so what
//! was checked is what the backend gets.

/// An origin-form request target after canonicalization.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalTarget {
    /// The canonical path, always starting with `/`.
    pub path: String,
    /// The raw query string after the first `?`, without the `?`; decoded
    /// separately by `parse_query_string`.
    pub query: Option<String>,
}

/// Why a request target was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CanonError {
    /// The target does not start with `/` (absolute-form, authority-form or
    /// `*` are not matched against path rules).
    #[error("request target `{target}` does not start with `/`")]
    NotOriginForm {
        /// As sent.
        target: String,
    },
    /// A control character, space, DEL or non-ASCII byte, which no valid
    /// request target contains and which servers treat inconsistently.
    #[error("control character, space or non-ASCII byte at byte {offset} of the request target")]
    ControlCharacter {
        /// Byte offset in the target.
        offset: usize,
    },
    /// `%` not followed by two hex digits.
    #[error("invalid percent-escape `{escape}` at byte {offset} of the path")]
    BadEscape {
        /// Byte offset in the path.
        offset: usize,
        /// The escape as written.
        escape: String,
    },
    /// `%00`, which truncates paths in C-based backends.
    #[error("encoded NUL `%00` at byte {offset} of the path")]
    EncodedNul {
        /// Byte offset in the path.
        offset: usize,
    },
    /// `%2F`, which some backends decode into a segment separator after the
    /// proxy has matched the path as one segment.
    #[error("encoded slash `%2F` at byte {offset} of the path")]
    EncodedSlash {
        /// Byte offset in the path.
        offset: usize,
    },
    /// `\`, which some backends treat as `/`.
    #[error("backslash at byte {offset} of the path")]
    Backslash {
        /// Byte offset in the path.
        offset: usize,
    },
    /// `;` in the path. Java servers (Tomcat, Spring) strip `;parameters`
    /// from segments before routing, so `/admin;x/secret` reaches
    /// `/admin/secret` while matching as another path; other servers keep
    /// them. Neither reading can be matched exactly for both, so the
    /// proxy refuses the request.
    #[error("`;` at byte {offset} of the path (path parameters are refused)")]
    PathParameters {
        /// Byte offset in the path.
        offset: usize,
    },
    /// A `.` or `..` segment followed by an encoded `;` (`/..%3B/`), which
    /// some backends decode and then resolve as `..` after the proxy matched.
    #[error("dot segment with parameters `{segment}`")]
    DotSegmentParameters {
        /// The segment as written.
        segment: String,
    },
}

/// Whether an escape is decoded in the canonical path: every printable
/// ASCII character except those whose decoding would change how the path is
/// split or read again (`/ ? # % ;`) and the backslash (refused). Servers
/// decode the rest before routing, so matching the decoded form is what
/// keeps `%3A` from slipping past a rule written with `:`; the proxy
/// forwards the canonical path, so what was checked is what is sent.
pub(crate) fn decodes_to_literal(c: char) -> bool {
    c.is_ascii_graphic() && !matches!(c, '/' | '?' | '#' | '%' | ';' | '\\')
}

/// Brings an origin-form request target to its canonical form, or refuses it.
///
/// Steps, in order: drop any `#fragment`, split the query off at the first
/// `?`; reject control characters, space and non-ASCII bytes anywhere, and
/// `\` and `;` in the path; decode escapes of printable ASCII characters
/// other than `/ ? # % ;` and uppercase every other escape; reject `%00`, and `%2F` unless `allow_encoded_slash`
/// (then it stays `%2F` inside its segment); collapse `//`; remove dot
/// segments (RFC 3986 §5.2.4). A trailing slash is kept.
pub fn canonicalize_path(
    raw_target: &str,
    allow_encoded_slash: bool,
) -> Result<CanonicalTarget, CanonError> {
    let target = raw_target.split('#').next().unwrap_or("");
    if let Some(offset) = target.bytes().position(|b| b <= b' ' || b >= 0x7f) {
        return Err(CanonError::ControlCharacter { offset });
    }
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query.to_owned())),
        None => (target, None),
    };
    if !path.starts_with('/') {
        return Err(CanonError::NotOriginForm {
            target: path.chars().take(64).collect(),
        });
    }
    let decoded = decode(path, allow_encoded_slash)?;
    Ok(CanonicalTarget {
        path: remove_dot_segments(&decoded)?,
        query,
    })
}

fn decode(path: &str, allow_encoded_slash: bool) -> Result<String, CanonError> {
    let bytes = path.as_bytes();
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'\\' => return Err(CanonError::Backslash { offset: i }),
            b';' => return Err(CanonError::PathParameters { offset: i }),
            b'%' => {
                let hex = |k: usize| bytes.get(k).and_then(|&h| char::from(h).to_digit(16));
                let (Some(hi), Some(lo)) = (hex(i + 1), hex(i + 2)) else {
                    let escape = path.get(i..).unwrap_or("").chars().take(3).collect();
                    return Err(CanonError::BadEscape { offset: i, escape });
                };
                let value = hi * 16 + lo;
                let c = char::from_u32(value).unwrap_or('\0');
                if value == 0 {
                    return Err(CanonError::EncodedNul { offset: i });
                }
                if value == u32::from(b'/') && !allow_encoded_slash {
                    return Err(CanonError::EncodedSlash { offset: i });
                }
                if c == '\\' {
                    return Err(CanonError::Backslash { offset: i });
                }
                if decodes_to_literal(c) {
                    out.push(c);
                } else {
                    out.push('%');
                    for v in [hi, lo] {
                        out.push(char::from_digit(v, 16).map_or('0', |d| d.to_ascii_uppercase()));
                    }
                }
                i += 3;
            }
            _ => {
                out.push(char::from(b));
                i += 1;
            }
        }
    }
    Ok(out)
}

/// Collapses empty segments and resolves `.`/`..`, keeping a trailing slash.
/// Equivalent to RFC 3986 §5.2.4 on a path without empty segments.
fn remove_dot_segments(path: &str) -> Result<String, CanonError> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let mut segments = rest.split('/').peekable();
    let mut out: Vec<&str> = Vec::new();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        check_dot_parameters(segment)?;
        match segment {
            "." | ".." => {
                if segment == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            "" if !last => {}
            _ => out.push(segment),
        }
    }
    Ok(format!("/{}", out.join("/")))
}

fn check_dot_parameters(segment: &str) -> Result<(), CanonError> {
    let upper = segment.to_ascii_uppercase();
    let before = upper
        .split(';')
        .next()
        .unwrap_or("")
        .split("%3B")
        .next()
        .unwrap_or("");
    if before.len() < upper.len() && matches!(before, "." | "..") {
        return Err(CanonError::DotSegmentParameters {
            segment: segment.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(raw: &str) -> String {
        canonicalize_path(raw, false).unwrap().path
    }

    #[test]
    fn rfc_3986_dot_segment_examples() {
        assert_eq!(canon("/a/b/c/./../../g"), "/a/g");
        assert_eq!(canon("/mid/content=5/../6"), "/mid/6");
        assert_eq!(canon("/a/b/.."), "/a/");
        assert_eq!(canon("/.."), "/");
    }

    #[test]
    fn query_and_fragment_are_split_off() {
        let t = canonicalize_path("/a%7e?x=%2f#frag?y", false).unwrap();
        assert_eq!(t.path, "/a~");
        assert_eq!(t.query.as_deref(), Some("x=%2f"));
        assert_eq!(canonicalize_path("/a#b?c", false).unwrap().query, None);
    }
}
