//! The connect decision: who is calling, where to, and what the bundle
//! says. The decision itself is `policy_bundle::eval::Evaluator::
//! decide_connection`, the reference evaluator the prover is tested
//! against; this module only chooses its inputs.
//!
//! - **Binary**: what openshell-sandbox read of the caller through
//!   `/proc/<tid>/exe` (`sandbox::caller`): the kernel's reference to the
//!   file being run, and its SHA-256 when some identity pins one. A binary
//!   deleted since its exec is refused: its path no longer says which file
//!   it was. A binary the policy names through a symbolic link is decided
//!   under that name too ([`crate::broker::aliases`]).
//! - **Its code**: once a connection is allowed, what the sandbox found
//!   mapped executable (`sandbox::writable::Writable::foreign_code`): a
//!   library the workload could have written (`LD_PRELOAD`, `LD_AUDIT`,
//!   `dlopen`, ctypes) runs behind the binary's identity, so that identity
//!   no longer holds; and a program in a tree the workload can write
//!   ([`Decider::planted_in`]).
//! - **Destination**: every name the DNS stub gave the workload for the
//!   address is tried (the operator's `--resolve` names the workload asked
//!   for first, then the most recent answer), each as `host = Some(name),
//!   addr = Some(ip)`; then the bare address, `host = None`. The first
//!   that allows decides. A name the workload never asked for is never
//!   tried: an address is not a name, and a reverse map would hand a bare
//!   connection a host's rules and its name in the deny log.
//! - **Operator naming**: `--resolve HOST=IP` is the operator's statement
//!   that IP is HOST. The evaluator refuses internal addresses (loopback,
//!   private, link-local, metadata) behind a host rule unless the rule names
//!   them; for an operator pair the host rules are asked without the address
//!   (`addr = None`), and a route whose `addresses` list exists and leaves IP
//!   out is dropped, so the operator names the address but cannot widen a
//!   rule's own address list.
//! - **The advisor endpoint**: a connect to its reserved address
//!   (`policy_bundle::ADVISOR_ADDR`) is decided by the `advisor` statement
//!   alone (`Evaluator::decide_advisor`), whatever else the policy says
//!   about that address: allowed, it goes to the proxy, which answers it
//!   itself; it is never connected anywhere.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use policy_bundle::Dest;
use policy_bundle::Via;
use policy_bundle::eval::{ConnectionDecision, Evaluator, Reason, Verdict};
use policy_bundle::{ADVISOR_ADDR, ADVISOR_HOST};

use crate::attribution::{Attributed, Attribution};
use crate::policy::{Active, Policy};

/// The calling binary as the decision sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    pub path: String,
    pub sha256: Option<String>,
    /// Unlinked since it was executed (or never had a name, like a memfd).
    pub deleted: bool,
}

/// A decision and the inputs it was made on.
#[derive(Debug, Clone)]
pub struct Decision {
    pub conn: ConnectionDecision,
    /// The name the connection was attributed to, if any.
    pub host: Option<String>,
    /// The rule that allowed it (`file:line (name)`).
    pub rule: Option<String>,
    /// Allowed to the advisor endpoint: the proxy answers it, no route
    /// carries it (`conn` names none).
    pub advisor: bool,
}

impl Decision {
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.advisor || self.conn.allowed()
    }

    fn refused(reason: Reason) -> Self {
        Self {
            conn: ConnectionDecision {
                routes: Vec::new(),
                l7: Vec::new(),
                reason,
                grants: Vec::new(),
            },
            host: None,
            rule: None,
            advisor: false,
        }
    }

    /// The decision for a connect to the advisor endpoint's address.
    fn advisor(active: &Active, binary: &Binary, port: u16) -> Self {
        let d = active
            .eval
            .decide_advisor(&binary.path, binary.sha256.as_deref(), port);
        let allowed = d.decision == Verdict::Allow;
        Self {
            conn: ConnectionDecision {
                routes: Vec::new(),
                l7: Vec::new(),
                reason: d.reason,
                grants: Vec::new(),
            },
            host: Some(ADVISOR_HOST.to_owned()),
            rule: d.rule.as_ref().map(policy_bundle::Origin::blame),
            advisor: allowed,
        }
    }
}

