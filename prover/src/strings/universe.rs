//! The strings each dimension can take at all: canonical request paths,
//! normalized host names, resolved executable paths. Atoms are taken
//! inside these universes, so every atom has a witness enforcement can
//! actually meet (a pattern such as `/*` also matches `/..`, which no
//! canonical path is).

use policy_bundle::matcher::canonicalize_path;

/// A universe: strings matching `accept` and none of `reject`.
#[derive(Debug, Clone)]
pub struct Universe {
    pub(crate) accept: String,
    pub(crate) reject: Vec<String>,
    /// Whether the dimension's strings may hold non-ASCII characters, so the
    /// automata must read UTF-8 (executable paths); otherwise bytes.
    pub(crate) unicode: bool,
}

const LABEL: &str = "[0-9_a-z](?:[-0-9_a-z]*[0-9_a-z])?";
const OCTET: &str = "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])";

/// Normalized host names (lowercase labels of `a-z 0-9 - _`, not starting
/// or ending with `-`), without IPv4 literals, which enforcement reads as
/// addresses. Label and name length limits are not modelled.
pub fn hosts() -> Universe {
    Universe {
        accept: format!("{LABEL}(?:\\.{LABEL})*"),
        reject: vec![format!("{OCTET}\\.{OCTET}\\.{OCTET}\\.{OCTET}")],
        unicode: false,
    }
}

/// Request paths: strings starting with `/`. Which of them are canonical
/// (no empty or dot segments, only the characters and escapes
/// canonicalization leaves) is checked on witnesses instead
/// ([`is_canonical_path`]): spelling that out in the automaton multiplies
/// its states by two orders of magnitude, because every floating pattern
/// then runs alongside it.
pub fn http_paths() -> Universe {
    Universe {
        accept: "/(?s:.*)".to_owned(),
        reject: Vec::new(),
        unicode: false,
    }
}

/// Executable paths: strings starting with `/`; [`is_resolved_binary`]
/// checks witnesses are resolved paths.
pub fn binaries() -> Universe {
    Universe {
        accept: "/(?s:.)+".to_owned(),
        reject: Vec::new(),
        unicode: true,
    }
}

/// Whether a path is canonical (canonicalizes to itself); used to check
/// witnesses.
pub fn is_canonical_path(path: &str, encoded_slash: bool) -> bool {
    canonicalize_path(path, encoded_slash).is_ok_and(|c| c.path == path && c.query.is_none())
}

/// Whether a string is a resolved absolute executable path: no empty, `.`
/// or `..` components, no control characters.
pub fn is_resolved_binary(path: &str) -> bool {
    path.strip_prefix('/').is_some_and(|rest| {
        rest.split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
            && !path.chars().any(char::is_control)
    })
}

/// Whether a string is a host name as `normalize_host` writes it.
pub fn is_normal_host(host: &str) -> bool {
    policy_bundle::matcher::normalize_host(host).is_ok_and(|h| h == host)
        && host.parse::<std::net::IpAddr>().is_err()
}
