//! The connect decision: who is calling, where to, and what the bundle
//! says. The decision itself is `policy_lang::eval::Evaluator::
//! decide_connection`, the reference evaluator the prover is tested
//! against; this module only chooses its inputs.
//!
//! - **Binary**: `/proc/<tid>/exe`, the kernel's reference to the file being
//!   run; its SHA-256 (through the enforcer's fingerprint cache) only when
//!   some identity pins one. A binary deleted since its exec is refused: its
//!   path no longer says which file it was.
//! - **Destination**: every name the DNS stub gave the workload for the
//!   address is tried (the operator's `--resolve` names first, then the most
//!   recent answer), each as `host = Some(name), addr = Some(ip)`; then the
//!   bare address, `host = None`. The first that allows decides.
//! - **Operator naming**: `--resolve HOST=IP` is the operator's statement
//!   that IP is HOST. The evaluator refuses internal addresses (loopback,
//!   private, link-local, metadata) behind a host rule unless the rule names
//!   them; for an operator pair the host rules are asked without the address
//!   (`addr = None`), and a route whose `addresses` list exists and leaves IP
//!   out is dropped, so the operator names the address but cannot widen a
//!   rule's own address list.

use std::io;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use enforcer::FingerprintCache;
use policy_lang::bundle::Via;
use policy_lang::eval::{ConnectionDecision, Evaluator};
use policy_lang::ir::Dest;

use crate::attribution::{Attributed, Attribution};
use crate::policy::{Active, Policy};

/// How many binaries' hashes are kept.
const FINGERPRINTS: usize = 256;

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
}

impl Decision {
    #[must_use]
    pub fn allowed(&self) -> bool {
        self.conn.allowed()
    }

    fn refused(reason: String) -> Self {
        Self {
            conn: ConnectionDecision {
                routes: Vec::new(),
                l7: Vec::new(),
                reason,
                grants: Vec::new(),
            },
            host: None,
            rule: None,
        }
    }
}

#[derive(Debug)]
pub struct Decider {
    policy: Arc<Policy>,
    attribution: Arc<Attribution>,
    hashes: Mutex<FingerprintCache>,
}

impl Decider {
    #[must_use]
    pub fn new(policy: Arc<Policy>, attribution: Arc<Attribution>) -> Self {
        Self {
            policy,
            attribution,
            hashes: Mutex::new(FingerprintCache::new(FINGERPRINTS)),
        }
    }

    /// The policy in force (swapped by a reload).
    #[must_use]
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    #[must_use]
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// Identifies the binary thread `tid` runs. The caller checks the
    /// notification is still valid afterwards.
    pub fn identify(&self, tid: u32) -> io::Result<Binary> {
        let exe = enforcer::exe_path(tid)?;
        let sha256 = if self.policy.current().pins {
            let mut cache = self
                .hashes
                .lock()
                .map_err(|_| io::Error::other("fingerprint cache poisoned"))?;
            Some(cache.fingerprint(tid)?.sha256_hex())
        } else {
            None
        };
        Ok(Binary {
            path: exe.path.to_string_lossy().into_owned(),
            sha256,
            deleted: exe.deleted,
        })
    }

    /// Decides a connection from `binary` to `ip:port` with the policy in
    /// force.
    #[must_use]
    pub fn decide(&self, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        self.decide_with(&self.policy.current(), binary, ip, port)
    }

    /// Decides a connection with the policy `active`.
    #[must_use]
    pub fn decide_with(&self, active: &Active, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        if let Some(refused) = deleted(binary) {
            return refused;
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
        if let Some(refused) = deleted(binary) {
            return refused;
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
            None => Decision::refused(format!(
                "`{host}` was never given to the sandbox as a name of `{ip}`"
            )),
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
        }
    }
}

fn deleted(binary: &Binary) -> Option<Decision> {
    binary.deleted.then(|| {
        Decision::refused(format!(
            "`{}` was deleted after it was executed; its path no longer identifies it",
            binary.path
        ))
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
        conn.reason = format!("{} (`{ip}` named for `{host}` by --resolve)", conn.reason);
    }
    conn
}

/// `file:line (name)` of a rule that allowed this binary the connection.
#[must_use]
pub fn rule_of(eval: &Evaluator, conn: &ConnectionDecision) -> Option<String> {
    eval.connection_rule(conn).map(|o| o.blame())
}
