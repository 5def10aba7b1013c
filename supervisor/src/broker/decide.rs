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

use crate::attribution::Attribution;

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
}

#[derive(Debug)]
pub struct Decider {
    eval: Evaluator,
    attribution: Arc<Attribution>,
    hashes: Option<Mutex<FingerprintCache>>,
}

impl Decider {
    #[must_use]
    pub fn new(eval: Evaluator, attribution: Arc<Attribution>) -> Self {
        let pins = eval
            .bundle()
            .enforcement
            .seccomp
            .identities
            .iter()
            .any(|i| i.binary.sha256.is_some());
        Self {
            eval,
            attribution,
            hashes: pins.then(|| Mutex::new(FingerprintCache::new(FINGERPRINTS))),
        }
    }

    #[must_use]
    pub fn evaluator(&self) -> &Evaluator {
        &self.eval
    }

    #[must_use]
    pub fn attribution(&self) -> &Attribution {
        &self.attribution
    }

    /// Identifies the binary thread `tid` runs. The caller checks the
    /// notification is still valid afterwards.
    pub fn identify(&self, tid: u32) -> io::Result<Binary> {
        let exe = enforcer::exe_path(tid)?;
        let sha256 = match &self.hashes {
            Some(cache) => {
                let mut cache = cache
                    .lock()
                    .map_err(|_| io::Error::other("fingerprint cache poisoned"))?;
                Some(cache.fingerprint(tid)?.sha256_hex())
            }
            None => None,
        };
        Ok(Binary {
            path: exe.path.to_string_lossy().into_owned(),
            sha256,
            deleted: exe.deleted,
        })
    }

    /// Decides a connection from `binary` to `ip:port`.
    #[must_use]
    pub fn decide(&self, binary: &Binary, ip: IpAddr, port: u16) -> Decision {
        let refuse = |reason: String| Decision {
            conn: ConnectionDecision {
                routes: Vec::new(),
                l7: Vec::new(),
                reason,
            },
            host: None,
            rule: None,
        };
        if binary.deleted {
            return refuse(format!(
                "`{}` was deleted after it was executed; its path no longer identifies it",
                binary.path
            ));
        }
        let sha = binary.sha256.as_deref();
        let mut first_denial: Option<Decision> = None;
        for named in self.attribution.names_for(ip) {
            let host = Some(named.name.as_str());
            let mut conn = self
                .eval
                .decide_connection(&binary.path, sha, host, Some(ip), port);
            if !conn.allowed() && named.operator {
                conn = self.operator_named(&binary.path, sha, &named.name, ip, port);
            }
            let decision = Decision {
                rule: self.rule_of(&conn),
                conn,
                host: Some(named.name),
            };
            if decision.allowed() {
                return decision;
            }
            first_denial.get_or_insert(decision);
        }
        let conn = self
            .eval
            .decide_connection(&binary.path, sha, None, Some(ip), port);
        if conn.allowed() {
            return Decision {
                rule: self.rule_of(&conn),
                conn,
                host: None,
            };
        }
        first_denial.unwrap_or(Decision {
            conn,
            host: None,
            rule: None,
        })
    }

    /// The host rules for an address the operator named for `host`.
    fn operator_named(
        &self,
        binary: &str,
        sha: Option<&str>,
        host: &str,
        ip: IpAddr,
        port: u16,
    ) -> ConnectionDecision {
        let mut conn = self
            .eval
            .decide_connection(binary, sha, Some(host), None, port);
        let routes = &self.eval.bundle().enforcement.seccomp.routes;
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

    /// `file:line (name)` of the first route that allowed the connection.
    #[must_use]
    pub fn rule_of(&self, conn: &ConnectionDecision) -> Option<String> {
        let origin = conn
            .routes
            .first()
            .and_then(|r| self.eval.bundle().provenance.routes.get(*r as usize))
            .and_then(|o| o.first())?;
        Some(if origin.rule.is_empty() {
            origin.to_string()
        } else {
            format!("{origin} ({})", origin.rule)
        })
    }
}