#[derive(Debug)]
pub struct Decider {
    policy: Arc<Policy>,
    attribution: Arc<Attribution>,
}

impl Decider {
    #[must_use]
    pub fn new(policy: Arc<Policy>, attribution: Arc<Attribution>) -> Self {
        Self {
            policy,
            attribution,
        }
    }

    /// Whether the operator named `ip` for `host` (`--resolve`).
    #[must_use]
    pub fn operator_named(&self, host: Option<&str>, ip: IpAddr) -> bool {
        host.is_some_and(|h| self.attribution.operator_named(h, ip))
    }

    /// Why an allowed connection from `binary` to `ip:port` is refused
    /// after all because the workload could have written the program:
    /// openshell-sandbox reported it to lie in `tree`, a tree the workload
    /// may write (under any name a mount or a link gives that tree), and
    /// only a rule without a SHA-256 pin allows it. A pinned rule vouches
    /// for the file's content wherever it lies; an unpinned one only for
    /// its path, which here names whatever the workload put there. `check`
    /// reports such rules from the policy's text (E0410); this is the same
    /// refusal for what the text cannot show (a symbolic link, a bind
    /// mount, the working directory).
    #[must_use]
    pub fn planted_in(
        &self,
        binary: &Binary,
        tree: &Path,
        ip: IpAddr,
        port: u16,
    ) -> Option<String> {
        let unpinned = Binary {
            sha256: None,
            ..binary.clone()
        };
        if !self.decide(&unpinned, ip, port).allowed() {
            return None;
        }
        Some(format!(
            "`{}` lies in `{}`, which the workload can write, and only a rule without a SHA-256 pin allows it: the path vouches for nothing the workload could have put there",
            binary.path,
            tree.display()
        ))
    }

    /// The policy in force (swapped by a reload).
    #[must_use]
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Decides a connection from `binary` to `ip:port` with the policy in
    /// force.
    #[must_use]
    pub fn decide(&self, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        self.decide_with(&self.policy.current(), binary, ip, port)
    }

    /// Decides a connection with the policy `active`: as the executable,
    /// then as each policy name that links to it.
    #[must_use]
    pub fn decide_with(&self, active: &Active, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        self.each_name(active, binary, |b| self.decide_as_exe(active, b, ip, port))
    }

    fn decide_as_exe(&self, active: &Active, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        if let Some(refused) = deleted(binary) {
            return refused;
        }
        if ip == IpAddr::V4(ADVISOR_ADDR) {
            return Decision::advisor(active, binary, port);
        }
        let mut first_denial: Option<Decision> = None;
        for named in self.attribution.names_for(ip) {
            let decision = Self::named(active, binary, named, ip, port);
            if decision.allowed() {
                return decision;
            }
            first_denial.get_or_insert(decision);
        }
        let bare = Self::bare(active, binary, ip, port);
        if bare.allowed() {
            return bare;
        }
        first_denial.unwrap_or(bare)
    }

    /// `decide` under the executable's path, then under each policy name
    /// that is a link to it; the first that allows wins. A denial of a
    /// link's target says which name it was tried as.
    fn each_name(
        &self,
        active: &Active,
        binary: &Binary,
        decide: impl Fn(&Binary) -> Decision,
    ) -> Decision {
        let own = decide(binary);
        let names = active.aliases.names_for(&binary.path);
        if own.allowed() || names.is_empty() {
            return own;
        }
        let mut last = own;
        for name in names {
            let as_name = Binary {
                path: name.clone(),
                ..binary.clone()
            };
            let decision = decide(&as_name);
            if decision.allowed() {
                return decision;
            }
            last = decision;
        }
        last.conn.reason = Reason::LinkTarget {
            inner: Box::new(last.conn.reason),
            binary: binary.path.clone(),
            links: names.to_vec(),
        };
        last
    }

