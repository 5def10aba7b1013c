//! Which names the stub answers: those some identity's `dns` patterns
//! match (the bundle lists, per binary, the host patterns of its routes).
//! The stub cannot tell which binary asks, so a name any binary may reach
//! is answered; the connect that follows is still decided per binary.
//! The advisor's name, `policy.local`, is answered (with its reserved
//! address) exactly when the policy has an `advisor` statement, for the
//! same reason: the connect decides which binaries reach it.

use std::collections::{HashMap, HashSet};

use policy_bundle::matcher::HostPattern;
use policy_bundle::{SeccompTable, Tables};

/// Exact names in a set; wildcard patterns indexed by their literal
/// suffix, so a lookup costs one probe per label of the name.
#[derive(Debug, Default)]
pub struct DnsPolicy {
    exact: HashSet<String>,
    by_suffix: HashMap<String, Vec<HostPattern>>,
    /// The policy has an `advisor` statement.
    advisor: bool,
}

impl DnsPolicy {
    /// The names of a bundle's routes, and the advisor's when it has one.
    #[must_use]
    pub fn from_tables(tables: &Tables) -> Self {
        Self {
            advisor: tables.advisor.is_some(),
            ..Self::from_table(&tables.seccomp)
        }
    }

    /// Whether `policy.local` is answered.
    #[must_use]
    pub fn advisor(&self) -> bool {
        self.advisor
    }

    #[must_use]
    pub fn from_table(table: &SeccompTable) -> Self {
        let mut policy = Self::default();
        for pattern in table.identities.iter().flat_map(|i| &i.dns) {
            match pattern.exact() {
                Some(name) => {
                    policy.exact.insert(name.to_owned());
                }
                None => {
                    let list = policy
                        .by_suffix
                        .entry(pattern.literal_suffix().to_owned())
                        .or_default();
                    if !list.contains(pattern) {
                        list.push(pattern.clone());
                    }
                }
            }
        }
        policy
    }

    /// Whether `name` (normalized: lowercase, no trailing dot, punycode)
    /// may be answered.
    #[must_use]
    pub fn allows(&self, name: &str) -> bool {
        if self.exact.contains(name) {
            return true;
        }
        let mut rest = name;
        while let Some((_, tail)) = rest.split_once('.') {
            if self
                .by_suffix
                .get(tail)
                .is_some_and(|ps| ps.iter().any(|p| p.matches(name)))
            {
                return true;
            }
            rest = tail;
        }
        false
    }
}
