//! `host:ports` text: how rules and accepted-risk entries write a
//! destination. One reading for both, so an entry means the destination a
//! rule written the same way means.

/// The parts of `host:ports` or `[v6]:ports`; where the port may be left
/// out, also `host`, `[v6]` or an IPv6 address without brackets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointText<'a> {
    /// The host part, brackets removed.
    pub host: &'a str,
    /// Byte offset of `host` in the text.
    pub host_offset: usize,
    /// Written in brackets: an IPv6 address or range, never a name.
    pub bracketed: bool,
    /// The port list and its byte offset; `None` when left out.
    pub ports: Option<(&'a str, usize)>,
}

/// Why `host:ports` text does not split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointTextError {
    /// `[` without `]`.
    UnclosedBracket,
    /// No port where one is required, or text after `]` that is not one.
    NoPort,
    /// More than one `:` outside brackets, with a port required: the port
    /// cannot be told from the address.
    UnbracketedV6,
}

/// Splits `text` into a destination and its ports (`port_required`: a rule
/// must name them; an accepted-risk entry may leave them out).
pub fn split_endpoint(
    text: &str,
    port_required: bool,
) -> Result<EndpointText<'_>, EndpointTextError> {
    if let Some(rest) = text.strip_prefix('[') {
        let close = rest.find(']').ok_or(EndpointTextError::UnclosedBracket)?;
        let host = rest.get(..close).unwrap_or("");
        let after = rest.get(close + 1..).unwrap_or("");
        let ports = match after.strip_prefix(':') {
            Some(p) => Some((p, close + 3)),
            None if after.is_empty() && !port_required => None,
            None => return Err(EndpointTextError::NoPort),
        };
        return Ok(EndpointText {
            host,
            host_offset: 1,
            bracketed: true,
            ports,
        });
    }
    let whole = EndpointText {
        host: text,
        host_offset: 0,
        bracketed: false,
        ports: None,
    };
    match (text.split_once(':'), port_required) {
        (Some((host, ports)), _) if !ports.contains(':') => Ok(EndpointText {
            host,
            ports: Some((ports, host.len() + 1)),
            ..whole
        }),
        (Some(_), true) => Err(EndpointTextError::UnbracketedV6),
        (None, true) => Err(EndpointTextError::NoPort),
        (_, false) => Ok(whole),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_names_addresses_and_bracketed_v6() {
        let ok = |t, req| split_endpoint(t, req).map(|e| (e.host, e.ports));
        assert_eq!(
            ok("a.example.com:443", true),
            Ok(("a.example.com", Some(("443", 14))))
        );
        assert_eq!(
            ok("[2001:db8::/32]:80,443", true),
            Ok(("2001:db8::/32", Some(("80,443", 16))))
        );
        assert_eq!(ok("[::1]", false), Ok(("::1", None)));
        assert_eq!(ok("2001:db8::1", false), Ok(("2001:db8::1", None)));
        assert_eq!(ok("10.0.0.0/8", false), Ok(("10.0.0.0/8", None)));
        assert_eq!(ok("a.example.com", true), Err(EndpointTextError::NoPort));
        assert_eq!(ok("::1:443", true), Err(EndpointTextError::UnbracketedV6));
        assert_eq!(ok("[::1", false), Err(EndpointTextError::UnclosedBracket));
        assert_eq!(ok("[::1]x", false), Err(EndpointTextError::NoPort));
        assert_eq!(ok("[::1]", true), Err(EndpointTextError::NoPort));
    }
}