    /// Decides a connection as attributed to `host` (a name the workload
    /// was given for `ip`), or to the bare address for `None`: what the
    /// proxy asks when a request names another host than the one the
    /// connection was decided for, and after a reload.
    #[must_use]
    pub fn decide_as(
        &self,
        active: &Active,
        binary: &Binary,
        ip: IpAddr,
        port: u16,
        host: Option<&str>,
    ) -> Decision {
        self.each_name(active, binary, |b| {
            self.decide_host(active, b, ip, port, host)
        })
    }

    fn decide_host(
        &self,
        active: &Active,
        binary: &Binary,
        ip: IpAddr,
        port: u16,
        host: Option<&str>,
    ) -> Decision {
        if let Some(refused) = deleted(binary) {
            return refused;
        }
        if ip == IpAddr::V4(ADVISOR_ADDR) {
            return Decision::advisor(active, binary, port);
        }
        let Some(host) = host else {
            return Self::bare(active, binary, ip, port);
        };
        match self
            .attribution
            .names_for(ip)
            .into_iter()
            .find(|n| n.name == host)
        {
            Some(named) => Self::named(active, binary, named, ip, port),
            None => Decision::refused(Reason::UnattributedName {
                host: host.to_string(),
                ip,
            }),
        }
    }

    fn named(
        active: &Active,
        binary: &Binary,
        named: Attributed,
        ip: IpAddr,
        port: u16,
    ) -> Decision {
        let sha = binary.sha256.as_deref();
        let eval = &active.eval;
        let mut conn = eval.decide_connection(&binary.path, sha, Some(&named.name), Some(ip), port);
        if !conn.allowed() && named.operator {
            conn = operator_named(eval, &binary.path, sha, &named.name, ip, port);
        }
        Decision {
            rule: rule_of(eval, &conn),
            conn,
            host: Some(named.name),
            advisor: false,
        }
    }

    fn bare(active: &Active, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        let eval = &active.eval;
        let conn =
            eval.decide_connection(&binary.path, binary.sha256.as_deref(), None, Some(ip), port);
        Decision {
            rule: if conn.allowed() {
                rule_of(eval, &conn)
            } else {
                None
            },
            conn,
            host: None,
            advisor: false,
        }
    }
}

fn deleted(binary: &Binary) -> Option<Decision> {
    binary.deleted.then(|| {
        Decision::refused(Reason::DeletedBinary {
            binary: binary.path.clone(),
        })
    })
}

/// The host rules for an address the operator named for `host`.
fn operator_named(
    eval: &Evaluator,
    binary: &str,
    sha: Option<&str>,
    host: &str,
    ip: IpAddr,
    port: u16,
) -> ConnectionDecision {
    let mut conn = eval.decide_connection(binary, sha, Some(host), None, port);
    let routes = &eval.bundle().enforcement.seccomp.routes;
    conn.routes.retain(|&r| {
        routes.get(r as usize).is_some_and(|route| {
            matches!(route.dest, Dest::Host(_))
                && route.addresses.as_ref().is_none_or(|a| a.contains(ip))
        })
    });
    conn.l7 = conn
        .routes
        .iter()
        .filter_map(|&r| match routes.get(r as usize).map(|x| x.via) {
            Some(Via::L7(e)) => Some(e),
            _ => None,
        })
        .collect();
    conn.l7.sort_unstable();
    conn.l7.dedup();
    if conn.allowed() {
        conn.reason = Reason::Resolved {
            inner: Box::new(conn.reason),
            ip,
            host: host.to_string(),
        };
    }
    conn
}

/// `file:line (name)` of a rule that allowed this binary the connection.
#[must_use]
pub fn rule_of(eval: &Evaluator, conn: &ConnectionDecision) -> Option<String> {
    eval.connection_rule(conn).map(|o| o.blame())
}
