//! Which names the workload resolved to which addresses, so a later
//! `connect` to an address is decided against the host rules too.
//!
//! The DNS stub records every answer it gives; `--resolve HOST=IP` entries
//! are recorded up front and, once the workload has asked for `HOST`, mark
//! `IP` as *named by the operator* for it (see [`crate::decide`]). A
//! connection to an address is never attributed to a name the workload did
//! not ask for: an address is not a name, whoever else it belongs to. Entries live as long as the
//! sandbox: programs keep addresses far longer than a record's TTL (Java
//! caches forever), and an address once given for an allowed name stays
//! the one the workload was told. The table is bounded; the oldest address
//! goes first, operator entries never.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;

use policy_bundle::matcher::canonical_ip;

/// Addresses remembered at most (beyond the operator's).
const MAX_ADDRS: usize = 65_536;
/// Names remembered per address (a CDN address serves many).
const MAX_NAMES_PER_ADDR: usize = 16;

/// A name the workload was told for an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributed {
    pub name: String,
    /// The operator said so with `--resolve`: the address counts as named
    /// explicitly for this host, even if it is internal.
    pub operator: bool,
}

#[derive(Debug, Default)]
struct Table {
    by_addr: HashMap<IpAddr, VecDeque<String>>,
    order: VecDeque<IpAddr>,
}

#[derive(Debug)]
pub struct Attribution {
    learned: Mutex<Table>,
    operator: HashMap<IpAddr, Vec<String>>,
    operator_pairs: HashSet<(String, IpAddr)>,
    /// The operator's pairs the workload has asked the stub for.
    asked: Mutex<HashSet<(String, IpAddr)>>,
}

impl Attribution {
    /// A table that starts with the operator's `--resolve` entries.
    #[must_use]
    pub fn new(operator: &[(String, IpAddr)]) -> Self {
        let mut by_addr: HashMap<IpAddr, Vec<String>> = HashMap::new();
        let mut pairs = HashSet::new();
        for (name, ip) in operator {
            let ip = canonical_ip(*ip);
            let names = by_addr.entry(ip).or_default();
            if !names.contains(name) {
                names.push(name.clone());
            }
            pairs.insert((name.clone(), ip));
        }
        Self {
            learned: Mutex::new(Table::default()),
            operator: by_addr,
            operator_pairs: pairs,
            asked: Mutex::new(HashSet::new()),
        }
    }

    /// Records that `name` was answered with `addrs`.
    pub fn remember(&self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) {
        let Ok(mut table) = self.learned.lock() else {
            return;
        };
        for ip in addrs {
            let ip = canonical_ip(ip);
            let pair = (name.to_owned(), ip);
            if self.operator_pairs.contains(&pair) {
                if let Ok(mut asked) = self.asked.lock() {
                    asked.insert(pair);
                }
                continue;
            }
            let fresh = !table.by_addr.contains_key(&ip);
            let names = table.by_addr.entry(ip).or_default();
            names.retain(|n| n != name);
            names.push_front(name.to_owned());
            names.truncate(MAX_NAMES_PER_ADDR);
            if fresh {
                table.order.push_back(ip);
                if table.order.len() > MAX_ADDRS
                    && let Some(old) = table.order.pop_front()
                {
                    table.by_addr.remove(&old);
                }
            }
        }
    }

    /// The names given for `ip`: the operator's the workload asked for
    /// first, then the most recently answered.
    #[must_use]
    pub fn names_for(&self, ip: IpAddr) -> Vec<Attributed> {
        let ip = canonical_ip(ip);
        let asked = self.asked.lock().ok();
        let mut out: Vec<Attributed> = self
            .operator
            .get(&ip)
            .into_iter()
            .flatten()
            .filter(|name| {
                asked
                    .as_ref()
                    .is_some_and(|a| a.contains(&((*name).clone(), ip)))
            })
            .map(|name| Attributed {
                name: name.clone(),
                operator: true,
            })
            .collect();
        drop(asked);
        if let Ok(table) = self.learned.lock() {
            out.extend(
                table
                    .by_addr
                    .get(&ip)
                    .into_iter()
                    .flatten()
                    .map(|name| Attributed {
                        name: name.clone(),
                        operator: false,
                    }),
            );
        }
        out
    }

    /// Whether the operator named `ip` for `host` (`--resolve`): the deny
    /// log says so, for `suggest` to replay the connection as the
    /// supervisor decided it (the host rules asked without the address).
    #[must_use]
    pub fn operator_named(&self, host: &str, ip: IpAddr) -> bool {
        self.operator_pairs
            .contains(&(host.to_owned(), canonical_ip(ip)))
    }

    /// The operator's addresses for `name`, for the DNS stub.
    #[must_use]
    pub fn operator_addrs(&self, name: &str) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = self
            .operator_pairs
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, ip)| *ip)
            .collect();
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn names_come_back_most_recent_first_and_mapped_forms_agree() {
        let a = Attribution::new(&[("local.test".into(), ip("127.0.0.1"))]);
        a.remember("a.example", [ip("93.184.216.34")]);
        a.remember("b.example", [ip("::ffff:93.184.216.34")]);
        let names: Vec<String> = a
            .names_for(ip("93.184.216.34"))
            .into_iter()
            .map(|n| n.name)
            .collect();
        assert_eq!(names, ["b.example", "a.example"]);
        // Not asked for yet: the address alone names nothing.
        assert!(a.names_for(ip("127.0.0.1")).is_empty());
        a.remember("local.test", [ip("127.0.0.1")]);
        let local = a.names_for(ip("::ffff:127.0.0.1"));
        assert_eq!(
            local,
            [Attributed {
                name: "local.test".into(),
                operator: true
            }]
        );
        assert_eq!(a.operator_addrs("local.test"), [ip("127.0.0.1")]);
        assert!(a.names_for(ip("10.0.0.1")).is_empty());
    }
}
