//! REST rules: HTTP method, path and query matchers.

use serde::{Deserialize, Serialize};

use super::Sourced;
use crate::matcher::{HttpPathGlob, MethodSet, QueryMatcher, RequestPath};

/// The allow and deny rules of a REST endpoint (or of a websocket
/// endpoint's upgrade and text messages). Deny wins.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RestRules {
    /// A request must match one of these.
    pub allow: Vec<Sourced<L7Matcher>>,
    /// A request matching one of these is refused, whatever the allow rules say.
    pub deny: Vec<Sourced<L7Matcher>>,
}

impl RestRules {
    /// The index of the first allow (or deny) rule matching the request.
    pub(crate) fn find(
        &self,
        method: &str,
        path: &RequestPath<'_>,
        params: &[(String, String)],
        deny: bool,
    ) -> Option<usize> {
        let rules = if deny { &self.deny } else { &self.allow };
        rules
            .iter()
            .position(|m| m.matches(method, path, params, deny))
    }
}

/// One REST rule: method, path and every query matcher must match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct L7Matcher {
    /// The methods covered.
    pub methods: MethodSet,
    /// Matched against the canonical path, folded on an endpoint that
    /// folds paths.
    pub path: HttpPathGlob,
    /// Each must hold; read differently by allow and deny rules for absent parameters.
    pub query: Vec<QueryMatcher>,
}

impl L7Matcher {
    /// Whether a request matches, read as a deny rule or as an allow rule
    /// (query matchers treat absent parameters differently).
    pub(crate) fn matches(
        &self,
        method: &str,
        path: &RequestPath<'_>,
        params: &[(String, String)],
        deny: bool,
    ) -> bool {
        self.methods.contains(method)
            && path.matched_by(&self.path)
            && self.query.iter().all(|q| {
                if deny {
                    q.denies(params)
                } else {
                    q.allows(params)
                }
            })
    }
}

impl RestRules {
    /// Deny rule `i`, or allow rule `i`.
    pub(crate) fn rule(&self, deny: bool, i: usize) -> Option<&Sourced<L7Matcher>> {
        if deny {
            self.deny.get(i)
        } else {
            self.allow.get(i)
        }
    }
}
